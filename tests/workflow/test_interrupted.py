"""A training cut short by a killed `--forcerun` (wscat.interrupted): Snakemake deleted its
best.pt, last.pt and log, resume/ is left, and the metrics of its previous training still stand,
so a plain rerun would do nothing. The workflow says so as it loads, naming the command that
continues it; a fake results tree and `snakemake -n` show it."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers.tiny import tiny_params

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TABLE = "results/tables/digits.tex"


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")


def test_an_interrupted_forced_training_is_named_with_the_command_that_continues_it(
        tmp_path: Path, env: dict[str, str]) -> None:
    shutil.copy2(ROOT / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    models, metrics = tmp_path / "results/models/digits/cnn", tmp_path / "results/metrics/digits/cnn"
    # WSCAT: killed during its forced rerun, its old metrics (and table) still there
    touch(models / "wscat/seed1/resume/last.pt")
    touch(metrics / "wscat/seed1.json")
    touch(tmp_path / TABLE)
    # Mean Teacher, the labeler: its pseudo-labels stand for it
    touch(models / "mt/seed1/resume/last.pt")
    touch(tmp_path / "results/pseudo/digits/cnn/mt/seed1.npz")
    # not warned: a training killed before anything was made from it (a plain rerun trains it),
    # and a finished one (best.pt) with a stray resume/
    touch(models / "trades/seed1/resume/last.pt")
    touch(models / "standard/seed1/resume/last.pt")
    touch(models / "standard/seed1/best.pt")
    touch(metrics / "standard/seed1.json")
    result = subprocess.run([str(BIN / "snakemake"), "-n", "--cores", "1", "--", TABLE],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    warned = [line for line in result.stderr.splitlines() if line.startswith("wscat: warning")]
    best = "results/models/digits/cnn/{}/seed1/best.pt"
    said = ("wscat: warning: results/models/digits/cnn/{0}/seed1 holds an interrupted training "
            "(resume/last.pt, no best.pt) while {1}, made from its previous training, still "
            "stands; where a plain rerun finds nothing to do, those results stay as they are: "
            "continue it with the same command and --forcerun {2}, e.g. "
            "snakemake --forcerun {2} -- {3}")
    assert warned == [
        said.format("mt", "results/pseudo/digits/cnn/mt/seed1.npz", best.format("mt"), TABLE),
        said.format("wscat", "results/metrics/digits/cnn/wscat/seed1.json", best.format("wscat"),
                    TABLE)]
