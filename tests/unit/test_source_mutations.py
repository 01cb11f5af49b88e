"""The dataset sources and `wscat add-dataset`, against hand-worked expectations where mutation
testing found them unguarded (wscat/data/sources/*.py, wscat/steps/add_dataset.py).

What is guarded, and the fact each expectation comes from:
- CIFAR (the official python format: a batch is a pickled dict whose b"data" is N rows of 3072
  uint8, the R, G and B planes of 32 x 32 one after the other, and whose labels are a list of N
  ints in 0..K-1): a batch of another shape, dtype, label count or range is refused as unreadable;
  a missing member (or a folder in its place) or key is refused, not raised as a KeyError; a
  batch pickled as anything but numpy arrays and byte strings is refused (cifar.py: "unpickles
  only what a CIFAR batch holds"); a subset keeps the official order; CIFAR-100's published
  statistics;
- digits: scikit-learn's digits.csv.gz rows are 64 pixels (8 x 8, row-major, 0..16) then the
  target; the first image is the "0" its documentation prints; pixels are scaled by 1/16; the
  statistics are the whole set's, rounded;
- ImageNet32 (the Downsampled-ImageNet npz: uint8 `data` N x 3072, 1-based `labels`): a `data`
  of another dtype, order or row count, a batch without labels and pickled labels are refused;
  the ImageNet statistics;
- npz (npz.py's docstrings): uint8 N x H x W x C, integer labels 0..K-1 below the training
  count (y_test's too), statistics from the training images in [0, 1] (all of them, not the
  first chunk), configured statistics of the wrong length refused, a configured mean kept when
  only the std is computed, num_classes must exceed every label, x_test and y_test together;
- subset (subset.py, docs/paper-scale.md): the first N training and first M test images in the
  official order, sizes up to what the source holds, refused without an official test split;
- check_dataset (its docstring) and load_dataset: reading always ends in check_dataset;
- archives: md5 (RFC 1321's test vector "abc"; recomputed when the file's size or mtime
  changes; params may write it in upper case), host_answers (port 443, False without a host or
  an answer), a download's md5 failure (torchvision raises RuntimeError) is a DatasetUnavailable,
  a present archive is never downloaded again, a download that leaves nothing is refused;
- base: to_unit's memory format, take() in [0, 1], one_line's single line;
- add-dataset (its module docstring and constants): the name pattern, the generated forms, the
  0/1 and small-scale refusals judged on the training images, MIN_CLASSES 4, MIN_PER_CLASS 6 of
  the training pool (80% of it without a test part), the summary, the blocks' numbers worked by
  hand from `blocks`' rules, insert's rules (block mappings only, comments kept, a missing last
  level added), and run's refusals: a dangling --out link, the file's mode kept, an invalid
  result never written.
"""
from __future__ import annotations

import collections
import gzip
import hashlib
import importlib.util
import io
import os
import pickle
import sys
import tarfile
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers.archives import md5, py2_dumps, write_tar
from tests.helpers.tiny import tiny_params, write_params
from wscat.config import ConfigError
from wscat.data.sources import (DatasetUnavailable, ImageDataset, archives, check_dataset,
                                load_dataset)
from wscat.data.sources.base import Archive, one_line, to_unit
from wscat.data.sources.cifar import CIFAR10, CIFAR100
from wscat.data.sources.digits import Digits
from wscat.data.sources.imagenet32 import ImageNet32
from wscat.data.sources.npz import Npz
from wscat.data.sources.subset import take_subset
from wscat.steps import add_dataset
from wscat.steps.add_dataset import NpzSummary

ROW = 3072


# --- CIFAR ------------------------------------------------------------------------------------

def _rows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, ROW), dtype=np.uint8)


