"""The paper's tables and figures (wscat.report.paper*, figures, compare; workflow/rules/paper.smk):
the params expansion behind them, their targets in the DAG, the comparison with the paper's
numbers on known metrics, and every table and figure rendered on the embedded default."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.latex import check_table, engine, tabular_rows
from tests.workflow.test_workflow import copy_workflow, job_counts, real_params, run
from tests.helpers.tiny import tiny_params
from wscat.config import method_for, validate_params
from wscat.data.split import make_split
from wscat.metrics import harmonic_mean
from wscat.report import paper
from wscat.report.names import display_name
from wscat.sweeps import expand_paper, generated

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# --- params: the runs the figures need ------------------------------------------------------

def test_the_paper_section_spells_out_sweeps_and_the_fully_supervised_setting() -> None:
    params = validate_params(real_params())
    assert params["datasets"]["digits-full"]["labelled"] is None
    assert params["datasets"]["digits-unlabelled10"]["unlabelled_fraction"] == 0.1
    assert params["datasets"]["digits-unlabelled10"]["source"] == "digits"
    # A generated dataset keeps its base's schedule and per-dataset overrides.
    assert params["training"]["digits-full"] == params["training"]["digits"]
    assert (method_for(params, "mt", "digits-unlabelled10")["teacher_decay"]
            == method_for(params, "mt", "digits")["teacher_decay"] == 0.7)
    # A beta point is WSCAT with that beta on every dataset, the base's other overrides kept.
    point = method_for(params, "wscat-beta0.2", "imagenet32")
    assert point["beta"] == 0.2 and point["lam"] == method_for(params, "wscat", "imagenet32")["lam"]
    assert method_for(params, "wscat-beta0.2", "digits")["beta"] == 0.2
    # Expanding twice changes nothing (Snakemake compares the file with its config this way).
    assert expand_paper(params) == params


def test_wscat_sup_is_wscat_on_labelled_data_alone() -> None:
    """`base: wscat` with `labeler: null`: a variant's null drops the base's knob."""
    params = validate_params(real_params())
    for dataset in (None, "digits", "imagenet32"):
        wscat = method_for(params, "wscat", dataset)
        expected = {**{k: v for k, v in wscat.items() if k != "labeler"}, "data": "labelled"}
        assert method_for(params, "wscat-sup", dataset) == expected
    bad = real_params()
    bad["methods"]["rst"]["labeler"] = None  # only a variant may drop a knob
    with pytest.raises(ValueError, match="methods.rst.labeler"):
        validate_params(bad)


def test_the_sweeps_list_every_entry_they_add() -> None:
    """`wscat list-experiments` reads wscat.sweeps.generated: it names every added entry."""
    raw = real_params()
    params = validate_params(raw)
    for section in ("methods", "datasets"):
        added = set(params[section]) - set(raw[section])
        listed = {e["name"] for e in generated(raw) if e["section"] == section}
        assert added == listed - set(raw[section]) and added
    assert {"wscat-beta0.2", "digits-full", "digits-unlabelled10"} <= {e["name"] for e in generated(raw)}


def test_analysed_figures_read_the_analysis_files() -> None:
    params = validate_params(real_params())
    assert paper.figure_inputs(params, "digits", "Fig-feature") == [
        "results/analysis/digits/Fig-feature/digits.npz"]
    inputs = paper.analysis_inputs(params, "digits", "Fig-similarity", "digits")
    assert inputs == ["results/models/digits/cnn/wscat/seed1/best.pt", "results/splits/digits/seed1.npz"]


@pytest.mark.slow
def test_a_paper_tier_naming_a_missing_experiment_fails_only_when_asked_for(tmp_path: Path,
                                                                          env) -> None:
    """Dropping an experiment (to shorten the demo) leaves the other targets alone."""
    params = real_params()
    del params["experiments"]["digits-ablation"]
    expanded = validate_params(params)
    with pytest.raises(ValueError,
                       match="experiment 'digits-ablation', which the params file's"):
        paper.table_inputs(expanded, "digits", "Tab-mode")
    workdir = copy_workflow(tmp_path, params)
    result = run([str(BIN / "snakemake"), "-n", "--", "results/paper/digits/Tab-mode.tex"],
                 workdir, env)
    assert result.returncode == 2 and "digits-ablation" in result.stderr.strip().splitlines()[-1]
    result = run([str(BIN / "snakemake"), "-n", "--", "results/tables/digits.tex"], workdir, env)
    assert result.returncode == 0, result.stderr[-2000:]


def test_fully_labelled_and_reduced_unlabelled_splits() -> None:
    labels = np.repeat(np.arange(10), 50)
    full = make_split("d", labels, num_classes=10, seed=1, test_fraction=0.2, labelled=None,
                      val_fraction=0.2, val_max=2000)
    assert len(full.unlabelled) == 0 and len(full.labelled) + len(full.validation) == 400
    assert np.bincount(labels[full.validation], minlength=10).tolist() == [8] * 10
    whole = make_split("d", labels, num_classes=10, seed=1, test_fraction=0.2, labelled=100,
                       val_fraction=0.2, val_max=2000)
    part = make_split("d", labels, num_classes=10, seed=1, test_fraction=0.2, labelled=100,
                      val_fraction=0.2, val_max=2000, unlabelled_fraction=0.25)
    assert len(part.unlabelled) == 75 and set(part.unlabelled) <= set(whole.unlabelled)
    assert np.array_equal(part.labelled, whole.labelled)  # the labelled side is untouched


# --- the DAG: a target for every table and figure -------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("tier", ["digits", "paper"])
def test_dry_run_lists_every_table_and_figure_of_a_tier(tier: str, tmp_path: Path, env) -> None:
    params = real_params()
    expanded = validate_params(params)
    target = f"results/paper/{tier}/index.md"
    result = run([str(BIN / "snakemake"), "-n", "--cores", "1", "--", target],
                 copy_workflow(tmp_path, params), {**env, "WSCAT_SKIP_ARCHIVE_CHECK": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    counts = job_counts(result.stdout)
    labels = paper.table_labels(expanded, tier)
    companions = [label for label in labels if paper.has_companion(expanded, tier, label)]
    assert counts["paper_table"] == len(labels) == 6 + 2 * (len(expanded["paper"][tier]["datasets"]) - 1)
    assert counts.get("paper_compare", 0) == len(companions)
    assert counts["paper_figure"] == len(paper.FIGURES)
    for label in labels:
        assert f"results/paper/{tier}/{label}.tex" in result.stdout
    for figure in paper.FIGURES:
        assert f"results/paper/{tier}/{figure}.png" in result.stdout
    if tier == "paper":  # every table the paper reports has its companion
        assert set(companions) == {row["table"] for row in paper.reported()}


# --- the companion on known numbers ---------------------------------------------------------

@pytest.mark.slow
def test_companion_of_table_2_shows_the_differences_to_the_paper(tmp_path: Path) -> None:
    """Metrics files holding the paper's CIFAR-10 numbers + 1, + 2, + 3 (seeds 1-3) give a
    table of the paper's numbers + 2 and a companion whose every difference is +2.00."""
    params = real_params()
    expanded = validate_params(params)
    names = {"Standard": "standard", "TRADES": "trades", "RLFAT": "rlfat", "DMAT": "dmat",
             "WSCAT-sup": "wscat-sup", "MT": "mt", "RST": "rst", "PUAT": "puat", "WSCAT": "wscat"}
    cells = [r for r in paper.reported() if r["table"] == "Tab-RQ1-CIFAR10"]
    results = tmp_path / "results"
    for method in expanded["experiments"]["cifar10"]["methods"]:
        values = {r["metric"]: float(r["mean"]) for r in cells if names[r["method"]] == method}
        for seed in (1, 2, 3):
            run_ = paper.Run("cifar10", "wrn-28-10", method, seed)
            path = Path(run_.metrics(str(results)))
            path.parent.mkdir(parents=True, exist_ok=True)
            head = {"dataset": "cifar10", "model": "wrn-28-10", "method": method, "seed": seed}
            path.write_text(json.dumps({**head, "accuracy": {k: v + seed for k, v in values.items()}}))
            # The paper targets' extras (`wscat evaluate --part extra`), folded in by the table.
            Path(run_.extra(str(results))).write_text(json.dumps(
                {**head, "part": "extra", "accuracy": {"AA-paper": values["AA"] + seed - 1}}))
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    table = tmp_path / "Tab-RQ1-CIFAR10"
    wscat = str(BIN / "wscat")
    subprocess.run([wscat, "paper-table", "--params", str(params_file), "--tier", "paper",
                    "--label", "Tab-RQ1-CIFAR10", "--results", str(results),
                    "--tex", f"{table}.tex", "--csv", f"{table}.csv"], check=True)
    subprocess.run([wscat, "paper-compare", "--label", "Tab-RQ1-CIFAR10", "--table-csv",
                    f"{table}.csv", "--tex", f"{table}-vs-paper.tex", "--csv",
                    f"{table}-vs-paper.csv"], check=True)
    with open(f"{table}-vs-paper.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    # Every cell, our AA-paper beside the paper's AA (its numbers come from that variant), and
    # beside the paper's Mean our Mean over AA-paper (Mean-paper), not our Mean over AA.
    assert len(rows) == len(cells) + 9 == 63
    variant = [row for row in rows if row["metric"] == "AA-paper"]
    assert len(variant) == 9 and {row["difference"] for row in variant} == {"1.0"}
    assert not [row for row in rows if row["metric"] == "Mean"]
    means = {row["method"]: row for row in rows if row["metric"] == "Mean-paper"}
    assert len(means) == 9
    for method, row in means.items():
        values = {r["metric"]: float(r["mean"]) for r in cells if r["method"] == method}
        per_seed = [harmonic_mean([values[m] + seed for m in ("Natural", "FGSM", "PGD", "CW")]
                                  + [values["AA"] + seed - 1]) for seed in (1, 2, 3)]
        assert f"{float(row['ours']):.2f}" == f"{np.mean(per_seed):.2f}"
        assert float(row["paper"]) == values["Mean"]
        assert "AA-paper" in row["note"]
    rows = [row for row in rows if row["metric"] not in ("AA-paper", "Mean-paper")]
    assert {row["difference"] for row in rows} == {"2.0"}
    for row in rows:
        assert float(row["ours"]) == pytest.approx(float(row["paper"]) + 2, abs=0.006)
        assert float(row["ours_std"]) == pytest.approx(1.0, abs=0.005)  # sample std (ddof=1) of (1, 2, 3)
    tex = Path(f"{table}-vs-paper.tex").read_text()
    body = tabular_rows(tex)
    assert len(body) == 64 and body[0][-1] == r"$\Delta$"
    assert all(row[-1] == ("$+1.00$" if row[3] == "AA-paper" else "$+2.00$") for row in body[1:]
               if row[3] != "Mean-paper")
    assert all(row[-1] == f"${float(means[row[2]]['difference']):+.2f}$" for row in body[1:]
               if row[3] == "Mean-paper")
    wscat_pgd = next(r for r in body if r[2] == "WSCAT" and r[3] == "PGD")
    assert wscat_pgd[5] == "$58.52_{\\pm0.22}$" and wscat_pgd[4].startswith("$60.52")
    # The table itself: 9 method columns, 6 metric rows.
    rq1 = tabular_rows(Path(f"{table}.tex").read_text())
    assert len(rq1) == 8 and len(rq1[0]) == 10  # + the AA-paper row
    assert [row[0].strip("{}") for row in rq1[5:]] == ["AA (standard)", "Mean", "AA (paper's variant)"]
    assert "\\label{Tab-RQ1-CIFAR10}" in Path(f"{table}.tex").read_text()


def test_a_table_csv_the_paper_does_not_report_is_refused(tmp_path: Path) -> None:
    from wscat.report.compare import join

    path = tmp_path / "t.csv"
    path.write_text("table,dataset,model,method,metric,mean,std,n_seeds\n"
                    "Tab-RQ1-digits,Digits,CNN,WSCAT,PGD,50.00,1.00,3\n")
    with pytest.raises(ValueError, match="reports none of these cells"):
        join(path)


def test_an_empty_table_csv_or_another_table_s_label_is_refused(tmp_path: Path) -> None:
    """An empty CSV and a --label that is not the CSV's table said "the paper reports none of
    these cells" or wrote a companion under the wrong label."""
    from wscat.report.compare import join
    from wscat.steps.paper import run_compare

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="no rows"):
        join(empty)
    table = tmp_path / "t.csv"
    table.write_text("table,dataset,model,method,metric,mean,std,n_seeds\n"
                     "Tab-RQ1-CIFAR10,CIFAR10,WRN-28-10,WSCAT,PGD,50.00,1.00,3\n")
    with pytest.raises(ValueError, match="--label nope: .* holds table Tab-RQ1-CIFAR10"):
        run_compare(label="nope", table_csv=table, paper_cells=None, tex=tmp_path / "c.tex",
                    csv=tmp_path / "c.csv")
    assert not (tmp_path / "c.tex").exists() and not (tmp_path / "c.csv").exists()


