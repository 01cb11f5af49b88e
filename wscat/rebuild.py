"""A finished table whose inputs have gone missing is rebuilt, inputs first.

Snakemake (since 7.7) leaves a job alone when its outputs exist, even if one of its inputs was
deleted since: it rebuilds a missing file only for a job that runs anyway. A failed or
interrupted evaluation removes its metrics file, so the next `snakemake` (or `make demo`, or
`dvc repro`) would call the old table up to date and rebuild nothing. The table rules therefore
carry a `rebuild` param from `rebuild_token`: it changes when the table exists and one of its
inputs does not, Snakemake re-runs a job whose params changed, and a job that runs gets its
missing inputs built first. The token lives in `.snakemake/wscat-rebuild/`, so it stays the
same once the table is whole again and nothing re-runs twice.
"""
from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from wscat.io import write_text

STATE = Path(".snakemake") / "wscat-rebuild"


class NotRecorded:
    """A param value Snakemake does not record (not a builtin type): a table that never lost an
    input keeps the params it was built with."""

    def __str__(self) -> str:
        return ""


NOT_RECORDED = NotRecorded()
_bumped: dict[str, str | NotRecorded] = {}  # once per Snakemake process, however often the DAG asks


def rebuild_token(outputs: Sequence[str], inputs: Sequence[str], state: Path = STATE,
                  recorded: Callable[[str], bool] = lambda path: True,
                  write: bool = True) -> str | NotRecorded:
    """The `rebuild` param of a job with these outputs and inputs: a new value when an output
    exists and an input is missing (and one line on stderr saying so), else the last value.
    `write=False` (a dry run): the new value is returned but not recorded, so a dry run leaves
    no state behind (an input put back before the real run re-runs nothing).

    `recorded(output)`: whether Snakemake holds a record of it; without one Snakemake compares
    no params (a table restored by `dvc checkout`), so the line says to ask for the file."""
    key = hashlib.sha1("\0".join(outputs).encode()).hexdigest()[:16]
    if key in _bumped:
        return _bumped[key]
    path = state / key
    last = path.read_text().strip() if path.is_file() else ""
    missing = [name for name in inputs if not os.path.exists(name)]
    present = [name for name in outputs if os.path.exists(name)]
    if missing and present:
        more = f" and {len(missing) - 1} more of its inputs are" if len(missing) > 1 else " is"
        cause = (f"wscat: {missing[0]}{more} missing (not built yet: a method or seed added; "
                 "or removed by a failed or interrupted job)")
        if not recorded(present[0]):
            ask = (f"ask for the missing file by name (snakemake -- {missing[0]})"
                   if len(missing) == 1 else f"force it, which builds its inputs first "
                   f"(snakemake --forcerun {present[0]} -- {present[0]})")
            print(f"{cause}, and Snakemake holds no record of {present[0]} (a fresh clone, a "
                  f"DVC --temp or --queue run), so it would call it up to date: {ask}",
                  file=sys.stderr)
            _bumped[key] = f"rebuild {last}" if last else NOT_RECORDED
            return _bumped[key]
        number = int(last) + 1 if last.isdigit() else 1
        if write:
            write_text(path, f"{number}\n")
        print(f"{cause}: re-running {outputs[0]}, which rebuilds them first", file=sys.stderr)
        _bumped[key] = f"rebuild {number}"
        return _bumped[key]
    return f"rebuild {last}" if last else NOT_RECORDED
