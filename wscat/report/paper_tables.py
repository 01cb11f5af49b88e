"""The paper's tables, each from the files `wscat.report.paper.table_inputs` names.

Every table comes as LaTeX (jinja2) and as a long CSV in the layout of the paper's own numbers
(reported.csv: table, dataset, model, method, metric, mean, std, n_seeds), so that the companion
`{label}-vs-paper` is a join of the two. Where every run has AA-paper, the CSV also holds the Mean
as the paper computed it (`PAPER_MEAN`, over AA-paper), which the .tex does not show.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wscat import paths
from wscat.data.split import load_split
from wscat.metrics import ATTACKS, harmonic_mean
from wscat.report import paper
from wscat.report.cells import (METRICS, PAPER_MEAN, bold_caption, bold_leads, latex_escape, shown,
                                tex_cell)
from wscat.report.names import display_name, is_adversarial
from wscat.report.table import (SPREAD, _environment, read_frame, read_runs,
                                render_tex, seed_std, short_caption, spread_caption,
                                summarise)

COLUMNS = ["table", "dataset", "model", "method", "metric", "mean", "std", "n_seeds"]
SUP_METRICS = METRICS + ["NRF"]


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        # One seed has no spread: an empty std, as reported.csv leaves the paper's.
        std = row["std"] if row["n_seeds"] > 1 else None
        writer.writerow({**row, "mean": _fmt(row["mean"]), "std": _fmt(std)})
    return out.getvalue()


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return f"{shown(value):.2f}"


def _cell(mean: float, std: float | None, n_seeds: int, bold: bool = False) -> str:
    return tex_cell(shown(mean), shown(std) if n_seeds > 1 and std is not None else None, bold)


def paper_means(accuracies: list[dict[str, float]]) -> list[float] | None:
    """Per run (seed), the Mean as the paper computed it: the harmonic mean of Natural, FGSM,
    PGD, CW and AA-paper (the paper's AA numbers came from that variant); None unless every run
    has AA-paper."""
    if not accuracies or any("AA-paper" not in accuracy for accuracy in accuracies):
        return None
    return [harmonic_mean([accuracy["AA-paper" if metric == "AA" else metric]
                           for metric in ATTACKS]) for accuracy in accuracies]


def _with_paper_mean(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (table.collect's) with each run's `PAPER_MEAN` after its AA-paper, where every run
    has AA-paper (`frame.attrs["metrics"]` holds it then); else `frame` itself."""
    metrics = frame.attrs["metrics"]
    if "AA-paper" not in metrics:
        return frame
    wide = frame.pivot(index=["method", "seed"], columns="metric", values="value")
    means = pd.DataFrame({"method": wide.index.get_level_values("method"),
                          "seed": wide.index.get_level_values("seed"), "metric": PAPER_MEAN,
                          "value": paper_means(wide.to_dict("records"))})
    at = metrics.index("AA-paper") + 1
    out = pd.concat([frame, means], ignore_index=True)
    out.attrs = {**frame.attrs, "metrics": [*metrics[:at], PAPER_MEAN, *metrics[at:]]}
    return out


def grid(*, caption: str, label: str, colspec: str, header: list[str], rows: list[dict[str, Any]],
         notes: Sequence[str] = ()) -> str:
    """A table of LaTeX-ready cells through templates/grid.tex.j2."""
    return _environment().get_template("grid.tex.j2").render(
        caption=latex_escape(caption), label=label, colspec=colspec, header=header, rows=rows,
        notes=[latex_escape(note) for note in notes])


def _names(params: dict[str, Any], tier: str) -> tuple[dict[str, str], dict[str, str]]:
    spec = paper.tier_spec(params, tier)
    return ({e["dataset"]: e["name"] for e in spec["datasets"]}, spec["model_names"])


def _metrics_files(files: list[str], dataset: str, model: str) -> list[Path]:
    return [Path(f) for f in files if f"/metrics/{dataset}/{model}/" in f]


def performance(params: dict[str, Any], tier: str, label: str, part: str, entry: dict[str, Any],
                files: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """Tables 2-4 (part 'performance') and Tab-ap-* ('ablation'): methods x attacks."""
    from wscat.steps.table import table_notes
    from wscat.config import method_for

    experiment = params["experiments"][entry[part]["experiment"]]
    methods, dataset, model = experiment["methods"], experiment["dataset"], experiment["model"]
    runs, frame = read_frame([Path(f) for f in files])
    frame = _with_paper_mean(frame)
    summary = summarise(frame, methods)  # PAPER_MEAN rows for the CSV; render_tex leaves them out
    names, model_names = _names(params, tier)
    adversarial = {m for m in methods if is_adversarial(method_for(params, m))}
    leads, why_none = bold_leads([d for _, d in runs], methods, adversarial)
    shown_rows = [m for m in frame.attrs["metrics"] if m != PAPER_MEAN]
    what = ("Performance on" if part == "performance" else "Performance of different variants on")
    caption = (f"{what} {names[dataset]} ({model_names.get(model, model)}), mean and {SPREAD} "
               f"over {spread_caption(experiment['seeds'])}. {bold_caption(why_none, shown_rows)}"
               f"{short_caption(d for _, d in runs)}")
    tex = render_tex(summary, methods=methods, display_names={m: display_name(m) for m in methods},
                     adversarial=adversarial, caption=caption, label=label,
                     notes=[*table_notes(params, dataset, methods), *frame.attrs["notes"]],
                     leads=leads)
    rows = [{"table": label, "dataset": names[dataset], "model": model_names.get(model, model),
             "method": display_name(r.method), "metric": r.metric, "mean": r.mean, "std": r.std,
             "n_seeds": r.n_seeds} for r in summary.itertuples()]
    return tex, rows


def _classes(name: str, cfg: dict[str, Any]) -> int:
    """The number of classes of dataset `name`: fixed for digits and the official archives, else
    read from its files."""
    from wscat.data.capacity import known_labels

    known = known_labels(cfg, name)
    if known is not None:
        return known[1]
    from wscat.data import load_dataset

    return load_dataset(name, cfg).num_classes


def datasets_table(params: dict[str, Any], tier: str, files: list[str]
                   ) -> tuple[str, list[dict[str, Any]]]:
    """Table 1 (Tab-datasets): labelled (validation included) / unlabelled / test / classes,
    counted in the splits actually made. The classes of an official archive are its fixed count
    (wscat.data.capacity): no archive is read for them (ImageNet32-100's are gigabytes); a
    user's npz or a home-made archive is loaded."""
    names, _ = _names(params, tier)
    rows, body = [], []
    for entry, path in zip(paper.tier_spec(params, tier)["datasets"], files):
        split = load_split(path)
        classes = _classes(entry["dataset"], params["datasets"][entry["dataset"]])
        counts = {"labeled": len(split.labelled) + len(split.validation),
                  "unlabeled": len(split.unlabelled), "test": len(split.test), "classes": classes}
        rows += [{"table": "Tab-datasets", "dataset": names[entry["dataset"]], "model": "",
                  "method": "", "metric": k, "mean": float(v), "std": None, "n_seeds": 1}
                 for k, v in counts.items()]
        body.append({"cells": [latex_escape(names[entry["dataset"]])]
                     + [f"{v:,}" for v in counts.values()]})
    tex = grid(caption="Configuration of Datasets (labeled includes the validation set; counted "
                       "in the split of each dataset's first seed).",
               label="Tab-datasets", colspec="l|c|c|c|c",
               header=["Datasets", "labeled", "unlabeled", "testing", "classes"], rows=body)
    return tex, rows


def mode_table(params: dict[str, Any], tier: str, files: list[str]
               ) -> tuple[str, list[dict[str, Any]]]:
    """Table 5 (Tab-mode): the harmonic mean of WSCAT and its variants, one column per dataset."""
    names, _ = _names(params, tier)
    entries = [e for e in paper.tier_spec(params, tier)["datasets"] if "ablation" in e]
    summaries, rows, runs = {}, [], []
    for entry in entries:
        experiment = params["experiments"][entry["ablation"]["experiment"]]
        read, frame = read_frame(_metrics_files(files, experiment["dataset"], experiment["model"]))
        frame = _with_paper_mean(frame)
        runs += [data for _, data in read]
        summaries[entry["dataset"]] = summarise(frame, experiment["methods"]).set_index(
            ["method", "metric"])
    variants = list(dict.fromkeys(m for e in entries
                                  for m in params["experiments"][e["ablation"]["experiment"]]["methods"]))
    body = []
    for method in variants:
        cells = [latex_escape(display_name(method))]
        for entry in entries:
            table = summaries[entry["dataset"]]
            if (method, "Mean") not in table.index:
                cells.append("-")
                continue
            cell = table.loc[(method, "Mean")]
            cells.append(_cell(cell["mean"], cell["std"], int(cell["n_seeds"])))
            model = params["experiments"][entry["ablation"]["experiment"]]["model"]
            model = paper.tier_spec(params, tier)["model_names"].get(model, model)
            for metric in ("Mean", PAPER_MEAN):  # the CSV's Mean-paper: where AA-paper is
                if (method, metric) in table.index:
                    row = table.loc[(method, metric)]
                    rows.append({"table": "Tab-mode", "dataset": names[entry["dataset"]],
                                 "model": model, "method": display_name(method),
                                 "metric": metric, "mean": row["mean"], "std": row["std"],
                                 "n_seeds": int(row["n_seeds"])})
        body.append({"cells": cells})
    tex = grid(caption="The harmonic mean accuracies of WSCAT and its variants. Each harmonic mean "
                       "is computed over the natural accuracy and the accuracies under FGSM, PGD, "
                       f"CW and AA; {_mode_spread(params, entries, names)}.{short_caption(runs)}",
               label="Tab-mode",
               colspec="l|" + "|".join("c" * len(entries)),
               header=["Variants"] + [latex_escape(names[e["dataset"]]) for e in entries],
               rows=body)
    return tex, rows


def _mode_spread(params: dict[str, Any], entries: list[dict[str, Any]],
                 names: dict[str, str]) -> str:
    """Tab-mode's words for its spread: over seeds; where a column has one seed, that it has no
    spread (`spread_caption`'s words, as `wscat table` and Tables 2-4 say it)."""
    seeds = {e["dataset"]: params["experiments"][e["ablation"]["experiment"]]["seeds"]
             for e in entries}
    single = [dataset for dataset, s in seeds.items() if len(s) == 1]
    if not single and len({tuple(s) for s in seeds.values()}) > 1:  # columns of other seeds
        return (f"mean and {SPREAD} over seeds: "
                + ", ".join(f"{names[d]} over seeds {', '.join(map(str, s))}"
                            for d, s in seeds.items()))
    if not single:
        return f"mean and {SPREAD} over seeds"
    if len(single) == len(seeds) and len({tuple(s) for s in seeds.values()}) == 1:
        return f"mean and {SPREAD} over {spread_caption(seeds[single[0]])}"
    return (f"mean and {SPREAD} over seeds; "
            + ", ".join(f"{names[d]} over {spread_caption(seeds[d])}" for d in single))


def sup_table(params: dict[str, Any], tier: str, files: list[str]
              ) -> tuple[str, list[dict[str, Any]]]:
    """Supplementary tab-sup: Standard, TRADES, WSCAT-sup fully supervised, per (dataset, model),
    with NRF where the metrics carry it."""
    names, model_names = _names(params, tier)
    spec = paper.tier_spec(params, tier)["supervised"]
    body, rows, every = [], [], []
    for run in spec["runs"]:
        for model in run["models"]:
            dataset = paper.full_dataset(run["dataset"])
            data = [d for _, d in read_runs(_metrics_files(files, dataset, model))]
            every += data
            group = f"{names[run['dataset']]} ({model_names.get(model, model)})"
            for i, method in enumerate(spec["methods"]):
                runs = [d for d in data if d["method"] == method]
                if not runs:
                    raise ValueError(f"tab-sup: no metrics for {method} on {dataset}/{model}")
                cells = [latex_escape(group) if i == 0 else "", latex_escape(display_name(method))]
                for metric in SUP_METRICS:
                    values = [d["accuracy"][metric] for d in runs if metric in d["accuracy"]]
                    if len(values) != len(runs):
                        cells.append("-")
                        continue
                    mean, std = float(np.mean(values)), seed_std(values)
                    cells.append(_cell(mean, std, len(values)))
                    rows.append({"table": "tab-sup", "dataset": names[run["dataset"]],
                                 "model": model_names.get(model, model),
                                 "method": display_name(method), "metric": metric, "mean": mean,
                                 "std": std, "n_seeds": len(values)})
                means = paper_means([d["accuracy"] for d in runs])
                if means is not None:  # the CSV's Mean-paper, as the performance tables'
                    rows.append({"table": "tab-sup", "dataset": names[run["dataset"]],
                                 "model": model_names.get(model, model),
                                 "method": display_name(method), "metric": PAPER_MEAN,
                                 "mean": float(np.mean(means)), "std": seed_std(means),
                                 "n_seeds": len(means)})
                body.append({"cells": cells, "rule": i == 0 and bool(body)})
    seeds = ", ".join(map(str, spec["seeds"]))
    tex = grid(caption="Performance of models trained by Standard, TRADES and WSCAT-sup (a variant "
                       "of our WSCAT that uses only labeled data) under fully-supervised setting "
                       f"(every training label; seed {seeds}"
                       + (f"; mean and {SPREAD} over them)." if len(spec["seeds"]) > 1 else ").")
                       + " NRF: the attack on non-robust features as L-inf PGD in the eps-ball "
                       "(docs/evaluation.md), not the paper's unbounded L2 attack."
                       + short_caption(every),
               label="tab-sup", colspec="cc|cccccc|c",
               header=["Dataset (Model)", "Method", "Nat.", "FGSM", "PGD", "CW", "AA", "Mean", "NRF"],
               rows=body)
    return tex, rows


def _minutes(seconds: float) -> str:
    """5'14'' as the paper prints epoch times; below a minute, seconds with one decimal (59.95 s
    and up rounds to a minute, printed as 1'00'', not "60.0 s")."""
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"${minutes}^{{\\prime}}{rest:02d}^{{\\prime\\prime}}$"


def epoch_seconds(path: str, rebuild: str) -> list[float]:
    """Every epoch's `seconds` of the train_log.csv at `path`, read through the checked reader
    (`read_train_log`); a log it refuses, or one whose `seconds` is missing, empty, NaN,
    infinite or negative on any epoch (a mean over the rest would pass for the run's), is
    refused in one line naming `path` and `rebuild`, the Snakemake command that retrains its
    run."""
    from wscat.report.figures import read_train_log

    try:
        read_train_log(Path(path))
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
    except ValueError as error:
        raise ValueError(f"{error} (Snakemake retrains it: {rebuild})") from error
    if "seconds" not in text.columns:
        raise ValueError(f"{path} lacks the seconds column (each epoch's time, which `wscat train` "
                         f"logs), so its run's epoch time is unknown; retrain its run: {rebuild}")
    seconds = []
    for line, cell in enumerate(text["seconds"], start=2):
        value = pd.to_numeric(str(cell).strip() or "nan", errors="coerce")
        if not (np.isfinite(value) and value >= 0):
            shown = f"'{str(cell).strip()}'" if str(cell).strip() else "empty"
            raise ValueError(f"{path}, line {line}: seconds is {shown}, not a time >= 0, so its "
                             f"run's mean epoch time is unknown; retrain its run: {rebuild}")
        seconds.append(float(value))
    return seconds


def _rebuild_line(run: paper.Run, tier: str, label: str) -> str:
    """The Snakemake command that retrains a run (so remakes its train_log.csv) for a table."""
    table = paths.fill(paths.PAPER_TABLE_TEX, tier=tier, label=label)
    return f"snakemake --forcerun {run.train_log()} -- {table}"


def time_table(params: dict[str, Any], tier: str, root: str
               ) -> tuple[str, list[dict[str, Any]]]:
    """Supplementary Tab-ap-time: mean epoch time of WSCAT and RST, measured during training
    (train_log.csv's `seconds`, every epoch's: `epoch_seconds`), and the machine each run's
    checkpoint names."""
    from wscat.checkpoint import load_checkpoint

    names, model_names = _names(params, tier)
    entries = paper.tier_spec(params, tier)["datasets"]
    methods = paper.tier_spec(params, tier)["time"]["methods"]
    machines, rows, body = set(), [], []
    for method in methods:
        cells = [latex_escape(display_name(method))]
        for entry in entries:
            runs = paper.experiment_runs(params, entry["performance"]["experiment"], [method])
            per_run = []
            for run in runs:
                seconds = epoch_seconds(run.train_log(root),
                                        _rebuild_line(run, tier, "Tab-ap-time"))
                per_run.append(float(np.mean(seconds)))
                meta = load_checkpoint(run.checkpoint(root))["meta"]
                machines.add(meta.get("machine", "an unrecorded machine"))
            mean = float(np.mean(per_run))
            cells.append(_minutes(mean))
            rows.append({"table": "Tab-ap-time", "dataset": names[entry["dataset"]],
                         "model": model_names.get(runs[0].model, runs[0].model),
                         "method": display_name(method), "metric": "epoch_seconds", "mean": mean,
                         "std": seed_std(per_run), "n_seeds": len(per_run)})
        body.append({"cells": cells})
    tex = grid(caption="Epoch time of " + " and ".join(display_name(m) for m in methods)
                       + f" (mean over epochs and seeds), measured on {'; '.join(sorted(machines))}.",
               label="Tab-ap-time", colspec="l|" + "|".join("c" * len(entries)),
               header=["Datasets"] + [latex_escape(names[e["dataset"]]) for e in entries], rows=body)
    return tex, rows


def build(params: dict[str, Any], tier: str, label: str, root: str = "results"
          ) -> tuple[str, str]:
    """(LaTeX, CSV) of one table of a tier, from the files under `root` it is made of."""
    kind, entry = paper.table_kind(params, tier, label)
    files = paper.table_inputs(params, tier, label, root)
    if kind in ("performance", "ablation"):
        tex, rows = performance(params, tier, label, kind, entry, files)
    elif kind == "datasets":
        tex, rows = datasets_table(params, tier, files)
    elif kind == "mode":
        tex, rows = mode_table(params, tier, files)
    elif kind == "sup":
        tex, rows = sup_table(params, tier, files)
    else:
        tex, rows = time_table(params, tier, root)
    return tex, _csv(rows)
