"""`wscat table`: an experiment's table (.tex, .csv, summary .json; optionally Markdown and the
paired bootstrap against WSCAT) from its per-(method, seed) metrics files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from wscat.config import ConfigError, method_for
from wscat.io import guard_outputs
from wscat.report.names import display_name, is_adversarial
from wscat.report import write_table


def run(params: dict[str, Any], *, experiment: str, metrics: list[Path], tex: Path, csv: Path,
        summary: Path, md: Path | None = None, paired_csv: Path | None = None,
        paired_tex: Path | None = None) -> None:
    """Render experiment `experiment` of params.yaml from `metrics`."""
    if experiment not in params["experiments"]:
        raise ConfigError(f"unknown experiment '{experiment}'; configured: "
                          f"{', '.join(params['experiments'])}")
    guard_outputs({"metrics": metrics},
                  {"--tex": tex, "--csv": csv, "--summary": summary, "--md": md,
                   "--paired-csv": paired_csv, "--paired-tex": paired_tex})
    spec = params["experiments"][experiment]
    methods = spec["methods"]
    check_training(params, metrics)
    write_table(experiment=experiment, dataset=spec["dataset"],
                model=spec["model"], metrics_files=metrics, methods=methods,
                display_names={m: display_name(m) for m in methods},
                adversarial={m for m in methods if is_adversarial(method_for(params, m))},
                tex_path=tex, csv_path=csv, summary_path=summary,
                notes=table_notes(params, spec["dataset"], methods), md_path=md,
                paired_csv_path=paired_csv, paired_tex_path=paired_tex)


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


def check_training(params: dict[str, Any], metrics: list[Path]) -> None:
    """Refuse metrics measured on a checkpoint of another training than `params` give now (their
    manifest's training fingerprint, wscat.workflow.training_fingerprint), naming each file and
    the checkpoint to retrain: a table never mixes two training configurations."""
    from wscat import paths
    from wscat.report.table import read_runs
    from wscat.workflow import training_fingerprint

    stale = []
    for path, data in read_runs(metrics):
        expected = training_fingerprint(params, data["dataset"], data["model"], data["method"])
        recorded = ((data.get("manifest") or {}).get("training") or {}).get("fingerprint")
        if recorded != expected:
            run = paths.Run(data["dataset"], data["model"], data["method"], data["seed"])
            stale.append((str(path), run.checkpoint(), recorded or "none recorded"))
    if stale:
        files = "; ".join(f"{path} (training {found})" for path, _, found in stale)
        forced = " ".join(checkpoint for _, checkpoint, _ in stale)
        raise ValueError(f"{len(stale)} metrics file(s) come from another training than the "
                         f"params give now: {files}; retrain and re-evaluate them: "
                         f"snakemake --forcerun {forced} -- <this table>")
