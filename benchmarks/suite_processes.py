"""Which processes the test suite starts, and what they cost: every Python process the tests start
(Snakemake, its `wscat` jobs, dvc, the scripts), grouped by command, with its count and its
seconds from start to exit. Where CI's time goes beyond what `--durations` says of each test:
a pipeline test's seconds are mostly its jobs', and a tiny job's mostly its imports.

    .venv/bin/python benchmarks/suite_processes.py \\
        --out benchmarks/results/suite-processes-workflow.md [PYTEST ARGS ...]

The pytest arguments default to `make test`'s two workers on tests/workflow (the committed page;
7-8 minutes on the 2-core CI machine). Each process records itself through a `sitecustomize`
module put first on PYTHONPATH (the tests pass the environment on to what they start); a process
that replaces itself (exec) or is killed records nothing. The seconds are wall time under the
suite's own load (two workers, each with its jobs), so they add up to more than the run's wall
time; compare groups within one run. The CPU is named.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from demo_profile import _cpu_model  # noqa: E402 - a sibling script

DEFAULT = ["-q", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", "-p",
           "no:cacheprovider", "tests/workflow"]
# Recorded at exit (atexit, and os._exit, which `wscat` calls to skip the interpreter's teardown),
# by the process that started only: a child forked without exec (tests/workflow/test_bad_input.py
# runs one as `nobody`) records nothing, and a failed write never stops an exit.
SITECUSTOMIZE = '''import atexit, os, sys, time
_start, _pid = time.monotonic(), os.getpid()
def _record(*_):
    if os.getpid() != _pid:
        return
    try:
        with open(os.environ["SUITE_PROCESSES_LOG"], "a") as log:
            log.write(f"{time.monotonic() - _start:.3f}\\t{chr(32).join(sys.argv)[:300]}\\n")
    except (OSError, KeyError):
        pass
atexit.register(_record)
_exit = os._exit
def _fast_exit(code, _exit=_exit):
    try:
        _record()
    finally:
        _exit(code)
os._exit = _fast_exit
'''


def kind(argv: str) -> str:
    """The group of a process: `wscat <command>`, `snakemake` (`-n`: a dry run), `dvc <command>`,
    or the script's name."""
    words = argv.split()
    if not words:
        return "python (no argv)"
    program = Path(words[0]).name
    if program == "-c":
        return "python -c (pytest's workers, other one-liners)"
    if program == "__main__.py" and Path(words[0]).parent.name == "pytest" or program == "pytest":
        return "pytest"
    if program in ("wscat", "__main__.py") and len(words) > 1 and "wscat" in words[0]:
        return f"wscat {words[1]}"
    if program == "__main__.py" and "snakemake" in words[0] or program == "snakemake":
        return "snakemake -n" if {"-n", "--dry-run"} & set(words) else "snakemake"
    if program == "dvc" and len(words) > 1:
        return f"dvc {words[1]}"
    return program


def table(records: list[tuple[float, str]]) -> list[str]:
    """Markdown rows: group, processes, seconds in all, seconds each; the most seconds first."""
    groups: dict[str, list[float]] = collections.defaultdict(list)
    for seconds, argv in records:
        groups[kind(argv)].append(seconds)
    rows = ["| processes | count | seconds, all | seconds, each |", "|---|---:|---:|---:|"]
    for name, times in sorted(groups.items(), key=lambda item: -sum(item[1])):
        rows.append(f"| {name} | {len(times)} | {sum(times):.1f} | {sum(times) / len(times):.2f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the table here (Markdown)")
    args, pytest_args = parser.parse_known_args(argv)
    pytest_args = pytest_args or DEFAULT
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        log = Path(tmp) / "processes.tsv"
        log.touch()
        env = {**os.environ, "SUITE_PROCESSES_LOG": str(log),
               "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))}
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)
        wall = time.monotonic() - start
        records = [(float(line.split("\t", 1)[0]), line.split("\t", 1)[1])
                   for line in log.read_text().splitlines() if "\t" in line]
    records = [r for r in records if kind(r[1]) != "pytest"]  # the run itself
    lines = [f"# The suite's processes: `pytest {' '.join(pytest_args)}`", "",
             f"{datetime.date.today()}, {_cpu_model()}, pytest's exit status {done.returncode}, "
             f"{wall:.0f} s wall; {len(records)} processes recorded, their seconds under the "
             "suite's own load.", "", *table(records), ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
