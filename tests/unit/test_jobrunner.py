"""benchmarks/jobrunner.py's order of starting steps (`startable`), on fake steps: no processes,
no torch. The CIFAR-10 proxy's own graph is checked in tests/workflow/test_cifar10_proxy.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import jobrunner  # noqa: E402
from jobrunner import Job, run_jobs, startable  # noqa: E402


def jobs_of(*specs: tuple) -> list[Job]:
    """Jobs from (name, deps, priority, beside, status) tuples."""
    return [Job(name, [], deps, priority=priority, beside=beside, status=status)
            for name, deps, priority, beside, status in specs]


def names(jobs: list[Job]) -> list[str]:
    return [job.name for job in jobs]


def simulate(jobs: list[Job], parallel: int, seconds: dict[str, float]
             ) -> dict[str, tuple[float, float]]:
    """Start and end of every job when each takes `seconds[name]`, scheduled by `startable`."""
    clock, times = 0.0, {}
    while any(job.status != "done" for job in jobs):
        for job in startable(jobs, parallel):
            job.status, times[job.name] = "running", (clock, clock + seconds[job.name])
        running = [job for job in jobs if job.status == "running"]
        assert running, "nothing runs and nothing can start: the schedule is stuck"
        clock = min(times[job.name][1] for job in running)
        for job in running:
            if times[job.name][1] == clock:
                job.status = "done"
    return times


def test_ready_jobs_start_by_priority_then_in_list_order() -> None:
    jobs = jobs_of(("a", [], 0, None, "pending"), ("b", [], 5, None, "pending"),
                   ("c", [], 0, None, "pending"), ("d", [], 5, None, "pending"),
                   ("e", ["a"], 9, None, "pending"))
    assert names(startable(jobs, 3)) == ["b", "d", "a"]  # e waits for a
    assert names(startable(jobs, 10)) == ["b", "d", "a", "c"]
    jobs[0].status = "done"
    assert names(startable(jobs, 1)) == ["e"]


def test_a_prioritised_job_that_must_wait_holds_back_the_lower_ones() -> None:
    """No free slot for the labeler: nothing of lower priority takes the next one."""
    jobs = jobs_of(("x", [], 0, None, "running"), ("y", [], 0, None, "running"),
                   ("labeler", [], 5, None, "pending"), ("other", [], 0, None, "pending"))
    assert startable(jobs, 2) == []
    jobs[0].status = "done"
    assert names(startable(jobs, 2)) == ["labeler"]
    # A job of priority 0 that cannot start holds nothing back.
    jobs = jobs_of(("x", [], 0, 0, "running"), ("p", [], 0, None, "pending"),
                   ("q", [], 0, None, "pending"))
    assert startable(jobs, 4) == []


def test_beside_caps_what_shares_the_device() -> None:
    # The labeler alone (beside 0): it waits for the running job, and holds the others back.
    jobs = jobs_of(("x", [], 0, None, "running"), ("labeler", [], 5, 0, "pending"),
                   ("other", [], 0, None, "pending"))
    assert startable(jobs, 4) == []
    jobs[0].status = "done"
    assert names(startable(jobs, 4)) == ["labeler"]
    jobs[1].status = "running"
    assert startable(jobs, 4) == []
    # beside 2: two others may run next to it, however many slots there are.
    jobs = jobs_of(("labeler", [], 5, 2, "running"), *[(n, [], 0, None, "pending")
                                                       for n in "abcd"])
    assert names(startable(jobs, 6)) == ["a", "b"]


def proxy_like(beside: int | None) -> list[Job]:
    """The shape of the CIFAR-10 proxy's graph: split; the Mean Teacher chain (priority 60), the
    Standard -> RST chain (15); TRADES, WSCAT-sup and the evaluations (0)."""
    chain = {"mt": 60, "pseudo mt": 60, "wscat": 60, "eval wscat": 60, "std": 15,
             "pseudo std": 15, "rst": 15, "eval rst": 15}
    deps = {"split": [], "std": ["split"], "pseudo std": ["std"], "mt": ["split"],
            "pseudo mt": ["mt"], "trades": ["split"], "sup": ["split"],
            "rst": ["pseudo std"], "wscat": ["pseudo mt"], "eval std": ["std"],
            "eval mt": ["mt"], "eval trades": ["trades"], "eval sup": ["sup"],
            "eval rst": ["rst"], "eval wscat": ["wscat"]}
    return [Job(name, [], needs, priority=chain.get(name, 0),
                beside=beside if name in ("mt", "pseudo mt") else None)
            for name, needs in deps.items()]


SECONDS = {"split": 5, "std": 40, "pseudo std": 8, "mt": 90, "pseudo mt": 7, "trades": 280,
           "sup": 290, "rst": 280, "wscat": 280, "eval std": 30, "eval mt": 30,
           "eval trades": 100, "eval sup": 100, "eval rst": 100, "eval wscat": 100}


def test_the_critical_chain_is_never_starved() -> None:
    """However few the slots, each step of the Mean Teacher chain starts the moment the step it
    needs ends."""
    for parallel in (1, 2, 3, 6):
        for beside in (None, 0, 2):
            times = simulate(proxy_like(beside), parallel, SECONDS)
            for before, after in (("split", "mt"), ("mt", "pseudo mt"),
                                  ("pseudo mt", "wscat"), ("wscat", "eval wscat")):
                assert times[after][0] == times[before][1], (parallel, beside, after)


def most_beside(times: dict[str, tuple[float, float]], name: str) -> int:
    """The most other jobs running at once while `name` runs."""
    start, end = times[name]
    instants = [start] + [s for s, _ in times.values() if start < s < end]
    return max(sum(1 for other, (s, e) in times.items() if other != name and s <= t < e)
               for t in instants)


def test_beside_keeps_the_labeler_alone_or_with_few() -> None:
    for beside in (0, 2):
        times = simulate(proxy_like(beside), 6, SECONDS)
        assert most_beside(times, "mt") == beside and most_beside(times, "pseudo mt") <= beside
    assert most_beside(simulate(proxy_like(None), 6, SECONDS), "mt") > 2  # no cap: what is ready


def test_a_job_after_others_waits_until_they_end_whatever_became_of_them() -> None:
    """`after` orders without depending: the evaluation waits while a training is pending or
    runs, and starts once every one has ended, a failed one too; it holds nothing back."""
    jobs = [Job("train a", []), Job("train b", [], status="running"),
            Job("evaluate a", [], ["train a"], after=["train a", "train b"], priority=2),
            Job("curves a", [], ["train a"])]
    assert names(startable(jobs, 8)) == ["train a"]
    jobs[0].status = "done"
    assert names(startable(jobs, 8)) == ["curves a"]  # b still trains: the evaluation waits
    jobs[1].status = "failed"
    assert names(startable(jobs, 8)) == ["evaluate a", "curves a"]


def test_a_step_killed_at_the_deadline_keeps_how_long_it_ran(tmp_path: Path) -> None:
    """The summary's seconds of a killed step are the time it had run, not 0 (issue 21's cut
    runs compare the Mean Teacher and WSCAT trainings' seconds between calls)."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    jobs = [Job("train slow", sleeper, log=tmp_path / "slow.log"),
            Job("evaluate slow", sleeper, ["train slow"], log=tmp_path / "eval.log")]
    lines: list[str] = []
    run_jobs(jobs, parallel=2, say=lines.append, deadline_s=1.0)
    assert [job.status for job in jobs] == ["killed", "skipped"]
    assert 1.0 <= jobs[0].seconds < 30 and jobs[1].seconds == 0
    assert any(line.endswith(f"({jobs[0].seconds:.0f} s)") and "killed train slow" in line
               for line in lines)


