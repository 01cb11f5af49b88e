"""Datasets as [0,1] image tensors, per-seed splits, batch sampling and tensor augmentation."""
from wscat.data.augment import augment
from wscat.data.sampler import iterations_per_epoch, sample_batch_indices
from wscat.data.sources import ImageDataset, load_dataset
from wscat.data.split import Split, load_split, make_split, save_split

__all__ = ["ImageDataset", "Split", "augment", "iterations_per_epoch", "load_dataset",
           "load_split", "make_split", "sample_batch_indices", "save_split"]
