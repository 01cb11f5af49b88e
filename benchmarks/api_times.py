"""Typical times of the Python API: runs docs/api.md's example as written, statement by statement,
in a fresh folder on a params file, then the evaluation's extra part (AA-paper, NRF, the checks),
and writes the seconds of each with the machine that took them.

    .venv/bin/python benchmarks/api_times.py [--params params.yaml] [--threads 1] \\
        [--out benchmarks/results/api-times.md]

docs/api.md quotes its output; tests/unit/test_api_docs.py runs the same block on tiny params.
Run it on a quiet machine: the load average at the start and the end is in the output (the
first run, benchmarks/results/api-times.md, was on a shared machine at a load of ~14 on 2 cores).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import io
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "api.md"
MARKER = "<!-- the example:"  # the Python block after this comment is the one that runs
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def example_code(docs: Path = DOCS) -> str:
    """The Python block that follows MARKER in docs/api.md."""
    text = docs.read_text()
    start = text.index(MARKER)
    found = BLOCK.search(text, start)
    if found is None:
        raise ValueError(f"{docs}: no ```python block after {MARKER!r}")
    return found.group(1)


def run_timed(code: str, namespace: dict) -> list[tuple[str, float]]:
    """Execute `code` statement by statement in `namespace`: (first line, seconds) of each."""
    timings = []
    for statement in ast.parse(code).body:
        compiled = compile(ast.Module(body=[statement], type_ignores=[]), "<docs/api.md>", "exec")
        started = time.perf_counter()
        exec(compiled, namespace)  # noqa: S102 - the documented example, run as written
        first = ast.get_source_segment(code, statement).splitlines()[0]
        timings.append((first, time.perf_counter() - started))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: as the workflow's jobs)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/api-times.md")
    args = parser.parse_args()

    import torch

    from wscat.provenance import machine

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    here = os.getcwd()
    work = Path(tempfile.mkdtemp(prefix="wscat-api-times-"))
    shutil.copy(args.params, work / "params.yaml")
    namespace: dict = {"__name__": "__docs__"}
    printed = io.StringIO()
    try:
        os.chdir(work)
        with contextlib.redirect_stdout(printed):
            timings = run_timed(example_code(), namespace)
            timings += [(f"{line}  # after the example", seconds) for line, seconds in run_timed(
                'api.evaluate_checkpoint(run.checkpoint, params=params, part="extra")\n',
                namespace)]
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    lines = [
        "# Typical times of the Python API (docs/api.md's example)",
        "",
        f"`.venv/bin/python benchmarks/api_times.py --threads {args.threads}` on "
        f"{datetime.date.today()}, params `{args.params.name}`: the example as written, then the "
        "evaluation's extra part.",
        "",
        f"Machine: {machine(torch.device('cpu'))}; load average "
        f"{load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end "
        f"({os.cpu_count()} CPUs).",
        "",
        "| statement | s |",
        "|---|---:|",
        *(f"| `{line}` | {seconds:.1f} |" for line, seconds in timings),
        "",
        "What the example printed:",
        "",
        "```",
        printed.getvalue().rstrip(),
        "```",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines), file=sys.stderr)


if __name__ == "__main__":
    main()
