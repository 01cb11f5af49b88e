"""The training log: train_log.csv, and the same rows as DVCLive curves (out_dir/dvclive/), whose
files `dvc plots show` and `dvc plots diff` render as learning curves."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from wscat.io import write_text

# Columns of a history row that are not curves: the step itself and wall-clock time (which
# differs between two otherwise identical runs).
NOT_CURVES = ("epoch", "seconds")


def write_log(path: Path, history: list[dict[str, Any]]) -> None:
    """train_log.csv: one row per epoch, every column any row has."""
    buffer = io.StringIO()
    keys = list(dict.fromkeys(k for row in history for k in row))
    writer = csv.DictWriter(buffer, fieldnames=keys)
    writer.writeheader()
    writer.writerows(history)
    write_text(path, buffer.getvalue())


def open_curves(directory: Path, history: list[dict[str, Any]]):
    """A DVCLive logger on `directory`, holding exactly the epochs in `history`.

    The directory is rebuilt from the checkpoint's history rather than resumed from its own
    files: a run killed between logging an epoch and checkpointing it would otherwise log that
    epoch twice, and Snakemake deletes a job's outputs before it reruns it.
    """
    from dvclive import Live

    class Curves(Live):
        # DVC tracks these files through dvc.yaml's stages; DVCLive's own experiment
        # bookkeeping (and its `dvc init` of a git repository that has no DVC) stays off.
        def _init_dvc(self) -> None:
            self._dvc_repo = None

    live = Curves(str(directory), resume=False, save_dvc_exp=False, dvcyaml=False)
    for row in history:
        log_epoch(live, row)
    return live


def log_epoch(live: Any, row: dict[str, Any]) -> None:
    """One history row as DVCLive step `epoch` (1-based, like train_log.csv)."""
    live.step = row["epoch"]
    for name, value in row.items():
        if name not in NOT_CURVES:
            live.log_metric(name, value)
    live.make_summary()
