"""Fixtures shared by the workflow tests."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.helpers.params_edits import edited_params_line

BIN = Path(sys.executable).parent  # the venv running the tests: snakemake, dvc, wscat
ROOT = Path(__file__).resolve().parents[1]

# `make test`'s two workers share two cores, so every test, and every process it starts (wscat,
# Snakemake's jobs), computes on one thread: two threads beside a busy core stall at random
# (docs/tests.md, benchmarks/threads_under_load.py).
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/workflow (the files that run pipelines: 30-170 s each) before tests/unit, each part
    in collection order. `make test`'s two workers take whole files first come, first served
    (--dist loadfile --no-loadscope-reorder), so the small unit files fill in at the end instead
    of one long pipeline file running alone on one worker while the other idles."""
    items.sort(key=lambda item: item.path.parent.name != "workflow")


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    """After each test, the figures it left open: the stand-ins for wscat.report.figures.save
    keep theirs to read (the real one closes its own), and a worker's twentieth open figure
    draws matplotlib's memory warning."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")  # only where a test drew: no import otherwise
    if pyplot is not None:
        pyplot.close("all")


def pytest_sessionstart(session: pytest.Session) -> None:
    """A local edit of params.yaml, named before the first test (tests/helpers/params_edits);
    written to the terminal, since `-q` (make test's) hides pytest's report header."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    line = edited_params_line(ROOT) if reporter is not None else None
    if line:
        reporter.write_line(f"note: {line}", yellow=True, bold=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """The same note after the failures, where a reader of a red run looks."""
    line = edited_params_line(ROOT) if exitstatus == pytest.ExitCode.TESTS_FAILED else None
    if line:
        terminalreporter.write_line(f"note: {line}", yellow=True, bold=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Subprocess environment: the venv first on PATH, a writable cache for Snakemake."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "XDG_CACHE_HOME": str(cache), "DVC_NO_ANALYTICS": "1"}

