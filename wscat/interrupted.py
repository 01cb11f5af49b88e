"""Trainings cut short by a killed `--forcerun`: the warning the workflow prints as it loads.

Snakemake deletes a forced training's outputs (best.pt, last.pt, train_log.csv, dvclive/) before
it runs; killed after an epoch, the run leaves resume/ behind, and the metrics, pseudo-labels and
tables made from its previous training still stand. A plain rerun of the target then finds them
up to date ("Nothing to be done"), and the old numbers pass for current ones; only the same
`--forcerun` continues the training (from resume/last.pt). A training that is running now
(another Snakemake's job, whose `wscat train` holds the run folder's output lock) is not cut
short: it gets no warning; nor is one whose results record another training than the params
give now (an edit since): Snakemake reruns them, and the training with them. No torch.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wscat import paths
from wscat.io import being_written

RESUME = "resume/last.pt"


def _made_from(run_dir: Path, root: Path) -> list[str]:
    """The files of the run in `run_dir` (`root`/results/models/D/M/METHOD/seedS) that exist and
    were made from its checkpoints: metrics, extras, validation, curves, pseudo-labels (a
    labeler's)."""
    dataset, model, method, seed_dir = run_dir.parts[-4:]
    fields = {"dataset": dataset, "model": model, "method": method, "seed": seed_dir[4:]}
    patterns = (paths.METRICS, paths.EXTRA, paths.VALIDATION, paths.CURVES_PDF,
                paths.PSEUDO_LABELS.replace("{labeler}", "{method}"))
    return [made for made in (pattern.format(**fields) for pattern in patterns)
            if (root / made).is_file()]


def recorded_training(path: Path) -> str | None:
    """The training fingerprint a result records (a metrics or validation file's manifest, a
    pseudo-label file's `labeler_training`); None where it records none or cannot be read."""
    try:
        if path.suffix == ".json":
            found = json.loads(path.read_text())["manifest"]["training"]["fingerprint"]
        elif path.suffix == ".npz":
            import numpy as np

            with np.load(path) as arrays:
                found = str(arrays["labeler_training"])
        else:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, str) and found else None


def _current_training(params: dict[str, Any] | None, run_dir: Path) -> str | None:
    """The training fingerprint the params give the run in `run_dir`; None without params or
    for a run they do not configure."""
    if params is None:
        return None
    from wscat.workflow import training_fingerprint

    dataset, model, method = run_dir.parts[-4:-1]
    try:
        return training_fingerprint(params, dataset, model, method)
    except (KeyError, ValueError, TypeError):
        return None


def _default_target(params: dict[str, Any] | None) -> str:
    """What a bare `snakemake` builds, as a target on the command line."""
    from wscat.config import ConfigError
    from wscat.targets import default_targets

    try:
        return " ".join(default_targets(params)) if params else "<your target>"
    except (ConfigError, KeyError, TypeError):
        return "<your target>"


def warnings(root: Path = Path("."), targets: list[str] | None = None,
             profile: str | None = None, params: dict[str, Any] | None = None) -> list[str]:
    """One line per model folder under `root`/results/models with resume/last.pt but no best.pt,
    and no training running in it now, whose metrics (or other files made from it) exist and
    record the training `params` give now (an older one: Snakemake reruns them), naming the
    command that continues it (with the command line's `--workflow-profile`, e.g. a SLURM one:
    without it the training would run where Snakemake runs). Without `targets` (a bare
    `snakemake`), the command names the default target, the demo's table."""
    lines = []
    target = " ".join(targets) if targets else _default_target(params)
    where = f"--workflow-profile {profile} " if profile and profile != "none" else ""
    for resume in sorted((root / "results" / "models").glob(f"*/*/*/seed*/{RESUME}")):
        run_dir = resume.parent.parent
        if (run_dir / "best.pt").exists() or being_written(run_dir):
            continue
        current = _current_training(params, run_dir)
        made = [file for file in _made_from(run_dir, root)
                if current is None or recorded_training(root / file) in (None, current)]
        if not made:  # nothing stands in for it: a plain rerun trains it
            continue
        best = (run_dir / "best.pt").relative_to(root).as_posix()
        more = f" (and {len(made) - 1} more)" if len(made) > 1 else ""
        lines.append(
            f"warning: {run_dir.relative_to(root).as_posix()} holds an interrupted training "
            f"({RESUME}, no best.pt) while {made[0]}{more}, made from its previous training, "
            f"still stands; where a plain rerun finds nothing to do, those results stay as they "
            f"are: continue it with the same command and --forcerun {best}, e.g. "
            f"snakemake {where}--forcerun {best} -- {target}")
    return lines
