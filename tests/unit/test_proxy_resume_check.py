"""benchmarks/proxy_resume_check.py's --stop-after: a number of seconds `timeout` can wait, or one
line and exit 2 with nothing made (the --work folder not created)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-3"])
def test_stop_after_must_be_a_positive_finite_number(tmp_path: Path, value: str) -> None:
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/proxy_resume_check.py"),
                           "--stop-after", value, "--work", str(work)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"proxy_resume_check: error: --stop-after {float(value):g}: give a positive number of "
        "seconds"]
    assert not work.exists()
