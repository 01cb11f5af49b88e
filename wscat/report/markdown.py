"""The Markdown twin of an experiment's table (what the README shows) and the paired comparison
against WSCAT as CSV, LaTeX and Markdown. Numbers come from the same summary as the .tex/.csv."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from wscat.report.paired import verdict
from wscat.report.cells import latex_escape, row_name, shown_cells


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table_markdown(summary: pd.DataFrame, *, methods: Sequence[str],
                   display_names: Mapping[str, str], adversarial: Iterable[str],
                   caption: str) -> str:
    """Table 2 as Markdown: mean ± std per (metric, method); the best AT method in bold."""
    rows = shown_cells(summary, methods, adversarial)
    metrics = [metric for metric, _ in rows]
    lines = [f"*{caption}*", "", _row(["", *(display_names[m] for m in methods)]),
             _row(["---", *("---:" for _ in methods)])]
    for metric, cells in rows:
        texts = [f"{mean:.2f} ± {std:.2f}" for mean, std, _ in cells]
        lines.append(_row([row_name(metric, metrics),
                           *(f"**{t}**" if bold else t for t, (_, _, bold) in zip(texts, cells))]))
    return "\n".join(lines) + "\n"


def paired_csv(paired: pd.DataFrame, display_names: Mapping[str, str]) -> str:
    """The paired comparison, one row per method, numbers to two decimals."""
    frame = paired.assign(method=paired["method"].map(display_names),
                          reference=paired["reference"].map(display_names),
                          verdict=[verdict(row) for row in paired.to_dict("records")])
    return frame.to_csv(index=False, float_format="%.2f", lineterminator="\n")


def paired_markdown(paired: pd.DataFrame, display_names: Mapping[str, str]) -> str:
    """The paired comparison as Markdown, with the sentence that says how to read it."""
    if paired.empty:
        return ""
    first = paired.iloc[0]
    lines = [f"*Paired comparison with {display_names[first['reference']]}: difference in Mean "
             f"(method − {display_names[first['reference']]}), 95% interval of a paired bootstrap "
             f"over the {first['n_images']} test images and {first['n_seeds']} seeds "
             f"({first['n_bootstrap']} draws). An interval that contains 0 is noise, not a "
             "ranking.*", "", _row(["method", "Δ Mean", "95% interval", "verdict"]),
             _row(["---", "---:", "---:", "---"])]
    for row in paired.to_dict("records"):
        lines.append(_row([display_names[row["method"]], f"{row['delta_mean']:+.2f}",
                           f"[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]", verdict(row)]))
    return "\n".join(lines) + "\n"


def paired_tex(paired: pd.DataFrame, display_names: Mapping[str, str], *, label: str) -> str:
    """The paired comparison as a LaTeX table."""
    reference = display_names[paired.iloc[0]["reference"]] if not paired.empty else "WSCAT"
    lines = [r"\begin{table}[t]", r"\centering",
             rf"\caption{{Difference in Mean against {latex_escape(reference)} (method minus "
             rf"{latex_escape(reference)}) with the 95\% interval of a paired bootstrap over test "
             r"images and seeds; an interval containing 0 is within noise.}",
             rf"\label{{{label}}}", r"\begin{tabular}{lrrl}", r"\toprule",
             r"Method & $\Delta$ Mean & 95\% interval & verdict\\", r"\midrule"]
    for row in paired.to_dict("records"):
        lines.append(rf"{latex_escape(display_names[row['method']])} & ${row['delta_mean']:+.2f}$ & "
                     rf"$[{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]$ & {verdict(row)}\\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
