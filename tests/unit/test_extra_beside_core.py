"""`wscat evaluate --part extra --core-wait`: the extra part started beside its core part (the
CIFAR-10 proxy's one-call script on a shared card) runs AA-paper and NRF first, waits for the core
file, and writes the same file, bit for bit, as when it runs after the core part. A core file that
never comes: one line, exit 2, nothing written."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tiny import tiny_params, write_params
from tests.unit.test_run_identity import _main, refused

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny params.yaml, seed 1's split (s1.npz), Standard trained one epoch (run/best.pt) and
    its core metrics (core.json)."""
    folder = tmp_path_factory.mktemp("beside")
    params = write_params(folder / "params.yaml", tiny_params(epochs=1))
    assert _main("split", "--params", params, "--dataset", "digits", "--seed", 1,
                 "--out", folder / "s1.npz") == 0
    assert _main("train", "--params", params, "--dataset", "digits", "--model", "cnn",
                 "--method", "standard", "--seed", 1, "--split", folder / "s1.npz",
                 "--out-dir", folder / "run", "--device", "cpu") == 0
    assert _main(*_evaluate(folder, folder / "core.json", "core")) == 0
    return folder


def _evaluate(work: Path, out: Path, part: str, *more: object) -> list[object]:
    return ["evaluate", "--params", work / "params.yaml", "--dataset", "digits", "--model", "cnn",
            "--method", "standard", "--seed", 1, "--split", work / "s1.npz", "--checkpoint",
            work / "run/best.pt", "--out", out, "--part", part, "--device", "cpu", *more]


def _wscat(*argv: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "wscat", *map(str, argv)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_the_extra_part_beside_its_core_part_writes_the_same_file(trained: Path,
                                                                  tmp_path: Path) -> None:
    in_order = tmp_path / "in-order.json"
    assert _main(*_evaluate(trained, in_order, "extra", "--core", trained / "core.json")) == 0
    late = tmp_path / "late" / "core.json"  # where the core part beside it will write
    late.parent.mkdir()
    proc = _wscat(*_evaluate(trained, tmp_path / "beside.json", "extra", "--core", late,
                             "--core-wait", 120))
    waited = []
    for line in proc.stderr:  # AA-paper and NRF ran without the core file; now it waits
        waited.append(line)
        if line.startswith("waiting up to 120 s for the core metrics"):
            break
    else:
        pytest.fail("the extra part never waited: " + "".join(waited))
    assert any(line.startswith("timing: AA-paper") for line in waited)
    assert any(line.startswith("timing: NRF") for line in waited)
    assert not (tmp_path / "beside.json").exists()
    shutil.copyfile(trained / "core.json", late.with_suffix(".tmp"))
    os.replace(late.with_suffix(".tmp"), late)  # as the core step writes it: whole, by a rename
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, "".join(waited) + err
    assert re.search(r"^waited \d+\.\d s for the core metrics$", err, re.MULTILINE), err
    assert (tmp_path / "beside.json").read_bytes() == in_order.read_bytes()
    # A core file there at the start is read at the start, as without --core-wait.
    there = tmp_path / "there.json"
    assert _main(*_evaluate(trained, there, "extra", "--core", trained / "core.json",
                            "--core-wait", 5)) == 0
    assert there.read_bytes() == in_order.read_bytes()


def test_a_core_file_that_never_comes_is_one_line_and_nothing_written(trained: Path,
                                                                      tmp_path: Path,
                                                                      capsys) -> None:
    """After its progress lines (AA-paper's, NRF's, the wait's), one line and exit 2; no metrics
    file, only AA-paper's finished shard, which the rerun takes up (as after a kill)."""
    out = tmp_path / "extra.json"
    capsys.readouterr()
    assert _main(*_evaluate(trained, out, "extra", "--core", tmp_path / "none.json",
                            "--core-wait", 0.5)) == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and err.count("error:") == 1, err
    assert "--core" in line and "did not appear within 0.5 s" in line, line
    assert "wscat evaluate --part core" in line, line
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["extra.json.shards"]


def test_a_late_core_file_of_another_run_is_refused_as_one_there_at_the_start(
        trained: Path, tmp_path: Path) -> None:
    """The waited-for file gets the checks a file there at the start gets: here another seed's."""
    other = tmp_path / "other.json"
    data = json.loads((trained / "core.json").read_text())
    text = json.dumps({**data, "seed": 2})
    late = tmp_path / "core.json"
    proc = _wscat(*_evaluate(trained, tmp_path / "extra.json", "extra", "--core", late,
                             "--core-wait", 120))
    for line in proc.stderr:
        if line.startswith("waiting up to"):
            break
    other.write_text(text)
    os.replace(other, late)
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert "holds standard seed 2" in lines[-1], err
    assert not (tmp_path / "extra.json").exists()


@pytest.mark.parametrize("part, wait, says", [
    ("core", "5", "--core-wait is read by --part extra only, not --part core"),
    ("all", "5", "--core-wait is read by --part extra only, not --part all"),
    ("extra", "-1", "-1 seconds; give a finite number, 0 or more"),
    ("extra", "nan", "nan seconds; give a finite number, 0 or more"),
    ("extra", "soon", "'soon' is not a number"),
])
def test_core_wait_is_refused_where_it_means_nothing(trained: Path, tmp_path: Path, capsys,
                                                     part: str, wait: str, says: str) -> None:
    core = ["--core", trained / "core.json"] if part == "extra" else []
    line = refused(capsys, *_evaluate(trained, tmp_path / "m.json", part, *core,
                                      "--core-wait", wait))
    assert says in line, line
    assert not (tmp_path / "m.json").exists()
