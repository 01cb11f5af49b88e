"""What a results table shows, shared by its LaTeX (wscat.report.table) and Markdown
(wscat.report.markdown) forms: the metric rows, their names, the cells as printed, and LaTeX
escaping."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from wscat.metrics import ATTACKS

if TYPE_CHECKING:
    import pandas as pd

METRICS = [*ATTACKS, "Mean"]
# Shown below Mean when every metrics file has them (issue: evaluation a reviewer can trust):
# the paper's AutoAttack variant and NRF. Mean stays the harmonic mean of the five above.
EXTRA_METRICS = ["AA-paper", "NRF"]
# A paper table's CSV row (not shown in its .tex), where every run has AA-paper: the Mean as the
# paper computed it, over its AutoAttack (AA-paper) instead of the standard AA; the companion
# `{label}-vs-paper` puts it beside the paper's Mean (wscat.report.compare).
PAPER_MEAN = "Mean-paper"
ROW_NAMES = {"AA": "AA (standard)", "AA-paper": "AA (paper's variant)"}
_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                   "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                   "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_LATEX_SPECIALS.get(char, char) for char in text)


def shown(value: float) -> float:
    """A mean or std as every table file prints it (.tex, .md, .csv): Python's rounding of the
    exact value to 2 decimals, as `f"{value:.2f}"`. Not numpy's (`np.round`, `round` of a numpy
    float), which rounds value * 100 and put 57.40 for a mean of 57.405000000000001."""
    return round(float(value), 2)


def tex_cell(mean: float, std: float | None, bold: bool = False) -> str:
    """A table's LaTeX cell, ${mean}_{\\pm std}$ (the best result of a row in \\bm); the mean
    alone where there is no spread to show (std None: one seed)."""
    body = rf"\bm{{{mean:.2f}}}" if bold else f"{{{mean:.2f}}}"
    return f"${body}$" if std is None else f"${body}_{{\\pm{std:.2f}}}$"


def row_name(metric: str, metrics: Sequence[str]) -> str:
    """A row's name: 'AA (standard)' and 'AA (paper's variant)' once both AutoAttacks are shown."""
    return ROW_NAMES.get(metric, metric) if len(metrics) > 6 else metric


def shown_cells(summary: pd.DataFrame, methods: Sequence[str], adversarial: Iterable[str]
                ) -> list[tuple[str, list[tuple[float, float | None, bool]]]]:
    """Per metric row, per method: (mean, std) rounded as printed, and whether it is the best
    adversarial-training result of the row (bold; ties included). The std is None for one seed,
    which has no spread (a printed ± 0.00 would claim one of zero)."""
    cells = summary.set_index(["method", "metric"])
    metrics = METRICS + [m for m in EXTRA_METRICS if m in set(summary["metric"])]
    absent = [(m, k) for m in methods for k in metrics if (m, k) not in cells.index]
    if absent:
        raise ValueError(f"summary lacks (method, metric) {absent[0]}")
    adversarial = set(adversarial)
    rows = []
    for metric in metrics:
        printed = [(shown(cells.at[(m, metric), "mean"]),
                    shown(cells.at[(m, metric), "std"]) if cells.at[(m, metric), "n_seeds"] > 1
                    else None) for m in methods]
        best = max((mean for (mean, _), m in zip(printed, methods) if m in adversarial),
                   default=None)
        rows.append((metric, [(mean, std, m in adversarial and mean == best)
                              for (mean, std), m in zip(printed, methods)]))
    return rows
