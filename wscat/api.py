"""The Python API: build a model, train a method, evaluate a checkpoint, from your own code.

These are the pipeline's own steps (the ones `wscat <step>` and the Snakemake rules run), with
the files they exchange kept in one folder:

    from wscat import api

    params = api.load_params("params.yaml")
    run = api.train_method("trades", params=params, dataset="digits", seed=1, out_dir="runs/digits")
    test = api.test_set(run.split, params=params)             # the seed's test images and labels
    predicted = api.predict(api.load_model(run.checkpoint)[0], test.images)
    result = api.evaluate_checkpoint(run.checkpoint, params=params)   # part="core"
    print(result.accuracy)      # Natural, FGSM, PGD, CW, AA and their harmonic Mean
    api.export_model(run.checkpoint, result.path, "runs/digits/trades-digits.json")

A method that trains on pseudo-labels (WSCAT, RST) first trains its labeler in the same folder,
as the workflow does. Every knob comes from the params (a params.yaml path or its loaded dict).
docs/api.md has the complete example (a test runs it) and typical times.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wscat import inference
from wscat.config import ConfigError, load_params as _load_params, method_for, validate_params
from wscat.data import ImageDataset, load_dataset as _load_dataset, load_split
from wscat.device import named, pick_device
from wscat.export import export_model, load_exported
from wscat.steps import evaluate, pseudo, split as split_step, train

__all__ = ["EvaluationResult", "TestSet", "TrainResult", "build_model", "evaluate_checkpoint",
           "export_model", "load_dataset", "load_exported", "load_model", "load_params",
           "predict", "test_set", "train_method"]

ParamsLike = Mapping[str, Any] | str | Path
DeviceLike = str | torch.device | None
# The repository's own params file, when wscat runs from a checkout (an editable install).
_REPO_PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


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


@dataclass(frozen=True)
class TestSet:
    """The test images of a split, in [0,1] (N x C x H x W float), their labels, and their
    indices into the dataset."""

    images: torch.Tensor
    labels: torch.Tensor
    indices: torch.Tensor

    __test__ = False  # not a pytest test class, whatever imports it


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read and validate a params file (relative paths are from the current folder)."""
    path = Path(path)
    if not path.is_file():
        hint = (f", e.g. api.load_params({str(_REPO_PARAMS)!r})" if _REPO_PARAMS.is_file()
                and path.resolve() != _REPO_PARAMS else "")
        raise ConfigError(f"params file not found: {path.resolve()}; give the path of a wscat "
                          f"params.yaml{hint}, or pass params= a dict with its sections")
    return _load_params(path)


def _params(params: ParamsLike) -> dict[str, Any]:
    if isinstance(params, (str, Path)):
        return load_params(params)
    return validate_params(dict(params))


def load_dataset(name: str = "digits", *, params: ParamsLike = "params.yaml") -> ImageDataset:
    """All images of dataset `name` (`images`: N x C x H x W, uint8 or float in [0,1]; `labels`;
    `num_classes`; `train_size`: where the official test images start, or None)."""
    params = _params(params)
    if name not in params["datasets"]:
        raise ConfigError(f"unknown dataset '{name}'; configured: {', '.join(params['datasets'])}")
    return _load_dataset(name, params["datasets"][name])


def test_set(split: str | Path, *, params: ParamsLike = "params.yaml") -> TestSet:
    """The test images and labels of a split file (TrainResult.split, `wscat split`'s output).
    evaluate_checkpoint attacks the first `evaluation.n_examples` of them in a class-stratified
    order."""
    found = load_split(split)
    source = load_dataset(found.dataset, params=params)
    indices = torch.as_tensor(found.test)
    images, labels = source.take(indices, torch.device("cpu"))
    return TestSet(images=images, labels=labels, indices=indices)


test_set.__test__ = False  # type: ignore[attr-defined]  # not a pytest test either


def predict(model: nn.Module, images: torch.Tensor, device: DeviceLike = None) -> torch.Tensor:
    """Predicted classes (argmax) of an eval-mode model on images in [0,1] (or uint8), on the
    model's device unless `device` is given; a wscat model and an exported (logits-only) one."""
    return inference.predict(model, images, None if device is None else pick_device(device))


