"""What a results table shows, shared by its LaTeX (wscat.report.table) and Markdown
(wscat.report.markdown) forms: the metric rows, their names, the cells as printed, which are bold
(a lead the paired interval supports, not the highest mean alone), and LaTeX escaping."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
# The captions' words for the bold (`leads`), in .tex, .md and the paper tier's tables.
BOLD_RULE = ("Bold: the highest mean among the AT methods, where its paired 95% interval "
             "against every other AT method excludes 0")
ROW_NAMES = {"AA": "AA (standard)", "AA-paper": "AA (paper's variant)"}
_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                   "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                   "^": r"\textasciicircum{}",
                   # pdflatex's text fonts have no ×, ε, Δ; its OT1 encoding prints < and > as
                   # ¡, ¿
                   "×": r"$\times$", "ε": r"$\varepsilon$", "Δ": r"$\Delta$", "<": r"$<$",
                   ">": r"$>$"}


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
    """A row's name: 'AA (standard)' and 'AA (paper's variant)' once the table shows more than
    the six core rows (an extra: AA-paper or NRF), so that its AA row says which one it is."""
    return ROW_NAMES.get(metric, metric) if len(metrics) > 6 else metric


def bold_caption(why_none: str = "", rows: Sequence[str] = ()) -> str:
    """The caption's sentence on the bold: BOLD_RULE, why no cell can be bold (`bold_leads`),
    and the shown rows that have no paired interval (the extra metrics)."""
    unpaired = [] if why_none else [ROW_NAMES.get(r, r) for r in rows
                                     if r in EXTRA_METRICS]
    return (BOLD_RULE + (f" (none can be here: {why_none})" if why_none else "")
            + (f"; {', '.join(unpaired)}: no paired interval, no bold" if unpaired else "") + ".")


def bold_leads(runs: Sequence[Mapping], methods: Sequence[str], adversarial: Iterable[str]
          ) -> tuple[dict[str, str], str]:
    """(metric -> the AT method bold in that row, why no cell can be bold or ''): the paired
    interval of the row's highest AT mean against every other AT method (`paired.leads`), from the
    runs' per-image flags. None bold with one seed, one AT method or no usable flags."""
    from wscat.report import paired

    contenders = [m for m in methods if m in set(adversarial)]
    runs = [run for run in runs if run["method"] in contenders]
    if len(contenders) < 2:
        return {}, "fewer than two AT methods"
    if len({run["seed"] for run in runs}) < 2:
        return {}, "one seed"
    try:
        flags = paired.correctness(runs)
    except paired.NotTheTablesMean:
        return {}, "the per-image results do not give the table's accuracies"
    except paired.BadFlags:
        raise  # a damaged file: refused, not read as a table without per-image results
    except ValueError:
        return {}, "no per-image results of every run on the same images"
    return paired.leads(flags, contenders), ""


def shown_cells(summary: pd.DataFrame, methods: Sequence[str], adversarial: Iterable[str],
                leads: Mapping[str, str] | None = None
                ) -> list[tuple[str, list[tuple[float, float | None, bool]]]]:
    """Per metric row, per method: (mean, std) rounded as printed, and whether it is bold: the
    AT method `leads` names for the row (`bold_leads`), and the row's highest printed AT mean.
    No bold without `leads`. The std is None for one seed, which has no spread (a printed
    ± 0.00 would claim one of zero)."""
    cells = summary.set_index(["method", "metric"])
    metrics = METRICS + [m for m in EXTRA_METRICS if m in set(summary["metric"])]
    absent = [(m, k) for m in methods for k in metrics if (m, k) not in cells.index]
    if absent:
        raise ValueError(f"summary lacks (method, metric) {absent[0]}")
    adversarial, leads = set(adversarial), leads or {}
    rows = []
    for metric in metrics:
        printed = [(shown(cells.at[(m, metric), "mean"]),
                    shown(cells.at[(m, metric), "std"]) if cells.at[(m, metric), "n_seeds"] > 1
                    else None) for m in methods]
        best = max((mean for (mean, _), m in zip(printed, methods) if m in adversarial),
                   default=None)
        rows.append((metric, [(mean, std, m in adversarial and mean == best
                               and leads.get(metric) == m)
                              for (mean, std), m in zip(printed, methods)]))
    return rows
