"""Which processes the test suite starts, and what they cost: every Python process the tests start
(Snakemake, its `wscat` jobs, dvc, the scripts), grouped by command, with its count, its
seconds from start to exit and the CPU seconds it used itself (user + system, its children not
counted: a Snakemake's own work, not its jobs'), beside the whole run's CPU seconds (every
process, Python or not: git, make, the shell; `RUSAGE_CHILDREN`: a process counts once its
parent waited for it, so a daemon left running does not). Where CI's time goes beyond what `--durations`
says of each test: a pipeline test's seconds are mostly its jobs', and a tiny job's mostly its
imports.

    .venv/bin/python benchmarks/suite_processes.py \\
        --out benchmarks/results/suite-processes.md [PYTEST ARGS ...]

The pytest arguments default to `make test`'s (two workers, the whole suite: the committed page,
~11 minutes on the 2-core CI machine); session 62's suite-processes-workflow.md ran tests/workflow
alone, before the CPU seconds were recorded. Each process records itself through a `sitecustomize`
module put first on PYTHONPATH (the tests pass the environment on to what they start); a process
that replaces itself (exec) or is killed records nothing. The seconds are wall time under the
suite's own load (two workers, each with its jobs), so they add up to more than the run's wall
time; compare groups within one run. The CPU seconds are what two cores have to give: they add up
to at most twice the wall time, and a cut in them is what shortens a CPU-bound run. The CPU is
named.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from demo_profile import _cpu_model  # noqa: E402 - a sibling script

DEFAULT = ["-q", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", "-p",
           "no:cacheprovider", "tests"]
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
            cpu = sum(os.times()[:2])
            worker = sys.argv == ["-c"] and "xdist" in sys.modules  # pytest-xdist's, via execnet
            argv = "xdist-worker" if worker else chr(32).join(sys.argv)
            log.write(f"{time.monotonic() - _start:.3f}\\t{cpu:.3f}\\t{argv[:300]}\\n")
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
    pytest-xdist's workers (recorded as `xdist-worker`), or the script's name."""
    words = argv.split()
    if not words:
        return "python (no argv)"
    program = Path(words[0]).name
    if program == "xdist-worker":
        return "pytest's workers (the tests' own work, collection included)"
    if program == "-c":
        return "python -c (one-liners)"
    if program == "__main__.py" and Path(words[0]).parent.name == "pytest" or program == "pytest":
        return "pytest"
    if program in ("wscat", "__main__.py") and len(words) > 1 and "wscat" in words[0]:
        return f"wscat {words[1]}"
    if program == "__main__.py" and "snakemake" in words[0] or program == "snakemake":
        return "snakemake -n" if {"-n", "--dry-run"} & set(words) else "snakemake"
    if program == "dvc" and len(words) > 1:
        return f"dvc {words[1]}"
    return program


def table(records: list[tuple[float, float, str]]) -> list[str]:
    """Markdown rows: group, processes, seconds in all, seconds each, CPU seconds in all and each;
    the most CPU seconds first."""
    groups: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for seconds, cpu, argv in records:
        groups[kind(argv)].append((seconds, cpu))
    rows = ["| processes | count | seconds, all | seconds, each | CPU seconds, all | CPU seconds, each |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, times in sorted(groups.items(), key=lambda item: -sum(c for _, c in item[1])):
        wall, cpu = sum(w for w, _ in times), sum(c for _, c in times)
        rows.append(f"| {name} | {len(times)} | {wall:.1f} | {wall / len(times):.2f} | {cpu:.1f} "
                    f"| {cpu / len(times):.2f} |")
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
        start, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)
        wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        records = [(float(fields[0]), float(fields[1]), fields[2])
                   for fields in (line.split("\t", 2) for line in log.read_text().splitlines())
                   if len(fields) == 3]
    run_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    records = [r for r in records if kind(r[2]) != "pytest"]  # the run itself
    lines = [f"# The suite's processes: `pytest {' '.join(pytest_args)}`", "",
             f"{datetime.date.today()}, {_cpu_model()}, pytest's exit status {done.returncode}, "
             f"{wall:.0f} s wall, {run_cpu:.0f} CPU seconds in all (pytest and every process it "
             f"started); {len(records)} processes recorded, their seconds under the suite's own "
             f"load, their CPU seconds {sum(r[1] for r in records):.0f} of the run's.", "",
             *table(records), ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
