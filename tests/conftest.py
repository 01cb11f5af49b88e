"""Fixtures shared by the workflow tests."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent  # the venv running the tests: snakemake, dvc, wscat


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Subprocess environment: the venv first on PATH, a writable cache for Snakemake."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "XDG_CACHE_HOME": str(cache), "DVC_NO_ANALYTICS": "1"}
