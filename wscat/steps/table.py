"""`wscat table`: an experiment's table (.tex, .csv, summary .json; optionally Markdown and the
paired comparison against WSCAT, or the experiment's `reference`) from its per-(method, seed)
metrics files."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wscat import paths
from wscat.config import ConfigError, method_for
from wscat.io import guard_outputs
from wscat.report.names import display_name, is_adversarial
from wscat.report import paired, write_table
from wscat.targets import has_table, paper_tables

if TYPE_CHECKING:
    import pandas as pd


def run(params: dict[str, Any], *, experiment: str, metrics: list[Path], tex: Path, csv: Path,
        summary: Path, md: Path | None = None, paired_csv: Path | None = None,
        paired_tex: Path | None = None, paired_figure: Path | None = None
        ) -> tuple[pd.DataFrame, pd.DataFrame | None] | None:
    """Render experiment `experiment` of params.yaml from `metrics`; the paired comparison
    (`wscat.report.table.write_table`) where one of its outputs was asked for; `paired_figure`:
    a path without extension, its picture goes to PATH.pdf and PATH.png."""
    if experiment not in params["experiments"]:
        raise ConfigError(f"unknown experiment '{experiment}'; configured: "
                          f"{', '.join(params['experiments'])}")
    spec = params["experiments"][experiment]
    if not has_table(params, experiment):
        tiers = paper_tables(params, experiment)
        raise ConfigError(f"experiment '{experiment}' has no table of its own (`table: false`): "
                          "its runs fill "
                          + (f"the paper tier's tables ({', '.join(tiers)}): build those"
                             if tiers else "no table; set `table: true` to give it one"))
    reference = spec.get("reference", paired.REFERENCE)
    figure = figure_files(paired_figure) if paired_figure else None
    if (paired_csv or paired_tex or figure) and reference not in spec["methods"]:
        # The pipeline asks every table for them, so they are written, with no row; said here.
        print(f"no paired comparison: experiment '{experiment}' has no "
              f"{display_name(reference)} (its methods: {', '.join(spec['methods'])}); "
              f"its paired files hold no row; compare with another of them: "
              f"experiments.{experiment}.reference")
    guard_outputs({"metrics file": metrics},
                  {"--tex": tex, "--csv": csv, "--summary": summary, "--md": md,
                   "--paired-csv": paired_csv, "--paired-tex": paired_tex,
                   **{f"--paired-figure ({path.name})": path
                      for path in (figure or {}).values()}})
    methods = spec["methods"]
    check_training(params, metrics, experiment=experiment)
    return write_table(experiment=experiment, dataset=spec["dataset"],
                       model=spec["model"], metrics_files=metrics, methods=methods,
                       display_names={m: display_name(m) for m in methods},
                       adversarial={m for m in methods if is_adversarial(method_for(params, m))},
                       tex_path=tex, csv_path=csv, summary_path=summary,
                       notes=table_notes(params, spec["dataset"], methods), md_path=md,
                       paired_csv_path=paired_csv, paired_tex_path=paired_tex,
                       paired_figure_files=figure, reference=reference)


def figure_files(prefix: Path) -> dict[str, Path]:
    """The files of `--paired-figure PREFIX`: PREFIX.pdf and PREFIX.png (a dot in the name stays:
    `results/tables/v1.2-paired` gives `v1.2-paired.pdf`)."""
    return {ext: Path(f"{prefix}.{ext}") for ext in ("pdf", "png")}


def table_notes(params: dict[str, Any], dataset: str, methods: list[str]) -> list[str]:
    """Footnotes a table owes its reader: where a column departs from its paper's recipe."""
    notes = []
    for method in methods:
        knobs = method_for(params, method, dataset)
        if "generated_fraction" in knobs and not knobs.get("generated"):
            notes.append(f"{display_name(method)}: no generated data configured "
                         f"(methods.{method}.generated is null), so it trains its recipe "
                         "(TRADES with label smoothing and EMA) on the available data only.")
    return notes


