"""Dataset sources on small archives built here in the official formats; no network, no real data."""
import os
import pickle
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch

from wscat.data import (DatasetUnavailable, archive_status, as_unit_float, fetch_dataset,
                        load_dataset, make_split, raw_files)
from wscat.data.sources import archives, imagenet32

from tests.helpers.archives import md5, write_tar

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)


def _set_pixel(rows: np.ndarray, index: int, row: int, col: int, rgb: tuple[int, int, int]) -> None:
    for channel, value in enumerate(rgb):  # channel-major: all R, then all G, then all B
        rows[index, channel * 1024 + row * 32 + col] = value


@pytest.fixture(scope="module")
def cifar10(tmp_path_factory):
    """Five training batches of 10 images (one a class) and a test batch of 20."""
    root = tmp_path_factory.mktemp("cifar10")
    rng = np.random.default_rng(0)
    members: dict[str, object] = {}
    for i in range(1, 6):
        data = _rows(rng, 10)
        if i == 1:
            _set_pixel(data, 0, 2, 5, (200, 100, 50))
        members[f"cifar-10-batches-py/data_batch_{i}"] = {
            b"batch_label": b"training batch", b"data": data,
            b"labels": [int(c) for c in rng.permutation(10)], b"filenames": [b"x.png"] * 10}
    test = _rows(rng, 20)
    _set_pixel(test, 3, 31, 0, (7, 8, 9))
    members["cifar-10-batches-py/test_batch"] = {b"data": test, b"labels": list(range(10)) * 2}
    members["cifar-10-batches-py/batches.meta"] = {b"label_names": [b"airplane"] * 10}
    path = write_tar(root / "cifar-10-python.tar.gz", members)
    return {"root": str(root), "md5": md5(path)}, members


def test_cifar10_reads_batches_in_order_with_pixels_in_place(cifar10):
    cfg, members = cifar10
    data = load_dataset("cifar10", cfg)
    assert data.name == "cifar10" and data.num_classes == 10 and data.train_size == 50
    assert data.images.shape == (70, 3, 32, 32) and data.images.dtype == torch.uint8
    assert data.labels.dtype == torch.int64
    expected = np.concatenate([members[f"cifar-10-batches-py/data_batch_{i}"][b"labels"]
                               for i in range(1, 6)] + [list(range(10)) * 2])
    assert data.labels.tolist() == expected.tolist()
    assert data.images[0, :, 2, 5].tolist() == [200, 100, 50]
    assert data.images[50 + 3, :, 31, 0].tolist() == [7, 8, 9]
    assert data.mean == (0.4914, 0.4822, 0.4465) and data.std == (0.2023, 0.1994, 0.2010)


def test_configured_name_picks_its_source(cifar10):
    cfg, _ = cifar10
    data = load_dataset("cifar10_tiny", {**cfg, "source": "cifar10"})
    assert data.name == "cifar10_tiny" and data.train_size == 50
    assert raw_files("cifar10_tiny", {**cfg, "source": "cifar10"}) == [
        Path(cfg["root"]) / "cifar-10-python.tar.gz"]
    with pytest.raises(ValueError, match="unknown source 'svhn'"):
        load_dataset("svhn")


def test_md5_mismatch_is_one_line_naming_file_and_url(cifar10):
    cfg, _ = cifar10
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("cifar10", {"root": cfg["root"]})  # the real archive's md5 is the default
    message = str(caught.value)
    assert "\n" not in message and "md5" in message and "c58f30108f718f92721af3b95e74349a" in message
    assert str(Path(cfg["root"]) / "cifar-10-python.tar.gz") in message and CIFAR10_URL in message


def test_missing_archive_is_one_line_saying_where_to_get_and_put_it(tmp_path):
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("cifar10", {"root": str(tmp_path)})
    message = str(caught.value)
    path = str(tmp_path / "cifar-10-python.tar.gz")
    assert "\n" not in message and f"missing {path}" in message
    assert CIFAR10_URL in message and f"put it at {path}" in message and "download: true" in message
    assert isinstance(caught.value, ValueError)


def test_only_an_archive_of_batches_is_unpickled(tmp_path):
    class Payload:
        def __reduce__(self):
            return (os.getcwd, ())

    path = write_tar(tmp_path / "cifar-10-python.tar.gz",
                      {"cifar-10-batches-py/data_batch_1": Payload()}, dumps=pickle.dumps)
    with pytest.raises(DatasetUnavailable, match="not a readable"):
        load_dataset("cifar10", {"root": str(tmp_path), "md5": md5(path)})
    path.write_bytes(b"not a tar")
    with pytest.raises(DatasetUnavailable, match="not a readable") as caught:
        load_dataset("cifar10", {"root": str(tmp_path), "md5": md5(path)})
    assert "\n" not in str(caught.value)


