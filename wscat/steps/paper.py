"""The paper's tables and figures of a tier (`wscat paper-table`, `paper-compare`,
`paper-figure`, `paper-index`), an experiment's robustness curves (`wscat robustness-curves`)
and a run's training curves (`wscat curves`)."""
from __future__ import annotations

import csv
import math
import os
import re
from pathlib import Path
from typing import Any

from wscat import paths
from wscat.errors import is_text_file, require_file
from wscat.io import check_writable, guard_outputs, write_text, write_texts
from wscat.report import paper

# The results files the paper's tables and figures read, and the step that writes each (the
# extra metrics before the core ones: their names end alike).
MADE_BY = ((paths.EXTRA, "wscat evaluate --part extra"),
           (paths.METRICS, "wscat evaluate --part core"), (paths.VALIDATION, "wscat validate"),
           (paths.TRAIN_LOG, "wscat train"), (paths.BEST, "wscat train"),
           (paths.SPLIT, "wscat split"), (paths.ANALYSIS, "wscat analyse"))


def _regex(pattern: str) -> re.Pattern[str]:
    """A results path pattern as a regex matching the end of a path under any results folder."""
    text = re.escape(pattern.removeprefix(paths.RESULTS + "/"))
    for name in re.findall(r"\{(\w+)\}", pattern):
        text = text.replace(re.escape("{" + name + "}"),
                            rf"(?P<{name}>\d+)" if name == "seed" else rf"(?P<{name}>[^/]+)")
    return re.compile(r"(?:^|/)" + text + "$")


_MADE_BY = [(pattern, _regex(pattern), step) for pattern, step in MADE_BY]


def made_by(path: str) -> tuple[str, str, dict[str, str]] | None:
    """(its pattern, the wscat step that writes it, the pattern's fields) of a results file the
    paper reads; None for another file."""
    for pattern, regex, step in _MADE_BY:
        match = regex.search(str(path))
        if match:
            return pattern, step, match.groupdict()
    return None


def run_of(path: str) -> paths.Run | None:
    """The run whose metrics or validation file `path` is (None for another file)."""
    found = made_by(path)
    if found is None or found[0] not in (paths.METRICS, paths.EXTRA, paths.VALIDATION):
        return None
    fields = found[2]
    return paths.Run(fields["dataset"], fields["model"], fields["method"], int(fields["seed"]))


def missing_input(path: str, whole: str = "the tier's Snakemake target") -> str:
    """The line for an input that is not there: which Snakemake target (and wscat step) makes it,
    and `whole`, what makes every input (a tier's target; an experiment's figure: its own)."""
    found = made_by(path)
    if found is None:
        return f"{path}: not found; make it first ({whole} makes every input)"
    pattern, step, fields = found
    target = pattern.format(**fields)
    return (f"{path}: not found; make it first: `snakemake -- {target}` (its rule runs `{step}`; "
            f"{whole} makes every input)")


def require(files: list[str], whole: str = "the tier's Snakemake target") -> None:
    """Refuse, in one line saying what makes it, the first of `files` that is missing."""
    for path in files:
        if not os.path.exists(path):
            raise ValueError(missing_input(path, whole))


def check_metrics(params: dict[str, Any], files: list[str]) -> None:
    """The metrics among a table's or figure's inputs: each its run's own (the run its path names),
    of the training and evaluation settings the params give now (wscat.steps.table.check_training;
    a file recording neither, written by hand, is not checked on them)."""
    from wscat.steps.table import check_training

    metrics = [path for path in files
               if (made_by(path) or ("", "", {}))[0] in (paths.METRICS, paths.EXTRA)]
    if metrics:
        check_training(params, [Path(path) for path in metrics],
                       runs={str(Path(path)): run_of(path) for path in metrics}, unrecorded=True)


