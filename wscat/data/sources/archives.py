"""Make sure a source's archives are present and verified; say in one line what to do when not."""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

from wscat.data.sources.base import Archive, DatasetUnavailable, one_line

PROBE_TIMEOUT_S = 3.0


def missing_message(name: str, missing: list[Archive], download: bool, reason: str = "") -> str:
    """One line: which files are missing, where to get them, where to put them."""
    first = missing[0]
    if len(missing) == 1:
        line = (f"dataset '{name}': missing {first.path}{reason}; get it from {first.origin} "
                f"and put it at {first.path}")
    else:
        folder = first.path.parent
        names = ", ".join(a.path.name for a in missing)
        line = (f"dataset '{name}': missing {names} in {folder}{reason}; get them from "
                f"{first.origin} and put them in {folder}/")
    if not download and all(a.url for a in missing):
        line += f", or set datasets.{name}.download: true in the params file"
    return line


def host_answers(url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the download host accepts a TCP connection on port 443 (nothing is sent)."""
    host = urlparse(url).hostname
    if not host:
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


# Present archives up to this size get their md5 checked by a dry run (CIFAR's take a second);
# bigger ones (ImageNet32's batches) only at `wscat fetch` / split time.
MD5_IN_DRY_RUN_BYTES = 512 << 20


def archive_problem(name: str, archives: list[Archive], download: bool) -> str | None:
    """Cheap check: None when the archives are there or can be fetched. Present archives up to
    MD5_IN_DRY_RUN_BYTES are md5-checked, with the split step's line when corrupt."""
    missing = [a for a in archives if not a.path.is_file()]
    for archive in archives:
        if archive not in missing and archive.path.stat().st_size <= MD5_IN_DRY_RUN_BYTES:
            try:
                verify(name, archive)
            except DatasetUnavailable as error:
                return str(error)
    if not missing:
        return None
    if download and all(a.url for a in missing):
        silent = sorted({urlparse(a.url).hostname or "" for a in missing
                         if not host_answers(a.url or "")})
        if not silent:
            return None
        return missing_message(name, missing, download, f" and {', '.join(silent)} does not answer")
    return missing_message(name, missing, download)


def _download(name: str, archive: Archive) -> None:
    """Download into a temporary folder beside the target, then rename (no half-written archive)."""
    from torchvision.datasets.utils import download_url

    assert archive.url is not None
    made = [p for p in reversed(archive.path.parents) if not p.exists()]  # removed on failure
    archive.path.parent.mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".{archive.path.name}.", dir=archive.path.parent)
    try:
        download_url(archive.url, root=scratch, filename=archive.path.name, md5=archive.md5)
        os.replace(os.path.join(scratch, archive.path.name), archive.path)
        made = []
    except (OSError, RuntimeError) as error:  # URLError is an OSError; md5 mismatch a RuntimeError
        raise DatasetUnavailable(missing_message(
            name, [archive], True, f" (download failed: {one_line(error)})")) from error
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for folder in reversed(made):
            shutil.rmtree(folder, ignore_errors=True)


def md5_of(path: Path, chunk: int = 1 << 20) -> str:
    """The file's md5 as hex (hashlib here: importing torchvision alone takes seconds); computed
    once per file version in a process (a dry run asks once per dataset sharing the archive)."""
    stat = path.stat()
    return _md5_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns, chunk)


@lru_cache(maxsize=64)
def _md5_cached(path: str, size: int, mtime_ns: int, chunk: int) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify(name: str, archive: Archive) -> None:
    """Check the archive's md5, where it has one."""
    if archive.md5 is None:
        return
    found = md5_of(archive.path)
    if found != archive.md5.lower():
        raise DatasetUnavailable(
            f"dataset '{name}': {archive.path} fails its md5 check (expected {archive.md5}, got "
            f"{found}); get it again from {archive.origin} and put it at {archive.path}"
            f"{archive.changed}")


def fetch(name: str, archives: list[Archive], download: bool) -> None:
    """Download missing archives where allowed, then verify every archive."""
    for archive in archives:
        if not archive.path.is_file() and download and archive.url:
            _download(name, archive)
    missing = [a for a in archives if not a.path.is_file()]
    if missing:
        raise DatasetUnavailable(missing_message(name, missing, download))
    for archive in archives:
        verify(name, archive)
