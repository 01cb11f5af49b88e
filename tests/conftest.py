"""Fixtures shared by the workflow tests."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

BIN = Path(sys.executable).parent  # the venv running the tests: snakemake, dvc, wscat


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Subprocess environment: the venv first on PATH, a writable cache for Snakemake."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "XDG_CACHE_HOME": str(cache), "DVC_NO_ANALYTICS": "1"}


@pytest.fixture
def one_thread():
    """Tiny tensors: one thread is faster, and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
