"""The pipeline steps behind `wscat <step>`: each reads files, writes files atomically, and records
a manifest. The Snakemake rules call these through the command line."""
from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wscat import __version__
from wscat.checkpoint import CheckpointError, check_model, load_checkpoint, load_weights, model_spec
from wscat.config import RunConfig
from wscat.data import ImageDataset, Split, load_dataset, load_split, make_split, save_split
from wscat.data.sources.base import one_line
from wscat.data.split import check_split_fits
from wscat.errors import NPZ_ERRORS
from wscat.evaluation import (SuiteResult, attack_suite, core_suite, extra_suite,
                              stratified_order, subset_name)
from wscat.io import atomic_path, check_writable, write_json
from wscat.models import build_model
from wscat.training import TrainingData, train
from wscat.training.speed import autocast, configure_backend, to_unit


def versions() -> dict[str, str]:
    """Package versions and git revision, for manifests."""
    found = {"python": platform.python_version(), "wscat": __version__}
    for package in ("torch", "torchvision", "pyautoattack", "numpy", "scikit-learn"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    try:
        found["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        found["git"] = "unknown"
    return found


def machine(device: torch.device) -> str:
    """The hardware a run used, for Tab-ap-time's caption: GPU name, or CPU model and threads."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = platform.processor() or "CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = torch.get_num_threads()
    return f"{name} ({threads} thread{'s' if threads > 1 else ''})"


def run_split(params: dict[str, Any], dataset: str, seed: int, out: Path) -> Split:
    """Write results/splits/{dataset}/seed{seed}.npz."""
    cfg = params["datasets"][dataset]
    check_writable(out)
    source = load_dataset(dataset, cfg)
    split = make_split(dataset, source.labels.numpy(), num_classes=source.num_classes, seed=seed,
                       test_fraction=cfg["test_fraction"], labelled=cfg["labelled"],
                       val_fraction=cfg["val_fraction"], val_max=cfg["val_max"],
                       train_size=source.train_size,
                       unlabelled_fraction=cfg.get("unlabelled_fraction", 1.0))
    save_split(split, out)
    return split


def _checked_split(path: Path, dataset: str, seed: int) -> Split:
    split = load_split(path)
    if split.dataset != dataset or split.seed != seed:
        raise ValueError(f"{path} is the split of {split.dataset} seed {split.seed}, not of "
                         f"{dataset} seed {seed}")
    return split


def load_pseudo_labels(path: Path, split: Split, num_classes: int) -> np.ndarray:
    """Pseudo-labels of split.unlabelled, in that order, each a class index below
    `num_classes`."""
    if not path.is_file():
        raise FileNotFoundError(f"pseudo-label file not found: {path} (run `wscat pseudo-label`)")
    try:
        with np.load(path, allow_pickle=False) as data:
            indices, labels = data["indices"], data["pseudo_labels"]
    except NPZ_ERRORS as error:
        raise ValueError(f"{path} is not a wscat pseudo-label file ({one_line(error)}); delete it "
                         "and rerun `wscat pseudo-label`") from error
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
    with np.load(path, allow_pickle=False) as data:
        if "images" not in data:
            raise ValueError(f"{path} must hold `images` (uint8 N x H x W x C) and may hold "
                             f"`labels`; it holds {', '.join(data.files)}")
        images = data["images"]
        labels = data["labels"] if "labels" in data else None
    expected = (source.image_shape[1], source.image_shape[2], source.image_shape[0])
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != expected:
        raise ValueError(f"{path}: images must be uint8 N x {' x '.join(map(str, expected))}, got "
                         f"{images.dtype} {' x '.join(map(str, images.shape))}")
    if labels is not None and (len(labels) != len(images) or labels.min() < 0
                               or labels.max() >= source.num_classes):
        raise ValueError(f"{path}: need one label in 0..{source.num_classes - 1} per image")
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    if source.images.dtype != torch.uint8:  # a float dataset (digits): compare in [0,1]
        x = x.float() / 255.0
    return x, None if labels is None else torch.from_numpy(labels.astype(np.int64))


@torch.no_grad()
def predict(model: torch.nn.Module, images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """argmax labels of an eval-mode model on un-augmented images, in batches of 512."""
    return torch.cat([model(to_unit(images[i:i + 512].to(device)))[1].argmax(1).cpu()
                      for i in range(0, len(images), 512)])


def with_generated(data: TrainingData, run: RunConfig, source: ImageDataset,
                   labeler_checkpoint: Path | None, device: torch.device) -> TrainingData:
    """DMAT: generated images fill `generated_fraction` of every batch (drawn with replacement),
    labelled by the npz or by the labeler's checkpoint."""
    knobs = run.method_params
    x_g, y_g = load_generated(Path(knobs["generated"]), source)
    if y_g is None:
        if labeler_checkpoint is None:
            raise ValueError(f"{knobs['generated']} has no labels: set methods.{run.method}."
                             "generated_labeler (e.g. mt) or add `labels` to the file")
        y_g = predict(load_model(labeler_checkpoint, device, model=run.model,
                                 spec=run.model_spec)[0], x_g, device)
    batch = run.training["batch_size"]
    n_generated = int(knobs["generated_fraction"] * batch)
    return replace(data, unlabelled_x=torch.cat([data.unlabelled_x, x_g.to(data.unlabelled_x.dtype)]),
                   unlabelled_y=torch.cat([data.unlabelled_y, y_g]),
                   labelled_per_batch=batch - n_generated if knobs["data"] == "labelled" else None)


def run_train(params: dict[str, Any], *, dataset: str, model: str, method: str, seed: int,
              split_path: Path, pseudo_path: Path | None, out_dir: Path,
              device: torch.device, labeler_checkpoint: Path | None = None) -> dict[str, Any]:
    """Train one (dataset, model, method, seed)."""
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    check_writable(out_dir, folders=True)
    split = _checked_split(split_path, dataset, seed)
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


def load_model(checkpoint: Path, device: torch.device, *, model: str | None = None,
               spec: dict[str, Any] | None = None) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The EMA model of a checkpoint, in eval mode, and the checkpoint's metadata. With `model`
    and `spec` (its params.yaml entry), a checkpoint of another model is refused."""
    state = load_checkpoint(checkpoint, map_location=device)
    meta = state["meta"]
    if model is not None and spec is not None:
        check_model(checkpoint, meta, model, spec)
    try:
        net = build_model(**model_spec(meta), in_channels=meta["in_channels"],
                          num_classes=meta["num_classes"], mean=tuple(meta["mean"]),
                          std=tuple(meta["std"])).to(device)
        weights = state["ema"]
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{checkpoint}: its metadata does not describe a model "
                              f"({type(error).__name__}: {error}); delete it and retrain") from error
    load_weights(net, weights, checkpoint)
    return net.eval(), {**meta, "epoch": state.get("epoch", state.get("best", {}).get("epoch"))}


def run_pseudo_label(params: dict[str, Any], *, dataset: str, seed: int, split_path: Path,
                     checkpoint: Path, out: Path, metrics: Path, labeler: str,
                     device: torch.device, model: str | None = None) -> dict[str, Any]:
    """Label the unlabelled part with the labeler's final/best EMA model (eval, no augmentation).
    With `model`, a checkpoint of another model is refused."""
    check_writable(out, metrics)
    split = _checked_split(split_path, dataset, seed)
    source = load_dataset(dataset, params["datasets"][dataset])
    check_split_fits(split, len(source.labels), split_path)
    spec = None if model is None else RunConfig.from_params(
        params, dataset=dataset, model=model, method=labeler, seed=seed).model_spec
    model, meta = load_model(checkpoint, device, model=model, spec=spec)
    predicted = predict(model, source.images[torch.as_tensor(split.unlabelled)], device)
    truth = source.labels[torch.as_tensor(split.unlabelled)]  # for the metric only
    per_class = {str(c): round(100.0 * float((predicted[truth == c] == c).float().mean()), 4)
                 for c in range(source.num_classes) if bool((truth == c).any())}
    report = {"dataset": dataset, "seed": seed, "labeler": labeler, "n": len(predicted),
              "accuracy": round(100.0 * float((predicted == truth).float().mean()), 4),
              "per_class_accuracy": per_class,
              "manifest": {"checkpoint": str(checkpoint), "checkpoint_epoch": meta["epoch"],
                           "ema": True, "mode": "eval", "versions": versions()}}
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, indices=split.unlabelled, pseudo_labels=predicted.numpy())
    write_json(metrics, report)
    return report


PARTS = ("all", "core", "extra")


def _core_result(path: Path, run: tuple[str, str, str, int]) -> SuiteResult:
    """The core suite's numbers, read back from its metrics file (the extras' checks need them)."""
    try:
        data = json.loads(Path(path).read_text())
        found = (data["dataset"], data["model"], data["method"], data["seed"])
        accuracy, manifest = data["accuracy"], data["manifest"]["attacks"]
        manifest["AA"]["clean_accuracy"], manifest["AA"]["robust_accuracy_after"]
    except FileNotFoundError:
        raise FileNotFoundError(f"core metrics not found: {path} (run `wscat evaluate --part core`)"
                                ) from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a core metrics file of `wscat evaluate` ({err})") from None
    if found != run:
        raise ValueError(f"{path} holds {found[2]} seed {found[3]} on {found[0]}/{found[1]}, not "
                         f"{run[2]} seed {run[3]} on {run[0]}/{run[1]}")
    return SuiteResult(accuracy=accuracy, attacks=manifest, checks={},
                       autoattack_warnings=data.get("autoattack_warnings", {}), per_image={})


def run_evaluate(params: dict[str, Any], *, dataset: str, model: str, method: str, seed: int,
                 split_path: Path, checkpoint: Path, out: Path, device: torch.device,
                 part: str = "all", core_path: Path | None = None) -> dict[str, Any]:
    """The attack suite on the test set; writes the metrics JSON with its manifest.

    `part`: core (the paper's five columns and Mean, with per-example correctness), extra (the
    paper's AutoAttack variant, NRF and the gradient-masking checks; reads the core file
    `core_path`), or all (both in one file). The test images are attacked in a class-stratified
    order (`evaluation.subset_seed`), so every subset is the first n of it. Finished AutoAttack
    shards wait in `{out}.shards/` until the metrics are written: a killed evaluation resumes."""
    if part not in PARTS:
        raise ValueError(f"unknown part '{part}'; choose one of {', '.join(PARTS)}")
    if part == "extra" and core_path is None:
        raise ValueError("--part extra reads the core metrics: pass --core FILE")
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    check_writable(out)
    core = _core_result(core_path, (dataset, model, method, seed)) if part == "extra" else None
    split = _checked_split(split_path, dataset, seed)
    net, meta = load_model(checkpoint, device, model=model, spec=run.model_spec)
    if (meta.get("dataset"), meta.get("method"), meta.get("seed")) != (dataset, method, seed):
        raise ValueError(f"{checkpoint} holds {meta.get('method')} seed {meta.get('seed')} on "
                         f"{meta.get('dataset')}, not {method} seed {seed} on {dataset}")
    evaluation, threat = run.evaluation, run.data
    source = load_dataset(dataset, threat)
    check_split_fits(split, len(source.labels), split_path)
    test = torch.as_tensor(split.test)
    test = test[stratified_order(source.labels[test], evaluation["subset_seed"])]
    if evaluation["n_examples"] is not None:
        test = test[: evaluation["n_examples"]]
    x, y = to_unit(source.images[test].to(device)), source.labels[test].to(device)
    shard_dir = out.with_name(out.name + ".shards")
    started = time.perf_counter()
    configure_backend(device, deterministic=run.training["deterministic"])
    common = dict(eps=threat["eps"], step_size=threat["eval_step_size"], evaluation=evaluation,
                  seed=seed, test_set_size=len(split.test), shard_dir=shard_dir)
    with autocast(device, evaluation["precision"]):
        if part == "core":
            suite = core_suite(net, x, y, **common)
        elif part == "extra":
            suite = extra_suite(net, x, y, core=core, **common)
        else:
            suite = attack_suite(net, x, y, **common)
    result = {"dataset": dataset, "model": model, "method": method, "seed": seed,
              **({} if part == "all" else {"part": part}),
              "accuracy": {k: round(v, 4) for k, v in suite.accuracy.items()},
              "checks": suite.checks, "autoattack_warnings": suite.autoattack_warnings,
              "manifest": {"attacks": suite.attacks, "eps": threat["eps"], "seed": seed,
                           "n_examples": len(x), "test_set_size": len(split.test),
                           "evaluation_set": subset_name(len(x), len(split.test),
                                                         evaluation["subset_seed"]),
                           "test_set": ("fixed stratified test split" if source.train_size is None
                                        else "official test set"),
                           "checkpoint": {"path": str(checkpoint), "epoch": meta["epoch"],
                                          "ema": True, "which": evaluation["checkpoint"]},
                           "model_mode": "eval (checked on every forward pass)",
                           "precision": evaluation["precision"],
                           "device": str(device), "versions": versions()}}
    if suite.per_image:  # 1/0 per test image, in the evaluated order: the paired bootstrap
        result["per_image"] = {"order": f"stratified, subset_seed {evaluation['subset_seed']}",
                               "correct": suite.per_image}
    write_json(out, result)  # no timings inside: same params + seed give the same file
    shutil.rmtree(shard_dir, ignore_errors=True)
    print(f"evaluated ({part}) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return result
