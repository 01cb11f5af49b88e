"""ImageNet32-100: the first 100 classes of Downsampled ImageNet 32x32 (npz batches)."""
from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from wscat.data.sources.base import Archive, DatasetUnavailable, ImageDataset, one_line, root

NUM_CLASSES = 100
ROW = 3 * 32 * 32  # one image, channel-major RGB as in CIFAR
CHUNK = 8192       # images read at a time: memory stays at the kept images plus one chunk
TRAIN = tuple(f"train_data_batch_{i}.npz" for i in range(1, 11))
TEST = ("val_data.npz",)
ORIGIN = ('https://image-net.org/download-images ("Downsampled ImageNet 32x32": '
          "Imagenet32_train_npz.zip and Imagenet32_val_npz.zip, unzipped; login required)")


def folder(cfg: Mapping[str, Any]) -> Path:
    """The eleven npz files live in {root}/imagenet32/."""
    return root(cfg) / "imagenet32"


def _kept_labels(path: Path) -> np.ndarray:
    """The 1-based labels of one batch, -1 where the class is not among the first 100."""
    with np.load(path, allow_pickle=False) as batch:
        labels = np.asarray(batch["labels"]).reshape(-1).astype(np.int64)
    return np.where((labels >= 1) & (labels <= NUM_CLASSES), labels - 1, -1)


def _copy_kept_rows(path: Path, keep: np.ndarray, out: np.ndarray) -> None:
    """Copy the kept rows of the batch's `data` into `out`, streaming from the zip member."""
    with zipfile.ZipFile(path) as archive, archive.open("data.npy") as handle:
        version = np.lib.format.read_magic(handle)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran_order, dtype = read_header(handle)
        if dtype != np.uint8 or fortran_order or tuple(shape) != (len(keep), ROW):
            raise ValueError(f"data is {dtype} {tuple(shape)}, expected uint8 ({len(keep)}, {ROW})")
        filled = 0
        for begin in range(0, len(keep), CHUNK):
            rows = keep[begin:begin + CHUNK]
            raw = handle.read(len(rows) * ROW)
            if len(raw) != len(rows) * ROW:
                raise ValueError("data ends early")
            chunk = np.frombuffer(raw, dtype=np.uint8).reshape(len(rows), ROW)[rows]
            out[filled:filled + len(chunk)] = chunk
            filled += len(chunk)


class ImageNet32:
    """Train: the images of classes 1..100 in the ten training batches; test: their 5,000
    validation images. Labels 1..100 become 0..99."""

    def archives(self, name: str, cfg: Mapping[str, Any]) -> list[Archive]:
        return [Archive(folder(cfg) / file, origin=ORIGIN) for file in TRAIN + TEST]

    def read(self, name: str, cfg: Mapping[str, Any]) -> ImageDataset:
        paths = [folder(cfg) / file for file in TRAIN + TEST]
        labels: list[np.ndarray] = []
        path = paths[0]
        try:
            for path in paths:
                labels.append(_kept_labels(path))
            kept = [y >= 0 for y in labels]
            counts = [int(k.sum()) for k in kept]
            images = np.empty((sum(counts), ROW), dtype=np.uint8)
            start = 0
            for path, keep, count in zip(paths, kept, counts):
                _copy_kept_rows(path, keep, images[start:start + count])
                start += count
        except (OSError, EOFError, zipfile.BadZipFile, KeyError, ValueError) as error:
            raise DatasetUnavailable(
                f"dataset '{name}': {path} is not a readable Downsampled-ImageNet batch "
                f"({one_line(error)}); get it again from {ORIGIN} and put it at {path}") from error
        import torch

        train_size = sum(counts[:len(TRAIN)])
        all_labels = np.concatenate([y[k] for y, k in zip(labels, kept)])
        return ImageDataset(name, torch.from_numpy(images.reshape(-1, 3, 32, 32)),
                            torch.from_numpy(all_labels), NUM_CLASSES,
                            mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                            train_size=train_size)
