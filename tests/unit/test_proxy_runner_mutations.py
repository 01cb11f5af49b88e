"""Mutation tests for benchmarks/jobrunner.py and benchmarks/cifar10_proxy.py (the CIFAR-10
proxy's one-GPU-call runner): each test kills hand-made mutants that went through
tests/unit/test_jobrunner.py, tests/unit/test_validation_steps.py and the fast tests of
tests/workflow/test_cifar10_proxy.py, with expectations from the modules' docstrings,
DEVELOPERS.md ("The CIFAR-10 proxy on a lent GPU") and benchmarks/results/cifar10-proxy/README.md
(the seed folder's layout and run.json's fields), never from the function under test. Steps are
`/bin/sh` one-liners or stand-ins; `main` runs in this process with `run_jobs` stood in for (no
step runs, no torch), on the repository's params.yaml.

What is checked, and from which fact:
- startable (its docstring): a prioritised job that cannot start holds back only the jobs of
  *lower* priority (one of the same priority still starts), and only a job of priority > 0
  holds anything back (a waiting job of priority 0 lets a -1 job start).
- run_jobs (its docstring and the module's): an exit status of 1 (a Python traceback) is a
  failed step, and the steps that need it are skipped, however far back in the list they stand
  (settled in the same round, before the runner returns); a finished step keeps its seconds and
  its process id (GpuWatch matches nvidia-smi's processes by it); the steps get `env`; the
  periodic line holds each step's `status` note and the machine's `note`; a step whose
  `alongside` partner was killed (not only failed) is ended too, it is waited for (no zombie)
  but at most REAP_S (one stuck in the kernel cannot hang the runner past `timeout`), and the
  steps that need a killed step are skipped.
- _keeps: kept only when every output exists (one missing: the step runs again); _reap: the
  killed steps share one `timeout_s` in all; tail: the last 15 lines; echo: appends, so
  progress.log keeps every line, and writes each line to every log it is given.
- chain_priorities / build_jobs (docstrings, DEVELOPERS.md "The schedule", 31 steps: six
  trainings, two pseudo-labellings, twelve evaluations, the tables, the companion, the curves):
  every step's dependencies and outputs by hand (a finished training is best.pt, last.pt and
  train_log.csv; a pseudo-labelling its .npz and .json; ...), the seed in every command line
  and path, the Mean Teacher chain at 2, Standard's at 1, the labeler's cap on both its steps.
- record_call / step_calls / run_record (their docstrings, the README's run.json): a call's
  number counts from 1, a kept or skipped step is not one the call ran, a step's call is the
  *last one in which it was done*, `complete` needs every step done, `one_call` needs it
  complete and one call behind every step (a step kept from a call that left no record, e.g.
  one stopped by `timeout` before it wrote calls.json, is no such proof), run.json names the
  seed, and each step's `kept`, seconds and call.
- publish (its docstring, the README's layout): OUT/seed{s}.tar.gz is gzip, holds seed{s}/ only
  with the files at their places under results/, the params, summary.md, progress.log (every
  call's, from results/proxy/) and run.json, nothing left from an earlier call's folder, entries
  readable by anyone (0644/0755).
- seed_files: every method's metrics, extra metrics and train log, each labeler's pseudo-label
  report, of this seed only, those that exist.
- main (DEVELOPERS.md, the script's docstring and --help): `--check` writes nothing and exits 0;
  a complete call exits 0 and says to commit, one with a step failed or killed exits 1 and says
  not to; the tarball, run.json and summary.md are this seed's; OUT's files are 0644 (and
  the tarball's entries 0644/0755, owned by no one) even under a umask of 077; the schedule
  recorded is what ran (`evaluations` after without MPS, beside under it; `mps`); run_jobs
  gets --deadline and the script's own start as `since`; the npz's path is recorded absolute;
  other params than --results was made with, and a --results that is a file, are refused in
  one line, exit 2, with nothing written; --seeds-dir is the folder compared with (its params
  must match), the repository's seeds only with the repository's params.yaml.
- summary.md: a kept step names the call that did it and its seconds there, the calls' walls,
  a killed step's log tail (15 lines), this seed's pseudo-label report only, each run's epochs,
  mean seconds an epoch and accuracies; card_jobs: one step per `threads` cores and at most one
  per `gib_per_step` GiB, never 0; GpuWatch: the peak over samples, the memory of running steps
  only; results.tar.gz: no .pt, no .npz, the params; the returned checkpoint: WSCAT's best.pt,
  at most 16 MiB.
"""
from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import cifar10_proxy  # noqa: E402
import jobrunner  # noqa: E402
import proxy_table  # noqa: E402
from jobrunner import Job, run_jobs, startable  # noqa: E402

from tests.unit.test_jobrunner import record_popens  # noqa: E402

PROXY = "cifar10-proxy"


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


@pytest.fixture
def private_umask() -> Any:
    """A umask of 077 (files 0600, folders 0700), as a lent machine may have."""
    old = os.umask(0o077)
    yield
    os.umask(old)


# ---------------------------------------------------------------------------- the scheduler


def test_a_waiting_prioritised_job_holds_back_only_lower_priorities() -> None:
    running = Job("x", [], status="running")
    jobs = [running, Job("a", [], priority=2, beside=0), Job("b", [], priority=2),
            Job("c", [], priority=1)]
    assert [job.name for job in startable(jobs, 4)] == ["b"]  # a waits; b is no lower; c is
    jobs = [running, Job("a", [], priority=0, beside=0), Job("b", [], priority=-1)]
    assert [job.name for job in startable(jobs, 4)] == ["b"]  # priority 0 holds nothing back