def build_model(name: str, *, dataset: str = "digits", params: ParamsLike = "params.yaml"
                ) -> nn.Module:
    """An untrained model `models.<name>` for `dataset` (its channels, classes and the
    normalisation the model applies inside). It maps [0,1] images to (features, logits)."""
    params = _params(params)
    if name not in params["models"]:
        raise ValueError(f"unknown model '{name}'; configured: {', '.join(params['models'])}")
    from wscat.models import build_model as build

    source = _load_dataset(dataset, params["datasets"][dataset])
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
                 device: DeviceLike = "auto") -> TrainResult:
    """Train `method` on `dataset` for one seed; files go to out_dir/<method>/.

    The split is out_dir/split-seed<seed>.npz (made if missing). A method on pseudo-labels
    trains its labeler into out_dir/<labeler>/ first and labels the unlabelled part with it;
    DMAT's unlabelled generated images are labelled the same way. `device` "auto": CUDA where
    there is one; a paper-size model (10M+ parameters) trains on a CPU only with device="cpu".
    """
    params, out_dir, device_named = _params(params), Path(out_dir), named(device)
    device = pick_device(device)
    split = _split(params, dataset, seed, out_dir)
    knobs = method_for(params, method, dataset)
    pseudo_labels, labeler_checkpoint = None, None
    if knobs["data"] == "pseudo":
        labeler = train_method(knobs["labeler"], out_dir=out_dir, dataset=dataset, model=model,
                               seed=seed, params=params,
                               device=device if device_named else "auto")
        pseudo_labels = out_dir / f"pseudo-{knobs['labeler']}-seed{seed}.npz"
        pseudo.run(params, dataset=dataset, seed=seed, split_path=split,
                   checkpoint=labeler.checkpoint, out=pseudo_labels,
                   metrics=pseudo_labels.with_suffix(".json"), labeler=knobs["labeler"],
                   device=device, model=model)
    if knobs.get("generated") and knobs.get("generated_labeler"):
        labeler_checkpoint = train_method(knobs["generated_labeler"], out_dir=out_dir,
                                          dataset=dataset, model=model, seed=seed, params=params,
                                          device=device if device_named else "auto").checkpoint
    run_dir = out_dir / method
    summary = train.run(params, dataset=dataset, model=model, method=method, seed=seed,
                        split_path=split, pseudo_path=pseudo_labels, out_dir=run_dir,
                        labeler_checkpoint=labeler_checkpoint, device=device,
                        device_named=device_named)
    return TrainResult(checkpoint=run_dir / "best.pt", last=run_dir / "last.pt",
                       log=run_dir / "train_log.csv", curves=run_dir / "dvclive", split=split,
                       best_epoch=summary["best_epoch"], best_score=summary["best_score"])


def load_model(checkpoint: str | Path, device: DeviceLike = "cpu"
               ) -> tuple[nn.Module, dict[str, Any]]:
    """A checkpoint's EMA model in eval mode, (features, logits) of [0,1] images, and its
    metadata (dataset, method, seed, ...)."""
    return inference.load_model(Path(checkpoint), pick_device(device))


PARTS = {"core": "metrics.json", "all": "metrics.json", "extra": "metrics-extra.json"}


def evaluate_checkpoint(checkpoint: str | Path, *, params: ParamsLike = "params.yaml",
                        part: str = "core", split: str | Path | None = None,
                        out: str | Path | None = None, core: str | Path | None = None,
                        device: DeviceLike = "auto") -> EvaluationResult:
    """The attack suite of params.yaml's `evaluation` on a checkpoint's test set.

    `part`: "core" (the paper's Natural, FGSM, PGD-20, CW-20, AutoAttack and their harmonic Mean,
    what the workflow's tables read), "extra" (AA-paper, NRF and the gradient-masking checks; it
    reads the core file `core`, default metrics.json beside the checkpoint) or "all" (both, in
    one file). The dataset, model, method and seed come from the checkpoint. Without `split`,
    the test set is that of the checkpoint's seed, made again (splits are deterministic). The
    metrics JSON goes to `out` (default: beside the checkpoint, metrics.json; the extras:
    metrics-extra.json).
    """
    if part not in PARTS:
        raise ValueError(f"unknown part '{part}'; choose one of {', '.join(PARTS)}")
    params, checkpoint, device = _params(params), Path(checkpoint), pick_device(device)
    _, meta = inference.load_model(checkpoint, torch.device("cpu"))
    if split is None:
        split = _split(params, meta["dataset"], meta["seed"], checkpoint.parent)
    out = Path(out) if out is not None else checkpoint.parent / PARTS[part]
    if part == "extra":
        core = Path(core) if core is not None else checkpoint.parent / PARTS["core"]
    result = evaluate.run(params, dataset=meta["dataset"], model=meta["model"],
                          method=meta["method"], seed=meta["seed"], split_path=Path(split),
                          checkpoint=checkpoint, out=out, device=device, part=part,
                          core_path=None if core is None else Path(core))
    return EvaluationResult(accuracy=result["accuracy"], manifest=result["manifest"], path=out)