RUN_KEYS = ("dataset", "model", "method", "seed")  # what names a run inside its files


def _of_unfinished_training(data: Mapping[str, Any]) -> bool:
    """Whether a metrics file records a checkpoint in a run's resume/ folder (measured before
    `wscat evaluate` refused those: wscat.checkpoint.check_finished)."""
    checkpoint = ((data.get("manifest") or {}).get("checkpoint") or {}).get("path")
    return isinstance(checkpoint, str) and paths.unfinished(checkpoint)


def check_run_file(path: str | Path, data: dict[str, Any], run: Any) -> None:
    """Refuse a run's file (metrics, validation) that names another run inside than `run`
    (a wscat.paths.Run), the one whose path it was read from: a copy of another run's file. A key
    the file does not record is not compared."""
    found = {key: data[key] for key in RUN_KEYS if key in data}
    if all(value == getattr(run, key) for key, value in found.items()):
        return
    holds = (f"{found.get('method', '?')} seed {found.get('seed', '?')} on "
             f"{found.get('dataset', '?')}/{found.get('model', '?')}")
    raise ValueError(f"{path} holds the numbers of {holds}, not of {run.method} seed {run.seed} "
                     f"on {run.dataset}/{run.model} whose file it is (a copy of another run's?); "
                     f"make that run's own file: snakemake --forcerun {path} -- <the table or "
                     "figure>")


def listed(stale: list[tuple[str, str, str]], what: str) -> tuple[str, str]:
    """The files of (path, Snakemake target, what was found) triples, each as 'path (what
    found)', and their targets for `snakemake --forcerun`: the two parts of a refusal."""
    return ("; ".join(f"{path} ({what}{found})" for path, _, found in stale),
            " ".join(target for _, target, _ in stale))


