"""Whether params.yaml differs from the committed one: the tests check the project's own params
(the demo's methods and seeds, the paper's tiers), so an edit of yours, such as docs/methods.md's
`mart` added to the demo, fails tests that pass on the committed file. `make test` says so at
its start and, when tests failed, at its end (tests/conftest.py)."""
from __future__ import annotations

import subprocess
from pathlib import Path


def edited_params_line(root: Path) -> str | None:
    """The line that names a local edit of `root`/params.yaml, or None (no edit, or no git)."""
    try:  # outside a repository `git diff` compares files as diff(1) does: ask git first
        inside = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root,
                                capture_output=True, timeout=30)
        diff = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "params.yaml"], cwd=root,
                              capture_output=True, timeout=30) if inside.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None
    if diff is None or diff.returncode != 1:  # no git or no commit; 0: as committed
        return None
    return ("params.yaml differs from the committed one (`git diff params.yaml`): the tests "
            "check the committed params, so an edit of yours can fail tests that pass without "
            "it; run them on a clean checkout (`git stash`, or a fresh clone)")
