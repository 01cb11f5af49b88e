"""Run `wscat` steps as subprocesses in dependency order, a few at a time, with progress.

A stand-in for Snakemake's scheduler where Snakemake is not installed (the lent GPU machine):
each job is one command line of the same `wscat` subcommand a Snakemake rule runs.

Like Snakemake, a job whose output files all exist is kept rather than rerun (unless a job it
needs ran again in this call): the steps write their outputs atomically, so a job killed at the
deadline leaves none and a second call runs it again, and the step resumes where it stopped.

Unlike Snakemake's default, the ready jobs start by `priority` (the critical path first: in the
CIFAR-10 proxy, the Mean Teacher labeler -> its pseudo-labels -> WSCAT's training and evaluation),
and a prioritised job that cannot start yet holds back every job of lower priority, so the
critical path is never starved of a slot. `beside` caps how many other jobs share the device
while a job runs (0: it runs alone), and `after` names jobs that must have ended (whatever became
of them) before a job starts: an order, not a dependency. `alongside` names jobs that must have
started (in the same round will do) before a job starts, and whose failure ends it: a step that
reads another's output late, and waits for it (`wscat evaluate --part extra --core-wait` beside
its core evaluation). The order changes timings only: every step is deterministic.

SIGTERM (`timeout`, SLURM's time limit, `scancel`) or Ctrl-C ends a run as its deadline does: the
running steps are killed, nothing new starts, and `run_jobs` returns, so its caller still writes
what finished and a second call continues.
"""
from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REAP_S = 10.0  # how long to wait for the jobs killed at the deadline to end, in all
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# A step's exit status when a stop signal reached it too (`timeout` and Ctrl-C signal the whole
# process group): `wscat` ends 143 on SIGTERM and 130 on Ctrl-C; a plain process dies of it.
STOPPED_CODES = frozenset({143, 130, -signal.SIGTERM, -signal.SIGINT})


@dataclass
class Job:
    """One step: its command, the jobs it waits for, the files it writes, its log, and what
    became of it (`kept`: done by an earlier call, its outputs were there and it did not run)."""

    name: str
    argv: list[str]
    deps: list[str] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    log: Path | None = None
    priority: int = 0  # higher starts first among the ready jobs; > 0 is never starved
    beside: int | None = None  # while it runs, at most this many other jobs run (None: any)
    after: list[str] = field(default_factory=list)  # start only once these have ended
    alongside: list[str] = field(default_factory=list)  # start once these have; end if they fail
    pid: int = 0  # its process, while it runs or after
    status: str = "pending"  # pending, running, done, failed, skipped, killed
    seconds: float = 0.0
    started: float = 0.0
    kept: bool = False


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"


def startable(jobs: list[Job], parallel: int) -> list[Job]:
    """The pending jobs to start now, in the order to start them.

    Ready jobs (every dependency done, every job of `after` ended: done, failed, skipped or
    killed) go by priority, highest first, then in list order. A job
    starts while fewer than `parallel` run, its own `beside` allows as many others, no running
    job's `beside` forbids one more, and every job of its `alongside` has started (or starts in
    this round): a job that waits for another's output never holds the slot that one needs. A
    prioritised job (priority > 0) that cannot start holds back every ready job of lower
    priority, so it gets the next slot that frees.
    """
    by_name = {job.name: job for job in jobs}
    running = [job for job in jobs if job.status == "running"]
    ready = [job for job in jobs if job.status == "pending"
             and all(by_name[d].status == "done" for d in job.deps)
             and all(by_name[a].status not in ("pending", "running") for a in job.after)]
    order = sorted(range(len(ready)), key=lambda i: (-ready[i].priority, i))
    chosen: list[Job] = []
    held = None  # the priority of a prioritised job that had to wait
    for job in (ready[i] for i in order):
        if held is not None and job.priority < held:
            break
        if any(by_name[a].status == "pending" and by_name[a] not in chosen
               for a in job.alongside):
            continue  # not before the job whose output it waits for
        sharing = running + chosen
        if (len(sharing) < parallel and (job.beside is None or len(sharing) <= job.beside)
                and all(other.beside is None or len(sharing) <= other.beside
                        for other in sharing)):
            chosen.append(job)
        elif job.priority > 0 and held is None:
            held = job.priority
    return chosen


