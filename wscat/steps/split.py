"""`wscat split`: the labelled / unlabelled / validation / test split of one seed."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from wscat.data import Split, load_dataset, make_split, raw_files, save_split
from wscat.io import check_writable, guard_outputs
from wscat.workflow import split_params


def run(params: dict[str, Any], dataset: str, seed: int, out: Path) -> Split:
    """Write results/splits/{dataset}/seed{seed}.npz."""
    cfg = params["datasets"][dataset]
    guard_outputs({f"dataset {dataset}": raw_files(dataset, cfg)}, {"--out": out})
    check_writable(out)
    source = load_dataset(dataset, cfg)
    split = make_split(dataset, source.labels.numpy(), num_classes=source.num_classes, seed=seed,
                       test_fraction=cfg.get("test_fraction"), labelled=cfg["labelled"],
                       val_fraction=cfg["val_fraction"], val_max=cfg["val_max"],
                       train_size=source.train_size,
                       unlabelled_fraction=cfg.get("unlabelled_fraction", 1.0))
    save_split(split, out, made_with=split_params(params, dataset))  # checked where it is read
    return split
