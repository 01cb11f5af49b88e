"""Datasets as image tensors (uint8 or [0,1] float), per-seed splits, batches, augmentation.
A run's training data (labelled, pseudo-labelled, generated) is wscat.data.training_data, imported
by its own name: it builds the trainer's TrainingData, and wscat.training imports this package.

The names below load on first use, so that a submodule without torch (capacity, split, the
sources' archive lists) can be imported without it: the workflow does so while building the DAG.
No submodule shares a name with one of them: importing wscat.data.augment (the module, as it was
once called) bound the package's `augment` to the module, and training then called a module.
"""
from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"augment": "augmentation", "iterations_per_epoch": "sampler",
          "sample_batch_indices": "sampler", "DatasetUnavailable": "sources",
          "ImageDataset": "sources", "archive_status": "sources", "as_unit_float": "sources",
          "fetch_dataset": "sources", "load_dataset": "sources", "raw_files": "sources",
          "Split": "split", "load_split": "split", "make_split": "split", "save_split": "split",
          "to_unit": "sources"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'wscat.data' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"wscat.data.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