def test_the_deadline_and_clock_count_from_since(tmp_path: Path) -> None:
    """`since` moves the clock's start: a caller's 2 s of set-up count against its deadline, and
    the kill line names the deadline the user gave, not what was left of it."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    jobs = [Job("train slow", sleeper, log=tmp_path / "slow.log")]
    lines: list[str] = []
    started = time.monotonic() - 2.0
    run_jobs(jobs, parallel=1, say=lines.append, deadline_s=3.0, since=started)
    assert jobs[0].status == "killed" and 1.0 <= jobs[0].seconds < 2.9
    assert lines[0].startswith("[00:02] start train slow")
    assert any("killed train slow at the 3 s deadline" in line for line in lines)


def record_popens(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen]:
    """Every process run_jobs starts from now on, in order (its subprocess.Popen recorded)."""
    started: list[subprocess.Popen] = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(jobrunner.subprocess, "Popen", Recorded)
    return started


def test_steps_killed_at_the_deadline_are_reaped(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed step is waited for, as the other kill path does: no zombie is left, and a step
    still ending cannot be mistaken for one gone."""
    started = record_popens(monkeypatch)
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    jobs = [Job(name, sleeper, log=tmp_path / f"{name}.log") for name in ("a", "b")]
    run_jobs(jobs, parallel=2, say=[].append, deadline_s=0.5)
    assert [job.status for job in jobs] == ["killed", "killed"] and len(started) == 2
    assert all(proc.returncode is not None for proc in started)