def test_run_jobs_fails_exit_1_skips_back_in_the_list_and_keeps_seconds_pid_env(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, subprocess.Popen] = {}

    class Recorded(subprocess.Popen):
        def __init__(self, argv: list[str], **kwargs: Any) -> None:
            super().__init__(argv, **kwargs)
            started[argv[-1]] = self

    monkeypatch.setattr(jobrunner.subprocess, "Popen", Recorded)
    slow = f'sleep 0.6; echo "$PROXY_TEST" > {tmp_path / "env.txt"}'
    jobs = [Job("needs b", sh("true"), ["b"]), Job("b", sh("true"), ["exit 1"]),
            Job("exit 1", sh("exit 1")), Job("slow", sh(slow))]
    for job in jobs:
        job.log = tmp_path / f"{job.name}.log"
    lines: list[str] = []
    run_jobs(jobs, parallel=4, say=lines.append, every_s=0.2,
             env={"PATH": os.environ["PATH"], "PROXY_TEST": "from env"},
             status=lambda job: "(epoch 1)" if job.name == "slow" else "",
             note=lambda: "GPU 1.0/2 GiB")
    assert [job.status for job in jobs] == ["skipped", "skipped", "failed", "done"]
    assert (tmp_path / "env.txt").read_text() == "from env\n"
    assert jobs[3].seconds >= 0.6 and jobs[3].pid == started[slow].pid > 0
    assert any(line.startswith("[00:00] running: slow (epoch 1)")  # every 0.2 s
               and line.endswith("; GPU 1.0/2 GiB") for line in lines), lines


def test_a_partner_killed_ends_its_alongside_job_which_is_reaped_and_its_needers_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = record_popens(monkeypatch)
    jobs = [Job("needs needs extra", sh("true"), ["needs extra"]),  # skipped in the same round
            Job("core", sh("exit 3")), Job("extra", sh("sleep 30"), alongside=["core"]),
            Job("extra of extra", sh("sleep 30"), alongside=["extra"]),
            Job("needs extra", sh("true"), ["extra"])]
    for job in jobs:
        job.log = tmp_path / f"{job.name}.log"
    lines: list[str] = []
    run_jobs(jobs, parallel=4, say=lines.append, deadline_s=8.0)
    assert [job.status for job in jobs] == ["skipped", "failed", "killed", "killed", "skipped"]
    assert any("killed extra of extra" in line and ": extra, beside it, did not finish" in line
               for line in lines), lines
    assert len(started) == 3 and all(proc.returncode is not None for proc in started)


def test_a_partner_s_failure_cannot_hang_the_runner_on_a_stuck_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extra part ended because its core part failed is waited for at most REAP_S, as at
    the deadline (`_reap`): one stuck in the kernel (a hung GPU call) must not hang the runner
    past `timeout` and lose the call's record; it once waited with no limit."""
    real = subprocess.Popen

    class Stuck:
        pid, returncode = 4343, None

        def poll(self) -> None:
            return None

        def kill(self) -> None:
            pass

        def wait(self, timeout: float | None = None) -> int:
            if timeout is None:
                raise AssertionError("a killed step waited for with no time limit")
            raise subprocess.TimeoutExpired("extra", timeout)

    monkeypatch.setattr(jobrunner.subprocess, "Popen",
                        lambda argv, **kwargs: Stuck() if argv[-1] == "stuck"
                        else real(argv, **kwargs))
    jobs = [Job("core", sh("exit 3")), Job("extra", sh("stuck"), alongside=["core"])]
    for job in jobs:
        job.log = tmp_path / f"{job.name}.log"
    lines: list[str] = []
    run_jobs(jobs, parallel=2, say=lines.append, deadline_s=8.0)
    assert [job.status for job in jobs] == ["failed", "killed"]
    assert "extra (pid 4343) had not ended 10 s after it was killed" in lines


