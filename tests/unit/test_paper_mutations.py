"""The paper's tables and figures expansion against hand-worked expectations (found by mutation
testing of wscat/report/paper.py, wscat/report/paper_tables.py and wscat/sweeps.py).

The rules checked, each from docs/paper-tables.md, the modules' docstrings or params.yaml:
- a tier lists the tables its sections configure, in the paper's order (Tab-datasets, Tables 2-4,
  Tab-mode only with an ablation, the Tab-ap-* ablations, tab-sup, Tab-ap-time); a fixed label
  the tier does not configure is no table of it; a tier without a figure's section has no such
  figure (the CIFAR-10 proxy: the robustness curves alone);
- each table's and figure's inputs: Table 1 counts the split of each dataset's *first* seed;
  Tab-mode reads the ablation experiments; Tab-ap-time the train_log.csv and best.pt of the
  `time.methods` only; tab-sup the `{dataset}-full` runs of every `runs` entry and model;
  Fig-beta the metrics and validation files of the sweep's seeds, the configured beta reusing
  the method (params.yaml: wscat's beta on digits is 0.05); Fig-unlabel a share of 1 is the
  dataset itself; the analysed figures read the dataset's own model, the section's seed and the
  split; an experiment on another dataset than its tier entry is refused;
- the companion exists where reported.csv holds the table for the tier's (or `compare`'s) name;
- sweeps.py's names (`{method}-beta{beta:g}`, `{dataset}-unlabelled{round(percent)}`,
  `{dataset}-full`), its generated entries (a share < 1 only, every tier dataset), and
  expand_paper: an entry params.yaml names itself is kept, the base's source, schedule and
  per-dataset overrides are copied (not shared), the input is not changed; `list-experiments`'
  origins;
- paper_tables: CSV numbers to 2 decimals, an empty std for one seed and for NaN; the Mean as
  the paper computed it (over AA-paper, after AA-paper); Table 1's counts (labeled includes
  validation, thousands separated); Tables 2-4 and Tab-ap-*: rows named as the paper names
  them, a variants caption for an ablation, only AT methods compete for the bold; Tab-mode's
  cells, columns and spread words; tab-sup's cells, rules, caption and CSV rows (Mean-paper:
  the mean over seeds); Tab-ap-time's mean of per-run means, its sample std, the machines
  sorted and escaped, the paper's 5'14'' format; epoch_seconds' refusals and line numbers.
Expected values are written out by hand; wscat's functions only build inputs (expand_paper for
describe). Nothing trains, no subprocess: metrics, logs and checkpoints are written by hand in
tmp_path, and the file runs in about 2 s (most of it importing pandas and matplotlib).
"""
from __future__ import annotations

import copy
import csv
import functools
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from wscat import sweeps
from wscat.checkpoint import save_checkpoint
from wscat.config import ConfigError, validate_params
from wscat.data.split import Split, save_split
from wscat.report import paper, paper_tables

ROOT = Path(__file__).resolve().parents[2]
Params = dict[str, Any]
SD = "sample standard deviation (ddof=1)"


