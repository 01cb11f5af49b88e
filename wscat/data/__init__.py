"""Datasets as image tensors (uint8 or [0,1] float), per-seed splits, batches, augmentation.
A run's training data (labelled, pseudo-labelled, generated) is wscat.data.training_data, imported
by its own name: it builds the trainer's TrainingData, and wscat.training imports this package."""
from wscat.data.augment import augment
from wscat.data.sampler import iterations_per_epoch, sample_batch_indices
from wscat.data.sources import (DatasetUnavailable, ImageDataset, archive_status, as_unit_float,
                                fetch_dataset, load_dataset, raw_files, to_unit)
from wscat.data.split import Split, load_split, make_split, save_split

__all__ = ["DatasetUnavailable", "ImageDataset", "Split", "archive_status", "as_unit_float",
           "augment", "fetch_dataset", "iterations_per_epoch", "load_dataset", "load_split",
           "make_split", "raw_files", "sample_batch_indices", "save_split", "to_unit"]
