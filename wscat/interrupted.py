"""Trainings cut short by a killed `--forcerun`: the warning the workflow prints as it loads.

Snakemake deletes a forced training's outputs (best.pt, last.pt, train_log.csv, dvclive/) before
it runs; killed after an epoch, the run leaves resume/ behind, and the metrics, pseudo-labels and
tables made from its previous training still stand. A plain rerun of the target then finds them
up to date ("Nothing to be done"), and the old numbers pass for current ones; only the same
`--forcerun` continues the training (from resume/last.pt). A training that is running now
(another Snakemake's job, whose `wscat train` holds the run folder's output lock) is not cut
short: it gets no warning. No torch.
"""
from __future__ import annotations

from pathlib import Path

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


def warnings(root: Path = Path("."), targets: list[str] | None = None,
             profile: str | None = None) -> list[str]:
    """One line per model folder under `root`/results/models with resume/last.pt but no best.pt,
    and no training running in it now, whose metrics (or other files made from it) exist,
    naming the command that continues it (with the command line's `--workflow-profile`, e.g. a
    SLURM one: without it the training would run where Snakemake runs)."""
    lines = []
    target = " ".join(targets) if targets else "<your target>"
    where = f"--workflow-profile {profile} " if profile and profile != "none" else ""
    for resume in sorted((root / "results" / "models").glob(f"*/*/*/seed*/{RESUME}")):
        run_dir = resume.parent.parent
        if (run_dir / "best.pt").exists() or being_written(run_dir):
            continue
        made = _made_from(run_dir, root)
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
