"""scikit-learn's digits: the embedded default, no archive to fetch."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wscat.data.sources.base import Archive, ImageDataset


def load_digits_table() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's `load_digits()` (flat pixels, targets), read from the file it reads
    (`sklearn/datasets/data/digits.csv.gz`, by `np.loadtxt` as it does) without importing
    scikit-learn: its import costs ~1 s of every job's start-up."""
    import gzip
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sklearn")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0], "datasets", "data", "digits.csv.gz") if locations else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.data, bunch.target
    with gzip.open(path, mode="rt", encoding="utf-8") as handle:
        data = np.loadtxt(handle, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int, copy=False)


class Digits:
    """1,797 real 8x8 grey images with 17 levels, scaled by 1/16; no official test split."""

    def archives(self, name: str, cfg: Mapping[str, Any]) -> list[Archive]:
        return []

    def read(self, name: str, cfg: Mapping[str, Any]) -> ImageDataset:
        import torch

        pixels, target = load_digits_table()
        images = torch.from_numpy(np.asarray(pixels.reshape(-1, 8, 8), dtype=np.float32) / 16.0
                                  ).unsqueeze(1)
        labels = torch.from_numpy(np.asarray(target, dtype=np.int64))
        # Normalisation (inside the model): near the whole digits set's statistics (test images
        # included: mean 0.3053, std 0.3760, not the 0.3770 here); a fixed rescale of the input,
        # kept as every digits checkpoint was trained with it (a change retrains them all).
        return ImageDataset(name, images, labels, 10, mean=(0.3050,), std=(0.3770,))
