"""Atomic file output: every step writes to a temporary name in the target folder, then renames.
Before the work, `check_writable` makes sure the outputs can be written at all."""
from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wscat.errors import OutputError, os_error_line

# A step refuses to start when its output's file system has less free space than this.
MIN_FREE_BYTES = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    The file gets the mode an ordinary open() would give (0666 less the umask: 0644 under the
    usual 022), not mkstemp's private 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
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


def disk_full(path: str | Path) -> bool:
    """Whether the file system holding `path` has (almost) no space left."""
    try:
        free = os.statvfs(_existing_ancestor(Path(path)))
    except OSError:
        return False
    return free.f_bavail * free.f_frsize < MIN_FREE_BYTES


def _existing_ancestor(folder: Path) -> Path:
    folder = folder.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_writable(*paths: str | Path | None, folders: bool = False) -> None:
    """Raise OutputError unless every path's folder exists or can be made, takes a new file and
    has some free space. Nothing is left behind. `folders`: the paths are output folders."""
    for path in paths:
        if path is None:
            continue
        path = Path(path)
        wanted = path if folders else path.parent
        where = _existing_ancestor(wanted)
        if not where.is_dir():
            raise OutputError(errno.ENOTDIR, f"cannot write {path}: {where} is a file, not a "
                              "folder; choose another location")
        if not folders and path.is_dir():
            raise OutputError(errno.EISDIR, f"cannot write {path}: it is a folder; pass a file path")
        try:
            fd, probe = tempfile.mkstemp(prefix=".wscat-probe.", dir=where)
            os.close(fd)
            os.unlink(probe)
            free = os.statvfs(where)
        except OSError as error:
            raise OutputError(error.errno, f"cannot write {path}: "
                              f"{os_error_line(error, where)}") from error
        if free.f_bavail * free.f_frsize < MIN_FREE_BYTES:
            raise OutputError(errno.ENOSPC, f"cannot write {path}: "
                              f"{os_error_line(OSError(errno.ENOSPC, 'full'), where)}")
