"""pyflakes' rules over every Python file of the repository (`ruff check`, configured in
pyproject.toml's [tool.ruff.lint]): an undefined name on an error path that no other test runs,
an import left behind by a move, a variable that hides an import. ruff comes with `make venv`
(requirements-dev.txt)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"


def ruff(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    assert RUFF.is_file(), f"{RUFF} is missing: `make venv` installs it (requirements-dev.txt)"
    return subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise",
                           "--config", str(ROOT / "pyproject.toml"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_python_file_passes_pyflakes() -> None:
    listed = ruff("--show-files")
    files = [line for line in listed.stdout.splitlines() if line.endswith(".py")]
    assert len(files) > 200 and any(f.endswith("wscat/cli.py") for f in files), listed.stdout
    result = ruff()
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_undefined_name_or_a_left_over_import_is_caught(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    result = ruff("bad.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "F401" in result.stdout and "F821" in result.stdout, result.stdout
