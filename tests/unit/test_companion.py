"""The companion `{label}-vs-paper` compares like for like: the paper's Mean was computed over its
own AutoAttack (our AA-paper), so beside it stands our Mean over AA-paper (`Mean-paper`, per seed,
then the mean over seeds), not our Mean over the standard AutoAttack; where no AA-paper was
measured, our Mean stays, marked as over the standard AA."""
from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

import pytest

from tests.unit.test_paper_table_refusals import (PARAMS, TIER, accepted, edit,  # noqa: F401
                                                  metrics, paper_table, tier_params, tier_work,
                                                  write)
from wscat.metrics import harmonic_mean
from wscat.report import paper
from wscat.report.compare import join, render

HEADER = "table,dataset,model,method,metric,mean,std,n_seeds\n"
PAPER_WSCAT_MEAN, PAPER_TRADES_MEAN = 59.40, 30.62  # reported.csv, Tab-RQ1-CIFAR10


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_paper_tier_csv_carries_the_mean_over_aa_paper_per_seed(tier_work, tier_params,
                                                                     capsys) -> None:
    """Per seed the harmonic mean of Natural, FGSM, PGD, CW and AA-paper, then mean and sample
    std over seeds, as the table's Mean; a CSV row, not a row of the .tex."""
    accepted(paper_table(), capsys)
    table = {(r["method"], r["metric"]): r for r in rows(tier_work / "ptr.csv")}
    # tests/unit/test_paper_table_refusals.metrics: Natural 80 + s, PGD 40 - s, AA-paper 29.
    per_seed = [harmonic_mean([80.0 + s, 50.0, 40.0 - s, 35.0, 29.0]) for s in (1, 2, 3)]
    for method in ("Standard", "WSCAT"):
        row = table[method, "Mean-paper"]
        assert row["mean"] == f"{statistics.fmean(per_seed):.2f}"
        assert row["std"] == f"{statistics.stdev(per_seed):.2f}" and row["n_seeds"] == "3"
        assert table[method, "Mean"]["mean"] == "43.00"  # the files' own Mean, over AA
    assert "Mean-paper" not in (tier_work / "ptr.tex").read_text()


def _paper_table(tmp_path: Path, monkeypatch, tier_params, capsys, label: str) -> None:
    """The paper tier's table `label` (t.tex, t.csv in tmp_path) from a metrics file per run."""
    monkeypatch.chdir(tmp_path)
    for path in paper.table_inputs(tier_params, TIER, label, "results"):
        run = paper.Run(*Path(path).parts[-4:-1], int(Path(path).stem.split("-")[0][4:]))
        write(path, metrics(tier_params, run, part="extra" if "-extra" in path else None))
    accepted(["paper-table", "--params", str(PARAMS), "--tier", TIER, "--label", label,
              "--results", "results", "--tex", "t.tex", "--csv", "t.csv"], capsys)


@pytest.mark.parametrize("label", ["Tab-RQ1-digits", "Tab-ap-digits"])
def test_the_paper_tiers_performance_and_ablation_tables_say_what_is_bold(
        tmp_path: Path, monkeypatch, tier_params, capsys, label) -> None:
    """The paper tier's Table 2 and its ablation table name the bold's rule; these test files hold
    no per-image results, so nothing is bold and the caption says why."""
    from wscat.report.cells import BOLD_RULE

    _paper_table(tmp_path, monkeypatch, tier_params, capsys, label)
    tex = (tmp_path / "t.tex").read_text()
    assert (BOLD_RULE.replace("%", r"\%") + " (none can be here: no per-image results of every "
            "run on the same images)") in tex and r"\bm{" not in tex


@pytest.mark.parametrize("label", ["Tab-mode", "tab-sup"])
def test_tab_mode_and_tab_sup_carry_it_too(tmp_path: Path, monkeypatch, tier_params, capsys,
                                           label) -> None:
    _paper_table(tmp_path, monkeypatch, tier_params, capsys, label)
    table = rows(tmp_path / "t.csv")
    means = [r for r in table if r["metric"] == "Mean"]
    paper_means = [r for r in table if r["metric"] == "Mean-paper"]
    assert means and len(paper_means) == len(means)
    seeds = sorted({int(Path(p).stem.removeprefix("seed"))
                    for p in paper.table_inputs(tier_params, TIER, label, "results")
                    if "-extra" not in p})
    per_seed = [harmonic_mean([80.0 + s, 50.0, 40.0 - s, 35.0, 29.0]) for s in seeds]
    assert {r["mean"] for r in paper_means} == {f"{statistics.fmean(per_seed):.2f}"}
    assert "Mean-paper" not in (tmp_path / "t.tex").read_text()
    # tab-sup's NRF column: another attack than the paper's, its caption says
    assert ("not the paper's unbounded L2 attack" in (tmp_path / "t.tex").read_text()) == (
        label == "tab-sup")


def test_no_aa_paper_no_mean_paper(tier_work, tier_params, capsys) -> None:
    for run in paper.experiment_runs(tier_params, "digits-table2"):
        edit(run.extra("results"), lambda data: data.update(accuracy={}))
    accepted(paper_table(), capsys)
    assert not [r for r in rows(tier_work / "ptr.csv") if r["metric"] == "Mean-paper"]