def test_kept_only_with_every_output(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("")
    done = Job("dep", [], status="done", kept=True)
    assert jobrunner._keeps(Job("j", [], outputs=[tmp_path / "a"]), [done])
    assert not jobrunner._keeps(Job("j", [], outputs=[tmp_path / "a", tmp_path / "b"]), [done])


def test_the_killed_steps_share_one_reap_timeout() -> None:
    asked: list[float] = []

    class Stuck:
        pid = 1

        def wait(self, timeout: float | None = None) -> int:
            asked.append(timeout or 0.0)
            time.sleep(timeout or 0.0)
            raise subprocess.TimeoutExpired("x", timeout or 0)

    lines: list[str] = []
    jobrunner._reap({"a": Stuck(), "b": Stuck()}, lines.append,  # type: ignore[dict-item]
                    timeout_s=0.2)
    assert 0.1 < asked[0] <= 0.2 and asked[1] < 0.05 and len(lines) == 2


def test_tail_is_the_last_15_lines_and_echo_appends(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "step.log"
    log.write_text("".join(f"line {n}\n" for n in range(1, 21)))
    assert jobrunner.tail(log) == "\n".join(f"line {n}" for n in range(6, 21))
    assert jobrunner.tail(tmp_path / "none.log") == "" and jobrunner.tail(None) == ""
    say = jobrunner.echo(tmp_path / "out" / "progress.log")
    say("first")
    say("second")
    assert (tmp_path / "out" / "progress.log").read_text() == "first\nsecond\n"
    assert capsys.readouterr().out == "first\nsecond\n"
    # Every line goes to each log (OUT's, and results/proxy/'s that keeps every call's).
    calls = tmp_path / "results" / "proxy" / "progress.log"
    calls.parent.mkdir(parents=True)
    calls.write_text("call 1\n")
    both = jobrunner.echo(tmp_path / "out2" / "progress.log", calls)
    both("third")
    assert (tmp_path / "out2" / "progress.log").read_text() == "third\n"
    assert calls.read_text() == "call 1\nthird\n"
    assert capsys.readouterr().out == "third\n"


# ------------------------------------------------------------------- the proxy's graph of steps

METHODS = ["standard", "trades", "wscat-sup", "mt", "rst", "wscat"]  # params.yaml's proxy
LABELER = {"rst": "standard", "wscat": "mt"}  # who labels for whom (docs/paper-scale.md)


def real_params(seed: int = 2) -> dict[str, Any]:
    """The repository's params as the script rewrites them for one seed (validated)."""
    return copy.deepcopy(_real_params(seed))


@functools.lru_cache(maxsize=None)
def _real_params(seed: int) -> dict[str, Any]:
    from wscat.config import validate_params

    return validate_params(cifar10_proxy.proxy_params(
        yaml.safe_load((ROOT / "params.yaml").read_text()), seed=seed, npz=None, epochs=None))


def test_the_proxy_graph_by_hand(tmp_path: Path) -> None:
    """31 steps (DEVELOPERS.md): what each needs and leaves, for seed 2, all under --results."""
    params, root = real_params(2), tmp_path / "results"
    jobs = {job.name: job for job in cifar10_proxy.build_jobs(
        params, tmp_path / "params.yaml", 2, root, 3, labeler_beside=1)}
    assert len(jobs) == 31
    # The order they start in when ready: the labelers' trainings first, then the runs on
    # labelled data, then those on pseudo-labels; their evaluations the other way round.
    order = ["standard", "mt", "trades", "wscat-sup", "rst", "wscat"]
    assert [name for name in jobs if name.startswith("train ")] == [f"train {m}" for m in order]
    assert [name for name in jobs if name.startswith("evaluate ")] == [
        f"evaluate {m}" for m in reversed(order)]
    run = {m: root / f"models/{PROXY}/wrn-16-4/{m}/seed2" for m in METHODS}
    metrics = {m: root / f"metrics/{PROXY}/wrn-16-4/{m}/seed2" for m in METHODS}
    pseudo = {m: root / f"pseudo/{PROXY}/wrn-16-4/{m}/seed2" for m in ("standard", "mt")}
    split = root / f"splits/{PROXY}/seed2.npz"
    paper = root / f"paper/{PROXY}"
    evaluated = [f"evaluate {m}" for m in METHODS]
    want: dict[str, tuple[list[str], list[Path]]] = {"split": ([], [split])}
    for m in METHODS:
        want[f"train {m}"] = (["split"] + ([f"pseudo-label {LABELER[m]}"] if m in LABELER
                                           else []),
                              [run[m] / "best.pt", run[m] / "last.pt", run[m] / "train_log.csv"])
        want[f"evaluate {m}"] = ([f"train {m}"], [Path(f"{metrics[m]}.json")])
        want[f"evaluate-extra {m}"] = ([f"train {m}"], [Path(f"{metrics[m]}-extra.json")])
        want[f"curves {m}"] = ([f"train {m}"], [root / f"curves/{PROXY}/wrn-16-4/{m}/seed2.pdf",
                                                root / f"curves/{PROXY}/wrn-16-4/{m}/seed2.png"])
    for m in ("standard", "mt"):
        want[f"pseudo-label {m}"] = ([f"train {m}"], [Path(f"{pseudo[m]}.npz"),
                                                     Path(f"{pseudo[m]}.json")])
    tables = root / f"tables/{PROXY}"
    want["table"] = (evaluated, [Path(f"{tables}.tex"), Path(f"{tables}.csv"),
                                 root / f"metrics/{PROXY}.json", Path(f"{tables}.md"),
                                 Path(f"{tables}-paired.csv"), Path(f"{tables}-paired.tex")])
    want["paper-table Tab-datasets"] = (["split"], [paper / "Tab-datasets.tex",
                                                    paper / "Tab-datasets.csv"])
    want["paper-table Tab-RQ1-CIFAR10"] = (
        evaluated + [f"evaluate-extra {m}" for m in METHODS],  # AA-paper is in the extra file
        [paper / "Tab-RQ1-CIFAR10.tex", paper / "Tab-RQ1-CIFAR10.csv"])
    want["paper-compare Tab-RQ1-CIFAR10"] = (["paper-table Tab-RQ1-CIFAR10"], [
        paper / "Tab-RQ1-CIFAR10-vs-paper.tex", paper / "Tab-RQ1-CIFAR10-vs-paper.csv"])
    assert {name: (sorted(job.deps), [Path(p) for p in job.outputs])
            for name, job in jobs.items()} == {name: (sorted(deps), outputs)
                                               for name, (deps, outputs) in want.items()}
    for m in METHODS:  # the extra part beside its core part, and ended if that fails
        assert jobs[f"evaluate-extra {m}"].alongside == [f"evaluate {m}"]
        assert jobs[f"train {m}"].argv[jobs[f"train {m}"].argv.index("--threads") + 1] == "3"
        checkpoint = jobs[f"evaluate {m}"].argv.index("--checkpoint") + 1
        assert jobs[f"evaluate {m}"].argv[checkpoint] == str(run[m] / "best.pt")  # params: best
    for m, labeler in LABELER.items():
        argv = jobs[f"train {m}"].argv
        assert argv[argv.index("--pseudo") + 1] == f"{pseudo[labeler]}.npz"
    for job in jobs.values():  # the seed's own number everywhere, never another's
        words = " ".join(job.argv)
        assert "seed1" not in words and "seed3" not in words, job.name
        if "--seed" in job.argv:
            assert job.argv[job.argv.index("--seed") + 1] == "2", job.name
    chain = {2: ["train mt", "pseudo-label mt", "train wscat", "evaluate wscat",
                 "evaluate-extra wscat"],
             1: ["train standard", "pseudo-label standard", "train rst", "evaluate rst",
                 "evaluate-extra rst"]}
    assert {name: job.priority for name, job in jobs.items()} == {
        name: next((rank for rank, steps in chain.items() if name in steps), 0) for name in jobs}
    assert {name: job.beside for name, job in jobs.items() if job.beside is not None} == {
        "train mt": 1, "pseudo-label mt": 1}
    assert cifar10_proxy.chain_priorities(params) == {"standard": (1, chain[1]),
                                                      "mt": (2, chain[2])}


def test_evaluations_after_every_training_and_pseudo_labelling(tmp_path: Path) -> None:
    params = real_params(2)
    jobs = cifar10_proxy.build_jobs(params, tmp_path / "params.yaml", 2, tmp_path, 2,
                                    evaluations_after_training=True)
    trainings = sorted([f"train {m}" for m in METHODS]
                       + ["pseudo-label standard", "pseudo-label mt"])
    for job in jobs:
        assert sorted(job.after) == (trainings if job.name.startswith("evaluate") else []), job
    extra = next(job for job in jobs if job.name == "evaluate-extra wscat")
    assert extra.deps == ["evaluate wscat"] and extra.alongside == []


def test_proxy_params_for_one_seed_from_the_npz() -> None:
    """One seed; the npz source in place of the archive's knobs, with CIFAR-10's normalisation
    (the committed seed 1's params.yaml); --epochs for every run, a labeler's other knobs kept."""
    base = {"experiments": {PROXY: {"dataset": PROXY, "model": "m", "methods": ["mt"],
                                    "seeds": [1, 2, 3]}},
            "datasets": {PROXY: {"source": "cifar10", "root": "data/raw", "download": True,
                                 "md5": "0" * 32, "labelled": 40}},
            "training": {PROXY: {"epochs": 15, "per_method": {
                "mt": {"epochs": 100, "warmup_fraction": 0.0}, "standard": {"epochs": 100}}}}}
    before = copy.deepcopy(base)
    params = cifar10_proxy.proxy_params(base, seed=3, npz=Path("/d/p.npz"), epochs=None)
    assert base == before  # the caller's dict untouched
    assert params["experiments"][PROXY]["seeds"] == [3]
    assert params["datasets"][PROXY] == {
        "source": "npz", "labelled": 40, "path": "/d/p.npz",
        "mean": [0.4914, 0.4822, 0.4465], "std": [0.2023, 0.1994, 0.201]}
    assert params["training"] == before["training"]
    quick = cifar10_proxy.proxy_params(base, seed=3, npz=None, epochs=4)
    assert quick["datasets"] == before["datasets"]
    assert quick["training"][PROXY] == {"epochs": 4, "per_method": {
        "mt": {"warmup_fraction": 0.0}}}
    del base["training"][PROXY]["per_method"]["mt"]["warmup_fraction"]
    assert cifar10_proxy.proxy_params(base, seed=3, npz=None, epochs=4)["training"] == {
        PROXY: {"epochs": 4}}


# ------------------------------------------------------------------------ the calls' record


def test_the_calls_record_what_each_ran_and_run_json_who_did_each_step(tmp_path: Path) -> None:
    (tmp_path / "proxy").mkdir()
    first = [Job("split", [], status="done", seconds=5.04),
             Job("train mt", [], status="killed", seconds=560.0),
             Job("curves mt", [], status="done", seconds=3.0),
             Job("table", [], status="skipped")]
    calls = cifar10_proxy.record_call(tmp_path, first, 570.04)
    assert calls == [{"call": 1, "wall_s": 570.0, "steps": {
        "split": {"status": "done", "seconds": 5.0},
        "train mt": {"status": "killed", "seconds": 560.0},
        "curves mt": {"status": "done", "seconds": 3.0}}}]
    assert json.loads((tmp_path / "proxy/calls.json").read_text()) == calls
    second = [Job("split", [], status="done", kept=True),
              Job("train mt", [], status="done", seconds=40.0),
              Job("curves mt", [], status="killed", seconds=1.0),  # ran again, cut this time
              Job("table", [], status="done", seconds=2.0)]
    calls = cifar10_proxy.record_call(tmp_path, second, 45.0)
    assert [c["call"] for c in calls] == [1, 2] and "split" not in calls[1]["steps"]
    assert cifar10_proxy.step_calls(calls) == {"split": (1, 5.0), "train mt": (2, 40.0),
                                               "curves mt": (1, 3.0), "table": (2, 2.0)}
    record = cifar10_proxy.run_record(second, 2, 45.0, {"mps": True},
                                      cifar10_proxy.GpuWatch(second), calls)
    assert (record["seed"], record["complete"], record["one_call"]) == (2, False, False)
    assert record["mps"] is True and record["gpu_peak_gib"] is None
    assert [(s["name"], s["status"], s["kept"], s["call"], s["seconds"])
            for s in record["steps"]] == [("split", "done", True, 1, 5.0),
                                          ("train mt", "done", False, 2, 40.0),
                                          ("curves mt", "killed", False, 1, 3.0),
                                          ("table", "done", False, 2, 2.0)]


def test_one_call_needs_every_step_done_by_the_same_recorded_call(tmp_path: Path) -> None:
    (tmp_path / "proxy").mkdir()
    done = [Job("split", [], status="done", seconds=5.0),
            Job("table", [], status="done", seconds=2.0)]
    calls = cifar10_proxy.record_call(tmp_path, done, 10.0)
    watch = cifar10_proxy.GpuWatch(done)
    assert cifar10_proxy.run_record(done, 1, 10.0, {}, watch, calls)["one_call"] is True
    again = [Job("split", [], status="done", kept=True), Job("table", [], status="done",
                                                             kept=True)]
    calls = cifar10_proxy.record_call(tmp_path, again, 0.5)  # the same command again: all kept
    record = cifar10_proxy.run_record(again, 1, 0.5, {}, watch, calls)
    assert record["complete"] and record["one_call"]  # call 1 did every step
    assert [s["call"] for s in record["steps"]] == [1, 1]
    cut = [Job("split", [], status="done", kept=True),  # table's files gone: it ran, and failed
           Job("table", [], status="failed", seconds=1.0)]
    calls = cifar10_proxy.record_call(tmp_path, cut, 2.0)
    record = cifar10_proxy.run_record(cut, 1, 2.0, {}, watch, calls)
    assert (record["complete"], record["one_call"]) == (False, False)
    assert [s["call"] for s in record["steps"]] == [1, 1]  # the last call in which it was done


def test_a_step_kept_from_a_call_that_left_no_record_is_no_one_call(tmp_path: Path) -> None:
    """Call 1 stopped (`timeout 590` past a slow reap) before it wrote calls.json: the steps it
    finished are kept by the next call, which cannot say that one call did every step; it once
    said so, and proxy_table's line read "in one call"."""
    (tmp_path / "proxy").mkdir()
    resumed = [Job("split", [], status="done", kept=True),
               Job("table", [], status="done", seconds=2.0)]
    calls = cifar10_proxy.record_call(tmp_path, resumed, 30.0)
    assert [c["call"] for c in calls] == [1]
    record = cifar10_proxy.run_record(resumed, 1, 30.0, {}, cifar10_proxy.GpuWatch(resumed),
                                      calls)
    assert record["complete"] and record["one_call"] is False
    assert [(s["kept"], s["call"]) for s in record["steps"]] == [(True, None), (False, 1)]


# ------------------------------------------------------------------ the seed's folder, published


def seed_tree(results: Path, seed: int) -> list[str]:
    """A seed's small files under `results` (the README's layout), written; their paths."""
    names = []
    for m in METHODS:
        names += [f"metrics/{PROXY}/wrn-16-4/{m}/seed{seed}.json",
                  f"metrics/{PROXY}/wrn-16-4/{m}/seed{seed}-extra.json",
                  f"models/{PROXY}/wrn-16-4/{m}/seed{seed}/train_log.csv"]
    names += [f"pseudo/{PROXY}/wrn-16-4/{m}/seed{seed}.json" for m in ("standard", "mt")]
    for name in names + [f"models/{PROXY}/wrn-16-4/mt/seed{seed}/best.pt",
                         f"pseudo/{PROXY}/wrn-16-4/mt/seed{seed}.npz"]:
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_text(content(name))
    return names


def content(name: str) -> str:
    """A stand-in for the file `name` that summary.md can read, naming the file."""
    if name.endswith("train_log.csv"):
        return f"epoch,seconds,file\n1,2.0,{name}\n"
    return json.dumps({"accuracy": {"Natural": 50.0} if "/metrics/" in f"/{name}" else 60.0,
                       "n": 10, "file": name})


def test_seed_files_are_this_seeds_small_files_that_exist(tmp_path: Path) -> None:
    results = tmp_path / "results"
    seed_tree(results, 1)  # another seed's, beside
    names = seed_tree(results, 2)
    (results / f"metrics/{PROXY}/wrn-16-4/trades/seed2-extra.json").unlink()
    files = cifar10_proxy.seed_files(real_params(2), results, 2)
    assert sorted(path.relative_to(results).as_posix() for path in files) == sorted(
        name for name in names if name != f"metrics/{PROXY}/wrn-16-4/trades/seed2-extra.json")


def test_publish_packs_seed_s_folder_only_from_this_call(tmp_path: Path,
                                                         private_umask: None) -> None:
    results, out = tmp_path / "results", tmp_path / "out"
    names = seed_tree(results, 2)
    out.mkdir()
    (out / "summary.md").write_text("# summary\n")
    (out / "progress.log").write_text("[00:00] kept split (outputs exist)\n")  # this call's
    params_file = results / "proxy" / "params.yaml"
    params_file.parent.mkdir()
    params_file.write_text("seeds: [2]\n")
    every_call = "[00:00] start split\n[00:00] kept split (outputs exist)\n"
    (results / "proxy" / "progress.log").write_text(every_call)
    stale = results / "proxy" / "seed2" / "metrics" / "left-from-call-1.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    record = {"seed": 2, "complete": True}
    tarball = cifar10_proxy.publish(params_file, results, 2, out, record,
                                    [results / name for name in names])
    assert tarball == out / "seed2.tar.gz"
    assert tarball.read_bytes()[:2] == b"\x1f\x8b"  # gzip: `tar xzf` unpacks it
    with tarfile.open(tarball, "r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        files = {name: tar.extractfile(m).read().decode() for name, m in members.items()
                 if m.isfile()}
    assert sorted(files) == sorted([f"seed2/{name}" for name in names] + [
        "seed2/params.yaml", "seed2/summary.md", "seed2/progress.log", "seed2/run.json"])
    assert all(files[f"seed2/{name}"] == content(name) for name in names)
    assert files["seed2/params.yaml"] == "seeds: [2]\n"
    assert files["seed2/progress.log"] == every_call  # a seed two calls finished: both
    assert json.loads(files["seed2/run.json"]) == record
    assert all(stat.S_IMODE(m.mode) == (0o755 if m.isdir() else 0o644) and m.uid == 0
               and m.uname == "" for m in members.values())  # anyone reads it once unpacked


# -------------------------------------------------------------------------------------- main


class FakeMps:
    """A started MPS daemon as benchmarks/mps.py hands it over (env for the steps, stop)."""
    env = dict(os.environ)

    def stop(self) -> bool:
        return True


def call_main(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *argv: str,
              outcome: dict[str, str] | None = None, mps: bool = False
              ) -> tuple[int, dict[str, Any]]:
    """cifar10_proxy.main() on the repository's params for seed 2, --seeds-dir an empty folder
    unless given, with run_jobs stood in for: every step ends as `outcome` says (done
    otherwise) and writes nothing; what run_jobs was handed comes back."""
    handed: dict[str, Any] = {}

    def fake_run_jobs(jobs: list[Job], **kwargs: Any) -> list[Job]:
        handed.update(kwargs, jobs=jobs, at=time.monotonic())
        for job in jobs:
            job.status = (outcome or {}).get(job.name, "done")
            job.seconds = 1.0
        return jobs

    seeds = tmp_path / "no-seeds"
    seeds.mkdir(exist_ok=True)
    npz = tmp_path / "p.npz"  # the arrays --npz must hold; no step reads them here
    np.savez(npz, x_train=np.zeros((1, 2, 2, 3), np.uint8), y_train=np.zeros(1, np.int64))
    defaults = ["--npz", str(npz), "--seed", "2", "--jobs", "2", "--mps", "on" if mps else "off",
                "--results", str(tmp_path / "results"), "--out", str(tmp_path / "out")]
    if "--seeds-dir" not in argv:
        defaults += ["--seeds-dir", str(seeds)]
    monkeypatch.setattr(sys, "argv", ["cifar10_proxy.py", *defaults, *argv])
    monkeypatch.setattr(cifar10_proxy, "run_jobs", fake_run_jobs)
    monkeypatch.setattr(cifar10_proxy, "machine", lambda: "a test machine")
    monkeypatch.setattr(cifar10_proxy.mps_service, "start_as",
                        lambda mode, folder: (FakeMps(), "on (test)") if mps else
                        (None, f"off (--mps {mode})"))
    return cifar10_proxy.main(), handed


def unpacked(out: Path, seed: int) -> dict[str, bytes]:
    with tarfile.open(out / f"seed{seed}.tar.gz", "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_check_only_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture) -> None:
    code, handed = call_main(monkeypatch, tmp_path, "--check")
    assert code == 0 and handed == {} and "seed 2 may run" in capsys.readouterr().out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["no-seeds", "p.npz"]


def test_a_complete_call_publishes_its_seed_and_says_to_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
        private_umask: None) -> None:
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    seed_tree(results, 1)
    names = seed_tree(results, 2)
    code, handed = call_main(monkeypatch, tmp_path, "--deadline", "570", "--npz", "p.npz")
    assert code == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        f"unpack {tmp_path / 'out/seed2.tar.gz'} into benchmarks/results/{PROXY}/ and commit "
        "seed2/")
    assert handed["deadline_s"] == 570.0 and handed["since"] <= handed["at"]
    assert handed["since"] < time.monotonic() and handed["parallel"] == 2
    jobs = handed["jobs"]
    assert len(jobs) == 31 and all(job.after for job in jobs if job.name.startswith("evaluate"))
    used = yaml.safe_load((results / "proxy/params.yaml").read_text())
    assert used["datasets"][PROXY]["path"] == str(tmp_path / "p.npz")  # absolute, as recorded
    assert used["experiments"][PROXY]["seeds"] == [2]
    files = unpacked(tmp_path / "out", 2)
    assert sorted(files) == sorted([f"seed2/{name}" for name in names] + [
        "seed2/params.yaml", "seed2/summary.md", "seed2/progress.log", "seed2/run.json"])
    record = json.loads(files["seed2/run.json"])
    assert (record["seed"], record["complete"], record["one_call"]) == (2, True, True)
    assert (record["mps"], record["evaluations"], record["jobs"]) == (False, "after", 2)
    assert record["code_digest"] == cifar10_proxy.code_digest()  # the code, whatever git says
    assert files["seed2/summary.md"].decode().startswith("# CIFAR-10 proxy, seed 2\n")
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o644
               for path in (tmp_path / "out").iterdir())


