"""Test split (official, or fixed and stratified); labelled and validation sets per seed."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wscat import paths
from wscat.errors import NPZ_ERRORS, npz_problem, require_file
from wscat.io import atomic_path


@dataclass(frozen=True)
class Split:
    """Indices into the dataset. `labelled` excludes `validation`; `unlabelled` never carries labels."""

    dataset: str
    seed: int
    labelled: np.ndarray
    unlabelled: np.ndarray
    validation: np.ndarray
    test: np.ndarray
    made_with: str | None = None  # the split params that made it (JSON), as the file records them


def _members(labels: np.ndarray, pool: np.ndarray, num_classes: int) -> list[np.ndarray]:
    """`pool[labels[pool] == c]` for each class c, in pool order, from one stable sort instead of
    a pass over the pool per class (100 classes of ImageNet32 in every `snakemake -n`)."""
    pool_labels = labels[pool]
    order = np.argsort(pool_labels, kind="stable")
    bounds = np.searchsorted(pool_labels[order], np.arange(num_classes + 1) - 0.5)
    return [pool[order[bounds[c]:bounds[c + 1]]] for c in range(num_classes)]


def _per_class(labels: np.ndarray, pool: np.ndarray, per_class: int, rng: np.random.Generator,
               num_classes: int, dataset: str) -> np.ndarray:
    chosen = []
    for c, members in enumerate(_members(labels, pool, num_classes)):
        if per_class > len(members):
            raise ValueError(f"class {c} has only {len(members)} samples but {per_class} were asked "
                             f"for; lower datasets.{dataset}.labelled in the params file")
        chosen.append(rng.permutation(members)[:per_class])
    return np.sort(np.concatenate(chosen)) if chosen else np.empty(0, dtype=np.int64)


def _check_validation(dataset: str, per_class: int, labelled_per_class: int) -> None:
    """Every run chooses best.pt on the validation set, and trains on the labelled images left:
    neither may be empty."""
    if per_class < 1:
        raise ValueError(f"datasets.{dataset}: val_fraction and val_max give 0 validation images "
                         "per class, but best.pt is chosen on the validation set; raise "
                         "val_fraction (the paper: 0.2) or val_max in the params file")
    if per_class >= labelled_per_class:
        raise ValueError(f"datasets.{dataset}: the validation set takes all {labelled_per_class} "
                         "labelled images per class and leaves none to train on; lower "
                         "val_fraction in the params file")


def _pool_and_test(dataset: str, labels: np.ndarray, *, train_size: int | None,
                   test_fraction: float | None, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """The training pool and the test set: the official split, or a fixed stratified fraction."""
    everything = np.arange(len(labels))
    if train_size is not None:
        if not 0 < train_size <= len(labels):
            raise ValueError(f"train_size = {train_size} but the dataset has {len(labels)} samples")
        tested = np.unique(labels[train_size:])
        unseen = tested[~np.isin(tested, labels[:train_size])]
        if unseen.size:  # a class to be tested on that nothing can be trained on
            raise ValueError(f"{dataset}: the test labels (y_test) hold class {unseen[0]}, which "
                             "no training image has; give every test class training images, or "
                             "drop its test images")
        return everything[:train_size], everything[train_size:]
    if test_fraction is None:
        raise ValueError(f"{dataset} has no official test split; set datasets.{dataset}."
                         "test_fraction in the params file")
    test = _per_class_fraction(labels, everything, test_fraction, num_classes)
    return np.setdiff1d(everything, test, assume_unique=True), test


def make_split(dataset: str, labels: np.ndarray, *, num_classes: int, seed: int,
               test_fraction: float | None, labelled: int | None, val_fraction: float,
               val_max: int, train_size: int | None = None,
               unlabelled_fraction: float = 1.0) -> Split:
    """Split as the paper's Table 1: labelled and validation class-balanced per seed.

    With `train_size` the test set is the official one (indices >= train_size) and the training
    pool the rest; without it a stratified `test_fraction` is held out, fixed (seed 0).
    `labelled=None` labels the whole pool (the fully supervised setting of the supplementary
    tab-sup); `unlabelled_fraction` keeps a random part of the unlabelled pool (Fig-unlabel).
    """
    labels = np.asarray(labels)
    pool, test = _pool_and_test(dataset, labels, train_size=train_size,
                                test_fraction=test_fraction, num_classes=num_classes)
    if labelled is None:
        return _fully_labelled(dataset, labels, pool, test, seed=seed, val_fraction=val_fraction,
                               val_max=val_max, num_classes=num_classes)
    if labelled > len(pool):
        raise ValueError(f"labelled = {labelled} but only {len(pool)} training samples exist; lower "
                         f"datasets.{dataset}.labelled in the params file")
    if labelled % num_classes:
        raise ValueError(f"datasets.{dataset}.labelled = {labelled} is not a multiple of the "
                         f"{num_classes} classes (the labelled set is class-balanced); set it to "
                         f"{_multiples(labelled, num_classes, len(pool))} in the params file")
    rng = np.random.default_rng(seed)
    labelled_idx = _per_class(labels, pool, labelled // num_classes, rng, num_classes, dataset)
    n_val = validation_per_class(labelled, val_fraction, val_max, num_classes)
    _check_validation(dataset, n_val, labelled // num_classes)
    validation = _per_class(labels, labelled_idx, n_val, rng, num_classes, dataset)
    unlabelled = np.setdiff1d(pool, labelled_idx, assume_unique=True)  # sorted, unique: as is
    if not 0 < unlabelled_fraction <= 1:
        raise ValueError(f"unlabelled_fraction = {unlabelled_fraction} must be in (0, 1]")
    if unlabelled_fraction < 1:
        keep = round(unlabelled_fraction * len(unlabelled))
        unlabelled = np.sort(rng.permutation(unlabelled)[:keep])
    return Split(dataset=dataset, seed=seed,
                 labelled=np.setdiff1d(labelled_idx, validation, assume_unique=True),
                 unlabelled=unlabelled, validation=validation, test=test)


def _multiples(labelled: int, num_classes: int, most: int) -> str:
    """The multiples of `num_classes` nearest `labelled` (one each side, at least one image a
    class, at most `most`), as "100 or 110"."""
    below = labelled // num_classes * num_classes
    near = [n for n in (below, below + num_classes) if num_classes <= n <= most]
    return " or ".join(map(str, near or [num_classes]))


def _fully_labelled(dataset: str, labels: np.ndarray, pool: np.ndarray, test: np.ndarray, *,
                    seed: int, val_fraction: float, val_max: int, num_classes: int) -> Split:
    """Every training sample labelled; the validation set class-balanced out of them."""
    rng = np.random.default_rng(seed)
    n_val = min(int(val_fraction * len(pool)), val_max) // num_classes
    _check_validation(dataset, n_val, len(pool) // num_classes)
    validation = _per_class(labels, pool, n_val, rng, num_classes, dataset)
    return Split(dataset=dataset, seed=seed,
                 labelled=np.setdiff1d(pool, validation, assume_unique=True),
                 unlabelled=np.empty(0, dtype=np.int64), validation=validation, test=test)


def held_out(n: int, fraction: float) -> int:
    """How many of a class's `n` images a stratified `fraction` holds out: round(fraction x n)."""
    return int(round(fraction * n))


