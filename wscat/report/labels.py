"""The columns `snakemake --report` shows beside each result: read from the finished output.

Snakemake calls these label functions (wildcards, output) when it builds the report, never
while it builds the DAG; the rules name them in `report(..., labels=...)`.
"""
from __future__ import annotations

import csv
import json
from typing import Any

from wscat.report.cells import METRICS  # [*wscat.metrics.ATTACKS, 'Mean']
from wscat.report.names import display_name as _display_name


def train(wildcards: Any, output: Any) -> dict[str, Any]:
    """A training run: its method, seed, epochs and last validation scores (train_log.csv)."""
    with open(output.log) as handle:
        rows = list(csv.DictReader(handle))
    last = {key: value for row in rows for key, value in row.items() if value}
    robust = next(
        (f"{key[4:].upper()} {last[key]}" for key in ("val_cw", "val_pgd") if key in last), "-")
    return {
        "method": _display_name(wildcards.method),
        "seed": wildcards.seed,
        "epochs": len(rows),
        "val natural": last.get("val_natural", "-"),
        "val robust": robust,
    }


def metrics(wildcards: Any, output: Any) -> dict[str, Any]:
    """A run's test accuracies (%), in the experiment tables' row order."""
    with open(output[0]) as handle:
        accuracy = json.load(handle)["accuracy"]
    order = list(METRICS)
    attacks = sorted(accuracy, key=lambda name: order.index(name) if name in order else len(order))
    return {
        "method": _display_name(wildcards.method),
        "seed": wildcards.seed,
        **{attack: f"{accuracy[attack]:.2f}" for attack in attacks},
    }


def pseudo(wildcards: Any, output: Any) -> dict[str, Any]:
    """A labeler's accuracy on the unlabelled part (%)."""
    with open(output.metrics) as handle:
        accuracy = json.load(handle)["accuracy"]
    return {
        "labeler": _display_name(wildcards.labeler),
        "seed": wildcards.seed,
        "accuracy": f"{accuracy:.2f}",
    }
