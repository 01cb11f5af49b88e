"""A dataset's first N training and first M test images: `datasets.<name>.subset`.

The CIFAR-10 proxy (docs/paper-scale.md, "CIFAR-10 proxy") is the official archive's first 15,000 training
and first 1,000 test images; taking them by position keeps the official order, so the archive
and an npz export of the same positions give the same dataset, image for image.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from wscat.data.sources.base import DatasetUnavailable, ImageDataset


def _first(count: int | None, available: int, what: str, name: str) -> int:
    if count is None:
        return available
    if count > available:
        raise DatasetUnavailable(f"dataset '{name}': subset.{what} = {count} but the source holds "
                                 f"only {available} {what} images; lower datasets.{name}.subset."
                                 f"{what} in params.yaml")
    return count


def take_subset(data: ImageDataset, subset: Mapping[str, Any] | None, name: str) -> ImageDataset:
    """`data` cut to its first `subset['train']` training and first `subset['test']` test images
    (None or a missing key: all of them). Needs an official test split (`train_size`)."""
    if not subset:
        return data
    if data.train_size is None:
        raise DatasetUnavailable(f"dataset '{name}': subset needs a source with an official test "
                                 "split (cifar10, cifar100, imagenet32, npz)")
    n_train = _first(subset.get("train"), data.train_size, "train", name)
    n_test = _first(subset.get("test"), len(data.labels) - data.train_size, "test", name)
    import torch

    keep = torch.cat([torch.arange(n_train),
                      torch.arange(data.train_size, data.train_size + n_test)])
    if len(keep) == len(data.labels):
        return data
    return replace(data, images=data.images[keep].contiguous(), labels=data.labels[keep].clone(),
                   train_size=n_train)
