"""The CIFAR-10 proxy tier (README, "CIFAR-10 proxy"): the subset knob, the npz export as the same
dataset, the Snakemake DAG of three seeds, benchmarks/cifar10_proxy.py (the one-GPU-call
script) end to end on a tiny archive in the official format built here, its schedule, and
benchmarks/proxy_table.py (Table 2 over the seeds' folders) on the folder that run returns."""
from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers.archives import write_cifar10
from tests.workflow.test_workflow import BIN, ROOT, copy_workflow, job_counts, real_params, run
from wscat.config import load_params, training_for
from wscat.data import load_dataset
from wscat.data.sources.cifar import CIFAR10
from wscat.metrics import ATTACKS, harmonic_mean

PROXY = "cifar10-proxy"


def eager_params() -> dict:
    """The real params as if the compile choice had kept every step eager
    (benchmarks/results/compile-choice-cifar10-proxy.md): the tests below check the labelers'
    schedule and the tiny proxy's steps, which must not compile on a CPU nor change with that
    speed switch, so the choice's commit (`compile_choice.py --apply`) leaves them green."""
    params = real_params()
    per_method = params["training"][PROXY].get("per_method", {})
    for method, knobs in list(per_method.items()):
        knobs = {k: v for k, v in knobs.items() if k not in ("compile", "compile_mode")}
        if knobs:
            per_method[method] = knobs
        else:
            del per_method[method]
    return params


def tiny_proxy_params(raw: Path, md5: str, methods: list[str] | None = None) -> dict:
    """The proxy tier on a 300 + 40 image archive: its first 200 + 20, a one-block WRN, one epoch;
    `methods` cuts the six to fewer."""
    params = eager_params()
    experiment = params["experiments"][PROXY]
    params["experiments"] = {PROXY: {**experiment, "model": "wrn-10-1",
                                     "methods": methods or experiment["methods"]}}
    params["paper"] = {PROXY: params["paper"][PROXY]}
    params["paper"][PROXY]["model_names"]["wrn-10-1"] = "WRN-10-1"
    params["models"]["wrn-10-1"] = {"architecture": "wideresnet", "depth": 10, "width": 1}
    params["datasets"][PROXY].update(root=str(raw), md5=md5, download=False, labelled=100,
                                     subset={"train": 200, "test": 20}, train_steps=2)
    mt = {**params["training"][PROXY].get("per_method", {}).get("mt", {}),  # a labeler of its
          "epochs": 2}                                                      # own schedule
    params["training"][PROXY].update(epochs=1, batch_size=64, precision="fp32",
                                     channels_last=False, per_method={"mt": mt})
    params["evaluation"].update(pgd_steps=3, cw_steps=3)
    params["validation"] = {"pgd_steps": 3, "cw_steps": 3}
    params["evaluation"]["checks"]["pgd_steps"] = [1, 3]
    params["evaluation"]["nrf"].update(ib_steps=5, steps=3)
    params["evaluation"]["per_dataset"][PROXY] = {"autoattack": {"n_examples": 4}}
    return params


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    raw = tmp_path_factory.mktemp("raw")
    return raw, write_cifar10(raw, train_per_class=30, test_per_class=4)


def _npz_of(data, path: Path) -> Path:
    """The dataset's images as the proxy's npz export: HWC uint8 train and test."""
    n = data.train_size
    hwc = data.images.permute(0, 2, 3, 1).numpy()
    np.savez(path, x_train=hwc[:n], y_train=data.labels[:n].numpy(), x_test=hwc[n:],
             y_test=data.labels[n:].numpy())
    return path


def test_subset_keeps_the_first_images_in_the_official_order(archive, tmp_path: Path) -> None:
    raw, md5 = archive
    cfg = {"source": "cifar10", "root": str(raw), "md5": md5}
    whole = load_dataset("cifar10", cfg)
    proxy = load_dataset(PROXY, {**cfg, "subset": {"train": 200, "test": 20}})
    assert proxy.train_size == 200 and len(proxy.labels) == 220
    assert torch.equal(proxy.images[:200], whole.images[:200])
    assert torch.equal(proxy.images[200:], whole.images[300:320])
    assert torch.equal(proxy.labels[200:], whole.labels[300:320])
    # The npz export of those positions is the same dataset, normalisation included.
    npz = _npz_of(proxy, tmp_path / "proxy.npz")
    offline = load_dataset(PROXY, {"source": "npz", "path": str(npz), "mean": list(CIFAR10.mean),
                                   "std": list(CIFAR10.std), "subset": {"train": 200, "test": 20}})
    assert torch.equal(offline.images, proxy.images) and torch.equal(offline.labels, proxy.labels)
    assert (offline.mean, offline.std, offline.train_size) == (proxy.mean, proxy.std, 200)
    with pytest.raises(ValueError, match="subset.train = 400"):
        load_dataset(PROXY, {**cfg, "subset": {"train": 400}})


def test_the_real_params_define_the_proxy_tier() -> None:
    params = load_params(ROOT / "params.yaml")
    dataset = params["datasets"][PROXY]
    assert dataset["source"] == "cifar10" and dataset["subset"] == {"train": 15000, "test": 1000}
    assert dataset["labelled"] == 4000 and dataset["eps"] == pytest.approx(8 / 255)
    assert params["experiments"][PROXY]["model"] == "wrn-16-4"
    assert params["experiments"][PROXY]["methods"] == ["standard", "trades", "wscat-sup", "mt",
                                                       "rst", "wscat"]
    assert params["training"][PROXY]["precision"] == "bf16"
    # The paper tier's tables are untouched by the optional sections.
    from wscat.report import paper

    assert paper.table_labels(params, PROXY) == ["Tab-datasets", "Tab-RQ1-CIFAR10"]
    assert len(paper.table_labels(params, "paper")) == 10
    assert paper.tier_figures(params, PROXY) == ["robustness-curves"]  # none of the paper's


