"""Atomic file output: every step writes to a temporary name in the target folder, then renames."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> None:
    """Call `write(tmp_path)` and move the result onto `path`."""
    with atomic_path(path) as tmp:
        write(tmp)


def write_text(path: str | Path, text: str) -> None:
    """Write text atomically."""
    atomic_write(path, lambda tmp: tmp.write_text(text))


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically, pretty-printed with sorted keys (diff-friendly, deterministic)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
