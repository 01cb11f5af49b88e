"""The paper's Table 2: per-(method, seed) metrics files -> mean and sample std (ddof=1) over
seeds -> .tex/.csv/.json."""
from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

from wscat.config import falls_short, reach
from wscat.io import atomic_path, json_text, write_texts
from wscat.metrics import ATTACKS, harmonic_mean, is_percent
from wscat.report.cells import (EXTRA_METRICS, METRICS, bold_caption, bold_leads, latex_escape,
                                row_name, shown, shown_cells, tex_cell)

TEMPLATES = Path(__file__).with_name("templates")
_REQUIRED = ("dataset", "model", "method", "seed", "accuracy")
_LABEL = re.compile(r"[A-Za-z0-9:._\-]+")


REEVALUATE = "re-evaluate it (`wscat evaluate`)"
NOT_OURS = ("not a metrics file of `wscat evaluate`: pass a run's "
            "results/metrics/DATASET/MODEL/METHOD/seedN.json, or " + REEVALUATE)


def _read_metrics(path: Path) -> dict:
    """Load and validate one metrics file; any problem is a one-line ValueError naming it and
    saying what to do. The parts a table reads beyond the accuracies (`checks`, `manifest` and
    its `attacks`) must be JSON objects where present: a list there was a traceback."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: metrics file not found; run `wscat evaluate` for that run "
                         "first, or fix the path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read metrics file ({err}); {NOT_OURS}") from None
    except json.JSONDecodeError as err:
        empty = " (the file is empty)" if not err.doc.strip() else ""  # the text read above
        raise ValueError(f"{path}: not valid JSON ({err}){empty}; {REEVALUATE}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}; "
                         f"{NOT_OURS}")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise ValueError(f"{path}: missing key(s) {', '.join(missing)}; {NOT_OURS}")
    manifest = data.get("manifest")
    for key, part in (("checks", data.get("checks")), ("manifest", manifest),
                      ("manifest.attacks",
                       manifest.get("attacks") if isinstance(manifest, dict) else None)):
        if part is not None and not isinstance(part, dict):
            raise ValueError(f"{path}: '{key}' must be a JSON object, got "
                             f"{type(part).__name__}; {REEVALUATE}")
    for name, check in (data.get("checks") or {}).items():
        if not isinstance(check, dict):
            raise ValueError(f"{path}: check '{name}' must be a JSON object, got "
                             f"{type(check).__name__}; {REEVALUATE}")
    if not isinstance(data["method"], str) or not data["method"]:
        raise ValueError(f"{path}: 'method' must be a non-empty string")
    if not isinstance(data["seed"], int) or isinstance(data["seed"], bool):
        raise ValueError(f"{path}: 'seed' must be an integer, got {data['seed']!r}")
    accuracy = data["accuracy"]
    if not isinstance(accuracy, dict):
        raise ValueError(f"{path}: 'accuracy' must be an object of metric -> percent; "
                         f"{REEVALUATE}")
    if data.get("part") != "extra":  # AA-paper, NRF and checks: merged into their core file
        absent = [metric for metric in METRICS if metric not in accuracy]
        if absent:
            raise ValueError(f"{path}: 'accuracy' lacks metric(s) {', '.join(absent)}; "
                             f"{REEVALUATE}")
    for metric, value in accuracy.items():
        if not is_percent(value):
            raise ValueError(f"{path}: accuracy '{metric}' must be a finite number in [0, 100] "
                             f"(a percentage), got {value!r}; re-evaluate it (`wscat evaluate`)")
    if data.get("part") != "extra" and _measured(data):
        _check_mean(path, accuracy)
    return data


def _measured(data: dict) -> bool:
    """Whether a metrics file says it was measured: its manifest records how its Mean was made
    (`attacks.Mean`, as every file `wscat evaluate` writes), or it carries per-image flags."""
    manifest = data.get("manifest")
    attacks = manifest.get("attacks") if isinstance(manifest, dict) else None
    return (isinstance(attacks, dict) and "Mean" in attacks) or bool(data.get("per_image"))


# `wscat evaluate` writes each accuracy and the Mean (the harmonic mean of the unrounded five)
# rounded to 4 decimals: recomputed from the rounded five, the Mean moves by at most
# 5 x 0.00005 (the harmonic mean's gradient sums to at most 5) + 0.00005 = 0.0003.
MEAN_TOLERANCE = 1e-3


def _check_mean(path: Path, accuracy: Mapping[str, float]) -> None:
    """Refuse a core metrics file whose Mean is not the harmonic mean of its Natural, FGSM, PGD,
    CW and AA (beyond the rounding of the file: MEAN_TOLERANCE): the table would print both."""
    recomputed = harmonic_mean([float(accuracy[metric]) for metric in ATTACKS])
    if abs(float(accuracy["Mean"]) - recomputed) > MEAN_TOLERANCE:
        raise ValueError(f"{path}: its Mean {accuracy['Mean']!r} is not the harmonic mean of its "
                         f"{', '.join(ATTACKS[:-1])} and {ATTACKS[-1]}, which is "
                         f"{recomputed:.4f}; re-evaluate it (`wscat evaluate`) rather than edit "
                         "a metrics file")


def collect(metrics_files: list[Path]) -> pd.DataFrame:
    """Read metrics files into a long frame (method, seed, metric, value).

    All files must share one dataset and model (kept in `frame.attrs`) and name distinct (method, seed).
    """
    return read_frame(metrics_files)[1]


def read_frame(metrics_files: list[Path]) -> tuple[list[tuple[Path, dict]], pd.DataFrame]:
    """The runs of `metrics_files` (`read_runs`) and their long frame (`collect`), each file read
    once."""
    if not metrics_files:
        raise ValueError("no metrics files given")
    runs = read_runs(metrics_files)
    return runs, _frame(runs)


def _frame(datas: list[tuple[Path, dict]]) -> pd.DataFrame:
    """The long frame of `collect` from runs already read (`read_runs`)."""
    records: list[dict] = []
    seen: dict[tuple[str, int], Path] = {}
    setting: tuple[str, str] | None = None
    extras = [m for m in EXTRA_METRICS if all(m in d["accuracy"] for _, d in datas)]
    notes: list[str] = []
    measured: dict[str, tuple[object, Path]] = {}  # evaluation setting -> value, file
    for path, data in datas:
        key = (data["method"], data["seed"])
        if key in seen:
            raise ValueError(f"{path}: method {key[0]!r} seed {key[1]} already read from "
                             f"{seen[key]}; pass each run's metrics file once")
        seen[key] = path
        if setting is None:
            setting = (data["dataset"], data["model"])
        elif (data["dataset"], data["model"]) != setting:
            raise ValueError(f"{path}: dataset/model {data['dataset']}/{data['model']} differs from "
                             f"{setting[0]}/{setting[1]} of the other metrics files")
        _check_same_evaluation(path, data, measured)
        records += [{"method": key[0], "seed": key[1], "metric": metric,
                     "value": float(data["accuracy"][metric])} for metric in METRICS + extras]
        for name, check in sorted((data.get("checks") or {}).items()):
            if not check.get("passed", True):
                notes.append(f"Gradient-masking check failed: {data['method']} seed {key[1]}, "
                             f"{name.replace('_', ' ')} ({check.get('detail', '')}).")
    frame = pd.DataFrame.from_records(records, columns=["method", "seed", "metric", "value"])
    frame.attrs.update(dataset=setting[0], model=setting[1], metrics=METRICS + extras,
                       notes=notes + _attack_notes([d for _, d in datas], extras)
                       + _partial_extras(datas, extras))
    return frame


def _partial_extras(datas: list[tuple[Path, dict]], extras: list[str]) -> list[str]:
    """A note per extra row (AA-paper, NRF) that some runs have and others lack: its row is shown
    only when every run has it, so a missing extra file would drop it without a word."""
    notes = []
    for metric in EXTRA_METRICS:
        lacking = [d for _, d in datas if metric not in d["accuracy"]]
        if metric in extras or len(lacking) == len(datas):
            continue
        first = lacking[0]
        have = "has" if len(lacking) == 1 else "have"
        notes.append(f"{metric}: not shown, since {len(lacking)} of the {len(datas)} runs {have} no "
                     f"{metric} accuracy (e.g. {first['method']} seed {first['seed']}); evaluate "
                     "their extra part (`wscat evaluate --part extra`) to show it.")
    return notes


def read_runs(metrics_files: Iterable[Path]) -> list[tuple[Path, dict]]:
    """Each run's metrics (its extra file folded in), validated, in the order given."""
    return _merge_extras([(path, _read_metrics(path)) for path in map(Path, metrics_files)])


