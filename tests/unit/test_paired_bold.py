"""The table's bold (wscat.report.cells.bold_leads, wscat.report.paired.leads): the highest AT
mean of a row, only where its paired 95% interval against every other AT method excludes 0; and
a seed that stands apart (wscat.report.paired.apart)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.unit.test_paired import NAMES, _runs, _write
from wscat.evaluation import ATTACKS
from wscat.report import write_table
from wscat.report.cells import BOLD_RULE, bold_leads, shown_cells
from wscat.report.paired import apart, correctness, leads, paired_interval, verdict

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import paired_null  # noqa: E402

COLUMNS = (*ATTACKS, "Mean")


def test_a_lead_is_bold_only_where_its_interval_against_every_other_excludes_0():
    """TRADES 20 points below: WSCAT and RST (equal to it) both beat TRADES, but neither leads
    the other, so no cell is bold; without RST, WSCAT's lead over TRADES holds on every row.
    Each verdict is the paired interval of (the other - the leader): the same function."""
    runs = _runs({"trades": -0.2, "rst": 0.0, "wscat": 0.0})
    flags = correctness(runs)
    assert leads(flags, ["trades", "rst", "wscat"]) == {}
    assert leads(flags, ["trades", "wscat"]) == {c: "wscat" for c in COLUMNS}
    for column in COLUMNS:
        for pair in (["trades", "wscat"], ["rst", "wscat"]):
            row = paired_interval(flags, [pair[0]], reference="wscat", column=column).iloc[0]
            alone = leads(flags, pair, columns=(column,))
            assert (alone == {column: "wscat"}) == bool(row["ci_high"] < 0), (pair, column)


def test_a_tie_and_one_method_are_never_bold():
    runs = [dict(r, method="rst") for r in _runs({"wscat": 0.0})] + _runs({"wscat": 0.0})
    assert leads(correctness(runs), ["rst", "wscat"]) == {}  # the very same flags
    assert leads(correctness(runs), ["wscat"]) == {}
    assert bold_leads(runs, ["rst", "wscat"], {"wscat"}) == ({}, "fewer than two AT methods")


def test_the_tables_bold_and_caption(tmp_path: Path):
    """.tex and .md bold the lead the interval supports and name the rule; one seed, or files
    without per-image results, bold nothing and say why."""
    def table(runs: list[dict], name: str, md: bool = True) -> tuple[str, str]:
        out = tmp_path / name
        write_table(experiment="digits", dataset="digits", model="cnn",
                    metrics_files=_write(tmp_path, runs), methods=["standard", "trades", "wscat"],
                    display_names=NAMES, adversarial={"trades", "wscat"},
                    tex_path=out / "t.tex", csv_path=out / "t.csv", summary_path=out / "t.json",
                    md_path=out / "t.md" if md else None)
        return (out / "t.tex").read_text(), (out / "t.md").read_text() if md else ""

    def bold_cells(md: str) -> list[tuple[str, int]]:
        """(row, column) of the bold cells of the table itself (not the paired sections)."""
        lines = [l for l in md.split("*Paired")[0].splitlines() if l.startswith("| ")]
        return [(l.split("|")[1].strip(), i) for l in lines[2:]
                for i, cell in enumerate(l.split("|")[2:-1]) if cell.strip().startswith("**")]

    offsets = {"standard": 0.05, "trades": -0.2, "wscat": 0.0}  # Standard highest, but not AT
    tex, md = table(_runs(offsets), "three")
    assert tex.count(r"\bm{") == len(COLUMNS)
    assert bold_cells(md) == [(row, 2) for row in ("Natural", "FGSM", "PGD", "CW", "AA", "Mean")]
    rule = BOLD_RULE.replace("%", r"\%")
    assert f"{rule}.}}" in tex and f"{BOLD_RULE}.*" in md
    tex, md = table(_runs(offsets, seeds=(1,)), "one")
    assert r"\bm{" not in tex and not bold_cells(md)
    assert f"{BOLD_RULE} (none can be here: one seed)." in md
    bare = [{k: v for k, v in r.items() if k != "per_image"} for r in _runs(offsets)]
    tex, _ = table(bare, "bare", md=False)  # the .tex alone: the paired files need the flags
    assert r"\bm{" not in tex
    assert "(none can be here: no per-image results of every run on the same images)" in tex


def _equal_methods(rng: np.random.Generator, methods: int = 3, seed_sd: float = 3.0
                   ) -> list[dict]:
    """Runs of `methods` methods equal on the population (paired_null's model: image
    difficulty shared, a method's own per-image deviation, a normal seed effect)."""
    difficulty = paired_null.IMAGE_SD * rng.normal(size=paired_null.N_IMAGES)
    runs = []
    for m in range(methods):
        own = paired_null.METHOD_IMAGE_SD * rng.normal(size=paired_null.N_IMAGES)
        p = 1.0 / (1.0 + np.exp(-(paired_null.OFFSETS[:, None] + difficulty + own)))
        for seed in (1, 2, 3):
            flags = rng.random(p.shape) < p + seed_sd * rng.normal() / 100.0
            runs.append({"method": f"m{m}", "seed": seed, "flags": flags})
    return runs


def test_equal_methods_are_seldom_bold_where_the_highest_mean_always_was():
    """200 null tables of three equal AT methods, six rows each: the highest mean alone was bold
    on every row (the rule before); the paired lead is bold on at most 3% of rows."""
    rng = np.random.default_rng(4)
    bold = rows = 0
    for _ in range(200):
        runs = _equal_methods(rng)
        flags: dict[str, dict[int, np.ndarray]] = {}
        for run in runs:
            flags.setdefault(run["method"], {})[run["seed"]] = run["flags"]
        bold += len(leads(flags, ["m0", "m1", "m2"], n_bootstrap=200))
        rows += len(COLUMNS)
    assert bold / rows <= 0.03, bold / rows


def test_shown_cells_bolds_only_the_named_lead_at_the_highest_printed_mean():
    summary = pd.DataFrame([{"method": m, "metric": k, "mean": v, "std": 1.0, "n_seeds": 3}
                            for m, v in (("a", 50.0), ("b", 40.0), ("c", 60.0))
                            for k in (*ATTACKS, "Mean")])
    cells = dict(shown_cells(summary, ["a", "b", "c"], {"a", "b"}, {"Mean": "a", "AA": "b"}))
    assert [bold for _, _, bold in cells["Mean"]] == [True, False, False]  # c is not AT
    assert not any(bold for _, _, bold in cells["AA"])  # b is not the highest AT mean
    assert not any(bold for row in dict(shown_cells(summary, ["a", "b"], {"a", "b"})).values()
                   for _, _, bold in row)


@pytest.mark.parametrize("d, se, odd", [
    ([1.0, 1.0, -16.0], 0.5, 2), ([1.0, -16.0, 1.0], 0.5, 1),  # 17 off: past the 4 x 4 points
    ([1.0, 1.0, -14.0], 0.5, None),  # 15 off: within 4 x 4 points (3 x 0.5 is less)
    ([1.0, 1.0, -25.0], 2.0, 2), ([1.0, 1.0, -22.0], 2.0, None),  # 4 x 3 x 2 = 24 points
    ([3.0, -3.0, 30.0], 0.5, 2), ([5.0, -5.0, 35.0], 0.5, None),  # 4 x range: 24, 40 points
    ([1.0, 4.0, -2.0], 0.5, None), ([1.0, -20.0], 0.5, None)])
def test_a_seed_apart(d: list[float], se: float, odd: int | None):
    """Apart: farther from the other seeds' mean than 4 x the largest of their range, 3 x a
    seed's standard error over the test images (`se`, from the bootstrap draws) and 4 points:
    each of the three decides where it is the largest; a normal spread or two seeds never."""
    d_boot = np.random.default_rng(0).normal(scale=se, size=(4000, len(d)))
    assert apart(np.array(d), d_boot) == odd


def test_the_verdict_names_the_seed_apart():
    """A collapsed seed of WSCAT (its flags cut to 40% on seed 2): the row says which seed."""
    runs = _runs({"trades": 0.0, "wscat": 0.0})
    rng = np.random.default_rng(9)
    for run in runs:
        if run["method"] == "wscat" and run["seed"] == 2:
            cut = {a: np.array([c == "1" for c in f]) & (rng.random(len(f)) < 0.4)
                   for a, f in run["per_image"]["correct"].items()}
            run.update(json.loads(json.dumps(_runs({"wscat": 0.0})[0])))  # a fresh copy
            run["seed"] = 2
            run["per_image"]["correct"] = {a: "".join("1" if x else "0" for x in f)
                                           for a, f in cut.items()}
            run["accuracy"] = _accuracy(cut)
    row = paired_interval(correctness(runs), ["trades"]).iloc[0]
    assert row["apart_seed"] == 2 and verdict(row) == "within noise; seed 2 apart"


def _accuracy(flags: dict[str, np.ndarray]) -> dict[str, float]:
    from wscat.evaluation import harmonic_mean

    accuracy = {a: 100.0 * float(f.mean()) for a, f in flags.items()}
    accuracy["Mean"] = harmonic_mean([accuracy[a] for a in ATTACKS])
    return {k: round(v, 4) for k, v in accuracy.items()}
