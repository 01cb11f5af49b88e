"""Provenance for manifests: the package versions and git revision a run used, and its hardware.
torch is imported by `machine` alone, so that a script that only records versions or the code
digest (benchmarks/cifar10_proxy.py's checks and refusals) starts in a fraction of a second."""
from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from wscat import __version__

if TYPE_CHECKING:
    import torch


def versions() -> dict[str, str]:
    """Package versions and git revision, for manifests."""
    found = {"python": platform.python_version(), "wscat": __version__}
    for package in ("torch", "torchvision", "pyautoattack", "numpy", "scikit-learn"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    found["git"] = git_revision()
    return found


@functools.cache
def code_digest(package: Path = Path(__file__).resolve().parent) -> str:
    """16 hex digits of the SHA-256 of the package's Python files (paths and bytes), the report
    code (`report/`, which no training reads) left out: a resume/last.pt trained by other code
    is not continued (wscat.training.trainer)."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative.startswith("report/"):
            continue
        digest.update(f"{relative}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def git_revision(package: Path = Path(__file__).resolve().parent) -> str:
    """The checkout's commit that the running code comes from, `+modified` when the package's
    tracked files differ from it (a number made by uncommitted code says so); "unknown" outside
    a git checkout. Asked of the package's own folder, not the current one."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}+modified" if commit and changed else commit or "unknown"


def machine(device: torch.device) -> str:
    """The hardware a run used, for Tab-ap-time's caption: GPU name, or CPU model and threads."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = platform.processor() or "CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = torch.get_num_threads()
    return f"{name} ({threads} thread{'s' if threads > 1 else ''})"