def run_jobs(jobs: list[Job], *, parallel: int, say: Callable[[str], None],
             deadline_s: float | None = None, status: Callable[[Job], str] | None = None,
             every_s: float = 30.0, env: dict[str, str] | None = None,
             note: Callable[[], str] | None = None, since: float | None = None) -> list[Job]:
    """Start the jobs whose dependencies are done (`startable`: by priority, then list order), at
    most `parallel` at once.

    A ready job whose `outputs` all exist, and whose dependencies were all kept too, is kept:
    marked done (`kept`, 0 s) without running. A failed job skips the jobs that need it; past
    `deadline_s` the running jobs are killed and nothing new starts, so what finished still comes
    back. `status(job)` adds a note (e.g. the epoch) to the periodic progress line, `note()` one
    about the machine (e.g. the GPU's memory in use). `since` (a `time.monotonic()` reading,
    default now) is where the clock of the progress lines and `deadline_s` start, so a caller
    with set-up of its own can count them from its own start. SIGTERM or Ctrl-C (SIGINT) in
    the main thread stops the run as the deadline does ("killed ... on SIGTERM"); the handlers
    before the call are restored on return.
    """
    stopped: list[str] = []  # the stop signals received, by name
    with _stop_on_signals(stopped):
        return _run(jobs, parallel=parallel, say=say, deadline_s=deadline_s, status=status,
                    every_s=every_s, env=env, note=note, since=since, stopped=stopped)


@contextlib.contextmanager
def _stop_on_signals(stopped: list[str]) -> Iterator[None]:
    """While run_jobs runs, a stop signal is noted in `stopped` instead of ending the runner
    (outside the main thread, where no handler can be set, signals act as before)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: object) -> None:
        stopped.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, note) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(jobs: list[Job], *, parallel: int, say: Callable[[str], None],
         deadline_s: float | None, status: Callable[[Job], str] | None, every_s: float,
         env: dict[str, str] | None, note: Callable[[], str] | None, since: float | None,
         stopped: list[str]) -> list[Job]:
    """run_jobs's loop; `stopped` fills with the names of the stop signals received."""
    by_name = {job.name: job for job in jobs}
    running: dict[str, subprocess.Popen] = {}
    signalled: list[Job] = []  # steps that the stop signal itself ended, before their kill
    last = time.monotonic()
    t0 = last if since is None else since
    while True:
        now = time.monotonic()
        for name, proc in list(running.items()):
            if proc.poll() is None:
                continue
            job = by_name[name]
            del running[name]
            if stopped and _ended(job, proc, now, stopped=True) == "killed":
                signalled.append(job)  # ended by the stop signal: reported as killed below
                continue
            job.seconds = now - job.started
            job.status = "done" if proc.returncode == 0 else "failed"  # an OOM kill too
            say(_line(job, now - t0))
        for name, proc in list(running.items()):  # it would wait for an output never written
            job = by_name[name]
            ended = [a for a in job.alongside if by_name[a].status in ("failed", "killed")]
            if ended:
                proc.kill()
                _reap({name: proc}, say)  # at most REAP_S: a step stuck in the kernel goes on
                del running[name]
                if _ended(job, proc, now) != "killed":
                    say(_line(job, now - t0))
                    continue
                say(f"[{_clock(now - t0)}] killed {name} ({job.seconds:.0f} s): {ended[0]}, "
                    "beside it, did not finish")
        changed = True
        while changed:  # until settled: a skipped or kept job may free one earlier in the list
            changed = False
            for job in jobs:
                if job.status != "pending":
                    continue
                deps = [by_name[d] for d in job.deps + job.alongside]
                if any(dep.status in ("failed", "skipped", "killed") for dep in deps):
                    job.status, changed = "skipped", True
                    say(f"[{_clock(now - t0)}] skipped {job.name} (a step it needs did not finish)")
                elif _keeps(job, deps):
                    job.status, job.kept, changed = "done", True, True
                    say(f"[{_clock(now - t0)}] kept {job.name} (outputs exist)")
        if stopped or (deadline_s is not None and now - t0 > deadline_s):
            why = (f"on {stopped[0]}" if stopped else f"at the {deadline_s:.0f} s deadline")
            if stopped:
                say(f"[{_clock(now - t0)}] {stopped[0]}: stopping; the running steps are "
                    "killed and what finished is kept")
            for proc in running.values():
                proc.kill()
            _reap(running, say)
            for name, proc in running.items():
                job = by_name[name]
                if _ended(job, proc, now, stopped=bool(stopped)) == "killed":
                    signalled.append(job)
                else:  # it had ended as the deadline came: as any ended step
                    say(_line(job, now - t0))
            for job in signalled:
                say(f"[{_clock(now - t0)}] killed {job.name} {why} ({job.seconds:.0f} s)")
            for job in jobs:
                if job.status == "pending":
                    job.status = "skipped"
            return jobs
        for job in startable(jobs, parallel):
            job.log.parent.mkdir(parents=True, exist_ok=True)
            with open(job.log, "w") as handle:
                running[job.name] = subprocess.Popen(job.argv, stdout=handle,
                                                     stderr=subprocess.STDOUT, env=env)
            job.status, job.started = "running", time.monotonic()
            job.pid = running[job.name].pid
            say(f"[{_clock(job.started - t0)}] start {job.name}")
        if not running:
            return jobs
        if now - last >= every_s:
            last = now
            notes = [" ".join(filter(None, [name, status(by_name[name]) if status else ""]))
                     for name in running]
            machine = note() if note else ""
            say(f"[{_clock(now - t0)}] running: {', '.join(notes)}"
                + (f"; {machine}" if machine else ""))
        time.sleep(0.5)