@pytest.mark.parametrize("status", ["failed", "killed"])
def test_a_call_with_a_step_not_done_says_not_to_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
        status: str) -> None:
    mps = status == "killed"  # under MPS: evaluations beside the trainings, and so recorded
    code, handed = call_main(monkeypatch, tmp_path, outcome={"curves wscat": status}, mps=mps)
    assert code == 1
    said = capsys.readouterr()
    assert "commit" not in said.out and "seed 2 is not complete (30 of 31 steps done)" in said.err
    record = json.loads(unpacked(tmp_path / "out", 2)["seed2/run.json"])
    assert record["complete"] is False and record["one_call"] is False
    evaluations = [job for job in handed["jobs"] if job.name.startswith("evaluate")]
    assert all(bool(job.after) is not mps for job in evaluations)
    assert (record["mps"], record["evaluations"]) == (mps, "beside" if mps else "after")


def test_other_params_than_results_was_made_with_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    made = tmp_path / "results/proxy/params.yaml"  # by an earlier call, with other params
    made.parent.mkdir(parents=True)
    made.write_text("experiments: {}\n")
    code, handed = call_main(monkeypatch, tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and handed == {} and err.count("\n") == 1 and "other params" in err
    assert made.read_text() == "experiments: {}\n" and not (tmp_path / "out").exists()


def test_results_made_by_other_code_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    """A warm machine's results/ keeps finished steps; made by other wscat code (a call of an
    earlier commit), they would be kept as they are: refused, as other params are."""
    code, _ = call_main(monkeypatch, tmp_path)
    made = tmp_path / "results/proxy/code.txt"
    assert code == 0 and made.read_text() == cifar10_proxy.code_digest() + "\n"
    made.write_text("0" * 16 + "\n")
    capsys.readouterr()
    code, handed = call_main(monkeypatch, tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and handed == {} and err.count("\n") == 1 and "other wscat code" in err
    assert made.read_text() == "0" * 16 + "\n"


def test_a_seed_outside_the_tier_is_refused_before_its_call(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Against the repository's committed seeds, a seed not in params.yaml's
    experiments.cifar10-proxy.seeds: proxy_table.py would refuse its folder after the call
    (`--check --seed 4` said "may run" once seed 3 was in)."""
    tier = yaml.safe_load((ROOT / "params.yaml").read_text())["experiments"][PROXY]["seeds"]
    for seed in ("0", "4"):
        assert int(seed) not in tier
        monkeypatch.setattr(sys, "argv", ["cifar10_proxy.py", "--check", "--seed", seed])
        assert cifar10_proxy.main() == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(
            f"cifar10_proxy: error: --seed {seed}: not one of the tier's seeds "
            f"({', '.join(map(str, tier))}: "), err
        assert "proxy_table.py would refuse its folder" in err


def test_a_moved_npz_is_refused_with_the_path_the_committed_seeds_ran_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The npz's path is in every training fingerprint: the refusal names the committed
    seed's path, which --npz can give from a clone (a rehearsal in a clone was refused with no
    hint of it)."""
    committed = tmp_path / "committed"
    (committed / "seed1").mkdir(parents=True)
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    there = tmp_path / "elsewhere" / "p.npz"
    (committed / "seed1/params.yaml").write_text(yaml.safe_dump(
        cifar10_proxy.proxy_params(base, seed=1, npz=there, epochs=None)))
    code, handed = call_main(monkeypatch, tmp_path, "--check", "--seeds-dir", str(committed))
    err = capsys.readouterr().err
    assert code == 2 and handed == {} and err.count("\n") == 1, err
    assert ".dataset.path (the npz's path is part of every training fingerprint: the committed " \
        f"seed's was {there}; pass --npz {there} with the same file there)" in err


def test_the_seeds_compared_are_seeds_dir_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    committed = tmp_path / "committed"
    (committed / "seed1").mkdir(parents=True)
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    other = cifar10_proxy.proxy_params(base, seed=1, npz=tmp_path / "p.npz", epochs=None)
    other["methods"]["wscat"]["beta"] = other["methods"]["wscat"]["beta"] + 1
    (committed / "seed1/params.yaml").write_text(yaml.safe_dump(other))
    code, handed = call_main(monkeypatch, tmp_path, "--check", "--seeds-dir", str(committed))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "committed seed 1's" in err and "beta" in err
    ours = argparse.Namespace(seeds_dir=None, params=tmp_path / "params.yaml")
    assert cifar10_proxy.seeds_dir_of(ours) is None  # a test's own params: no committed seeds
    ours.params = ROOT / "params.yaml"
    assert cifar10_proxy.seeds_dir_of(ours) == ROOT / "benchmarks/results" / PROXY


def test_the_npz_must_hold_the_committed_seeds_images(tmp_path: Path) -> None:
    """The md5 a committed seed's run.json records; for one run before it was (seed 1), the
    shared proxy file's, PROXY_NPZ_MD5, where the seeds are the repository's."""
    npz = tmp_path / "p.npz"
    npz.write_bytes(b"other images")
    old, new = tmp_path / "seed1", tmp_path / "seed2"
    old.mkdir()
    new.mkdir()
    with pytest.raises(ValueError, match=f"committed seed 1 ran on images of md5 "
                                         f"{proxy_table.PROXY_NPZ_MD5}"):
        cifar10_proxy.check_images(npz, {1: old}, repository=True)
    cifar10_proxy.check_images(npz, {1: old}, repository=False)  # another table's: no record
    (new / "run.json").write_text(json.dumps({"npz_md5": "0" * 32}))
    with pytest.raises(ValueError, match=f"committed seed 2 ran on images of md5 {'0' * 32}"):
        cifar10_proxy.check_images(npz, {2: new}, repository=False)
    (new / "run.json").write_text(json.dumps({"npz_md5": cifar10_proxy.npz_md5(npz)}))
    cifar10_proxy.check_images(npz, {2: new}, repository=False)


# ------------------------------------------------------------- what OUT says of the machine


def test_summary_steps_tails_pseudo_labels_and_runs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cifar10_proxy, "machine", lambda: "a test machine")
    results = tmp_path / "results"
    for seed, accuracy in ((1, 99.0), (2, 60.0)):  # seed 1's report must not show
        report = results / f"pseudo/{PROXY}/wrn-16-4/mt/seed{seed}.json"
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"n": 10, "accuracy": accuracy}))
    log = results / f"models/{PROXY}/wrn-16-4/mt/seed2/train_log.csv"
    log.parent.mkdir(parents=True)
    log.write_text("epoch,seconds\n1,2.0\n2,4.0\n")
    metrics = results / f"metrics/{PROXY}/wrn-16-4/mt/seed2.json"
    metrics.parent.mkdir(parents=True)
    metrics.write_text(json.dumps({"accuracy": {"Natural": 50.0, "PGD-20": 12.345}}))
    (tmp_path / "train-mt.log").write_text("".join(f"epoch {n}\n" for n in range(1, 18)))
    jobs = [Job("split", [], status="done", kept=True),
            Job("train mt", [], status="killed", seconds=560.4, log=tmp_path / "train-mt.log"),
            Job("curves mt", [], status="done", seconds=3.0)]
    calls = [{"call": 1, "wall_s": 570.0, "steps": {"split": {"status": "done", "seconds": 5.0}}},
             {"call": 2, "wall_s": 45.0, "steps": {
                 "train mt": {"status": "killed", "seconds": 560.4},
                 "curves mt": {"status": "done", "seconds": 3.0}}}]
    text = cifar10_proxy.summary(real_params(2), jobs, results, 2, None, 45.0, "", None, calls)
    assert text.startswith("# CIFAR-10 proxy, seed 2\n")
    assert ("| split | kept (call 1) | 5 |\n| train mt | killed | 560 |\n"
            "| curves mt | done | 3 |\n") in text
    assert "call 1 570 s; call 2 45 s" in text
    assert "pseudo-label accuracy of mt on the 10 unlabelled images: 60.00%" in text
    assert "99.00" not in text
    assert "| mt | 2 | 3.0 | Natural 50.00, PGD-20 12.35 |" in text
    assert "| trades | - | - | - |" in text
    tail = "\n".join(f"epoch {n}" for n in range(3, 18))
    assert text.endswith(f"\n## train mt: killed\n\n```\n{tail}\n```\n")


