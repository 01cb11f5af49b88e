"""The CIFAR-10 proxy tier (README, "CIFAR-10 proxy"): the subset knob, the npz export as the same
dataset, the Snakemake DAG of three seeds, and benchmarks/cifar10_proxy.py (the one-GPU-call
script) end to end on a tiny archive in the official format built here."""
from __future__ import annotations

import csv
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

PROXY = "cifar10-proxy"


def tiny_proxy_params(raw: Path, md5: str, methods: list[str] | None = None) -> dict:
    """The proxy tier on a 300 + 40 image archive: its first 200 + 20, a one-block WRN, one epoch;
    `methods` cuts the six to fewer."""
    params = real_params()
    experiment = params["experiments"][PROXY]
    params["experiments"] = {PROXY: {**experiment, "model": "wrn-10-1",
                                     "methods": methods or experiment["methods"]}}
    params["paper"] = {PROXY: params["paper"][PROXY]}
    params["paper"][PROXY]["model_names"]["wrn-10-1"] = "WRN-10-1"
    params["models"]["wrn-10-1"] = {"architecture": "wideresnet", "depth": 10, "width": 1}
    params["datasets"][PROXY].update(root=str(raw), md5=md5, download=False, labelled=100,
                                     subset={"train": 200, "test": 20}, train_steps=2)
    mt = {**params["training"][PROXY]["per_method"]["mt"], "epochs": 2}  # the proxy's labeler
    params["training"][PROXY].update(epochs=1, batch_size=64, precision="fp32",
                                     channels_last=False, per_method={"mt": mt})
    params["evaluation"].update(pgd_steps=3, cw_steps=3)
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
    assert paper.tier_figures(params, PROXY) == []


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
                                         "paper_table": 2,
                                         "paper_compare": 1, "curves": 18, "paper_index": 1}
    assert "--paper-cells CIFAR10 WRN-28-10" in result.stdout
    assert "--model wrn-16-4" in result.stdout


def test_the_one_call_script_has_every_step_of_the_six_methods(archive, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import build_jobs, proxy_params

    params = proxy_params(real_params(), seed=2, npz=tmp_path / "p.npz", epochs=None)
    assert params["datasets"][PROXY]["source"] == "npz" and "root" not in params["datasets"][PROXY]
    assert params["training"][PROXY]["epochs"] == 15
    assert training_for(params, PROXY, "mt")["epochs"] == 60
    quick = proxy_params(real_params(), seed=2, npz=None, epochs=3)  # --epochs: every run
    assert {training_for(quick, PROXY, m)["epochs"] for m in ("mt", "wscat")} == {3}
    # --epochs drops the per-method epochs and keeps the labeler's other knobs.
    assert quick["training"][PROXY]["per_method"] == {"mt": {"ema_buffers": "average"}}
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


def _proxy_script(tmp: Path, base: Path, npz: Path, results: Path, out: Path,
                  *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/cifar10_proxy.py"), "--params", str(base),
         "--npz", str(npz), "--seed", "1", "--jobs", "2", "--threads", "1",
         "--results", str(results), "--out", str(out), *extra],
        cwd=tmp, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def proxy_run(archive, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One call of the script on the tiny proxy: three of the six methods (every kind of step;
    the six ran by hand on the same config)."""
    raw, md5 = archive
    tmp = tmp_path_factory.mktemp("proxy")
    params = tiny_proxy_params(raw, md5, ["standard", "mt", "wscat"])
    base = tmp / "params.yaml"
    base.write_text(yaml.safe_dump(params, sort_keys=False))
    npz = _npz_of(load_dataset(PROXY, load_params(base)["datasets"][PROXY]), tmp / "p.npz")
    out, results = tmp / "out", tmp / "results"
    result = _proxy_script(tmp, base, npz, results, out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"tmp": tmp, "base": base, "npz": npz, "out": out, "results": results}


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
    assert wscat["Mean"]["paper"] == "59.4" and wscat["Mean"]["model"] == "WRN-10-1"
    summary = (out / "summary.md").read_text()
    assert "| WSCAT |" in summary and "| failed |" not in summary
    assert "pseudo-label accuracy of mt" in summary
    with tarfile.open(out / "results.tar.gz") as tar:
        names = tar.getnames()
    assert f"results/curves/{PROXY}/wrn-10-1/wscat/seed1.png" in names
    assert f"results/metrics/{PROXY}/wrn-10-1/mt/seed1.json" in names
    assert not [name for name in names if name.endswith(".pt")]
    assert "done train wscat" in (out / "progress.log").read_text()
    # Mean Teacher's own schedule (training.<dataset>.per_method): 2 epochs against the others' 1.
    logs = {m: (results / f"models/{PROXY}/wrn-10-1/{m}/seed1/train_log.csv").read_text()
            for m in ("standard", "mt", "wscat")}
    assert {m: len(text.splitlines()) - 1 for m, text in logs.items()} == {
        "standard": 1, "mt": 2, "wscat": 1}
    assert "1 epochs (mt: 2)" in summary


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
    progress = (again / "progress.log").read_text()
    assert " start " not in progress
    assert sorted(line.split("] ", 1)[1] for line in progress.splitlines() if "] kept " in line
                  ) == sorted(f"kept {job.name} (outputs exist)" for job in jobs)
    assert f"{len(jobs)} of {len(jobs)} steps done in 0 s ({len(jobs)} kept" in progress
    assert {path: path.stat().st_mtime_ns for path in before} == before
    assert {log: log.read_text() for log in logs} == logs  # the first call's step logs stay
    summary = (again / "summary.md").read_text()
    assert all(f"| {job.name} | kept | 0 |" in summary for job in jobs)
    assert "| WSCAT |" in summary and "did not run again" in summary
    with tarfile.open(again / "results.tar.gz") as tar:
        assert f"results/metrics/{PROXY}/wrn-10-1/mt/seed1.json" in tar.getnames()
    # Other params (here --epochs) than the results were made with: stop, keep nothing stale.
    other = _proxy_script(tmp, proxy_run["base"], proxy_run["npz"], results, tmp / "out-other",
                          "--epochs", "2")
    assert other.returncode != 0 and "made with other params" in other.stderr
    assert {path: path.stat().st_mtime_ns for path in before} == before


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

    base = proxy_params_of_real(tmp_path)
    params, method = configure(base, "mt:45:average")
    assert method == "mt"
    assert training_for(params, PROXY, "mt")["epochs"] == 45
    assert training_for(params, PROXY, "mt")["ema_buffers"] == "average"
    assert params["methods"]["mt"]["per_dataset"][PROXY]["rampup_epochs"] == 15
    params, method = configure(base, "standard")
    assert method == "standard" and training_for(params, PROXY, "standard")["epochs"] == 15
    assert "per_method" not in params["training"][PROXY]
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
