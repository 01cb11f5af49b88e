"""A `--workflow-profile` that names no profile: Snakemake ignores it without a word.

Snakemake looks for the profile given to `--workflow-profile` as a path, then under profiles/ of
the current folder and of the Snakefile's; where none exists it reads no profile at all (not even
profiles/default), so a misspelt `--workflow-profile my-profil -n` dry-runs every job locally as if
all were well, and the real run stops with "cores have to be specified for local execution". The
workflow stops in one line instead, as it loads. No torch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


def candidates(given: str, snakefile_dir: Path) -> list[Path]:
    """Where Snakemake (9.x, snakemake.cli.parse_args) looks for `--workflow-profile given`."""
    return [Path(given), Path("profiles") / given, snakefile_dir / "profiles" / given]


def missing(args: Any, snakefile_dir: Path) -> str | None:
    """One line saying that the `--workflow-profile` of the command line `args` names no profile,
    or None (none given, `none`, found, or `--directory` moved the folder it is relative to)."""
    given = getattr(args, "workflow_profile", None)
    if not given or given == "none" or getattr(args, "directory", None):
        return None
    if any(path.exists() for path in candidates(str(given), snakefile_dir)):
        return None
    elsewhere = "" if Path(given).is_absolute() else (f" (nor profiles/{given} here or beside "
                                                      "the Snakefile)")
    return (f"--workflow-profile {given}: no such profile folder{elsewhere}; Snakemake would "
            "ignore it and read no profile at all, so run every job locally: check the path "
            "(the shipped ones: workflow/profiles/local, slurm, slurm-cpu)")
