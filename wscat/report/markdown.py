"""The Markdown twin of an experiment's table (what the README shows) and the paired comparison
against WSCAT as CSV, LaTeX and Markdown. Numbers come from the same summary as the .tex/.csv."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from wscat.report.paired import has_interval, t_quantile, verdict
from wscat.report.cells import latex_escape, row_name, shown_cells


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table_markdown(summary: pd.DataFrame, *, methods: Sequence[str],
                   display_names: Mapping[str, str], adversarial: Iterable[str],
                   caption: str) -> str:
    """Table 2 as Markdown: mean ± std per (metric, method), the mean alone for one seed; the
    best AT method in bold."""
    rows = shown_cells(summary, methods, adversarial)
    metrics = [metric for metric, _ in rows]
    lines = [f"*{caption}*", "", _row(["", *(display_names[m] for m in methods)]),
             _row(["---", *("---:" for _ in methods)])]
    for metric, cells in rows:
        texts = [f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"
                 for mean, std, _ in cells]
        lines.append(_row([row_name(metric, metrics),
                           *(f"**{t}**" if bold else t for t, (_, _, bold) in zip(texts, cells))]))
    return "\n".join(lines) + "\n"


def paired_csv(paired: pd.DataFrame, display_names: Mapping[str, str]) -> str:
    """The paired comparison, one row per method, numbers to two decimals."""
    frame = paired.assign(method=paired["method"].map(display_names),
                          reference=paired["reference"].map(display_names),
                          verdict=[verdict(row) for row in paired.to_dict("records")])
    return frame.to_csv(index=False, float_format="%.2f", lineterminator="\n")


def _interval(row: Mapping, fmt: str = "[{:+.2f}, {:+.2f}]") -> str:
    """The interval as printed; '—' where there is none (one seed, or refused: `note`)."""
    return fmt.format(row["ci_low"], row["ci_high"]) if has_interval(row) else "—"


def how_to_read(first: Mapping, reference: str) -> str:
    """The sentence under every paired comparison: what the interval is (wscat.report.paired)."""
    k = int(first["n_seeds"])
    if str(first.get("note") or "").startswith("no interval:"):  # refused: paired.NotTheTablesMean
        return (f"difference in the table's Mean (method − {reference}), averaged over "
                f"{k} seed(s); {first['note']}.")
    if k < 2:
        return (f"difference in Mean (method − {reference}) on one seed: no interval, since one "
                "seed says nothing of the seed-to-seed spread.")
    return (f"difference in Mean (method − {reference}), averaged over {k} seeds, with a 95% "
            f"interval from Student's t with {k - 1} degrees of freedom on the per-seed "
            f"differences (t = {t_quantile(0.975, k - 1):.2f}), widened by the test-set term "
            f"shared by the seeds ({first['n_bootstrap']} resamples of the {first['n_images']} "
            f"test images). {_level(k)} An interval that contains 0 is noise, not a ranking.")


def _level(k: int) -> str:
    """What the simulation (benchmarks/paired_null.py, run at three seeds) says of k seeds."""
    if k == 3:
        return "It holds its level with three seeds (docs/evaluation.md)."
    wide = ": with two, t has one degree of freedom and the interval is very wide" if k == 2 else ""
    return (f"Its level is shown by simulation with three seeds (docs/evaluation.md), not with "
            f"{k}{wide}.")


def paired_markdown(paired: pd.DataFrame, display_names: Mapping[str, str]) -> str:
    """The paired comparison as Markdown, with the sentence that says how to read it."""
    if paired.empty:
        return ""
    first = paired.iloc[0]
    reference = display_names[first["reference"]]
    lines = [f"*Paired comparison with {reference}: {how_to_read(first, reference)}*", "",
             _row(["method", "Δ Mean", "95% interval", "verdict"]),
             _row(["---", "---:", "---:", "---"])]
    for row in paired.to_dict("records"):
        lines.append(_row([display_names[row["method"]], f"{row['delta_mean']:+.2f}",
                           _interval(row), verdict(row)]))
    return "\n".join(lines) + "\n"


def paired_attacks_markdown(by_attack: pd.DataFrame | None,
                            display_names: Mapping[str, str]) -> str:
    """Each attack on its own (`wscat.report.paired.paired_by_attack`): one row per method, a
    cell per attack with the difference and its interval, bold where the interval excludes 0.
    Nothing where there are no intervals (one seed, or the Mean's comparison refused)."""
    rows = [] if by_attack is None else by_attack.to_dict("records")
    if not any(has_interval(row) for row in rows):
        return ""
    attacks = list(dict.fromkeys(row["column"] for row in rows))
    reference = display_names[rows[0]["reference"]]
    k = int(rows[0]["n_seeds"])
    lines = [f"*Each attack on its own: the same paired interval on that attack's accuracy "
             f"(method − {reference}, {k} seeds, 95%); bold where it excludes 0. Each cell holds "
             f"its level by itself; the {len(attacks)} attacks are not tested jointly, so one bold "
             "cell among many is weaker evidence than the Mean's interval.*", "",
             _row(["method", *attacks]), _row(["---", *("---:" for _ in attacks)])]
    cells: dict[str, list[str]] = {}  # method -> its cells, in the attacks' order
    for row in rows:
        text = f"{row['delta_mean']:+.2f} {_interval(row)}"
        cells.setdefault(row["method"], []).append(f"**{text}**" if row["excludes_zero"] else text)
    lines += [_row([display_names[method], *texts]) for method, texts in cells.items()]
    return "\n".join(lines) + "\n"


def paired_tex(paired: pd.DataFrame, display_names: Mapping[str, str], *, label: str) -> str:
    """The paired comparison as a LaTeX table."""
    reference = display_names[paired.iloc[0]["reference"]] if not paired.empty else "WSCAT"
    caption = (how_to_read(paired.iloc[0], reference) if not paired.empty else
               f"difference in Mean against {reference}: no other adversarially trained method.")
    lines = [r"\begin{table}[t]", r"\centering",
             rf"\caption{{Paired comparison with {latex_escape(reference)}: "
             rf"{latex_escape(caption.replace('−', '-'))}}}",
             rf"\label{{{label}}}", r"\begin{tabular}{lrrl}", r"\toprule",
             r"Method & $\Delta$ Mean & 95\% interval & verdict\\", r"\midrule"]
    for row in paired.to_dict("records"):
        name = latex_escape(display_names[row["method"]])
        lines.append(rf"{name} & ${row['delta_mean']:+.2f}$ & "
                     rf"{_interval(row, '$[{:+.2f}, {:+.2f}]$').replace('—', '--')} & "
                     rf"{verdict(row)}\\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
