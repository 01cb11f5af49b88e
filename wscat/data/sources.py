"""Dataset sources behind one interface: images in [0,1] as N x C x H x W float tensors."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class ImageDataset:
    """A whole dataset in memory; `mean`/`std` are the per-channel statistics the model normalises by."""

    name: str
    images: torch.Tensor  # float32, N x C x H x W, values in [0, 1]
    labels: torch.Tensor  # int64, N
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.images.shape[1:])  # type: ignore[return-value]


def _digits() -> ImageDataset:
    """scikit-learn's digits: 1,797 real 8x8 grey images with 17 levels, scaled by 1/16."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = torch.from_numpy(np.asarray(bunch.images, dtype=np.float32) / 16.0).unsqueeze(1)
    labels = torch.from_numpy(np.asarray(bunch.target, dtype=np.int64))
    # Statistics of the whole digits set, rounded (normalisation lives inside the model).
    return ImageDataset("digits", images, labels, 10, mean=(0.3050,), std=(0.3770,))


SOURCES = {"digits": _digits}


def load_dataset(name: str) -> ImageDataset:
    """Load a dataset by name; unknown names get one clear line listing the known ones."""
    if name not in SOURCES:
        raise ValueError(f"unknown dataset '{name}'; known datasets: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]()
