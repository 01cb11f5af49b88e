"""A make target after a Snakemake stopped without its cleanup (killed, or its terminal closed):
its lock (.snakemake/locks) stopped the next `make demo` with Snakemake's LockException, whose
remedy ("It can be removed with the --unlock argument") names no command a `make` user can type
(snakemake is .venv/bin/snakemake, not on a plain shell's PATH). The Makefile now checks first:
one line with the command, Snakemake not started, the lock kept."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _checkout(folder: Path) -> Path:
    """`folder` as a checkout outside git (the demo's DVC check and record skipped) whose venv is
    made and whose snakemake only records that it ran."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed; the Makefile's targets cannot be tested")
    shutil.copy(ROOT / "Makefile", folder / "Makefile")
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-lock.txt",
                 "pyproject.toml"):
        (folder / name).write_text("")
        os.utime(folder / name, (1, 1))  # older than the venv's stamp: no install
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    ran = folder / "snakemake-ran"
    (bin_dir / "snakemake").write_text(f'#!/bin/sh\necho "$*" >> {ran}\n')
    (bin_dir / "snakemake").chmod(0o755)
    (folder / ".venv" / ".installed").touch()
    return ran


def _make(folder: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.parent)}
    return subprocess.run(["make", "--no-print-directory", target], cwd=folder,
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("target", ["demo", "paper-digits", "table2-digits"])
def test_a_left_lock_stops_the_target_in_one_line_with_the_command(tmp_path: Path,
                                                                   target: str) -> None:
    ran = _checkout(tmp_path)
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)  # as a Snakemake killed with SIGKILL or SIGHUP leaves them
    (locks / "0.input.lock").write_text("/x/results/splits/digits/seed1.npz\n")
    (locks / "0.output.lock").write_text("/x/results/tables/digits.tex\n")
    done = _make(tmp_path, target)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.endswith(
        "*** Snakemake's lock is on this checkout (.snakemake/locks): another snakemake runs "
        "here, or one was stopped without its cleanup (killed, or its terminal closed); when "
        f"none runs, `.venv/bin/snakemake --unlock`, then make {target} again continues where "
        "it stopped (finished jobs kept, trainings resumed from their last epoch).  Stop."), line
    assert not ran.exists()  # Snakemake never started
    assert sorted(p.name for p in locks.iterdir()) == ["0.input.lock", "0.output.lock"]
    # What --unlock leaves (an empty locks/): the same target runs Snakemake as before.
    for lock in locks.iterdir():
        lock.unlink()
    done = _make(tmp_path, "table2-digits")
    assert done.returncode == 0, done.stderr
    assert ran.read_text() == "--cores 2 -- results/paper/digits/Tab-RQ1-digits.tex\n"