def _cifar10(root: Path, batch: dict | None = None, drop: str = "", dumps=py2_dumps) -> dict:
    """cifar-10-python.tar.gz in `root`: five training batches of 2 rows (labels 0..9 in turn)
    and a test batch of 2; `batch` replaces data_batch_1, `drop` leaves a member out."""
    members: dict[str, object] = {}
    for i in range(1, 6):
        members[f"cifar-10-batches-py/data_batch_{i}"] = {
            b"data": _rows(2, i), b"labels": [2 * i - 2, 2 * i - 1]}
    members["cifar-10-batches-py/test_batch"] = {b"data": _rows(2, 9), b"labels": [3, 4]}
    if batch is not None:
        members["cifar-10-batches-py/data_batch_1"] = batch
    members.pop(f"cifar-10-batches-py/{drop}", None)
    root.mkdir(parents=True, exist_ok=True)
    path = write_tar(root / "cifar-10-python.tar.gz", members, dumps=dumps)
    return {"root": str(root), "md5": md5(path)}


@pytest.mark.parametrize("batch", [
    {b"data": _rows(2).astype(np.int64), b"labels": [0, 1]},       # not uint8
    {b"data": _rows(2)[:, :, None], b"labels": [0, 1]},            # N x 3072 x 1
    {b"data": np.zeros((2, 2 * ROW), np.uint8), b"labels": [0, 1]},  # rows of two images
    {b"data": _rows(2), b"labels": [0]},                           # 1 label for 2 images
    {b"data": _rows(2), b"labels": [0, -1]},                       # below 0..9
    {b"data": _rows(2), b"labels": [0, 10]},                       # above 0..9
    {b"labels": [0, 1]},                                           # no b"data"
], ids=["int64", "3-d", "wide-rows", "label-count", "negative", "ten", "no-data"])
def test_a_batch_outside_the_official_format_is_unreadable(tmp_path: Path, batch: dict) -> None:
    cfg = _cifar10(tmp_path, batch)
    with pytest.raises(DatasetUnavailable, match="is not a readable cifar-10-python.tar.gz"):
        CIFAR10.read("cifar10", cfg)


@pytest.mark.parametrize("folder", [False, True], ids=["absent", "a-folder"])
def test_an_archive_without_its_test_batch_is_unreadable(tmp_path: Path, folder: bool) -> None:
    cfg = _cifar10(tmp_path, drop="test_batch")
    if folder:  # the same archive with a folder where the test batch belongs
        path = tmp_path / "cifar-10-python.tar.gz"
        with tarfile.open(path) as tar:
            members = [(m, tar.extractfile(m).read()) for m in tar]
        with tarfile.open(path, "w:gz") as tar:
            for member, raw in members:
                tar.addfile(member, io.BytesIO(raw))
            info = tarfile.TarInfo("cifar-10-batches-py/test_batch")
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    with pytest.raises(DatasetUnavailable, match="no member cifar-10-batches-py/test_batch"):
        CIFAR10.read("cifar10", cfg)


def test_a_truncated_archive_is_unreadable(tmp_path: Path) -> None:
    cfg = _cifar10(tmp_path)
    path = tmp_path / "cifar-10-python.tar.gz"
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(DatasetUnavailable, match="is not a readable"):
        CIFAR10.read("cifar10", cfg)


def test_a_batch_pickled_as_another_class_is_refused(tmp_path: Path) -> None:
    """An OrderedDict reads like the batch dict, but its class has no place in a CIFAR batch."""
    batch = collections.OrderedDict([(b"data", _rows(2)), (b"labels", [0, 1])])
    cfg = _cifar10(tmp_path, batch, dumps=lambda entry: pickle.dumps(entry, protocol=2))
    with pytest.raises(DatasetUnavailable, match="has no place in a CIFAR batch"):
        CIFAR10.read("cifar10", cfg)


def test_the_published_cifar100_statistics() -> None:
    assert CIFAR100.mean == (0.5071, 0.4865, 0.4409) and CIFAR100.std == (0.2673, 0.2564, 0.2762)
    assert CIFAR100.num_classes == 100 and CIFAR10.num_classes == 10


def test_load_dataset_refuses_an_archive_of_one_class(tmp_path: Path) -> None:
    """Every read ends in check_dataset: a CIFAR archive whose batches hold one label."""
    members = {f"cifar-10-batches-py/data_batch_{i}": {b"data": _rows(1, i), b"labels": [7]}
               for i in range(1, 6)}
    members["cifar-10-batches-py/test_batch"] = {b"data": _rows(1), b"labels": [7]}
    path = write_tar(tmp_path / "cifar-10-python.tar.gz", members)
    with pytest.raises(DatasetUnavailable, match="1 class"):
        load_dataset("cifar10", {"root": str(tmp_path), "md5": md5(path)})


