"""Scale-out and provenance (issue 25): the SLURM profiles, params by content, metrics bound to the
training that made their checkpoint, and a tiny target on a real one-node SLURM cluster.

The cluster tests run under `make test-slurm` (CI runs it; it sets WSCAT_SLURM_CLUSTER=1): they
install Debian's slurm-wlm and munge where they are missing (root), start the cluster of
tests/helpers/slurm_cluster.sh (8 CPUs, one GPU with no CUDA behind it), run the target through
the CPU profile, kill a training job with scancel, and compare every table and metrics byte with
the same target run locally; then run a training and its evaluation through the GPU profile: the
jobs ask for and get one GPU, and `--device auto` refuses in one line. Without
WSCAT_SLURM_CLUSTER they are skipped with that reason; with it, a cluster that cannot be
installed or started fails them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers.tiny import tiny_params
from wscat.device import GPU_COUNTS, GPU_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROFILES = ROOT / "workflow" / "profiles"
CLUSTER = ROOT / "tests" / "helpers" / "slurm_cluster.sh"
TABLE = "results/tables/digits.tex"
GPU_RULES = {"train", "pseudo_label", "evaluate", "evaluate_extra", "validate", "analyse"}
# Every other rule plots, renders or copies: it runs on the submitting node (`localrules`),
# not as a job sent to a GPU partition asking for no GPU (an audit found paper_figure so).
REMOTE_RULES = GPU_RULES
# The cluster test's time, both runs and the kill included: 5 minutes (CI's two idle cores).
BUDGET_S = int(os.environ.get("WSCAT_SLURM_BUDGET_S", "300"))


def profile(name: str) -> dict:
    return yaml.safe_load((PROFILES / name / "config.yaml").read_text())


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600
        ) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def workflow_copy(dest: Path, params: dict, name: str = "params.yaml") -> Path:
    """Snakefile and workflow/ in `dest`, `params` written as `name`."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (dest / name).write_text(yaml.safe_dump(params, sort_keys=False))
    return dest


