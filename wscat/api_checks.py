"""The Python API's checks of its arguments (wscat.api): each refused in one line saying what to
pass, before anything is read at length or written, as the command line refuses the same slips
(wscat.cli, wscat.file_kinds)."""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wscat.checkpoint import CheckpointError, check_model, check_trained_by
from wscat.config import (NAMED, SEED_MAX, ConfigError, RunConfig, evaluation_for, method_for,
                          unknown_name)
from wscat.data import load_dataset
from wscat.device import THREADS_MAX, check_training_device
from wscat.errors import OutputError
from wscat.file_kinds import (NPZ_KINDS, check_json_output, curves_output, described, file_kind,
                              other_kind, other_run)
from wscat.inference import check_which
from wscat.io import check_writable, guard_outputs
from wscat.steps import train
from wscat.training.run_folder import check_run_folder
from wscat.workflow import training_fingerprint


class InputNotFound(FileNotFoundError, ValueError):
    """An input file that is not there: a FileNotFoundError, and a ValueError as every other
    refusal of bad input here, so that `except ValueError` catches them all."""


def short(value: Any) -> str:
    """A value as a refusal shows it: its repr on one line, cut short."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def check_names(params: dict[str, Any], **names: Any) -> None:
    """Refuse (ConfigError, one line) a dataset, model or method the params do not configure,
    as the command line does (wscat.config.unknown_name), and a name that is not a str."""
    for key, value in names.items():
        if not isinstance(value, str):
            raise ConfigError(f"{key}={short(value)} is not a name; pass one of the params' "
                              f"{NAMED[key]}: {', '.join(params[NAMED[key]])}")
    unknown = unknown_name(params, names)
    if unknown is not None:
        key, name, section = unknown
        raise ConfigError(f"unknown {key} '{name}'; configured: {', '.join(params[section])} "
                          f"(the params' {section}); pass one of them")


def checked_seed(seed: Any) -> int:
    """A run's seed, as the command line takes it (wscat.cli.seed_value): an int (not a bool) in
    0..SEED_MAX; a numpy integer is taken as its int."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed={short(seed)} is not an int; give an int in 0..{SEED_MAX} "
                         "(1, 2, 3 in the paper)")
    if not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed={seed} is outside 0..{SEED_MAX}; give a seed in that range")
    return int(seed)


def checked_threads(threads: Any) -> int | None:
    """CPU threads for torch during one call: None (torch's count) or an int (not a bool) in
    1..THREADS_MAX, as `--threads` takes it."""
    if threads is None:
        return None
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, numbers.Integral):
        raise ValueError(f"threads={short(threads)} is not an int; give 1 (what the workflow's "
                         "jobs compute on) or more, or None for torch's count")
    if not 1 <= threads <= THREADS_MAX:
        raise ValueError(f"threads={threads} is outside 1..{THREADS_MAX}; give 1 (the "
                         "workflow's) or more")
    return int(threads)


def as_path(value: Any, argument: str, give: str) -> Path:
    """`value` as a Path; anything else (None, a TrainResult, a number) refused in one line."""
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        return Path(value)
    raise ValueError(f"{argument}= takes a path (a str or Path), not {type(value).__name__} "
                     f"{short(value)}; pass {give}")


@dataclass(frozen=True)
class Input:
    """What a file argument takes: the kind of wscat file (wscat.file_kinds), that kind in
    words, what to pass, and where one comes from (said when the file is missing)."""

    kind: str
    noun: str
    give: str
    make: str


