"""The pre-flight of a SLURM run (wscat.slurm_preflight), on fake `sinfo` and `sbatch` scripts: a
misspelt resource key, a missing Slurm client, a wrong partition, GPUs a cluster lacks and jobs
larger than its nodes each stop the run at load in one line, before any job (the real cluster's
case: tests/workflow/test_slurm.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.tiny import tiny_params
from wscat.slurm_preflight import PreflightError, check

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TABLE = "results/tables/digits.tex"
SUBMITTED = {"train": {"_cores": 1, "gpu": 0, "mem_mb": 1000, "slurm_partition": "debug"}}


def fake_slurm(folder: Path, sinfo: str) -> Path:
    """`folder` with sinfo (printing `sinfo`), and sbatch, squeue, scancel that only note their
    call in folder/called."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sinfo").write_text(f"#!/bin/sh\nprintf '%s\\n' '{sinfo}'\n")
    for tool in ("sbatch", "squeue", "scancel"):
        (folder / tool).write_text(f"#!/bin/sh\necho {tool} >> '{folder}/called'\n")
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return folder


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fake one-partition cluster without GPUs (debug: 2 CPUs, 4000 MB) alone on PATH."""
    def on_path(sinfo: str = "debug*|(null)|2|4000") -> Path:
        folder = fake_slurm(tmp_path / "bin", sinfo)
        monkeypatch.setenv("PATH", str(folder))
        return folder
    return on_path


def refused(*args, **kwargs) -> str:
    with pytest.raises(PreflightError) as error:
        check(*args, **kwargs)
    line = str(error.value)
    assert "\n" not in line
    return line


def test_a_fitting_profile_passes(cluster) -> None:
    cluster()
    check({"slurm_partition": "debug"}, {"train": {"mem_mb": 1000}}, {"train": 1}, SUBMITTED,
          {"table"})


def test_a_misspelt_resource_key_or_rule_is_refused_naming_the_known_ones(cluster) -> None:
    cluster()
    line = refused({"slurm_partiton": "debug"}, {}, {}, SUBMITTED)
    assert "unknown resource 'slurm_partiton' in the profile's default-resources" in line
    assert "did you mean slurm_partition?" in line and "mem_mb, " in line
    line = refused({}, {"train": {"runtme": 10}}, {}, SUBMITTED)
    assert "'runtme' in the profile's set-resources: train" in line and "runtime?" in line
    line = refused({}, {}, {"trian": 1}, SUBMITTED, {"table"})
    assert "set-threads names rule 'trian'" in line and "did you mean train?" in line
    assert "its rules: table, train" in line


def test_without_the_slurm_client_one_line_says_so(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    line = refused({"slurm_partition": "debug"}, {}, {}, SUBMITTED)
    assert line.startswith("the Slurm client commands are not on PATH: sbatch, squeue, scancel, "
                           "sinfo not found")


def test_the_cluster_checks(cluster) -> None:
    cluster("debug*|(null)|2|4000\nbig|(null)|64+|256000")
    wrong = {**SUBMITTED["train"], "slurm_partition": "cpu"}
    line = refused({"slurm_partition": "cpu"}, {}, {}, {"train": wrong})
    assert line == ("slurm_partition 'cpu' (the profile's default-resources: slurm_partition) "
                    "is not a partition of this cluster; `sinfo -h -o %P` lists: big, debug; set "
                    "slurm_partition in the profile to one of them")
    line = refused({}, {"train": {"gpu": 1}}, {}, {"train": {**SUBMITTED["train"], "gpu": 1}})
    assert "rule train asks for gpu: 1 but partition debug has no GPUs" in line
    assert "this cluster has none (`sinfo -h -o %G`), so use workflow/profiles/slurm-cpu" in line
    line = refused({}, {}, {"train": 16}, {"train": {**SUBMITTED["train"], "_cores": 16}})
    assert line.startswith("rule train asks for 16 CPUs (the profile's set-threads: train) but "
                           "the largest node of partition debug has 2")
    line = refused({}, {"train": {"mem_mb": 32000}}, {}, {"train": {**SUBMITTED["train"],
                                                                    "mem_mb": 32000}})
    assert "32000 MB (the profile's set-resources: train: mem_mb)" in line
    # the same job fits the larger partition, which a rule may name for itself
    check({}, {"train": {"mem_mb": 32000}}, {"train": 16},
          {"train": {**SUBMITTED["train"], "_cores": 16, "mem_mb": 32000,
                     "slurm_partition": "big"}})


def test_a_gpu_job_may_go_to_a_partition_with_gpus(cluster) -> None:
    cluster("cpu*|(null)|8|16000\ngpu|gpu:a100:4(S:0-1)|32|128000")
    job = {**SUBMITTED["train"], "gpu": 1, "slurm_partition": "cpu"}
    line = refused({}, {}, {}, {"train": job})
    assert "set slurm_partition to one with GPUs (gpu), or use workflow/profiles/slurm-cpu" in line
    check({}, {}, {}, {"train": {**job, "slurm_partition": "gpu"}})


# --- at load, through Snakemake --------------------------------------------------------------

def workflow_with(tmp_path: Path, edit) -> tuple[Path, Path]:
    """A copy of the workflow with tiny params and the slurm-cpu profile edited by `edit`."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text((ROOT / "Snakefile").read_text())
    subprocess.run(["cp", "-r", str(ROOT / "workflow"), str(work / "workflow")], check=True)
    (work / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    config = yaml.safe_load((ROOT / "workflow/profiles/slurm-cpu/config.yaml").read_text())
    edit(config)
    (work / "profile").mkdir()
    (work / "profile/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return work, work / "profile"


def snakemake(work: Path, profile: Path, path: str, *extra: str) -> subprocess.CompletedProcess:
    """The target through `profile`, with PATH: `path`, the venv, `which` (the plugin asks `which
    sacct` as it loads) and bash (Snakemake's shell), nothing else of the machine's (a real Slurm
    client there)."""
    basics = work / "basics"
    basics.mkdir(exist_ok=True)
    for tool in ("which", "bash"):
        if not (basics / tool).exists():
            (basics / tool).symlink_to(shutil.which(tool))
    env = {**os.environ, "PATH": os.pathsep.join([path, str(BIN), str(basics)]),
           "XDG_CACHE_HOME": str(work / ".cache")}
    return subprocess.run([str(BIN / "snakemake"), "--workflow-profile", str(profile), *extra,
                           "--", TABLE], cwd=work, env=env, capture_output=True, text=True,
                          timeout=300)


def wscat_lines(result: subprocess.CompletedProcess) -> list[str]:
    """Snakemake's own lines (it names the profile it reads) left out."""
    return [line for line in (result.stdout + result.stderr).splitlines()
            if line.strip() and not line.startswith("Using workflow specific profile")]


def test_at_load_a_misspelt_key_or_a_wrong_partition_stops_before_any_job(tmp_path) -> None:
    def misspelt(config: dict) -> None:
        config["default-resources"] = {"slurm_partiton": "debug"}

    work, profile = workflow_with(tmp_path, misspelt)
    fake = fake_slurm(tmp_path / "bin", "debug*|(null)|2|4000")
    result = snakemake(work, profile, str(fake))
    assert result.returncode == 2, result.stdout + result.stderr
    assert wscat_lines(result) == [line for line in result.stderr.splitlines()
                                   if line.startswith("wscat: unknown resource 'slurm_partiton'")]
    assert len(wscat_lines(result)) == 1 and "Traceback" not in result.stderr
    # the shipped profile's partition `cpu` on a cluster of `debug`: one line, nothing submitted,
    # nothing written (not even the split, which runs where Snakemake runs)
    (profile / "config.yaml").write_text(
        (ROOT / "workflow/profiles/slurm-cpu/config.yaml").read_text())
    result = snakemake(work, profile, str(fake))
    assert result.returncode == 2
    assert wscat_lines(result) == ["wscat: slurm_partition 'cpu' (the profile's default-resources: "
                                   "slurm_partition) is not a partition of this cluster; `sinfo "
                                   "-h -o %P` lists: debug; set slurm_partition in the profile to "
                                   "one of them"]
    assert not (fake / "called").exists() and not (work / "results").exists()
    # a dry run shows its jobs and says the same as a warning
    dry = snakemake(work, profile, str(fake), "-n")
    assert dry.returncode == 0, dry.stderr
    assert "wscat: warning: slurm_partition 'cpu'" in dry.stderr and "rule train:" in dry.stdout
    # no Slurm client on PATH: the one line names it, before the split ran
    result = snakemake(work, profile, str(tmp_path / "empty"))
    assert result.returncode == 2
    assert wscat_lines(result) == [
        "wscat: the Slurm client commands are not on PATH: sbatch, squeue, scancel, sinfo not "
        "found; run Snakemake on the cluster's login node (some clusters need `module load "
        "slurm` first), or run locally without --workflow-profile"]
    assert not (work / "results").exists()


def test_the_gpu_profile_on_a_cluster_without_gpus_names_the_cpu_profile(tmp_path) -> None:
    def gpu_profile(config: dict) -> None:
        config.clear()
        config.update(yaml.safe_load((ROOT / "workflow/profiles/slurm/config.yaml").read_text()))
        config["default-resources"]["slurm_partition"] = "debug"

    work, profile = workflow_with(tmp_path, gpu_profile)
    result = snakemake(work, profile, str(fake_slurm(tmp_path / "bin", "debug*|(null)|64|512000")))
    assert result.returncode == 2
    [line] = wscat_lines(result)
    assert "asks for gpu: 1 but partition debug has no GPUs" in line
    assert "use workflow/profiles/slurm-cpu" in line


def test_a_misspelt_workflow_profile_stops_in_one_line_even_a_dry_run(tmp_path) -> None:
    """Snakemake ignores a --workflow-profile that names no folder (no profile at all: every job
    local, the dry run looks fine, the real run says `cores have to be specified`)."""
    work, profile = workflow_with(tmp_path, lambda config: None)
    fake = fake_slurm(tmp_path / "bin", "debug*|(null)|2|4000")
    for extra in (("-n",), ("--cores", "2"), ()):
        result = snakemake(work, profile.with_name("profil"), str(fake), *extra)
        assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
        assert wscat_lines(result) == [
            f"wscat: --workflow-profile {profile.with_name('profil')}: no such profile folder; "
            "Snakemake would ignore it and read no profile at all, so run every job locally: "
            "check the path (the shipped ones: workflow/profiles/local, slurm, slurm-cpu)"], extra
        assert not (work / "results").exists() and not (fake / "called").exists()


def test_every_rule_too_big_for_the_node_is_named_in_the_one_line(cluster) -> None:
    """The shipped slurm-cpu sizes (16-32 GB) on a 4000 MB node: one run names every rule to
    lower, not one rule per run (six edit-and-run rounds for the shipped profile)."""
    cluster()
    asked = {rule: {**SUBMITTED["train"], "mem_mb": mem} for rule, mem in
             (("analyse", 16000), ("evaluate", 32000), ("paper_figure", 4000), ("train", 32000))}
    line = refused({}, {}, {}, asked)
    assert line.startswith("rule analyse asks for 16000 MB"), line
    assert line.endswith("; lower it in the profile, and likewise for evaluate (32000 MB), "
                         "train (32000 MB)"), line
    line = refused({}, {}, {}, {"train": asked["train"], "paper_figure": asked["paper_figure"]})
    assert line.endswith("lower it in the profile"), line