@functools.cache
def _validated() -> Params:
    raw = yaml.load((ROOT / "params.yaml").read_text(),
                    Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return validate_params(raw)


def real() -> Params:
    """params.yaml, validated (its paper section expanded), a fresh copy."""
    return copy.deepcopy(_validated())


def toy(**sections: Any) -> Params:
    """A hand-written tier 't': dataset a (Tables 2 on model ma, seeds 4 5; an ablation on mz,
    seed 6) and b (model mb, seed 7, named CIFAR10 as the paper's); `sections` added to it."""
    return {"experiments": {
        "ea": {"dataset": "a", "model": "ma", "seeds": [4, 5], "methods": ["wscat", "rst"]},
        "ea-ab": {"dataset": "a", "model": "mz", "seeds": [6], "methods": ["wscat", "wscat-std"]},
        "eb": {"dataset": "b", "model": "mb", "seeds": [7], "methods": ["wscat"]}},
        "paper": {"t": {"datasets": [
            {"dataset": "a", "name": "A", "performance": {"experiment": "ea", "label": "Tab-RQ1-A"},
             "ablation": {"experiment": "ea-ab", "label": "Tab-ap-A"}},
            {"dataset": "b", "name": "CIFAR10",
             "performance": {"experiment": "eb", "label": "Tab-RQ1-B"}}],
            "model_names": {"ma": "Model-A"}, **sections}}}


def metrics_of(dataset: str, model: str, method: str, seed: int,
               root: str = "results") -> list[str]:
    """A run's core and extra metrics files (wscat.paths: results/metrics/RUN.json, -extra)."""
    stem = f"{root}/metrics/{dataset}/{model}/{method}/seed{seed}"
    return [f"{stem}.json", f"{stem}-extra.json"]


# --- paper.py: which tables and figures a tier has -------------------------------------------

def test_a_tier_lists_the_tables_its_sections_configure_in_the_papers_order() -> None:
    params = toy()
    assert paper.table_labels(params, "t") == ["Tab-datasets", "Tab-RQ1-A", "Tab-RQ1-B",
                                               "Tab-mode", "Tab-ap-A"]
    assert paper.table_kind(params, "t", "Tab-ap-A") == (
        "ablation", params["paper"]["t"]["datasets"][0])
    for label in ("tab-sup", "Tab-ap-time"):  # sections the tier lacks: not its tables
        with pytest.raises(ConfigError, match="is not a table of paper tier 't'"):
            paper.table_kind(params, "t", label)
    del params["paper"]["t"]["datasets"][0]["ablation"]
    assert paper.table_labels(params, "t") == ["Tab-datasets", "Tab-RQ1-A", "Tab-RQ1-B"]
    with pytest.raises(ConfigError, match="is not a table of paper tier 't'"):
        paper.table_kind(params, "t", "Tab-mode")
    assert paper.table_labels(real(), "digits") == [
        "Tab-datasets", "Tab-RQ1-digits", "Tab-mode", "Tab-ap-digits", "tab-sup", "Tab-ap-time"]


def test_the_cifar10_proxy_has_table_2_and_the_robustness_curves_alone() -> None:
    params = real()
    assert paper.table_labels(params, "cifar10-proxy") == ["Tab-datasets", "Tab-RQ1-CIFAR10"]
    assert paper.tier_figures(params, "cifar10-proxy") == ["robustness-curves"]
    with pytest.raises(ConfigError, match="has no beta: section"):
        paper.figure_inputs(params, "cifar10-proxy", "Fig-beta")
    # Its companion is the paper's CIFAR10 Table 2 (`compare`), which reported.csv holds.
    assert paper.has_companion(params, "cifar10-proxy", "Tab-RQ1-CIFAR10")
    assert paper.paper_cells(params, "cifar10-proxy", "Tab-RQ1-CIFAR10") == ("CIFAR10",
                                                                             "WRN-28-10")


def test_each_table_reads_its_own_runs_files() -> None:
    params = toy(time={"methods": ["rst"]})
    # Table 1: the split of each dataset's first seed.
    assert paper.table_inputs(params, "t", "Tab-datasets") == ["results/splits/a/seed4.npz",
                                                               "results/splits/b/seed7.npz"]
    # Tab-mode: the ablation experiment's runs (model mz, seed 6), not Table 2's.
    assert paper.table_inputs(params, "t", "Tab-mode", root="R") == [
        *metrics_of("a", "mz", "wscat", 6, "R"), *metrics_of("a", "mz", "wscat-std", 6, "R")]
    # Tab-ap-time: the time section's methods only, each run's log and checkpoint.
    logs = [f"results/models/{d}/{m}/rst/seed{s}/{f}"
            for d, m, s in (("a", "ma", 4), ("a", "ma", 5), ("b", "mb", 7))
            for f in ("train_log.csv", "best.pt")]
    assert paper.table_inputs(params, "t", "Tab-ap-time") == logs
    params["experiments"]["eb"]["dataset"] = "c"  # Table 2 of b made on another dataset
    with pytest.raises(ConfigError, match="experiment 'eb' is on dataset 'c'"):
        paper.table_inputs(params, "t", "Tab-RQ1-B")


def test_tab_sup_reads_the_fully_labelled_runs_of_every_entry_and_model() -> None:
    params = real()
    expected = [f for model in ("cnn", "cnn-wide")
                for method in ("standard", "trades", "wscat-sup")
                for f in metrics_of("digits-full", model, method, 1)]
    assert paper.table_inputs(params, "digits", "tab-sup") == expected
    runs = paper.supervised_runs(params, "paper")  # cifar10: 3 models, cifar100: 1; 3 methods
    assert len(runs) == 12 and {r.dataset for r in runs} == {"cifar10-full", "cifar100-full"}


def test_the_beta_sweep_reuses_the_configured_method_and_is_sorted() -> None:
    params = real()  # wscat's beta on digits: 0.05
    entry = params["paper"]["digits"]["datasets"][0]
    assert paper.beta_points(params, "digits", entry) == [
        (0.0, "wscat-beta0"), (0.01, "wscat-beta0.01"), (0.05, "wscat"), (0.2, "wscat-beta0.2"),
        (0.5, "wscat-beta0.5"), (1.0, "wscat-beta1")]
    methods = ["wscat-beta0", "wscat-beta0.01", "wscat", "wscat-beta0.2", "wscat-beta0.5",
               "wscat-beta1"]
    assert paper.figure_inputs(params, "digits", "Fig-beta") == [
        f"results/{kind}/digits/cnn/{m}/seed1.json" for m in methods
        for kind in ("metrics", "validation")]  # the sweep's seeds: [1], not Table 2's 1 2 3
    params["paper"]["digits"]["beta"]["values"] = [1.0, 0.05, 0.0]
    assert paper.beta_points(params, "digits", entry) == [(0.0, "wscat-beta0"), (0.05, "wscat"),
                                                          (1.0, "wscat-beta1")]


def test_the_unlabelled_sweep_keeps_the_dataset_itself_for_the_whole_pool() -> None:
    params = real()
    entry = params["paper"]["digits"]["datasets"][0]
    assert paper.unlabelled_points(params, "digits", entry) == [
        (0.1, "digits-unlabelled10"), (0.3, "digits-unlabelled30"), (1.0, "digits")]
    assert paper.figure_inputs(params, "digits", "Fig-unlabel") == [
        f"results/metrics/{d}/cnn/wscat/seed1.json"
        for d in ("digits-unlabelled10", "digits-unlabelled30", "digits")]
    params["paper"]["digits"]["unlabelled"]["fractions"] = [1.0, 0.3]
    assert paper.unlabelled_points(params, "digits", entry) == [(0.3, "digits-unlabelled30"),
                                                                (1.0, "digits")]


def test_the_robustness_curves_read_the_core_and_extra_files_of_each_table_2() -> None:
    expected = [f for method, seed in (("wscat", 4), ("wscat", 5), ("rst", 4), ("rst", 5))
                for f in metrics_of("a", "ma", method, seed)] + metrics_of("b", "mb", "wscat", 7)
    assert paper.figure_inputs(toy(), "t", "robustness-curves") == expected


def test_a_figure_lists_each_file_once() -> None:
    """A dataset in two entries of a tier (Table 2 on two models, say) has one analysis file."""
    params = toy(feature={"methods": ["wscat"], "seed": 4})
    params["paper"]["t"]["datasets"].append(
        {"dataset": "a", "name": "A2", "performance": {"experiment": "ea", "label": "Tab-RQ1-A2"}})
    assert paper.figure_inputs(params, "t", "Fig-feature") == [
        "results/analysis/t/Fig-feature/a.npz", "results/analysis/t/Fig-feature/b.npz"]


def test_an_analysis_reads_the_datasets_own_model_the_sections_seed_and_the_split() -> None:
    params = toy(feature={"methods": ["wscat", "rst"], "seed": 5},
                 similarity={"methods": ["trades", "wscat"], "model": "rst", "seed": 4})
    assert paper.analysis_inputs(params, "t", "Fig-feature", "b") == [
        "results/models/b/mb/wscat/seed5/best.pt", "results/splits/b/seed5.npz",
        "results/models/b/mb/rst/seed5/best.pt"]
    # Table 2's model (ma), not the ablation's (mz); Fig-similarity: the one model it names.
    assert paper.analysis_inputs(params, "t", "Fig-similarity", "a") == [
        "results/models/a/ma/rst/seed4/best.pt", "results/splits/a/seed4.npz"]
    with pytest.raises(ConfigError, match="no analysis 'Fig-feature' of dataset 'c'"):
        paper.analysis_inputs(params, "t", "Fig-feature", "c")


def test_a_tiers_outputs_name_companions_pngs_and_the_ablation_runs_curves() -> None:
    params = toy(feature={"methods": ["wscat"], "seed": 4})
    # reported.csv holds CIFAR10's Tab-datasets but no table labelled Tab-RQ1-B.
    assert paper.has_companion(params, "t", "Tab-datasets")
    assert not paper.has_companion(params, "t", "Tab-RQ1-B")
    outputs = paper.tier_outputs(params, "t")
    assert "results/paper/t/Tab-datasets-vs-paper.csv" in outputs
    assert not any("Tab-RQ1-B-vs-paper" in f or "Tab-RQ1-A-vs-paper" in f for f in outputs)
    assert {"results/paper/t/Fig-feature.png", "results/paper/t/robustness-curves.png"} <= set(
        outputs)
    assert "results/curves/a/mz/wscat-std/seed6.png" in outputs  # an ablation run's curves


# --- sweeps.py: names, generated entries, expansion, list-experiments --------------------------

def test_the_sweeps_names() -> None:
    assert [sweeps.beta_method("wscat", b) for b in (0.0, 0.05, 1.0)] == [
        "wscat-beta0", "wscat-beta0.05", "wscat-beta1"]
    # 100 * 0.29 is 28.999999999999996 and 100 * 0.57 is 56.99999999999999 in floating point.
    assert sweeps.unlabelled_dataset("d", 0.29) == "d-unlabelled29"
    assert sweeps.unlabelled_dataset("d", 0.57) == "d-unlabelled57"


def _sweep_raw() -> Params:
    """Hand-written params: methods w (beta 0.05, lam 2 on a) and w-beta0.2 named by hand;
    datasets a (source srcA), b, b-full named by hand; tiers t and u."""
    return {
        "experiments": {"e": {"dataset": "a", "model": "m", "seeds": [1, 2], "methods": ["w"]}},
        "methods": {"w": {"beta": 0.05, "per_dataset": {"a": {"lam": 2.0}}},
                    "w-beta0.2": {"base": "w", "beta": 0.2, "note": "mine"}},
        "datasets": {"a": {"source": "srcA", "labelled": 100}, "b": {"labelled": 50},
                     "b-full": {"labelled": None, "eps": 0.3}},
        "training": {"a": {"epochs": 3}, "b": {"epochs": 4}, "a-full": {"epochs": 9}},
        "evaluation": {"per_dataset": {"a": {"batch_size": 7}}},
        "paper": {"t": {"datasets": [{"dataset": "a"}, {"dataset": "b"}],
                        "beta": {"method": "w", "values": [0.2]},
                        "unlabelled": {"fractions": [0.25, 1.0]},
                        "supervised": {"runs": [{"dataset": "a"}, {"dataset": "b"}]}},
                  "u": {"datasets": [{"dataset": "a"}], "unlabelled": {"fractions": [0.25]}}}}


def test_the_paper_section_generates_a_share_below_one_of_every_dataset() -> None:
    found = sweeps.generated(_sweep_raw())

    def entry(section: str, name: str, base: str, knobs: dict, where: str) -> dict:
        return {"section": section, "name": name, "base": base, "knobs": knobs, "from": where}

    quarter = {"unlabelled_fraction": 0.25}
    assert found == [
        entry("methods", "w-beta0.2", "w", {"beta": 0.2}, "paper.t.beta"),
        entry("datasets", "a-unlabelled25", "a", quarter, "paper.t.unlabelled"),
        entry("datasets", "b-unlabelled25", "b", quarter, "paper.t.unlabelled"),
        entry("datasets", "a-full", "a", {"labelled": None}, "paper.t.supervised"),
        entry("datasets", "b-full", "b", {"labelled": None}, "paper.t.supervised"),
        entry("datasets", "a-unlabelled25", "a", quarter, "paper.u.unlabelled")]


def test_expansion_copies_the_base_and_keeps_what_params_yaml_names() -> None:
    raw = _sweep_raw()
    before = copy.deepcopy(raw)
    params = sweeps.expand_paper(raw)
    assert raw == before  # a copy; the params given are not changed
    assert params["methods"]["w-beta0.2"] == {"base": "w", "beta": 0.2, "note": "mine"}
    assert params["datasets"]["a-full"] == {"source": "srcA", "labelled": None}
    assert params["datasets"]["b-unlabelled25"] == {"source": "b", "labelled": 50,
                                                    "unlabelled_fraction": 0.25}
    assert params["datasets"]["b-full"] == {"labelled": None, "eps": 0.3}  # as written
    assert params["training"]["a-full"] == {"epochs": 9}  # as written
    assert params["training"]["a-unlabelled25"] == {"epochs": 3}
    assert params["methods"]["w"]["per_dataset"]["a-full"] == {"lam": 2.0}
    assert params["evaluation"]["per_dataset"]["a-unlabelled25"] == {"batch_size": 7}
    # Copies: editing the variant's override leaves the base's alone.
    params["methods"]["w"]["per_dataset"]["a-full"]["lam"] = 3.0
    params["evaluation"]["per_dataset"]["a-full"]["batch_size"] = 8
    assert params["methods"]["w"]["per_dataset"]["a"] == {"lam": 2.0}
    assert params["evaluation"]["per_dataset"]["a"] == {"batch_size": 7}


def test_list_experiments_names_each_entrys_origin() -> None:
    raw = _sweep_raw()
    text = sweeps.describe(raw, sweeps.expand_paper(raw), "p.yaml")
    lines = {line.split()[0]: " ".join(line.split()) for line in text.splitlines()
             if line.startswith("  ")}
    assert lines["e"] == "e a / m, seeds 1 2: w"
    assert lines["w-beta0.2"] == "w-beta0.2 variant of w p.yaml methods.w-beta0.2"
    assert lines["w"] == "w as written p.yaml methods.w"
    assert lines["a-full"] == "a-full a with labelled: null generated by p.yaml paper.t.supervised"
    assert lines["a-unlabelled25"] == ("a-unlabelled25 a with unlabelled_fraction: 0.25 generated "
                                       "by p.yaml paper.t.unlabelled, paper.u.unlabelled")
    assert lines["b-full"] == "b-full as written p.yaml datasets.b-full"


# --- paper_tables.py: cells, CSV, means -------------------------------------------------------

def _row(**changes: Any) -> dict:
    return {"table": "T", "dataset": "D", "model": "M", "method": "W", "metric": "Natural",
            "mean": 57.4, "std": 0.5, "n_seeds": 1, **changes}


def test_csv_numbers_have_two_decimals_and_one_seed_or_nan_leaves_them_empty() -> None:
    text = paper_tables._csv([_row(), _row(metric="PGD", mean=float("nan"), std=1.234,
                                           n_seeds=3), _row(metric="CW", n_seeds=2)])
    assert text == ("table,dataset,model,method,metric,mean,std,n_seeds\n"
                    "T,D,M,W,Natural,57.40,,1\nT,D,M,W,PGD,,1.23,3\nT,D,M,W,CW,57.40,0.50,2\n")
    assert paper_tables._cell(57.4, 0.5, 1) == "${57.40}$"
    assert paper_tables._cell(57.4, 0.5, 2) == "${57.40}_{\\pm0.50}$"


def test_the_papers_mean_is_over_aa_paper_and_follows_it() -> None:
    acc = {"Natural": 100.0, "FGSM": 50.0, "PGD": 50.0, "CW": 25.0, "AA": 1.0, "AA-paper": 25.0}
    # 5 / (1/100 + 1/50 + 1/50 + 1/25 + 1/25) = 5 / 0.13
    assert paper_tables.paper_means([acc]) == pytest.approx([5 / 0.13])
    no_aa_paper = {k: v for k, v in acc.items() if k != "AA-paper"}
    assert paper_tables.paper_means([acc, no_aa_paper]) is None
    metrics = ["Natural", "FGSM", "PGD", "CW", "AA", "Mean", "AA-paper", "NRF"]
    frame = pd.DataFrame([{"method": "wscat", "seed": 1, "metric": m,
                           "value": {**acc, "Mean": 10.0, "NRF": 1.0}[m]} for m in metrics])
    frame.attrs = {"metrics": metrics, "notes": []}
    out = paper_tables._with_paper_mean(frame)
    assert out.attrs["metrics"] == [*metrics[:7], "Mean-paper", "NRF"]
    assert out[out["metric"] == "Mean-paper"]["value"].tolist() == pytest.approx([5 / 0.13])


def test_table_1_counts_labelled_with_validation_and_separates_thousands(tmp_path: Path) -> None:
    params = real()
    path = tmp_path / "seed1.npz"
    ids = np.arange(1797)
    save_split(Split(dataset="digits", seed=1, labelled=ids[:80], validation=ids[80:100],
                     unlabelled=ids[100:1438], test=ids[1438:]), path)
    tex, rows = paper_tables.datasets_table(params, "digits", [str(path)])
    assert [(r["metric"], r["mean"]) for r in rows] == [
        ("labeled", 100.0), ("unlabeled", 1338.0), ("test", 359.0), ("classes", 10.0)]
    assert "Digits & 100 & 1,338 & 359 & 10" in " ".join(tex.split())


def test_tab_modes_spread_words() -> None:
    names = {"a": "A", "b": "B"}
    entries = [{"dataset": d, "ablation": {"experiment": d}} for d in names]

    def words(seeds_a: list[int], seeds_b: list[int]) -> str:
        params = {"experiments": {"a": {"seeds": seeds_a}, "b": {"seeds": seeds_b}}}
        return paper_tables._mode_spread(params, entries, names)

    one = "(one seed: no spread; means alone)"
    assert words([1], [1]) == f"mean and {SD} over seed 1 {one}"
    assert words([1], [2]) == f"mean and {SD} over seeds; A over seed 1 {one}, B over seed 2 {one}"
    assert words([1, 2, 3], [1, 2, 3]) == f"mean and {SD} over seeds"
    # columns of other seeds each say theirs (a column over fewer seeds was hidden)
    assert words([1, 2], [1, 2, 3]) == (f"mean and {SD} over seeds: A over seeds 1, 2, B over "
                                        "seeds 1, 2, 3")


def _write(path: Path, data: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


def _accuracy(base: float) -> dict[str, float]:
    """Natural base, FGSM and PGD half of it, CW and AA a quarter: Mean 5 base / 13."""
    return {"Natural": base, "FGSM": base / 2, "PGD": base / 2, "CW": base / 4, "AA": base / 4,
            "Mean": 5 * base / 13}


def test_tab_modes_columns_cells_and_mean_paper_rows(tmp_path: Path) -> None:
    """Dataset a: WSCAT on seeds 1 and 2 (Means 40 and 50), WSCAT-std (20, 20); b: WSCAT alone,
    one seed (30). Tab-mode's cells: 45 +- 7.07 (the sample std of 40 and 50), 30 alone, and
    '-' where b has no WSCAT-std. Every run has AA-paper 40: a Mean-paper row for each Mean."""
    params = {"experiments": {
        "xa": {"dataset": "a", "model": "ma", "seeds": [1, 2], "methods": ["wscat", "wscat-std"]},
        "xb": {"dataset": "b", "model": "mb", "seeds": [1], "methods": ["wscat"]}},
        "paper": {"t": {"datasets": [
            {"dataset": "a", "name": "A", "ablation": {"experiment": "xa", "label": "Tab-ap-A"}},
            {"dataset": "b", "name": "B", "ablation": {"experiment": "xb", "label": "Tab-ap-B"}}],
            "model_names": {"ma": "Model-A"}}}}
    files = []
    for dataset, model, method, seed, mean in (
            ("a", "ma", "wscat", 1, 40.0), ("a", "ma", "wscat", 2, 50.0),
            ("a", "ma", "wscat-std", 1, 20.0), ("a", "ma", "wscat-std", 2, 20.0),
            ("b", "mb", "wscat", 1, 30.0)):
        acc = {"Natural": 90.0, "FGSM": 50.0, "PGD": 40.0, "CW": 40.0, "AA": 30.0, "Mean": mean}
        stem = tmp_path / f"metrics/{dataset}/{model}/{method}/seed{seed}"
        run = {"dataset": dataset, "model": model, "method": method, "seed": seed}
        files.append(_write(stem.with_suffix(".json"), {**run, "accuracy": acc}))
        files.append(_write(Path(f"{stem}-extra.json"),
                            {**run, "part": "extra", "accuracy": {"AA-paper": 40.0}}))
    tex, rows = paper_tables.mode_table(params, "t", files)
    flat = " ".join(tex.split())
    assert "WSCAT & ${45.00}_{\\pm7.07}$ & ${30.00}$" in flat
    assert "WSCAT-std & ${20.00}_{\\pm0.00}$ & -" in flat
    assert "{l|c|c}" in tex
    paper_mean = round(5 / (1 / 90 + 1 / 50 + 3 / 40), 6)  # over AA-paper 40, not AA 30
    got = [(r["dataset"], r["model"], r["method"], r["metric"], round(r["mean"], 6),
            r["n_seeds"]) for r in rows]
    assert got == [("A", "Model-A", "WSCAT", "Mean", 45.0, 2),
                   ("A", "Model-A", "WSCAT", "Mean-paper", paper_mean, 2),
                   ("B", "mb", "WSCAT", "Mean", 30.0, 1),
                   ("B", "mb", "WSCAT", "Mean-paper", paper_mean, 1),
                   ("A", "Model-A", "WSCAT-std", "Mean", 20.0, 2),
                   ("A", "Model-A", "WSCAT-std", "Mean-paper", paper_mean, 2)]


def _sup_params(seeds: list[int]) -> Params:
    return {"paper": {"t": {
        "datasets": [{"dataset": "a", "name": "A"}], "model_names": {"m1": "M-one"},
        "supervised": {"methods": ["standard", "trades"], "seeds": seeds,
                       "runs": [{"dataset": "a", "models": ["m1", "m2"]}]}}}}


def _sup_files(root: Path, seeds: list[int], nrf: dict[int, float]) -> list[str]:
    """standard and trades on a-full, models m1 (Natural 80 + seed ...) and m2 (Natural 60)."""
    files = []
    for model, base in (("m1", 80.0), ("m2", 60.0)):
        for method in ("standard", "trades"):
            for seed in seeds:
                acc = _accuracy(base + seed)
                files.append(_write(root / f"metrics/a-full/{model}/{method}/seed{seed}.json",
                                    {"dataset": "a-full", "model": model, "method": method,
                                     "seed": seed, "accuracy": acc}))
                extra = {"AA-paper": 20.0, **({"NRF": nrf[seed]} if seed in nrf else {})}
                files.append(_write(root / f"metrics/a-full/{model}/{method}/seed{seed}-extra.json",
                                    {"dataset": "a-full", "model": model, "method": method,
                                     "seed": seed, "part": "extra", "accuracy": extra}))
    return files


def test_tab_sup_cells_rules_and_rows(tmp_path: Path) -> None:
    """Seeds 1, 2, 6: Natural 81, 82, 86 on m1 -> 83 +- sqrt(7) = 2.65 (sample std: (4 + 1 +
    9) / 2); NRF on seed 1 only -> '-' and no NRF row; each (dataset, model) group named once,
    a rule above the second; Mean-paper the mean (not the median) over the seeds."""
    files = _sup_files(tmp_path, [1, 2, 6], nrf={1: 0.5})
    tex, rows = paper_tables.sup_table(_sup_params([1, 2, 6]), "t", files)
    flat = " ".join(tex.split())
    assert "A (M-one) & Standard & ${83.00}_{\\pm2.65}$" in flat
    assert "& TRADES & ${83.00}_{\\pm2.65}$" in flat and "A (M-one) & TRADES" not in flat
    assert "A (m2) & Standard & ${63.00}_{\\pm2.65}$" in flat
    assert flat.count("\\midrule") == 2  # below the header, and between the two groups
    assert "seed 1, 2, 6; mean and" in flat
    natural = [r for r in rows if r["metric"] == "Natural"]
    assert [(r["model"], r["method"], r["mean"], round(r["std"], 4), r["n_seeds"])
            for r in natural] == [("M-one", "Standard", 83.0, round(math.sqrt(7), 4), 3),
                                  ("M-one", "TRADES", 83.0, round(math.sqrt(7), 4), 3),
                                  ("m2", "Standard", 63.0, round(math.sqrt(7), 4), 3),
                                  ("m2", "TRADES", 63.0, round(math.sqrt(7), 4), 3)]
    assert not [r for r in rows if r["metric"] == "NRF"]
    # Mean-paper per seed over AA-paper 20: 5 / (1/N + 2/(N/2) + 1/(N/4) + 1/20), then the mean
    per_seed = [5 / (1 / n + 4 / n + 4 / n + 1 / 20) for n in (81.0, 82.0, 86.0)]
    paper_rows = [r for r in rows if r["metric"] == "Mean-paper"]
    assert len(paper_rows) == 4
    assert paper_rows[0]["mean"] == pytest.approx(np.mean(per_seed))


def test_tab_sup_on_one_seed_claims_no_spread(tmp_path: Path) -> None:
    """params.yaml's tab-sup has one seed, as the paper's: no "mean and std over them"."""
    tex, _ = paper_tables.sup_table(_sup_params([1]), "t", _sup_files(tmp_path, [1], nrf={}))
    flat = " ".join(tex.split())
    assert "(every training label; seed 1)." in flat and "over them" not in flat
    assert "A (M-one) & Standard & ${81.00}$" in flat


def test_tab_sup_refuses_a_method_without_metrics(tmp_path: Path) -> None:
    files = [f for f in _sup_files(tmp_path, [1], nrf={}) if "/trades/" not in f or "/m1/" not in f]
    with pytest.raises(ValueError, match="tab-sup: no metrics for trades on a-full/m1"):
        paper_tables.sup_table(_sup_params([1]), "t", files)


# --- paper_tables.py: Tab-ap-time --------------------------------------------------------------

def test_the_papers_minutes_and_seconds() -> None:
    prime = "^{\\prime}"
    assert paper_tables._minutes(314) == f"$5{prime}14^{{\\prime\\prime}}$"  # the paper's 5'14''
    assert paper_tables._minutes(60) == f"$1{prime}00^{{\\prime\\prime}}$"
    assert paper_tables._minutes(119.6) == f"$2{prime}00^{{\\prime\\prime}}$"  # rounded, not cut
    assert paper_tables._minutes(59.94) == "59.9 s"
    assert paper_tables._minutes(59.96) == f"$1{prime}00^{{\\prime\\prime}}$"  # not "60.0 s"


LOG_HEAD = "epoch,loss,val_natural,seconds\n"


def test_epoch_seconds_take_zero_and_refuse_infinity_naming_the_line(tmp_path: Path) -> None:
    log = tmp_path / "train_log.csv"
    log.write_text(LOG_HEAD + "1,2.0,30.0,0\n2,1.0,40.0,2.5\n")
    assert paper_tables.epoch_seconds(str(log), "REBUILD") == [0.0, 2.5]
    log.write_text(LOG_HEAD + "1,2.0,30.0,1\n2,1.0,40.0,inf\n")
    with pytest.raises(ValueError, match=r"train_log.csv, line 3: seconds is 'inf'.*REBUILD"):
        paper_tables.epoch_seconds(str(log), "REBUILD")
    log.write_text("epoch,loss,val_natural\n1,2.0,30.0\n")
    with pytest.raises(ValueError, match="lacks the seconds column.*REBUILD"):
        paper_tables.epoch_seconds(str(log), "REBUILD")


def test_the_epoch_time_is_the_mean_of_each_runs_mean(tmp_path: Path) -> None:
    """Dataset a: WSCAT seed 4 logs 10 and 20 s (mean 15), seed 5 one epoch of 30 s: 22.5, the
    sample std of (15, 30) 10.61 (over the epochs pooled it would be 20). The machines sorted,
    one unrecorded, each escaped for LaTeX."""
    params = toy(time={"methods": ["wscat", "rst"]})
    machines = {("a", "wscat", 4): "zeta_1", ("a", "wscat", 5): "alpha"}
    logs = {("a", "wscat", 4): [10, 20], ("a", "wscat", 5): [30]}
    for dataset, model, seeds in (("a", "ma", (4, 5)), ("b", "mb", (7,))):
        for method in ("wscat", "rst"):
            for seed in seeds:
                folder = tmp_path / f"models/{dataset}/{model}/{method}/seed{seed}"
                folder.mkdir(parents=True)
                times = logs.get((dataset, method, seed), [60])
                (folder / "train_log.csv").write_text(LOG_HEAD + "".join(
                    f"{i + 1},1.0,50.0,{s}\n" for i, s in enumerate(times)))
                machine = machines.get((dataset, method, seed))
                save_checkpoint(folder / "best.pt", {"meta": {"machine": machine} if machine
                                                     else {}})
    tex, rows = paper_tables.time_table(params, "t", str(tmp_path))
    first = rows[0]
    assert (first["dataset"], first["model"], first["method"], first["n_seeds"]) == (
        "A", "Model-A", "WSCAT", 2)
    assert first["mean"] == pytest.approx(22.5)
    assert first["std"] == pytest.approx(math.sqrt(112.5))
    flat = " ".join(tex.split())
    assert "Epoch time of WSCAT and RST (mean over epochs and seeds), measured on alpha; an " \
           "unrecorded machine; zeta\\_1." in flat  # LaTeX-escaped
    assert "WSCAT & 22.5 s & $1^{\\prime}00^{\\prime\\prime}$" in flat


def test_an_ablation_table_says_variants_and_names_its_dataset_model_and_methods(
        tmp_path: Path) -> None:
    """Tab-ap-digits (params.yaml: digits-ablation, WSCAT and its variants on the CNN, seeds
    1 2 3): the caption of a variants table, and CSV rows named as the paper names them."""
    params = real()
    for method in ("wscat", "wscat-fixed", "wscat-self", "wscat-std"):
        for seed in (1, 2, 3):
            run = {"dataset": "digits", "model": "cnn", "method": method, "seed": seed}
            stem = tmp_path / f"metrics/digits/cnn/{method}/seed{seed}"
            _write(stem.with_suffix(".json"), {**run, "accuracy": _accuracy(60.0 + seed)})
            _write(Path(f"{stem}-extra.json"), {**run, "part": "extra", "accuracy": {}})
    tex, text = paper_tables.build(params, "digits", "Tab-ap-digits", str(tmp_path))
    assert "Performance of different variants on Digits (CNN), mean and" in " ".join(tex.split())
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {(r["table"], r["dataset"], r["model"]) for r in rows} == {("Tab-ap-digits", "Digits",
                                                                       "CNN")}
    assert [r["method"] for r in rows if r["metric"] == "Natural"] == [
        "WSCAT", "WSCAT-fixed", "WSCAT-self", "WSCAT-std"]
    natural = [r for r in rows if r["metric"] == "Natural"][0]
    assert (natural["mean"], natural["std"], natural["n_seeds"]) == ("62.00", "1.00", "3")


def test_only_adversarial_training_competes_for_the_bold(tmp_path: Path) -> None:
    """Standard and TRADES on two seeds: standard training is no AT method (params.yaml), so
    one AT method is left and the caption says none can be bold for that reason."""
    params = real()
    params["experiments"]["two"] = {"dataset": "digits", "model": "cnn", "seeds": [1, 2],
                                    "methods": ["standard", "trades"]}
    entry = {"dataset": "digits", "name": "Digits",
             "performance": {"experiment": "two", "label": "Tab-two"}}
    files = [_write(tmp_path / f"{method}{seed}.json",
                    {"dataset": "digits", "model": "cnn", "method": method, "seed": seed,
                     "accuracy": _accuracy(50.0 + seed)})
             for method in ("standard", "trades") for seed in (1, 2)]
    tex, _ = paper_tables.performance(params, "digits", "Tab-two", "performance", entry, files)
    assert "(none can be here: fewer than two AT methods)" in " ".join(tex.split())
