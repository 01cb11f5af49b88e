"""`make clean`: results/ and .snakemake/ go, unless something writes in them now.

A training or evaluation that runs (by hand, through the API, or as a Snakemake job) holds the
output lock of what it writes (`wscat.io.output_lock`), and a running Snakemake works in this
checkout with its records in .snakemake/. Removing their folders under them loses what they have
done so far (a training's resume/ checkpoints included) and leaves them writing into folders that
are gone. So this checks first, and removes nothing while any of them runs:

    python workflow/scripts/clean.py [--root DIR]    # make clean

Exit 0: removed (every entry of results/ but its hidden files, as `rm -rf results/*` did, then
results/.gitkeep, and .snakemake/); exit 2: one line naming what runs, nothing removed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: this repository's package
    sys.path.insert(0, str(ROOT))
from wscat.io import LOCK_SUFFIX, writer_of  # noqa: E402


def locked_outputs(results: Path) -> list[tuple[Path, str]]:
    """(output, its writer) for every output under `results` whose lock a live process holds."""
    busy = []
    for lock in sorted(results.rglob(f".*{LOCK_SUFFIX}")):
        output = lock.with_name(lock.name[1:-len(LOCK_SUFFIX)])
        writer = writer_of(output)
        if writer is not None:
            busy.append((output, writer))
    return busy


def _is_snakemake(argv: list[str]) -> bool:
    """Whether a command line runs Snakemake (its script, or `python -m snakemake`)."""
    head = [os.path.basename(arg) for arg in argv[:3]]
    return bool(head) and (head[0] == "snakemake" or head[1:2] == ["snakemake"]
                           or head[1:3] == ["-m", "snakemake"])


def snakemakes_in(root: Path) -> list[int]:
    """The pids of the Snakemake processes working in `root` now (Linux's /proc; none
    elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if int(entry.name) != os.getpid() and cwd == root and _is_snakemake(argv):
            found.append(int(entry.name))
    return sorted(found)


def busy_line(root: Path) -> str | None:
    """The one line that stops the clean, or None where nothing writes in results/ now."""
    busy = [f"{output.relative_to(root)} is being written ({writer})"
            for output, writer in locked_outputs(root / "results")]
    busy += [f"snakemake (pid {pid}) runs in {root}" for pid in snakemakes_in(root)]
    if not busy:
        return None
    more = f" (and {len(busy) - 1} more)" if len(busy) > 1 else ""
    return (f"make clean: {busy[0]}{more}; removing results/ now would lose its files: wait for "
            "it to finish or stop it, then run make clean again (nothing was removed)")


def clean(root: Path) -> None:
    """Remove results/'s entries but its hidden files, then .snakemake/; keep results/.gitkeep."""
    results = root / "results"
    if results.is_dir():
        for entry in sorted(results.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    shutil.rmtree(root / ".snakemake", ignore_errors=True)
    results.mkdir(exist_ok=True)
    (results / ".gitkeep").touch()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the checkout whose results/ and .snakemake/ go (default: here)")
    root = parser.parse_args(argv).root.resolve()
    line = busy_line(root)
    if line is not None:
        print(line, file=sys.stderr)
        return 2
    clean(root)
    print(f"make clean: removed results/ and .snakemake/ in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