def validation_per_class(labelled: int, val_fraction: float, val_max: int, num_classes: int) -> int:
    """Validation images a class of a `labelled`-image budget gives up (the paper's Sec. 4.1.1:
    20% of the labelled set; the cap val_max, 2,000, is the release's): min(val_fraction x
    labelled, val_max), split evenly over the classes, rounded down."""
    return min(int(val_fraction * labelled), val_max) // num_classes


def _per_class_fraction(labels: np.ndarray, pool: np.ndarray, fraction: float,
                        num_classes: int) -> np.ndarray:
    """A stratified fraction of `pool`, fixed (seed 0) whatever the run seed."""
    rng = np.random.default_rng(0)
    parts = []
    for members in _members(labels, pool, num_classes):
        parts.append(rng.permutation(members)[: held_out(len(members), fraction)])
    return np.sort(np.concatenate(parts))


def save_split(split: Split, path: str | Path, made_with: str | None = None) -> None:
    """Write the split as .npz atomically; with `made_with` (the split params that made it, as
    JSON: wscat.workflow.split_params) recorded, for `load_split_of` to check."""
    record = {} if made_with is None else {"made_with": np.array(made_with)}
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, dataset=np.array(split.dataset), seed=np.array(split.seed),
                     labelled=split.labelled, unlabelled=split.unlabelled,
                     validation=split.validation, test=split.test, **record)


def load_split(path: str | Path) -> Split:
    """Read a split written by `save_split`; a truncated or foreign file raises ValueError."""
    path = Path(path)
    require_file(path, f"split file not found: {path} (run `wscat split` first)")
    try:
        with np.load(path, allow_pickle=False) as data:
            split = Split(dataset=str(data["dataset"]), seed=int(data["seed"]),
                          labelled=data["labelled"], unlabelled=data["unlabelled"],
                          validation=data["validation"], test=data["test"],
                          made_with=str(data["made_with"]) if "made_with" in data.files else None)
    except KeyError as error:  # an .npz that opens, without a split's arrays
        missing = _missing(path)
        if missing != "dataset":  # ours (it names its dataset), short of an array: damaged
            raise ValueError(f"{path} is not a wscat split file (no `{missing}` array: a "
                             "damaged split); delete it and rerun `wscat split`") from error
        raise ValueError(f"{path} is not a wscat split (no `{missing}` array); pass the "
                         f"seed's split ({paths.SPLIT.format(dataset='DATASET', seed='SEED')}, "
                         "`wscat split` makes it)") from error
    except NPZ_ERRORS as error:
        raise ValueError(f"{path} is not a wscat split file ({npz_problem(error, path)}); delete it "
                         "and rerun `wscat split`") from error
    for part in PARTS:
        indices = getattr(split, part)
        if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"{path}: `{part}` must be a list of integer indices; delete it and "
                             "rerun `wscat split`")
    for part in NON_EMPTY:
        if not len(getattr(split, part)):
            raise ValueError(f"{path}: its `{part}` part is empty; delete it and rerun `wscat "
                             "split` (with datasets.<name>.labelled, val_fraction and val_max that "
                             "give it images)")
    return split


