"""A `--workflow-profile` naming no profile (wscat.workflow_profile): Snakemake ignores it without a
word (no profile at all, so every job local), the workflow stops in one line instead."""
from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from wscat.workflow_profile import missing


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with my-profile/, profiles/default/ and a Snakefile folder with profiles/slurm/."""
    (tmp_path / "my-profile").mkdir()
    (tmp_path / "profiles/default").mkdir(parents=True)
    (tmp_path / "wf/profiles/slurm").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_misspelt_profile_is_named_in_one_line(here: Path) -> None:
    line = missing(Namespace(workflow_profile="my-profil", directory=None), here / "wf")
    assert line is not None and "\n" not in line
    assert line.startswith("--workflow-profile my-profil: no such profile folder")
    assert "run every job locally" in line and "workflow/profiles/" in line


@pytest.mark.parametrize("given", ["my-profile", "HERE/my-profile", "default", "slurm", "none",
                                   None, ""])
def test_a_profile_snakemake_finds_or_none_passes(here: Path, given: str | None) -> None:
    """As a path (HERE: the test's folder, an absolute one), under profiles/ here or beside the
    Snakefile; `none` and no flag: no check."""
    given = given.replace("HERE", str(here)) if given else given
    assert missing(Namespace(workflow_profile=given, directory=None), here / "wf") is None


def test_no_check_under_the_api_or_with_directory(here: Path) -> None:
    assert missing(None, here) is None
    # --directory moved the folder the path is relative to: not checked
    assert missing(Namespace(workflow_profile="my-profil", directory="elsewhere"), here) is None


def test_an_absolute_path_is_named_alone(here: Path) -> None:
    line = missing(Namespace(workflow_profile=str(here / "nope"), directory=None), here)
    assert line is not None and line.startswith(f"--workflow-profile {here / 'nope'}: no such "
                                                "profile folder; Snakemake would ignore it")