def test_cifar100_uses_fine_labels(tmp_path):
    rng = np.random.default_rng(1)
    train, test = _rows(rng, 30), _rows(rng, 10)
    _set_pixel(train, 29, 0, 31, (1, 2, 3))
    fine_train, fine_test = [int(v) for v in rng.integers(0, 100, 30)], list(range(90, 100))
    path = write_tar(tmp_path / "cifar-100-python.tar.gz", {
        "cifar-100-python/meta": {b"fine_label_names": [b"apple"] * 100},
        "cifar-100-python/train": {b"data": train, b"fine_labels": fine_train,
                                   b"coarse_labels": [19] * 30},
        "cifar-100-python/test": {b"data": test, b"fine_labels": fine_test,
                                  b"coarse_labels": [19] * 10}})
    data = load_dataset("cifar100", {"root": str(tmp_path), "md5": md5(path)})
    assert data.num_classes == 100 and data.train_size == 30 and data.images.shape == (40, 3, 32, 32)
    assert data.labels.tolist() == fine_train + fine_test
    assert data.images[29, :, 0, 31].tolist() == [1, 2, 3]
    assert data.mean == (0.5071, 0.4865, 0.4409)


def test_download_is_verified_and_atomic(cifar10, tmp_path, monkeypatch):
    cfg, _ = cifar10
    source = Path(cfg["root"]) / "cifar-10-python.tar.gz"
    calls = []

    def fake_download(url, root, filename=None, md5=None, max_redirect_hops=3):
        calls.append((url, md5))
        Path(root, filename).write_bytes(source.read_bytes())

    import torchvision.datasets.utils as utils

    monkeypatch.setattr(utils, "download_url", fake_download)
    wanted = {"root": str(tmp_path / "raw"), "download": True, "md5": cfg["md5"]}
    assert fetch_dataset("cifar10", wanted) == [tmp_path / "raw" / "cifar-10-python.tar.gz"]
    assert calls == [(CIFAR10_URL, cfg["md5"])]
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["cifar-10-python.tar.gz"]

    def offline(url, root, filename=None, md5=None, max_redirect_hops=3):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(utils, "download_url", offline)
    with pytest.raises(DatasetUnavailable, match="download failed") as caught:
        fetch_dataset("cifar10", {"root": str(tmp_path / "other"), "download": True})
    assert "\n" not in str(caught.value) and CIFAR10_URL in str(caught.value)
    assert not (tmp_path / "other").exists()  # no folder left behind either


def test_archive_status_checks_existence_and_md5_and_probes_only_when_downloading(
        cifar10, tmp_path, monkeypatch):
    probed = []

    def probe(url, timeout=3.0):
        probed.append(url)
        return answers

    monkeypatch.setattr(archives, "host_answers", probe)
    answers = False
    assert archive_status("cifar10", {**cifar10[0], "download": True}) is None
    corrupt = archive_status("cifar10", {"root": cifar10[0]["root"]})  # the real archive's md5
    assert "fails its md5 check" in corrupt and "\n" not in corrupt
    assert archive_status("digits") is None and probed == []
    message = archive_status("cifar10", {"root": str(tmp_path)})
    assert probed == [] and "\n" not in message and CIFAR10_URL in message
    message = archive_status("cifar10", {"root": str(tmp_path), "download": True})
    assert probed == [CIFAR10_URL] and "www.cs.toronto.edu does not answer" in message
    answers = True
    assert archive_status("cifar10", {"root": str(tmp_path), "download": True}) is None
    assert not list(tmp_path.iterdir())  # nothing downloaded


def _imagenet_batch(path: Path, rng: np.random.Generator, labels: list[int],
                    compressed: bool = False) -> np.ndarray:
    data = _rows(rng, len(labels))
    save = np.savez_compressed if compressed else np.savez
    save(path, data=data, labels=labels, mean=np.zeros(3072))
    return data


