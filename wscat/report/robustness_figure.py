"""Robust accuracy against the attack's budget and its steps, every run in one picture: the
curves Carlini et al. (2019, "On evaluating adversarial robustness", Sec. 5) ask for beside a
table, drawn from the numbers the gradient-masking checks already measured (each run's extra
metrics file, `checks.pgd_eps_monotone` and `checks.pgd_steps_monotone`: PGD at
`evaluation.checks.eps_factors` x eps, and at `evaluation.checks.pgd_steps` steps). A sound
evaluation's accuracy falls towards 0 as eps grows and levels off as the steps grow; a masked
gradient keeps it up at large eps, and a curve still falling at the most steps says the table's
PGD has not converged. Not one of the paper's figures: every paper tier has it, from the runs of
its Table 2 (`results/paper/{tier}/robustness-curves.*`), and so has every experiment, from its
own runs (`results/robustness-curves/{experiment}.*`: the demo's is `make robustness-demo`)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from wscat.errors import first_line
from wscat.io import read_json_object
from wscat.metrics import is_percent

NAME = "robustness-curves"
PASS_EXTRA = "pass the extra metrics file `wscat evaluate --part extra` wrote"
# (check, its x key, the x axis's label) per panel, in the figure's order
PANELS = (("pgd_eps_monotone", "eps", "eps (L-inf budget)"),
          ("pgd_steps_monotone", "steps", "PGD steps (at eps)"))
MARKERS = ("o", "s", "^", "D", "v", "p", "h", "<", ">")  # one per method, hollow


def rows(extras: Mapping[tuple[str, int], Path], names: Mapping[str, str],
         dataset: str = "") -> list[dict]:
    """One row per (method, seed, panel, x), under `dataset`: the PGD accuracy (%) each extra
    metrics file's check recorded. A file that is not a JSON object, one without those checks,
    whose grid differs from the others', or with an accuracy that is not a finite percentage in
    [0, 100] (wscat.metrics.is_percent: NaN would be drawn as a gap and written as if measured)
    is a one-line ValueError naming it."""
    out, grids = [], {}
    for (method, seed), path in extras.items():
        checks = _checks(path)
        for check, key, _ in PANELS:
            found = checks.get(check)
            found = found if isinstance(found, dict) else {}
            xs, accuracy = found.get(key), found.get("accuracy")
            if (not isinstance(xs, list) or not isinstance(accuracy, list) or not xs
                    or len(xs) != len(accuracy)):
                raise ValueError(f"{path}: no {check} numbers (its gradient-masking checks); "
                                 f"{PASS_EXTRA}")
            for x, a in zip(xs, accuracy):
                if not is_percent(a):
                    raise ValueError(f"{path}: {check}'s accuracy at {key} {x} is "
                                     f"{json.dumps(a)}, not a finite percentage in [0, 100]; "
                                     f"{PASS_EXTRA}")
            if grids.setdefault(key, (xs, path))[0] != xs:
                raise ValueError(f"{path}: its {check} ran at {key} {xs}, "
                                 f"{grids[key][1]}'s at {grids[key][0]}; evaluate every run "
                                 "with the same evaluation.checks")
            out.extend({"dataset": dataset, "method": names.get(method, method), "seed": seed,
                        "panel": key, "x": x, "accuracy": float(a)}
                       for x, a in zip(xs, accuracy))
    return out


def _checks(path: Path) -> dict:
    """The `checks` object of an extra metrics file ({} where it has none), or a one-line
    ValueError naming a file that is not a readable JSON object."""
    try:
        data = read_json_object(path, "an extra metrics file's object", PASS_EXTRA)
    except FileNotFoundError as error:
        raise ValueError(f"{path}: not a readable JSON file ({first_line(error)}); "
                         f"{PASS_EXTRA}") from None
    checks = data.get("checks")
    return checks if isinstance(checks, dict) else {}


def _eps_label(value: float) -> str:
    """A budget as k/255 where it is one (CIFAR's 8/255), else its number."""
    k = value * 255
    if value == 0 or abs(k - round(k)) >= 1e-3:
        return f"{value:g}"
    return f"{round(k)}/255"


def robustness_figure(plotted: list[dict], prefix: Path,
                      budgets: Mapping[str, tuple[float, int]]) -> None:
    """prefix.pdf, .png and .csv: a row of two panels per dataset of `budgets` (dataset -> the
    table's eps and PGD steps, drawn dotted); per method the mean over seeds (line) and each
    seed (dots)."""
    from wscat.report.figures import key_below, plt, save, seeds_label
    from wscat.report.names import method_colours

    frame = pd.DataFrame(plotted)
    methods = list(dict.fromkeys(frame["method"]))
    colours = method_colours(methods)  # a method's colour is the same in every figure
    # A hollow marker of its own per method, each smaller than the one before: methods with the
    # same accuracies (Standard and MT at 0) stay visible, one inside the other.
    styles = {m: {"marker": MARKERS[i % len(MARKERS)], "markersize": max(9 - 0.7 * i, 3),
                  "markerfacecolor": "none"} for i, m in enumerate(methods)}
    seeds = sorted(set(frame["seed"]))
    fig, axes = plt.subplots(len(budgets), len(PANELS), figsize=(5.2 * len(PANELS),
                                                                  3.6 * len(budgets)),
                             squeeze=False)
    for row, (dataset, (eps, steps)) in zip(axes, budgets.items()):
        for ax, (_, key, label) in zip(row, PANELS):
            panel = frame[(frame["dataset"] == dataset) & (frame["panel"] == key)]
            for method in dict.fromkeys(panel["method"]):
                runs = panel[panel["method"] == method]
                mean = runs.groupby("x", sort=True)["accuracy"].mean()
                ax.plot(mean.index, mean.values, "-", color=colours[method], linewidth=1.4,
                        label=method, **styles[method])
                ax.plot(runs["x"], runs["accuracy"], ".", color=colours[method], alpha=0.5)
            xs = sorted(set(panel["x"]))
            if key == "steps":
                ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [_eps_label(x) if key == "eps" else f"{int(x)}" for x in xs])
            ax.axvline(eps if key == "eps" else steps, color="0.6", linestyle=":", linewidth=1)
            ax.set_xlabel(label)
            ax.set_ylabel("PGD accuracy (%)")
            ax.set_ylim(-2, 102)
            ax.set_title(f"{dataset}: PGD-{steps}" if key == "eps" else
                         f"{dataset}: at eps {_eps_label(eps)}", fontsize=9)
            ax.grid(color="0.9")
            key_below(ax, drop=0.26)
    lines = (f"line: mean over {seeds_label(seeds)}, dots: each seed" if len(seeds) > 1
             else seeds_label(seeds))
    fig.suptitle(f"Robust accuracy against the budget and the steps; {lines}; dotted: the "
                 "table's eps and steps", fontsize=9)
    fig.tight_layout()
    save(fig, prefix, plotted)


