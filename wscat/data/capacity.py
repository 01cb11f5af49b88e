"""What a split can hold, known without reading an archive: `snakemake -n` refuses a `labelled`
the split step would refuse, with the split step's own line."""
from __future__ import annotations

from collections.abc import Mapping
import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from wscat.config import ConfigError
from wscat.data.split import make_split

# Images per class of the official archives: (classes, train per class, test per class).
FIXED_SIZES = {"cifar10": (10, 5000, 1000), "cifar100": (100, 500, 100),
               # ImageNet32-100: ImageNet classes hold at most 1,300 training images; an upper
               # bound, so only a `labelled` no archive could hold is refused here.
               "imagenet32": (100, 1300, 50)}


@lru_cache(maxsize=1)
def _digits_labels() -> np.ndarray:
    """scikit-learn's digits labels, read from its file (importing sklearn takes a second)."""
    spec = importlib.util.find_spec("sklearn")
    locations = spec.submodule_search_locations if spec else None
    path = Path(locations[0]) / "datasets" / "data" / "digits.csv.gz" if locations else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits

        return np.asarray(load_digits().target, dtype=np.int64)
    return np.loadtxt(path, delimiter=",", usecols=64).astype(np.int64)


def known_labels(cfg: Mapping[str, Any], name: str) -> tuple[np.ndarray, int, int | None] | None:
    """(labels, classes, official train size) of a dataset whose size is fixed, else None."""
    source = cfg.get("source", name)
    if source == "digits":
        return _digits_labels(), 10, None
    if source in FIXED_SIZES and not cfg.get("md5"):  # an md5 of its own: a home-made archive
        classes, train, test = FIXED_SIZES[source]
        labels = np.concatenate([np.repeat(np.arange(classes), train),
                                 np.repeat(np.arange(classes), test)])
        return labels, classes, classes * train
    return None


def split_problem(name: str, cfg: Mapping[str, Any]) -> str | None:
    """The split step's error for this dataset's split settings, or None when they fit (or the
    dataset's size is not known without its files)."""
    known = known_labels(cfg, name)
    if known is None:
        return None
    labels, classes, train_size = known
    try:
        make_split(name, labels, num_classes=classes, seed=0,
                   test_fraction=cfg.get("test_fraction"), labelled=cfg.get("labelled"),
                   val_fraction=cfg["val_fraction"], val_max=cfg["val_max"],
                   train_size=train_size,
                   unlabelled_fraction=cfg.get("unlabelled_fraction", 1.0))
    except ValueError as error:
        return f"dataset '{name}': {error}"
    return None


def check_splits(params: Mapping[str, Any]) -> None:
    """Refuse the first dataset whose split settings the split step would refuse (ConfigError,
    the split step's line): `snakemake -n` and `wscat list-experiments` read params alike."""
    for name, dataset in params["datasets"].items():
        problem = split_problem(name, dataset)
        if problem:
            raise ConfigError(problem)
