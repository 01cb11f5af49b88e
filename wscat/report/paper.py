"""Which files each of the paper's tables and figures is made of, per tier of `params.paper`.

One definition of the inputs (their paths: wscat.paths' patterns), read by the Snakemake rules
(to ask for the inputs) and by the `wscat paper-table` / `paper-figure` commands (to read them),
so the two never disagree.
Outputs: results/paper/{tier}/{label}.{tex,csv}, {label}-vs-paper.{tex,csv} (where the paper
reports the same cells), {figure}.{pdf,png,csv}, and index.md listing them all.
"""
from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path
from typing import Any

from wscat import paths
from wscat.config import ConfigError, method_for
from wscat.paths import Run  # one trained run's files; report code names it paper.Run too
from wscat.sweeps import beta_method, full_dataset, unlabelled_dataset

REPORTED = Path(__file__).with_name("reported.csv")  # the paper's tables, one row per cell
# The paper's four, then ours: every run's PGD accuracy against eps and steps
# (wscat/report/robustness_figure.py, from the extra files its Table 2 reads).
FIGURES = ("Fig-similarity", "Fig-beta", "Fig-unlabel", "Fig-feature", "robustness-curves")
# The tier section each of the paper's figures needs; a tier without the section (the CIFAR-10
# proxy) has no such figure. Every tier has the robustness curves.
FIGURE_SECTIONS = {"Fig-similarity": "similarity", "Fig-beta": "beta",
                   "Fig-unlabel": "unlabelled", "Fig-feature": "feature"}
ANALYSED = ("Fig-similarity", "Fig-feature")  # read results/analysis/ (`wscat analyse`)


def tier_spec(params: dict[str, Any], tier: str) -> dict[str, Any]:
    """A tier of the params' paper: section; ConfigError (one line) for one it lacks. The params
    do not carry the name of their file (a --params full.yaml is not params.yaml), so the line
    names the section, not a file."""
    tiers = params.get("paper") or {}
    if tier not in tiers:
        raise ConfigError(f"unknown paper tier '{tier}'; the params file's paper: section has "
                          f"{', '.join(tiers) or 'none'}; pass one of those")
    return tiers[tier]


def parts(entry: dict[str, Any]) -> list[str]:
    """The tables a tier dataset fills: 'performance' always, 'ablation' where configured."""
    return [part for part in ("performance", "ablation") if part in entry]


def tier_figures(params: dict[str, Any], tier: str) -> list[str]:
    """The figures a tier configures, in the paper's order."""
    spec = tier_spec(params, tier)
    return [figure for figure in FIGURES
            if figure not in FIGURE_SECTIONS or FIGURE_SECTIONS[figure] in spec]


def experiment(params: dict[str, Any], name: str, dataset: str | None = None) -> dict[str, Any]:
    """An experiment a tier names: one clear error when params.yaml lacks it (a tier's
    experiments are needed only when one of its targets is asked for)."""
    spec = params["experiments"].get(name)
    if spec is None:
        raise ConfigError(f"the paper section names experiment '{name}', which the params "
                          "file's experiments: lacks; add it back to build the paper's tables and "
                          "figures")
    if dataset is not None and spec["dataset"] != dataset:
        raise ConfigError(f"experiment '{name}' is on dataset '{spec['dataset']}', but the paper "
                          f"section uses it for '{dataset}'")
    return spec


def experiment_runs(params: dict[str, Any], experiment_name: str,
                    methods: list[str] | None = None) -> list[Run]:
    spec = experiment(params, experiment_name)
    return [Run(spec["dataset"], spec["model"], method, seed)
            for method in (methods or spec["methods"]) for seed in spec["seeds"]]


def dataset_model(params: dict[str, Any], entry: dict[str, Any]) -> str:
    """The model of a tier dataset's Table 2-4 runs (the sweeps and figures use it too)."""
    return experiment(params, entry["performance"]["experiment"], entry["dataset"])["model"]


def supervised_runs(params: dict[str, Any], tier: str) -> list[Run]:
    spec = tier_spec(params, tier)["supervised"]
    return [Run(full_dataset(run["dataset"]), model, method, seed)
            for run in spec["runs"] for model in run["models"]
            for method in spec["methods"] for seed in spec["seeds"]]