def table_csv(tmp_path: Path, *, wscat_paper_mean: bool) -> Path:
    """Our Tab-RQ1-CIFAR10 CSV for WSCAT (with AA-paper, and Mean-paper where asked) and TRADES
    (without)."""
    path = tmp_path / "Tab-RQ1-CIFAR10.csv"
    lines = [f"Tab-RQ1-CIFAR10,CIFAR10,WRN-28-10,{method},{metric},{mean},1.00,3"
             for method, metric, mean in (
                 ("WSCAT", "AA", "50.00"), ("WSCAT", "Mean", "55.00"),
                 ("WSCAT", "AA-paper", "53.00"),
                 *([("WSCAT", "Mean-paper", "58.00")] if wscat_paper_mean else []),
                 ("TRADES", "AA", "25.00"), ("TRADES", "Mean", "31.00"))]
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


def test_the_mean_beside_the_paper_s_is_over_aa_paper_where_measured(tmp_path: Path) -> None:
    joined = join(table_csv(tmp_path, wscat_paper_mean=True))
    wscat = {row["metric"]: row for row in joined if row["method"] == "WSCAT"}
    assert list(wscat) == ["AA", "AA-paper", "Mean-paper"]  # our Mean over AA left out
    assert (wscat["Mean-paper"]["ours"], wscat["Mean-paper"]["paper"]) == (58.0, PAPER_WSCAT_MEAN)
    assert wscat["Mean-paper"]["difference"] == pytest.approx(58.0 - PAPER_WSCAT_MEAN)
    assert "AA-paper" in wscat["Mean-paper"]["note"] and "standard AA" in wscat["AA"]["note"]
    trades = {row["metric"]: row for row in joined if row["method"] == "TRADES"}
    assert (trades["Mean"]["ours"], trades["Mean"]["paper"]) == (31.0, PAPER_TRADES_MEAN)
    assert "standard AA" in trades["Mean"]["note"]
    tex, companion = render(joined, "Tab-RQ1-CIFAR10")
    caption = tex.split(r"\caption{")[1].split(r"\label")[0]
    assert "Mean-paper" in caption and "AA (paper's variant)" in caption
    assert "standard AutoAttack" in caption  # TRADES' Mean
    written = list(csv.DictReader(io.StringIO(companion)))
    assert [(r["method"], r["metric"], r["note"] != "") for r in written] == [
        ("WSCAT", "AA", True), ("WSCAT", "AA-paper", False), ("WSCAT", "Mean-paper", True),
        ("TRADES", "AA", True), ("TRADES", "Mean", True)]


def test_without_aa_paper_the_mean_row_says_it_is_over_the_standard_aa(tmp_path: Path) -> None:
    joined = join(table_csv(tmp_path, wscat_paper_mean=False))
    means = [row for row in joined if row["metric"] == "Mean"]
    assert [row["method"] for row in means] == ["WSCAT", "TRADES"]
    assert all("standard AA" in row["note"] for row in means)
    tex, _ = render(joined, "Tab-RQ1-CIFAR10")
    caption = tex.split(r"\caption{")[1].split(r"\label")[0]
    assert "standard AutoAttack" in caption and "Mean-paper" not in caption


def test_the_caption_gives_the_noise_a_difference_must_clear(tmp_path: Path) -> None:
    """Our seed spread (the largest std of our cells) and a test set's binomial error, and that a
    difference inside them is not a finding; one seed says its spread is unmeasured."""
    joined = join(table_csv(tmp_path, wscat_paper_mean=True))
    caption = render(joined, "Tab-RQ1-CIFAR10")[0].split(r"\caption{")[1].split(r"\label")[0]
    assert "the std over seeds here up to 1.00 points" in caption
    assert ("sqrt(p(1 - p)/N): at p = 50\\%, 0.50 points on 10,000 images (CIFAR's test "
            "sets), 0.71 on 5,000 (ImageNet32-100's), 1.58 on 1,000 (the CIFAR-10 proxy's)"
            ) in caption  # 100 sqrt(0.25/N): 0.500, 0.707, 1.581
    assert "A difference from the paper inside that noise is not a finding." in caption
    one = [{**row, "ours_std": None} for row in joined]
    assert "ours is one seed, whose seed-to-seed spread is unmeasured" in render(
        one, "Tab-RQ1-CIFAR10")[0]


def test_our_nrf_beside_the_paper_s_says_it_is_another_attack(tmp_path: Path) -> None:
    """Ours is L-inf PGD in the eps-ball, the paper's an unbounded L2 attack (docs/evaluation.md):
    its difference came out as a plain number beside AA's and Mean's notes."""
    path = tmp_path / "tab-sup.csv"
    path.write_text(HEADER + "tab-sup,CIFAR10,ResNet50,TRADES,NRF,50.00,1.00,3\n"
                    "tab-sup,CIFAR10,ResNet50,TRADES,PGD,52.00,1.00,3\n")
    joined = join(path)
    nrf = next(row for row in joined if row["metric"] == "NRF")
    assert (nrf["paper"], nrf["difference"]) == (43.92, 6.08)
    assert "not the paper's unbounded L2 attack" in nrf["note"]
    assert next(row for row in joined if row["metric"] == "PGD")["note"] == ""
    caption = render(joined, "tab-sup")[0].split(r"\caption{")[1].split(r"\label")[0]
    assert "NRF: ours is L-inf PGD in the eps-ball" in caption
    assert "NRF" not in render([r for r in joined if r["metric"] == "PGD"], "tab-sup")[0]
