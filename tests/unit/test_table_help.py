"""`wscat table --help` describes the paired comparison the table step computes: Student's t over
the seeds, widened by a test-set bootstrap (docs/evaluation.md, "Paired comparison"), not the
plain paired bootstrap the README retired as too narrow."""
from __future__ import annotations

import pytest

from wscat.cli import build_parser


def test_the_paired_csv_help_names_the_interval_computed(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["table", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "paired bootstrap comparison" not in text
    assert "Student's t over the seeds widened by a test-set bootstrap" in text
