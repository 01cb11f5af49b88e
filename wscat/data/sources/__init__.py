"""Dataset sources behind one interface, picked by `datasets.<name>.source` in params.yaml.

digits is embedded; cifar10, cifar100 and imagenet32 read the official archives under
`root` (default data/raw); npz reads one user-made file.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wscat.data.sources import archives as _archives
from wscat.data.sources.base import (Archive, DatasetUnavailable, ImageDataset, Source,
                                     as_unit_float, to_unit)
from wscat.data.sources.cifar import CIFAR10, CIFAR100
from wscat.data.sources.digits import Digits
from wscat.data.sources.imagenet32 import ImageNet32
from wscat.data.sources.npz import Npz
from wscat.data.sources.subset import take_subset

SOURCES: dict[str, Source] = {"digits": Digits(), "cifar10": CIFAR10, "cifar100": CIFAR100,
                              "imagenet32": ImageNet32(), "npz": Npz()}

__all__ = ["Archive", "DatasetUnavailable", "ImageDataset", "SOURCES", "archive_status",
           "as_unit_float", "fetch_dataset", "load_dataset", "raw_files", "to_unit"]


def _source(name: str, cfg: Mapping[str, Any]) -> Source:
    kind = cfg.get("source", name)
    if kind not in SOURCES:
        raise ValueError(f"unknown source '{kind}' for dataset '{name}'; known sources: "
                         f"{', '.join(sorted(SOURCES))} (set datasets.{name}.source)")
    return SOURCES[kind]


def raw_files(name: str, cfg: Mapping[str, Any] | None = None) -> list[Path]:
    """The archive files the dataset is read from (none for digits): Snakemake inputs, DVC deps."""
    cfg = cfg or {}
    return [archive.path for archive in _source(name, cfg).archives(name, cfg)]


def fetch_dataset(name: str, cfg: Mapping[str, Any] | None = None) -> list[Path]:
    """Make sure the archives are present (downloading where `download: true`) and verified."""
    cfg = cfg or {}
    found = _source(name, cfg).archives(name, cfg)
    _archives.fetch(name, found, bool(cfg.get("download", False)))
    return [archive.path for archive in found]


def archive_status(name: str, cfg: Mapping[str, Any] | None = None) -> str | None:
    """Fast check for a dry run: None when the archives exist or can be downloaded, else one line.

    Existence only (no md5); a missing archive with `download: true` counts as fine when its host
    answers a 3-second TCP probe. Never downloads.
    """
    cfg = cfg or {}
    try:
        found = _source(name, cfg).archives(name, cfg)
    except DatasetUnavailable as error:
        return str(error)
    return _archives.archive_problem(name, found, bool(cfg.get("download", False)))


def load_dataset(name: str, cfg: Mapping[str, Any] | None = None) -> ImageDataset:
    """Load dataset `name` as configured in params.yaml's `datasets.<name>` (None: defaults).

    Archives are fetched and verified first; a missing or corrupt one raises DatasetUnavailable.
    `subset` keeps the first N training and first M test images (the CIFAR-10 proxy).
    """
    cfg = cfg or {}
    source = _source(name, cfg)
    fetch_dataset(name, cfg)
    return check_dataset(take_subset(source.read(name, cfg), cfg.get("subset"), name))


def check_dataset(data: ImageDataset) -> ImageDataset:
    """Refuse data a model cannot learn from or be normalised by: images that are not
    N x C x H x W, non-finite pixels, fewer than two classes among the training images, a
    channel of constant value (its std is 0: the model divides by it) or non-finite statistics."""
    import torch

    where = f"dataset '{data.name}'"
    if data.images.ndim != 4 or len(data.images) != len(data.labels):
        raise DatasetUnavailable(f"{where}: images are {tuple(data.images.shape)} for "
                                 f"{len(data.labels)} labels, expected N x C x H x W")
    if data.images.is_floating_point() and not bool(torch.isfinite(data.images).all()):
        raise DatasetUnavailable(f"{where}: some pixels are NaN or infinite; fix the images "
                                 "(pixels lie in [0, 1] or 0..255)")
    train = data.labels[: data.train_size]  # None: every image
    classes = int(torch.unique(train).numel())
    if classes < 2 or data.num_classes < 2:
        raise DatasetUnavailable(f"{where}: its training images hold {classes} class(es); a "
                                 "classifier needs at least two")
    images = data.images[: data.train_size]
    flat = images.transpose(0, 1).reshape(images.shape[1], -1)
    constant = [c for c in range(flat.shape[0]) if bool(flat[c].min() == flat[c].max())]
    if constant:
        raise DatasetUnavailable(f"{where}: channel {constant[0]} has the same value in every "
                                 "training image (zero variance: normalising divides by a std "
                                 "of 0); drop that channel or fix the images")
    stats = [*data.mean, *data.std]
    if len(data.mean) != data.images.shape[1] or len(data.std) != data.images.shape[1] or not all(
            math.isfinite(v) for v in stats) or min(data.std) <= 0:
        raise DatasetUnavailable(f"{where}: mean {list(data.mean)} and std {list(data.std)} must "
                                 f"be {data.images.shape[1]} finite values each, std above 0")
    return data