def check_training(params: dict[str, Any], metrics: list[Path], *, experiment: str | None = None,
                   runs: Mapping[str, Any] | None = None, unrecorded: bool = False) -> None:
    """Refuse metrics that are not what `params` give now for the runs they are read for: a file
    of another dataset or model than `experiment`'s, of another run than `runs` maps its path to
    (wscat.paths.Run; `check_run_file`), or of a dataset, model or method params.yaml lacks; then
    metrics measured on a checkpoint of another training (their manifest's training
    fingerprint, wscat.workflow.training_fingerprint) or with other evaluation settings (their
    manifest's `evaluation_settings`, wscat.workflow.evaluation_fingerprint: the same function
    `wscat evaluate` records them with), and extras (an extra part, or a `--part all` file)
    with other NRF or check settings (`extra_settings`, wscat.workflow.extra_fingerprint),
    naming each file and what to rerun: a table never mixes two trainings or two evaluations.
    `unrecorded`: a file whose manifest records no training, no evaluation settings or no extra
    settings (written by hand, or before they were recorded) is not checked on what it lacks."""
    from wscat.metrics import aa_paper_difference
    from wscat.report.cells import EXTRA_METRICS
    from wscat.report.table import _merge_extras, _read_metrics
    from wscat.workflow import evaluation_fingerprint, extra_fingerprint, training_fingerprint

    read = [(Path(path), _read_metrics(Path(path))) for path in metrics]
    spec = params["experiments"][experiment] if experiment is not None else None
    for path, data in read:  # every file, extras too, before they are folded into their run
        if spec is not None and (data["dataset"], data["model"]) != (spec["dataset"],
                                                                     spec["model"]):
            raise ValueError(f"{path} holds metrics of {data['dataset']}/{data['model']}, but "
                             f"experiment '{experiment}' is on {spec['dataset']}/{spec['model']}; "
                             f"pass the metrics files of its runs (results/metrics/"
                             f"{spec['dataset']}/{spec['model']}/METHOD/seedN.json)")
        if runs is not None and str(path) in runs:
            check_run_file(path, data, runs[str(path)])
        for key, section in (("dataset", "datasets"), ("model", "models"),
                             ("method", "methods")):
            if data[key] not in params[section]:
                raise ValueError(f"{path} holds metrics of {key} '{data[key]}', which the params "
                                 f"do not configure ({section}: has {', '.join(params[section])}"
                                 "); pass metrics of the experiment's runs, or the params they "
                                 "were made with")
    extras, both_parts = [], False  # both parts: a `--part all` file among them
    for path, data in read:  # each extra file itself: its settings fold away with it
        part = data.get("part")
        if part == "extra" or (part is None and set(EXTRA_METRICS) & set(data["accuracy"])):
            run = paths.Run(data["dataset"], data["model"], data["method"], data["seed"])
            manifest = data.get("manifest") or {}
            settings, now = manifest.get("extra_settings"), extra_fingerprint(params, run.dataset)
            # The AutoAttack AA-paper ran, as its manifest lists it (files of before
            # `extra_settings` too): wscat.metrics.AA_PAPER's, or another.
            found = aa_paper_difference(
                ((manifest.get("attacks") or {}).get("AA-paper") or {}).get("attacks"))
            if not found and settings != now and not (unrecorded and settings is None):
                found = f"{settings or 'none recorded'}, the params give {now}"
            if found:
                extras.append((str(path), run.extra() if part == "extra" else run.metrics(),
                               found))
                both_parts |= part is None
    unfinished = [(str(path), paths.Run(d["dataset"], d["model"], d["method"], d["seed"]))
                  for path, d in read if _of_unfinished_training(d)]
    if unfinished:
        raise ValueError(f"{len(unfinished)} metrics file(s) were measured on the checkpoint of "
                         "an unfinished training (in its resume/ folder): "
                         f"{'; '.join(path for path, _ in unfinished)}; finish the training and "
                         "evaluate its best.pt: snakemake --forcerun "
                         f"{' '.join(run.metrics() for _, run in unfinished)} -- <this table>")
    stale, measured = [], []
    for path, data in _merge_extras(read):
        run = paths.Run(data["dataset"], data["model"], data["method"], data["seed"])
        manifest = data.get("manifest") or {}
        recorded = (manifest.get("training") or {}).get("fingerprint")
        expected = training_fingerprint(params, run.dataset, run.model, run.method)
        if recorded != expected and not (unrecorded and recorded is None):
            stale.append((str(path), run.checkpoint(), recorded or "none recorded"))
        settings = manifest.get("evaluation_settings")
        now = evaluation_fingerprint(params, run.dataset)
        if settings != now and not (unrecorded and settings is None):
            measured.append((str(path), run.metrics(), f"{settings or 'none recorded'}, the "
                                                       f"params give {now}"))
    if stale:
        files, forced = listed(stale, "training ")
        raise ValueError(f"{len(stale)} metrics file(s) come from another training than the "
                         f"params give now: {files}; retrain and re-evaluate them: "
                         f"snakemake --forcerun {forced} -- <this table>")
    if measured:
        files, forced = listed(measured, "evaluation settings ")
        raise ValueError(f"{len(measured)} metrics file(s) were measured with other evaluation "
                         "settings (test images, attacks, threat) than the params give now: "
                         f"{files}; re-evaluate them under these params (snakemake --forcerun "
                         f"{forced} -- <this table>), or pass the params they were measured with")
    if extras:
        files, forced = listed(extras, "extra settings ")
        how = " or `wscat evaluate --part all` for a file holding both parts" if both_parts else ""
        raise ValueError(f"{len(extras)} extra metrics file(s) were measured with other extra "
                         "settings (AA-paper's attacks, NRF, the gradient-masking checks) than "
                         "wscat and the params give now: "
                         f"{files}; rerun their extra evaluation (`wscat evaluate --part extra`"
                         f"{how}) under these params (snakemake --forcerun {forced} -- <this "
                         "table>), or pass the params they were measured with")
