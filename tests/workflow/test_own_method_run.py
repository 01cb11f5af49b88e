"""Your own method through the workflow as a user runs it (docs/methods.md, "Your own method"):
the example MART named in params.yaml is trained, attacked and tabulated by Snakemake beside a
built-in method, and an edit of its file retrains it alone (~20 s)."""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tiny import ROOT, tiny_params, write_params

BIN = Path(sys.executable).parent
TABLE = "results/tables/digits.tex"


def snakemake(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), "--cores", "2", *args, "--", TABLE], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_your_own_method_is_trained_attacked_and_tabulated(tmp_path: Path, env) -> None:
    shutil.copy2(ROOT / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    params = tiny_params()
    params["methods"]["mart"] = {"objective": "examples/mart.py:Mart", "data": "labelled",
                                 "selection": "cw", "lam": 6.0}
    params["experiments"]["digits"]["methods"] = ["trades", "mart"]
    write_params(tmp_path / "params.yaml", params)

    result = snakemake(cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "results/tables/digits.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["method"] for row in rows} == {"TRADES", "mart"}
    mart = {row["metric"]: float(row["mean"]) for row in rows if row["method"] == "mart"}
    assert set(mart) == {"Natural", "FGSM", "PGD", "CW", "AA", "Mean"}
    assert all(0 <= value <= 100 for value in mart.values())
    log = (tmp_path / "results/models/digits/cnn/mart/seed1/train_log.csv").read_text()
    assert log.splitlines()[0].count("bce") == 1  # its own statistics are logged

    with open(tmp_path / "examples" / "mart.py", "a") as handle:
        handle.write("# an edit\n")
    dry = snakemake("-n", cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    trained = [line.split("output: ")[1] for line in dry.stdout.splitlines()
               if line.strip().startswith("output: results/models/")]
    assert len(trained) == 1 and "/mart/seed1/best.pt" in trained[0], dry.stdout
