"""A run folder (`wscat train --out-dir`): the run its checkpoints belong to, and the refusal,
before anything in it is touched (dvclive/ included), to train another run into it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from wscat.checkpoint import CheckpointError, checkpoint_meta

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