def check_validation(params: dict[str, Any], files: list[str]) -> None:
    """The validation files among a figure's inputs (Fig-beta's): each its run's own, measured
    on the training and with the validation settings the params give now (the fingerprints
    `wscat validate` records: wscat.workflow.training_fingerprint, validation_fingerprint),
    naming each file and its Snakemake target; a file recording neither, written by hand, is
    not checked on them (as `check_metrics`)."""
    from wscat.report.figures import _load
    from wscat.steps.table import listed
    from wscat.workflow import training_fingerprint, validation_fingerprint

    stale = []
    for path in files:
        if (made_by(path) or ("",))[0] != paths.VALIDATION:
            continue
        run = run_of(path)
        manifest = _load(path, run).get("manifest") or {}
        found = []
        for what, recorded, now in (
                ("training", (manifest.get("training") or {}).get("fingerprint"),
                 training_fingerprint(params, run.dataset, run.model, run.method)),
                ("validation settings", manifest.get("validation_settings"),
                 validation_fingerprint(params, run.dataset))):
            if recorded is not None and recorded != now:
                found.append(f"{what} {recorded}, the params give {now}")
        if found:
            stale.append((path, run.validation(), ", ".join(found)))
    if stale:
        files, forced = listed(stale, "")
        raise ValueError(f"{len(stale)} validation file(s) were measured on another training or "
                         "with other validation settings (checkpoint, PGD steps, batch, threat) "
                         f"than the params give now: {files}; re-validate them under these "
                         f"params: snakemake --forcerun {forced} -- <this figure>")


def run_table(params: dict[str, Any], *, tier: str, label: str, results: str, tex: Path,
              csv: Path) -> None:
    """One of the paper's tables: LaTeX and a long CSV."""
    from wscat.report.paper_tables import build

    files = paper.table_inputs(params, tier, label, results)
    require(files)
    check_metrics(params, files)
    tex_text, table = build(params, tier, label, results)
    write_texts({csv: table, tex: tex_text})


def run_compare(*, label: str, table_csv: Path, paper_cells: tuple[str, str] | None, tex: Path,
                csv: Path) -> None:
    """A table's companion: our numbers, the paper's, and the difference."""
    from wscat.report.compare import join, render

    check_table_csv(table_csv)
    check_numbers(table_csv)
    rows = join(table_csv, paper_cells)
    tables = sorted({str(row["table"]) for row in rows})
    if label not in tables:
        raise ValueError(f"--label {label}: {table_csv} holds table {', '.join(tables)}; pass "
                         "the label of the table it holds")
    tex_text, table = render(rows, label, paper_cells)
    write_texts({csv: table, tex: tex_text})


def check_table_csv(table_csv: Path) -> None:
    """Refuse (one line) a --table-csv that is missing, no file, or not UTF-8 text."""
    todo = "pass the .csv `wscat paper-table` wrote"
    try:
        require_file(table_csv, f"{table_csv}: not found; {todo}")
    except ValueError as error:
        raise ValueError(f"{str(error).split('; ')[0]}; {todo}") from None
    if not is_text_file(table_csv):
        raise ValueError(f"{table_csv} is not a CSV text file; {todo}")


