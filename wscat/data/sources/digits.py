"""scikit-learn's digits: the embedded default, no archive to fetch."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wscat.data.sources.base import Archive, ImageDataset


class Digits:
    """1,797 real 8x8 grey images with 17 levels, scaled by 1/16; no official test split."""

    def archives(self, name: str, cfg: Mapping[str, Any]) -> list[Archive]:
        return []

    def read(self, name: str, cfg: Mapping[str, Any]) -> ImageDataset:
        import torch
        from sklearn.datasets import load_digits

        bunch = load_digits()
        images = torch.from_numpy(np.asarray(bunch.images, dtype=np.float32) / 16.0).unsqueeze(1)
        labels = torch.from_numpy(np.asarray(bunch.target, dtype=np.int64))
        # Statistics of the whole digits set, rounded (normalisation lives inside the model).
        return ImageDataset(name, images, labels, 10, mean=(0.3050,), std=(0.3770,))