def test_imagenet32_keeps_the_first_100_classes(tmp_path, monkeypatch):
    monkeypatch.setattr(imagenet32, "CHUNK", 3)  # several chunks a file
    folder = tmp_path / "imagenet32"
    folder.mkdir()
    rng = np.random.default_rng(2)
    kept_images, kept_labels = [], []
    for i in range(1, 11):
        labels = [1, 101, 100, 500, i, 1000, 50]
        data = _imagenet_batch(folder / f"train_data_batch_{i}.npz", rng, labels, compressed=i == 2)
        keep = [j for j, y in enumerate(labels) if y <= 100]
        kept_images.append(data[keep])
        kept_labels += [labels[j] - 1 for j in keep]
    val_labels = [100, 200, 1, 101, 7]
    val = _imagenet_batch(folder / "val_data.npz", rng, val_labels)
    data = load_dataset("imagenet32", {"root": str(tmp_path)})
    assert data.train_size == 40 and data.num_classes == 100
    assert data.images.shape == (43, 3, 32, 32) and data.images.dtype == torch.uint8
    assert data.labels.tolist() == kept_labels + [99, 0, 6]
    expected = np.concatenate(kept_images + [val[[0, 2, 4]]]).reshape(-1, 3, 32, 32)
    assert np.array_equal(data.images.numpy(), expected)
    assert data.std == (0.229, 0.224, 0.225)
    assert len(raw_files("imagenet32", {"root": str(tmp_path)})) == 11


def test_imagenet32_missing_files_are_named_with_the_download_page(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "host_answers", lambda url, timeout=3.0: pytest.fail("probed"))
    folder = tmp_path / "imagenet32"
    folder.mkdir()
    _imagenet_batch(folder / "train_data_batch_1.npz", np.random.default_rng(3), [1, 2])
    message = archive_status("imagenet32", {"root": str(tmp_path), "download": True})
    assert "\n" not in message and "train_data_batch_1.npz," not in message
    assert "train_data_batch_2.npz" in message and "train_data_batch_10.npz" in message
    assert "val_data.npz" in message and "https://image-net.org/download-images" in message
    assert f"put them in {folder}/" in message
    with pytest.raises(DatasetUnavailable, match="val_data.npz"):
        load_dataset("imagenet32", {"root": str(tmp_path)})


def test_npz_source_converts_layout_and_computes_statistics(tmp_path):
    rng = np.random.default_rng(4)
    x_train = rng.integers(0, 256, size=(12, 5, 6, 3), dtype=np.uint8)
    x_train[0, 2, 3] = (10, 20, 30)
    x_test = rng.integers(0, 256, size=(4, 5, 6, 3), dtype=np.uint8)
    path = tmp_path / "mine.npz"
    np.savez(path, x_train=x_train, y_train=np.arange(12) % 3, x_test=x_test,
             y_test=np.array([0, 1, 2, 3]))
    data = load_dataset("mine", {"source": "npz", "path": str(path)})
    assert data.name == "mine" and data.num_classes == 4 and data.train_size == 12
    assert data.images.shape == (16, 3, 5, 6) and data.images.dtype == torch.uint8
    assert data.images[0, :, 2, 3].tolist() == [10, 20, 30]
    assert data.labels.tolist() == [0, 1, 2] * 4 + [0, 1, 2, 3]
    pixels = x_train.reshape(-1, 3) / 255.0
    assert np.allclose(data.mean, pixels.mean(0)) and np.allclose(data.std, pixels.std(0))
    given = load_dataset("mine", {"source": "npz", "path": str(path), "num_classes": 10,
                                  "mean": [0.5] * 3, "std": [0.25] * 3})
    assert given.num_classes == 10 and given.mean == (0.5,) * 3 and given.std == (0.25,) * 3
    assert raw_files("mine", {"source": "npz", "path": str(path)}) == [path]


@pytest.mark.parametrize("change, words", [
    ({"x_train": np.zeros((2, 4, 4, 1), np.float32)}, "x_train is float32"),
    ({"y_train": np.zeros(3, np.int64)}, "expected 2 integer labels"),
    ({"x_test": np.zeros((2, 5, 4, 1), np.uint8)}, "x_test images"),
    ({"y_test": None}, "no y_test"),
])
def test_npz_source_refuses_bad_content_in_one_line(tmp_path, change, words):
    arrays = {"x_train": np.zeros((2, 4, 4, 1), np.uint8), "y_train": np.array([0, 1]),
              "x_test": np.zeros((2, 4, 4, 1), np.uint8), "y_test": np.array([1, 0])}
    arrays.update(change)
    path = tmp_path / "bad.npz"
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    with pytest.raises(DatasetUnavailable, match=words) as caught:
        load_dataset("bad", {"source": "npz", "path": str(path)})
    assert "\n" not in str(caught.value)