def one_line_refusal(result: subprocess.CompletedProcess, *phrases: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert all(phrase in lines[0] for phrase in phrases), lines[0]
    return lines[0]


# --- fast: the profiles ------------------------------------------------------------------------

def test_gpu_and_cpu_profiles_differ_only_in_gpus_partition_and_sizes() -> None:
    gpu, cpu = profile("slurm"), profile("slurm-cpu")
    assert gpu.keys() == cpu.keys()
    sizes = {"default-resources", "set-resources", "set-threads"}
    assert {k: v for k, v in gpu.items() if k not in sizes} == \
        {k: v for k, v in cpu.items() if k not in sizes}
    assert gpu["default-resources"] == {"slurm_partition": "gpu"}
    assert cpu["default-resources"] == {"slurm_partition": "cpu"}
    for name, gpus in (("slurm", 1), ("slurm-cpu", 0)):
        resources, threads = profile(name)["set-resources"], profile(name)["set-threads"]
        assert set(resources) == set(threads) == REMOTE_RULES, name
        for rule in REMOTE_RULES:
            # memory and time per rule, not in default-resources: a command-line
            # --default-resources (partition, account) cannot wipe them
            assert {"mem_mb", "runtime"} <= set(resources[rule]), (name, rule)
            # CPUs come from threads alone (--cpus-per-task = threads = the step's --threads)
            assert not {"cpus_per_task", "cpus_per_gpu"} & set(resources[rule]), (name, rule)
            assert resources[rule].get("gpu", 0) == (gpus if rule in GPU_RULES else 0)


def workflow_rules() -> tuple[dict[str, str], set[str], list[str]]:
    """The Snakefile's and workflow/rules/*.smk's rules: {name: body} of the named ones, the names
    that run locally (`localrules:`, `localrule: True`), and the bodies of the rules made in a
    loop and named by `name:` (fetch_cifar10, the named targets)."""
    rules, local, unnamed = {}, set(), []
    for path in [ROOT / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")]:
        text = path.read_text()
        if block := re.search(r"^localrules:\n((?:    \w+,\n)+)", text, re.M):
            local |= set(re.findall(r"\w+", block[1]))
        for name, body in re.findall(r"^\s*rule ?(\w*):\n(.*?)(?=^\s*rule ?\w*:|\Z)", text,
                                     re.M | re.S):
            if not name:
                unnamed.append(body)
                continue
            rules[name] = body
            if "localrule: True" in body:
                local.add(name)
    return rules, local, unnamed


def test_every_rule_the_profiles_do_not_size_runs_on_the_submitting_node() -> None:
    """The workflow's rules that are not local are exactly the ones the profiles give memory,
    time and threads: a new rule is either sized for a job or made local."""
    rules, local, unnamed = workflow_rules()
    for body in unnamed:
        assert "localrule: True" in body, body
    assert {"paper_table", "paper_figure", "table", "split", "demo"} <= local <= set(rules)
    assert set(rules) - local == REMOTE_RULES


def test_every_gpu_rule_of_the_workflow_is_switched_by_the_cpu_profile() -> None:
    rules, _, _ = workflow_rules()
    on_gpu = {name for name, block in rules.items() if re.search(r"\bgpu=1", block)}
    assert on_gpu == GPU_RULES
    assert all(profile("slurm-cpu")["set-resources"][rule]["gpu"] == 0 for rule in on_gpu)
    # every rule that passes --threads gets them from the profile's set-threads
    threaded = {name for name, block in rules.items() if "--threads {threads}" in block}
    assert threaded <= set(profile("slurm")["set-threads"]), threaded


def test_every_compute_rule_of_the_cpu_profile_computes_on_one_thread() -> None:
    """CPU float results depend on the thread count; a local run computes on one thread, so the
    CPU cluster's jobs must too for its numbers to equal a local run's (issue: 16 threads gave
    other weights). The GPU profile keeps CPU threads (data loading) but for analyse's t-SNE."""
    assert profile("slurm-cpu")["set-threads"] == {rule: 1 for rule in REMOTE_RULES}
    gpu = profile("slurm")["set-threads"]
    assert gpu["analyse"] == 1
    for name in ("slurm", "slurm-cpu"):
        text = (PROFILES / name / "config.yaml").read_text()
        assert "slurm-no-account" in text  # the plugin's option, and why it is not set


def test_the_profiles_choose_a_status_command_that_works_without_accounting() -> None:
    for name in ("slurm", "slurm-cpu"):
        config = profile(name)
        assert config["slurm-status-command"] == "squeue"
        # a small target does not wait on the status checks (the plugin's default: 40 s)
        assert config["slurm-init-seconds-before-status-checks"] <= 5
        assert config["seconds-between-status-checks"] <= 5
        assert config["retries"] >= 1  # a killed training resumes


# --- params by content; metrics bound to their training (issue 25, items 5 and 6) -------------

def provenance_params(epochs: int = 1) -> dict:
    params = tiny_params(epochs=epochs)
    params["experiments"]["digits"]["methods"] = ["standard"]
    return params


@pytest.fixture(scope="module")
def standard_run(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]):
    """The tiny table of Standard, 1 epoch, built with `--configfile a.yaml`."""
    workdir = workflow_copy(tmp_path_factory.mktemp("provenance"), provenance_params(), "a.yaml")
    result = run([BIN / "snakemake", "--cores", "2", "--configfile", "a.yaml", "--", TABLE],
                 workdir, env)
    logs = "".join(f"\n--- {p}\n{p.read_text()[-1500:]}"
                   for p in workdir.glob("results/logs/**/*.log"))
    assert result.returncode == 0, result.stderr[-3000:] + logs
    return workdir


def dry_run(workdir: Path, env: dict[str, str], configfile: str) -> subprocess.CompletedProcess:
    result = run([BIN / "snakemake", "-n", "--cores", "2", "--configfile", configfile, "--", TABLE],
                 workdir, env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def jobs_of(dry: subprocess.CompletedProcess) -> set[str]:
    return set(re.findall(r"^rule (\w+):", dry.stdout, flags=re.M))


@pytest.mark.slow
def test_a_moved_identical_params_file_reruns_nothing(standard_run, env: dict[str, str]) -> None:
    moved = standard_run / "elsewhere" / "b.yaml"
    moved.parent.mkdir(exist_ok=True)
    shutil.copy2(standard_run / "a.yaml", moved)
    dry = dry_run(standard_run, env, "elsewhere/b.yaml")
    assert jobs_of(dry) == set(), dry.stdout
    assert "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow
def test_metrics_of_an_older_training_are_stale_even_when_its_retraining_failed(
        standard_run, env: dict[str, str], tmp_path: Path) -> None:
    """Item 6: the training's params change and its retraining fails (Snakemake removes the
    failed job's checkpoint); the metrics of the old checkpoint must not feed the table."""
    workdir = tmp_path / "w"
    shutil.copytree(standard_run, workdir, symlinks=True)
    params = provenance_params()
    params["training"]["digits"]["epochs"] = 2
    (workdir / "c.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # the checkpoint intact: train, evaluate and the table rerun
    assert {"train", "evaluate", "table"} <= jobs_of(dry_run(workdir, env, "c.yaml"))
    run_dir = "results/models/digits/cnn/standard/seed1"
    # the training's record lost (Snakemake then cannot see that its params changed): the
    # metrics are still stale, because evaluate records the training's fingerprint
    outputs = [f"{run_dir}/{name}" for name in ("best.pt", "last.pt", "train_log.csv", "dvclive")]
    cleaned = run([BIN / "snakemake", "--cleanup-metadata", *outputs, "--configfile", "c.yaml"],
                  workdir, env)
    assert cleaned.returncode == 0, cleaned.stderr[-2000:]
    assert "evaluate" in jobs_of(dry_run(workdir, env, "c.yaml"))
    # evaluated by hand under the new params, the old checkpoint is refused
    refused = run([BIN / "wscat", "evaluate", "--part", "core", "--params", "c.yaml",
                   "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1",
                   "--split", "results/splits/digits/seed1.npz", "--checkpoint",
                   f"{run_dir}/best.pt", "--out", "out/m.json", "--threads", "1"], workdir, env)
    one_line_refusal(refused, f"{run_dir}/best.pt", "trained with other params",
                     f"--forcerun {run_dir}/best.pt")
    assert not (workdir / "out/m.json").exists()
    # the failed retraining: its outputs gone, the old metrics still there
    for output in (workdir / run_dir).iterdir():
        shutil.rmtree(output) if output.is_dir() else output.unlink()
    assert {"train", "evaluate", "table"} <= jobs_of(dry_run(workdir, env, "c.yaml"))
    # the table step itself refuses the old metrics under the new params, naming what to rerun
    metrics = "results/metrics/digits/cnn/standard/seed1.json"
    refused = run([BIN / "wscat", "table", "--params", "c.yaml", "--experiment", "digits",
                   "--tex", "out/t.tex", "--csv", "out/t.csv", "--summary", "out/t.json", metrics],
                  workdir, env)
    one_line_refusal(refused, metrics, "another training",
                     "--forcerun results/models/digits/cnn/standard/seed1/best.pt")
    assert not (workdir / "out").exists() or not any((workdir / "out").iterdir())
    # under the params that made it, the same file is accepted
    accepted = run([BIN / "wscat", "table", "--params", "a.yaml", "--experiment", "digits",
                    "--tex", "out/t.tex", "--csv", "out/t.csv", "--summary", "out/t.json",
                    metrics], workdir, env)
    assert accepted.returncode == 0, accepted.stderr


@pytest.mark.slow
def test_the_metrics_record_the_cpu_threads_of_training_and_evaluation(standard_run) -> None:
    """On a CPU both change the numbers; recorded outside the fingerprint (older runs stay valid)."""
    data = json.loads((standard_run / "results/metrics/digits/cnn/standard/seed1.json").read_text())
    assert data["manifest"]["cpu_threads"] == {"training": {"from epoch 1": 1}, "evaluation": 1}
    assert set(data["manifest"]["training"]) == {"fingerprint", "weights_sha256"}


@pytest.mark.slow
def test_the_table_refuses_metrics_of_mixed_trainings(standard_run, env: dict[str, str],
                                                      tmp_path: Path) -> None:
    """Two seeds, one measured after a training change: refused, the stale one named."""
    metrics = standard_run / "results/metrics/digits/cnn/standard/seed1.json"
    data = json.loads(metrics.read_text())
    other = {**data, "seed": 2,
             "manifest": {**data["manifest"],
                          "training": {**data["manifest"]["training"], "fingerprint": "0" * 16}}}
    (tmp_path / "seed2.json").write_text(json.dumps(other))
    params = provenance_params()
    params["experiments"]["digits"]["seeds"] = [1, 2]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    refused = run([BIN / "wscat", "table", "--params", "p.yaml", "--experiment", "digits",
                   "--tex", "t.tex", "--csv", "t.csv", "--summary", "t.json", metrics,
                   "seed2.json"], tmp_path, env)
    line = one_line_refusal(refused, "1 metrics file(s)", "seed2.json", "0" * 16,
                            "--forcerun results/models/digits/cnn/standard/seed2/best.pt")
    assert str(metrics) not in line
    assert not (tmp_path / "t.tex").exists()


@pytest.mark.slow
def test_an_extra_part_is_bound_to_its_core_file(standard_run, env: dict[str, str],
                                                 tmp_path: Path) -> None:
    """Issue 24, item 5: `--part extra` reads a core file of the same weights, training and core
    settings, and the table refuses an extra file that differs from its core."""
    run_dir = "results/models/digits/cnn/standard/seed1"
    core = standard_run / "results/metrics/digits/cnn/standard/seed1.json"
    data = json.loads(core.read_text())
    extra = [BIN / "wscat", "evaluate", "--part", "extra", "--params", standard_run / "a.yaml",
             "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1",
             "--split", standard_run / "results/splits/digits/seed1.npz",
             "--checkpoint", standard_run / run_dir / "best.pt", "--threads", "1"]
    for key, value, phrase in (("weights_sha256", "f" * 16, "another checkpoint or training"),
                               ("fingerprint", "e" * 16, "another checkpoint or training"),
                               (None, "d" * 16, "other evaluation settings")):
        manifest = dict(data["manifest"])
        if key:
            manifest["training"] = {**manifest["training"], key: value}
        else:
            manifest["evaluation_settings"] = value
        (tmp_path / "core.json").write_text(json.dumps({**data, "manifest": manifest}))
        refused = run([*extra, "--core", "core.json", "--out", "extra.json"], tmp_path, env)
        one_line_refusal(refused, "core.json", phrase, "--part core")
        assert not (tmp_path / "extra.json").exists()
    # at the table: an extra file whose weights differ from its core file's
    extra_file = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1,
                  "part": "extra", "accuracy": {"AA-paper": 1.0},
                  "manifest": {"training": {**data["manifest"]["training"],
                                            "weights_sha256": "f" * 16},
                               "evaluation_settings": data["manifest"]["evaluation_settings"]}}
    (tmp_path / "seed1-extra.json").write_text(json.dumps(extra_file))
    refused = run([BIN / "wscat", "table", "--params", standard_run / "a.yaml", "--experiment",
                   "digits", "--tex", "t.tex", "--csv", "t.csv", "--summary", "t.json", core,
                   "seed1-extra.json"], tmp_path, env)
    one_line_refusal(refused, "seed1-extra.json", "training differ", "--part extra")


# --- slow: a real one-node SLURM cluster (make test-slurm; CI) ----------------------------------

def cluster_params() -> dict:
    """The fewest jobs that cover split -> labeler -> pseudo-labels -> WSCAT -> evaluate -> table:
    WSCAT alone, one seed (its labeler, Mean Teacher, comes with it)."""
    params = tiny_params(epochs=2)
    params["experiments"]["digits"]["methods"] = ["wscat"]
    # WSCAT trains four epochs: after the first, three are left to kill it in
    params["training"]["digits"]["per_method"] = {"wscat": {"epochs": 4}}
    params["datasets"]["digits"].update(unlabelled_fraction=0.5, val_max=100, train_steps=2)
    # every attack on the same 16 images (the paired comparison asks for it)
    params["evaluation"]["n_examples"] = 16
    params["evaluation"]["per_dataset"]["digits"]["autoattack"]["n_examples"] = None
    return params


def slurm_profile(dest: Path, partition: str = "debug", name: str = "slurm-cpu") -> Path:
    """A shipped profile (`name`: the CPU one, or `slurm` for GPUs), edited as docs/workflow.md
    (step 3) tells a user of a small cluster: the partition, and memory and time that fit its one
    node; its own set-threads (CPU: one thread per job, as a local run computes) and GPUs
    untouched."""
    config = profile(name)
    config["default-resources"]["slurm_partition"] = partition
    for resources in config["set-resources"].values():
        resources.update(mem_mb=1000, runtime=10)
    dest.mkdir(parents=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return dest


# The cluster's one node: as many CPUs as the GPU profile's largest set-threads (slurmd accepts
# more than the machine has) and one GPU with no CUDA behind it (slurm_cluster.sh, GPUS), so both
# profiles run on the one cluster, one after the other (module-scoped: started once).
CLUSTER_SHAPE = {"CPUS": str(max(profile("slurm")["set-threads"].values())), "GPUS": "1"}


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A one-node cluster of CLUSTER_SHAPE for this module's tests; stopped after the last."""
    if os.environ.get("WSCAT_SLURM_CLUSTER") != "1":
        pytest.skip("needs a SLURM cluster: `make test-slurm` starts one (CI runs it)")
    install = subprocess.run(["bash", CLUSTER, "install"], capture_output=True, text=True,
                             timeout=900)
    assert install.returncode == 0, f"slurm-wlm and munge could not be installed: {install.stderr}"
    directory = tmp_path_factory.mktemp("slurm")
    started = subprocess.run(["bash", CLUSTER, "start", directory], capture_output=True, text=True,
                             timeout=120, env={**os.environ, **CLUSTER_SHAPE})
    try:
        assert started.returncode == 0, f"the cluster did not start: {started.stderr}"
        yield {"SLURM_CONF": str(directory / "slurm.conf")}
    finally:
        subprocess.run(["bash", CLUSTER, "stop", directory], capture_output=True, timeout=60)
        assert not any((directory / "run").glob("*.pid")), "a daemon outlived `stop`"


def _jobs(env: dict[str, str]) -> list[dict[str, str]]:
    """Every job slurmctld still knows: id, state, CPUs, comment (the plugin writes the rule and
    wildcards there)."""
    out = subprocess.run(["squeue", "--states=all", "-h", "-o", "%i|%T|%C|%k"], env=env,
                         capture_output=True, text=True, timeout=30).stdout
    return [dict(zip(("id", "state", "cpus", "comment"), line.split("|", 3)))
            for line in out.splitlines() if line.strip()]


@pytest.mark.slow
def test_tiny_target_on_a_real_slurm_cluster(slurm_cluster, tmp_path: Path,
                                             env: dict[str, str]) -> None:
    env = {**env, **slurm_cluster}
    before = {job["id"] for job in _jobs(env)}  # another test's jobs (MinJobAge: 300 s)
    started = time.monotonic()
    deadline = started + BUDGET_S
    # the same target locally, side by side, as a user runs it (every job on one thread)
    local = workflow_copy(tmp_path / "local", cluster_params())
    local_log = (tmp_path / "local.log").open("w")
    local_run = subprocess.Popen(
        [BIN / "snakemake", "--cores", "2", "--", TABLE],
        cwd=local, env=env, stdout=local_log, stderr=subprocess.STDOUT)
    remote = workflow_copy(tmp_path / "slurm", cluster_params())
    profile_dir = slurm_profile(remote / "profile")
    slurm_log = (tmp_path / "slurm.log").open("w")
    # WSCAT_DEVICE=cpu, as docs/workflow.md tells a CPU-only cluster's users to export (the
    # paper's models train on a CPU only when it is named): the jobs must see it
    snakemake = subprocess.Popen(
        [BIN / "snakemake", "--workflow-profile", profile_dir, "--", TABLE], cwd=remote,
        env={**env, "WSCAT_DEVICE": "cpu"}, stdout=slurm_log, stderr=subprocess.STDOUT)
    # Kill WSCAT's training once its first epoch is checkpointed: the retry resumes from it.
    resume = remote / "results/models/digits/cnn/wscat/seed1/resume/last.pt"
    killed = None
    try:
        while snakemake.poll() is None and killed is None and time.monotonic() < deadline:
            running = [job for job in _jobs(env) if job["state"] == "RUNNING"
                       and job["comment"] == "rule_train_wildcards_digits_cnn_wscat_1"]
            if running and resume.is_file():
                subprocess.run(["scancel", running[0]["id"]], env=env, check=True, timeout=30)
                killed = running[0]["id"]
            time.sleep(0.2)
        snakemake.wait(timeout=max(1, deadline - time.monotonic()))
        local_run.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        for process in (snakemake, local_run):
            if process.poll() is None:
                process.kill()
        local_log.close()
        slurm_log.close()
    elapsed = time.monotonic() - started
    assert local_run.returncode == 0, (tmp_path / "local.log").read_text()[-3000:]
    assert snakemake.returncode == 0, (tmp_path / "slurm.log").read_text()[-5000:]
    assert killed, "WSCAT's training job was never seen running after its first epoch"
    states = {job["id"]: job for job in _jobs(env) if job["id"] not in before}
    assert states[killed]["state"] == "CANCELLED", states
    log = (remote / "results/logs/train/digits/cnn/wscat/seed1.log").read_text()
    assert "resuming wscat seed 1 from epoch" in log, log[-2000:]
    # the retry's log holds all four epochs once each, those before the kill from its checkpoint
    epochs = [line.split()[0] for line in log.splitlines() if line.startswith("epoch=")]
    assert epochs == [f"epoch={n}" for n in range(1, 5)], log[-2000:]
    assert "1/4 epochs, from resume/last.pt" in log, log[-2000:]
    assert log.startswith("device: cpu, ") and "--device auto" not in log.splitlines()[0], log[:300]
    local_train = (local / "results/logs/train/digits/cnn/wscat/seed1.log").read_text()
    assert "(--device auto: no CUDA device here)" in local_train.splitlines()[0]  # the contrast
    # a job asks SLURM for its threads as CPUs (the profile's: one), and the step runs with as many
    cpus = {job["comment"].split("_wildcards_")[0]: job["cpus"] for job in states.values()}
    assert cpus == {"rule_train": "1", "rule_pseudo_label": "1", "rule_evaluate": "1"}, states
    pseudo_log = (remote / "results/logs/pseudo_label/digits/cnn/mt/seed1.log").read_text()
    assert "(1 thread)" in pseudo_log and "(1 thread)" in log, pseudo_log[:300] + log[:300]
    # the thread count each computed with is recorded: killed and resumed, still one thread
    manifest = json.loads((remote / "results/metrics/digits/cnn/wscat/seed1.json").read_text())
    assert manifest["manifest"]["cpu_threads"] == {"training": {"from epoch 1": 1},
                                                   "evaluation": 1}
    assert "CPU thread" not in log  # no change of thread count to report
    # no slurm_account: the plugin's lines, word for word as docs/workflow.md quotes them
    said = (tmp_path / "slurm.log").read_text()
    guide = " ".join((ROOT / "docs/workflow.md").read_text().split())
    for line in ("No SLURM account given, trying to guess.",
                 "No account was given, not able to get a SLURM account via sacct: sacct: "
                 "invalid option -- '1'",
                 "Unable to guess SLURM account. Trying to proceed without."):
        assert line in said and f"`{line}`" in guide, line
    # byte-identical to the local run: the table, its twins, the metrics
    compared = sorted(p.relative_to(local) for p in (local / "results").glob("tables/*"))
    compared += [Path("results/metrics/digits/cnn/wscat/seed1.json"),
                 Path("results/metrics/digits.json")]
    assert len(compared) >= 7
    for path in compared:
        assert (remote / path).read_bytes() == (local / path).read_bytes(), path
    assert elapsed < BUDGET_S, f"{elapsed:.0f} s: over the {BUDGET_S} s the test may take"


@pytest.mark.slow
def test_a_wrong_partition_on_a_real_slurm_cluster_stops_in_one_line(
        slurm_cluster, tmp_path: Path, env: dict[str, str]) -> None:
    """The shipped profile's partition `cpu` where the cluster has `debug` only: the pre-flight
    (wscat.slurm_preflight) stops the run at load in one line naming the partitions there;
    nothing is submitted and nothing written under results/ (not even the local split)."""
    env = {**env, **slurm_cluster}
    remote = workflow_copy(tmp_path / "slurm", cluster_params())
    before = {job["id"] for job in _jobs(env)}
    result = run([BIN / "snakemake", "--workflow-profile", slurm_profile(remote / "profile", "cpu"),
                  "--", TABLE], remote, env, timeout=120)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines()
             if line.strip() and not line.startswith("Using workflow specific profile")]
    assert lines == ["wscat: slurm_partition 'cpu' (the profile's default-resources: "
                     "slurm_partition) is not a partition of this cluster; `sinfo -h -o %P` "
                     "lists: debug; set slurm_partition in the profile to one of them"], lines
    assert {job["id"] for job in _jobs(env)} == before
    assert not (remote / "results").exists()


# --- slow: the GPU profile on the cluster's GPU, which has no CUDA behind it -------------------

GPU_TARGET = "results/metrics/digits/cnn/standard/seed1.json"


def gpu_params() -> dict:
    """One training and its evaluation: Standard, one seed, one epoch, every attack on 16
    images."""
    params = provenance_params()
    params["datasets"]["digits"].update(val_max=100, train_steps=2)
    params["evaluation"]["n_examples"] = 16
    params["evaluation"]["per_dataset"]["digits"]["autoattack"]["n_examples"] = None
    return params


def _job_records(env: dict[str, str]) -> dict[str, dict[str, str]]:
    """Every job slurmctld still knows, by id, as `scontrol -o show job -d` gives it: JobState,
    NumCPUs, Comment (the rule and wildcards), TresPerJob (the GPUs asked: `--gpus=1` is
    gres:gpu:1) and JOB_GRES (the GPUs allocated; a pending job has none); '' where absent."""
    out = subprocess.run(["scontrol", "-o", "show", "job", "-d"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    keys = ("JobId", "JobState", "NumCPUs", "Comment", "TresPerJob", "JOB_GRES")
    records = {}
    for line in out.stdout.splitlines():
        if line.startswith("JobId="):
            found = {key: re.search(rf"(?<![\w/]){key}=(\S*)", line) for key in keys}
            records[found["JobId"][1]] = {key: m[1] if m else "" for key, m in found.items()}
    return records


@pytest.mark.slow
def test_the_gpu_profile_on_a_real_slurm_cluster_with_a_gpu(slurm_cluster, tmp_path: Path,
                                                             env: dict[str, str]) -> None:
    """The shipped GPU profile (partition, memory and time edited as in step 3; gpu: 1 and its
    set-threads as shipped) on a node whose GPU SLURM grants but torch cannot use, as on a GPU
    node with a broken driver. The GPU rules' jobs ask for one GPU and their set-threads as CPUs,
    and get them. With WSCAT_DEVICE=cpu exported (docs/workflow.md) a training runs on the CPU
    and is made; under `--device auto` (the rules pass no --device) its evaluation refuses in one
    line naming the variable through which SLURM handed it the GPU, instead of running on the
    CPU unseen."""
    # neither the caller's WSCAT_DEVICE nor its CUDA_VISIBLE_DEVICES may reach the jobs
    env = {key: value for key, value in {**env, **slurm_cluster}.items()
           if key not in ("WSCAT_DEVICE", "CUDA_VISIBLE_DEVICES")}
    started = time.monotonic()
    # what SLURM sets in a job step granted the GPU (the executor plugin runs each rule in one)
    said = tmp_path / "env.out"
    sbatch = subprocess.run(["sbatch", "--parsable", "--gpus=1", "--mem=100", "-o", str(said),
                             "--wrap", "srun env"], env=env, capture_output=True, text=True,
                            timeout=30)
    assert sbatch.returncode == 0, sbatch.stderr
    while _job_records(env)[sbatch.stdout.strip()]["JobState"] in ("PENDING", "RUNNING") \
            and time.monotonic() < started + 60:
        time.sleep(0.2)
    handed = dict(line.split("=", 1) for line in said.read_text().splitlines()
                  if line.split("=", 1)[0] in (*GPU_VARIABLES, *GPU_COUNTS))
    assert handed == {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "0",
                      "SLURM_STEP_GPUS": "0", "SLURM_GPUS_ON_NODE": "1"}, said.read_text()
    before = set(_job_records(env))
    workdir = workflow_copy(tmp_path / "gpu", gpu_params())
    snakemake = [BIN / "snakemake", "--workflow-profile", slurm_profile(workdir / "profile",
                                                                        name="slurm")]
    run_dir = "results/models/digits/cnn/standard/seed1"
    # 1. WSCAT_DEVICE=cpu: the training, on the CPU
    made = run([*snakemake, "--", f"{run_dir}/best.pt"], workdir,
               {**env, "WSCAT_DEVICE": "cpu"}, timeout=240)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    # 2. --device auto: its evaluation refuses in the job (--retries 0: a retry refuses again)
    refused = run([*snakemake, "--retries", "0", "--", GPU_TARGET], workdir, env, timeout=240)
    assert refused.returncode == 1, refused.stdout[-3000:] + refused.stderr[-3000:]
    said = (workdir / "results/logs/evaluate/digits/cnn/standard/seed1.log").read_text()
    assert said == (
        "wscat evaluate: error: --device auto: CUDA_VISIBLE_DEVICES=0 gives this process a GPU, "
        "but torch finds no CUDA device (its driver or the card is not usable from here); mend "
        "the node's CUDA, or use --device cpu (WSCAT_DEVICE=cpu for the workflow's jobs) to run "
        "on the CPU\n"), said
    assert not (workdir / GPU_TARGET).exists()
    # on the scheduler: each asked for one GPU (sbatch --gpus=1) and its rule's threads as
    # CPUs, and was allocated the GPU
    jobs = sorted((job["Comment"], job["JobState"], job["TresPerJob"], job["JOB_GRES"],
                   job["NumCPUs"]) for i, job in _job_records(env).items() if i not in before)
    threads = profile("slurm")["set-threads"]
    assert jobs == [
        ("rule_evaluate_wildcards_digits_cnn_standard_1", "FAILED", "gres:gpu:1", "gpu:1",
         str(threads["evaluate"])),
        ("rule_train_wildcards_digits_cnn_standard_1", "COMPLETED", "gres:gpu:1", "gpu:1",
         str(threads["train"]))], jobs
    # In the job Snakemake runs with --cores all: the CPUs this process may use (its affinity,
    # which task/none leaves at the machine's), so the step's threads are the profile's capped
    # at them. On a GPU node of 8 or more cores that is the profile's 8; here the node
    # advertises 8 CPUs on fewer cores.
    computed = min(threads["train"], len(os.sched_getaffinity(0)))
    line = (workdir / "results/logs/train/digits/cnn/standard/seed1.log").read_text()
    line = line.splitlines()[0]
    plural = "s" if computed > 1 else ""
    assert line.startswith("device: cpu, ") and line.endswith(f" ({computed} thread{plural})"), \
        line
    elapsed = time.monotonic() - started
    assert elapsed < 150, f"{elapsed:.0f} s: over the 150 s this test may take"