def _merge_extras(datas: list[tuple[Path, dict]]) -> list[tuple[Path, dict]]:
    """Fold each `--part extra` metrics file (AA-paper, NRF, checks) into its run's core file: the
    same dataset, model, method and seed (a paper table spans models and datasets: tab-sup,
    Tab-mode)."""
    def run(data: dict) -> tuple[str, str, str, int]:
        return data["dataset"], data["model"], data["method"], data["seed"]

    extras: dict[tuple[str, str, str, int], tuple[Path, dict]] = {}
    for path, data in datas:
        if data.get("part") == "extra":
            key = run(data)
            if key in extras:
                raise ValueError(f"{path}: extra metrics of {key[2]} seed {key[3]} already read "
                                 f"from {extras[key][0]}; pass each run's extra metrics file "
                                 "once")
            extras[key] = (path, data)
    merged = []
    for path, data in datas:
        if data.get("part") == "extra":
            continue
        extra_path, extra = extras.pop(run(data), (None, None))
        if extra is not None:
            _check_extra_bound(path, data, extra_path, extra)
            manifest = dict(data.get("manifest") or {})
            manifest["attacks"] = {**manifest.get("attacks", {}),
                                   **(extra.get("manifest") or {}).get("attacks", {})}
            data = {**data, "accuracy": {**data["accuracy"], **extra["accuracy"]},
                    "checks": {**(data.get("checks") or {}), **(extra.get("checks") or {})},
                    "manifest": manifest}
        merged.append((path, data))
    if extras:
        path, data = next(iter(extras.values()))
        raise ValueError(f"{path}: extra metrics of {data['method']} seed {data['seed']} without "
                         "the run's core metrics file")
    return merged


