"""What the report's outputs say must agree with what they show: an interval's bound near 0
printed with its sign (so beside its verdict), no spread claimed for one seed, our standard AA
named as such beside the paper's, and a metrics file whose Mean is not its own accuracies'
harmonic mean refused. Every input is written by hand, so nothing trains."""
from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from tests.unit.test_paper_table_refusals import (TIER, accepted, edit, metrics,  # noqa: F401
                                                  one_line_error, table, table_work,
                                                  tier_params, write)
from wscat.metrics import ATTACKS, harmonic_mean
from wscat.report import markdown, paired, paper
from wscat.report.compare import join, render
from wscat.report.paper_tables import build
from wscat.report.table import collect

NAMES = {"trades": "TRADES", "rst": "RST", "wscat": "WSCAT"}


# --- 1. a bound that rounds to 0.00 shows its sign -------------------------------------------

def _row(method: str, low: float, high: float) -> dict:
    """A paired row (wscat.report.paired.COLUMNS) with the interval [low, high] on three seeds."""
    return {"method": method, "reference": "wscat", "delta_mean": (low + high) / 2,
            "ci_low": low, "ci_high": high, "excludes_zero": bool(low > 0 or high < 0),
            "n_seeds": 3, "n_images": 300, "n_bootstrap": 2000, "sd_seeds": 0.5,
            "se_test_set": 0.1, "df": 2, "apart_seed": None, "note": ""}


def test_a_bound_near_zero_is_printed_with_its_sign_in_every_output() -> None:
    """+0.004 excludes 0 (higher than WSCAT), -0.004 does not (within noise): printed '+0.00' and
    '-0.00' at two decimals, the interval looked like the same one with opposite verdicts."""
    frame = paired._frame([_row("trades", 0.004, 2.4), _row("rst", -0.004, 2.4)],
                          paired.COLUMNS)
    md = markdown.paired_markdown(frame, NAMES)
    assert "| TRADES | +1.20 | [+0.004, +2.40] | higher than WSCAT |" in md
    assert "| RST | +1.20 | [-0.004, +2.40] | within noise |" in md
    tex = markdown.paired_tex(frame, NAMES, label="Tab-paired-x")
    assert r"$[+0.004, +2.40]$ & higher than WSCAT" in tex
    assert r"$[-0.004, +2.40]$ & within noise" in tex
    rows = list(csv.DictReader(io.StringIO(markdown.paired_csv(frame, NAMES))))
    assert [(r["ci_low"], r["ci_high"], r["verdict"]) for r in rows] == [
        ("0.004", "2.40", "higher than WSCAT"), ("-0.004", "2.40", "within noise")]
    by_attack = frame.assign(column="AA")
    assert "**+1.20 [+0.004, +2.40]**" in markdown.paired_attacks_markdown(by_attack, NAMES)
    # Bounds away from 0 print as before; closer ones with the decimals that show their side.
    assert [markdown.bound(v) for v in (1.234, -0.006, 0.0004, -0.00004, 0.0)] == [
        "+1.23", "-0.01", "+0.0004", "-0.00004", "0.00"]


def test_the_per_attack_caption_claims_its_level_only_where_it_was_simulated() -> None:
    """Three seeds on the demo's 359 images: the per-attack rates of docs/evaluation.md. The
    two-seed proxy table printed "each cell holds its level by itself" under a Mean caption
    saying the level is not shown with two seeds."""
    def caption(k: int, n_images: int) -> str:
        row = {**_row("trades", 0.5, 2.4), "n_seeds": k, "n_images": n_images, "column": "AA"}
        return markdown.paired_attacks_markdown(paired._frame([row], ["column", *paired.COLUMNS]),
                                                NAMES).splitlines()[0]

    assert "95%); bold where it excludes 0. Each cell holds its level by itself; the 1 attacks" \
        in caption(3, 359)
    for k, n, other in ((2, 1000, "not with 2 on 1000"), (3, 1000, "not on 1000"),
                        (2, 359, "not with 2")):
        assert "holds its level" not in caption(k, n)
        assert (f"Each cell's level by itself was simulated with three seeds on 359 test images, "
                f"{other}; the 1 attacks are not tested jointly") in caption(k, n)


# --- 2. one seed: no spread claimed in the paper tier's captions -----------------------------

