"""benchmarks/threads_under_load.py: its page, from real (tiny) timings, and its refusals; the
suite's one thread."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from threads_under_load import main  # noqa: E402


def test_the_page_has_a_row_per_thread_count(tmp_path: Path, capsys) -> None:
    out = tmp_path / "page.md"
    assert main(["--threads", "1", "--busy", "1", "--batches", "2", "--passes", "2",
                 "--repeats", "1", "--out", str(out)]) == 0
    page = out.read_text()
    assert page == capsys.readouterr().out
    assert "beside 1 busy Python loops" in page and "cores; torch" in page
    rows = [line.split(" | ") for line in page.splitlines() if line.startswith("| 2 |")]
    assert [row[1] for row in rows] == ["1"]
    for row in rows:  # alone and beside: "median (min-max)" of one repeat, all the same value
        for cell in row[2:4]:
            median, spread = cell.split(" (")
            assert float(median) > 0 and spread == f"{median}-{median})"
        assert row[-1].rstrip(" |") == "1.0"  # the slowest beside against itself


@pytest.mark.parametrize("argv", [["--passes", "0"], ["--busy", "-1"], ["--threads", "0"]])
def test_counts_below_one_are_refused(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "must be 1 or more" in capsys.readouterr().err


def test_the_suite_computes_on_one_thread() -> None:
    """tests/conftest.py's setting, which this page is the reason for: here and in every process
    a test starts (OMP_NUM_THREADS is torch's default there)."""
    assert torch.get_num_threads() == 1
    assert os.environ["OMP_NUM_THREADS"] == "1"
