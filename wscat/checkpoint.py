"""Checkpoint files: written atomically, read with torch.load(weights_only=True) so that loading
never executes code from the file. Their metadata names the model (architecture, width, depth:
`meta.model_spec`), and `check_model` refuses one that is not the model asked for."""
from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path
from typing import Any

import torch

from wscat.errors import first_line
from wscat.file_kinds import described, file_kind
from wscat.io import atomic_path, disk_full
from wscat.paths import RESUME_DIR, RUN_NAMES, unfinished

FORMAT = "wscat-checkpoint-v1"
CHECKPOINT_HINT = "results/models/DATASET/MODEL/METHOD/seedN/best.pt"


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
    previous file at `path` intact. Saved through a handle: given a path, torch names the
    archive's folder after the (random) temporary file, so the same weights saved twice differed
    in their bytes, and DVC saw a retrained identical checkpoint as changed."""
    with atomic_path(path) as tmp:
        try:
            with open(tmp, "wb") as handle:
                torch.save(obj, handle)
        except OSError as error:  # a write to the handle fails as itself, naming no file
            if error.filename is None:
                error.filename = str(path)
            raise
        except RuntimeError as error:  # torch's zip writer reports a failed write this way
            if not disk_full(tmp):
                raise
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from error


def _checkpoint_file(path: str | Path) -> Path:
    """`path` as a Path, refused (CheckpointError, one line) when it is a folder or missing."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file; pass the .pt file "
                              "(e.g. best.pt inside it)")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path} (train the method first: `wscat train`)")
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint saved by `save_checkpoint`; one clear error line for any broken file."""
    path = _checkpoint_file(path)
    try:
        with warnings.catch_warnings():  # torch warns about pickles; our error line says it all
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises several types for truncated or foreign files
        raise CheckpointError(_unreadable_line(path, error)) from error
    _check_ours(path, state)
    bad = nonfinite({k: v for k, v in state.items() if k != "meta"})
    if bad:
        raise CheckpointError(f"{path}: {_nonfinite_line(bad)}; a model with non-finite weights "
                              "predicts nothing meaningful: retrain it (with a lower learning "
                              "rate)")
    return state


def check_finished(path: str | Path) -> None:
    """Refuse (CheckpointError, one line) a checkpoint in a run folder's resume/: the state of a
    training that has not finished (the trainer copies best.pt and last.pt out of resume/ and
    removes it only after its last epoch), so not the run's result. The line names the command
    that finishes the run."""
    path = Path(path)
    if not unfinished(path):
        return
    run_dir = path.parent.parent
    if run_dir.as_posix().startswith("results/models/"):
        finish = (f"snakemake -- {run_dir.as_posix()}/best.pt (it resumes where the training "
                  "stopped)")
    else:
        finish = (f"the same `wscat train ... --out-dir {run_dir}` (it resumes where the "
                  "training stopped)")
    raise CheckpointError(f"{path} is the checkpoint of an unfinished training (a run's "
                          f"{RESUME_DIR}/, kept for a resume), not its result; finish the run "
                          f"first: rerun {finish}, then pass {run_dir / path.name}")


def checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """The metadata of a checkpoint, read without loading its tensors (memory-mapped, so a
    paper-size resume/last.pt costs nothing); CheckpointError when it is not a readable wscat
    checkpoint."""
    path = Path(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # noqa: BLE001 - as load_checkpoint
        raise CheckpointError(_unreadable_line(path, error)) from error
    _check_ours(path, state)
    return state["meta"]


def _check_ours(path: Path, state: Any) -> None:
    """Refuse (one line) what torch.load read from `path` unless it is a wscat checkpoint with
    its metadata."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is a PyTorch file but not a {FORMAT} file (a bare state "
                              "dict, e.g. `wscat export`'s, or another program's); pass a run's "
                              f"best.pt ({CHECKPOINT_HINT})")
    if not isinstance(state.get("meta"), dict):
        raise CheckpointError(f"{path} has no metadata; delete it and retrain")


def run_names(path: str | Path) -> dict[str, Any]:
    """The dataset, model, method and seed a checkpoint's metadata records (what `wscat train`
    wrote), for a step asked to work on that run without naming it; CheckpointError (one line)
    for a folder, a missing file, a file of no wscat checkpoint, or metadata lacking one."""
    path = _checkpoint_file(path)
    meta = checkpoint_meta(path)
    lacking = [name for name in RUN_NAMES if meta.get(name) is None]
    if lacking:
        flags = " ".join(f"--{name}" for name in lacking)
        raise CheckpointError(f"{path} does not record its {', '.join(lacking)}; pass {flags}")
    return {name: meta[name] for name in RUN_NAMES}