def beta_points(params: dict[str, Any], tier: str, entry: dict[str, Any]) -> list[tuple[float, str]]:
    """(beta, method key) of the sweep on one dataset; the configured beta reuses the method."""
    spec = tier_spec(params, tier)["beta"]
    configured = method_for(params, spec["method"], entry["dataset"])["beta"]
    return [(value, spec["method"] if value == configured else beta_method(spec["method"], value))
            for value in sorted(spec["values"])]


def beta_runs(params: dict[str, Any], tier: str, entry: dict[str, Any]) -> list[Run]:
    seeds = tier_spec(params, tier)["beta"]["seeds"]
    model = dataset_model(params, entry)
    return [Run(entry["dataset"], model, method, seed)
            for _, method in beta_points(params, tier, entry) for seed in seeds]


def unlabelled_points(params: dict[str, Any], tier: str, entry: dict[str, Any]
                      ) -> list[tuple[float, str]]:
    """(fraction of the unlabelled pool, dataset key) of the sweep on one dataset."""
    fractions = sorted(tier_spec(params, tier)["unlabelled"]["fractions"])
    return [(f, entry["dataset"] if f == 1 else unlabelled_dataset(entry["dataset"], f))
            for f in fractions]


def unlabelled_runs(params: dict[str, Any], tier: str, entry: dict[str, Any]) -> list[Run]:
    spec = tier_spec(params, tier)["unlabelled"]
    model = dataset_model(params, entry)
    return [Run(dataset, model, spec["method"], seed)
            for _, dataset in unlabelled_points(params, tier, entry) for seed in spec["seeds"]]


def table_labels(params: dict[str, Any], tier: str) -> list[str]:
    """Every table label of a tier, in the paper's order (those its sections configure)."""
    spec = tier_spec(params, tier)
    datasets = spec["datasets"]
    ablations = [e["ablation"]["label"] for e in datasets if "ablation" in e]
    return (["Tab-datasets"] + [e["performance"]["label"] for e in datasets]
            + (["Tab-mode"] if ablations else []) + ablations
            + (["tab-sup"] if "supervised" in spec else [])
            + (["Tab-ap-time"] if "time" in spec else []))


def table_kind(params: dict[str, Any], tier: str, label: str) -> tuple[str, dict[str, Any] | None]:
    """('datasets' | 'performance' | 'ablation' | 'mode' | 'sup' | 'time', the dataset entry)."""
    fixed = {"Tab-datasets": "datasets", "Tab-mode": "mode", "tab-sup": "sup", "Tab-ap-time": "time"}
    if label in fixed and label in table_labels(params, tier):
        return fixed[label], None
    for entry in tier_spec(params, tier)["datasets"]:
        for part in parts(entry):
            if entry[part]["label"] == label:
                return part, entry
    raise ConfigError(f"'{label}' is not a table of paper tier '{tier}'; its tables: "
                      f"{', '.join(table_labels(params, tier))}")


def table_inputs(params: dict[str, Any], tier: str, label: str, root: str = "results") -> list[str]:
    """The files one table is computed from."""
    kind, entry = table_kind(params, tier, label)
    datasets = tier_spec(params, tier)["datasets"]
    if kind in ("performance", "ablation"):
        experiment(params, entry[kind]["experiment"], entry["dataset"])
        return [p for run in experiment_runs(params, entry[kind]["experiment"])
                for p in run.evaluated(root)]
    if kind == "datasets":
        seeds = [experiment(params, e["performance"]["experiment"], e["dataset"])["seeds"][0]
                 for e in datasets]
        return [Run(e["dataset"], "", "", seed).split(root) for e, seed in zip(datasets, seeds)]
    if kind == "mode":
        return [p for e in datasets if "ablation" in e
                for run in experiment_runs(params, e["ablation"]["experiment"])
                for p in run.evaluated(root)]
    if kind == "sup":
        return [p for run in supervised_runs(params, tier) for p in run.evaluated(root)]
    methods = tier_spec(params, tier)["time"]["methods"]
    return [path for e in datasets
            for run in experiment_runs(params, e["performance"]["experiment"], methods)
            for path in (run.train_log(root), run.checkpoint(root))]


