"""Provenance for manifests: the package versions and git revision a run used, and its hardware."""
from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from wscat import __version__


def versions() -> dict[str, str]:
    """Package versions and git revision, for manifests."""
    found = {"python": platform.python_version(), "wscat": __version__}
    for package in ("torch", "torchvision", "pyautoattack", "numpy", "scikit-learn"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    try:
        found["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        found["git"] = "unknown"
    return found


def machine(device: torch.device) -> str:
    """The hardware a run used, for Tab-ap-time's caption: GPU name, or CPU model and threads."""
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
