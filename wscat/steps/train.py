"""`wscat train`: train one (dataset, model, method, seed) on its split, resuming where a killed
run stopped."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from wscat.config import RunConfig
from wscat.data import load_dataset
from wscat.data.split import check_split_fits, load_split_of
from wscat.data.training_data import load_pseudo_labels, training_data, with_generated
from wscat.io import check_writable
from wscat.provenance import machine, versions
from wscat.training import train


def run(params: dict[str, Any], *, dataset: str, model: str, method: str, seed: int,
        split_path: Path, pseudo_path: Path | None, out_dir: Path,
        device: torch.device, labeler_checkpoint: Path | None = None) -> dict[str, Any]:
    """Train one (dataset, model, method, seed)."""
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    check_writable(out_dir, folders=True)
    split = load_split_of(split_path, dataset, seed)
    kind = run.method_params["data"]
    if kind == "pseudo" and pseudo_path is None:
        raise ValueError(f"method '{method}' trains on pseudo-labels from "
                         f"'{run.method_params['labeler']}': pass --pseudo FILE")
    source = load_dataset(dataset, params["datasets"][dataset])
    check_split_fits(split, len(source.labels), split_path)
    pseudo = (load_pseudo_labels(pseudo_path, split, source.num_classes) if kind == "pseudo"
              else None)
    data = training_data(source, split, kind, pseudo)
    if run.method_params.get("generated"):
        data = with_generated(data, run, source, labeler_checkpoint, device)
    return train(run, data, out_dir, device=device,
                 meta={"versions": versions(), "machine": machine(device)})
