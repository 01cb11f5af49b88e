"""wscat.report.paired_figure: the paired comparison with WSCAT as a forest plot (the CIFAR-10
proxy's table page, benchmarks/proxy_table.py)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from wscat.metrics import ATTACKS
from wscat.report import paired
from wscat.report.paired_figure import PANELS, joint_note, paired_figure, rows


def _flags(seeds: tuple[int, ...]) -> dict:
    rng = np.random.default_rng(0)
    return {m: {s: rng.random((len(ATTACKS), 60)) < p for s in seeds}
            for m, p in (("wscat", 0.7), ("trades", 0.5), ("rst", 0.65))}


def test_rows_hold_ours_and_the_paper_s_difference_in_the_panels_order(tmp_path: Path) -> None:
    flags = _flags((1, 2, 3))
    mean = paired.paired_interval(flags, ["trades", "rst"])
    by_attack = paired.paired_by_attack(flags, ["trades", "rst"])
    plotted = rows(by_attack, mean, {("TRADES", "Mean"): -28.78, ("TRADES", "AA"): -26.79},
                   {"trades": "TRADES", "rst": "RST"})
    assert [(r["column"], r["method"]) for r in plotted] == [
        (c, m) for c in PANELS for m in ("TRADES", "RST")]
    first = next(r for r in plotted if r["column"] == "Mean" and r["method"] == "TRADES")
    assert first["difference"] == round(float(mean.loc[0, "delta_mean"]), 4)
    assert (first["ci_low"], first["ci_high"]) == (round(float(mean.loc[0, "ci_low"]), 4),
                                                   round(float(mean.loc[0, "ci_high"]), 4))
    assert first["excludes_zero"] == bool(mean.loc[0, "excludes_zero"])
    assert first["paper_difference"] == -28.78
    assert next(r for r in plotted if r["column"] == "PGD" and r["method"] == "RST"
                )["paper_difference"] is None
    paired_figure(plotted, tmp_path / "fig")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.csv", "fig.pdf", "fig.png"]
    with open(tmp_path / "fig.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == len(PANELS) * 2


def test_one_seed_rows_have_no_interval() -> None:
    flags = _flags((1,))
    plotted = rows(paired.paired_by_attack(flags, ["trades"]), paired.paired_interval(
        flags, ["trades"]), {}, {"trades": "TRADES"})
    assert all(r["ci_low"] is None and r["ci_high"] is None and not r["excludes_zero"]
               for r in plotted)


def test_the_figure_says_its_intervals_are_not_a_joint_test() -> None:
    flags = _flags((1, 2, 3))
    plotted = rows(paired.paired_by_attack(flags, ["trades", "rst"]),
                   paired.paired_interval(flags, ["trades", "rst"]), {},
                   {"trades": "TRADES", "rst": "RST"})
    assert joint_note(plotted).startswith(f"{len(PANELS) * 2} intervals, each at 95% on its own, "
                                          "not a joint test")
    assert joint_note(plotted[:1]) == "One interval at 95%."