def _experiment_rows(params: dict[str, Any], experiment: str, dataset: str, name: str,
                     root: str) -> tuple[list[dict], tuple[float, int]]:
    """The rows of every run of `experiment` (from its extra metrics files under `root`), named
    `name`, and the budget its dotted lines mark: `dataset`'s eps and the table's PGD steps."""
    from wscat.report import paper
    from wscat.report.names import display_name

    runs = paper.experiment_runs(params, experiment)
    extras = {(run.method, run.seed): Path(run.extra(root)) for run in runs}
    return (rows(extras, {run.method: display_name(run.method) for run in runs}, name),
            (params["datasets"][dataset]["eps"], params["evaluation"]["pgd_steps"]))


def tier_figure(params: dict[str, Any], tier: str, root: str, prefix: Path) -> None:
    """The figure of a paper tier: a row per dataset, from the extra metrics files of every run
    of its performance table (Table 2 or 3 or 4), which that table reads too."""
    from wscat.report import paper

    plotted, budgets = [], {}
    for entry in paper.tier_spec(params, tier)["datasets"]:
        drawn, budgets[entry["name"]] = _experiment_rows(
            params, entry["performance"]["experiment"], entry["dataset"], entry["name"], root)
        plotted += drawn
    robustness_figure(plotted, prefix, budgets)


def experiment_figure(params: dict[str, Any], experiment: str, root: str, prefix: Path) -> None:
    """The figure of one experiment (`wscat robustness-curves`): one row, every run of its table
    (or, for an experiment with `table: false`, of the paper table it fills)."""
    dataset = params["experiments"][experiment]["dataset"]
    plotted, budget = _experiment_rows(params, experiment, dataset, dataset, root)
    robustness_figure(plotted, prefix, {dataset: budget})