def _check_extra_bound(path: Path, core: dict, extra_path: Path, extra: dict) -> None:
    """Refuse an extra file measured on other weights, another training or other core settings
    than its core file (the provenance `wscat evaluate` records in both manifests)."""
    for key in ("training", "evaluation_settings"):
        recorded = (core.get("manifest") or {}).get(key)
        if recorded is not None and (extra.get("manifest") or {}).get(key) != recorded:
            raise ValueError(f"{extra_path}: its {key.replace('_', ' ')} differ from its core file "
                             f"{path}'s; rerun its extra evaluation (`wscat evaluate --part extra`)")


# What defines a measurement, as the manifests of `wscat evaluate` record it; not what differs
# legitimately between runs (method, seed, weights digest, device, versions, git revision) nor
# what an attack found or measured (accuracies, shards, NRF's layer and channels).
_RUN_SETTINGS = (("n_examples",), ("test_set_size",), ("evaluation_set",), ("test_set",),
                 ("eps",), ("precision",), ("checkpoint", "which"))
_ATTACK_SETTINGS = ("n_examples", "subset", "variant", "norm", "eps", "steps", "step_size",
                    "random_start", "restarts", "loss", "kappa", "attacks", "kind", "of",
                    "ib_steps", "ib_lr", "ib_beta", "weight")