def test_counts_are_whole_numbers_only_when_whole() -> None:
    assert cifar10_proxy._whole("4000.00") == "4,000"
    assert cifar10_proxy._whole("60.50") == "60.50" and cifar10_proxy._whole("-") == "-"


def test_steps_at_once_by_cores_and_gpu_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cifar10_proxy.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(cifar10_proxy, "gpu_memory_gib", lambda: 40.0)
    assert cifar10_proxy.card_jobs(2, 6.0) == (6, "16 cores / 2 threads a step, 40 GiB of GPU "
                                                  "memory / 6 GiB a step")  # 8 by cores
    assert cifar10_proxy.card_jobs(4, 6.0)[0] == 4  # by cores
    monkeypatch.setattr(cifar10_proxy, "gpu_memory_gib", lambda: None)
    monkeypatch.setattr(cifar10_proxy.os, "sched_getaffinity", lambda pid: {0})
    assert cifar10_proxy.card_jobs(2, 6.0) == (1, "1 cores / 2 threads a step")  # never 0


def test_gpu_watch_peak_and_running_steps_only(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = {"--query-gpu=utilization.gpu,memory.used,memory.total": [
        [["50", "20480", "40960"]], [["10", "10240", "40960"]]],
        "--query-compute-apps=pid,used_memory": [[["7", "3072"], ["8", "1024"]],
                                                 [["7", "1024"], ["8", "2048"]]]}
    monkeypatch.setattr(cifar10_proxy, "_smi", lambda query: rows[query].pop(0))
    jobs = [Job("train mt", [], status="running", pid=7), Job("split", [], status="done", pid=8)]
    watch = cifar10_proxy.GpuWatch(jobs)
    assert watch() == "GPU 20.0/40 GiB, 50% busy" and watch() == "GPU 10.0/40 GiB, 10% busy"
    assert watch.peak_gib == 20.0 and watch.step_gib == {"train mt": 3.0}
    assert "30% busy on average over 2 samples" in watch.line()


def test_results_tarball_has_no_checkpoint_nor_npz_and_the_params(tmp_path: Path) -> None:
    results = tmp_path / "results"
    names = seed_tree(results, 2)
    (results / "proxy").mkdir()
    (results / "proxy/params.yaml").write_text("seeds: [2]\n")
    (results / "proxy/progress.log").write_text("[00:00] start split\n")
    staged = results / "proxy/seed2/metrics/an-earlier-call.json"  # publish's, of the last call
    staged.parent.mkdir(parents=True)
    staged.write_text("{}")
    # What a step killed at the deadline leaves: its temporary file and its lock (hidden).
    left = results / f"metrics/{PROXY}/wrn-16-4/wscat"
    (left / ".seed2.json.k3x9a1.tmp").write_text("{")
    (left / ".seed2.json.wscat-lock").write_text("pid 7")
    (results / "proxy/.calls.json.q1w2e3.tmp").write_text("[")
    cifar10_proxy.bundle(results, PROXY, tmp_path / "results.tar.gz")
    with tarfile.open(tmp_path / "results.tar.gz", "r:gz") as tar:
        got = {name for name in tar.getnames() if "." in Path(name).name}
        assert not [name for name in tar.getnames() if "proxy/seed" in name]
    assert got == {f"results/{name}" for name in names} | {"results/proxy/params.yaml",
                                                           "results/proxy/progress.log"}


def test_the_returned_checkpoint_is_wscat_s_best_within_16_mib(tmp_path: Path) -> None:
    results, out = tmp_path / "results", tmp_path / "out"
    out.mkdir()
    best = results / f"models/{PROXY}/wrn-16-4/wscat/seed2/best.pt"
    best.parent.mkdir(parents=True)
    with open(best, "wb") as handle:
        handle.truncate(16 * 2**20 + 1)  # one byte over what the machine returns
    assert cifar10_proxy.return_checkpoint(real_params(2), results, 2, out) is None
    with open(best, "wb") as handle:
        handle.truncate(16 * 2**20)
    assert cifar10_proxy.return_checkpoint(real_params(2), results, 2, out) == (
        out / "wscat-seed2-best.pt")
    assert (out / "wscat-seed2-best.pt").stat().st_size == 16 * 2**20


def test_a_checkpoint_copy_cut_short_returns_nothing(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A call cut mid-copy (the deadline, a full disk) leaves no truncated checkpoint in OUT,
    which the machine would return as if it were the model."""
    results, out = tmp_path / "results", tmp_path / "out"
    out.mkdir()
    best = results / f"models/{PROXY}/wrn-16-4/wscat/seed2/best.pt"
    best.parent.mkdir(parents=True)
    best.write_bytes(b"w" * 1000)

    def cut(source: Path, target: Path) -> None:
        Path(target).write_bytes(Path(source).read_bytes()[:10])
        raise KeyboardInterrupt

    monkeypatch.setattr(cifar10_proxy.shutil, "copyfile", cut)
    with pytest.raises(KeyboardInterrupt):
        cifar10_proxy.return_checkpoint(real_params(2), results, 2, out)
    assert os.listdir(out) == []


def test_a_results_that_is_a_file_is_refused_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """--results a file: one line, exit 2, nothing written (it was a NotADirectoryError
    traceback after OUT was made)."""
    (tmp_path / "results").write_text("")
    code, handed = call_main(monkeypatch, tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and handed == {} and err.count("\n") == 1
    assert err.startswith(f"cifar10_proxy: error: --results {tmp_path / 'results'}: a file")
    assert not (tmp_path / "out").exists() and (tmp_path / "results").read_text() == ""