def test_load_dataset_takes_the_configured_subset_in_the_official_order(tmp_path: Path) -> None:
    cfg = _cifar10(tmp_path)
    data = load_dataset("cifar10", {**cfg, "subset": {"train": 3, "test": 1}})
    # first three training rows: data_batch_1's two, data_batch_2's first; the test batch's first
    expected = np.concatenate([_rows(2, 1), _rows(2, 2)[:1], _rows(2, 9)[:1]])
    assert data.train_size == 3 and data.labels.tolist() == [0, 1, 2, 3]
    assert np.array_equal(data.images.numpy().reshape(4, ROW), expected)


# --- digits -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits() -> ImageDataset:
    return Digits().read("digits", {})


def test_digits_are_sklearns_rows_of_8x8_pixels_over_16(digits: ImageDataset) -> None:
    assert digits.images.shape == (1797, 1, 8, 8) and digits.num_classes == 10
    first = (digits.images[0, 0] * 16).round().int().tolist()
    # sklearn's documentation: digits.images[0], a zero
    assert first[:3] == [[0, 0, 5, 13, 9, 1, 0, 0], [0, 0, 13, 15, 10, 15, 5, 0],
                         [0, 3, 15, 2, 0, 11, 8, 0]]
    assert digits.images[0, 0, 0, 2].item() == 5 / 16 and digits.images.max().item() == 1.0
    assert digits.labels[:10].tolist() == list(range(10))  # the file's targets start 0..9


def test_digits_statistics_are_the_whole_sets_rounded(digits: ImageDataset) -> None:
    spec = importlib.util.find_spec("sklearn")
    path = Path(list(spec.submodule_search_locations)[0], "datasets", "data", "digits.csv.gz")
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",")
    pixels = table[:, :64] / 16
    assert abs(digits.mean[0] - pixels.mean()) < 2e-3 and abs(digits.std[0] - pixels.std()) < 2e-3


# --- ImageNet32 -------------------------------------------------------------------------------

def _imagenet(root: Path) -> dict:
    """Ten training batches of one class-1 image and one class-7 image; two validation images of
    classes 2 and 3."""
    folder = root / "imagenet32"
    folder.mkdir(parents=True)
    for i in range(1, 11):
        np.savez(folder / f"train_data_batch_{i}.npz", data=_rows(2, i), labels=[1, 7])
    np.savez(folder / "val_data.npz", data=_rows(2), labels=[2, 3])
    return {"root": str(root)}


@pytest.mark.parametrize("val", [
    {"data": _rows(2).astype(np.int16)},
    {"data": np.asfortranarray(_rows(2))},
    {"data": _rows(3)},
    {"labels": None},
    {"labels": np.array([2, 3], dtype=object)},
], ids=["int16", "fortran-order", "more-rows-than-labels", "no-labels", "pickled-labels"])
def test_an_imagenet32_batch_outside_its_format_is_refused(tmp_path: Path, val: dict) -> None:
    folder = tmp_path / "imagenet32"
    cfg = _imagenet(tmp_path)
    arrays = {"data": _rows(2), "labels": [2, 3]} | val
    np.savez(folder / "val_data.npz", **{k: v for k, v in arrays.items() if v is not None})
    with pytest.raises(DatasetUnavailable, match="val_data.npz is not a readable"):
        ImageNet32().read("imagenet32", cfg)


def test_imagenet32_normalises_by_imagenets_statistics(tmp_path: Path) -> None:
    data = ImageNet32().read("imagenet32", _imagenet(tmp_path))
    assert data.mean == (0.485, 0.456, 0.406) and data.std == (0.229, 0.224, 0.225)
    assert data.train_size == 20 and data.labels.tolist() == [0, 6] * 10 + [1, 2]


# --- npz --------------------------------------------------------------------------------------

