"""The Markdown twin of an experiment's table (what the README shows) and the paired comparison
against WSCAT as CSV, LaTeX and Markdown. Numbers come from the same summary as the .tex/.csv."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from wscat.report.paired import (APART_POINTS, APART_RATIO, APART_SE, has_interval, t_quantile,
                                 verdict)
from wscat.report.cells import latex_escape, row_name, shown_cells
from wscat.report.names import display_name


# The interval's false-positive rate at three seeds, as docs/evaluation.md's simulation
# (benchmarks/paired_null.py, 10,000 repetitions a row) found it on the demo's 359 test images.
LEVEL_NORMAL, LEVEL_COLLAPSE = "at most 3.4%", "about 6-7%"
SIMULATED_IMAGES = 359
# test images -> (normal seed effects, collapses): the sizes the simulation ran at
# (`paired_null.py --images N --shapes --repeats 10000`: the CIFAR-10 proxy's 1,000,
# ImageNet32-100's 5,000, CIFAR's 10,000; benchmarks/results/paired-null-N.md). With more images
# the test set adds less noise: normal seeds come to 5% (within the simulation's error of 0.22),
# collapses call more.
LEVELS = {SIMULATED_IMAGES: (LEVEL_NORMAL, LEVEL_COLLAPSE),
          1000: ("at most 4.04%", "up to 27%"),
          5000: ("at most 5.23%", "up to 53%"),
          10000: ("at most 4.98%", "up to 59%")}


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table_markdown(summary: pd.DataFrame, *, methods: Sequence[str],
                   display_names: Mapping[str, str], adversarial: Iterable[str],
                   caption: str, leads: Mapping[str, str] | None = None) -> str:
    """Table 2 as Markdown: mean ± std per (metric, method), the mean alone for one seed; in
    bold the AT method `leads` names for a row (`wscat.report.cells.shown_cells`)."""
    rows = shown_cells(summary, methods, adversarial, leads)
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
    """The paired comparison, one row per method, numbers to two decimals (a bound that would
    print as 0.00 with the decimals that show its sign: `bound`)."""
    records = paired.to_dict("records")
    bounds = {column: ["" if not has_interval(row) else bound(float(row[column]), sign=False)
                       for row in records] for column in ("ci_low", "ci_high")}
    frame = paired.assign(method=paired["method"].map(display_names),
                          reference=paired["reference"].map(display_names),
                          verdict=[verdict(row) for row in records], **bounds)
    return frame.to_csv(index=False, float_format="%.2f", lineterminator="\n")


def bound(value: float, sign: bool = True) -> str:
    """An interval's bound as every output prints it: 2 decimals (with its sign: `sign`), but
    one that would print as 0.00 with as many more decimals as show which side of 0 it lies
    (+0.004, -0.0004), since the verdict and the bold read the bound unrounded: '[+0.00, ...]'
    beside 'higher than WSCAT' and '[-0.00, ...]' beside 'within noise' both happen otherwise.
    A bound of exactly 0 prints 0.00."""
    plus = "+" if sign else ""
    if value == 0:
        return "0.00"
    for places in range(2, 7):
        if round(value, places) != 0:
            return f"{value:{plus}.{places}f}"
    return f"{value:{plus}.0e}"


def _interval(row: Mapping, fmt: str = "[{}, {}]") -> str:
    """The interval as printed (`bound`); '—' where there is none (one seed, or refused:
    `note`)."""
    return (fmt.format(bound(row["ci_low"]), bound(row["ci_high"])) if has_interval(row)
            else "—")


def how_to_read(first: Mapping, reference: str, compared: int = 1, apart: bool = False) -> str:
    """The sentence under every paired comparison of `compared` methods: what the interval is
    (wscat.report.paired), its level, what 'seed s apart' means (where a row says it: `apart`),
    and that the rows are not a joint test."""
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
            f"test images). {_level(k, first['n_images'])} An interval that contains 0 is noise, "
            "not a ranking. "
            "Δ comes from the unrounded accuracies, so it can differ by 0.01 from the difference "
            "of two rounded means."
            + (f" 'Seed s apart': that seed's difference lies farther from the other seeds' mean "
               f"than {APART_RATIO:g} times the largest of their range, {APART_SE:g} standard "
               f"errors of one seed's difference over the test images and {APART_POINTS:g} "
               "points (a collapsed seed?)."
               if apart else "") + _joint(compared, reference))


def _joint(compared: int, reference: str) -> str:
    """The caveat of several rows: each at 95% on its own, not a joint test."""
    if compared < 2:
        return ""
    return (f" The {compared} rows are {compared} comparisons, each at 95% on its own, not a "
            "joint test: with every method equal, the chance that at least one of them reads "
            f"higher or lower than {reference} is larger than one row's, up to {5 * compared}%.")


def _level(k: int, n_images: object = SIMULATED_IMAGES) -> str:
    """What the simulation (benchmarks/paired_null.py, run at three seeds) says of k seeds on
    `n_images` test images: its rates where it ran at that size (LEVELS), else that it did not
    (its rates depend on the size)."""
    if k == 3 and n_images in LEVELS:
        normal, collapse = LEVELS[n_images]
        where = "" if n_images == SIMULATED_IMAGES else f" on {n_images} test images"
        return (f"With three seeds it holds 95% when seed effects are roughly normal (simulated"
                f"{where}: {normal} of equal pairs called different); where one method's seed "
                f"now and then collapses it can call {collapse} of equal pairs different, in "
                "rows that look clean (docs/evaluation.md).")
    if k == 3:
        return ("With three seeds it holds 95% when seed effects are roughly normal; its rates "
                f"were simulated on {', '.join(map(str, list(LEVELS)[:-1]))} and "
                f"{list(LEVELS)[-1]} test images, not on "
                f"{n_images}, and where one method's seed now and then collapses they grow with "
                f"the test set ({', '.join(f'{c} on {n}' for n, (_, c) in LEVELS.items())}; "
                f"`benchmarks/paired_null.py --images {n_images} --shapes`, "
                "docs/evaluation.md).")
    wide = ": with two, t has one degree of freedom and the interval is very wide" if k == 2 else ""
    return (f"Its level is shown by simulation with three seeds (docs/evaluation.md), not with "
            f"{k}{wide}.")


def _any_apart(paired: pd.DataFrame) -> bool:
    return "apart_seed" in paired and bool(paired["apart_seed"].notna().any())


def paired_markdown(paired: pd.DataFrame, display_names: Mapping[str, str]) -> str:
    """The paired comparison as Markdown, with the sentence that says how to read it."""
    if paired.empty:
        return ""
    first = paired.iloc[0]
    reference = display_names[first["reference"]]
    lines = [f"*Paired comparison with {reference}: "
             f"{how_to_read(first, reference, len(paired), _any_apart(paired))}*", "",
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
    k, n_images = int(rows[0]["n_seeds"]), rows[0]["n_images"]
    # docs/evaluation.md's per-attack rates: simulated at three seeds on the demo's test set only
    other = (f"not on {n_images}" if k == 3 else f"not with {k}" if n_images == SIMULATED_IMAGES
             else f"not with {k} on {n_images}")
    level = ("Each cell holds its level by itself" if k == 3 and n_images == SIMULATED_IMAGES
             else f"Each cell's level by itself was simulated with three seeds on "
                  f"{SIMULATED_IMAGES} test images, {other}")
    lines = [f"*Each attack on its own: the same paired interval on that attack's accuracy "
             f"(method − {reference}, {k} seeds, 95%); bold where it excludes 0. {level}; the "
             f"{len(attacks)} attacks are not tested jointly, so one bold cell among many is "
             "weaker evidence than the Mean's interval.*", "",
             _row(["method", *attacks]), _row(["---", *("---:" for _ in attacks)])]
    cells: dict[str, list[str]] = {}  # method -> its cells, in the attacks' order
    for row in rows:
        text = f"{row['delta_mean']:+.2f} {_interval(row)}"
        cells.setdefault(row["method"], []).append(f"**{text}**" if row["excludes_zero"] else text)
    lines += [_row([display_names[method], *texts]) for method, texts in cells.items()]
    return "\n".join(lines) + "\n"


def paired_tex(paired: pd.DataFrame, display_names: Mapping[str, str], *, label: str,
               reference: str = "wscat") -> str:
    """The paired comparison as a LaTeX table (against `reference`, a method key)."""
    reference = display_names.get(reference) or display_name(reference)  # WSCAT when absent
    caption = (how_to_read(paired.iloc[0], reference, len(paired), _any_apart(paired))
               if not paired.empty else
               f"difference in Mean against {reference}: no other adversarially trained method.")
    lines = [r"\begin{table}[t]", r"\centering",
             rf"\caption{{Paired comparison with {latex_escape(reference)}: "
             rf"{latex_escape(caption.replace('−', '-'))}}}",
             rf"\label{{{label}}}", r"\begin{tabular}{lrrl}", r"\toprule",
             r"Method & $\Delta$ Mean & 95\% interval & verdict\\", r"\midrule"]
    for row in paired.to_dict("records"):
        name = latex_escape(display_names[row["method"]])
        lines.append(rf"{name} & ${row['delta_mean']:+.2f}$ & "
                     rf"{_interval(row, '$[{}, {}]$').replace('—', '--')} & "
                     rf"{verdict(row)}\\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
