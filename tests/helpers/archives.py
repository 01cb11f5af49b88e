"""Small dataset archives in the official formats, for tests (no network, no real data)."""
from __future__ import annotations

import hashlib
import io
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


class _Py2Pickler(pickle._Pickler):
    """Pickles as the CIFAR batches were pickled: Python 2 str opcodes for byte strings and names,
    numpy arrays by numpy.core.multiarray._reconstruct."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj: bytes | str) -> None:
        raw = obj.encode("latin1") if isinstance(obj, str) else obj
        size = len(raw)
        head = pickle.SHORT_BINSTRING + bytes([size]) if size < 256 else \
            pickle.BINSTRING + struct.pack("<i", size)
        self.write(head + raw)
        self.memoize(obj)

    dispatch[bytes] = dispatch[str] = save_py2_str


def py2_dumps(entry: object) -> bytes:
    buffer = io.BytesIO()
    _Py2Pickler(buffer, protocol=2).dump(entry)
    return buffer.getvalue().replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")


def write_tar(path: Path, members: dict[str, object], dumps=py2_dumps) -> Path:
    """A .tar.gz of pickled objects, as in the official CIFAR archives."""
    with tarfile.open(path, "w:gz") as tar:
        for name, entry in members.items():
            raw = dumps(entry)
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path


def write_cifar10(root: Path, *, train_per_class: int, test_per_class: int, seed: int = 0) -> str:
    """cifar-10-python.tar.gz in `root`: five training batches and a test batch of pickled dicts
    (uint8 rows of 3072 channel-major pixels), images tinted by class so a model can learn them.
    Returns the archive's md5."""
    rng = np.random.default_rng(seed)

    def images(labels: np.ndarray) -> np.ndarray:
        rows = rng.integers(0, 128, size=(len(labels), 3072)).astype(np.int64)
        tint = (labels[:, None] * 97 + np.arange(3)[None, :] * 41) % 128  # per class and channel
        return (rows + np.repeat(tint, 1024, axis=1)).astype(np.uint8)

    train = rng.permutation(np.repeat(np.arange(10), train_per_class))
    members: dict[str, object] = {}
    for i, part in enumerate(np.array_split(train, 5), start=1):
        members[f"cifar-10-batches-py/data_batch_{i}"] = {
            b"batch_label": b"training batch", b"data": images(part),
            b"labels": [int(c) for c in part], b"filenames": [b"x.png"] * len(part)}
    test = np.repeat(np.arange(10), test_per_class)
    members["cifar-10-batches-py/test_batch"] = {b"data": images(test),
                                                 b"labels": [int(c) for c in test]}
    members["cifar-10-batches-py/batches.meta"] = {b"label_names": [b"class"] * 10}
    root.mkdir(parents=True, exist_ok=True)
    return md5(write_tar(root / "cifar-10-python.tar.gz", members))