INPUTS = {
    "split": Input("split", "a split",
                    "a run's split (TrainResult.split: OUT_DIR/split-seedN.npz)",
                    "train_method makes it"),
    "checkpoint": Input("checkpoint", "a checkpoint",
                         "a run's best.pt (TrainResult.checkpoint: OUT_DIR/METHOD/best.pt)",
                         "train the method first (api.train_method)"),
    "metrics": Input("metrics", "a metrics file",
                      "the checkpoint's metrics (EvaluationResult.path: metrics.json beside it)",
                      "evaluate the checkpoint first (api.evaluate_checkpoint)"),
    "core": Input("metrics", "a metrics file",
                   "the checkpoint's core metrics (by default metrics.json beside it)",
                   "evaluate its core part first (api.evaluate_checkpoint, part='core')"),
    "entry": Input("export", "an exported model entry",
                    "the NAME.json that export_model wrote (its state dict NAME.pt beside it)",
                    "export the model first (api.export_model)"),
}


def input_file(value: Any, argument: str) -> Path:
    """`value` as an existing file of the kind `argument` takes (INPUTS), refused in one line
    when it is no path, a folder, missing (InputNotFound), or another kind of wscat file, named
    for what it is, as the command line names it (wscat.file_kinds.check_input_kind). A damaged
    file of the expected kind passes: its loader says to delete it."""
    taken = INPUTS[argument]
    path = as_path(value, argument, taken.give)
    if path.is_dir():
        raise ValueError(f"{argument}={path} is a folder, not a file; pass {taken.give}")
    if not path.is_file():
        raise InputNotFound(f"{argument}={path} not found; pass {taken.give}: {taken.make}")
    found = file_kind(path)
    if found.kind == taken.kind:  # damaged or not: its loader judges it
        return path
    if found.kind == "npz" and set(found.names) & NPZ_KINDS.get(taken.kind, set()):
        return path  # some of the expected arrays: a damaged file of that kind
    if found.kind is None:
        if taken.kind == "checkpoint":
            return path  # wscat.checkpoint says what a file that torch cannot load is
        what = f"not {taken.noun} (nor another file wscat writes)"
    else:
        what = f"{described(found)}{' (cut short)' if found.damaged else ''}, not {taken.noun}"
    raise ValueError(f"{path} is {what}; pass {argument}= {taken.give}")


def guard(inputs: dict[str, Path | None], outputs: dict[str, Path]) -> None:
    """No output is an input (wscat.io.guard_outputs), as a ValueError: the arguments' slip."""
    try:
        guard_outputs(inputs, outputs)
    except OutputError as error:
        raise ValueError(error.strerror or str(error)) from error


def check_model_argument(model: Any) -> None:
    """Refuse what is not a model, load_model's (model, metadata) pair among them."""
    if isinstance(model, tuple) and model and isinstance(model[0], nn.Module):
        raise ValueError("model= is load_model's (model, metadata) pair; pass the model alone: "
                         "net, meta = api.load_model(checkpoint)")
    if not isinstance(model, nn.Module):
        raise ValueError(f"model= takes a torch nn.Module (api.load_model(checkpoint)[0], "
                         f"api.load_exported(entry)), not {type(model).__name__}")


def native(array: np.ndarray) -> np.ndarray:
    """The array in this machine's byte order (torch refuses another, e.g. big-endian '>f4')."""
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def _runs_on(model: nn.Module, image: torch.Tensor) -> bool:
    """Whether the model, in eval mode, takes `image` (its first convolution need not be its
    input layer); a model in train mode is not run (its batch norm would learn from the probe)."""
    if any(module.training for module in model.modules()):
        return False
    try:
        with torch.no_grad():
            model(image.float() / 255 if image.dtype == torch.uint8 else image)
    except (RuntimeError, ValueError, TypeError, IndexError):
        return False
    return True


