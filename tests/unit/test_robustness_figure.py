"""wscat/report/robustness_figure.py: the curves it plots are the gradient-masking checks'
numbers in each run's extra metrics file, and a file without them, or on another grid, is one
line naming it."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wscat.report import robustness_figure as figure

EPS = [0.0, 0.015686, 0.031373, 0.062745]  # 0, 1/2, 1, 2 x 8/255, as the checks round them
STEPS = [5, 10, 20, 40]


def _extra(path: Path, eps_accuracy: list[float], steps_accuracy: list[float],
           eps: list[float] = EPS) -> Path:
    """An extra metrics file with only what the figure reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"checks": {
        "pgd_eps_monotone": {"eps": eps, "accuracy": eps_accuracy, "passed": True},
        "pgd_steps_monotone": {"steps": STEPS, "accuracy": steps_accuracy, "passed": True}}}))
    return path


def test_rows_are_each_files_numbers_and_the_figure_writes_them(tmp_path: Path) -> None:
    extras = {("wscat", 1): _extra(tmp_path / "w1.json", [60.0, 45.0, 30.0, 10.0],
                                   [40.0, 33.0, 30.0, 29.5]),
              ("wscat", 2): _extra(tmp_path / "w2.json", [58.0, 44.0, 31.0, 12.0],
                                   [41.0, 34.0, 31.0, 31.0]),
              ("standard", 1): _extra(tmp_path / "s1.json", [80.0, 0.5, 0.0, 0.0],
                                      [1.0, 0.0, 0.0, 0.0])}
    plotted = figure.rows(extras, {"wscat": "WSCAT", "standard": "Standard"})
    assert len(plotted) == 3 * 8
    seed2 = [(r["panel"], r["x"], r["accuracy"]) for r in plotted
             if (r["method"], r["seed"]) == ("WSCAT", 2)]
    assert seed2 == ([("eps", x, a) for x, a in zip(EPS, [58.0, 44.0, 31.0, 12.0])]
                     + [("steps", x, a) for x, a in zip(STEPS, [41.0, 34.0, 31.0, 31.0])])
    figure.robustness_figure(plotted, tmp_path / "curves", eps=8 / 255, steps=20)
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "curves.pdf").read_bytes().startswith(b"%PDF")
    with open(tmp_path / "curves.csv", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert [(r["method"], int(r["seed"]), r["panel"], float(r["x"]), float(r["accuracy"]))
            for r in written] == [(r["method"], r["seed"], r["panel"], r["x"], r["accuracy"])
                                  for r in plotted]


def test_a_file_without_the_checks_or_on_another_grid_is_one_line(tmp_path: Path) -> None:
    good = _extra(tmp_path / "good.json", [60.0, 45.0, 30.0, 10.0], [40.0, 33.0, 30.0, 29.5])
    core = tmp_path / "core.json"
    core.write_text(json.dumps({"accuracy": {"Natural": 60.0}}))  # the core part has no checks
    with pytest.raises(ValueError, match=r"core\.json: no pgd_eps_monotone numbers .*--part "
                                         r"extra"):
        figure.rows({("wscat", 1): good, ("wscat", 2): core}, {})
    other = _extra(tmp_path / "other.json", [60.0, 30.0, 10.0], [40.0, 33.0, 30.0, 29.5],
                   eps=[0.0, 0.031373, 0.062745])
    with pytest.raises(ValueError, match=r"other\.json: its pgd_eps_monotone ran at eps .*"
                                         r"good\.json's at .*same evaluation\.checks"):
        figure.rows({("wscat", 1): good, ("trades", 1): other}, {})
    short = _extra(tmp_path / "short.json", [60.0, 45.0], [40.0, 33.0, 30.0, 29.5])
    with pytest.raises(ValueError, match="short.json: no pgd_eps_monotone numbers"):
        figure.rows({("wscat", 1): short}, {})


@pytest.mark.parametrize("value, label", [(8 / 255, "8/255"), (0.015686, "4/255"), (0.0, "0"),
                                          (0.15, "0.15"), (0.075, "0.075")])
def test_a_budget_reads_as_k_over_255_where_it_is_one(value: float, label: str) -> None:
    assert figure._eps_label(value) == label