UNPOLLED = "# unpolled"  # in a job's command line: run_jobs's polls never see it end


def unpolled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose command line holds UNPOLLED looks running to run_jobs's polls (as one
    that exits between the last poll and the kill) until it is killed and reaped."""
    class Unpolled(subprocess.Popen):
        def poll(self) -> int | None:  # type: ignore[override]
            if UNPOLLED in " ".join(self.args):
                return self.returncode  # None until wait() reaps it
            return super().poll()

        def send_signal(self, sig: int) -> None:  # an exited process is a zombie: no effect
            os.kill(self.pid, sig)

    monkeypatch.setattr(jobrunner.subprocess, "Popen", Unpolled)


@pytest.mark.parametrize("code, status", [(0, "done"), (3, "failed")])
def test_a_step_that_had_ended_as_the_deadline_came_is_not_recorded_killed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, status: str) -> None:
    """A step that exited as the deadline came keeps how it ended: exit 0 is "done" (its
    outputs are whole, and the next call keeps it), not "killed"; a real kill stays "killed"."""
    unpolled(monkeypatch)
    quick = [sys.executable, "-c", f"raise SystemExit({code})  {UNPOLLED}"]
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    jobs = [Job("train quick", quick, log=tmp_path / "quick.log"),
            Job("train slow", sleeper, log=tmp_path / "slow.log")]
    lines: list[str] = []
    run_jobs(jobs, parallel=2, say=lines.append, deadline_s=1.5)
    assert [job.status for job in jobs] == [status, "killed"]
    assert any(f"] {status} train quick (" in line for line in lines)
    assert any("killed train slow at the 2 s deadline" in line for line in lines)
    assert not any("killed train quick" in line for line in lines)


def test_a_step_that_had_ended_as_its_partner_failed_is_not_recorded_killed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An extra part that exited 0 as its core part failed is "done", not "killed"."""
    unpolled(monkeypatch)
    jobs = [Job("evaluate core", [sys.executable, "-c",
                                  "import time; time.sleep(1); raise SystemExit(1)"],
                log=tmp_path / "core.log"),
            Job("evaluate extra", [sys.executable, "-c", f"pass  {UNPOLLED}"],
                alongside=["evaluate core"], log=tmp_path / "extra.log")]
    lines: list[str] = []
    run_jobs(jobs, parallel=2, say=lines.append, deadline_s=30.0)
    assert [job.status for job in jobs] == ["failed", "done"]
    assert any("] done evaluate extra (" in line for line in lines)
    assert not any("killed evaluate extra" in line for line in lines)


