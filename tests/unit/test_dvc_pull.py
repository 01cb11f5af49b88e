"""workflow/scripts/dvc_pull.py (`make pull`), with `dvc` and `snakemake` stood in for by a
recorder of the commands it is given (tests/workflow/test_ecosystem_run.py runs the real ones on a
pushed tiny run). From the script's docstring and docs/workflow.md ("Sharing runs"): the remote
(--remote NAME, else the default) is checked before anything runs; `dvc pull` shows its progress
on the terminal; then the stages that `dvc status` finds equal to dvc.lock are marked up to date
in one `snakemake --touch --forceall` call on their targets together (a call per stage would make
the runs two stages share newer than the first one's table); a stage that differs is named with
what differs (the params' names, else the files'), not touched, exit 1, and so is a stage whose
DAG reads an output of a differing stage (its DAG read only then); no such remote, a failed pull,
an unreadable status or a dvc.yaml without a Snakemake stage: one line, exit 2, nothing touched;
every profile records checksums past the largest checkpoint."""
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


@pytest.fixture
def root(tmp_path: Path) -> Path:
    stages = {"fetch-cifar10": {"cmd": "wscat fetch --dataset cifar10"},
              **{name: {"cmd": cmd} for name, cmd in TABLES.items()}}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return tmp_path


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `dvc pull` and `dvc status --json` answer (editable), and every command run."""
    said: dict[str, Any] = {"remote": (0, "lab\t/shared/dvc\t(default)\nother\ts3://b\n", ""),
                            "pull": (0, "", ""), "status": (0, "{}", ""), "touch": (0, "", ""),
                            "calls": []}

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        said["calls"].append(cmd)
        said.setdefault("kwargs", []).append(kwargs)
        key = "touch" if "--touch" in cmd else cmd[1]
        code, out, err = said[key]
        return subprocess.CompletedProcess(cmd, code, out, err)

    monkeypatch.setattr(dvc_pull.subprocess, "run", run)
    return said


def names(calls: list[list[str]]) -> list[list[str]]:
    return [[Path(cmd[0]).name, *cmd[1:]] for cmd in calls]


def test_every_stage_equal_is_touched_in_one_call_after_the_pull(root: Path, tools, capsys) -> None:
    assert dvc_pull.main(["--root", str(root)]) == 0
    assert names(tools["calls"]) == [
        ["dvc", "remote", "list"], ["dvc", "pull"], ["dvc", "status", "--json"],
        ["snakemake", "--touch", "--forceall", "--cores", "1", "--quiet", "all", "--",
         "results/tables/digits.tex", "results/tables/b.tex", "x.tex"]]
    # dvc pull's progress reaches the terminal (a remote of checkpoints can take minutes)
    assert "capture_output" not in tools["kwargs"][1] and "stdout" not in tools["kwargs"][1]
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "digits: pulled and up to date for Snakemake (`snakemake -n -- results/tables/digits.tex` "
        "has nothing to do)",
        "digits-b: pulled and up to date for Snakemake (`snakemake -n -- results/tables/b.tex "
        "x.tex` has nothing to do)"]


def test_the_remote_named_is_pulled_from(root: Path, tools) -> None:
    assert dvc_pull.main(["--root", str(root), "--remote", "other"]) == 0
    assert names(tools["calls"])[1] == ["dvc", "pull", "--remote", "other"]


def test_a_stage_that_differs_is_named_and_left_alone(root: Path, tools, capsys) -> None:
    tools["status"] = (0, json.dumps({"digits-b": [
        {"changed deps": {"params.yaml": {"methods.trades": "modified", "evaluation": "modified",
                                          "validation": "modified"}}},
        {"changed outs": {"results/models/a/best.pt": "deleted"}}]}), "")
    assert dvc_pull.main(["--root", str(root)]) == 1
    assert names(tools["calls"])[-1][-2:] == ["--", "results/tables/digits.tex"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("digits: pulled and up to date")
    assert out[1] == ("digits-b: left alone, it differs from dvc.lock (changed deps "
                      "methods.trades, evaluation and 1 more; changed outs "
                      "results/models/a/best.pt); `dvc status digits-b` says how; make them equal "
                      "(e.g. `git checkout params.yaml`) and run make pull again")


def test_a_stage_reading_a_differing_stages_file_is_left_alone(tmp_path: Path, tools, capsys,
                                                               monkeypatch) -> None:
    """Runs two tables share are the first stage's outputs only: a second stage whose DAG reads
    one of them is not marked up to date while the first differs (its file may be stale)."""
    stages = {"a": {"cmd": "snakemake --cores 2 -- a.tex", "outs": [{"a.tex": {}}, "shared.pt"],
                    "metrics": [{"a.json": {}}]},
              "b": {"cmd": "snakemake --cores 2 -- b.tex", "outs": [{"b.tex": {}}]},
              "c": {"cmd": "snakemake --cores 2 -- c.tex", "outs": [{"c.tex": {}}]}}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    dags = {"b.tex": {"b.tex", "shared.pt"}, "c.tex": {"c.tex", "c.pt"}}
    asked = []
    monkeypatch.setattr(dvc_pull, "dag_files", lambda root, targets: asked.append(targets) or
                        set().union(*(dags[target] for target in targets)))
    tools["status"] = (0, json.dumps({"a": [{"changed outs": {"shared.pt": "modified"}}]}), "")
    assert dvc_pull.main(["--root", str(tmp_path)]) == 1
    assert asked == [["b.tex"], ["c.tex"]]
    assert names(tools["calls"])[-1][-2:] == ["--", "c.tex"]
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "b: left alone, it reads shared.pt, an output of stage a, which differs"
    assert out[2].startswith("c: pulled and up to date")
    tools["status"] = (0, "{}", "")  # nothing differs: no DAG is read
    assert dvc_pull.main(["--root", str(tmp_path)]) == 0 and len(asked) == 2


def test_nothing_is_touched_when_every_stage_differs(root: Path, tools) -> None:
    tools["status"] = (0, json.dumps({name: [{"changed deps": {"wscat": "modified"}}]
                                      for name in TABLES}), "")
    assert dvc_pull.main(["--root", str(root)]) == 1
    assert not any("--touch" in cmd for cmd in tools["calls"])


def test_without_a_remote_this_clones_cache_is_checked_out(root: Path, tools, capsys) -> None:
    """Back at an earlier commit (`git checkout REV`): its runs are in this clone's DVC cache."""
    tools["remote"] = (0, "lab\t/shared/dvc\n", "")  # a remote, but no default one
    tools["checkout"] = (0, "", "")
    assert dvc_pull.main(["--root", str(root)]) == 0
    assert names(tools["calls"])[:3] == [["dvc", "remote", "list"], ["dvc", "checkout"],
                                         ["dvc", "status", "--json"]]
    tools["remote"], tools["checkout"] = (0, "", ""), (255, "", "")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert names(tools["calls"])[-1] == ["dvc", "checkout"]
    assert capsys.readouterr().err == (
        "make pull: `dvc checkout` failed (DVC's words above): this clone's DVC cache lacks those "
        "files and no DVC remote is set to pull them from; name the one the runs were pushed to "
        "(`make pull REMOTE=NAME`), or set a default (`dvc remote add -d NAME URL`)\n")


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
    assert names(tools["calls"]) == [["dvc", "remote", "list"]]
    assert capsys.readouterr().err == line + "\n"


