"""The Python API: build a model, train a method, evaluate a checkpoint, from your own code.

These are the pipeline's own steps (the ones `wscat <step>` and the Snakemake rules run), with
the files they exchange kept in one folder:

    from wscat import api

    params = api.load_params("params.yaml")
    run = api.train_method("trades", params=params, dataset="digits", seed=1, out_dir="runs/digits",
                           threads=1)   # one CPU thread: the workflow's numbers, bit for bit
    test = api.test_set(run.split, params=params)             # the seed's test images and labels
    predicted = api.predict(api.load_model(run.checkpoint)[0], test.images)
    result = api.evaluate_checkpoint(run.checkpoint, params=params, threads=1)   # part="core"
    print(result.accuracy)      # Natural, FGSM, PGD, CW, AA and their harmonic Mean
    api.export_model(run.checkpoint, result.path, "runs/digits/trades-digits.json")
    mine = api.evaluate_model(my_model, test.images, test.labels, dataset="digits")  # any model

A method that trains on pseudo-labels (WSCAT, RST) first trains its labeler in the same folder,
as the workflow does. Every knob comes from the params (a params.yaml path or its loaded dict).
Bad input is one ValueError line saying what to pass, raised before anything is written.
docs/api.md has the complete example (a test runs it) and typical times.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wscat import inference
from wscat.api_checks import (InputNotFound, as_path, check_model_argument, check_names,
                              check_output, check_run_of, check_training, checked_seed,
                              checked_threads, guard, images_for, input_file, short)
from wscat.checkpoint import CheckpointError, checkpoint_meta
from wscat.config import ConfigError, load_params as _load_params, method_for, validate_params
from wscat.data import ImageDataset, load_dataset as _load_dataset, load_split
from wscat.data.split import check_split_fits
from wscat.device import named, pick_device
from wscat.export import export_model as _export_model, load_exported as _load_exported
from wscat.external import ModelEvaluation, check_logits_model, evaluate as _evaluate_model
from wscat.io import check_writable
from wscat.models import LogitsOnly
from wscat.paths import RESUME_DIR
from wscat.steps import evaluate, pseudo, split as split_step, train
from wscat.training.speed import backend_held
from wscat.workflow import training_fingerprint

__all__ = ["EvaluationResult", "InputNotFound", "ModelEvaluation", "TestSet", "TrainResult",
           "build_model", "evaluate_checkpoint", "evaluate_model", "export_model", "load_dataset",
           "load_exported", "load_model", "load_params", "predict", "test_set", "train_method"]

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
    path = as_path(path, "path", "the path of a wscat params.yaml")
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a params file; give the path of the "
                          "params.yaml in it")
    if not path.is_file():
        hint = (f", e.g. api.load_params({str(_REPO_PARAMS)!r})" if _REPO_PARAMS.is_file()
                and path.resolve() != _REPO_PARAMS else "")
        raise ConfigError(f"params file not found: {path.resolve()}; give the path of a wscat "
                          f"params.yaml{hint}, or pass params= a dict with its sections")
    return _load_params(path)


def _params(params: ParamsLike) -> dict[str, Any]:
    if isinstance(params, (str, os.PathLike)):
        return load_params(params)
    if not isinstance(params, Mapping):
        raise ConfigError(f"params= takes the path of a params.yaml or its loaded dict, not "
                          f"{short(params)}; e.g. params=api.load_params('params.yaml')")
    return validate_params(dict(params), "params=")  # its refusals name the argument




def load_dataset(name: str = "digits", *, params: ParamsLike = "params.yaml") -> ImageDataset:
    """All images of dataset `name` (`images`: N x C x H x W, uint8 or float in [0,1]; `labels`;
    `num_classes`; `train_size`: where the official test images start, or None)."""
    params = _params(params)
    check_names(params, dataset=name)
    return _load_dataset(name, params["datasets"][name])


def test_set(split: str | Path, *, params: ParamsLike = "params.yaml") -> TestSet:
    """The test images and labels of a split file (TrainResult.split, `wscat split`'s output).
    evaluate_checkpoint attacks the first `evaluation.n_examples` of them in a class-stratified
    order."""
    split = input_file(split, "split")
    found = load_split(split)
    params = _params(params)
    if found.dataset not in params["datasets"]:  # "unknown dataset": the user named none
        raise ValueError(f"{split} is a split of dataset '{found.dataset}', which params= does "
                         "not configure; pass params= the ones the split was made with")
    source = load_dataset(found.dataset, params=params)
    check_split_fits(found, len(source.labels), split)
    indices = torch.as_tensor(found.test)
    images, labels = source.take(indices, torch.device("cpu"))
    return TestSet(images=images, labels=labels, indices=indices)


test_set.__test__ = False  # type: ignore[attr-defined]  # not a pytest test either


def predict(model: nn.Module, images: torch.Tensor | np.ndarray, device: DeviceLike = None
            ) -> torch.Tensor:
    """Predicted classes (argmax, on the CPU) of an eval-mode model on N x C x H x W images:
    a tensor or a numpy array, uint8 (0..255) or floats in [0, 1]; on the model's device (the
    CPU for a model without parameters or buffers) unless `device` is given; a wscat model, an
    exported (logits-only) one, or another model that maps images to N x K logits (a tuple
    output is refused: its logits' place is unknown). Another layout
    (channel-last), float pixels outside [0, 1] or a list are refused, saying what to pass."""
    check_model_argument(model)
    images = images_for(model, images)
    device = None if device is None else pick_device(device, flag="device=")
    if not len(images):
        return torch.empty(0, dtype=torch.long)
    check_logits_model(model, images[:1], device)  # another model's tuple: refused, not misread
    return inference.predict(model, images, device)


def build_model(name: str, *, dataset: str = "digits", params: ParamsLike = "params.yaml"
                ) -> nn.Module:
    """An untrained model `models.<name>` for `dataset` (its channels, classes and the
    normalisation the model applies inside). It maps [0,1] images to (features, logits)."""
    params = _params(params)
    check_names(params, dataset=dataset, model=name)
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


@contextlib.contextmanager
def _cpu_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to `threads` for one call (None: left as they are), then back."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_method(method: str, *, out_dir: str | Path, dataset: str = "digits", model: str = "cnn",
                 seed: int = 1, params: ParamsLike = "params.yaml",
                 device: DeviceLike = "auto", threads: int | None = None) -> TrainResult:
    """Train `method` on `dataset` for one seed; files go to out_dir/<method>/.

    The split is out_dir/split-seed<seed>.npz (made if missing). A method on pseudo-labels
    trains its labeler into out_dir/<labeler>/ first and labels the unlabelled part with it;
    DMAT's unlabelled generated images are labelled the same way. `device` "auto": CUDA where
    there is one; a paper-size model (10M+ parameters) trains on a CPU only with device="cpu".
    `threads`: torch's CPU threads during the call (None: torch's count). A CPU's float sums
    depend on it, so the workflow's numbers, computed on one thread a job, need threads=1.
    Every argument (`seed`: an int in 0..2^32-1) is checked before anything is written.
    """
    params = _params(params)
    check_names(params, dataset=dataset, model=model, method=method)
    seed, threads = checked_seed(seed), checked_threads(threads)
    out_dir = as_path(out_dir, "out_dir", "a folder for the runs' files (made if missing)")
    device_named, device = named(device), pick_device(device, flag="device=")
    check_training(params, method, dataset=dataset, model=model, seed=seed, out_dir=out_dir,
                    device=device, device_named=device_named)
    with _cpu_threads(threads):
        return _train(params, method, dataset=dataset, model=model, seed=seed, out_dir=out_dir,
                      device=device, device_named=device_named)


def _train(params: dict[str, Any], method: str, *, dataset: str, model: str, seed: int,
           out_dir: Path, device: torch.device, device_named: bool) -> TrainResult:
    """train_method once its arguments are checked: the labelers' runs, then the method's."""
    same = {"dataset": dataset, "model": model, "seed": seed, "out_dir": out_dir,
            "device": device, "device_named": device_named}
    split = _split(params, dataset, seed, out_dir)
    knobs = method_for(params, method, dataset)
    pseudo_labels, labeler_checkpoint = None, None
    if knobs["data"] == "pseudo":
        labeler = _labeler(params, knobs["labeler"], **same)
        pseudo_labels = out_dir / f"pseudo-{knobs['labeler']}-seed{seed}.npz"
        pseudo.run(params, dataset=dataset, seed=seed, split_path=split,
                   checkpoint=labeler, out=pseudo_labels,
                   metrics=pseudo_labels.with_suffix(".json"), labeler=knobs["labeler"],
                   device=device, model=model)
    if knobs.get("generated") and knobs.get("generated_labeler"):
        labeler_checkpoint = _labeler(params, knobs["generated_labeler"], **same)
    run_dir = out_dir / method
    with backend_held():  # the pseudo-labels of a later call: computed as a fresh process's
        summary = train.run(params, dataset=dataset, model=model, method=method, seed=seed,
                            split_path=split, pseudo_path=pseudo_labels, out_dir=run_dir,
                            labeler_checkpoint=labeler_checkpoint, device=device,
                            device_named=device_named)
    return TrainResult(checkpoint=run_dir / "best.pt", last=run_dir / "last.pt",
                       log=run_dir / "train_log.csv", curves=run_dir / "dvclive", split=split,
                       best_epoch=summary["best_epoch"], best_score=summary["best_score"])


def _labeler(params: dict[str, Any], method: str, *, dataset: str, model: str, seed: int,
             out_dir: Path, device: torch.device, device_named: bool) -> Path:
    """The best.pt of a labeler's run: out_dir/<method>/'s where that run finished with these
    params (its training fingerprint theirs, no resume/ left), as Snakemake keeps an up-to-date
    job, so a second call (resuming the method, or another method on the same labels) does not
    train it again; otherwise trained now."""
    run_dir = out_dir / method
    best = run_dir / "best.pt"
    if best.is_file() and not (run_dir / RESUME_DIR / "last.pt").is_file():
        try:
            meta = checkpoint_meta(best)
        except CheckpointError:
            meta = {}
        held = tuple(meta.get(k) for k in ("dataset", "model", "method", "seed",
                                           "training_fingerprint"))
        if held == (dataset, model, method, seed,
                    training_fingerprint(params, dataset, model, method)):
            print(f"{run_dir}: {method} seed {seed} finished with these params: kept (delete "
                  "the folder to train it again)", file=sys.stderr, flush=True)
            return best
    return _train(params, method, dataset=dataset, model=model, seed=seed, out_dir=out_dir,
                  device=device, device_named=device_named).checkpoint


def load_model(checkpoint: str | Path, device: DeviceLike = "cpu"
               ) -> tuple[nn.Module, dict[str, Any]]:
    """A checkpoint's EMA model in eval mode, (features, logits) of [0,1] images, and its
    metadata (dataset, method, seed, ...)."""
    return inference.load_model(input_file(checkpoint, "checkpoint"),
                                pick_device(device, flag="device="))


PARTS = {"core": "metrics.json", "all": "metrics.json", "extra": "metrics-extra.json"}


def evaluate_checkpoint(checkpoint: str | Path, *, params: ParamsLike = "params.yaml",
                        part: str = "core", split: str | Path | None = None,
                        out: str | Path | None = None, core: str | Path | None = None,
                        device: DeviceLike = "auto", threads: int | None = None
                        ) -> EvaluationResult:
    """The attack suite of params.yaml's `evaluation` on a checkpoint's test set.

    `part`: "core" (the paper's Natural, FGSM, PGD-20, CW-20, AutoAttack and their harmonic Mean,
    what the workflow's tables read), "extra" (AA-paper, NRF and the gradient-masking checks; it
    reads the core file `core`, default metrics.json beside the checkpoint) or "all" (both, in
    one file). The dataset, model, method and seed come from the checkpoint. Without `split`,
    the test set is that of the checkpoint's seed, made again (splits are deterministic). The
    metrics JSON goes to `out` (default: beside the checkpoint, metrics.json; the extras:
    metrics-extra.json). `threads` as train_method's (the workflow's numbers: threads=1). Every
    argument is checked before anything is written; a split this call made is removed again if
    the evaluation refuses.
    """
    if not isinstance(part, str) or part not in PARTS:
        raise ValueError(f"unknown part {short(part)}; choose one of {', '.join(PARTS)}")
    if core is not None and part != "extra":  # not read: say so rather than ignore it
        raise ValueError(f"core= is read by part='extra' only, not part='{part}'; drop it")
    params, checkpoint = _params(params), input_file(checkpoint, "checkpoint")
    threads = checked_threads(threads)
    split = None if split is None else input_file(split, "split")
    device = pick_device(device, flag="device=")
    _, meta = inference.load_model(checkpoint, torch.device("cpu"))
    check_run_of(checkpoint, meta, params)
    if part == "extra":
        core = input_file(checkpoint.parent / PARTS["core"] if core is None else core, "core")
    out = (checkpoint.parent / PARTS[part] if out is None
           else as_path(out, "out", "the path of the metrics JSON to write"))
    check_output(out, "metrics", "out", "evaluate_checkpoint",
                 {**{key: meta.get(key) for key in ("dataset", "model", "method", "seed")},
                  "part": part})
    guard({"checkpoint=": checkpoint, "split=": split, "core=": core}, {"out=": out})
    check_writable(out)
    made = None  # the split this call makes, removed again if the evaluation refuses
    if split is None:
        split = checkpoint.parent / f"split-seed{meta['seed']}.npz"
        made = None if split.exists() else split
        _split(params, meta["dataset"], meta["seed"], checkpoint.parent)
    try:
        with _cpu_threads(threads), backend_held():
            result = evaluate.run(params, dataset=meta["dataset"], model=meta["model"],
                                  method=meta["method"], seed=meta["seed"], split_path=split,
                                  checkpoint=checkpoint, out=out, device=device, part=part,
                                  core_path=core)
    except ValueError:
        if made is not None:
            made.unlink(missing_ok=True)
        raise
    return EvaluationResult(accuracy=result["accuracy"], manifest=result["manifest"], path=out)


def evaluate_model(model: nn.Module, images: torch.Tensor | np.ndarray,
                   labels: torch.Tensor | np.ndarray, *, dataset: str,
                   params: ParamsLike = "params.yaml", seed: int = 1, threads: int | None = None,
                   resume_dir: str | Path | None = None) -> ModelEvaluation:
    """The core attack suite (Natural, FGSM, PGD-20, CW-20, the official standard AutoAttack and
    their harmonic Mean) on any eval-mode model, on its device: one of RobustBench's, your own,
    an exported entry (images -> logits) or a wscat model ((features, logits)). The threat model
    (eps, step size) is `datasets.<dataset>`'s and every attack setting `evaluation`'s, so the
    numbers stand beside a table's rows; `seed` draws PGD's and CW's random starts, as a run's
    seed does. The images attacked are the first `evaluation.n_examples` of the class-stratified
    order of the labels: given `test_set(split)`, the images the workflow's metrics of that
    split measured (`ModelEvaluation.indices`). Images as `predict` takes them; labels one class
    index per image. `dataset` has no default: its eps is the threat model (digits' is not
    CIFAR's). Nothing is written unless `resume_dir` is given: a folder (made if missing) where
    each finished AutoAttack shard is kept, so that a killed call given it again continues at
    the first unfinished shard (a shard is reused only where model, images and settings match)."""
    check_model_argument(model)
    params = _params(params)
    check_names(params, dataset=dataset)
    seed, threads = checked_seed(seed), checked_threads(threads)
    shard_dir = None if resume_dir is None else as_path(resume_dir, "resume_dir",
                                                        "a folder's path (made if missing)")
    check_writable(shard_dir, folders=True)  # before the attacks, not at the first shard
    images = images_for(model, images)
    with _cpu_threads(threads):
        return _evaluate_model(model, images, labels, params=params, dataset=dataset, seed=seed,
                               shard_dir=shard_dir)


def export_model(checkpoint: str | Path, metrics: str | Path, out: str | Path, *,
                 name: str | None = None) -> dict[str, Any]:
    """Write `out` (a RobustBench-style JSON entry) and, beside it, its state dict (.pt); return
    the entry. `metrics` must be the checkpoint's own (EvaluationResult.path); everything is
    checked before anything is written (wscat.export.export_model)."""
    checkpoint, metrics = input_file(checkpoint, "checkpoint"), input_file(metrics, "metrics")
    out = as_path(out, "out", "the path of the entry's NAME.json")
    if out.suffix != ".json":
        raise ValueError(f"out={out} must name a .json file (the state dict goes beside it, as "
                         ".pt); pass NAME.json")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name={short(name)} is not a str; pass the entry's name, or none")
    guard({"checkpoint=": checkpoint, "metrics=": metrics},  # an input as out=: ValueError
          {"out=": out, f"out= ({out.with_suffix('.pt').name})": out.with_suffix(".pt")})
    return _export_model(checkpoint, metrics, out, name=name,
                         flags={"checkpoint": "checkpoint=", "metrics": "metrics=", "out": "out="})


def load_exported(entry: str | Path, device: DeviceLike = "cpu") -> LogitsOnly:
    """The model of an exported entry (NAME.json), in eval mode, its state dict's hash checked:
    [0,1] images -> logits, as RobustBench's `benchmark` and AutoAttack expect; `.model` is the
    wscat network (features, logits) (wscat.export.load_exported)."""
    entry, device = input_file(entry, "entry"), pick_device(device, flag="device=")
    weights = json.loads(entry.read_text()).get("state_dict")
    if not isinstance(weights, str) or not (entry.parent / weights).is_file():
        raise InputNotFound(f"{entry.parent / str(weights)}, the state dict of {entry}, not "
                            "found; keep NAME.pt beside NAME.json (copy both), or export again")
    return _load_exported(entry, device)
