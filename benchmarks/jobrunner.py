"""Run `wscat` steps as subprocesses in dependency order, a few at a time, with progress.

A stand-in for Snakemake's scheduler where Snakemake is not installed (the lent GPU machine):
each job is one command line of the same `wscat` subcommand a Snakemake rule runs.
"""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Job:
    """One step: its command, the jobs it waits for, its log, and what became of it."""

    name: str
    argv: list[str]
    deps: list[str] = field(default_factory=list)
    log: Path | None = None
    status: str = "pending"  # pending, running, done, failed, skipped, killed
    seconds: float = 0.0
    started: float = 0.0


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"


def run_jobs(jobs: list[Job], *, parallel: int, say: Callable[[str], None],
             deadline_s: float | None = None, status: Callable[[Job], str] | None = None,
             every_s: float = 30.0, env: dict[str, str] | None = None) -> list[Job]:
    """Start every job whose dependencies are done, in list order, at most `parallel` at once.

    A failed job skips the jobs that need it; past `deadline_s` the running jobs are killed and
    nothing new starts, so what finished still comes back. `status(job)` adds a note (e.g. the
    epoch) to the periodic progress line.
    """
    by_name = {job.name: job for job in jobs}
    running: dict[str, subprocess.Popen] = {}
    t0 = last = time.monotonic()
    while True:
        now = time.monotonic()
        for name, proc in list(running.items()):
            if proc.poll() is None:
                continue
            job = by_name[name]
            job.seconds = now - job.started
            job.status = "done" if proc.returncode == 0 else "failed"
            del running[name]
            say(f"[{_clock(now - t0)}] {job.status} {name} ({job.seconds:.0f} s)"
                + (f"; log {job.log}" if job.status == "failed" else ""))
        for job in jobs:
            if job.status == "pending" and any(by_name[d].status in ("failed", "skipped", "killed")
                                               for d in job.deps):
                job.status = "skipped"
                say(f"[{_clock(now - t0)}] skipped {job.name} (a step it needs did not finish)")
        if deadline_s is not None and now - t0 > deadline_s:
            for name, proc in running.items():
                proc.kill()
                by_name[name].status = "killed"
                say(f"[{_clock(now - t0)}] killed {name} at the {deadline_s:.0f} s deadline")
            for job in jobs:
                if job.status == "pending":
                    job.status = "skipped"
            return jobs
        for job in jobs:
            if len(running) >= parallel:
                break
            if job.status == "pending" and all(by_name[d].status == "done" for d in job.deps):
                job.log.parent.mkdir(parents=True, exist_ok=True)
                with open(job.log, "w") as handle:
                    running[job.name] = subprocess.Popen(job.argv, stdout=handle,
                                                         stderr=subprocess.STDOUT, env=env)
                job.status, job.started = "running", time.monotonic()
                say(f"[{_clock(job.started - t0)}] start {job.name}")
        if not running:
            return jobs
        if now - last >= every_s:
            last = now
            notes = [" ".join(filter(None, [name, status(by_name[name]) if status else ""]))
                     for name in running]
            say(f"[{_clock(now - t0)}] running: {', '.join(notes)}")
        time.sleep(0.5)


def tail(path: Path | None, lines: int = 15) -> str:
    """The last lines of a log, for a failure report."""
    if path is None or not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def echo(log: Path) -> Callable[[str], None]:
    """A progress printer: stdout (flushed) and a log file."""
    log.parent.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(line, flush=True)
        with open(log, "a") as handle:
            handle.write(line + "\n")

    return say


if __name__ == "__main__":
    sys.exit("jobrunner is a module; run benchmarks/cifar10_proxy.py")
