"""workflow/scripts/dvc_pull.py (`make pull`), with `dvc` and `snakemake` stood in for by a
recorder of the commands it is given (tests/workflow/test_ecosystem_run.py runs the real ones on a
pushed tiny run). From the script's docstring and docs/workflow.md ("Sharing runs"): before
anything is pulled, a missing dvc.lock, a params.yaml wscat refuses, Snakemake's lock and a
missing remote are one line, exit 2; `dvc status` then decides: a stage whose params or code
differ from dvc.lock is neither pulled nor touched and is named with what differs and what to do
(exit 1), a stage never recorded is named (exit 0); the others are pulled by name (no name: no
pull, which would take every stage), `dvc pull`'s progress on the terminal, or checked out of the
clone's cache where no default remote is set; those equal to dvc.lock after it, and reading no
file of a stage left alone (its DAG read only then), are marked up to date in one `snakemake
--touch --forceall` call (a call per stage would make the runs two stages share newer than the
first one's table), whose error line is Snakemake's own; every profile records checksums past the
largest checkpoint."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from workflow.scripts import dvc_pull

TABLES = {"digits": "snakemake --cores 2 -- results/tables/digits.tex",
          "digits-b": "snakemake --cores 4 --resources gpu=1 -- results/tables/b.tex x.tex"}
ROOT = Path(dvc_pull.ROOT)


def workspace(path: Path, stages: dict[str, dict], recorded: list[str]) -> Path:
    """dvc.yaml with `stages`, dvc.lock recording `recorded`, the repository's params.yaml."""
    (path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (path / "dvc.lock").write_text(yaml.safe_dump(
        {"schema": "2.0", "stages": {name: {"cmd": "x"} for name in recorded}}))
    (path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    stages = {"fetch-cifar10": {"cmd": "wscat fetch --dataset cifar10"},
              **{name: {"cmd": cmd} for name, cmd in TABLES.items()}}
    return workspace(tmp_path, stages, ["fetch-cifar10", *TABLES])


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What each `dvc` call answers (editable; `status` a list: before the pull, after it), and
    every command run."""
    said: dict[str, Any] = {"remote": (0, "lab\t/shared/dvc\t(default)\nother\ts3://b\n", ""),
                            "pull": (0, "", ""), "checkout": (0, "", ""),
                            "status": [(0, "{}", ""), (0, "{}", "")], "touch": (0, "", ""),
                            "calls": [], "kwargs": []}

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        said["calls"].append(cmd)
        said["kwargs"].append(kwargs)
        key = "touch" if "--touch" in cmd else cmd[1]
        answer = said[key]
        code, out, err = answer.pop(0) if isinstance(answer, list) else answer
        return subprocess.CompletedProcess(cmd, code, out, err)

    monkeypatch.setattr(dvc_pull.subprocess, "run", run)
    return said


def names(calls: list[list[str]]) -> list[list[str]]:
    return [[Path(cmd[0]).name, *cmd[1:]] for cmd in calls]


STATUS = ["dvc", "status", "--json"]
ALL = ["digits", "digits-b", "fetch-cifar10"]
TOUCH = ["snakemake", "--touch", "--forceall", "--cores", "1", "--"]


def test_every_stage_equal_is_touched_in_one_call_after_the_pull(root: Path, tools, capsys) -> None:
    assert dvc_pull.main(["--root", str(root)]) == 0
    assert names(tools["calls"]) == [
        STATUS, ["dvc", "remote", "list"], ["dvc", "pull", *ALL], STATUS,
        [*TOUCH, "results/tables/digits.tex", "results/tables/b.tex", "x.tex"]]
    # dvc pull's progress reaches the terminal (a remote of checkpoints can take minutes)
    assert "capture_output" not in tools["kwargs"][2] and "stdout" not in tools["kwargs"][2]
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "digits: pulled and up to date for Snakemake (`snakemake -n -- results/tables/digits.tex` "
        "has nothing to do)",
        "digits-b: pulled and up to date for Snakemake (`snakemake -n -- results/tables/b.tex "
        "x.tex` has nothing to do)"]


def test_a_fresh_clones_missing_files_are_pulled(root: Path, tools) -> None:
    """In a fresh clone DVC reports every output `not in cache`; `deleted` where the cache has
    it: both are only missing."""
    tools["status"][0] = (0, json.dumps({"digits": [{"changed outs": {"a.pt": "not in cache",
                                                                      "b.pt": "deleted"}}]}), "")
    assert dvc_pull.main(["--root", str(root)]) == 0
    assert names(tools["calls"])[2] == ["dvc", "pull", *ALL]


def test_the_remote_named_is_pulled_from(root: Path, tools) -> None:
    assert dvc_pull.main(["--root", str(root), "--remote", "other"]) == 0
    assert names(tools["calls"])[2] == ["dvc", "pull", "--remote", "other", *ALL]


def test_a_stage_whose_params_or_code_differ_is_neither_pulled_nor_touched(root: Path, tools,
                                                                          capsys) -> None:
    """Its files would be the commit's, its Snakemake records this workspace's params: left as
    they are, and named with what differs (the params' names, else the files')."""
    tools["status"][0] = (0, json.dumps({"digits-b": [
        {"changed deps": {"params.yaml": {"methods.trades": "modified", "evaluation": "modified",
                                          "validation": "modified"}}},
        {"changed outs": {"results/models/a/best.pt": "deleted"}}]}), "")
    assert dvc_pull.main(["--root", str(root)]) == 1
    assert names(tools["calls"])[2] == ["dvc", "pull", "digits", "fetch-cifar10"]
    assert names(tools["calls"])[-1][-2:] == ["--", "results/tables/digits.tex"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("digits: pulled and up to date")
    assert out[1] == ("digits-b: left alone, it differs from dvc.lock (changed deps "
                      "methods.trades, evaluation and 1 more; changed outs "
                      "results/models/a/best.pt): this workspace's params or code are not those "
                      "the runs were made with; put them back (e.g. `git checkout params.yaml`) "
                      "or rebuild them (`dvc repro digits-b`)")


def test_outputs_that_differ_are_pulled_dvc_keeps_unsaved_ones(root: Path, tools,
                                                                capsys) -> None:
    """Another commit's files (back at an earlier baseline) are DVC's to replace from its cache;
    a file of yours it never cached it refuses to overwrite, and the pull stops, saying what to
    do."""
    tools["status"][0] = (0, json.dumps({"digits": [{"changed outs": {
        "results/tables/digits.tex": "modified", "a.pt": "deleted", "c.pt": "new"}}]}), "")
    assert dvc_pull.main(["--root", str(root)]) == 0
    assert names(tools["calls"])[2] == ["dvc", "pull", *ALL]
    tools["status"] = (0, "{}", "")
    tools["pull"] = (1, "", "")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        "make pull: `dvc pull` failed (DVC's words above; where they name unsaved files of yours, "
        "`dvc commit` keeps them, `dvc checkout --force` drops them); nothing was marked up to "
        "date\n")


def test_a_stage_never_recorded_is_named_not_a_failure(tmp_path: Path, tools, capsys) -> None:
    workspace(tmp_path, {name: {"cmd": cmd} for name, cmd in TABLES.items()}, ["digits"])
    assert dvc_pull.main(["--root", str(tmp_path)]) == 0
    assert names(tools["calls"])[2] == ["dvc", "pull", "digits"]
    assert names(tools["calls"])[-1][-2:] == ["--", "results/tables/digits.tex"]
    assert capsys.readouterr().out.splitlines()[1] == (
        "digits-b: left alone, never recorded in dvc.lock (not built, or not committed, where it "
        "was pushed from): `dvc repro digits-b` builds it")


def test_a_stage_that_differs_after_the_pull_is_not_touched(root: Path, tools, capsys) -> None:
    tools["status"][1] = (0, json.dumps({"digits": [{"changed outs": {"a.pt": "deleted"}}]}), "")
    assert dvc_pull.main(["--root", str(root)]) == 1
    assert names(tools["calls"])[-1][-3:] == ["--", "results/tables/b.tex", "x.tex"]
    assert capsys.readouterr().out.splitlines()[0] == (
        "digits: left alone, it differs from dvc.lock after the pull (changed outs a.pt): files "
        "DVC does not cache, the table's (git's), are not the commit's; `git checkout` them back, "
        "or `dvc commit digits` records them")


def test_a_stage_reading_a_left_stages_file_is_left_alone(tmp_path: Path, tools, capsys,
                                                          monkeypatch) -> None:
    """Runs two tables share are the first stage's outputs only: a second stage whose DAG reads
    one of them is not marked up to date while the first is left alone (its file may be stale);
    the DAGs are read only then."""
    stages = {"a": {"cmd": "snakemake --cores 2 -- a.tex", "outs": [{"a.tex": {}}, "shared.pt"],
                    "metrics": [{"a.json": {}}]},
              "b": {"cmd": "snakemake --cores 2 -- b.tex", "outs": [{"b.tex": {}}]},
              "c": {"cmd": "snakemake --cores 2 -- c.tex", "outs": [{"c.tex": {}}]}}
    workspace(tmp_path, stages, ["a", "b", "c"])
    dags = {"b.tex": {"b.tex", "shared.pt"}, "c.tex": {"c.tex", "c.pt"}}
    asked = []
    monkeypatch.setattr(dvc_pull, "dag_files", lambda root, targets: asked.append(targets) or
                        set().union(*(dags[target] for target in targets)))
    tools["status"] = (0, json.dumps({"a": [{"changed deps": {"wscat": "modified"}}]}), "")
    assert dvc_pull.main(["--root", str(tmp_path)]) == 1
    assert asked == [["b.tex"], ["c.tex"]]
    assert names(tools["calls"])[-1][-2:] == ["--", "c.tex"]
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "b: left alone, it reads shared.pt, an output of stage a, which is left alone"
    assert out[2].startswith("c: pulled and up to date")
    tools["status"] = (0, "{}", "")  # nothing differs: no DAG is read
    assert dvc_pull.main(["--root", str(tmp_path)]) == 0 and len(asked) == 2


def test_nothing_is_touched_when_every_stage_differs(root: Path, tools) -> None:
    tools["status"] = (0, json.dumps({name: [{"changed deps": {"wscat": "modified"}}]
                                      for name in TABLES}), "")
    assert dvc_pull.main(["--root", str(root)]) == 1
    assert not any("--touch" in cmd for cmd in tools["calls"])
    # nothing to pull: no `dvc pull` (with no target it would take every stage)
    assert names(tools["calls"])[1:] == [["dvc", "remote", "list"],
                                         ["dvc", "pull", "fetch-cifar10"], STATUS]
    tools["calls"].clear()
    workspace(root, {name: {"cmd": cmd} for name, cmd in TABLES.items()}, list(TABLES))
    assert dvc_pull.main(["--root", str(root)]) == 1
    assert names(tools["calls"]) == [STATUS, STATUS]


def test_without_a_remote_this_clones_cache_is_checked_out(root: Path, tools, capsys) -> None:
    """Back at an earlier commit (`git checkout REV`): its runs are in this clone's DVC cache."""
    tools["remote"] = (0, "lab\t/shared/dvc\n", "")  # a remote, but no default one
    assert dvc_pull.main(["--root", str(root)]) == 0
    assert names(tools["calls"])[1:4] == [["dvc", "remote", "list"], ["dvc", "checkout", *ALL],
                                          STATUS]
    tools["remote"], tools["checkout"] = (0, "", ""), (255, "", "")
    tools["status"] = (0, "{}", "")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert names(tools["calls"])[-1] == ["dvc", "checkout", *ALL]
    assert capsys.readouterr().err == (
        "make pull: `dvc checkout` failed (DVC's words above): this clone's DVC cache lacks those "
        "files, or they would overwrite unsaved files of yours (`dvc commit` keeps them); no DVC "
        "remote is set to pull from: name the one the runs were pushed to (`make pull "
        "REMOTE=NAME`), or set a default (`dvc remote add -d NAME URL`)\n")


@pytest.mark.parametrize("remote, listed, line", [
    ("labs", "lab\t/shared/dvc\t(default)\nother\ts3://b\n",
     "make pull: no DVC remote named labs here (its remotes: lab, other); add it with `dvc remote "
     "add NAME URL`"),
    ("lab", "", "make pull: no DVC remote named lab here (it has none); add it with `dvc remote "
     "add NAME URL`")])
def test_a_missing_remote_is_one_line_before_the_pull(root: Path, tools, capsys, remote: str,
                                                      listed: str, line: str) -> None:
    tools["remote"] = (0, listed, "")
    assert dvc_pull.main(["--root", str(root), "--remote", remote]) == 2
    assert names(tools["calls"]) == [STATUS, ["dvc", "remote", "list"]]
    assert capsys.readouterr().err == line + "\n"


def test_a_failed_pull_or_remote_list_is_one_line_and_touches_nothing(root: Path, tools,
                                                                      capsys) -> None:
    tools["status"] = (0, "{}", "")
    tools["pull"] = (1, "", "")  # DVC's own words went to the terminal
    assert dvc_pull.main(["--root", str(root), "--remote", "other"]) == 2
    assert names(tools["calls"])[-1] == ["dvc", "pull", "--remote", "other", *ALL]
    assert capsys.readouterr().err.startswith("make pull: `dvc pull` failed (DVC's words above")
    tools["remote"] = (251, "", "ERROR: you are not inside of a DVC repository\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == ("make pull: `dvc remote list` failed: you are not inside "
                                       "of a DVC repository\n")
    assert not any("--touch" in cmd for cmd in tools["calls"])


def test_an_unreadable_status_or_a_failed_touch_is_one_line(root: Path, tools, capsys) -> None:
    tools["status"] = (1, "", "ERROR: unexpected error\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert names(tools["calls"]) == [STATUS]  # before anything is pulled
    assert capsys.readouterr().err == ("make pull: `dvc status --json` failed: ERROR: unexpected "
                                       "error\n")
    tools["status"] = (0, "{}", "")
    tools["touch"] = (1, "", "Using workflow specific profile profiles/default\nBuilding DAG of "
                      "jobs...\nLockException:\nError: Directory cannot be locked. Please make "
                      "sure\n  /w\nthe last line\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        "make pull: `snakemake --touch --forceall -- results/tables/digits.tex "
        "results/tables/b.tex x.tex` failed: Error: Directory cannot be locked. Please make sure\n")
    tools["touch"] = (1, "", "Building DAG of jobs...\nMissingInputException in rule x:\n  y\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err.endswith("failed: MissingInputException in rule x:\n")


def test_what_would_stop_snakemake_is_found_before_the_pull(root: Path, tools, capsys) -> None:
    """No dvc.lock, a params.yaml wscat refuses (its own line), Snakemake's lock (another run
    here, or a killed one): one line, exit 2, nothing run."""
    (root / ".snakemake" / "locks").mkdir(parents=True)
    (root / ".snakemake" / "locks" / "0.input.lock").write_text("x")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        f"make pull: Snakemake's lock is held ({root}/.snakemake/locks): another snakemake runs "
        "here, or one was killed; when none runs, `.venv/bin/snakemake --unlock`, then make pull "
        "again\n")
    (root / ".snakemake" / "locks" / "0.input.lock").unlink()
    good = (root / "params.yaml").read_text()
    (root / "params.yaml").write_text("evaluation: {pgd_steps: 5}\nevaluation: {pgd_steps: 6}\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        f"make pull: {root}/params.yaml: duplicate key evaluation: given on line 1 and on line 2; "
        "keep one (YAML readers such as Snakemake and DVC silently use the last)\n")
    (root / "params.yaml").write_text(good)
    (root / "dvc.lock").unlink()
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        f"make pull: no dvc.lock in {root}: no run was recorded here or in the commit pulled "
        "(`make demo` and `dvc repro` record theirs; commit dvc.lock, then `dvc push`)\n")
    assert tools["calls"] == []


@pytest.mark.parametrize("text, why", [
    (None, "no dvc.yaml in {root}: run it in the repository's root folder"),
    ("stages:\n  fetch-x:\n    cmd: wscat fetch --dataset x\n",
     "{root}/dvc.yaml has no stage that runs Snakemake; regenerate it with "
     "`.venv/bin/python workflow/scripts/dvc_yaml.py`"),
    ("stages: [1, 2\n", "cannot read {root}/dvc.yaml:"),
    (b"\xff\xfe\x00stages", "cannot read {root}/dvc.yaml:")])  # binary: was a traceback
def test_a_dvc_yaml_without_a_snakemake_stage_is_one_line_before_the_pull(
        tmp_path: Path, tools, capsys, text: str | bytes | None, why: str) -> None:
    if isinstance(text, bytes):
        (tmp_path / "dvc.yaml").write_bytes(text)
    elif text is not None:
        (tmp_path / "dvc.yaml").write_text(text)
    assert dvc_pull.main(["--root", str(tmp_path)]) == 2
    assert tools["calls"] == []
    err = capsys.readouterr().err
    assert err.startswith("make pull: " + why.format(root=tmp_path)) and err.count("\n") == 1


def test_make_pull_runs_the_script_with_the_remote_asked_for() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert ("pull: venv\n\t$(VENV)/bin/python workflow/scripts/dvc_pull.py "
            "$(if $(REMOTE),--remote $(REMOTE))\n") in makefile


def test_every_profile_checks_contents_past_the_largest_checkpoint() -> None:
    """DVC rewrites every file it caches after `dvc commit`, `dvc repro` and `make pull`, in its
    own order; Snakemake then reruns a job whose input looks newer unless it recorded the input's
    checksum, which it does only up to `max-checksum-file-size` (1 MB by default). Each profile
    sets it above the largest checkpoint params.yaml names: a WRN-28-10's last.pt holds its
    weights, their EMA and SGD's momentum, three copies at 4 bytes a parameter."""
    import torch

    from wscat.models import build_model

    models = yaml.safe_load((Path(dvc_pull.ROOT) / "params.yaml").read_text())["models"]
    with torch.device("meta"):
        largest = max(sum(p.numel() for p in build_model(**spec, in_channels=3, num_classes=100,
                                                         mean=(0.5,) * 3, std=(0.5,) * 3)
                          .parameters()) for spec in models.values())
    assert largest > 36_000_000  # at least WRN-28-10's 36.5 M
    profiles = sorted((Path(dvc_pull.ROOT) / "workflow/profiles").glob("*/config.yaml"))
    assert [path.parent.name for path in profiles] == ["local", "slurm", "slurm-cpu"]
    for path in profiles:
        assert yaml.safe_load(path.read_text())["max-checksum-file-size"] > 3 * 4 * largest, path
    default = Path(dvc_pull.ROOT) / "profiles/default"
    assert default.resolve() == (Path(dvc_pull.ROOT) / "workflow/profiles/local").resolve()