def _npz(path: Path, **arrays: object) -> dict:
    """An npz of 8 grey 4x4 training images (classes 0..3 twice) and 4 test images."""
    rng = np.random.default_rng(3)
    base = {"x_train": rng.integers(0, 256, (8, 4, 4, 1), dtype=np.uint8),
            "y_train": np.arange(8) % 4,
            "x_test": rng.integers(0, 256, (4, 4, 4, 1), dtype=np.uint8),
            "y_test": np.arange(4)}
    np.savez(path, **{k: v for k, v in (base | arrays).items() if v is not None})
    return {"source": "npz", "path": str(path)}


@pytest.mark.parametrize("arrays, words", [
    ({"y_train": (np.arange(8) % 4).astype(np.float64)}, "expected 8 integer labels"),
    ({"y_train": np.array([0, 1, 2, 3, 0, 1, 2, -1])}, "negative labels"),
    ({"y_train": np.array([0, 1, 2, 3, 0, 1, 2, 8])}, "holds label 8"),  # 8 training images
    ({"x_test": None}, "no x_test beside y_test"),
], ids=["float-labels", "negative", "label-equal-to-the-training-count", "y-test-alone"])
def test_npz_content_outside_the_format_is_refused(tmp_path: Path, arrays: dict,
                                                   words: str) -> None:
    cfg = _npz(tmp_path / "mine.npz", **arrays)
    with pytest.raises(DatasetUnavailable, match=words):
        Npz().read("mine", cfg)


def test_npz_test_labels_are_bounded_by_the_training_count(tmp_path: Path) -> None:
    """4 test images may hold label 5: the bound is the 8 training images (and num_classes)."""
    cfg = _npz(tmp_path / "mine.npz", y_train=np.array([0, 1, 2, 3, 4, 5, 0, 1]),
               y_test=np.array([5, 4, 0, 1]))
    data = Npz().read("mine", cfg)
    assert data.num_classes == 6 and data.labels.tolist()[-4:] == [5, 4, 0, 1]


def test_npz_num_classes_must_exceed_every_label(tmp_path: Path) -> None:
    cfg = _npz(tmp_path / "mine.npz")
    with pytest.raises(DatasetUnavailable, match="label 3 but num_classes = 3"):
        Npz().read("mine", {**cfg, "num_classes": 3})


def test_npz_four_channels_of_height_three_are_channel_last(tmp_path: Path) -> None:
    """N x 3 x 5 x 4 is 3 x 5 RGBA: the last axis (4) is not more than 4 channels."""
    x = np.arange(8 * 60, dtype=np.uint8).reshape(8, 3, 5, 4)
    cfg = _npz(tmp_path / "mine.npz", x_train=x, x_test=x[:4])
    data = Npz().read("mine", cfg)
    assert data.image_shape == (4, 3, 5) and data.images[0, :, 0, 1].tolist() == [4, 5, 6, 7]


def test_npz_statistics_cover_every_training_image(tmp_path: Path) -> None:
    """2000 one-pixel images (more than a chunk of 1024): the first 1500 are 0, the rest 255,
    so the mean is 500/2000 = 0.25 and the std sqrt(0.25 - 0.0625) = sqrt(0.1875)."""
    x = np.zeros((2000, 1, 1, 1), np.uint8)
    x[1500:] = 255
    cfg = _npz(tmp_path / "mine.npz", x_train=x, y_train=np.arange(2000) % 4,
               x_test=x[:4], y_test=np.arange(4))
    data = Npz().read("mine", cfg)
    assert data.mean == pytest.approx((0.25,)) and data.std == pytest.approx((0.1875 ** 0.5,))


def test_npz_configured_statistics(tmp_path: Path) -> None:
    """A configured mean is kept when the std is computed (training pixels 0 and 255 in equal
    number: std 0.5); a mean of 2 values for one channel is refused."""
    x = np.zeros((8, 2, 2, 1), np.uint8)
    x[::2] = 255
    cfg = _npz(tmp_path / "mine.npz", x_train=x, x_test=x[:4])
    data = Npz().read("mine", {**cfg, "mean": [0.1]})
    assert data.mean == (0.1,) and data.std == pytest.approx((0.5,))
    with pytest.raises(DatasetUnavailable, match="mean has 2 values for 1 channels"):
        Npz().read("mine", {**cfg, "mean": [0.1, 0.2]})


# --- subset -----------------------------------------------------------------------------------