# --- every table and figure on the embedded default (tiny schedule) --------------------------

def tiny_tier_params() -> dict:
    """The digits tier on fewer columns (each job is a process: CI time), every table and figure."""
    params = tiny_params(epochs=2)
    params["experiments"]["digits-table2"] = {**params["experiments"]["digits"],
                                              "methods": ["standard", "trades", "rlfat", "wscat"]}
    params["experiments"]["digits-ablation"] = {**params["experiments"]["digits"],
                                                "methods": ["wscat", "wscat-fixed", "wscat-self"]}
    tier = real_params()["paper"]["digits"]
    params["paper"] = {"digits": tier}
    tier["supervised"].update(methods=["standard", "wscat-sup"],
                              runs=[{"dataset": "digits", "models": ["cnn"]}])
    tier["time"]["methods"] = ["wscat", "trades"]
    tier["beta"]["values"] = [0.05, 0.5]
    tier["unlabelled"]["fractions"] = [0.3, 1.0]
    tier["similarity"]["n_examples"] = 64
    tier["feature"]["n_examples"] = 150
    return params


@pytest.mark.slow
def test_every_table_and_figure_renders_on_the_embedded_default(tmp_path: Path, env) -> None:
    params = tiny_tier_params()
    workdir = copy_workflow(tmp_path / "work", params)
    result = run([str(BIN / "snakemake"), "--cores", "2", "--", "results/paper/digits/index.md"],
                 workdir, env, timeout=1500)
    logs = "\n".join(f"--- {log}\n{log.read_text()[-1500:]}"
                     for log in workdir.glob("results/logs/paper/**/*.log"))
    assert result.returncode == 0, result.stderr[-3000:] + logs
    out = workdir / "results/paper/digits"
    expanded = validate_params(params)
    expected_rows = {"Tab-datasets": (2, 5), "Tab-RQ1-digits": (9, 5), "Tab-mode": (4, 2),
                     "Tab-ap-digits": (9, 4), "tab-sup": (3, 9), "Tab-ap-time": (3, 2)}
    for label in paper.table_labels(expanded, "digits"):
        rows = check_table(out / f"{label}.tex", tmp_path)
        assert (len(rows), len(rows[0])) == expected_rows[label], label
        with open(out / f"{label}.csv", newline="") as handle:
            assert list(csv.DictReader(handle)), label
    datasets = tabular_rows((out / "Tab-datasets.tex").read_text())
    assert datasets[1] == ["Digits", "100", "1,338", "359", "10"]
    sup = tabular_rows((out / "tab-sup.tex").read_text())
    assert [row[1] for row in sup[1:]] == ["Standard", "WSCAT-sup"]
    assert all(row[-1].startswith("$") for row in sup[1:])  # NRF from every metrics file
    for figure in paper.FIGURES:
        for ext in ("pdf", "png", "csv"):
            assert (out / f"{figure}.{ext}").stat().st_size > 80, (figure, ext)
    with open(out / "Fig-beta.csv", newline="") as handle:
        beta = list(csv.DictReader(handle))
    assert [float(row["beta"]) for row in beta] == [0.05, 0.5]
    assert [row["method"] for row in beta] == ["wscat", "wscat-beta0.5"]  # 0.05: WSCAT's own runs
    assert sum(row["chosen"] == "True" for row in beta) == 1
    chosen = next(row for row in beta if row["chosen"] == "True")
    assert float(chosen["val_hm"]) == max(float(row["val_hm"]) for row in beta)
    with open(out / "Fig-similarity.csv", newline="") as handle:
        similarity = list(csv.DictReader(handle))
    assert [row["method"] for row in similarity] == ["TRADES", "RLFAT", "WSCAT"]
    assert all(-1 <= float(row["mean"]) <= 1 for row in similarity)
    with open(out / "Fig-unlabel.csv", newline="") as handle:
        unlabel = list(csv.DictReader(handle))
    assert int(unlabel[0]["unlabelled"]) == round(0.3 * 1338) and int(unlabel[1]["unlabelled"]) == 1338
    seeds = expanded["paper"]["digits"]["unlabelled"]["seeds"]
    assert [row["n_seeds"] for row in unlabel] == [str(len(seeds))] * len(unlabel)  # std's count
    # Ours: every Table 2 run's PGD accuracy against eps and steps, as its extra file has it.
    with open(out / "robustness-curves.csv", newline="") as handle:
        robustness = list(csv.DictReader(handle))
    spec = expanded["experiments"]["digits-table2"]
    assert {(row["method"], row["seed"]) for row in robustness} == {
        (display_name(m), str(s)) for m in spec["methods"] for s in spec["seeds"]}
    for method in spec["methods"]:
        for seed in spec["seeds"]:
            checks = json.loads((workdir / paper.Run("digits", spec["model"], method, seed)
                                 .extra()).read_text())["checks"]
            mine = [(row["panel"], float(row["x"]), float(row["accuracy"])) for row in robustness
                    if (row["method"], row["seed"]) == (display_name(method), str(seed))]
            assert mine == [(key, x, a) for check, key in (("pgd_eps_monotone", "eps"),
                                                           ("pgd_steps_monotone", "steps"))
                            for x, a in zip(checks[check][key], checks[check]["accuracy"])]
    index = (out / "index.md").read_text()
    assert "robustness-curves.png" in index and "Fig-beta.csv" in index  # a figure's numbers
    assert "Tab-RQ1-digits.tex" in index and "Fig-feature.png" in index and "curves/" in index
    assert (workdir / "results/curves/digits/cnn/wscat/seed1.png").stat().st_size > 1000
    if engine() is None:
        print("no LaTeX engine installed: the tables were parsed, not compiled")


def test_the_paper_tiers_tables_have_the_papers_columns() -> None:
    """Each per-dataset table of the paper tier runs the methods the paper's table reports, in
    its order: no column the paper lacks (ImageNet32-100's Table 4 has no DMAT), none missing."""
    params = validate_params(real_params())
    for entry in params["paper"]["paper"]["datasets"]:
        for kind in ("performance", "ablation"):
            spec = entry[kind]
            ours = [display_name(m) for m in params["experiments"][spec["experiment"]]["methods"]]
            theirs = list(dict.fromkeys(row["method"] for row in paper.reported()
                                        if row["table"] == spec["label"]
                                        and row["dataset"] == entry["name"]))
            assert ours == theirs, (spec["label"], ours, theirs)