def test_a_killed_step_that_does_not_end_cannot_hang_the_runner() -> None:
    class Stuck:
        pid = 4242

        def wait(self, timeout: float | None = None) -> int:
            raise subprocess.TimeoutExpired("train", timeout or 0)

    lines: list[str] = []
    jobrunner._reap({"train": Stuck()}, lines.append)  # type: ignore[dict-item]
    assert lines == ["train (pid 4242) had not ended 10 s after it was killed"]


def test_a_job_alongside_another_starts_with_it_and_never_before() -> None:
    """`alongside`: the extra part starts in the round its core part starts, or later; never
    first, so it cannot hold the slot the core part needs."""
    def fresh() -> list[Job]:
        return [Job("evaluate a", [], ["train a"], priority=2),
                Job("extra a", [], ["train a"], priority=2, alongside=["evaluate a"]),
                Job("train a", [], status="done"), Job("curves a", [], ["train a"])]

    assert names(startable(fresh(), 8)) == ["evaluate a", "extra a", "curves a"]
    assert names(startable(fresh(), 1)) == ["evaluate a"]  # one slot: the core part takes it
    jobs = fresh()
    jobs[0].status = "running"
    assert names(startable(jobs, 2)) == ["extra a"]
    jobs = fresh()
    jobs[0].beside = 0  # the core part must run alone: the extra part waits for it to end
    assert names(startable(jobs, 8)) == ["evaluate a"]
    jobs[0].status = "running"
    assert names(startable(jobs, 8)) == []
    jobs[0].status = "done"
    assert names(startable(jobs, 8)) == ["extra a", "curves a"]


def test_a_job_whose_partner_fails_is_ended_and_a_pending_one_skipped(tmp_path: Path) -> None:
    """The extra part waits for its core part's file: if the core part fails, the runner ends
    the extra part at once rather than let it wait out its --core-wait."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    failing = [sys.executable, "-c", "import time; time.sleep(1); raise SystemExit(3)"]
    jobs = [Job("evaluate a", failing, log=tmp_path / "a.log"),
            Job("extra a", sleeper, alongside=["evaluate a"], log=tmp_path / "xa.log"),
            Job("evaluate b", failing, ["evaluate a"], log=tmp_path / "b.log"),
            Job("extra b", sleeper, alongside=["evaluate b"], log=tmp_path / "xb.log")]
    lines: list[str] = []
    run_jobs(jobs, parallel=4, say=lines.append, deadline_s=50.0)
    assert [job.status for job in jobs] == ["failed", "killed", "skipped", "skipped"]
    assert jobs[1].seconds < 30  # ended when its partner failed, not at the deadline
    assert any("killed extra a" in line and "evaluate a, beside it, did not finish" in line
               for line in lines), lines


# A runner in its own process (its own session, so a signal to its group spares pytest's): a
# step that ends at once, one that runs until stopped, and one that needs it; when run_jobs
# returns it prints each step's status and what its handlers are again, then "after" (its
# caller's writes: cifar10_proxy.py's summary and tarball).
RUNNER = """
import json, signal, sys, time
from pathlib import Path
sys.path.insert(0, {benchmarks!r})
from jobrunner import Job, echo, run_jobs
step = {step!r}
quick = [sys.executable, "-c", "pass"]
jobs = [Job("train quick", quick, log=Path({log!r}, "quick.log")),
        Job("train slow", [sys.executable, "-c", step], ["train quick"], log=Path({log!r}, "slow.log")),
        Job("evaluate slow", quick, ["train slow"], log=Path({log!r}, "eval.log"))]
before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
run_jobs(jobs, parallel=2, say=echo(), deadline_s=60.0, every_s=0.5)
restored = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
print(json.dumps({{"status": [job.status for job in jobs], "restored": restored,
                   "seconds": jobs[1].seconds}}), flush=True)
