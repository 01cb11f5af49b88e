"""The paper's tables and figures of a tier (`wscat paper-table`, `paper-compare`,
`paper-figure`, `paper-index`) and a run's training curves (`wscat curves`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from wscat import paths
from wscat.io import check_writable, guard_outputs, write_text
from wscat.report import paper


def run_table(params: dict[str, Any], *, tier: str, label: str, results: str, tex: Path,
              csv: Path) -> None:
    """One of the paper's tables: LaTeX and a long CSV."""
    from wscat.report.paper_tables import build

    tex_text, table = build(params, tier, label, results)
    write_text(csv, table)
    write_text(tex, tex_text)


def run_compare(*, label: str, table_csv: Path, paper_cells: tuple[str, str] | None, tex: Path,
                csv: Path) -> None:
    """A table's companion: our numbers, the paper's, and the difference."""
    from wscat.report.compare import join, render

    rows = join(table_csv, paper_cells)
    tables = sorted({str(row["table"]) for row in rows})
    if label not in tables:
        raise ValueError(f"--label {label}: {table_csv} holds table {', '.join(tables)}; pass "
                         "the label of the table it holds")
    tex_text, table = render(rows, label, paper_cells)
    write_text(csv, table)
    write_text(tex, tex_text)


def run_figure(params: dict[str, Any], *, tier: str, figure: str, results: str, out: Path
               ) -> None:
    """One of the paper's figures (.pdf, .png, .csv), from results files only (Fig-similarity
    and Fig-feature read what `wscat analyse` computed)."""
    from wscat.report import figures

    paper.tier_spec(params, tier)
    if figure not in paper.FIGURES:
        raise ValueError(f"unknown figure '{figure}'; figures: {', '.join(paper.FIGURES)}")
    if figure == "Fig-beta":
        figures.beta_figure(params, tier, results, out)
    elif figure == "Fig-unlabel":
        figures.unlabel_figure(params, tier, results, out)
    elif figure == "Fig-similarity":
        figures.similarity_figure(params, tier, results, out)
    else:
        figures.feature_figure(params, tier, results, out)


def run_index(params: dict[str, Any], *, tier: str, results: str, out: Path) -> None:
    """index.md of a tier's tables and figures."""
    write_text(out, index(params, tier, results))


def index(params: dict[str, Any], tier: str, root: str) -> str:
    """A Markdown list of a tier's tables, companions, figures and training curves."""
    out = Path(paths.fill(paths.PAPER, root, tier=tier))
    lines = [f"# The paper's tables and figures: tier `{tier}`", "",
             "Rebuild: `snakemake --cores 2 -- " + f"{out}/index.md`", ""]
    for path in paper.tier_outputs(params, tier, root):
        lines.append(f"- [{Path(path).relative_to(root).as_posix()}]"
                     f"({os.path.relpath(path, out)})")
    return "\n".join(lines) + "\n"


def run_curves(*, train_log: Path, out: Path, title: str = "") -> None:
    """A run's training curves (OUT.pdf, OUT.png: `figures.curves_files`), titled by its folder
    unless `title` is given; both outputs checked before the log is read or anything written."""
    from wscat.report import figures

    files = figures.curves_files(out)
    guard_outputs({"--train-log": train_log},
                  {f"--out ({path.name})": path for path in files.values()})
    check_writable(*files.values())
    figures.curves(train_log, out, title or str(train_log.parent))