_ABSENT = object()


def _evaluation_settings(data: dict) -> dict[str, object]:
    """The recorded settings that define what a run's metrics measured, by dotted name: the
    test set, threat and precision, each attack's settings and images, and last the fingerprint
    of the evaluation params (`evaluation_settings`). Settings a file does not record are left out."""
    manifest = data.get("manifest") or {}
    settings: dict[str, object] = {}
    for keys in _RUN_SETTINGS:
        value: object = manifest
        for key in keys:
            value = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
        if value is not _ABSENT:
            settings[".".join(keys)] = value
    for attack, recorded in sorted((manifest.get("attacks") or {}).items()):
        if isinstance(recorded, dict):
            settings.update({f"{attack} {key}": recorded[key] for key in _ATTACK_SETTINGS
                             if key in recorded})
    if "evaluation_settings" in manifest:
        settings["evaluation_settings"] = manifest["evaluation_settings"]
    return settings


def _check_same_evaluation(path: Path, data: dict, seen: dict[str, tuple[object, Path]]) -> None:
    """Refuse a run measured with other evaluation settings (other images, attacks, threat or
    evaluation params) than the runs read before it, whose settings `seen` holds (each with the
    first file that recorded it; updated): their numbers cannot be averaged or compared in one
    table. A setting a file does not record is not compared."""
    for name, value in _evaluation_settings(data).items():
        before, where = seen.setdefault(name, (value, path))
        if before != value:
            raise ValueError(f"{path}: evaluation setting '{name}' is {value!r}, but {before!r} "
                             f"in {where}; re-evaluate them with the same params "
                             "(`wscat evaluate`) before tabulating them together")


def _attack_notes(datas: list[dict], extras: list[str]) -> list[str]:
    """Which AutoAttack each AA row is, and on how many images (from the manifests)."""
    attacks = (datas[0].get("manifest") or {}).get("attacks") or {}
    notes = []
    if "AA" in attacks:
        n = attacks["AA"].get("n_examples")
        notes.append("AA (standard): the official standard AutoAttack (pyautoattack "
                     f"{attacks['AA'].get('library_version', '')}: APGD-CE, APGD-T, FAB-T, Square)"
                     + (f" on {attacks['AA'].get('subset', f'{n} test images')}" if n else "")
                     + "; Mean is the harmonic mean of Natural, FGSM, PGD, CW and AA (standard).")
    if "AA-paper" in extras:
        order = ((attacks.get("AA-paper") or {}).get("attacks") or {}).get("order") or []
        square = ", then Square" if "square" in order else ", no Square"  # as the manifest ran it
        notes.append("AA (paper's variant): the configuration of the paper's released evaluation "
                     f"(10 iterations of APGD, APGD-T and FAB, n_classes - 1 targets{square}); "
                     "the paper's AA numbers come from it.")
    if "NRF" in extras:
        layers = sorted({((d.get("manifest") or {}).get("attacks") or {}).get("NRF", {}).get("layer")
                         or "?" for d in datas})  # several where a table spans models (tab-sup)
        notes.append("NRF: PGD on the CW margin with the gradient of the non-robust channels of "
                     f"feature map {', '.join(layers)} (evaluation.nrf.layer; "
                     "information-bottleneck search, Kim et al. 2021).")
    return notes


