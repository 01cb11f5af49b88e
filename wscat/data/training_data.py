"""A run's training data: the labelled part of its split, the unlabelled part (pseudo-labelled,
or without labels), and DMAT's generated images. The true labels of unlabelled images are never
copied in. Data knows no model: labelling generated images with a checkpoint is the train step's
(wscat.steps.train.with_generated)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from wscat.config import RunConfig
from wscat.data.sources import ImageDataset
from wscat.data.split import Split
from wscat.errors import NPZ_ERRORS, npz_problem, require_file


@dataclass
class TrainingData:
    """Tensors a run trains on. Unlabelled samples carry pseudo-labels or -1, never true labels."""

    labelled_x: torch.Tensor
    labelled_y: torch.Tensor
    unlabelled_x: torch.Tensor
    unlabelled_y: torch.Tensor
    validation_x: torch.Tensor
    validation_y: torch.Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    # Labelled + unlabelled pool size; an epoch is ceil(n_train / batch) steps for EVERY method, so
    # labelled-only baselines get the same number of updates as the semi-supervised ones.
    n_train: int
    # Labelled samples per batch when the method fixes it (DMAT: 30% real, 70% generated); None:
    # training.<dataset>.labelled_per_batch.
    labelled_per_batch: int | None = None


def load_pseudo_labels(path: Path, split: Split, num_classes: int,
                       labeler: str | None = None,
                       labeler_training: str | None = None) -> np.ndarray:
    """Pseudo-labels of split.unlabelled, in that order, each a class index below
    `num_classes`; with `labeler`, refused if the file names another labeler, and with
    `labeler_training` (wscat.workflow.training_fingerprint of the labeler under these params),
    if they came from a labeler trained with other params (files written before either was
    recorded name none and pass)."""
    require_file(path, f"pseudo-label file not found: {path} (run `wscat pseudo-label`)")
    try:
        with np.load(path, allow_pickle=False) as data:
            indices, labels = data["indices"], data["pseudo_labels"]
            made_by = str(data["labeler"]) if "labeler" in data.files else None
            trained = (str(data["labeler_training"]) if "labeler_training" in data.files
                       else "")
    except NPZ_ERRORS as error:
        raise ValueError(f"{path} is not a wscat pseudo-label file ({npz_problem(error, path)}); "
                         "delete it and rerun `wscat pseudo-label`") from error
    if labeler is not None and made_by is not None and made_by != labeler:
        raise ValueError(f"{path} holds the pseudo-labels of '{made_by}', but this method trains "
                         f"on those of '{labeler}' (its labeler in the params): pass "
                         f"--pseudo with the file `wscat pseudo-label --labeler {labeler}` wrote")
    if labeler_training is not None and trained and trained != labeler_training:
        raise ValueError(f"{path} holds the pseudo-labels of a {made_by or labeler} trained with "
                         f"other params than these (training {trained}, the params give "
                         f"{labeler_training}): label again with a {made_by or labeler} "
                         "trained with these params (`wscat pseudo-label`, the same --params)")
    if not np.array_equal(indices, split.unlabelled):
        raise ValueError(f"{path} was made for another split; rerun `wscat pseudo-label`")
    if (labels.shape != indices.shape or not np.issubdtype(labels.dtype, np.integer)
            or (len(labels) and labels.min() < 0)):
        raise ValueError(f"{path}: `pseudo_labels` must hold one class index per unlabelled "
                         "image; delete it and rerun `wscat pseudo-label`")
    if len(labels) and labels.max() >= num_classes:
        raise ValueError(f"{path}: pseudo-labels go up to {labels.max()} but '{split.dataset}' "
                         f"has {num_classes} classes; rerun `wscat pseudo-label`")
    return labels


def _pool_size(source: ImageDataset, split: Split) -> int:
    """Training images outside validation, labelled or not: an epoch is this many images for
    every method, and for every share of the unlabelled pool (Fig-unlabel varies the data, not
    the number of optimizer steps)."""
    return len(source.labels) - len(split.test) - len(split.validation)


def training_data(source: ImageDataset, split: Split, data_kind: str,
                  pseudo_labels: np.ndarray | None) -> TrainingData:
    """Tensors for a run. The true labels of unlabelled samples are never copied in."""
    x, y = source.images, source.labels
    unlabelled = torch.as_tensor(split.unlabelled)
    if data_kind == "labelled":
        unlabelled = unlabelled[:0]
        y_u = torch.empty(0, dtype=torch.long)
    elif data_kind == "pseudo":
        if pseudo_labels is None:
            raise ValueError("this method trains on pseudo-labels: pass --pseudo FILE")
        y_u = torch.as_tensor(pseudo_labels, dtype=torch.long)
    else:  # semi: unlabelled images, no labels at all
        y_u = torch.full((len(unlabelled),), -1, dtype=torch.long)
    labelled, validation = torch.as_tensor(split.labelled), torch.as_tensor(split.validation)
    return TrainingData(labelled_x=x[labelled], labelled_y=y[labelled], unlabelled_x=x[unlabelled],
                        unlabelled_y=y_u, validation_x=x[validation], validation_y=y[validation],
                        num_classes=source.num_classes, mean=source.mean, std=source.std,
                        n_train=_pool_size(source, split))


def load_generated(path: Path, source: ImageDataset) -> tuple[torch.Tensor, torch.Tensor | None]:
    """DMAT's generated data: an npz with `images` (uint8 N x H x W x C) and, optionally, `labels`
    (without them the images are pseudo-labelled by `generated_labeler`)."""
    if not path.is_file():
        raise FileNotFoundError(f"generated-data file not found: {path} (methods.<name>.generated)")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = data.files
            images = data["images"] if "images" in names else None
            labels = data["labels"] if "labels" in names else None
    except NPZ_ERRORS as error:
        raise ValueError(f"{path} is not a usable generated-data file ({npz_problem(error, path)})"
                         "; save it with np.savez(FILE, images=x) (x uint8 N x H x W x C; "
                         "labels= one class index per image, if it has them)") from error
    if images is None:
        raise ValueError(f"{path} must hold `images` (uint8 N x H x W x C) and may hold "
                         f"`labels`; it holds {', '.join(names)}")
    expected = (source.image_shape[1], source.image_shape[2], source.image_shape[0])
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != expected:
        raise ValueError(f"{path}: images must be uint8 N x {' x '.join(map(str, expected))}, got "
                         f"{images.dtype} {' x '.join(map(str, images.shape))}")
    if not len(images):  # no image to fill a share of every batch with
        raise ValueError(f"{path} holds no images (0 x {' x '.join(map(str, expected))}); "
                         "give it at least one, or drop methods.<name>.generated")
    # One integer per image: a column (N x 1) would fail the first training step, and float
    # labels would be truncated to classes nobody chose.
    if labels is not None and (labels.shape != images.shape[:1]
                               or not np.issubdtype(labels.dtype, np.integer)
                               or labels.min() < 0 or labels.max() >= source.num_classes):
        raise ValueError(f"{path}: need one label in 0..{source.num_classes - 1} per image")
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    if source.images.dtype != torch.uint8:  # a float dataset (digits): compare in [0,1]
        x = x.float() / 255.0
    return x, None if labels is None else torch.from_numpy(labels.astype(np.int64))


def add_generated(data: TrainingData, run: RunConfig, images: torch.Tensor,
                  labels: torch.Tensor) -> TrainingData:
    """DMAT: generated images (labelled by their npz or by the labeler) fill
    `generated_fraction` of every batch (drawn with replacement)."""
    knobs = run.method_params
    batch = run.training["batch_size"]
    n_generated = int(knobs["generated_fraction"] * batch)
    unlabelled_x = torch.cat([data.unlabelled_x, images.to(data.unlabelled_x.dtype)])
    return replace(data, unlabelled_x=unlabelled_x,
                   unlabelled_y=torch.cat([data.unlabelled_y, labels]),
                   labelled_per_batch=batch - n_generated if knobs["data"] == "labelled" else None)