def images_for(model: nn.Module, images: Any) -> torch.Tensor:
    """`images` as the tensor `model` takes (N x C x H x W, C its input channels; uint8, or floats
    in [0,1] of its dtype), a numpy array converted; anything else refused in one line saying
    what to pass."""
    if isinstance(images, np.ndarray):
        if images.dtype != np.uint8 and not np.issubdtype(images.dtype, np.floating):
            raise ValueError(f"images are a numpy array of {images.dtype}; pass uint8 (0..255) "
                             "or floats in [0, 1]")
        images = torch.from_numpy(np.ascontiguousarray(native(images)))
    elif not isinstance(images, torch.Tensor):
        hint = "; torch.stack(images) a list of image tensors" if isinstance(
            images, (list, tuple)) else ""
        raise ValueError(f"images= takes a torch.Tensor or a numpy array (N x C x H x W), not "
                         f"{type(images).__name__}{hint}")
    if images.dtype != torch.uint8 and not images.is_floating_point():
        raise ValueError(f"images are {images.dtype}; pass uint8 (0..255) or floats in [0, 1]")
    channels = next((m.in_channels for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    shape = " x ".join(map(str, images.shape)) or "a single number"
    wanted = f"N x {channels or 'C'} x H x W"
    if images.ndim != 4:
        hint = ("; one image: images[None]" + ("; N grayscale images: images[:, None]"
                                               if channels == 1 else "")
                if images.ndim in (2, 3) else "")
        raise ValueError(f"images are {shape}; pass a batch, {wanted}{hint}")
    if channels is not None and images.shape[1] != channels and not _runs_on(model, images[:1]):
        if images.shape[3] == channels:
            raise ValueError(f"images are {shape}, channel-last (N x H x W x C); the model "
                             f"takes {wanted}: pass images.permute(0, 3, 1, 2) (a numpy "
                             "array: .transpose(0, 3, 1, 2))")
        raise ValueError(f"images are {shape}: {images.shape[1]} channels where the model "
                         f"takes {channels}; pass {wanted} images of its dataset")
    if images.is_floating_point() and images.numel():
        if not bool(torch.isfinite(images).all()):
            raise ValueError("images hold NaN or infinite values; pass floats in [0, 1]")
        low, high = float(images.min()), float(images.max())
        if low < 0 or high > 1:
            raise ValueError(f"images hold values from {low:g} to {high:g}, outside [0, 1] (the "
                             "model normalises [0, 1] images inside); pass floats in [0, 1] "
                             "(pixels 0..255: divide by 255, or pass them as uint8)")
        weight = next((p for p in model.parameters() if p.is_floating_point()), None)
        if weight is not None and images.dtype != weight.dtype:
            images = images.to(weight.dtype)  # float64 (numpy's default) for a float32 model
    return images


# The kinds of output that are JSON, and what they hold (check_output's .json names).
JSON_KINDS = {"metrics": "the metrics", "pseudo-report": "the pseudo-label report",
              "validation": "the validation scores"}


def check_output(path: Path, own: str, argument: str, writer: str,
                 run: dict[str, Any] | None = None) -> None:
    """Refuse an output path that holds another kind of wscat file than the one written there
    (a checkpoint as out=), or one of its kind that records another run than `run` (another
    method's metrics): writing would destroy it (as wscat.cli.check_output_kinds). The same
    run's file is rewritten, as a rerun does. A path inside a run's DVCLive folder (its
    training curves) is refused whatever it holds, and JSON must go to a .json name."""
    inside = curves_output(path)
    if inside is not None:
        raise ValueError(f"{argument}={path} {inside}, which {writer} would overwrite; choose "
                         f"another {argument}= outside it (nothing was written)")
    what = other_kind(path, own)
    if what is not None:
        raise ValueError(f"{argument}={path} holds {what}, which {writer} would overwrite; "
                         f"choose another {argument}= (nothing was written)")
    what = other_run(path, own, run or {})
    if what is not None:
        raise ValueError(f"{argument}={path} holds {what}, which {writer} would overwrite; "
                         f"pass another {argument}=, or delete that file if you mean to replace "
                         "it (nothing was written)")
    if own in JSON_KINDS:
        check_json_output(path, f"{argument}=", JSON_KINDS[own])


def check_run_of(checkpoint: Path, meta: dict[str, Any], params: dict[str, Any]) -> None:
    """Refuse, before the split is made, a checkpoint these params cannot evaluate: its dataset,
    model or method unknown to them, its model another than theirs, trained with other params
    (what wscat.steps.evaluate refuses too), or not the checkpoint they evaluate (best.pt or
    last.pt: evaluation.checkpoint)."""
    names = {key: meta.get(key) for key in ("dataset", "model", "method")}
    if not all(isinstance(name, str) for name in names.values()):
        raise CheckpointError(f"{checkpoint}: its metadata names no dataset, model and method; "
                              "pass a run's best.pt (TrainResult.checkpoint)")
    unknown = unknown_name(params, names)
    if unknown is not None:
        key, name, section = unknown
        raise ConfigError(f"{checkpoint} is a run of {key} '{name}', which the params do not "
                          f"configure ({section}: {', '.join(params[section])}); pass the "
                          "params it was trained with")
    check_model(checkpoint, meta, names["model"], params["models"][names["model"]])
    if "which" in meta:  # wscat.inference.load_model's: best.pt or last.pt, from its content
        check_which(checkpoint, meta["which"],
                    evaluation_for(params, names["dataset"])["checkpoint"])
    check_trained_by(checkpoint, meta,
                     training_fingerprint(params, names["dataset"], names["model"],
                                          names["method"]))


def runs_of(params: dict[str, Any], method: str, dataset: str) -> list[str]:
    """The methods train_method trains for `method`: its labelers first, then itself."""
    knobs = method_for(params, method, dataset)
    first = []
    if knobs["data"] == "pseudo":
        first += runs_of(params, knobs["labeler"], dataset)
    if knobs.get("generated") and knobs.get("generated_labeler"):
        first += runs_of(params, knobs["generated_labeler"], dataset)
    return first + [method]


def check_pseudo_labels(out_dir: Path, labeler: str, *, dataset: str, model: str,
                        seed: int) -> None:
    """Refuse pseudo-labels train_method would write over (out_dir/pseudo-LABELER-seedN.npz)
    that another run's labeler made: another dataset's or model's in the same out_dir."""
    path = out_dir / f"pseudo-{labeler}-seed{seed}.npz"
    what = other_run(path, "pseudo-labels", {"labeler": labeler, "seed": seed,
                                             "dataset": dataset, "model": model})
    if what is not None:
        raise ValueError(f"{path} holds {what}, which train_method would overwrite; pass another "
                         "out_dir=, or delete that file if you mean to replace it (nothing was "
                         "written)")


def check_training(params: dict[str, Any], method: str, *, dataset: str, model: str,
                    seed: int, out_dir: Path, device: torch.device, device_named: bool) -> None:
    """Before the split is made: what the training of `method` and of its labelers would refuse
    (wscat.steps.train): an out_dir that is a file or takes no files, a run folder or
    pseudo-labels that hold another run's, generated images that are not there, a paper-size
    model on an automatic CPU."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"out_dir={out_dir} is a file, not a folder; pass a folder for the "
                         "runs' files (made if missing)")
    check_writable(out_dir, folders=True)
    for name in runs_of(params, method, dataset):
        check_run_folder(out_dir / name, dataset=dataset, model=model, method=name, seed=seed)
        knobs = method_for(params, name, dataset)
        if knobs["data"] == "pseudo":
            check_pseudo_labels(out_dir, knobs["labeler"], dataset=dataset, model=model,
                                seed=seed)
        generated = method_for(params, name, dataset).get("generated")
        if generated and not Path(generated).is_file():
            raise InputNotFound(f"generated-data file not found: {Path(generated).resolve()} "
                                f"(methods.{name}.generated); put the .npz there or correct "
                                "the path in the params")
    if device.type == "cpu" and not device_named:  # the only case check_training_device refuses
        run = RunConfig.from_params(params, dataset=dataset, model=model, method=method,
                                    seed=seed)
        source = load_dataset(dataset, params["datasets"][dataset])
        check_training_device(device, model=model, cpu_named=False,
                              parameters=train.model_parameters(run, source))