@pytest.mark.slow
def test_snakemake_lists_the_proxy_dag_of_three_seeds(tmp_path: Path, env) -> None:
    workdir = copy_workflow(tmp_path, real_params())
    (workdir / "data/raw").mkdir(parents=True)
    # A dry run checks the archive's md5 (tests/workflow/test_bad_input.py); this one reads the DAG only.
    (workdir / "data/raw/cifar-10-python.tar.gz").write_bytes(b"")
    result = run([str(BIN / "snakemake"), "-n", "-p", "--cores", "4", "--resources", "gpu=1", "--",
                  f"results/tables/{PROXY}.tex", f"results/paper/{PROXY}/index.md"], workdir,
                 {**env, "WSCAT_SKIP_ARCHIVE_CHECK": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout) == {"split": 3, "train": 18, "pseudo_label": 6,
                                         "evaluate": 18, "evaluate_extra": 18, "table": 1,
                                         "paper_table": 2, "paper_figure": 1,  # robustness
                                         "paper_compare": 1, "curves": 18, "paper_index": 1}
    assert "--paper-cells CIFAR10 WRN-28-10" in result.stdout
    assert "--model wrn-16-4" in result.stdout
    # The companion reads the paper's numbers: a corrected cell there redoes it.
    compare = result.stdout[result.stdout.index("rule paper_compare:"):]
    assert "wscat/report/reported.csv" in compare[:compare.index("output:")]


def longer_labeler() -> dict:
    """The real params, whose labelers train longer than the runs they label for (100 epochs
    each, chosen on the validation split: benchmarks/results/labeler-choice-cifar10-proxy.md),
    the scheduling machinery's case; Mean Teacher also keeps the release's plain cosine. Averaged
    statistics are added to see `--epochs` keep a labeler's other knobs."""
    params = eager_params()
    assert params["training"][PROXY]["per_method"] == {
        "mt": {"warmup_fraction": 0.0, "epochs": 100}, "standard": {"epochs": 100}}
    params["training"][PROXY]["per_method"]["mt"].update(ema_buffers="average")
    return params


def test_the_one_call_script_has_every_step_of_the_six_methods(archive, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import build_jobs, proxy_params

    params = proxy_params(longer_labeler(), seed=2, npz=tmp_path / "p.npz", epochs=None)
    assert params["datasets"][PROXY]["source"] == "npz" and "root" not in params["datasets"][PROXY]
    assert params["training"][PROXY]["epochs"] == 15
    assert training_for(params, PROXY, "mt")["epochs"] == 100
    assert training_for(params, PROXY, "standard")["epochs"] == 100
    quick = proxy_params(longer_labeler(), seed=2, npz=None, epochs=3)  # --epochs: every run
    assert {training_for(quick, PROXY, m)["epochs"] for m in ("mt", "wscat")} == {3}
    # --epochs drops the per-method epochs and keeps the labeler's other knobs (Standard has none).
    assert quick["training"][PROXY]["per_method"] == {"mt": {"ema_buffers": "average",
                                                             "warmup_fraction": 0.0}}
    assert params["experiments"][PROXY]["seeds"] == [2]
    jobs = {job.name: job for job in build_jobs(params, tmp_path / "params.yaml", 2, tmp_path, 2)}
    assert Counter(name.split()[0] for name in jobs) == {
        "split": 1, "train": 6, "pseudo-label": 2, "evaluate": 6, "evaluate-extra": 6,
        "table": 1, "paper-table": 2,
        "paper-compare": 1, "curves": 6}
    assert jobs["train wscat"].deps == ["split", "pseudo-label mt"]
    assert jobs["train rst"].deps == ["split", "pseudo-label standard"]
    assert "--paper-cells" in jobs["paper-compare Tab-RQ1-CIFAR10"].argv
    assert all("--model wrn-16-4" in " ".join(job.argv) for name, job in jobs.items()
               if name.startswith(("train", "evaluate")))
    # The schedule: Mean Teacher's chain to WSCAT first, then Standard's to RST, then the rest
    # (the real proxy's labelers train 15 epochs each: the order does not come from epochs);
    # WSCAT's labeler shares the device with at most --labeler-beside steps.
    chain = ["train mt", "pseudo-label mt", "train wscat", "evaluate wscat",
             "evaluate-extra wscat"]
    real = build_jobs(proxy_params(real_params(), seed=2, npz=None, epochs=None),
                      tmp_path / "params.yaml", 2, tmp_path, 2)
    for built in (jobs, {job.name: job for job in real}):
        assert {name: job.priority for name, job in built.items() if job.priority} == {
            **dict.fromkeys(chain, 2), **dict.fromkeys(
                ["train standard", "pseudo-label standard", "train rst", "evaluate rst",
                 "evaluate-extra rst"], 1)}
    assert {name for name, job in jobs.items() if job.beside is not None} == set()
    # Under MPS (the default here) each extra part starts with its core part and waits for its
    # file; evaluations after every training (no MPS) keep the extra after its core part.
    extra = jobs["evaluate-extra wscat"]
    assert (extra.deps, extra.alongside) == (["train wscat"], ["evaluate wscat"])
    assert extra.argv[-2:] == ["--core-wait", "1800"] and "--core" in extra.argv
    after = {job.name: job for job in build_jobs(params, tmp_path / "params.yaml", 2, tmp_path, 2,
                                                 evaluations_after_training=True)}
    extra = after["evaluate-extra wscat"]
    assert (extra.deps, extra.alongside) == (["evaluate wscat"], [])
    assert "--core-wait" not in extra.argv
    beside = {job.name: job for job in build_jobs(params, tmp_path / "params.yaml", 2, tmp_path,
                                                  2, labeler_beside=1)}
    assert {name: job.beside for name, job in beside.items() if job.beside is not None} == {
        "train mt": 1, "pseudo-label mt": 1}
    plain = build_jobs(params, tmp_path / "params.yaml", 2, tmp_path, 2, priority=False)
    assert {job.priority for job in plain} == {0}


def test_the_mean_teacher_chain_never_waits_for_a_slot(tmp_path: Path) -> None:
    """The proxy's 31 steps scheduled (jobrunner.startable) with made-up durations: whatever the
    slots and the cap beside the labeler, each step of the Mean Teacher -> WSCAT chain starts
    when the one it needs ends, and WSCAT's extra evaluation beside its core one where the slots
    allow (by its end in any case); without priority, with few slots, it waits."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import build_jobs, proxy_params

    from tests.unit.test_jobrunner import most_beside, simulate

    params = proxy_params(real_params(), seed=1, npz=None, epochs=None)
    chain = ["split", "train mt", "pseudo-label mt", "train wscat", "evaluate wscat", "table"]

    def seconds(name: str) -> float:  # the H100 run's rough shares
        return {"train": 280.0, "evaluate": 100.0, "evaluate-extra": 60.0}.get(
            name.split()[0], 8.0) * (0.3 if name == "train mt" else 1.0)

    for parallel, beside in ((2, None), (4, 0), (6, None), (6, 2)):
        jobs = build_jobs(params, tmp_path / "params.yaml", 1, tmp_path, 2,
                          labeler_beside=beside)
        times = simulate(jobs, parallel, {job.name: seconds(job.name) for job in jobs})
        waits = [after for before, after in zip(chain[:-2], chain[1:-1])
                 if times[after][0] != times[before][1]]
        assert waits == [], (parallel, beside, waits)
        core, extra = times["evaluate wscat"], times["evaluate-extra wscat"]
        assert core[0] <= extra[0] <= core[1] and (parallel < 4 or extra[0] < core[1]), (
            parallel, beside, core, extra)
        if beside is not None:
            assert most_beside(times, "train mt") <= beside
    jobs = build_jobs(params, tmp_path / "params.yaml", 1, tmp_path, 2, priority=False)
    times = simulate(jobs, 2, {job.name: seconds(job.name) for job in jobs})
    assert times["train wscat"][0] > times["pseudo-label mt"][1]  # list order: it waited


def test_evaluations_after_training_wait_for_every_training_and_nothing_else(
        tmp_path: Path) -> None:
    """Without MPS (`--evaluations auto`) no evaluation shares the card with a training: each
    starts once the last training has ended, and the labeler chain up to WSCAT's training still
    starts each step when the one it needs ends."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import build_jobs, proxy_params

    from tests.unit.test_jobrunner import simulate

    params = proxy_params(real_params(), seed=1, npz=None, epochs=None)
    jobs = build_jobs(params, tmp_path / "params.yaml", 1, tmp_path, 2, labeler_beside=2,
                      evaluations_after_training=True)
    seconds = {job.name: {"train": 280.0, "evaluate": 60.0}.get(job.name.split()[0], 8.0)
               for job in jobs}
    times = simulate(jobs, 8, seconds)
    trained = max(end for name, (_, end) in times.items()
                  if name.startswith(("train ", "pseudo-label ")))
    evaluations = {name: start for name, (start, _) in times.items()
                   if name.startswith("evaluate")}
    assert len(evaluations) == 12 and min(evaluations.values()) == trained
    chain = ["split", "train mt", "pseudo-label mt", "train wscat"]
    assert [b for a, b in zip(chain, chain[1:]) if times[b][0] != times[a][1]] == []
    assert min(start for name, (start, _) in times.items() if name.startswith("curves")) < trained

def _proxy_script(tmp: Path, base: Path, npz: Path, results: Path, out: Path,
                  *extra: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The script on the tiny proxy; `prefix` goes before it (`timeout 10`)."""
    return subprocess.run(
        [*prefix, sys.executable, str(ROOT / "benchmarks/cifar10_proxy.py"), "--params", str(base),
         "--npz", str(npz), "--seed", "1", "--jobs", "2", "--threads", "1",
         "--evaluations", "beside", "--results", str(results), "--out", str(out), *extra],
        cwd=tmp, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def proxy_run(archive, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One call of the script on the tiny proxy: three of the six methods (every kind of step,
    and TRADES for the paired comparison with WSCAT; the six ran by hand on the same config),
    evaluations beside the trainings and each extra part beside its core part, as under MPS."""
    raw, md5 = archive
    tmp = tmp_path_factory.mktemp("proxy")
    params = tiny_proxy_params(raw, md5, ["trades", "mt", "wscat"])
    base = tmp / "params.yaml"
    base.write_text(yaml.safe_dump(params, sort_keys=False))
    npz = _npz_of(load_dataset(PROXY, load_params(base)["datasets"][PROXY]), tmp / "p.npz")
    out, results = tmp / "out", tmp / "results"
    result = _proxy_script(tmp, base, npz, results, out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"tmp": tmp, "base": base, "npz": npz, "out": out, "results": results}


def _unpacked(out: Path, into: Path) -> Path:
    """OUT/seed1.tar.gz unpacked into `into` (as on the session's machine); its seed1/ folder."""
    with tarfile.open(out / "seed1.tar.gz") as tar:
        names = tar.getnames()
        assert all(name == "seed1" or name.startswith("seed1/") for name in names), names
        tar.extractall(into, filter="data")
    return into / "seed1"


@pytest.mark.slow
def test_what_the_run_leaves_in_out_comes_back_from_the_lent_machine(proxy_run) -> None:
    """The device returns at most 8 files from OUT, none deeper than two folders, each at most
    16 MiB and plainly named: the first H100 seed lost its metrics to the depth rule, so OUT
    holds files only (the seed's folder as one tarball), and the checkpoint for profiling."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import OUT_FILE_BYTES_MAX, OUT_FILES_MAX

    out = proxy_run["out"]
    entries = sorted(path.name for path in out.iterdir())
    assert entries == ["progress.log", "results.tar.gz", "seed1.tar.gz", "summary.md",
                       "wscat-seed1-best.pt"]
    assert all((out / name).is_file() for name in entries) and len(entries) <= OUT_FILES_MAX
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) for name in entries)
    assert all((out / name).stat().st_size <= OUT_FILE_BYTES_MAX for name in entries)
    state = torch.load(out / "wscat-seed1-best.pt", map_location="cpu", weights_only=True)
    assert state  # a checkpoint the project's loaders read


@pytest.mark.slow
def test_the_one_call_script_runs_the_tiny_proxy_end_to_end(proxy_run) -> None:
    out, results = proxy_run["out"], proxy_run["results"]
    used = yaml.safe_load((results / "proxy/params.yaml").read_text())
    assert used["datasets"][PROXY]["source"] == "npz"
    assert used["experiments"][PROXY]["seeds"] == [1]
    with open(results / f"tables/{PROXY}.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert Counter(row["metric"] for row in rows)["Mean"] == 3
    with open(results / f"paper/{PROXY}/Tab-RQ1-CIFAR10-vs-paper.csv", newline="") as handle:
        compared = list(csv.DictReader(handle))
    wscat = {row["metric"]: row for row in compared if row["method"] == "WSCAT"}
    # Beside the paper's Mean, ours over AA-paper as the paper's (every run has its extras).
    assert "Mean" not in wscat and "AA-paper" in wscat["Mean-paper"]["note"]
    assert wscat["Mean-paper"]["paper"] == "59.4" and wscat["Mean-paper"]["model"] == "WRN-10-1"
    summary = (out / "summary.md").read_text()
    assert "| WSCAT |" in summary and "| failed |" not in summary
    assert "pseudo-label accuracy of mt" in summary
    counts = summary.split("## Tab-datasets")[1].split("##")[0]  # images, classes: whole
    assert "| 10 |" in counts and ".00" not in counts, counts
    with tarfile.open(out / "results.tar.gz") as tar:
        names = tar.getnames()
    assert f"results/curves/{PROXY}/wrn-10-1/wscat/seed1.png" in names
    assert f"results/metrics/{PROXY}/wrn-10-1/mt/seed1.json" in names
    assert not [name for name in names if name.endswith(".pt")]
    assert "done train wscat" in (out / "progress.log").read_text()
    # Mean Teacher's own schedule (training.<dataset>.per_method): 2 epochs against the others' 1.
    logs = {m: (results / f"models/{PROXY}/wrn-10-1/{m}/seed1/train_log.csv").read_text()
            for m in ("trades", "mt", "wscat")}
    assert {m: len(text.splitlines()) - 1 for m, text in logs.items()} == {
        "trades": 1, "mt": 2, "wscat": 1}
    assert "1 epochs (mt: 2)" in summary
    assert ("- schedule: 2 steps at once (--jobs), 1 threads each; labeler chains first; "
            "evaluations beside the trainings") in summary  # --evaluations beside, as under MPS
    # No extra part started before its core part (whether it then ran beside it, and waited for
    # its file, depends on the timings; tests/unit/test_extra_beside_core.py runs that case).
    progress = (out / "progress.log").read_text()
    at = {line.split("] ", 1)[1]: number for number, line in enumerate(progress.splitlines())
          if "] " in line}
    assert all(at[f"start evaluate {m}"] < at[f"start evaluate-extra {m}"]
               for m in ("trades", "mt", "wscat")), progress
    # OUT/seed1.tar.gz holds seed1/, what is committed as benchmarks/results/cifar10-proxy/seed1/,
    # at the places results/ has it (metrics with per-image flags and manifests, train logs,
    # pseudo-label reports), with the params, the summary, the progress and run.json; no
    # checkpoint, no npz.
    folder = _unpacked(out, proxy_run["tmp"] / "unpacked")
    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*")
                   if path.is_file())
    runs = [f"{kind}/{PROXY}/wrn-10-1/{m}/seed1{end}" for m in ("mt", "trades", "wscat")
            for kind, end in (("metrics", ".json"), ("metrics", "-extra.json"),
                              ("models", "/train_log.csv"))]
    assert files == sorted([*runs, f"pseudo/{PROXY}/wrn-10-1/mt/seed1.json", "params.yaml",
                            "progress.log", "run.json", "summary.md"])
    assert (folder / "params.yaml").read_text() == (results / "proxy/params.yaml").read_text()
    assert "per_image" in json.loads((folder / runs[0]).read_text())
    assert sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) < 100_000
    record = json.loads((folder / "run.json").read_text())
    assert record["complete"] and record["one_call"] and record["seed"] == 1
    assert [step["name"] for step in record["steps"]][:3] == ["split", "train mt",
                                                              "pseudo-label mt"]


@pytest.mark.slow
def test_a_second_call_keeps_every_finished_step(proxy_run) -> None:
    """Rerunning the command on the same results runs nothing again; other params stop it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import build_jobs, epoch_note

    tmp, results = proxy_run["tmp"], proxy_run["results"]
    params = load_params(results / "proxy/params.yaml")
    jobs = build_jobs(params, results / "proxy/params.yaml", 1, results, 1)
    assert all(job.outputs and all(path.is_file() for path in job.outputs) for job in jobs)
    train = next(job for job in jobs if job.name == "train wscat")
    assert epoch_note(train, 1) == "(epoch 1/1 done)"  # the finished run's own files
    before = {path: path.stat().st_mtime_ns for job in jobs for path in job.outputs}
    logs = {job.log: job.log.read_text() for job in jobs}
    again = tmp / "out-again"
    result = _proxy_script(tmp, proxy_run["base"], proxy_run["npz"], results, again)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1].endswith(f"/{PROXY}/ and commit seed1/")
    progress = (again / "progress.log").read_text()
    assert " start " not in progress
    assert sorted(line.split("] ", 1)[1] for line in progress.splitlines() if "] kept " in line
                  ) == sorted(f"kept {job.name} (outputs exist)" for job in jobs)
    assert f"{len(jobs)} of {len(jobs)} steps done in 0 s ({len(jobs)} kept" in progress
    assert {path: path.stat().st_mtime_ns for path in before} == before
    assert {log: log.read_text() for log in logs} == logs  # the first call's step logs stay
    summary = (again / "summary.md").read_text()
    first = json.loads((results / "proxy/calls.json").read_text())[0]["steps"]
    assert all(f"| {job.name} | kept (call 1) | {first[job.name]['seconds']:.0f} |" in summary
               for job in jobs)  # the seconds of the call that did it, not this one's 0
    assert "| WSCAT |" in summary and "did not run again" in summary
    with tarfile.open(again / "results.tar.gz") as tar:
        assert f"results/metrics/{PROXY}/wrn-10-1/mt/seed1.json" in tar.getnames()
    folder = _unpacked(again, tmp / "unpacked-again")
    record = json.loads((folder / "run.json").read_text())
    assert record["complete"] and record["one_call"]  # every step done by the first call
    every_call = (folder / "progress.log").read_text()  # both calls' lines, in order
    assert every_call.index("] start train wscat") < every_call.index("] kept train wscat")
    with tarfile.open(again / "results.tar.gz") as tar:  # not the first call's staged seed1/
        assert not [name for name in tar.getnames() if name.startswith("results/proxy/seed")]
    assert [call["call"] for call in record["calls"]] == [1, 2]
    assert all(step["call"] == 1 and step["seconds"] == first[step["name"]]["seconds"]
               for step in record["steps"])
    assert (folder / f"metrics/{PROXY}/wrn-10-1/mt/seed1.json").read_bytes() == (
        results / f"metrics/{PROXY}/wrn-10-1/mt/seed1.json").read_bytes()
    # Other params (here --epochs) than the results were made with: stop, keep nothing stale.
    other = _proxy_script(tmp, proxy_run["base"], proxy_run["npz"], results, tmp / "out-other",
                          "--epochs", "2")
    assert other.returncode != 0 and "made with other params" in other.stderr
    assert {path: path.stat().st_mtime_ns for path in before} == before


def test_a_seed_finished_by_a_second_call_keeps_the_first_calls_seconds(tmp_path: Path) -> None:
    """Call 1 is cut at its deadline, call 2 finishes the seed: run.json gives each step the
    seconds and the number of the call that did it, both calls' wall times, and one_call false;
    proxy_table's line for the seed says two calls and adds their walls."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import GpuWatch, record_call, run_record
    from jobrunner import Job
    from proxy_table import _runs_line

    (tmp_path / "proxy").mkdir()
    cut = [Job("split", [], status="done", seconds=5.0),
           Job("train mt", [], status="killed", seconds=560.0), Job("table", [], status="skipped")]
    record_call(tmp_path, cut, 570.0)
    rest = [Job("split", [], status="done", kept=True),
            Job("train mt", [], status="done", seconds=40.0), Job("table", [], status="done",
                                                                     seconds=2.0)]
    calls = record_call(tmp_path, rest, 45.0)
    record = run_record(rest, 1, 45.0, {}, GpuWatch(rest), calls)
    assert record["complete"] and not record["one_call"]
    assert record["calls"] == [{"call": 1, "wall_s": 570.0}, {"call": 2, "wall_s": 45.0}]
    assert [(s["name"], s["call"], s["seconds"]) for s in record["steps"]] == [
        ("split", 1, 5.0), ("train mt", 2, 40.0), ("table", 2, 2.0)]
    (tmp_path / "seed1").mkdir()
    (tmp_path / "seed1/run.json").write_text(json.dumps(record))
    line = _runs_line(1, tmp_path / "seed1", [])
    assert "3 of 3 steps done, in 2 calls (570 s + 45 s), 615 s on" in line, line


def test_a_run_cut_before_its_first_result_still_returns_its_record(tmp_path: Path) -> None:
    """A call killed at its deadline before any step wrote a file for the seed folder (on a CPU,
    the real proxy's first epoch outlasts a short deadline) still leaves seed1.tar.gz with its
    params, summary and run.json; it once stopped on a traceback with no tarball."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import publish

    results, out = tmp_path / "results", tmp_path / "out"
    (results / "proxy").mkdir(parents=True)
    out.mkdir()
    params_file = results / "proxy/params.yaml"
    params_file.write_text("seeds: [1]\n")
    (out / "summary.md").write_text("1 of 31 steps done\n")
    record = {"seed": 1, "complete": False, "one_call": False}
    tarball = publish(params_file, results, 1, out, record, [])
    assert tarball == out / "seed1.tar.gz"
    folder = _unpacked(out, tmp_path / "unpacked")
    assert sorted(path.name for path in folder.iterdir()) == ["params.yaml", "run.json",
                                                              "summary.md"]
    assert json.loads((folder / "run.json").read_text()) == record
    assert (folder / "params.yaml").read_text() == "seeds: [1]\n"


def test_the_epoch_note_reads_a_training_in_progress(tmp_path: Path) -> None:
    """Mid-training there is no train_log.csv yet: the note reads the DVCLive summary that the
    trainer's logger (the same functions) rewrites after every epoch."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import epoch_note
    from jobrunner import Job

    from wscat.training.log import log_epoch, open_curves, write_log

    out_dir = tmp_path / "models/run"
    job = Job("train wscat", ["wscat", "train", "--out-dir", str(out_dir), "--threads", "1"])
    assert epoch_note(job, 15) == "(epoch 1)"
    live = open_curves(out_dir / "dvclive", [])
    history = [{"epoch": epoch, "loss": 1.0 / epoch, "seconds": 3.0} for epoch in (1, 2, 3)]
    for row in history[:2]:
        log_epoch(live, row)
    assert not (out_dir / "train_log.csv").exists()
    assert epoch_note(job, 15) == "(epoch 2/15 done)"
    assert epoch_note(job) == "(epoch 2 done)"
    # A resumed run rebuilds its curves from the checkpoint's history, then goes on.
    live = open_curves(out_dir / "dvclive", history[:2])
    log_epoch(live, history[2])
    assert epoch_note(job, 15) == "(epoch 3/15 done)"
    # Finished: train_log.csv (its rows, not its header) where the curves are gone.
    write_log(out_dir / "train_log.csv", history)
    (out_dir / "dvclive/metrics.json").unlink()
    assert epoch_note(job, 15) == "(epoch 3/15 done)"
    (out_dir / "dvclive/metrics.json").write_text("{\"lr\": 0.1, ")  # caught mid-rewrite
    assert epoch_note(job, 15) == "(epoch 3/15 done)"
    assert epoch_note(Job("evaluate wscat", ["wscat", "evaluate"])) == ""


def test_the_job_runner_skips_after_a_failure_and_stops_at_its_deadline(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from jobrunner import Job, run_jobs

    python = [sys.executable, "-c"]
    jobs = [Job("ok", [*python, "pass"]), Job("fails", [*python, "raise SystemExit(3)"], ["ok"]),
            Job("needs the failed", [*python, "pass"], ["fails"]),
            Job("slow", [*python, "import time; time.sleep(30)"], ["ok"])]
    for job in jobs:
        job.log = tmp_path / f"{job.name}.log"
    said: list[str] = []
    run_jobs(jobs, parallel=2, say=said.append, deadline_s=3.0)
    assert [job.status for job in jobs] == ["done", "failed", "skipped", "killed"]
    assert any("killed slow" in line for line in said)


def test_the_job_runner_keeps_the_jobs_whose_outputs_exist(tmp_path: Path) -> None:
    """A job is kept (done, 0 s, not run) when its outputs exist and nothing it needs ran again;
    a job after one that ran reruns, and one without outputs always runs."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from jobrunner import Job, run_jobs

    def writes(name: str) -> list[str]:  # a job that leaves a trace of having run
        return [sys.executable, "-c", f"open({str(tmp_path / name)!r}, 'w').write('ran')"]

    for name in ("a.out", "c.out", "first.out", "later.out"):
        (tmp_path / name).write_text("earlier")
    jobs = [Job("later", writes("later.ran"), ["first"], [tmp_path / "later.out"]),
            Job("first", writes("first.ran"), [], [tmp_path / "first.out"]),
            Job("a", writes("a.ran"), [], [tmp_path / "a.out"]),
            Job("b", writes("b.out"), ["a"], [tmp_path / "b.out"]),
            Job("c", writes("c.ran"), ["b"], [tmp_path / "c.out"]),
            Job("d", writes("d.ran"), ["a"])]
    for job in jobs:
        job.log = tmp_path / f"{job.name}.log"
    said: list[str] = []
    run_jobs(jobs, parallel=2, say=said.append)
    assert [(job.name, job.status, job.kept) for job in jobs] == [
        ("later", "done", True), ("first", "done", True), ("a", "done", True),
        ("b", "done", False), ("c", "done", False), ("d", "done", False)]
    assert sorted(path.name for path in tmp_path.glob("*.ran")) == ["c.ran", "d.ran"]
    assert (tmp_path / "b.out").read_text() == "ran"
    assert [line.split("] ", 1)[1] for line in said if "] kept " in line] == [
        "kept first (outputs exist)", "kept a (outputs exist)", "kept later (outputs exist)"]
    assert all(job.seconds == 0 for job in jobs if job.kept)


def test_the_labeler_probe_configures_each_run(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from mt_labeler import configure

    base = before_the_choice(proxy_params_of_real(tmp_path))
    params, method = configure(base, "mt:45:average")
    assert method == "mt"
    assert training_for(params, PROXY, "mt")["epochs"] == 45
    assert training_for(params, PROXY, "mt")["ema_buffers"] == "average"
    assert params["methods"]["mt"]["per_dataset"][PROXY]["rampup_epochs"] == 15
    # A run's knobs go over params.yaml's own per-method ones: Mean Teacher keeps the release's
    # plain cosine (no warm-up) unless the run names a warm-up of its own.
    assert training_for(base, PROXY, "mt")["warmup_fraction"] == 0.0
    assert training_for(params, PROXY, "mt")["warmup_fraction"] == 0.0
    params, _ = configure(base, "mt:100:copy:0.025")
    assert training_for(params, PROXY, "mt")["warmup_fraction"] == 0.025
    assert training_for(params, PROXY, "mt")["epochs"] == 100
    params, method = configure(base, "standard")
    assert method == "standard" and training_for(params, PROXY, "standard")["epochs"] == 15
    assert params["training"][PROXY] == base["training"][PROXY]
    assert "ema_buffers" not in training_for(params, PROXY, "mt")
    # On digits: 'mt' is the pipeline's own labeler; the ramp-up keeps its share of the run.
    digits = real_params()
    params, method = configure(digits, "mt", "digits")
    assert method == "mt" and params["training"]["digits"] == digits["training"]["digits"]
    params, _ = configure(digits, "mt:40:copy", "digits")
    own = digits["methods"]["mt"]["per_dataset"]["digits"]["rampup_epochs"]
    expected = round(40 * own / training_for(digits, "digits", "mt")["epochs"])
    assert params["methods"]["mt"]["per_dataset"]["digits"]["rampup_epochs"] == expected
    assert training_for(params, "digits", "mt")["epochs"] == 40


def proxy_params_of_real(tmp_path: Path) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import proxy_params

    return proxy_params(real_params(), seed=1, npz=tmp_path / "p.npz", epochs=None)


def before_the_choice(params: dict) -> dict:
    """`params` as they were before the labeler choice: both labelers on the tier's 15 epochs,
    Mean Teacher's ramp-up 5 of them (its plain cosine stays: fixed a priori before the choice)."""
    params = yaml.safe_load(yaml.safe_dump(params))
    params["training"][PROXY]["per_method"] = {"mt": {"warmup_fraction": 0.0}}
    params["methods"]["mt"]["per_dataset"][PROXY]["rampup_epochs"] = 5
    return params


def _as_seed(src: Path, root: Path, seed: int) -> Path:
    """The tiny run's unpacked seed1/ as the folder of seed `seed`: its paths, the params' seed and
    each file's 'seed' rewritten, and every run's per-image flags drawn anew (seeded; the tiny
    model gets every image wrong, so all seeds would tie at 0) with the five accuracies and their
    harmonic Mean recomputed from them, as `wscat evaluate` writes them."""
    from wscat.evaluation import ATTACKS, harmonic_mean

    rng = np.random.default_rng(seed)
    folder = root / f"seed{seed}"
    for path in sorted(src.rglob("*")):
        if not path.is_file():
            continue
        target = folder / re.sub(r"\bseed1\b", f"seed{seed}", path.relative_to(src).as_posix())
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name == "params.yaml":
            params = yaml.safe_load(path.read_text())
            params["experiments"][PROXY]["seeds"] = [seed]
            target.write_text(yaml.safe_dump(params, sort_keys=False))
        elif path.suffix == ".json" and "seed" in (data := json.loads(path.read_text())):
            data["seed"] = seed
            correct = (data.get("per_image") or {}).get("correct")
            if correct:
                for attack, p in zip(ATTACKS, (0.8, 0.6, 0.5, 0.5, 0.5)):
                    correct[attack] = "".join("1" if hit else "0" for hit in
                                              rng.random(len(correct[attack])) < p)
                    data["accuracy"][attack] = 100.0 * correct[attack].count("1") / len(
                        correct[attack])
                data["accuracy"]["Mean"] = round(harmonic_mean(
                    [data["accuracy"][a] for a in ATTACKS]), 4)
            target.write_text(json.dumps(data))
        else:
            shutil.copyfile(path, target)
    return folder


@pytest.fixture(scope="module")
def seeds_dir(proxy_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("seeds")
    for seed in (1, 2, 3):
        _as_seed(_unpacked(proxy_run["out"], proxy_run["tmp"] / "unpacked-seeds"), root, seed)
    return root


def _render(capsys, *args: str) -> tuple[int, str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from proxy_table import main

    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.mark.slow
def test_the_table_of_three_seeds_folders(seeds_dir: Path, tmp_path: Path, capsys) -> None:
    """benchmarks/proxy_table.py on three seeds' folders: Table 2 (mean and std over the seeds as
    `wscat table` computes them), the paired comparison with WSCAT, the companion beside the
    paper's CIFAR-10 numbers, and a page that says which seeds are in."""
    from wscat.report.table import collect, summarise

    out = tmp_path / "table"
    assert _render(capsys, "--seeds-dir", str(seeds_dir), "--out", str(out)) == (0, "")
    assert sorted(path.name for path in out.iterdir()) == sorted(
        [f"{PROXY}{end}" for end in (".tex", ".csv", ".md", ".json", "-paired.csv",
                                     "-paired.tex")]
        + [f"Tab-RQ1-CIFAR10{end}" for end in (".tex", ".csv", "-vs-paper.tex",
                                               "-vs-paper.csv")] + ["table.md"]
        + [f"{name}.{ext}" for name in ("paired-vs-wscat", "validation-curves",
                                        "robustness-curves")
           for ext in ("png", "pdf", "csv")])
    files = sorted(seeds_dir.glob(f"seed*/metrics/{PROXY}/wrn-10-1/*/seed*.json"))
    assert len(files) == 18
    expected = summarise(collect(files), ["trades", "mt", "wscat"]).set_index(["method", "metric"])
    with open(out / "Tab-RQ1-CIFAR10.csv", newline="") as handle:
        table = {(row["method"], row["metric"]): row for row in csv.DictReader(handle)}
    means = [json.loads(path.read_text())["accuracy"]["Mean"] for path in files
             if path.parent.name == "wscat" and not path.stem.endswith("extra")]
    assert len(set(means)) > 1  # the seeds differ
    wscat = table[("WSCAT", "Mean")]
    assert float(wscat["mean"]) == pytest.approx(float(np.mean(means)), abs=0.005)
    assert float(wscat["std"]) == pytest.approx(expected.loc[("wscat", "Mean"), "std"], abs=0.005)
    assert wscat["n_seeds"] == "3" and wscat["model"] == "WRN-10-1"
    with open(out / f"{PROXY}-paired.csv", newline="") as handle:
        paired = list(csv.DictReader(handle))
    assert [(row["method"], row["reference"], row["n_seeds"]) for row in paired] == [
        ("TRADES", "WSCAT", "3")]
    with open(out / "Tab-RQ1-CIFAR10-vs-paper.csv", newline="") as handle:
        companion = {(row["method"], row["metric"]): row for row in csv.DictReader(handle)}
    # Beside the paper's Mean (over its AutoAttack): ours over AA-paper, per seed, then the mean.
    accuracy = {(path.parent.name, path.stem): json.loads(path.read_text())["accuracy"]
                for path in files}
    paper_means = [harmonic_mean([accuracy[("wscat", stem)][m] for m in ATTACKS[:4]]
                                 + [accuracy[("wscat", stem + "-extra")]["AA-paper"]])
                   for (method, stem) in accuracy
                   if method == "wscat" and not stem.endswith("-extra")]
    assert len(paper_means) == 3
    assert float(table[("WSCAT", "Mean-paper")]["mean"]) == pytest.approx(
        float(np.mean(paper_means)), abs=0.005)
    assert ("WSCAT", "Mean") not in companion  # our Mean is over the standard AA
    assert companion[("WSCAT", "Mean-paper")]["paper"] == "59.4"
    assert float(companion[("WSCAT", "Mean-paper")]["ours"]) == float(
        table[("WSCAT", "Mean-paper")]["mean"])
    assert companion[("TRADES", "Mean-paper")]["paper"] == "30.62"
    page = (out / "table.md").read_text()
    assert "All three seeds of the tier are in (1, 2, 3): this is the three-seed table." in page
    assert "| TRADES |" in page and "| WSCAT | Mean-paper |" in page and "| MT |" in page
    assert "over AA-paper, as the paper's Mean" in page  # the companion's note, on the page too
    assert "over seeds 1, 2, 3" in page
    # The picture of the paired comparison: its numbers are the paired CSV's (Mean) and the
    # per-attack section's; x marks the paper's own difference (TRADES - WSCAT, CIFAR-10).
    with open(out / "paired-vs-wscat.csv", newline="") as handle:
        plotted = {row["column"]: row for row in csv.DictReader(handle)}
    assert list(plotted) == [*ATTACKS, "Mean"] and {r["method"] for r in plotted.values()} == {
        "TRADES"}
    assert [float(plotted["Mean"][k]) for k in ("difference", "ci_low", "ci_high")] == [
        pytest.approx(float(paired[0][k]), abs=0.005) for k in ("delta_mean", "ci_low", "ci_high")]
    cells = re.search(r"^\| TRADES \|(.*)\|$", page[page.index("*Each attack on its own"):],
                      re.MULTILINE).group(1).split("|")
    for attack, cell in zip(ATTACKS, cells):
        numbers = [float(n) for n in re.findall(r"[-+]\d+\.\d+", cell)]
        assert numbers == [pytest.approx(float(plotted[attack][k]), abs=0.005)
                           for k in ("difference", "ci_low", "ci_high")], (attack, cell)
    assert plotted["Mean"]["paper_difference"] == "-28.78"  # 30.62 - 59.4
    assert plotted["AA"]["paper_difference"] == "-26.79"  # 25.44 - 52.23
    assert "![The paired differences from WSCAT" in page and "(paired-vs-wscat.png)" in page
    assert (out / "paired-vs-wscat.png").read_bytes().startswith(b"\x89PNG")
    # Every run's validation curve: the train logs' numbers, each run's checkpoint epoch marked
    # once (Mean Teacher's the last, selection: last; the others' their best score, ties later).
    with open(out / "validation-curves.csv", newline="") as handle:
        curves = list(csv.DictReader(handle))
    runs = {(row["method"], row["seed"]) for row in curves}
    assert runs == {(m, str(s)) for m in ("TRADES", "MT", "WSCAT") for s in (1, 2, 3)}
    for method, seed in runs:
        log = list(csv.DictReader(open(seeds_dir / f"seed{seed}/models/{PROXY}/wrn-10-1/"
                                       f"{method.lower()}/seed{seed}/train_log.csv")))
        mine = [row for row in curves if (row["method"], row["seed"]) == (method, seed)]
        column = "val_natural" if method == "MT" else "val_cw"
        assert {row["metric"] for row in mine} == {column}
        assert [float(row["accuracy"]) for row in mine] == [float(r[column]) for r in log]
        marked = [int(row["epoch"]) for row in mine if row["checkpoint"] == "True"]
        scores = [float(r["score"]) for r in log]
        best = max(i for i, v in enumerate(scores) if v == max(scores)) + 1
        assert marked == [len(log) if method == "MT" else best], (method, seed)
    assert "(validation-curves.png)" in page
    # Accuracy against eps and steps: every run's gradient-masking numbers, as its extra file has.
    with open(out / "robustness-curves.csv", newline="") as handle:
        robustness = list(csv.DictReader(handle))
    points = 0
    for path in files:
        if not path.stem.endswith("-extra"):
            continue
        checks = json.loads(path.read_text())["checks"]
        method = {"trades": "TRADES", "mt": "MT", "wscat": "WSCAT"}[path.parent.name]
        seed = path.stem.removesuffix("-extra").removeprefix("seed")
        for check, key in (("pgd_eps_monotone", "eps"), ("pgd_steps_monotone", "steps")):
            mine = [row for row in robustness if (row["method"], row["seed"], row["panel"])
                    == (method, seed, key)]
            assert [(float(r["x"]), float(r["accuracy"])) for r in mine] == list(
                zip(checks[check][key], checks[check]["accuracy"])), (method, seed, key)
            points += len(mine)
    assert len(robustness) == points > 9 * 2 and "(robustness-curves.png)" in page
    # Issue 21's answer is per attack too: the paired interval on each attack alone.
    section = page[page.index("*Each attack on its own"):]
    header = next(line for line in section.splitlines() if line.startswith("| method |"))
    assert header == "| method | " + " | ".join(ATTACKS) + " |"
    assert re.search(r"^\| TRADES \|( [^|]*\[[^|]*\]\**? \|){5}$", section, re.MULTILINE), section
    assert not re.search(r"\bnan\b", page, re.IGNORECASE)


@pytest.mark.slow
def _render_page(capsys, seeds: Path, out: Path) -> str:
    """The table.md rendered from `seeds` into `out`."""
    assert _render(capsys, "--seeds-dir", str(seeds), "--out", str(out)) == (0, "")
    return (out / "table.md").read_text()


def test_the_table_says_which_seeds_are_missing_and_refuses_bad_folders(
        seeds_dir: Path, tmp_path: Path, capsys) -> None:
    two = tmp_path / "two"
    for seed in (1, 2):
        shutil.copytree(seeds_dir / f"seed{seed}", two / f"seed{seed}")
    out = tmp_path / "table"
    assert _render(capsys, "--seeds-dir", str(two), "--out", str(out)) == (0, "")
    page = (out / "table.md").read_text()
    assert "Seeds in: 1, 2 (2 of 3). Still missing: seed 3. This is not the three-seed table." \
        in page
    assert "this is the three-seed table" not in page.lower().replace("not the three", "")
    with open(out / f"{PROXY}-paired.csv", newline="") as handle:
        assert [row["n_seeds"] for row in csv.DictReader(handle)] == ["2"]
    before = {path: path.read_bytes() for path in out.iterdir()}

    def refused(folder: Path, *extra: str) -> str:
        code, err = _render(capsys, "--seeds-dir", str(folder), "--out", str(out), *extra)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert {path: path.read_bytes() for path in out.iterdir()} == before  # nothing written
        return err

    assert "seed 3 of 1, 2, 3 is missing" in refused(two, "--require-all")
    assert "no seed{s}/ folder" in refused(tmp_path / "two/seed1")
    params = two / "seed2/params.yaml"
    saved = params.read_text()
    changed = yaml.safe_load(saved)
    changed["training"][PROXY]["epochs"] = 2
    params.write_text(yaml.safe_dump(changed, sort_keys=False))
    assert ("seed 2 was run with other params than seed 1 (training of trades.training.epochs)"
            in refused(two))
    changed = yaml.safe_load(saved)  # a section the proxy's steps do not read: the same table
    changed["training"]["digits"]["epochs"] = 9
    params.write_text(yaml.safe_dump(changed, sort_keys=False))
    assert _render(capsys, "--seeds-dir", str(two), "--out", str(out)) == (0, "")
    before = {path: path.read_bytes() for path in out.iterdir()}
    params.write_text(saved)
    record_path = two / "seed2/run.json"
    record = record_path.read_text()
    record_path.write_text(json.dumps({**json.loads(record), "complete": False}))
    assert "NOT COMPLETE" in _render_page(capsys, two, tmp_path / "incomplete")
    assert "seed2/run.json: the record of a call that did not finish" in refused(
        two, "--expect", "1", "2", "--require-all")
    record_path.unlink()
    assert "seed2/run.json: missing" in refused(two, "--expect", "1", "2", "--require-all")
    record_path.write_text(record)
    metrics = two / f"seed2/metrics/{PROXY}/wrn-10-1/trades/seed2.json"  # a call at another commit
    kept = metrics.read_text()
    data = json.loads(kept)
    ran_at = data["manifest"]["versions"]["git"]
    data["manifest"]["versions"]["git"] = "0000000"
    metrics.write_text(json.dumps(data))
    page = _render_page(capsys, two, tmp_path / "commits")
    assert f"code at 0000000, {ran_at}" in page and "measured at 2 code commits" in page
    metrics.write_text(kept)
    shutil.copytree(two / "seed1", two / "seed4")  # a run's folder under another seed's name
    assert "holds seed 4, not among the expected seeds 1, 2, 3" in refused(two)
    assert "a run of seeds [1], not of seed 4" in refused(two, "--expect", "1", "2", "3", "4")
    shutil.rmtree(two / "seed4")
    shutil.copytree(two / "seed1", two / "seed01")  # the same seed twice: never one dropped
    assert "seed01: name it seed1/" in refused(two)
    shutil.rmtree(two / "seed01")
    record = two / "seed2/run.json"
    saved = record.read_text()
    for wall in ("NaN", "1e400", '"600"', "-3"):  # what json reads as nan, inf, text, negative
        record.write_text(re.sub(r'"wall_s": [^,}]+', f'"wall_s": {wall}', saved))
        err = refused(two)
        assert "wall_s is" in err and f"{record}: " in err
    record.write_text(saved)
    # Files of a seed's folder that are there but broken: one line naming the file.
    for name, broken, says in (
            (f"metrics/{PROXY}/wrn-10-1/trades/seed2.json", '{"seed": 2, "acc', "not a readable"),
            ("run.json", '{"steps": [{"done": 1}]}', "lack a status or kept field"),
            (f"pseudo/{PROXY}/wrn-10-1/mt/seed2.json", '{"seed": 2}', "without accuracy"),
            (f"models/{PROXY}/wrn-10-1/wscat/seed2/train_log.csv", "epoch,loss\n1,2.0\n",
             "lacks the val_* column")):
        path = two / "seed2" / name
        saved = path.read_text()
        path.write_text(broken)
        err = refused(two)
        assert str(path) in err and says in err
        path.write_text(saved)
    (two / "seed2/params.yaml").rename(two / "seed2/params.yml")
    err = refused(two)
    assert "params.yaml: missing, so" in err and "--params" not in err
    (two / "seed2/params.yml").rename(two / "seed2/params.yaml")
    # A tarball unpacked one folder too deep (seed2/seed2/), or one too high (beside `two`).
    (two / "seed2").rename(tmp_path / "seed2")
    (two / "seed2").mkdir()
    (tmp_path / "seed2").rename(two / "seed2/seed2")
    err = refused(two)
    assert "one folder too deep" in err and f"-C {two}/" in err, err
    (two / "seed2/seed2").rename(tmp_path / "seed2")
    (two / "seed2").rmdir()
    err = refused(two, "--expect", "1", "2")
    assert f"{tmp_path / 'seed2'}: seed 2's folder, one folder above {two}" in err, err
    (tmp_path / "seed2").rename(two / "seed2")
    code, err = _render(capsys, "--seeds-dir", str(two), "--out", str(out / "table.md"))
    assert code == 2 and "is a file; pass a folder" in err
    log = two / f"seed2/models/{PROXY}/wrn-10-1/mt/seed2/train_log.csv"
    log.rename(log.with_suffix(".bak"))
    assert f"{log}: missing, so seed 2 is not complete" in refused(two)
    log.with_suffix(".bak").rename(log)
    (two / f"seed2/metrics/{PROXY}/wrn-10-1/trades/seed2-extra.json").unlink()
    assert "seed2-extra.json: missing, so seed 2 is not complete" in refused(two)
    # One seed: no interval, so no picture; the two seeds' one in `out` goes rather than stay.
    assert (out / "paired-vs-wscat.png").is_file()
    shutil.rmtree(two / "seed2")
    assert _render(capsys, "--seeds-dir", str(two), "--out", str(out)) == (0, "")
    assert not list(out.glob("paired-vs-wscat.*"))
    assert "paired-vs-wscat.png" not in (out / "table.md").read_text()
    assert "(validation-curves.png)" in (out / "table.md").read_text()  # one seed has curves


def test_the_one_call_script_refuses_bad_input_before_writing(tmp_path: Path) -> None:
    """A bad schedule, seed, deadline, path, npz or params file: one line, exit 2, nothing
    written (a missing npz once ran 0 of its steps and said to commit the seed; --seed -1 left
    its params behind; a garbled params file was a 56-line YAML traceback; a file that is no
    npz passed --check with no committed seeds, to be found out on the device)."""
    (tmp_path / "a-file").write_text("")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "random.npz").write_bytes(bytes(range(256)) * 20)
    np.savez(inputs / "other.npz", a=np.zeros(3))
    (inputs / "garbled.yaml").write_text("a: [\n")
    (inputs / "binary.yaml").write_bytes(b"\xef\xff\n")
    (inputs / "two-keys.yaml").write_text("a: 1\na: 2\n")
    for flag, value, says in (
            ("--jobs", "0", ""), ("--labeler-beside", "-1", ""), ("--gib-per-step", "0", ""),
            ("--seed", "-1", ""), ("--seed", "abc", "not an integer"),
            ("--seed", str(2 ** 40), "outside 0..4294967295"),
            ("--deadline", "0", ""), ("--epochs", "-2", ""),
            ("--npz", str(tmp_path / "none.npz"), "no such file"),
            ("--npz", str(inputs / "random.npz"), "not an .npz file"),
            ("--npz", str(inputs / "other.npz"), "without x_train, y_train"),
            ("--params", str(tmp_path / "none.yaml"), "no such file"),
            ("--params", str(inputs / "garbled.yaml"), "is not valid YAML: line 2"),
            ("--params", str(inputs / "binary.yaml"), "is not a UTF-8 text file"),
            ("--params", str(inputs / "two-keys.yaml"), "duplicate key a"),
            ("--out", str(tmp_path / "a-file"), ""),
            ("--seeds-dir", str(tmp_path / "a-file"), "")):
        out = [] if flag == "--out" else ["--out", str(tmp_path / "out")]
        seed = [] if flag == "--seed" else ["--seed", "2"]
        check = ["--check"] if flag in ("--npz", "--params") else []  # refused by --check too
        result = subprocess.run([sys.executable, str(ROOT / "benchmarks/cifar10_proxy.py"), flag,
                                 value, *out, *seed, *check, "--results",
                                 str(tmp_path / "results")],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert re.match(rf"cifar10_proxy: error: (argument )?{flag}[ :]", result.stderr), (
            result.stderr)
        assert says in result.stderr, (says, result.stderr)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "inputs"]


@pytest.mark.slow
def test_a_seed_whose_params_would_not_join_the_committed_seeds_never_runs(proxy_run) -> None:
    """Before any step (`--check` alone, or the run itself): the params must match the
    committed seeds' in what the steps read, as benchmarks/proxy_table.py would refuse the seed
    after the run; a change elsewhere in params.yaml does not matter; a seed already committed
    is refused. Seeds 2 and 3 cost a GPU call each."""
    tmp = proxy_run["tmp"]
    committed = tmp / "committed"
    _unpacked(proxy_run["out"], committed)
    params = yaml.safe_load(proxy_run["base"].read_text())

    def check(name: str, change, npz: Path = proxy_run["npz"], *extra: str, seed: str = "2"):
        edited = copy.deepcopy(params)
        change(edited)
        base = tmp / f"{name}.yaml"
        base.write_text(yaml.safe_dump(edited, sort_keys=False))
        return subprocess.run(
            [sys.executable, str(ROOT / "benchmarks/cifar10_proxy.py"), "--params", str(base),
             "--npz", str(npz), "--seed", seed, "--seeds-dir", str(committed), "--results",
             str(tmp / f"{name}-results"), "--out", str(tmp / f"{name}-out"), *extra],
            capture_output=True, text=True, timeout=300)

    same = check("same", lambda p: None, proxy_run["npz"], "--check")
    assert same.returncode == 0 and "seed 2 may run" in same.stdout, same.stderr
    elsewhere = check("elsewhere", lambda p: p["training"]["digits"].update(epochs=7),
                      proxy_run["npz"], "--check")
    assert elsewhere.returncode == 0, elsewhere.stderr
    beta = check("beta", lambda p: p["methods"]["wscat"].update(beta=0.5))  # a run, not --check
    assert beta.returncode == 2 and beta.stderr.count("\n") == 1, beta.stderr
    assert "committed seed 1's" in beta.stderr and "method.beta" in beta.stderr
    moved = tmp / "moved" / "p.npz"
    moved.parent.mkdir()
    shutil.copyfile(proxy_run["npz"], moved)
    path = check("path", lambda p: None, moved, "--check")
    assert path.returncode == 2 and "dataset.path" in path.stderr, path.stderr
    # The same path, other images: the md5 the committed run.json records tells them apart.
    record = committed / "seed1" / "run.json"
    kept = record.read_text()
    assert json.loads(kept)["npz_md5"] == hashlib.md5(proxy_run["npz"].read_bytes()).hexdigest()
    record.write_text(json.dumps({**json.loads(kept), "npz_md5": "0" * 32}))
    replaced = check("replaced", lambda p: None, proxy_run["npz"], "--check")
    record.write_text(kept)
    assert replaced.returncode == 2 and replaced.stderr.count("\n") == 1, replaced.stderr
    assert f"committed seed 1 ran on images of md5 {'0' * 32}" in replaced.stderr
    again = check("again", lambda p: None, seed="1")  # a run, not --check: seed 1 is in
    assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr
    assert "--seed 1: seed 1 is committed already" in again.stderr, again.stderr
    assert not [p for p in tmp.iterdir() if p.name.endswith(("-results", "-out"))]


@pytest.mark.slow
def test_a_call_cut_at_its_deadline_says_not_to_commit_its_tarball(proxy_run) -> None:
    """Its tarball holds an incomplete seed: the closing line says so, on stderr, and how to
    finish it; only a complete call says to commit."""
    tmp = proxy_run["tmp"]
    cut = _proxy_script(tmp, proxy_run["base"], proxy_run["npz"], tmp / "cut-results",
                        tmp / "cut-out", "--deadline", "0.01")
    assert cut.returncode == 1, cut.stderr[-2000:]
    assert "commit" not in cut.stdout and "not complete" in cut.stderr
    assert "do not commit seed1.tar.gz" in cut.stderr.strip().splitlines()[-1]
    assert (tmp / "cut-out" / "seed1.tar.gz").is_file()


def test_the_gpu_watch_reads_nvidia_smi(tmp_path: Path, monkeypatch) -> None:
    """What the summary and run.json say of the card, from nvidia-smi's CSV (a stand-in here):
    memory in use, how busy, each running step's memory by its process id; and --jobs sized to
    the card's memory."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import GpuWatch, card_jobs
    from jobrunner import Job

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$1\" in\n"
                   "  --query-gpu=memory.total) echo 40960 ;;\n"
                   "  --query-gpu=*) echo '57, 20480, 40960' ;;\n"
                   "  --query-compute-apps=*) echo '4242, 3072'; echo '99, 512' ;;\n"
                   "esac\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    jobs = [Job("train mt", [], status="running", pid=4242), Job("split", [], status="done")]
    watch = GpuWatch(jobs)
    assert watch() == "GPU 20.0/40 GiB, 57% busy"
    assert watch.step_gib == {"train mt": 3.0} and watch.peak_gib == 20.0
    assert watch.line() == ("- GPU (nvidia-smi at each progress line): peak 20.0 GiB in use, "
                            "57% busy on average over 1 samples\n")
    cores = len(os.sched_getaffinity(0))
    assert card_jobs(1, 20.0) == (min(cores, 2), f"{cores} cores / 1 threads a step, 40 GiB of "
                                  "GPU memory / 20 GiB a step")
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert GpuWatch(jobs)() == "" and card_jobs(1, 20.0)[1] == f"{cores} cores / 1 threads a step"


def test_the_proxy_script_refuses_mps_on_where_it_cannot_run(tmp_path: Path) -> None:
    """`--mps on` without MPS: one line, exit 2, before any step runs."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    (tmp_path / "no-seeds").mkdir()  # no committed seed to match
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/cifar10_proxy.py"), "--mps",
                           "on", "--seed", "2", "--results", str(tmp_path / "results"), "--out",
                           str(tmp_path / "out"), "--seeds-dir", str(tmp_path / "no-seeds")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "cifar10_proxy: error: --mps on, but MPS is not running; run with --mps auto or off"]
    assert not (tmp_path / "results" / "logs").exists()


@pytest.mark.slow
def test_the_labeler_page_may_not_be_an_input(tmp_path: Path) -> None:
    """mt_labeler.py writes its page after hours of training: a --page that is --params or --npz
    is refused first, in one line, exit 2, the file untouched."""
    base = tmp_path / "params.yaml"
    base.write_text(yaml.safe_dump(real_params(), sort_keys=False))
    before = base.read_bytes()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/mt_labeler.py"), "--tag", "t",
                           "--params", str(base), "--page", str(base)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--page" in done.stderr
    assert base.read_bytes() == before and not list(tmp_path.glob("*.md"))


def test_the_labeler_choice_scores_the_same_with_runs_at_once(tmp_path: Path) -> None:
    """benchmarks/mt_labeler.py --jobs 2 (each run its own process; no MPS on a CPU) gives the
    same validation and pseudo-label accuracies as the same runs one after the other in this
    process (`one_run`, one thread, as the script's workers): only seconds move."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from mt_labeler import one_run

    from wscat.steps import split as split_step

    params = real_params()
    params["training"]["digits"]["epochs"] = 1
    params["training"]["digits"].pop("per_method", None)
    base = tmp_path / "params.yaml"
    base.write_text(yaml.safe_dump(params, sort_keys=False))
    runs = ["standard", "mt:1:copy"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/mt_labeler.py"), "--dataset", "digits",
         "--params", str(base), "--runs", *runs, "--jobs", "2", "--tag", "test", "--page",
         str(tmp_path / "page.md")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MPS: off (--mps auto, --device cpu)" in done.stdout
    seen = dict(re.findall(r"^seed 1 (\S+): (validation [\d.]+, pseudo-labels [\d.]+)",
                           done.stdout, re.M))
    loaded, threads = load_params(base), torch.get_num_threads()
    split_step.run(loaded, "digits", 1, tmp_path / "split.npz")
    torch.set_num_threads(1)
    try:
        for run in runs:
            own = one_run(loaded, run, "digits", "cnn", 1, tmp_path / "split.npz",
                          tmp_path / run.replace(":", "-"), torch.device("cpu"))
            assert seen[run] == (f"validation {own['validation']:.2f}, pseudo-labels "
                                 f"{own['accuracy']:.2f}"), run
    finally:
        torch.set_num_threads(threads)
    page = (tmp_path / "page.md").read_text()
    assert "## What the rule chose" in page and "- mt: **mt:1:copy** (1 epochs)" in page

def test_the_labeler_rule_picks_by_validation_and_says_what_params_yaml_needs(
        tmp_path: Path) -> None:
    """mt_labeler's `choose` is the written rule (higher validation sum, a tie to fewer epochs),
    and `overrides` names exactly the params.yaml keys that make the chosen run the pipeline's:
    set on the proxy's params, they give the run's schedule and ramp-up."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from mt_labeler import TRAINER_DEFAULTS, choose, configure, overrides

    from wscat.config import method_for, validate_params

    epochs = {"standard": 15, "standard:100": 100, "mt:15:copy": 15, "mt:100:copy": 100}
    assert choose({"standard": [73.9, 70.0], "standard:100": [75.0, 68.9],  # tie: 143.9
                   "mt:15:copy": [40.0, 41.0], "mt:100:copy": [60.0, 21.5]}, epochs) == {
        "standard": "standard", "mt": "mt:100:copy"}
    real = proxy_params_of_real(tmp_path)
    base = before_the_choice(real)
    assert overrides(base, "standard") == overrides(base, "mt:15:copy") == []
    assert overrides(base, "mt:100:copy") == [
        f"training.{PROXY}.per_method.mt.epochs: 100",
        f"methods.mt.per_dataset.{PROXY}.rampup_epochs: 33"]
    for candidate in ("standard:100", "mt:100:copy", "mt:15:average"):
        params = yaml.safe_load(yaml.safe_dump(base))
        for line in overrides(base, candidate):
            key, value = line.split(": ")
            *path, last = key.split(".")
            node = params
            for part in path:
                node = node.setdefault(part, {})
            node[last] = yaml.safe_load(value)
        params = validate_params(params)
        wanted, method = configure(base, candidate, PROXY)
        assert ({**TRAINER_DEFAULTS, **training_for(params, PROXY, method)}
                == {**TRAINER_DEFAULTS, **training_for(wanted, PROXY, method)}), candidate
        assert method_for(params, method, PROXY) == method_for(wanted, method, PROXY), candidate
    # params.yaml holds what the rule chose on the H200 (labeler-choice-cifar10-proxy.md): both
    # winners need nothing more there, and the 15-epoch runs would.
    assert overrides(real, "standard:100") == overrides(real, "mt:100:copy") == []
    assert overrides(real, "mt:15:copy") == [f"training.{PROXY}.per_method.mt.epochs: 15",
                                             f"methods.mt.per_dataset.{PROXY}.rampup_epochs: 5"]


def test_the_summary_says_which_steps_compile() -> None:
    """summary.md's model line names the compiled methods and their mode (a speed switch that may
    differ per method: benchmarks/results/compile-choice-cifar10-proxy.md)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import _compiled

    params = eager_params()
    assert _compiled(params) == "eager"
    for method in ("mt", "standard"):
        params["training"][PROXY]["per_method"][method].update(compile=True,
                                                               compile_mode="reduce-overhead")
    params["training"][PROXY]["per_method"]["wscat"] = {"compile": True}
    assert _compiled(params) == "compiled: standard, mt (reduce-overhead); wscat (default)"