def figure_inputs(params: dict[str, Any], tier: str, figure: str, root: str = "results") -> list[str]:
    """The files one figure is computed from."""
    spec = tier_spec(params, tier)
    if figure in FIGURE_SECTIONS and FIGURE_SECTIONS[figure] not in spec:
        raise ConfigError(f"paper tier '{tier}' has no {FIGURE_SECTIONS[figure]}: section, so no "
                          f"{figure}; its figures: {', '.join(tier_figures(params, tier)) or 'none'}")
    files: list[str] = []
    for entry in spec["datasets"]:
        if figure == "robustness-curves":  # the extras it draws, checked beside their core files
            files += [p for run in experiment_runs(params, entry["performance"]["experiment"])
                      for p in run.evaluated(root)]
        elif figure in ANALYSED:
            files.append(analysis_file(tier, figure, entry["dataset"], root))
        elif figure == "Fig-beta":
            files += [p for run in beta_runs(params, tier, entry)
                      for p in (run.metrics(root), run.validation(root))]
        elif figure == "Fig-unlabel":
            files += [run.metrics(root) for run in unlabelled_runs(params, tier, entry)]
        else:
            raise ConfigError(f"unknown figure '{figure}'; figures: {', '.join(FIGURES)}")
    return list(dict.fromkeys(files))


def analysis_file(tier: str, figure: str, dataset: str, root: str = "results") -> str:
    """What an analysed figure shows on one dataset of a tier (wscat.steps.analyse)."""
    return paths.fill(paths.ANALYSIS, root, tier=tier, figure=figure, dataset=dataset)


def analysis_inputs(params: dict[str, Any], tier: str, figure: str, dataset: str,
                    root: str = "results") -> list[str]:
    """The checkpoints and split one analysis file is computed from."""
    spec = tier_spec(params, tier)
    entry = next((e for e in spec["datasets"] if e["dataset"] == dataset), None)
    if figure not in ANALYSED or FIGURE_SECTIONS[figure] not in spec or entry is None:
        raise ConfigError(f"no analysis '{figure}' of dataset '{dataset}' in paper tier '{tier}'")
    model, section = dataset_model(params, entry), spec[FIGURE_SECTIONS[figure]]
    methods = [section["model"]] if figure == "Fig-similarity" else section["methods"]
    runs = [Run(dataset, model, method, section["seed"]) for method in methods]
    return list(dict.fromkeys(p for run in runs for p in (run.checkpoint(root), run.split(root))))


@lru_cache(maxsize=1)
def reported() -> tuple[dict[str, str], ...]:
    """The paper's numbers (reported.csv, one row per cell: table, dataset, model, method,
    metric, mean, std)."""
    with open(REPORTED, newline="") as handle:
        return tuple(csv.DictReader(handle))


def paper_cells(params: dict[str, Any], tier: str, label: str) -> tuple[str, str] | None:
    """The paper's (dataset, model) whose cells a per-dataset table's companion puts beside ours,
    where its tier dataset names them in `compare` (the CIFAR-10 proxy's WRN-16-4 beside the
    paper's CIFAR10 WRN-28-10); None: the same names as ours."""
    _, entry = table_kind(params, tier, label)
    if entry is None or "compare" not in entry:
        return None
    return entry["compare"]["dataset"], entry["compare"]["model"]


def has_companion(params: dict[str, Any], tier: str, label: str) -> bool:
    """Whether the paper reports cells of this table for a dataset of the tier."""
    cells = paper_cells(params, tier, label)
    names = {cells[0]} if cells else {e["name"] for e in tier_spec(params, tier)["datasets"]}
    return any(row["table"] == label and row["dataset"] in names for row in reported())


def tier_outputs(params: dict[str, Any], tier: str, root: str = "results") -> list[str]:
    """Everything a tier's index lists: tables (+ companions), figures, training curves."""
    files = []
    for label in table_labels(params, tier):
        patterns = [paths.PAPER_TABLE_TEX, paths.PAPER_TABLE_CSV]
        if has_companion(params, tier, label):
            patterns += [paths.PAPER_COMPARE_TEX, paths.PAPER_COMPARE_CSV]
        files += [paths.fill(pattern, root, tier=tier, label=label) for pattern in patterns]
    files += [paths.fill(pattern, root, tier=tier, figure=figure)
              for figure in tier_figures(params, tier)
              for pattern in (paths.PAPER_FIGURE_PDF, paths.PAPER_FIGURE_PNG,
                              paths.PAPER_FIGURE_CSV)]
    runs = {run for e in tier_spec(params, tier)["datasets"]
            for part in parts(e)
            for run in experiment_runs(params, e[part]["experiment"])}
    files += [f"{run.curves(root)}.png" for run in sorted(runs, key=str)]
    return files
