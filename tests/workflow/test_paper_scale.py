"""The paper-scale path: the CIFAR-10 DAG with and without its archive, the SLURM profile, and
one tiny end-to-end CIFAR-10 run on an archive in the official format built here."""
from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.archives import write_cifar10
from tests.workflow.test_workflow import BIN, copy_workflow, job_counts, real_params, run
from wscat.config import method_for

TABLE = "results/tables/cifar10.tex"
GPU_LINE = [str(BIN / "snakemake"), "--cores", "1", "--resources", "gpu=1", "--", TABLE]
pytestmark = pytest.mark.slow  # a Snakemake DAG of the paper scale in every test


def _expected_jobs(params: dict, experiment: str) -> Counter:
    spec = params["experiments"][experiment]
    seeds, methods = len(spec["seeds"]), spec["methods"]
    labelers = {method_for(params, m).get("labeler") for m in methods} - {None}
    return Counter(split=seeds, table=1, evaluate=seeds * len(methods),
                   train=seeds * len(set(methods) | labelers), pseudo_label=seeds * len(labelers))


def _with_placed_archive(tmp_path: Path, params: dict) -> Path:
    workdir = copy_workflow(tmp_path, params)
    (workdir / "data/raw").mkdir(parents=True)
    # An empty stand-in: these tests read the DAG (WSCAT_SKIP_ARCHIVE_CHECK); the md5 check of a
    # placed archive is tests/workflow/test_bad_input.py's.
    (workdir / "data/raw/cifar-10-python.tar.gz").write_bytes(b"")
    return workdir


def test_dry_run_lists_the_full_paper_dag_when_the_archive_is_there(tmp_path: Path, env) -> None:
    params = real_params()
    result = run([*GPU_LINE[:1], "-n", "-p", *GPU_LINE[1:]], _with_placed_archive(tmp_path, params),
                 {**env, "WSCAT_SKIP_ARCHIVE_CHECK": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    expected = _expected_jobs(params, "cifar10")
    assert job_counts(result.stdout) == dict(expected)  # no fetch job: the archive is in place
    # 3 seeds, every method of Table 2, each evaluated by the whole attack suite.
    assert expected["evaluate"] == 3 * len(params["experiments"]["cifar10"]["methods"]) >= 24
    commands = [line for line in result.stdout.splitlines() if "wscat train" in line]
    assert commands and all("--model wrn-28-10" in line for line in commands)
    trained = {re.search(r"--method (\S+)", line)[1] for line in commands}
    assert trained >= set(params["experiments"]["cifar10"]["methods"])


def test_without_the_archive_the_dry_run_stops_with_one_clear_line(tmp_path: Path, env) -> None:
    params = real_params()
    params["datasets"]["cifar10"]["download"] = False
    result = run([*GPU_LINE[:1], "-n", *GPU_LINE[1:]], copy_workflow(tmp_path, params), env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "cifar-10-python.tar.gz" in lines[0] and "data/raw" in lines[0]
    assert "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" in lines[0]


def test_slurm_profile_dry_run_shows_the_jobs_it_would_submit(tmp_path: Path, env) -> None:
    params = real_params()
    workdir = _with_placed_archive(tmp_path, params)
    result = run([str(BIN / "snakemake"), "-n", "--workflow-profile", "workflow/profiles/slurm",
                  "--", TABLE], workdir, {**env, "WSCAT_SKIP_ARCHIVE_CHECK": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout) == dict(_expected_jobs(params, "cifar10"))
    profile = (workdir / "workflow/profiles/slurm/config.yaml").read_text()
    assert "executor: slurm" in profile


def tiny_cifar10_params(raw: Path, md5: str) -> dict:
    params = real_params()
    experiment = {**params["experiments"]["cifar10"], "seeds": [1], "model": "wrn-10-1"}
    params["experiments"] = {"cifar10": experiment}
    params["models"]["wrn-10-1"] = {"architecture": "wideresnet", "depth": 10, "width": 1}
    params["datasets"]["cifar10"].update(root=str(raw), md5=md5, download=False, labelled=100,
                                         train_steps=2)
    params["training"]["cifar10"].update(epochs=1, batch_size=64)
    # PUAT's stages fit the one epoch (its 50 pre-training epochs would leave it Mean Teacher,
    # which wscat train refuses); small GAN nets, as tests/unit/test_leakage.py's.
    params["methods"]["puat"]["per_dataset"]["cifar10"] = {
        "pretrain_epochs": 0.5, "gan_start_epochs": 0.25, "adv_rampup_epochs": 0.25,
        "consistency_rampup_epochs": 0.5, "d_steps": 1, "n_generated": 16, "latent_dim": 8,
        "gan_width": 8}
    params["evaluation"]["n_examples"] = 20
    params["evaluation"]["per_dataset"]["cifar10"] = {"autoattack": {"n_examples": 4}}
    return params


def test_tiny_cifar10_runs_end_to_end_from_an_official_format_archive(tmp_path: Path, env) -> None:
    md5 = write_cifar10(tmp_path / "raw", train_per_class=30, test_per_class=4)
    params = tiny_cifar10_params(tmp_path / "raw", md5)
    workdir = copy_workflow(tmp_path / "work", params)
    result = run([str(BIN / "snakemake"), "--cores", "2", "--", TABLE], workdir, env, timeout=1500)
    logs = "\n".join(f"--- {log}\n{log.read_text()[-1500:]}"
                     for log in workdir.glob("results/logs/**/*.log"))
    assert result.returncode == 0, result.stderr[-3000:] + logs
    methods = params["experiments"]["cifar10"]["methods"]
    with open(workdir / "results/tables/cifar10.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert Counter(row["metric"] for row in rows) == {
        a: len(methods) for a in ("Natural", "FGSM", "PGD", "CW", "AA", "Mean")}  # the extras:
    # the paper targets' (tests/workflow/test_paper.py)
    metrics = json.loads((workdir / "results/metrics/cifar10/wrn-10-1/wscat/seed1.json").read_text())
    assert metrics["manifest"]["n_examples"] == 20
    assert metrics["manifest"]["eps"] == pytest.approx(8 / 255)
    pseudo = json.loads((workdir / "results/pseudo/cifar10/wrn-10-1/mt/seed1.json").read_text())
    assert pseudo["n"] == 200  # 300 training images - 100 labelled (80 + 20 validation)
