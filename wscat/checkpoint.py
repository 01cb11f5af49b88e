"""Checkpoint files: written atomically, read with torch.load(weights_only=True) so that loading
never executes code from the file. Their metadata names the model (architecture, width, depth:
`meta.model_spec`), and `check_model` refuses one that is not the model asked for."""
from __future__ import annotations

import errno
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from wscat.errors import first_line
from wscat.io import atomic_path, disk_full

FORMAT = "wscat-checkpoint-v1"


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated or not ours; the message says what to do."""


def nonfinite(state: Any, where: str = "") -> list[str]:
    """The names of the floating-point tensors in `state` (nested dicts and lists) that hold a
    NaN or an infinity."""
    if isinstance(state, torch.Tensor):
        if state.is_floating_point() or state.is_complex():
            return [] if bool(torch.isfinite(state).all()) else [where or "<tensor>"]
        return []
    if isinstance(state, dict):
        return [name for key, value in state.items()
                for name in nonfinite(value, f"{where}.{key}" if where else str(key))]
    if isinstance(state, (list, tuple)):
        return [name for index, value in enumerate(state)
                for name in nonfinite(value, f"{where}.{index}")]
    return []


def _nonfinite_line(bad: list[str]) -> str:
    """The first non-finite tensor's name, and how many more there are."""
    return f"{bad[0]} holds NaN or infinite values" + (
        f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Save `state` (tensors, numbers, strings, lists, dicts only) atomically; weights that are
    not finite are never written (CheckpointError, the previous file at `path` kept)."""
    bad = nonfinite(state)
    if bad:
        raise CheckpointError(f"refusing to write {path}: {_nonfinite_line(bad)}; the training "
                              "diverged: lower the learning rate")
    save_tensors(path, {"format": FORMAT, **state})


def save_tensors(path: str | Path, obj: Any) -> None:
    """torch.save(obj) atomically. A failed write (a full disk) raises OSError and leaves the
    previous file at `path` intact."""
    with atomic_path(path) as tmp:
        try:
            torch.save(obj, tmp)
        except RuntimeError as error:  # torch's zip writer reports a failed write this way
            if not disk_full(tmp):
                raise
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from error


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint saved by `save_checkpoint`; one clear error line for any broken file."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file; pass the .pt file "
                              "(e.g. best.pt inside it)")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path} (train the method first: `wscat train`)")
    try:
        with warnings.catch_warnings():  # torch warns about pickles; our error line says it all
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"checkpoint {path} cannot be read ({_load_problem(path, error)}); "
                              "it is truncated or not a wscat checkpoint: delete it and retrain"
                              ) from error
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a {FORMAT} file; delete it and retrain")
    if not isinstance(state.get("meta"), dict):
        raise CheckpointError(f"{path} has no metadata; delete it and retrain")
    bad = nonfinite({k: v for k, v in state.items() if k != "meta"})
    if bad:
        raise CheckpointError(f"{path}: {_nonfinite_line(bad)}; a model with non-finite weights "
                              "predicts nothing meaningful: retrain it (with a lower learning "
                              "rate)")
    return state


def _load_problem(path: Path, error: BaseException) -> str:
    """Why torch.load failed, in words that never advise loading the file unsafely."""
    if "weights only" in str(error).lower() or "weights_only" in str(error):
        return "it holds Python objects beyond tensors, which a safe load refuses"
    if not zipfile.is_zipfile(path):
        return "not a PyTorch zip archive"
    return f"{type(error).__name__}: {first_line(error)}"


def model_spec(meta: dict[str, Any]) -> dict[str, Any]:
    """The model a checkpoint holds, as a `models:` entry of params.yaml."""
    return dict(meta.get("model_spec") or {"architecture": meta.get("model")})


def check_model(path: str | Path, meta: dict[str, Any], model: str, spec: dict[str, Any]) -> None:
    """Refuse a checkpoint whose model is not `model` (`spec`, its params.yaml entry)."""
    held = model_spec(meta)
    if "model_spec" not in meta:  # an older checkpoint: only the model's name to go by
        same = meta.get("model") == model
    else:
        same = held == dict(spec)
    if not same:
        shown = ", ".join(f"{k} {v}" for k, v in sorted(held.items()))
        raise CheckpointError(f"{path} holds model '{meta.get('model')}' ({shown}), not "
                              f"'{model}'; pass --model {meta.get('model')} or the checkpoint "
                              f"of a {model} run")


def load_weights(module: torch.nn.Module, weights: Any, path: str | Path) -> None:
    """`module.load_state_dict(weights)`, refusing weights that do not fit in one line."""
    try:
        module.load_state_dict(weights)
    except (RuntimeError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{path}: its weights do not fit the model its metadata names "
                              f"({first_line(error)}); delete it and retrain") from error