def short_caption(datas: Iterable[Mapping]) -> str:
    """The caption's sentence, led by a space, where a metrics file's manifest records an attack
    whose steps x step size fall short of its eps (`wscat.config.falls_short`: PGD-5 on digits):
    such a column is weaker than FGSM by construction, and can read above it. '' otherwise: the
    caption is unchanged. Each dataset named where the runs span more than one (tab-sup)."""
    datas = list(datas)
    several = len({data["dataset"] for data in datas}) > 1
    short: dict[tuple[str, int, float, float], list[str]] = {}
    order = [*METRICS, *EXTRA_METRICS]  # the table's rows (a manifest's keys come sorted)
    for data in datas:
        attacks = (data.get("manifest") or {}).get("attacks") or {}
        for attack, recorded in sorted(attacks.items(), key=lambda item: (
                order.index(item[0]) if item[0] in order else len(order), item[0])):
            numbers = [recorded.get(key) for key in ("steps", "step_size", "eps")
                       ] if isinstance(recorded, dict) else []
            if (len(numbers) == 3 and isinstance(numbers[0], int)
                    and all(isinstance(n, (int, float)) and not isinstance(n, bool)
                            for n in numbers) and falls_short(*numbers)):
                names = short.setdefault((data["dataset"] if several else "", *numbers), [])
                if attack not in names:
                    names.append(attack)
    if not short:
        return ""
    clauses = "; ".join(f"on {where}, " * bool(where) + reach(names, steps, step, eps)
                        for (where, steps, step, eps), names in short.items())
    return (f" {clauses[0].upper()}{clauses[1:]}: weaker than FGSM (one step of ε) by "
            "construction.")


SPREAD = "sample standard deviation (ddof=1)"  # what every ± over seeds is, named in captions