def test_npz_source_needs_a_path_and_checks_a_configuredmd5(tmp_path):
    with pytest.raises(DatasetUnavailable, match="datasets.mine.path"):
        load_dataset("mine", {"source": "npz"})
    path = tmp_path / "mine.npz"
    pixels = np.arange(8, dtype=np.uint8).reshape(2, 2, 2)  # two classes, pixels that vary
    np.savez(path, x_train=pixels, y_train=[0, 1], x_test=pixels[:1], y_test=[0])
    with pytest.raises(DatasetUnavailable, match="md5"):
        load_dataset("mine", {"source": "npz", "path": str(path), "md5": "0" * 32})
    data = load_dataset("mine", {"source": "npz", "path": str(path), "md5": md5(path)})
    assert data.image_shape == (1, 2, 2) and data.num_classes == 2
    assert raw_files("digits") == [] and fetch_dataset("digits") == []


def test_as_unit_float():
    x = torch.tensor([0, 51, 255], dtype=torch.uint8)
    assert as_unit_float(x).dtype == torch.float32
    assert as_unit_float(x).tolist() == pytest.approx([0.0, 0.2, 1.0])
    y = torch.rand(3)
    assert as_unit_float(y) is y
    with pytest.raises(TypeError):
        as_unit_float(torch.arange(3))


def test_split_with_official_test_set_has_the_papers_cifar10_sizes():
    labels = np.concatenate([np.tile(np.arange(10), 5000), np.tile(np.arange(10), 1000)])
    split = make_split("cifar10", labels, num_classes=10, seed=1, test_fraction=None,
                       labelled=4000, val_fraction=0.2, val_max=2000, train_size=50000)
    assert (len(split.labelled), len(split.validation)) == (3200, 800)
    assert (len(split.unlabelled), len(split.test)) == (46000, 10000)
    assert np.array_equal(split.test, np.arange(50000, 60000))
    parts = np.concatenate([split.labelled, split.validation, split.unlabelled])
    assert len(np.unique(parts)) == 50000 and parts.max() < 50000
    assert np.bincount(labels[split.labelled], minlength=10).tolist() == [320] * 10
    assert np.bincount(labels[split.validation], minlength=10).tolist() == [80] * 10
    other = make_split("cifar10", labels, num_classes=10, seed=2, test_fraction=0.5,
                       labelled=4000, val_fraction=0.2, val_max=2000, train_size=50000)
    assert np.array_equal(other.test, split.test)  # test_fraction is ignored
    assert not np.array_equal(other.labelled, split.labelled)
    with pytest.raises(ValueError, match="test_fraction"):
        make_split("digits", labels, num_classes=10, seed=1, test_fraction=None, labelled=40,
                   val_fraction=0.2, val_max=2000)


def test_split_of_a_loaded_dataset_uses_its_official_test_set(cifar10):
    data = load_dataset("cifar10", cifar10[0])
    labels = data.labels.numpy()
    split = make_split("cifar10", labels, num_classes=10, seed=1, test_fraction=None,
                       labelled=30, val_fraction=0.4, val_max=2000, train_size=data.train_size)
    assert np.array_equal(split.test, np.arange(50, 70))
    assert np.bincount(labels[split.validation], minlength=10).tolist() == [1] * 10
    assert np.bincount(labels[split.labelled], minlength=10).tolist() == [2] * 10
    assert len(split.unlabelled) == 20 and split.unlabelled.max() < 50
    used = np.concatenate([split.labelled, split.validation, split.unlabelled, split.test])
    assert len(np.unique(used)) == 70


def test_an_own_npz_that_changed_says_how_to_accept_the_change(tmp_path) -> None:
    """An added dataset's npz with another md5 than params.yaml records: get it again, or, if it
    changed on purpose, update or delete the md5 line (a CIFAR archive gets the first only)."""
    from wscat.data.sources.archives import verify
    from wscat.data.sources.npz import Npz

    npz = tmp_path / "mine.npz"
    npz.write_bytes(b"not the recorded file")
    [archive] = Npz().archives("mine", {"path": str(npz), "md5": "0" * 32})
    with pytest.raises(DatasetUnavailable, match="fails its md5 check") as caught:
        verify("mine", archive)
    message = str(caught.value)
    assert message.endswith("; or, if you changed it on purpose, update or delete the md5 line "
                            "of datasets.mine in the params file") and "\n" not in message