print("after", flush=True)
"""
# As `wscat` does: SIGTERM ends the step with 143 (Ctrl-C: 130); "ready" once it is set.
WSCAT_LIKE = ("import signal, sys, time; "
              "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143)); "
              "signal.signal(signal.SIGINT, lambda *a: sys.exit(130)); "
              "open({ready!r}, 'w').close(); time.sleep(60)")


def stopped_run(tmp_path: Path, sig: int, group: bool, step: str | None = None
                ) -> tuple[dict[str, Any], list[str], subprocess.CompletedProcess]:
    """Start RUNNER, wait until its slow step is ready, send `sig` to the runner alone or (as
    `timeout` and Ctrl-C do) to its whole process group, and return its printed result, its
    progress lines and the process."""
    import json
    import signal

    ready = tmp_path / "ready"
    step = step or WSCAT_LIKE.format(ready=str(ready))
    code = RUNNER.format(benchmarks=str(ROOT / "benchmarks"), step=step, log=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        until = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < until and proc.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), "the slow step never started"
        os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = out.splitlines()
    result = json.loads(next(line for line in lines if line.startswith("{")))
    return result, lines, subprocess.CompletedProcess(proc.args, proc.returncode, out)


@pytest.mark.parametrize("name, group", [("SIGTERM", True), ("SIGTERM", False),
                                         ("SIGINT", True)])
def test_a_stop_signal_ends_the_run_as_the_deadline_does(tmp_path: Path, name: str,
                                                         group: bool) -> None:
    """SIGTERM (`timeout`, SLURM, `kill`) or Ctrl-C: the running step is killed, the one after
    it skipped, a finished one stays done, and run_jobs returns, so its caller still writes
    what finished (issue 21's call stopped by `timeout` returned nothing); its handlers are put
    back. Whether the step got the signal too (exit 143/130) or not (killed by the runner)."""
    import signal

    result, lines, proc = stopped_run(tmp_path, getattr(signal, name), group)
    assert proc.returncode == 0 and lines[-1] == "after", proc.stdout
    assert result["status"] == ["done", "killed", "skipped"], proc.stdout
    assert result["restored"] and result["seconds"] > 0
    assert any(f"{name}: stopping" in line for line in lines), lines
    assert any(f"killed train slow on {name} (" in line for line in lines), lines
    assert not any("failed" in line for line in lines), lines


def test_a_step_ending_143_with_no_stop_signal_has_failed(tmp_path: Path) -> None:
    """Only a stop signal makes an exit status of 143 or 130 "killed": a step that exits so of
    its own accord failed, and the steps after it are skipped."""
    jobs = [Job("train a", [sys.executable, "-c", "raise SystemExit(143)"],
                log=tmp_path / "a.log"),
            Job("evaluate a", [sys.executable, "-c", "pass"], ["train a"],
                log=tmp_path / "b.log")]
    lines: list[str] = []
    run_jobs(jobs, parallel=2, say=lines.append, deadline_s=30.0)
    assert [job.status for job in jobs] == ["failed", "skipped"]
    assert any("] failed train a (" in line for line in lines), lines


def test_a_step_killed_from_outside_with_no_stop_signal_has_failed(tmp_path: Path) -> None:
    """A step SIGKILLed by something else (the kernel's OOM killer) while the run goes on is
    "failed", with its line and log, as before stop signals were handled: not a silent
    "killed"."""
    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    jobs = [Job("train a", killed, log=tmp_path / "a.log"),
            Job("evaluate a", [sys.executable, "-c", "pass"], ["train a"],
                log=tmp_path / "b.log")]
    lines: list[str] = []
    run_jobs(jobs, parallel=2, say=lines.append, deadline_s=30.0)
    assert [job.status for job in jobs] == ["failed", "skipped"]
    assert any("] failed train a (" in line and "log " in line for line in lines), lines
