"""A run folder (`wscat train --out-dir`): the run its checkpoints belong to, and the refusal,
before anything in it is touched (dvclive/ included), to train another run into it; where a
training keeps its curves; the finish that moves a training's outputs out of resume/, safe to
kill at any point; and whether a resume/ has what a resume needs."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from wscat.checkpoint import CheckpointError, checkpoint_meta, load_checkpoint
from wscat.io import atomic_path
from wscat.training.log import write_log

# A finished run's checkpoints, and those a killed run resumes from.
FINISHED = ("best.pt", "last.pt")
UNFINISHED = ("resume/last.pt", "resume/best.pt")


def _describe(meta: dict[str, Any]) -> str:
    """`trades seed 1 on digits/cnn`: the run a checkpoint's metadata names."""
    return (f"{meta.get('method')} seed {meta.get('seed')} on "
            f"{meta.get('dataset')}/{meta.get('model')}")


def check_run_folder(out_dir: str | Path, *, dataset: str, model: str, method: str,
                     seed: int) -> None:
    """Refuse (ValueError, one line) to train (dataset, model, method, seed) into `out_dir` when
    it holds the checkpoints of another run: finished (best.pt, last.pt) or unfinished (resume/),
    of another dataset, model, method or seed. A checkpoint there that cannot be read is refused
    too: whose it is cannot be told.

    The same run passes, whatever params made it (as Snakemake retrains a run after a params
    edit): a finished one is trained again, an unfinished one resumes (or, made with other
    params, starts afresh: the trainer's `training_fingerprint` decides)."""
    out_dir = Path(out_dir)
    wanted = {"dataset": dataset, "model": model, "method": method, "seed": seed}
    todo = f"pass an empty or another --out-dir, or delete {out_dir} to train there"
    for name in FINISHED + UNFINISHED:
        path = out_dir / name
        if not path.is_file():
            continue
        try:
            meta = checkpoint_meta(path)
        except CheckpointError as error:
            raise ValueError(f"--out-dir {out_dir} holds {name}, which cannot be read as a wscat "
                             f"checkpoint, so whose run it is cannot be told: pass an empty or "
                             f"another --out-dir, or delete {path} to train there") from error
        state = "a finished" if name in FINISHED else "an unfinished (resume/)"
        if any(meta.get(key) != value for key, value in wanted.items()):
            raise ValueError(f"--out-dir {out_dir} holds {state} run of {_describe(meta)} "
                             f"({name}), not of {_describe(wanted)}: {todo}")


def best_at_hand(state: dict[str, Any], resume_dir: Path) -> bool:
    """Whether resume/last.pt's best epoch has its checkpoint: none is needed before the first
    validation; else resume/best.pt, or, where a kill during `finish` (an older wscat's) took it
    and left resume/last.pt, the finished best.pt beside resume/ when it is that very epoch's
    (same fingerprint, same best), copied back into resume/."""
    if state["best"]["epoch"] < 1 or (resume_dir / "best.pt").is_file():
        return True
    finished = resume_dir.parent / "best.pt"
    if not finished.is_file():
        return False
    kept = load_checkpoint(finished)
    if (kept["meta"].get("fingerprint") != state["meta"]["fingerprint"]
            or kept.get("best") != state["best"]):
        return False
    with atomic_path(resume_dir / "best.pt") as tmp:
        shutil.copyfile(finished, tmp)
    return True


def curves_dir(out_dir: Path, resume_dir: Path) -> Path:
    """Where a training logs its curves: out_dir/dvclive, or resume/dvclive when out_dir holds a
    finished run (best.pt), whose curves stay beside its best.pt and train_log.csv until this
    training ends (`finish` writes them out, whole). Snakemake deletes a job's outputs before
    it runs, so its trainings always log into out_dir/dvclive."""
    return resume_dir / "dvclive" if (out_dir / "best.pt").is_file() else out_dir / "dvclive"


def _replace_dir(new: Path, target: Path, trash: Path) -> None:
    """Put folder `new` where `target` is, the old one moved to `trash` (then gone with it)."""
    shutil.rmtree(trash, ignore_errors=True)
    if target.exists():
        os.replace(target, trash)
    os.replace(new, target)


def finish(out_dir: Path, resume_dir: Path, history: list[dict[str, Any]]) -> None:
    """train_log.csv, and best.pt and last.pt copied out of resume/; the curves rebuilt from
    `history` in resume/ and moved into dvclive/; then resume/ goes, resume/last.pt first.

    The curves are rebuilt, not moved from the folder logged into (`curves_dir`): another
    `snakemake` that runs this job beside this training deletes the job's outputs, dvclive/
    included, before its own `wscat train` is refused the run folder's lock, and the epochs
    logged before that would be lost. Rebuilt, they are the files of a run never disturbed.

    Killed at any point, the folder is resumable (resume/last.pt and its best.pt are there: a
    rerun resumes after the last epoch and finishes again) or finished (resume/last.pt gone,
    every output written)."""
    from wscat.training.log import open_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    write_log(out_dir / "train_log.csv", history)
    for name in ("best.pt", "last.pt"):  # a full disk here leaves resume/ for the rerun
        with atomic_path(out_dir / name) as tmp:
            shutil.copyfile(resume_dir / name, tmp)
    rebuilt = resume_dir / "dvclive.new"
    shutil.rmtree(rebuilt, ignore_errors=True)  # a killed finish's
    open_curves(rebuilt, history)
    _replace_dir(rebuilt, out_dir / "dvclive", resume_dir / "dvclive.old")
    (resume_dir / "last.pt").unlink()  # the run is finished from here on
    shutil.rmtree(resume_dir)


def drop_empty_curves(curves: Path, out_dir: Path, made_here: bool) -> None:
    """A training stopped before its first epoch was logged: its (empty) curves go, resume/ too
    when they were all it held, and out_dir when this training made it and nothing is left."""
    shutil.rmtree(curves, ignore_errors=True)
    for folder, drop in ((curves.parent, curves.parent != out_dir), (out_dir, made_here)):
        if drop and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # nothing of the run: no empty folder left behind