def _missing(path: Path) -> str:
    """The first array of a split that the .npz at `path` lacks."""
    with np.load(path, allow_pickle=False) as data:
        return next((key for key in ("dataset", "seed", *PARTS) if key not in data.files), "?")


PARTS = ("labelled", "unlabelled", "validation", "test")
# Parts every step needs (the unlabelled one is empty in the fully supervised setting): training
# draws from `labelled`, best.pt is chosen on `validation`, the metrics come from `test`.
NON_EMPTY = ("labelled", "validation", "test")


def check_split_fits(split: Split, n_images: int, path: str | Path) -> None:
    """Refuse a split whose indices fall outside a dataset of `n_images`, that names an image
    twice in one part, or whose parts share images: the training parts with the test part (the
    metrics would be measured on trained images), and among themselves (best.pt chosen on
    trained images; pseudo-labels made for labelled ones), as `make_split`'s never do."""
    for part in PARTS:
        indices = getattr(split, part)
        if len(indices) and (indices.min() < 0 or indices.max() >= n_images):
            raise ValueError(f"{path}: `{part}` holds indices outside 0..{n_images - 1} of dataset "
                             f"'{split.dataset}'; it was made for another dataset: delete it and "
                             "rerun `wscat split`")
    for part in PARTS:
        values, counts = np.unique(getattr(split, part), return_counts=True)
        if len(values) and counts.max() > 1:
            raise ValueError(f"{path}: `{part}` holds image {values[counts.argmax()]} more than "
                             "once; delete it and rerun `wscat split`")
    pairs = [(part, "test") for part in PARTS[:3]] + [
        ("labelled", "unlabelled"), ("labelled", "validation"), ("unlabelled", "validation")]
    for part, other in pairs:
        if len(np.intersect1d(getattr(split, part), getattr(split, other))):
            raise ValueError(f"{path}: `{part}` shares images with `{other}`; delete it and rerun "
                             "`wscat split`")


def load_split_of(path: str | Path, dataset: str, seed: int, made_with: str | None = None
                  ) -> Split:
    """`load_split(path)`, refusing the split of another dataset or seed and, given `made_with`
    (the split params now, wscat.workflow.split_params), one made with other split params (a
    file that records none, written before they were recorded, passes)."""
    split = load_split(path)
    if split.dataset != dataset or split.seed != seed:
        raise ValueError(f"{path} is the split of {split.dataset} seed {split.seed}, not of "
                         f"{dataset} seed {seed}; {_split_hint(path, split, dataset, seed)}")
    if made_with is not None:
        _check_made_with(path, split, made_with)
    return split


def _split_hint(path: str | Path, split: Split, dataset: str, seed: int) -> str:
    """Which split to pass for `dataset` and `seed`: the workflow's (wscat.paths.SPLIT), with the
    command that makes it; where `path` is that place already, `split` is to move to its own."""
    wanted, given = paths.SPLIT.format(dataset=dataset, seed=seed), Path(path).as_posix()
    make = f"wscat split --dataset {dataset} --seed {seed} --out"
    if given == wanted or given.endswith("/" + wanted):  # the place of this seed's split
        own = given[: len(given) - len(wanted)] + paths.SPLIT.format(dataset=split.dataset,
                                                                     seed=split.seed)
        return f"move it to {own}, then make this one: `{make} {given}`"
    return f"pass {wanted} (`{make} {wanted}`)"


def _check_made_with(path: str | Path, split: Split, made_with: str) -> None:
    """Refuse a split whose recorded split params differ from `made_with`: it holds the parts
    of other params (another `labelled`...), which a run would use while claiming these."""
    if split.made_with is None:
        return
    try:
        old = json.loads(split.made_with)
    except ValueError:
        old = None
    if not isinstance(old, dict):
        raise ValueError(f"{path} is not a wscat split file (its `made_with` is not a record of "
                         "split params); delete it and rerun `wscat split`")
    new = json.loads(made_with)
    if old == new:
        return
    changed = "; ".join(f"datasets.{split.dataset}.{key}: {old.get(key)} there, {new.get(key)} "
                        "in the params" for key in sorted(set(old) | set(new))
                        if old.get(key) != new.get(key))
    raise ValueError(f"{path} was made with other split params than these ({changed}); remake "
                     f"it with these params: `wscat split --dataset {split.dataset} --seed "
                     f"{split.seed} --out {path}` (snakemake reruns it)")
