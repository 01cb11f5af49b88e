"""An extra row (AA-paper, NRF) is shown only when every run has it: when some runs have it and
others do not (an extra metrics file left out), the table says so in a note rather than drop
the row without a word."""
from __future__ import annotations

import json
from pathlib import Path

from wscat.evaluation import ATTACKS
from wscat.report.table import read_frame


def _write(folder: Path, method: str, seed: int, **extra: float) -> Path:
    accuracy = {**{a: 50.0 for a in ATTACKS}, "Mean": 50.0, **extra}
    path = folder / f"{method}-{seed}.json"
    path.write_text(json.dumps({"dataset": "digits", "model": "cnn", "method": method,
                                "seed": seed, "accuracy": accuracy}))
    return path


def test_an_extra_row_some_runs_lack_is_named_in_a_note(tmp_path: Path) -> None:
    files = [_write(tmp_path, "wscat", 1, NRF=40.0), _write(tmp_path, "wscat", 2, NRF=41.0),
             _write(tmp_path, "trades", 1, NRF=30.0), _write(tmp_path, "trades", 2)]
    _, frame = read_frame(files)
    assert "NRF" not in frame.attrs["metrics"]
    (note,) = [n for n in frame.attrs["notes"] if n.startswith("NRF")]
    assert note == ("NRF: not shown, since 1 of the 4 runs has no NRF accuracy (e.g. trades "
                    "seed 2); evaluate their extra part (`wscat evaluate --part extra`) to show it.")


def test_no_note_where_every_run_or_none_has_it(tmp_path: Path) -> None:
    every = [_write(tmp_path, "wscat", 1, NRF=40.0), _write(tmp_path, "trades", 1, NRF=30.0)]
    _, frame = read_frame(every)
    assert "NRF" in frame.attrs["metrics"]
    assert not [n for n in frame.attrs["notes"] if "not shown" in n]
    none = [_write(tmp_path, "wscat", 2), _write(tmp_path, "trades", 2)]
    _, frame = read_frame(none)
    assert "NRF" not in frame.attrs["metrics"] and frame.attrs["notes"] == []
