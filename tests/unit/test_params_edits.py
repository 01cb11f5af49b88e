"""A local edit of params.yaml is named at the start of `make test` and, when tests failed, at its
end (tests/helpers/params_edits.py, tests/conftest.py): the tests check the committed params, and
docs/methods.md's `mart` added to the demo fails some of them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.params_edits import edited_params_line


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=folder, check=True, capture_output=True)


def test_an_edit_of_params_yaml_is_named_and_a_clean_one_is_not(tmp_path: Path) -> None:
    assert edited_params_line(tmp_path) is None  # no git: nothing to compare with
    _git(tmp_path, "init", "-q")
    (tmp_path / "params.yaml").write_text("seeds: [1, 2, 3]\n")
    assert edited_params_line(tmp_path) is None  # no commit yet
    _git(tmp_path, "add", "params.yaml")
    _git(tmp_path, "commit", "-q", "-m", "params")
    (tmp_path / "other.txt").write_text("x\n")
    assert edited_params_line(tmp_path) is None  # another file's edit is not this one
    (tmp_path / "params.yaml").write_text("seeds: [1, 2, 3, 4]\n")
    line = edited_params_line(tmp_path)
    assert line is not None and "params.yaml differs from the committed one" in line


def test_make_test_names_the_edit_first_and_after_a_failure(tmp_path: Path) -> None:
    """The hooks in a run of pytest on a checkout whose params.yaml is edited."""
    root = Path(__file__).resolve().parents[2]
    work = tmp_path / "checkout"
    _git(tmp_path, "clone", "-q", "--no-hardlinks", str(root), str(work))
    for part in ("tests/conftest.py", "tests/helpers/params_edits.py"):  # as they are now
        (work / part).write_text((root / part).read_text())
    with open(work / "params.yaml", "a") as params:
        params.write("# an edit\n")
    (work / "tests" / "unit" / "test_fails.py").write_text("def test_fails():\n    assert 0\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "0", "tests/unit/test_fails.py"], cwd=work, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    notes = [line for line in done.stdout.splitlines() if "params.yaml differs" in line]
    assert len(notes) == 2, done.stdout