def _paper_tables(root: Path, params: dict) -> dict[str, str]:
    """The .tex of Tab-RQ1-digits and Tab-mode from a metrics file per run under `root`."""
    for label in ("Tab-RQ1-digits", "Tab-mode"):
        for path in paper.table_inputs(params, TIER, label, str(root / "results")):
            run = paper.Run(*Path(path).parts[-4:-1], int(Path(path).stem.split("-")[0][4:]))
            write(path, metrics(params, run, part="extra" if "-extra" in path else None))
    return {label: build(params, TIER, label, str(root / "results"))[0]
            for label in ("Tab-RQ1-digits", "Tab-mode")}


def _caption(tex: str) -> str:
    return tex.split(r"\caption{")[1].split(r"\label")[0]


def test_a_one_seed_paper_table_claims_no_spread_and_three_seeds_read_as_before(
        tmp_path: Path, tier_params) -> None:
    one = copy.deepcopy(tier_params)
    for name in ("digits-table2", "digits-ablation"):
        one["experiments"][name]["seeds"] = [1]
    tex = _paper_tables(tmp_path / "one", one)
    for label in ("Tab-RQ1-digits", "Tab-mode"):
        caption = _caption(tex[label])
        assert ("mean and sample standard deviation (ddof=1) over seed 1 (one seed: no spread; "
                "means alone)") in caption, caption
        assert "over seeds" not in caption, caption
    tex = _paper_tables(tmp_path / "three", tier_params)
    assert ("Performance on Digits (CNN), mean and sample standard deviation (ddof=1) over seeds "
            "1, 2, 3. Bold:") in _caption(tex["Tab-RQ1-digits"])
    assert _caption(tex["Tab-mode"]).startswith(
        "The harmonic mean accuracies of WSCAT and its variants. Each harmonic mean is computed "
        "over the natural accuracy and the accuracies under FGSM, PGD, CW and AA; mean and sample "
        "standard deviation (ddof=1) over seeds.")