def test_a_failed_pull_or_remote_list_is_one_line_and_touches_nothing(root: Path, tools,
                                                                      capsys) -> None:
    tools["pull"] = (1, "", "")  # DVC's own words went to the terminal
    assert dvc_pull.main(["--root", str(root), "--remote", "other"]) == 2
    assert names(tools["calls"])[-1] == ["dvc", "pull", "--remote", "other"]
    assert capsys.readouterr().err == ("make pull: `dvc pull --remote other` failed (DVC's words "
                                       "above); nothing was marked up to date\n")
    tools["remote"] = (251, "", "ERROR: you are not inside of a DVC repository\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == ("make pull: `dvc remote list` failed: you are not inside "
                                       "of a DVC repository\n")
    assert not any("--touch" in cmd for cmd in tools["calls"])


def test_an_unreadable_status_or_a_failed_touch_is_one_line(root: Path, tools, capsys) -> None:
    tools["status"] = (1, "", "ERROR: unexpected error\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == ("make pull: `dvc status --json` failed: ERROR: unexpected "
                                       "error\n")
    tools["status"] = (0, "{}", "")
    tools["touch"] = (1, "", "Building DAG of jobs...\nMissingInputException: x.npz\n")
    assert dvc_pull.main(["--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        "make pull: `snakemake --touch --forceall -- results/tables/digits.tex "
        "results/tables/b.tex x.tex` failed: MissingInputException: x.npz\n")


@pytest.mark.parametrize("text, why", [
    (None, "no dvc.yaml in {root}: run it in the repository's root folder"),
    ("stages:\n  fetch-x:\n    cmd: wscat fetch --dataset x\n",
     "{root}/dvc.yaml has no stage that runs Snakemake; regenerate it with "
     "`.venv/bin/python workflow/scripts/dvc_yaml.py`"),
    ("stages: [1, 2\n", "cannot read {root}/dvc.yaml:")])
def test_a_dvc_yaml_without_a_snakemake_stage_is_one_line_before_the_pull(
        tmp_path: Path, tools, capsys, text: str | None, why: str) -> None:
    if text is not None:
        (tmp_path / "dvc.yaml").write_text(text)
    assert dvc_pull.main(["--root", str(tmp_path)]) == 2
    assert tools["calls"] == []
    err = capsys.readouterr().err
    assert err.startswith("make pull: " + why.format(root=tmp_path)) and err.count("\n") == 1


def test_make_pull_runs_the_script_with_the_remote_asked_for() -> None:
    makefile = (Path(dvc_pull.ROOT) / "Makefile").read_text()
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
