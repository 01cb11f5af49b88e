"""A bare `make` lists the targets and starts nothing that takes minutes (it used to run the
whole test suite); `make demo` ends by naming the table it wrote."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_bare_make_lists_every_user_target_and_runs_nothing() -> None:
    plan = subprocess.run(["make", "-n", "--no-print-directory"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert plan.returncode == 0 and plan.stdout.strip(), plan.stderr
    assert all(line.startswith("echo ") for line in plan.stdout.strip().splitlines()), plan.stdout
    done = subprocess.run(["make", "-s", "--no-print-directory"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    listed = set(re.findall(r"^make ([a-z0-9-]+)", done.stdout, re.M))
    defined = set(re.findall(r"^([a-z0-9-]+):(?!=)", (ROOT / "Makefile").read_text(), re.M))
    assert listed <= defined, listed - defined
    # Every target but the developers' (the lock file, the README's picture) and help itself.
    assert defined - listed == {"help", "lock", "rulegraph"}, defined - listed
    assert "results/tables/digits.md" in done.stdout


def test_make_demo_ends_by_naming_its_table() -> None:
    done = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.installed",
                           "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    plan = done.stdout
    # After the table and its record in dvc.lock, the last command names the table.
    last = plan[plan.rindex("dvc commit"):]
    assert 'echo "make demo: the table is results/tables/digits.md' in last, last
    assert "results/tables/digits-paired.csv" in last