def seed_std(values: Sequence[float] | np.ndarray) -> float:
    """The spread over seeds: the sample standard deviation (ddof=1), as pandas and most papers;
    0 for a single seed, which has no spread to show."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.std(values, ddof=1)) if values.size > 1 else 0.0


def spread_caption(seeds: Sequence[int]) -> str:
    """The caption's words for the seeds a table's spread is over."""
    if len(seeds) == 1:
        return f"seed {seeds[0]} (one seed: no spread; means alone)"
    return f"seeds {', '.join(map(str, seeds))}"


def summarise(frame: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """Mean, sample std over seeds (ddof=1, `seed_std`) and number of seeds per (method, metric),
    in `methods` x METRICS order."""
    if not methods:
        raise ValueError("no methods given")
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods listed more than once: {methods}")
    present = set(frame["method"])
    missing = [method for method in methods if method not in present]
    if missing:
        raise ValueError(f"no metrics file for method(s) {', '.join(missing)}")
    seeds = {method: sorted(set(frame.loc[frame["method"] == method, "seed"])) for method in methods}
    if len({tuple(s) for s in seeds.values()}) > 1:
        detail = "; ".join(f"{method}: {s}" for method, s in seeds.items())
        every = sorted(set().union(*seeds.values()))
        lacking = ", ".join(f"{method} seed {seed}" for method, s in seeds.items()
                            for seed in every if seed not in s)
        raise ValueError(f"methods were run with different seeds ({detail}): no metrics file "
                         f"for {lacking}; pass it (`wscat evaluate` makes it), so that every "
                         "method has the same seeds")
    rows = []
    for method in methods:
        for metric in frame.attrs.get("metrics", METRICS):
            values = frame.loc[(frame["method"] == method) & (frame["metric"] == metric), "value"].to_numpy()
            if values.size != len(seeds[method]):
                raise ValueError(f"method {method}: {values.size} {metric} values for {len(seeds[method])} seeds")
            rows.append({"method": method, "metric": metric, "mean": float(np.mean(values)),
                         "std": seed_std(values), "n_seeds": int(values.size)})
    return pd.DataFrame(rows, columns=["method", "metric", "mean", "std", "n_seeds"])


def _environment() -> jinja2.Environment:
    """Jinja2 with LaTeX-safe delimiters: ((* block *)), ((( variable ))), ((# comment #))."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False, undefined=jinja2.StrictUndefined,
        block_start_string="((*", block_end_string="*))", variable_start_string="(((",
        variable_end_string=")))", comment_start_string="((#", comment_end_string="#))",
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def render_tex(summary: pd.DataFrame, *, methods: Sequence[str], display_names: Mapping[str, str],
               adversarial: Iterable[str], caption: str, label: str,
               notes: Sequence[str] = (), leads: Mapping[str, str] | None = None) -> str:
    """Render Table 2: methods as columns; per row the AT method `leads` names in bold
    (`wscat.report.cells.shown_cells`; none without `leads`)."""
    if not _LABEL.fullmatch(label):
        raise ValueError(f"label {label!r} may only hold letters, digits and ':._-'")
    unnamed = [method for method in methods if method not in display_names]
    if unnamed:
        raise ValueError(f"no display name for method(s) {', '.join(unnamed)}")
    rows, shown_rows = [], shown_cells(summary, methods, adversarial, leads)
    metrics = [metric for metric, _ in shown_rows]
    for metric, cells in shown_rows:
        row = [tex_cell(mean, std, bold) for mean, std, bold in cells]
        rows.append({"metric": latex_escape(row_name(metric, metrics)), "cells": row,
                     "rule": metric in ("Mean", EXTRA_METRICS[0]) or (
                         metric == "NRF" and "AA-paper" not in metrics)})
    template = _environment().get_template("table2.tex.j2")
    return template.render(caption=latex_escape(caption), label=label, rows=rows,
                           header=[latex_escape(display_names[m]) for m in methods],
                           notes=[latex_escape(note) for note in notes])


def _long_csv(summary: pd.DataFrame, *, experiment: str, dataset: str, model: str,
              display_names: Mapping[str, str], order: Sequence[str]) -> str:
    """The long .csv (as reported.csv, plus n_seeds), metrics in the order of the table. One
    seed has no spread: its std is left empty, as reported.csv leaves the paper's."""
    long = summary.assign(table=experiment, dataset=dataset, model=model,
                          method=summary["method"].map(display_names),
                          mean=summary["mean"].map(shown),
                          std=summary["std"].map(shown).where(summary["n_seeds"] > 1))
    long = long.sort_values("metric", key=lambda metric: metric.map(order.index), kind="stable")
    return long[["table", "dataset", "model", "method", "metric", "mean", "std", "n_seeds"]].to_csv(
        index=False, float_format="%.2f", lineterminator="\n")


def _paired_comparison(runs: list[tuple[Path, dict]], methods: Sequence[str],
                       adversarial: set[str], reference: str
                       ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The paired interval of every other AT method against `reference` in Mean (empty without
    it), and on each attack alone (None where the Mean's has no per-image flags to resample).
    Only the compared runs' flags are read: a method outside the comparison (Standard) needs
    none."""
    from wscat.report import paired

    others = [m for m in methods if m in adversarial and m != reference]
    tabulated = [d for _, d in runs if d["method"] in (reference, *others)]
    if reference not in methods:
        return pd.DataFrame(columns=paired.COLUMNS), None
    try:
        flags = paired.correctness(tabulated)
    except paired.NotTheTablesMean as refusal:  # the table stands; the interval is refused
        return paired.without_interval(tabulated, others, str(refusal),
                                       reference=reference), None
    return (paired.paired_interval(flags, others, reference=reference),
            paired.paired_by_attack(flags, others, reference=reference))


def write_table(*, experiment: str, dataset: str, model: str, metrics_files: list[Path],
                methods: list[str], display_names: Mapping[str, str], adversarial: Iterable[str],
                tex_path: Path, csv_path: Path, summary_path: Path,
                notes: Sequence[str] = (), md_path: Path | None = None,
                paired_csv_path: Path | None = None, paired_tex_path: Path | None = None,
                paired_figure_files: Mapping[str, Path] | None = None,
                reference: str = "wscat") -> tuple[pd.DataFrame, pd.DataFrame | None] | None:
    """Build one experiment's table: the .tex, the long .csv (as reported.csv, plus n_seeds), the
    summary JSON, and optionally its Markdown twin and the paired comparison against `reference`
    (`wscat.report.paired`: .csv, .tex, a section of the Markdown twin, and as a picture:
    `paired_figure_files`, its "pdf" and "png", `wscat.report.paired_figure`'s forest plot of
    each method's difference in Mean and on each attack, the numbers those of the .csv and .md).

    Everything is read and rendered before the first file is written, so a failure writes nothing.
    Returns the paired comparison (in Mean, and on each attack alone) where it was computed.
    """
    from wscat.report import markdown

    adversarial = set(adversarial)
    runs, frame = read_frame(metrics_files)
    if (frame.attrs["dataset"], frame.attrs["model"]) != (dataset, model):
        raise ValueError(f"metrics files are for {frame.attrs['dataset']}/{frame.attrs['model']}, "
                         f"not {dataset}/{model}")
    summary = summarise(frame, methods)
    seeds = sorted(set(frame.loc[frame["method"].isin(methods), "seed"]))
    leads, why_none = bold_leads([d for _, d in runs], methods, adversarial)
    caption = (f"Performance on {dataset} ({model}): mean and {SPREAD} over "
               f"{spread_caption(seeds)}. {bold_caption(why_none, frame.attrs['metrics'])}"
               f"{short_caption(d for _, d in runs)}")
    tex = render_tex(summary, methods=methods, display_names=display_names, adversarial=adversarial,
                     caption=caption, label=f"Tab-RQ1-{experiment}",
                     notes=[*notes, *frame.attrs["notes"]], leads=leads)
    csv = _long_csv(summary, experiment=experiment, dataset=dataset, model=model,
                    display_names=display_names, order=frame.attrs["metrics"])
    means: dict[str, dict[str, float]] = {method: {} for method in methods}
    for row in summary.itertuples():
        means[row.method][row.metric] = round(float(row.mean), 4)
    outputs = {tex_path: tex, csv_path: csv}
    compared = None
    figure = None
    if md_path or paired_csv_path or paired_tex_path or paired_figure_files:
        compared = comparison, by_attack = _paired_comparison(runs, methods, adversarial,
                                                              reference)
        if paired_figure_files:
            figure = _paired_picture(comparison, by_attack, display_names, reference,
                                     experiment)
        if md_path:
            outputs[md_path] = "\n".join(filter(None, [
                markdown.table_markdown(summary, methods=methods, display_names=display_names,
                                        adversarial=adversarial, caption=caption, leads=leads),
                markdown.paired_markdown(comparison, display_names),
                markdown.paired_attacks_markdown(by_attack, display_names)]))
        if paired_csv_path:
            outputs[paired_csv_path] = markdown.paired_csv(comparison, display_names)
        if paired_tex_path:
            outputs[paired_tex_path] = markdown.paired_tex(comparison, display_names,
                                                           label=f"Tab-paired-{experiment}",
                                                           reference=reference)
    with contextlib.ExitStack() as stack:  # the figure's files move into place with the texts
        if figure is not None:
            from wscat.report.figures import plt, render

            stack.callback(plt.close, figure)
            render(figure, {ext: stack.enter_context(atomic_path(path))
                            for ext, path in paired_figure_files.items()})
        write_texts({**outputs, summary_path: json_text(means)})  # all of them or none
    return compared


def _paired_picture(comparison: pd.DataFrame, by_attack: pd.DataFrame | None,
                    display_names: Mapping[str, str], reference: str, experiment: str) -> Any:
    """The paired comparison as a forest plot (`wscat.report.paired_figure.draw`), or, where the
    experiment has no `reference`, empty panels whose title says so."""
    from wscat.report import paired_figure
    from wscat.report.names import display_name

    plotted = paired_figure.rows(by_attack, comparison, {}, display_names)
    name = display_names.get(reference, display_name(reference))
    return paired_figure.draw(plotted, reference=name, empty=(
        f"No paired comparison: {name} is not among the experiment's methods "
        f"(experiments.{experiment}.reference names another)." if comparison.empty else ""))
