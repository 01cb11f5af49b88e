"""Any image classification set as one .npz: uint8 x_train, x_test (N x H x W x C) and labels."""
from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from wscat.data.sources.base import Archive, DatasetUnavailable, ImageDataset
from wscat.errors import npz_problem
from wscat.file_kinds import DATASET_SAVE, is_npy, npy_line

KEYS = ("x_train", "y_train", "x_test", "y_test")
TEST_KEYS = ("x_test", "y_test")  # optional together: without them test_fraction holds one out
SAVED = "x_train, y_train (and x_test, y_test), as np.savez writes it"
ORIGIN = "your own export (one .npz with uint8 x_train, x_test as N x H x W x C and integer " \
         "y_train, y_test in 0..K-1)"


def _path(name: str, cfg: Mapping[str, Any]) -> Path:
    if not cfg.get("path"):
        raise DatasetUnavailable(f"dataset '{name}': source npz needs datasets.{name}.path, "
                                 "the .npz file to read")
    return Path(cfg["path"])


def _absent_line(absent: list[str]) -> str:
    """What an archive lacks, the required keys told from the optional pair."""
    required = [key for key in absent if key not in TEST_KEYS]
    keys = (f"expected keys {', '.join(k for k in KEYS if k not in TEST_KEYS)} (required) and "
            f"{', '.join(TEST_KEYS)} (optional, together: the test part; without both, "
            "test_fraction holds one out)")
    if required:
        return f"no {', '.join(required)}; {keys}"
    (given,) = [key for key in TEST_KEYS if key not in absent]
    return f"no {absent[0]} beside {given}; {keys}"


class _Refused(Exception):
    """A problem with the npz's content that its own line says in full (not np.load's words)."""


def _array(data: Any, key: str) -> np.ndarray:
    """data[key], or one line when it holds Python objects (dtype=object: np.savez of a list of
    images of different sizes), which only a pickle load reads, and wscat loads no pickles."""
    try:
        return data[key]
    except ValueError as error:
        if "allow_pickle" not in str(error):
            raise
        what, fix = ((", e.g. images of different sizes", "resize or crop the images to one "
                      "size and save them") if key.startswith("x_") else
                     ("", "save the labels as integers"))
        raise _Refused(f"its {key} holds Python objects (dtype=object{what}), which only a "
                       f"pickle load reads, and wscat loads no pickles; {fix}"
                       f" with {DATASET_SAVE}") from error


def _to_uint8(x: np.ndarray) -> str:
    """How to store images of another dtype as uint8, judged by their range."""
    numeric = x.dtype != np.bool_ and (np.issubdtype(x.dtype, np.integer)
                                        or np.issubdtype(x.dtype, np.floating))
    top = float(np.nanmax(x)) if numeric and x.size and not np.isnan(x).all() else None
    if top is not None and 0 <= np.nanmin(x) and top <= 1 and np.issubdtype(x.dtype, np.floating):
        return "for pixels in [0, 1] store (x * 255).round().astype(np.uint8)"
    if top is not None and 0 <= np.nanmin(x) and top <= 255:
        return "for pixels in 0..255 store x.round().astype(np.uint8)"
    if x.dtype == np.bool_:
        return "for black-and-white images store x.astype(np.uint8) * 255"
    return "rescale the pixels to 0..255 and store them as uint8"


def _channels_first(x: np.ndarray, key: str) -> np.ndarray:
    """uint8 N x H x W x C (or N x H x W, grey) -> N x C x H x W."""
    if x.dtype != np.uint8:
        raise ValueError(f"{key} is {x.dtype}, expected uint8 (pixel = value / 255); "
                         f"{_to_uint8(x)}")
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4:
        raise ValueError(f"{key} has shape {x.shape}, expected N x H x W x C")
    if x.shape[-1] > 4 and x.shape[1] in (1, 3, 4):
        raise ValueError(f"{key} has shape {x.shape}: that looks channel-first (N x C x H x W); "
                         "store it as N x H x W x C, e.g. np.transpose(x, (0, 2, 3, 1))")
    return x.transpose(0, 3, 1, 2)


# How to renumber labels to class indices 0..K-1 (also `wscat add-dataset`'s line for a gap).
RENUMBER = ("classes, y_train = np.unique(y_train, return_inverse=True), then y_test = "
            "np.searchsorted(classes, y_test)")


def _labels_fix(y: np.ndarray, key: str, n: int) -> str:
    """What to do with labels that are no vector of `n` integers."""
    if y.ndim == 2 and y.shape[0] == n and y.shape[1] > 1:
        return f"one label an image, e.g. {key}.argmax(axis=1) for one-hot labels"
    if y.ndim > 1 and y.size == n:
        return f"one label an image as a flat vector, e.g. {key}.ravel()"
    if y.ndim != 1 or len(y) != n:
        images = "x_" + key[2:]
        return f"give one label for each of the {n} images of {images}"
    return f"store class indices 0..K-1, e.g. {RENUMBER}"