def test_the_proxy_tables_say_how_many_of_the_tiers_seeds_they_hold(tmp_path: Path) -> None:
    """benchmarks/proxy_table.py ends each lifted table's caption with the seeds it holds while
    some are missing (and leaves it as it is once all are in: it is not called then)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from proxy_table import mark_partial, partial_note

    note = partial_note([1], [1, 2, 3])
    assert note == "This table holds 1 of the tier's 3 seeds; seeds 2, 3 still missing."
    assert partial_note([1, 2], [1, 2, 3]).endswith("; seed 3 still missing.")
    tex, md = tmp_path / "t.tex", tmp_path / "t.md"
    tex.write_text("\\begin{table}[t]\n\t\\caption{Performance, over seed 1.}\n\t\\label{x}\n")
    md.write_text("*Performance, over seed 1.*\n\n| a |\n\n*Paired comparison: one seed.*\n")
    for path in (tex, md):
        mark_partial(path, note)
    assert f"\t\\caption{{Performance, over seed 1. {note}}}\n" in tex.read_text()
    assert md.read_text().startswith(f"*Performance, over seed 1. {note}*\n")
    assert md.read_text().endswith("*Paired comparison: one seed.*\n")


# --- 3. the companion's AA row is our standard AutoAttack ------------------------------------

def _table_csv(tmp_path: Path, aa_paper: bool) -> Path:
    path = tmp_path / "Tab-RQ1-CIFAR10.csv"
    rows = [("AA", "50.00"), ("Mean", "55.00"), *([("AA-paper", "53.00")] if aa_paper else [])]
    path.write_text("table,dataset,model,method,metric,mean,std,n_seeds\n" + "".join(
        f"Tab-RQ1-CIFAR10,CIFAR10,WRN-28-10,WSCAT,{metric},{mean},1.00,3\n"
        for metric, mean in rows))
    return path


@pytest.mark.parametrize("aa_paper", [True, False])
def test_the_companion_says_its_aa_is_the_standard_one(tmp_path: Path, aa_paper: bool) -> None:
    joined = join(_table_csv(tmp_path, aa_paper))
    (aa,) = [row for row in joined if row["metric"] == "AA"]
    assert "standard AA" in aa["note"] and "stronger than the paper's variant" in aa["note"]
    assert ("AA-paper is like for like" in aa["note"]) == aa_paper
    assert ("no AA-paper measured" in aa["note"]) == (not aa_paper)
    caption = _caption(render(joined, "Tab-RQ1-CIFAR10")[0])
    assert "AA: ours is the standard AutoAttack, stronger than the paper's released variant" \
        in caption
    assert ("AA-paper, ours in the paper's variant, stands beside the same number"
            in caption) == aa_paper


# --- 4. a Mean that is not the harmonic mean of the file's five accuracies --------------------

ACCURACY = {"Natural": 81.0, "FGSM": 50.0, "PGD": 39.0, "CW": 35.0, "AA": 30.0}
HARMONIC = round(harmonic_mean(list(ACCURACY.values())), 4)  # 41.7064
RECORDED = {"Mean": {"of": list(ATTACKS), "kind": "harmonic"}}  # as `wscat evaluate` records it


def _metrics_file(tmp_path: Path, mean: float) -> Path:
    path = tmp_path / "wscat-seed1.json"
    path.write_text(json.dumps({"dataset": "digits", "model": "cnn", "method": "wscat",
                                "seed": 1, "accuracy": {**ACCURACY, "Mean": mean},
                                "manifest": {"attacks": RECORDED}}))
    return path


def test_a_mean_its_accuracies_do_not_give_is_refused_in_one_line(tmp_path: Path) -> None:
    assert len(collect([_metrics_file(tmp_path, HARMONIC + 0.0003)])) == 6  # rounding: taken
    path = _metrics_file(tmp_path, 43.0)
    with pytest.raises(ValueError) as refusal:
        collect([path])
    line = str(refusal.value)
    assert "\n" not in line and line.startswith(f"{path}: ")
    assert "Mean 43.0" in line and f"which is {HARMONIC:.4f}" in line and "harmonic mean" in line


def test_the_table_cli_refuses_it_with_exit_2(table_work, capsys) -> None:
    work, _ = table_work
    edit(work / "m.json", lambda data: data["manifest"].update(attacks=RECORDED))
    one_line_error(table("params.yaml", "m.json"), ("m.json", "Mean 43.0", "harmonic mean"),
                   work, capsys)
    edit(work / "m.json", lambda data: data["accuracy"].update(
        Mean=round(harmonic_mean([data["accuracy"][a] for a in ATTACKS]), 4)))
    accepted(table("params.yaml", "m.json"), capsys)


def test_the_paired_refusal_says_what_differs() -> None:
    """Flags of every evaluated image whose Mean is off are not 'AutoAttack on a subset?'."""
    flags = {a: np.arange(20) % (i + 2) == 0 for i, a in enumerate(ATTACKS)}
    accuracy = {a: 100.0 * float(f.mean()) for a, f in flags.items()}
    data = {"method": "wscat", "seed": 1, "manifest": {"n_examples": 20},
            "accuracy": {**accuracy, "Mean": harmonic_mean(list(accuracy.values())) + 1.0},
            "per_image": {"order": "stratified, subset_seed 0", "correct": {
                a: "".join("1" if x else "0" for x in f) for a, f in flags.items()}}}
    with pytest.raises(paired.NotTheTablesMean) as refusal:
        paired.correctness([data])
    assert "subset" not in str(refusal.value) and "not their harmonic mean" in str(refusal.value)
    data["accuracy"]["Mean"] -= 1.0
    data["accuracy"]["PGD"] += 5.0
    with pytest.raises(paired.NotTheTablesMean, match="on all 20 images evaluated: its PGD"):
        paired.correctness([data])
    data["manifest"]["n_examples"] = 40  # the flags of AutoAttack's 20 of 40 images
    with pytest.raises(paired.NotTheTablesMean, match="20 of the 40 images evaluated"):
        paired.correctness([data])


def test_the_paired_caption_says_its_delta_is_of_unrounded_numbers() -> None:
    """Means of 62.996 (TRADES) and 73.964 (WSCAT) print as 63.00 and 73.96, 10.96 apart; their
    Δ, -10.968, prints as -10.97. Both outputs' captions say why the two can differ."""
    from tests.unit.test_report_mutations import _row as paired_row

    delta = 62.996 - 73.964
    assert round(62.996, 2) - round(73.964, 2) == pytest.approx(-10.96)
    frame = paired._frame([paired_row(delta_mean=delta, ci_low=-20.0, ci_high=-1.0)],
                          paired.COLUMNS)
    md = markdown.paired_markdown(frame, NAMES)
    assert "| TRADES | -10.97 | [-20.00, -1.00] | lower than WSCAT |" in md
    said = ("Δ comes from the unrounded accuracies, so it can differ by 0.01 from the difference "
            "of two rounded means.")
    assert said in md
    tex = markdown.paired_tex(frame, NAMES, label="tab:paired")
    assert said.replace("Δ", r"$\Delta$") in tex and "Δ" not in tex  # pdflatex has no Δ
