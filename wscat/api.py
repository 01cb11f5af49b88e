"""The Python API: build a model, train a method, evaluate a checkpoint, from your own code.

These are the pipeline's own steps (the ones `wscat <step>` and the Snakemake rules run), with
the files they exchange kept in one folder:

    from wscat import api

    params = api.load_params("params.yaml")
    run = api.train_method("trades", params=params, dataset="digits", seed=1, out_dir="runs/digits")
    result = api.evaluate_checkpoint(run.checkpoint, params=params)
    print(result.accuracy)      # {'Natural': ..., 'FGSM': ..., 'PGD': ..., 'CW': ..., 'AA': ..., 'Mean': ...}

A method that trains on pseudo-labels (WSCAT, RST) first trains its labeler in the same folder,
as the workflow does. Every knob comes from the params (a params.yaml path or its loaded dict).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wscat import inference
from wscat.config import load_params, method_for, validate_params
from wscat.data import load_dataset
from wscat.device import pick_device
from wscat.steps import evaluate, pseudo, split as split_step, train

__all__ = ["EvaluationResult", "TrainResult", "build_model", "evaluate_checkpoint", "load_model",
           "load_params", "train_method"]

ParamsLike = Mapping[str, Any] | str | Path


@dataclass(frozen=True)
class TrainResult:
    """Where one training run left its files, and the epoch its validation selected."""

    checkpoint: Path  # best.pt: the validation-selected EMA weights
    last: Path        # last.pt: the final state (weights, optimiser, history)
    log: Path         # train_log.csv: one row per epoch
    curves: Path      # dvclive/: the same rows as DVCLive metrics (`dvc plots show`)
    split: Path       # the labelled / unlabelled / validation / test split it trained on
    best_epoch: int
    best_score: float


@dataclass(frozen=True)
class EvaluationResult:
    """Test accuracies (%) under each attack, and the manifest of how they were measured."""

    accuracy: dict[str, float]
    manifest: dict[str, Any]
    path: Path  # the metrics JSON, as `wscat evaluate` writes it


def _params(params: ParamsLike) -> dict[str, Any]:
    if isinstance(params, (str, Path)):
        return load_params(params)
    return validate_params(dict(params))


def build_model(name: str, *, dataset: str = "digits", params: ParamsLike = "params.yaml"
                ) -> nn.Module:
    """An untrained model `models.<name>` for `dataset` (its channels, classes and the
    normalisation the model applies inside). It maps [0,1] images to (features, logits)."""
    params = _params(params)
    if name not in params["models"]:
        raise ValueError(f"unknown model '{name}'; configured: {', '.join(params['models'])}")
    from wscat.models import build_model as build

    source = load_dataset(dataset, params["datasets"][dataset])
    spec = params["models"][name]
    return build(**spec, in_channels=source.image_shape[0], num_classes=source.num_classes,
                 mean=source.mean, std=source.std)


def _split(params: dict[str, Any], dataset: str, seed: int, out_dir: Path) -> Path:
    path = out_dir / f"split-seed{seed}.npz"
    if not path.is_file():
        split_step.run(params, dataset, seed, path)
    return path


def train_method(method: str, *, out_dir: str | Path, dataset: str = "digits", model: str = "cnn",
                 seed: int = 1, params: ParamsLike = "params.yaml",
                 device: str | torch.device | None = "cpu") -> TrainResult:
    """Train `method` on `dataset` for one seed; files go to out_dir/<method>/.

    The split is out_dir/split-seed<seed>.npz (made if missing). A method on pseudo-labels
    trains its labeler into out_dir/<labeler>/ first and labels the unlabelled part with it;
    DMAT's unlabelled generated images are labelled the same way.
    """
    params, out_dir, device = _params(params), Path(out_dir), pick_device(device)
    split = _split(params, dataset, seed, out_dir)
    knobs = method_for(params, method, dataset)
    pseudo_labels, labeler_checkpoint = None, None
    if knobs["data"] == "pseudo":
        labeler = train_method(knobs["labeler"], out_dir=out_dir, dataset=dataset, model=model,
                               seed=seed, params=params, device=device)
        pseudo_labels = out_dir / f"pseudo-{knobs['labeler']}-seed{seed}.npz"
        pseudo.run(params, dataset=dataset, seed=seed, split_path=split,
                   checkpoint=labeler.checkpoint, out=pseudo_labels,
                   metrics=pseudo_labels.with_suffix(".json"), labeler=knobs["labeler"],
                   device=device, model=model)
    if knobs.get("generated") and knobs.get("generated_labeler"):
        labeler_checkpoint = train_method(knobs["generated_labeler"], out_dir=out_dir,
                                          dataset=dataset, model=model, seed=seed, params=params,
                                          device=device).checkpoint
    run_dir = out_dir / method
    summary = train.run(params, dataset=dataset, model=model, method=method, seed=seed,
                        split_path=split, pseudo_path=pseudo_labels, out_dir=run_dir,
                        labeler_checkpoint=labeler_checkpoint, device=device)
    return TrainResult(checkpoint=run_dir / "best.pt", last=run_dir / "last.pt",
                       log=run_dir / "train_log.csv", curves=run_dir / "dvclive", split=split,
                       best_epoch=summary["best_epoch"], best_score=summary["best_score"])


def load_model(checkpoint: str | Path, device: str | torch.device = "cpu"
               ) -> tuple[nn.Module, dict[str, Any]]:
    """A checkpoint's EMA model in eval mode, and its metadata (dataset, method, seed, ...)."""
    return inference.load_model(Path(checkpoint), pick_device(device))


def evaluate_checkpoint(checkpoint: str | Path, *, params: ParamsLike = "params.yaml",
                        split: str | Path | None = None, out: str | Path | None = None,
                        device: str | torch.device | None = "cpu") -> EvaluationResult:
    """The attack suite of params.yaml's `evaluation` on a checkpoint's test set.

    The dataset, model, method and seed come from the checkpoint. Without `split`, the test set
    is that of the checkpoint's seed, made again (splits are deterministic). The metrics JSON goes
    to `out` (default: beside the checkpoint, metrics.json).
    """
    params, checkpoint, device = _params(params), Path(checkpoint), pick_device(device)
    _, meta = inference.load_model(checkpoint, torch.device("cpu"))
    if split is None:
        split = _split(params, meta["dataset"], meta["seed"], checkpoint.parent)
    out = Path(out) if out is not None else checkpoint.parent / "metrics.json"
    result = evaluate.run(params, dataset=meta["dataset"], model=meta["model"],
                          method=meta["method"], seed=meta["seed"], split_path=Path(split),
                          checkpoint=checkpoint, out=out, device=device)
    return EvaluationResult(accuracy=result["accuracy"], manifest=result["manifest"], path=out)