def _unreadable_line(path: Path, error: BaseException) -> str:
    """Why torch.load failed on `path`, in words that never advise loading the file unsafely,
    nor deleting a file that is not a damaged checkpoint (another kind of wscat file, or a
    foreign one, is someone's valid input); torch's own message stays out of the line."""
    found = file_kind(path)
    if found.kind not in (None, "checkpoint") and not found.damaged:
        return (f"{path} is {described(found)}, not a checkpoint: pass a run's best.pt "
                f"({CHECKPOINT_HINT})")
    if "weights only" in str(error).lower() or "weights_only" in str(error):
        return (f"checkpoint {path} cannot be read (it holds Python objects beyond tensors, "
                "which a safe load refuses): it is not a wscat checkpoint; pass a run's best.pt "
                f"({CHECKPOINT_HINT})")
    if found.kind == "checkpoint":  # a PyTorch archive that does not load: cut short or damaged
        state = "truncated" if found.damaged else "damaged"
        return (f"checkpoint {path} cannot be read: it is a {state} PyTorch archive; delete it "
                "and retrain (`wscat train`)")
    if path.stat().st_size == 0:
        return (f"checkpoint {path} cannot be read (it is empty): pass a run's best.pt "
                f"({CHECKPOINT_HINT}), or delete it and retrain")
    what = "a damaged zip archive of other files" if found.damaged else "not a PyTorch zip archive"
    return (f"checkpoint {path} cannot be read ({what}): it is not a wscat checkpoint; pass a "
            f"run's best.pt ({CHECKPOINT_HINT})")


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
        if meta.get("model") == model:  # the same name, another spec: the params changed
            wanted = ", ".join(f"{k} {v}" for k, v in sorted(dict(spec).items()))
            raise CheckpointError(f"{path} holds model '{model}' ({shown}), but the params give "
                                  f"models.{model} as ({wanted}); pass the params it was "
                                  "trained with, or retrain it with these")
        raise CheckpointError(f"{path} holds model '{meta.get('model')}' ({shown}), not "
                              f"'{model}'; pass --model {meta.get('model')} or the checkpoint "
                              f"of a {model} run")


def check_run(path: str | Path, meta: dict[str, Any], *, dataset: str, method: str,
              seed: int, method_flag: str | None = None) -> None:
    """Refuse (ValueError, one line) a checkpoint whose metadata names another dataset, method
    or seed than the run a step was asked for (a seed-2 labeler for seed 1, a Standard
    checkpoint as `--labeler mt` or `--method trades`): evaluate, pseudo-label and validate.
    `method_flag` (--method, --labeler): the step's command line names the run with it and
    --dataset, --seed, each taken from the checkpoint when left out; the line says so."""
    held = (meta.get("dataset"), meta.get("method"), meta.get("seed"))
    asked = (dataset, method, seed)
    if held == asked:
        return
    todo = f"pass the best.pt of {method} seed {seed} on {dataset}"
    if method_flag:
        flags = [flag for flag, a, b in zip(("--dataset", method_flag, "--seed"), held, asked)
                 if a != b]
        todo = (f"drop {'/'.join(flags)} (the checkpoint records "
                f"{'it' if len(flags) == 1 else 'them'}), or {todo}")
    raise ValueError(f"{path} holds {held[1]} seed {held[2]} on {held[0]}, not {method} seed "
                     f"{seed} on {dataset}; {todo}")


def check_trained_by(path: str | Path, meta: dict[str, Any], expected: str) -> None:
    """Refuse (ValueError, one line) a checkpoint whose training fingerprint (what `wscat train`
    writes into it, wscat.workflow.training_fingerprint) is not `expected`, the one the params
    give: what is made from it would claim a training that did not make it. A checkpoint from
    before the fingerprint was written carries none and is not checked."""
    made = meta.get("training_fingerprint")
    if made is not None and made != expected:
        raise ValueError(f"{path} was trained with other params than these (training {made}, "
                         f"the params give {expected}); {retrain_hint(path)}")


def retrain_hint(path: str | Path) -> str:
    """How to remake a checkpoint that other params made: through Snakemake for one of its own
    (results/models/...), otherwise with `wscat train` (or the API) or the params it was trained
    with, as the command line and wscat.api name them."""
    if Path(path).as_posix().startswith("results/models/"):
        return f"retrain it: snakemake --forcerun {path} -- <your target>"
    return ("pass the params it was trained with (--params; params= in wscat.api), or retrain "
            "it with these (`wscat train` or wscat.api.train_method, the same params)")


def load_weights(module: torch.nn.Module, weights: Any, path: str | Path) -> None:
    """`module.load_state_dict(weights)`, refusing weights that do not fit in one line."""
    try:
        module.load_state_dict(weights)
    except (RuntimeError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{path}: its weights do not fit the model its metadata names "
                              f"({first_line(error)}); delete it and retrain") from error
