"""`.venv/bin/snakemake` without the venv on PATH: every rule's `wscat ...` command failed with
`wscat: command not found` (and Snakemake removed the job's outputs). The workflow now puts the
folder of the Python running Snakemake first on PATH when `wscat` is there and nowhere on PATH
(wscat.workflow.wscat_on_path); an existing `wscat` on PATH is left alone; with none at all it
says so in one line."""
from __future__ import annotations

import os
from pathlib import Path

from wscat.workflow import wscat_on_path


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_wscat_beside_snakemakes_python_goes_first_on_path(tmp_path: Path) -> None:
    venv_bin = executable(tmp_path / "venv/bin/wscat").parent
    environ = {"PATH": str(tmp_path / "usr/bin")}
    assert wscat_on_path(environ, str(venv_bin / "python")) is None
    assert environ["PATH"] == os.pathsep.join([str(venv_bin), str(tmp_path / "usr/bin")])


def test_a_wscat_on_path_is_left_alone(tmp_path: Path) -> None:
    executable(tmp_path / "venv/bin/wscat")
    mine = executable(tmp_path / "mine/bin/wscat").parent
    environ = {"PATH": str(mine)}
    assert wscat_on_path(environ, str(tmp_path / "venv/bin/python")) is None
    assert environ == {"PATH": str(mine)}


def test_no_wscat_anywhere_is_one_line(tmp_path: Path) -> None:
    environ = {"PATH": str(tmp_path / "usr/bin")}
    line = wscat_on_path(environ, str(tmp_path / "venv/bin/python"))
    assert line is not None and "\n" not in line and "source .venv/bin/activate" in line
    assert environ == {"PATH": str(tmp_path / "usr/bin")}

