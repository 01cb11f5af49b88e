"""The paired comparison with WSCAT as a picture: per attack and in Mean, each method's
difference from WSCAT with its interval (`wscat.report.paired`), beside the paper's own
difference where the paper reports both numbers (a forest plot, one panel per column)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from wscat.metrics import ATTACKS

PANELS = (*ATTACKS, "Mean")
NO_INTERVAL = "No interval (one seed, or no usable per-image flags)."  # paired.without_interval


def rows(by_attack: pd.DataFrame | None, mean: pd.DataFrame,
         paper_gaps: Mapping[tuple[str, str], float], names: Mapping[str, str]) -> list[dict]:
    """What the figure plots, one row per (column, method), in the panels' order: ours (the
    paired difference and its interval; none with one seed) and the paper's difference. No
    `by_attack` (no per-image flags to resample): the Mean's rows alone."""
    frame = pd.concat([mean.assign(column="Mean")] if by_attack is None
                      else [by_attack, mean.assign(column="Mean")], ignore_index=True)
    out = []
    for column in PANELS:
        for _, row in frame[frame["column"] == column].iterrows():
            name = names.get(row["method"], row["method"])
            low, high = (None if pd.isna(row[k]) else round(float(row[k]), 4)
                         for k in ("ci_low", "ci_high"))
            out.append({"column": column, "method": name,
                        "difference": round(float(row["delta_mean"]), 4), "ci_low": low,
                        "ci_high": high, "excludes_zero": bool(row["excludes_zero"]),
                        "paper_difference": paper_gaps.get((name, column))})
    return out


def joint_note(plotted: list[dict]) -> str:
    """The figure's caveat: each interval holds 95% on its own; together they are no joint test."""
    n = sum(row["ci_low"] is not None for row in plotted)
    if n < 2:
        return "One interval at 95%." if n else NO_INTERVAL
    return (f"{n} intervals, each at 95% on its own, not a joint test: with every method equal, "
            "a filled point somewhere is far likelier than 5%.")


def paired_figure(plotted: list[dict], prefix: Path, *, reference: str = "WSCAT",
                  paper_note: str = "") -> None:
    """prefix.pdf, .png and .csv (the numbers plotted): one panel per column, a row per method;
    the point is ours (filled where the interval excludes 0), the bar its interval, x the
    paper's difference."""
    from wscat.report.figures import save

    save(draw(plotted, reference=reference, paper_note=paper_note), prefix, plotted)


def draw(plotted: list[dict], *, reference: str = "WSCAT", paper_note: str = "",
         empty: str = "") -> Any:
    """The figure of `paired_figure` (a matplotlib Figure, for the caller to save); with no row
    to plot, its panels stay empty and `empty` says why in the title. The title names the
    paper's marks only where a row has one (an experiment's own table has none)."""
    from wscat.report.figures import plt

    methods = list(dict.fromkeys(row["method"] for row in plotted))
    cells = {(row["column"], row["method"]): row for row in plotted}
    fig, axes = plt.subplots(1, len(PANELS), figsize=(2.3 * len(PANELS), 0.45 * len(methods) + 1.6),
                             sharey=True)
    for ax, column in zip(axes, PANELS):
        ax.axvline(0.0, color="0.6", linewidth=0.8)
        for y, method in enumerate(methods):
            row = cells.get((column, method))
            if row is None:
                continue
            if row["ci_low"] is not None:
                ax.plot([row["ci_low"], row["ci_high"]], [y, y], color="tab:blue", linewidth=1.5)
            ax.plot(row["difference"], y, "o", color="tab:blue",
                    markerfacecolor="tab:blue" if row["excludes_zero"] else "white")
            if row["paper_difference"] is not None:
                ax.plot(row["paper_difference"], y, "x", color="tab:red", markersize=7)
        ax.set_title(column)
        ax.set_yticks(range(len(methods)), methods)
        ax.set_ylim(max(len(methods), 1) - 0.5, -0.5)  # one empty row where none
        ax.set_xlabel(f"method − {reference} (points)")
        ax.grid(axis="x", color="0.9")
    papers = (" and the paper's (x)" if any(row["paper_difference"] is not None
                                            for row in plotted) else "")
    ours = ": ours (o" if papers else " (o"  # "ours" only beside the paper's
    fig.suptitle(f"Difference from {reference}{ours}, 95% paired interval; filled where it "
                 f"excludes 0){papers}{paper_note}\n"
                 f"{empty if empty and not plotted else joint_note(plotted)}", fontsize=9)
    fig.tight_layout()
    return fig