def _line(job: Job, clock_s: float) -> str:
    """The progress line of a step that ended by itself, done or failed."""
    return (f"[{_clock(clock_s)}] {job.status} {job.name} ({job.seconds:.0f} s)"
            + (f"; log {job.log}" if job.status == "failed" else ""))


def _reap(running: dict[str, subprocess.Popen], say: Callable[[str], None],
          timeout_s: float = REAP_S) -> None:
    """Wait for the killed processes to end, so none is left a zombie; at most `timeout_s` for
    them all, so one stuck in the kernel (a hung GPU call) cannot hang the runner past the
    margin its caller keeps after the deadline."""
    until = time.monotonic() + timeout_s
    for name, proc in running.items():
        try:
            proc.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{name} (pid {proc.pid}) had not ended {timeout_s:.0f} s after it was killed")


def _ended(job: Job, proc: subprocess.Popen, now: float, stopped: bool = False) -> str:
    """Record how a step had ended, once reaped, and return it: "done" where it had exited 0
    (its outputs are whole: steps write atomically), "killed" where SIGKILL ended it or, once
    the run is `stopped`, a stop signal did (STOPPED_CODES), else "failed"; its seconds are how
    long it had run."""
    code = proc.returncode
    job.seconds = now - job.started
    job.status = ("killed" if code in (None, -signal.SIGKILL)
                  or (stopped and code in STOPPED_CODES) else
                  "done" if code == 0 else "failed")
    return job.status


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


def echo(*logs: Path) -> Callable[[str], None]:
    """A progress printer: stdout (flushed) and the end of each log file."""
    for log in logs:
        log.parent.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(line, flush=True)
        for log in logs:
            with open(log, "a") as handle:
                handle.write(line + "\n")

    return say


if __name__ == "__main__":
    sys.exit("jobrunner is a module; run benchmarks/cifar10_proxy.py")
