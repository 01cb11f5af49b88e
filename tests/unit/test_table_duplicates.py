"""A run's metrics file given twice (a duplicate seed) is refused in one line that says what
to do, as every refusal does (docs/api.md, Errors); before it only named the two files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wscat.evaluation import ATTACKS


def _run(method: str, seed: int) -> dict:
    accuracy = {**{a: 50.0 for a in ATTACKS}, "Mean": 50.0}
    return {"dataset": "digits", "model": "cnn", "method": method, "seed": seed,
            "accuracy": accuracy}


def test_a_run_given_twice_says_what_to_do(tmp_path: Path) -> None:
    from wscat.report.table import read_frame

    path = tmp_path / "wscat-1.json"
    path.write_text(json.dumps(_run("wscat", 1)))
    copy = tmp_path / "copy.json"
    copy.write_text(path.read_text())
    with pytest.raises(ValueError, match="already read from .*; pass each run's metrics file once"):
        read_frame([path, copy])
    extra = {"dataset": "digits", "model": "cnn", "method": "wscat", "seed": 1, "part": "extra",
             "accuracy": {"NRF": 10.0}}
    (tmp_path / "e1.json").write_text(json.dumps(extra))
    (tmp_path / "e2.json").write_text(json.dumps(extra))
    with pytest.raises(ValueError, match="pass each run's extra metrics file once"):
        read_frame([path, tmp_path / "e1.json", tmp_path / "e2.json"])
