"""Run `wscat` steps as subprocesses in dependency order, a few at a time, with progress.

A stand-in for Snakemake's scheduler where Snakemake is not installed (the lent GPU machine):
each job is one command line of the same `wscat` subcommand a Snakemake rule runs.

Like Snakemake, a job whose output files all exist is kept rather than rerun (unless a job it
needs ran again in this call): the steps write their outputs atomically, so a job killed at the
deadline leaves none and a second call runs it again, and the step resumes where it stopped.
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
    """One step: its command, the jobs it waits for, the files it writes, its log, and what
    became of it (`kept`: done by an earlier call, its outputs were there and it did not run)."""

    name: str
    argv: list[str]
    deps: list[str] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    log: Path | None = None
    status: str = "pending"  # pending, running, done, failed, skipped, killed
    seconds: float = 0.0
    started: float = 0.0
    kept: bool = False


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"


def run_jobs(jobs: list[Job], *, parallel: int, say: Callable[[str], None],
             deadline_s: float | None = None, status: Callable[[Job], str] | None = None,
             every_s: float = 30.0, env: dict[str, str] | None = None) -> list[Job]:
    """Start every job whose dependencies are done, in list order, at most `parallel` at once.

    A ready job whose `outputs` all exist, and whose dependencies were all kept too, is kept:
    marked done (`kept`, 0 s) without running. A failed job skips the jobs that need it; past
    `deadline_s` the running jobs are killed and nothing new starts, so what finished still comes
    back. `status(job)` adds a note (e.g. the epoch) to the periodic progress line.
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
        changed = True
        while changed:  # until settled: a skipped or kept job may free one earlier in the list
            changed = False
            for job in jobs:
                if job.status != "pending":
                    continue
                deps = [by_name[d] for d in job.deps]
                if any(dep.status in ("failed", "skipped", "killed") for dep in deps):
                    job.status, changed = "skipped", True
                    say(f"[{_clock(now - t0)}] skipped {job.name} (a step it needs did not finish)")
                elif _keeps(job, deps):
                    job.status, job.kept, changed = "done", True, True
                    say(f"[{_clock(now - t0)}] kept {job.name} (outputs exist)")
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


def _keeps(job: Job, deps: list[Job]) -> bool:
    """Whether a pending job is done already: its dependencies were kept (none ran again in this
    call, which would make its outputs stale) and every one of its outputs exists."""
    return (bool(job.outputs) and all(dep.kept for dep in deps)
            and all(Path(path).exists() for path in job.outputs))


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