def _labels(y: np.ndarray, key: str, n: int, n_train: int) -> np.ndarray:
    """`n` integer labels as int64. Every class 0..K-1 needs a training image, so a label must be
    below `n_train` (the training images' count); checked before the cast, which would wrap a
    uint64 label of 2**63 or more to a negative one."""
    if not np.issubdtype(y.dtype, np.integer) or y.shape != (n,):
        raise ValueError(f"{key} is {y.dtype} {y.shape}, expected {n} integer labels; "
                         f"{_labels_fix(y, key, n)}")
    if n and y.min() < 0:
        raise ValueError(f"{key} has negative labels; labels run 0..K-1")
    if n and int(y.max()) >= n_train:
        raise ValueError(f"{key} holds label {int(y.max())}, not a class index: labels run 0..K-1 "
                         f"and every class needs training images, of which there are {n_train}; "
                         "renumber the labels 0..K-1")
    return y.astype(np.int64)


def _channel_stats(x: np.ndarray, chunk: int = 1024) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of uint8 N x C x H x W images in [0,1] units, a chunk at a time."""
    total = np.zeros(x.shape[1])
    squares = np.zeros(x.shape[1])
    for begin in range(0, len(x), chunk):
        part = x[begin:begin + chunk].astype(np.float64) / 255.0
        total += part.sum(axis=(0, 2, 3))
        squares += (part ** 2).sum(axis=(0, 2, 3))
    count = x.shape[0] * x.shape[2] * x.shape[3]
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean ** 2, 0.0))
    return tuple(float(m) for m in mean), tuple(float(s) for s in std)


def _statistic(cfg: Mapping[str, Any], key: str, channels: int) -> tuple[float, ...] | None:
    value = cfg.get(key)
    if value is None:
        return None
    if len(value) != channels:
        raise ValueError(f"{key} has {len(value)} values for {channels} channels")
    return tuple(float(v) for v in value)


class Npz:
    """Training images first, then test images; statistics from the training images unless set."""

    def archives(self, name: str, cfg: Mapping[str, Any]) -> list[Archive]:
        md5 = cfg.get("md5")
        return [Archive(_path(name, cfg), origin=ORIGIN, md5=str(md5) if md5 else None,
                        changed=f"; or, if you changed it on purpose, update or delete the md5 "
                                f"line of datasets.{name} in the params file")]

    def read(self, name: str, cfg: Mapping[str, Any]) -> ImageDataset:
        path = _path(name, cfg)
        if is_npy(path):  # np.load would return its one array, not an archive of named arrays
            raise DatasetUnavailable(f"dataset '{name}': {npy_line(path)}")
        try:
            # np.load opens no file of its own: one it opened stays open when the zip is cut short
            with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
                absent = [key for key in KEYS if key not in data.files]
                # No test part at all: datasets.<name>.test_fraction holds one out (wscat split).
                no_test = set(absent) == set(TEST_KEYS)
                if absent and not no_test:
                    raise ValueError(_absent_line(absent))
                x_train = _channels_first(_array(data, "x_train"), "x_train")
                if not x_train.size:  # before the statistics, which would divide by 0
                    raise ValueError(f"x_train is empty (shape {data['x_train'].shape}); store "
                                     "the training images there, N x H x W x C with N, H, W > 0")
                y_train = _labels(_array(data, "y_train"), "y_train", len(x_train), len(x_train))
                if no_test:
                    x_test, y_test = x_train[:0], y_train[:0]
                else:
                    x_test = _channels_first(_array(data, "x_test"), "x_test")
                    y_test = _labels(_array(data, "y_test"), "y_test", len(x_test), len(x_train))
                    if not len(x_test):  # an evaluation of 0 images has no accuracy
                        raise ValueError(f"x_test is empty (shape {data['x_test'].shape}); "
                                         "store the test images there, or drop x_test and "
                                         "y_test and a stratified test_fraction is held out")
            if x_train.shape[1:] != x_test.shape[1:]:
                raise ValueError(f"x_train images are C x H x W = {x_train.shape[1:]} but x_test "
                                 f"images are {x_test.shape[1:]}")
            labels = np.concatenate([y_train, y_test])
            num_classes = int(cfg.get("num_classes") or (labels.max(initial=-1) + 1))
            if labels.max(initial=-1) >= num_classes:
                raise ValueError(f"label {labels.max()} but num_classes = {num_classes}")
            channels = x_train.shape[1]
            mean, std = _statistic(cfg, "mean", channels), _statistic(cfg, "std", channels)
            if mean is None or std is None:
                computed = _channel_stats(x_train)
                mean, std = mean or computed[0], std or computed[1]
        except _Refused as error:
            raise DatasetUnavailable(f"dataset '{name}': {path} is not a usable npz dataset: "
                                     f"{error}") from error
        except zipfile.BadZipFile as error:  # np.load saw the zip header: the rest is missing
            raise DatasetUnavailable(f"dataset '{name}': {path} is not a usable npz dataset: it "
                                     "starts as a zip archive but its end is missing or damaged "
                                     f"({error}), as after an interrupted copy or save; copy or "
                                     "save it again") from error
        except (OSError, EOFError, ValueError, TypeError) as error:
            # No zip archive at all (np.load refused it): say what to give instead.
            todo = "" if zipfile.is_zipfile(path) else f"; pass your .npz of {SAVED}"
            raise DatasetUnavailable(f"dataset '{name}': {path} is not a usable npz dataset "
                                     f"({npz_problem(error, path)}){todo}") from error
        import torch

        images = np.ascontiguousarray(np.concatenate([x_train, x_test]))
        return ImageDataset(name, torch.from_numpy(images), torch.from_numpy(labels), num_classes,
                            mean, std, train_size=None if no_test else len(x_train))