def _indexed(train_size: int | None = 6, n: int = 10) -> ImageDataset:
    """Image i is filled with the value i; labels i % 3."""
    images = torch.arange(n, dtype=torch.float32)[:, None, None, None].expand(n, 1, 2, 2).clone()
    return ImageDataset("x", images, torch.arange(n) % 3, 3, (0.5,), (0.5,), train_size)


def _ids(data: ImageDataset) -> list[int]:
    return data.images[:, 0, 0, 0].long().tolist()


def test_subset_takes_the_first_training_and_first_test_images() -> None:
    cut = take_subset(_indexed(), {"train": 2, "test": 3}, "x")
    assert _ids(cut) == [0, 1, 6, 7, 8] and cut.labels.tolist() == [0, 1, 0, 1, 2]
    assert cut.train_size == 2
    tests_only = take_subset(_indexed(), {"test": 1}, "x")  # no `train`: all six
    assert _ids(tests_only) == [0, 1, 2, 3, 4, 5, 6] and tests_only.train_size == 6


def test_subset_sizes_up_to_what_the_source_holds() -> None:
    assert _ids(take_subset(_indexed(), {"train": 6, "test": 4}, "x")) == list(range(10))
    with pytest.raises(DatasetUnavailable, match="subset.test = 5 but the source holds only 4"):
        take_subset(_indexed(), {"test": 5}, "x")
    with pytest.raises(DatasetUnavailable, match="official test split"):
        take_subset(_indexed(None), {"train": 2}, "x")
    whole = _indexed(None)
    assert take_subset(whole, {}, "x") is whole  # an empty subset: nothing to cut


# --- check_dataset ----------------------------------------------------------------------------

def _varied(**change: object) -> ImageDataset:
    images = torch.rand(8, 3, 2, 2, generator=torch.Generator().manual_seed(0))
    fields = dict(name="v", images=images, labels=torch.arange(8) % 2, num_classes=2,
                  mean=(0.5,) * 3, std=(0.25,) * 3, train_size=None) | change
    return ImageDataset(**fields)


def test_check_dataset_refusals_its_docstring_lists() -> None:
    check_dataset(_varied())
    with pytest.raises(DatasetUnavailable, match="for 7 labels, expected N x C x H x W"):
        check_dataset(_varied(labels=torch.arange(7) % 2))
    with pytest.raises(DatasetUnavailable, match="at least two"):
        check_dataset(_varied(num_classes=1))
    with pytest.raises(DatasetUnavailable, match="3 finite values each"):
        check_dataset(_varied(mean=(0.5,)))
    constant_in_training = _varied(train_size=4).images.clone()
    constant_in_training[:4, 1] = 0.5  # varies only among the test images
    with pytest.raises(DatasetUnavailable, match="channel 1 has the same value"):
        check_dataset(_varied(images=constant_in_training, train_size=4))


# --- archives ---------------------------------------------------------------------------------

def test_md5_of_reads_the_whole_file_and_follows_changes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert archives.md5_of(path, chunk=1) == "900150983cd24fb0d6963f7d28e17f72"  # RFC 1321
    stamp = path.stat().st_mtime_ns
    path.write_bytes(b"abd")  # same size, a new mtime
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    assert archives.md5_of(path, chunk=1) == hashlib.md5(b"abd").hexdigest()
    path.write_bytes(b"abcd")  # another size, the same mtime
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    assert archives.md5_of(path, chunk=1) == hashlib.md5(b"abcd").hexdigest()


def test_an_md5_written_in_upper_case_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    archives.verify("mine", Archive(path, "here", md5="900150983CD24FB0D6963F7D28E17F72"))


