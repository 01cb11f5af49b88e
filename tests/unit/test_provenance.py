"""wscat.provenance.git_revision: the commit a manifest names, and whether the code was changed."""
from __future__ import annotations

import subprocess
from pathlib import Path

from wscat.provenance import code_digest, git_revision

GIT = ["git", "-c", "user.name=wscat-test", "-c", "user.email=wscat-test@example.invalid"]


def _commit(repo: Path) -> str:
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", "x"], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_package_folders_commit_and_its_own_changes_only(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    package = tmp_path / "wscat"
    package.mkdir()
    (package / "losses.py").write_text("BETA = 1\n")
    (tmp_path / "params.yaml").write_text("a: 1\n")
    commit = _commit(tmp_path)
    assert len(commit) >= 7 and git_revision(package) == commit
    (tmp_path / "params.yaml").write_text("a: 2\n")  # outside the package: the manifest's params
    (package / "scratch.py").write_text("")  # untracked: not code the run imported by name
    assert git_revision(package) == commit
    (package / "losses.py").write_text("BETA = 2\n")
    assert git_revision(package) == f"{commit}+modified"
    assert _commit(tmp_path) != commit and not git_revision(package).endswith("+modified")


def test_outside_a_checkout_it_is_unknown(tmp_path: Path) -> None:
    assert git_revision(tmp_path) == "unknown"


def test_the_code_digest_follows_the_package_s_python_files_but_not_its_reports(
        tmp_path: Path) -> None:
    """What a resume checks (wscat.training.trainer): any edit of a module a training may run,
    a new module too; the report code, which no training reads, left out."""
    def digest_of(files: dict[str, str]) -> str:
        package = tmp_path / f"pkg{len(list(tmp_path.iterdir()))}"
        for name, text in files.items():
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            (package / name).write_text(text)
        return code_digest(package)

    base = {"losses.py": "LOSS = 1\n", "report/table.py": "ROWS = 1\n", "notes.md": "a\n"}
    first = digest_of(base)
    assert digest_of(base) == first and len(first) == 16
    assert digest_of({**base, "losses.py": "LOSS = 2\n"}) != first
    assert digest_of({**base, "methods/new.py": ""}) != first
    assert digest_of({**base, "report/table.py": "ROWS = 2\n", "notes.md": "b\n"}) == first
