"""What every source shares: the in-memory dataset, the archive a source reads, and its error."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # torch loads when data is read, not when a workflow lists archives
    import torch

DEFAULT_ROOT = "data/raw"


class DatasetUnavailable(ValueError):
    """An archive is missing, corrupt or unreadable; the message is one line saying what to do."""


@dataclass(frozen=True)
class ImageDataset:
    """A whole dataset in memory; `mean`/`std`: the per-channel statistics the model normalises by.

    `images` is N x C x H x W, either uint8 (pixel = value / 255; the large datasets) or float32 in
    [0, 1]. With `train_size` set, images[:train_size] is the official training set and the rest
    the official test set; None means there is no official test split.
    """

    name: str
    images: torch.Tensor
    labels: torch.Tensor  # int64, N
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    train_size: int | None = None

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.images.shape[1:])  # type: ignore[return-value]

    def take(self, indices: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Images `indices` in [0,1] and their labels, on `device` (what a step attacks or
        embeds)."""
        return to_unit(self.images[indices].to(device)), self.labels[indices].to(device)


def as_unit_float(x: torch.Tensor) -> torch.Tensor:
    """uint8 images -> float32 in [0, 1]; floating images are returned unchanged."""
    import torch

    if x.dtype == torch.uint8:
        return x.to(torch.float32).div_(255.0)
    if x.is_floating_point():
        return x
    raise TypeError(f"images must be uint8 or floating point, not {x.dtype}")


def to_unit(x: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
    """Images as float32 in [0,1] (uint8 datasets, CIFAR and ImageNet32, are stored as 0..255), in
    the training memory format (NHWC with `channels_last`)."""
    import torch

    layout = torch.channels_last if channels_last else torch.contiguous_format
    return as_unit_float(x).contiguous(memory_format=layout)


@dataclass(frozen=True)
class Archive:
    """One file a source reads: where it lives, where a person gets it, how it is checked.

    `origin` completes "get it from ...". `url` is set where the file can be downloaded
    automatically; `md5` is checked before the file is read (None: not checked); `changed`
    completes a failed check's advice where the user may have changed the file on purpose.
    """

    path: Path
    origin: str
    url: str | None = None
    md5: str | None = None
    changed: str = ""


class Source(Protocol):
    """A dataset source: the archives it reads and how it turns them into an ImageDataset."""

    def archives(self, name: str, cfg: Mapping[str, Any]) -> list[Archive]: ...

    def read(self, name: str, cfg: Mapping[str, Any]) -> ImageDataset: ...


def root(cfg: Mapping[str, Any]) -> Path:
    """The folder holding a source's archives (`datasets.<name>.root`)."""
    return Path(cfg.get("root") or DEFAULT_ROOT)


def one_line(error: BaseException) -> str:
    """An exception as text fit for a one-line message."""
    return " ".join(f"{type(error).__name__}: {error}".split())
