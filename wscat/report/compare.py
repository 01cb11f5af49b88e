"""A table's companion: our value, the paper's value and the difference, cell by cell.

Joins a table's long CSV (wscat.report.paper_tables) with the paper's numbers
(wscat/report/reported.csv, a copy of the paper's tables) on table, dataset, model, method and
metric. Only cells the paper reports appear. The paper's AA and Mean came from its own, weaker
AutoAttack: our AA (the standard AutoAttack, marked so) and our AA-paper both stand beside its
AA, and our Mean-paper (over AA-paper) beside its Mean instead of our Mean (over the standard
AA), which stays, marked, where no AA-paper was measured.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from wscat.report import paper
from wscat.report.paper_tables import grid
from wscat.report.cells import PAPER_MEAN, latex_escape

KEYS = ("table", "dataset", "model", "method", "metric")
# Our rows put beside the paper's cell of another metric: its AA and Mean are its variant's.
PAPERS = {"AA-paper": "AA", PAPER_MEAN: "Mean"}
NOTES = {PAPER_MEAN: "over AA-paper, as the paper's Mean",
         "Mean": "over the standard AA, not the paper's variant (no AA-paper measured)",
         # docs/evaluation.md, NRF: ours is L-inf PGD in the eps-ball, theirs an unbounded L2
         "NRF": "L-inf PGD in the eps-ball, not the paper's unbounded L2 attack: not like for "
                "like"}
# Our AA row: the standard AutoAttack, beside the paper's AA from its weaker variant; the note
# names the row that compares like for like where the table has one (AA-paper).
AA_NOTES = {True: "the standard AA, stronger than the paper's variant; AA-paper is like for like",
            False: "the standard AA, stronger than the paper's variant (no AA-paper measured)"}


def _number(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def join(ours_csv: Path, paper_cells: tuple[str, str] | None = None) -> list[dict[str, object]]:
    """Rows (keys, ours, ours_std, paper, paper_std, difference, note) for every cell of our
    table that the paper reports, in our table's order; the paper's Mean beside our Mean-paper
    where the table has it (our Mean then left out), else beside our Mean, noted as over the
    standard AA. `paper_cells`: the paper's (dataset, model) to compare every row with, where
    ours differ (the CIFAR-10 proxy); None: the row's own."""
    with open(ours_csv, newline="") as handle:
        ours = list(csv.DictReader(handle))
    if not ours:
        raise ValueError(f"{ours_csv}: no rows (an empty table CSV); rebuild it with "
                         "`wscat paper-table` (or its Snakemake rule)")
    missing = [k for k in KEYS + ("mean", "std") if k not in ours[0]]
    if missing:
        raise ValueError(f"{ours_csv}: not a wscat paper table CSV (no column {missing[0]})")
    reported = {tuple(row[k] for k in KEYS): row for row in paper.reported()}
    paper_mean = {tuple(row[k] for k in KEYS[:4]) for row in ours if row["metric"] == PAPER_MEAN}
    aa_paper = {tuple(row[k] for k in KEYS[:4]) for row in ours if row["metric"] == "AA-paper"}
    joined = []
    for row in ours:
        if row["metric"] == "Mean" and tuple(row[k] for k in KEYS[:4]) in paper_mean:
            continue  # the paper's Mean is over its AA variant: Mean-paper stands beside it
        # The paper's AA numbers come from its variant: our AA-paper sits beside them too.
        key = {**row, "metric": PAPERS.get(row["metric"], row["metric"])}
        if paper_cells is not None:
            key["dataset"], key["model"] = paper_cells
        theirs = reported.get(tuple(key[k] for k in KEYS))
        if theirs is None:
            continue
        value, reference = _number(row["mean"]), _number(theirs["mean"])
        note = (AA_NOTES[tuple(row[k] for k in KEYS[:4]) in aa_paper] if row["metric"] == "AA"
                else NOTES.get(row["metric"], ""))
        joined.append({**{k: row[k] for k in KEYS}, "ours": value, "ours_std": _number(row["std"]),
                       "paper": reference, "paper_std": _number(theirs["std"]),
                       "difference": None if value is None else round(value - reference, 2),
                       "note": note})
    if not joined:
        raise ValueError(f"{ours_csv}: the paper reports none of these cells (table, dataset, "
                         "model, method, metric must match wscat/report/reported.csv)")
    return joined