def check_numbers(table_csv: Path) -> None:
    """Refuse a table CSV whose `mean` or `std` cell is not a number a table holds: a finite
    mean, in [0, 100] for an accuracy (a percentage), >= 0 for a count or seconds; a finite
    std >= 0; an empty std (one seed: no spread) stays empty, an empty mean is refused. The
    file's form (its columns, rows) is `join`'s to check."""
    from wscat.report.cells import EXTRA_METRICS, METRICS, PAPER_MEAN

    with open(table_csv, newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            percent = row.get("metric") in (*METRICS, *EXTRA_METRICS, PAPER_MEAN)
            for column in ("mean", "std"):
                if row.get(column) is None:  # no such column (join says so) or a short row
                    continue
                text = row[column].strip()
                if not text and column == "std":
                    continue
                try:
                    value = float(text)
                except ValueError:
                    value = math.nan
                top = 100 if percent and column == "mean" else math.inf
                if not (math.isfinite(value) and 0 <= value <= top):
                    what = ("a percentage in [0, 100]" if math.isfinite(top)
                            else "a finite number >= 0")
                    shown = f"'{text}'" if text else "empty"
                    raise ValueError(f"{table_csv}, line {reader.line_num}: {column} is {shown}, "
                                     f"not {what}; rebuild the table with `wscat paper-table` (or "
                                     "its Snakemake rule)")


def run_figure(params: dict[str, Any], *, tier: str, figure: str, results: str, out: Path
               ) -> None:
    """One of the paper's figures (.pdf, .png, .csv), from results files only (Fig-similarity
    and Fig-feature read what `wscat analyse` computed)."""
    from wscat.report import figures, robustness_figure

    paper.tier_spec(params, tier)
    if figure not in paper.FIGURES:
        raise ValueError(f"unknown figure '{figure}'; figures: {', '.join(paper.FIGURES)}")
    files = paper.figure_inputs(params, tier, figure, results)
    require(files)
    check_metrics(params, files)
    check_validation(params, files)
    if figure == "Fig-beta":
        figures.beta_figure(params, tier, results, out)
    elif figure == "Fig-unlabel":
        figures.unlabel_figure(params, tier, results, out)
    elif figure == "Fig-similarity":
        figures.similarity_figure(params, tier, results, out)
    elif figure == robustness_figure.NAME:
        robustness_figure.tier_figure(params, tier, results, out)
    else:
        figures.feature_figure(params, tier, results, out)


def run_robustness_curves(params: dict[str, Any], *, experiment: str, results: str, out: Path
                          ) -> None:
    """An experiment's robustness curves (.pdf, .png, .csv; wscat.report.robustness_figure),
    from its runs' metrics files: each there and of the params' settings, as a tier's figure."""
    from wscat.report import robustness_figure
    from wscat.targets import robustness_inputs

    files = robustness_inputs(params, experiment, results)
    require(files, f"`snakemake -- {paths.fill(paths.ROBUSTNESS_PNG, experiment=experiment)}`")
    check_metrics(params, files)
    robustness_figure.experiment_figure(params, experiment, results, out)


def run_index(params: dict[str, Any], *, tier: str, results: str, out: Path) -> None:
    """index.md of a tier's tables and figures; refused, in one line naming what makes it, while
    one of them is missing (an index of files that are not there links nowhere)."""
    require(paper.tier_outputs(params, tier, results))
    write_text(out, index(params, tier, results))


def index(params: dict[str, Any], tier: str, root: str) -> str:
    """A Markdown list of a tier's tables, companions, figures and training curves. Its rebuild
    line names Snakemake's target (results/...), whatever `root` was typed as: the same index
    from `--results $PWD/results` or `--results results`."""
    out = Path(paths.fill(paths.PAPER, root, tier=tier))
    lines = [f"# The paper's tables and figures: tier `{tier}`", "",
             f"Rebuild: `snakemake --cores 2 -- {paths.fill(paths.PAPER_INDEX, tier=tier)}`", ""]
    for path in paper.tier_outputs(params, tier, root):
        lines.append(f"- [{Path(path).relative_to(root).as_posix()}]"
                     f"({os.path.relpath(path, out)})")
    return "\n".join(lines) + "\n"


def run_curves(*, train_log: Path, out: Path, title: str = "") -> None:
    """A run's training curves (OUT.pdf, OUT.png: `figures.curves_files`), titled by its folder
    unless `title` is given; both outputs checked before the log is read or anything written."""
    from wscat.report import figures

    require_file(train_log, f"train log not found: {train_log}; {figures.LOG_HINT}")
    files = figures.curves_files(out)
    guard_outputs({"--train-log": train_log},
                  {f"--out ({path.name})": path for path in files.values()})
    check_writable(*files.values())
    figures.curves(train_log, out, title or str(train_log.parent))