def test_host_answers_probes_port_443(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    class Open:
        def __enter__(self) -> Open:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def connect(address: tuple[str, int], timeout: float) -> Open:
        asked.append(address)
        if address[0] == "silent.example":
            raise OSError("no route to host")
        return Open()

    monkeypatch.setattr(archives.socket, "create_connection", connect)
    assert archives.host_answers("") is False and asked == []
    assert archives.host_answers("https://silent.example/x.tar.gz") is False
    assert archives.host_answers("https://up.example/x.tar.gz") is True
    assert asked == [("silent.example", 443), ("up.example", 443)]


def _fake_torchvision(monkeypatch: pytest.MonkeyPatch, download_url) -> None:
    """torchvision.datasets.utils.download_url replaced without importing torchvision."""
    utils = types.ModuleType("torchvision.datasets.utils")
    utils.download_url = download_url
    for name, module in [("torchvision", types.ModuleType("torchvision")),
                         ("torchvision.datasets", types.ModuleType("torchvision.datasets")),
                         ("torchvision.datasets.utils", utils)]:
        monkeypatch.setitem(sys.modules, name, module)


def test_a_download_failing_its_md5_is_one_line_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def corrupt(url: str, root: str, filename: str, md5: str | None = None) -> None:
        Path(root, filename).write_bytes(b"half")
        raise RuntimeError("File not found or corrupted.")  # torchvision's md5 failure

    _fake_torchvision(monkeypatch, corrupt)
    archive = Archive(tmp_path / "raw" / "a.tar.gz", "https://h/a", url="https://h/a", md5="0" * 32)
    with pytest.raises(DatasetUnavailable, match="download failed: RuntimeError"):
        archives.fetch("mine", [archive], download=True)
    assert list(tmp_path.iterdir()) == []


def test_fetch_downloads_only_what_is_missing_and_checks_it_arrived(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    present = tmp_path / "a.tar.gz"
    present.write_bytes(b"abc")
    fetched = []
    monkeypatch.setattr(archives, "_download", lambda name, archive: fetched.append(archive))
    archives.fetch("mine", [Archive(present, "h", url="https://h/a")], download=True)
    assert fetched == []
    absent = Archive(tmp_path / "b.tar.gz", "h", url="https://h/b")
    with pytest.raises(DatasetUnavailable, match="missing"):
        archives.fetch("mine", [absent], download=True)  # the download left nothing
    assert fetched == [absent]


# --- base -------------------------------------------------------------------------------------

def test_to_unit_take_and_one_line() -> None:
    x = torch.full((2, 3, 4, 4), 51, dtype=torch.uint8)
    assert to_unit(x, channels_last=True).is_contiguous(memory_format=torch.channels_last)
    assert to_unit(x).is_contiguous() and to_unit(x).dtype == torch.float32
    data = ImageDataset("x", x, torch.tensor([0, 1]), 2, (0.5,) * 3, (0.5,) * 3)
    images, labels = data.take([1], torch.device("cpu"))
    assert images.dtype == torch.float32 and images.max().item() == pytest.approx(0.2)
    assert labels.tolist() == [1]
    assert one_line(ValueError("a\nb  c")) == "ValueError: a b c"


# --- add-dataset ------------------------------------------------------------------------------

def _grey(n_train: int, n_test: int, classes: int = 4, top: int = 255) -> dict[str, np.ndarray]:
    """8x8 grey images with pixels up to `top`, labels cycling through the classes."""
    x = np.random.default_rng(0).integers(0, top + 1, (n_train + n_test, 8, 8, 1), dtype=np.uint8)
    y = np.arange(n_train + n_test) % classes
    parts = {"x_train": x[:n_train], "y_train": y[:n_train]}
    return parts | ({"x_test": x[n_train:], "y_test": y[n_train:]} if n_test else {})


def _inspect(tmp_path: Path, **arrays: np.ndarray) -> NpzSummary:
    np.savez(tmp_path / "d.npz", **arrays)
    return add_dataset.inspect("mine", tmp_path / "d.npz")


def test_inspect_counts_the_training_pool(tmp_path: Path) -> None:
    assert _inspect(tmp_path, **_grey(24, 8)) == NpzSummary(
        train=24, test=8, shape=(1, 8, 8), classes=4, min_per_class=6, pool=24)
    with pytest.raises(ValueError, match="class 0 has 5 training images"):
        _inspect(tmp_path, **_grey(20, 8))
    # no test part: 20% of each class is held out (8 -> 8 - 2 = 6 stay to split); a class of 6
    # keeps 5 or fewer, too few
    assert _inspect(tmp_path, **_grey(32, 0)).min_per_class == 6
    assert _inspect(tmp_path, **_grey(32, 0)).pool == 24  # 4 classes x 6
    # uneven classes: 10 0s (2 held out) and 7 of each other class (round(1.4) = 1 held out)
    uneven = _grey(31, 0)
    uneven["y_train"] = np.array([0] * 10 + [1, 2, 3] * 7)
    assert _inspect(tmp_path, **uneven).pool == 8 + 3 * 6  # not 31 - round(6.2) = 25
    with pytest.raises(ValueError, match="class 0 has [0-5] training images"):
        _inspect(tmp_path, **_grey(24, 0))


def test_inspect_refuses_what_the_split_cannot_use(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="3 classes"):
        _inspect(tmp_path, **_grey(24, 6, classes=3))
    gap = _grey(32, 8)
    gap["y_train"] = np.where(gap["y_train"] == 2, 4, gap["y_train"])  # classes 0, 1, 3, 4
    gap["y_test"] = np.where(gap["y_test"] == 2, 4, gap["y_test"])
    with pytest.raises(ValueError, match="the training images have no class 2"):
        _inspect(tmp_path, **gap)
    with pytest.raises(ValueError, match="all 0 or 1"):
        _inspect(tmp_path, **_grey(24, 8, top=1))
    dim_training = _grey(24, 8, top=20)
    dim_training["x_test"][:] = 255  # judged by the training pixels only
    with pytest.raises(ValueError, match="brightest pixel is 20 of 255"):
        _inspect(tmp_path, **dim_training)
    with pytest.raises(FileNotFoundError, match="give the .npz to add"):
        add_dataset.inspect("mine", tmp_path / "none.npz")


MT = {"objective": "mean_teacher", "teacher_decay": 0.99, "teacher_decay_late": 0.999,
      "rampup_epochs": 30}


def _blocks(summary: NpzSummary, **params: dict) -> dict[str, list[str]]:
    base = {"models": {"other": {}, "cnn": {}}, "methods": {"mt": MT}} | params
    return add_dataset.blocks("mine", "d.npz", "0" * 32, summary, base)


def _value(block: list[str], key: str) -> str:
    [line] = [line for line in block if line.strip().startswith(f"{key}:")]
    return line.split(":", 1)[1].split("#")[0].strip()


def test_blocks_numbers_worked_by_hand() -> None:
    # CIFAR-10's size: 391 steps at batch 128, 1 - 1/391 = 0.997 above the 0.995 cap; a class
    # of 5000 -> 500 labelled; 32x32 -> shift 4; 100 labeler epochs keep methods.mt's ramp-up
    big = _blocks(NpzSummary(50000, 10000, (3, 32, 32), 10, 5000, 50000))
    assert _value(big["training"], "ema_decay") == "0.995"
    # an epoch is the pool less validation: min(int(0.2 x 5000), 2000) = 1000 -> 49000 images,
    # ceil(49000 / 128) = 383 steps
    assert "383 steps an epoch at batch 128 on 49000 training images" in "\n".join(big["training"])
    assert _value(big["datasets"], "labelled") == "5000"
    assert _value(big["experiments"], "model") == "cnn"  # cnn, though listed second
    assert big["methods.mt.per_dataset"][-1] == (
        "mine: {teacher_decay: 0.99, teacher_decay_late: 0.999}")
    # no test part: 60 images -> a pool of 48; 6 a class -> max(5, 0) = 5 labelled a class, 20
    # labelled, validation int(0.2 x 20) // 4 = 1 a class -> 44 to train on, one batch of 44
    # (ceil 44/44 = 1 step); 16 high and 40 wide -> shift round(16/8) = 2
    small = _blocks(NpzSummary(60, 0, (1, 16, 40), 4, 6, 48))
    assert _value(small["training"], "batch_size") == "44"
    assert "1 steps an epoch at batch 44 on 44 training images" in "\n".join(small["training"])
    assert _value(small["datasets"], "labelled") == "20"
    assert _value(small["datasets"], "crop_padding") == "2"
    assert _value(small["training"], "ema_decay") == "0.9"  # 10 steps at least
    # 4x4 images: round(4/8) = 0, but a shift of 1 at least
    assert _value(_blocks(NpzSummary(60, 0, (1, 4, 4), 4, 6, 48))["datasets"], "crop_padding") == "1"


def test_blocks_without_a_mean_teacher_have_no_teacher_entry() -> None:
    summary = NpzSummary(400, 100, (3, 32, 32), 4, 100, 400)
    assert "methods.mt.per_dataset" not in _blocks(summary, methods={"standard": {}})
    other = {"mt": {"objective": "trades"}}
    assert "methods.mt.per_dataset" not in _blocks(summary, methods=other)
    assert _value(_blocks(summary, methods={"standard": {}})["experiments"],
                  "methods") == "[standard]"


def test_insert_keeps_comments_and_adds_only_the_last_missing_level() -> None:
    text = "datasets:  # mine\n  a: 1\n  # about a\nmethods:\n  mt:\n    x: 1\n"
    assert add_dataset.insert(text, "datasets", ["b: 2"]) == (
        "datasets:  # mine\n  a: 1\n  # about a\n  b: 2\nmethods:\n  mt:\n    x: 1\n")
    assert add_dataset.insert(text, "methods.mt.per_dataset", ["m: {}"]).endswith(
        "    x: 1\n    per_dataset:\n      m: {}\n")
    assert add_dataset.insert("datasets:\n  a: 1", "datasets", ["b: 2"]) == (
        "datasets:\n  a: 1\n  b: 2\n")
    assert add_dataset.insert("datasets:\n\n  a: 1\n", "datasets", ["b: 2"]) == (
        "datasets:\n\n  a: 1\n  b: 2\n")  # indented as the entries, not the blank line
    with pytest.raises(ConfigError, match="`training:` is not a block mapping"):
        add_dataset.insert(text, "training", ["b: 2"])
    nested = "methods:\n  mt:\n    y: 1\n  other:\n    mt:\n      q: 1\n"
    assert add_dataset.insert(nested, "methods.mt", ["z: 3"]) == (
        "methods:\n  mt:\n    y: 1\n    z: 3\n  other:\n    mt:\n      q: 1\n")


def test_names_add_dataset_refuses_or_takes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a dataset name"):
        add_dataset.run(tmp_path / "params.yaml", "Mine", tmp_path / "d.npz")
    add_dataset.generated_form("mine-unlabelled")  # no percent: not a sweep's name
    with pytest.raises(ValueError, match="<dataset>-full"):
        add_dataset.generated_form("mine-full")
    with pytest.raises(ValueError, match="unlabelled-data sweep"):
        add_dataset.generated_form("mine-unlabelled20")


@pytest.fixture(scope="module")
def tiny_params_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_params(tmp_path_factory.mktemp("p") / "params.yaml", tiny_params()).read_text()


def test_run_keeps_the_mode_and_refuses_a_dangling_out(tmp_path: Path,
                                                       tiny_params_text: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(tiny_params_text)
    np.savez(tmp_path / "d.npz", **_grey(40, 8))
    os.symlink(tmp_path / "elsewhere.yaml", tmp_path / "link.yaml")
    with pytest.raises(OSError, match="exists"):
        add_dataset.run(params, "mine", tmp_path / "d.npz", out=tmp_path / "link.yaml")
    assert not (tmp_path / "elsewhere.yaml").exists()
    os.chmod(params, 0o600)
    add_dataset.run(params, "mine", tmp_path / "d.npz", out=tmp_path / "OUT.YAML")
    add_dataset.run(params, "mine", tmp_path / "d.npz")
    assert params.stat().st_mode & 0o777 == 0o600
    assert yaml.safe_load(params.read_text())["datasets"]["mine"]["md5"] == md5(
        tmp_path / "d.npz")


def test_run_writes_nothing_that_fails_validation(tmp_path: Path, tiny_params_text: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(tiny_params_text)
    np.savez(tmp_path / "d.npz", **_grey(40, 8))
    real = add_dataset.blocks

    def bad_epochs(*args: object) -> dict[str, list[str]]:
        made = real(*args)
        made["training"] = [line.replace("epochs: 40", "epochs: -1") for line in made["training"]]
        return made

    monkeypatch.setattr(add_dataset, "blocks", bad_epochs)
    with pytest.raises(ConfigError):
        add_dataset.run(params, "mine", tmp_path / "d.npz")
    assert params.read_text() == tiny_params_text