def _pm(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "-"
    return f"${mean:.2f}_{{\\pm{std:.2f}}}$" if std is not None else f"${mean:.2f}$"


def render(rows: list[dict[str, object]], label: str,
           paper_cells: tuple[str, str] | None = None) -> tuple[str, str]:
    """(LaTeX, CSV) of the companion of table `label`."""
    out = io.StringIO()
    fields = list(KEYS) + ["ours", "ours_std", "paper", "paper_std", "difference", "note"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    body, previous = [], None
    for row in rows:
        group = (row["dataset"], row["model"], row["method"])
        diff = row["difference"]
        body.append({"rule": previous is not None and group[:2] != previous[:2],
                     "cells": [latex_escape(str(v)) for v in group]
                     + [latex_escape(str(row["metric"])), _pm(row["ours"], row["ours_std"]),
                        _pm(row["paper"], row["paper_std"]),
                        "-" if diff is None else f"${diff:+.2f}$"]})
        previous = group
    against = (f" Paper: {paper_cells[0]}, {paper_cells[1]}." if paper_cells else "")
    tex = grid(caption=f"Ours against the paper, cell by cell, for Table {label} "
                       f"(difference = ours - paper).{against}{_which_aa(rows)}{_which_mean(rows)}"
                       f"{_which_nrf(rows)} "
                       + noise_note(row["ours_std"] for row in rows),
               label=f"{label}-vs-paper", colspec="llll|ccc",
               header=["Dataset", "Model", "Method", "Metric", "Ours", "Paper", r"$\Delta$"],
               rows=body)
    return tex, out.getvalue()


def noise_note(stds: Iterable[float | None]) -> str:
    """The caption's words for the noise a difference from the paper has to clear: the seed
    spread of our numbers (`stds`, None for one seed) and a test set's binomial error."""
    spread = [float(std) for std in stds if std is not None]
    ours = (f"ours is the mean and sample std over seeds, the std over seeds here up to "
            f"{max(spread):.2f} points" if spread else
            "ours is one seed, whose seed-to-seed spread is unmeasured")
    return (f"Noise: {ours}; one accuracy p on N test images has a binomial standard error of "
            "sqrt(p(1 - p)/N): at p = 50%, 0.50 points on 10,000 images (CIFAR's test sets), "
            "0.71 on 5,000 (ImageNet32-100's), 1.58 on 1,000 (the CIFAR-10 proxy's). A "
            "difference from the paper inside that noise is not a finding.")


def _which_aa(rows: list[dict[str, object]]) -> str:
    """The caption's words for our AA row: the standard AutoAttack, stronger than the paper's
    variant its AA numbers came from; AA-paper, where the table has it, compares like for like."""
    metrics = {row["metric"] for row in rows}
    if "AA" not in metrics:
        return ""
    return (" AA: ours is the standard AutoAttack, stronger than the paper's released variant "
            "that gave its AA numbers, so its difference also holds the gap between the two "
            + ("AutoAttacks; AA-paper, ours in the paper's variant, stands beside the same "
               "number." if "AA-paper" in metrics else "AutoAttacks (no AA-paper measured)."))


def _which_nrf(rows: list[dict[str, object]]) -> str:
    """The caption's words for an NRF row: another attack than the paper's, not like for like."""
    if not any(row["metric"] == "NRF" for row in rows):
        return ""
    return (" NRF: ours is L-inf PGD in the eps-ball (docs/evaluation.md), the paper's an "
            "unbounded L2 attack, so its difference is not like for like.")


def _which_mean(rows: list[dict[str, object]]) -> str:
    """The caption's words for the Mean beside the paper's: ours over AA-paper, as the paper's
    (Mean-paper), or, where no AA-paper was measured, ours over the standard AutoAttack."""
    metrics = {row["metric"] for row in rows}
    words = ""
    if PAPER_MEAN in metrics:
        words += (f" {PAPER_MEAN}: our harmonic mean of Natural, FGSM, PGD, CW and AA (paper's "
                  "variant) per seed, mean over seeds, beside the paper's Mean, which was "
                  "computed over that AutoAttack.")
    if "Mean" in metrics:
        words += (" Mean: ours is over the standard AutoAttack (no AA-paper measured), not the "
                  "paper's variant, so its difference also holds the gap between the two "
                  "AutoAttacks.")
    return words
