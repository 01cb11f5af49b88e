"""`make clean` (workflow/scripts/clean.py) removes results/ and .snakemake/, but nothing while a
training, an evaluation or a Snakemake writes there: it used to `rm -rf` them under a running
training, losing its checkpoints (resume/ included) and leaving it writing into folders gone."""
from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from workflow.scripts import clean

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "workflow" / "scripts" / "clean.py"
HOLD = ("import sys, time\nsys.path.insert(0, sys.argv[1])\nfrom wscat.io import output_lock\n"
        "with output_lock(sys.argv[2], 'wscat train (a test)'):\n"
        "    print('held', flush=True)\n    time.sleep(120)\n")


def _checkout(tmp_path: Path) -> Path:
    """A checkout with a run's files, Snakemake's records and results/'s hidden files."""
    run = tmp_path / "results" / "models" / "digits" / "cnn" / "wscat" / "seed1"
    (run / "resume").mkdir(parents=True)
    (run / "resume" / "last.pt").write_bytes(b"epoch 3")
    (tmp_path / "results" / "tables").mkdir()
    (tmp_path / "results" / "tables" / "digits.md").write_text("| table |\n")
    (tmp_path / "results" / "notes.txt").write_text("a file at the top\n")
    (tmp_path / "results" / ".gitkeep").touch()
    (tmp_path / "results" / ".hidden").write_text("kept, as rm -rf results/* kept it\n")
    (tmp_path / ".snakemake" / "metadata").mkdir(parents=True)
    return run


@contextmanager
def _holding(output: Path) -> Iterator[subprocess.Popen[str]]:
    """A live process holding `output`'s lock, as `wscat train --out-dir output` does."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(ROOT), str(output)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait()


def _clean(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)],
                          capture_output=True, text=True, timeout=60)


def _left(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if ".wscat-lock" not in p.name)


def test_a_running_training_stops_the_clean_in_one_line_and_nothing_goes(tmp_path: Path) -> None:
    run = _checkout(tmp_path)
    before = _left(tmp_path)
    with _holding(run) as holder:
        done = _clean(tmp_path)
        assert done.returncode == 2 and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"make clean: {run.relative_to(tmp_path)} is being written (")
        assert f"pid {holder.pid}" in line and "nothing was removed" in line
        assert _left(tmp_path) == before
    # The holder gone (killed: its lock file stays, naming a dead process), the clean goes on.
    done = _clean(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"make clean: removed results/ and .snakemake/ in {tmp_path}\n"
    assert _left(tmp_path) == ["results", "results/.gitkeep", "results/.hidden"]


def test_a_snakemake_working_in_the_checkout_stops_the_clean(tmp_path: Path) -> None:
    _checkout(tmp_path)
    # A process whose command line is Snakemake's, working in the checkout (exec -a names it).
    process = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 120"], cwd=tmp_path)
    try:
        for _ in range(100):  # until the exec has happened
            if process.pid in clean.snakemakes_in(tmp_path):
                break
            subprocess.run(["sleep", "0.05"], check=True)
        done = _clean(tmp_path)
        assert done.returncode == 2
        assert done.stderr == (f"make clean: snakemake (pid {process.pid}) runs in {tmp_path}; "
                               "removing results/ now would lose its files: wait for it to "
                               "finish or stop it, then run make clean again (nothing was "
                               "removed)\n")
        assert (tmp_path / ".snakemake" / "metadata").is_dir()
    finally:
        process.kill()
        process.wait()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 120"], cwd=elsewhere)
    try:  # another checkout's Snakemake is none of this one's business
        assert _clean(tmp_path).returncode == 0
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("argv, expected", [
    (["/x/.venv/bin/snakemake", "--cores", "2"], True),
    (["/x/.venv/bin/python3", "/x/.venv/bin/snakemake", "-n"], True),
    (["python", "-m", "snakemake", "--target-jobs"], True),
    (["bash", "-c", "wscat train --out-dir .snakemake/x"], False),
    (["/usr/bin/python3", "snakemake_helper.py"], False),
    ([""], False),
])
def test_what_counts_as_snakemake(argv: list[str], expected: bool) -> None:
    assert clean._is_snakemake(argv) is expected


def test_make_clean_runs_the_guard(tmp_path: Path) -> None:
    """Through the Makefile, as a user types it: refused while a training runs, then done."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed; the Makefile's targets cannot be tested")
    run = _checkout(tmp_path)
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "workflow").symlink_to(ROOT / "workflow")
    with _holding(run):
        done = subprocess.run(["make", "-s", "clean"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and "nothing was removed" in done.stderr
        assert (run / "resume" / "last.pt").read_bytes() == b"epoch 3"
    done = subprocess.run(["make", "-s", "clean"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "results" / "models").exists()
    assert not (tmp_path / ".snakemake").exists()
