"""CIFAR-10 and CIFAR-100 read straight from the python-version archives (no extraction)."""
from __future__ import annotations

import io
import pickle
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wscat.data.sources.base import Archive, DatasetUnavailable, ImageDataset, one_line, root

# What a CIFAR batch may contain: numpy arrays, their dtypes, and Python 2 byte strings.
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles only what a CIFAR batch holds, as a second guard after the md5 check."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} has no place in a CIFAR batch")
        return super().find_class(module, name)


def _batch(raw: bytes, label_key: bytes, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> (uint8 N x 3 x 32 x 32 images, int64 labels)."""
    entries = _BatchUnpickler(io.BytesIO(raw), encoding="bytes").load()
    data = np.asarray(entries[b"data"])
    labels = np.asarray(entries[label_key], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(f"data is {data.dtype} {data.shape}, not uint8 N x 3072")
    if labels.shape != (len(data),):
        raise ValueError(f"{len(labels)} labels for {len(data)} images")
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels outside 0..{num_classes - 1}")
    return data.reshape(-1, 3, 32, 32), labels  # rows are channel-major RGB


@dataclass(frozen=True)
class Cifar:
    """One of the two CIFAR archives: its members, label key and normalisation statistics."""

    filename: str
    md5: str
    folder: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    label_key: bytes
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @property
    def url(self) -> str:
        return f"https://www.cs.toronto.edu/~kriz/{self.filename}"

    def archive(self, cfg: Mapping[str, Any]) -> Archive:
        # A configured md5 replaces the real archive's (tests build their own archives).
        return Archive(root(cfg) / self.filename, origin=self.url, url=self.url,
                       md5=str(cfg.get("md5") or self.md5))

    def archives(self, name: str, cfg: Mapping[str, Any]) -> list[Archive]:
        return [self.archive(cfg)]

    def read(self, name: str, cfg: Mapping[str, Any]) -> ImageDataset:
        """Read a verified archive in one pass; training batches first, then the test batch."""
        archive = self.archive(cfg)
        wanted = {f"{self.folder}/{member}": member for member in self.train + self.test}
        found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        try:
            with tarfile.open(archive.path, "r:gz") as tar:
                for member in tar:
                    if member.name in wanted and member.isfile():
                        handle = tar.extractfile(member)
                        assert handle is not None
                        found[wanted[member.name]] = _batch(handle.read(), self.label_key,
                                                          self.num_classes)
            absent = [m for m in wanted if wanted[m] not in found]
            if absent:
                raise KeyError(f"no member {absent[0]}")
        except (OSError, EOFError, tarfile.TarError, zlib.error, pickle.UnpicklingError,
                AttributeError, ImportError, IndexError, KeyError, ValueError, TypeError) as error:
            raise DatasetUnavailable(
                f"dataset '{name}': {archive.path} is not a readable {self.filename} "
                f"({one_line(error)}); get it again from {self.url} and put it at {archive.path}"
            ) from error
        import torch

        train = [found[m] for m in self.train]
        test = [found[m] for m in self.test]
        images = np.concatenate([x for x, _ in train + test])
        labels = np.concatenate([y for _, y in train + test])
        return ImageDataset(name, torch.from_numpy(images), torch.from_numpy(labels),
                            self.num_classes, self.mean, self.std,
                            train_size=sum(len(y) for _, y in train))


CIFAR10 = Cifar("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a", "cifar-10-batches-py",
                train=tuple(f"data_batch_{i}" for i in range(1, 6)), test=("test_batch",),
                label_key=b"labels", num_classes=10,
                mean=(0.4914, 0.4822, 0.4465), std=(0.2023, 0.1994, 0.2010))
CIFAR100 = Cifar("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85", "cifar-100-python",
                 train=("train",), test=("test",), label_key=b"fine_labels", num_classes=100,
                 mean=(0.5071, 0.4865, 0.4409), std=(0.2673, 0.2564, 0.2762))
