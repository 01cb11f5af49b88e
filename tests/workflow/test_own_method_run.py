"""Your own method through the workflow as a user runs it (docs/methods.md, "Your own method"):
the example MART named in params.yaml is trained, attacked and tabulated by Snakemake beside a
built-in method, and an edit of its file retrains it alone (~20 s)."""
from __future__ import annotations

import csv
import os
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


BOOM = ("from wscat.methods import Method\n"
        "from helper_of_boom import FACTOR\n"
        "class Boom(Method):\n"
        "    def loss(self, model, batch, ctx):\n"
        "        raise RuntimeError(f'boom x{FACTOR}')\n")


def test_an_error_in_your_loss_is_one_line_and_its_traceback_on_request(tmp_path: Path) -> None:
    """A `wscat train` job imports your file as the dry-run's check does (its sibling module
    found in a process that has no folder of yours on sys.path), and an error your loss raises
    is one line naming the file and line, exit 2; WSCAT_DEBUG=1 shows its traceback."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "boom.py").write_text(BOOM)
    (tmp_path / "mine" / "helper_of_boom.py").write_text("FACTOR = 3\n")
    params = tiny_params()
    params["methods"]["boom"] = {"objective": "mine/boom.py:Boom", "data": "labelled",
                                 "selection": "natural"}
    write_params(tmp_path / "params.yaml", params)
    wscat = [str(BIN / "wscat")]
    split = subprocess.run([*wscat, "split", "--dataset", "digits", "--seed", "1", "--out",
                            "s.npz"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert split.returncode == 0, split.stderr
    train = [*wscat, "train", "--dataset", "digits", "--model", "cnn", "--method", "boom",
             "--seed", "1", "--split", "s.npz", "--out-dir", "run", "--threads", "1"]
    result = subprocess.run(train, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == ["wscat train: error: mine/boom.py:Boom: its loss raised "
                                          "RuntimeError: boom x3 (mine/boom.py line 5)"]
    debug = subprocess.run(train, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "WSCAT_DEBUG": "1"})
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    assert 'raise RuntimeError(f\'boom x{FACTOR}\')' in debug.stderr
