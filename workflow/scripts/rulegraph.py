"""Render the workflow's rule graph (the README's data-flow picture) with Graphviz's `dot`.

    python workflow/scripts/rulegraph.py docs/rulegraph.svg [TARGET ...]

Runs `snakemake --rulegraph` on the targets (default: every table and figure of the digits tier)
and lays the graph out with `dot`; the output's suffix (.svg, .png, .pdf) picks the format.
`make rulegraph` calls it; rerun it after adding or renaming a rule.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: its Snakefile
sys.path.insert(0, str(ROOT))  # this repo's package
from wscat.errors import OutputError, write_error_line  # noqa: E402
from wscat.io import atomic_path, check_writable  # noqa: E402

DEFAULT_TARGETS = ["results/paper/digits/index.md"]


def rule_graph(targets: list[str]) -> str:
    """The DOT text of `snakemake --rulegraph` for the targets."""
    env = {**os.environ}
    env.setdefault("XDG_CACHE_HOME", str(ROOT / ".cache"))  # Snakemake needs a writable one
    search = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    snakemake = shutil.which("snakemake", path=search)
    if snakemake is None:
        raise SystemExit("rulegraph: snakemake is not installed; run `make venv` first")
    done = subprocess.run([snakemake, "--quiet", "all", "--rulegraph", "--", *targets], env=env,
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or "digraph" not in done.stdout:
        why = (done.stderr or done.stdout).strip()
        raise SystemExit(f"rulegraph: snakemake --rulegraph failed:\n{why}")
    return stable(done.stdout[done.stdout.index("digraph"):])


def stable(dot_text: str) -> str:
    """The same DOT text on every run: Snakemake lists the edges in set order, so sort them."""
    lines = dot_text.rstrip().splitlines()
    edges = sorted((line for line in lines if " -> " in line),
                   key=lambda line: [int(node) for node in line.split("->")])
    others = [line for line in lines if " -> " not in line]
    return "\n".join([*others[:-1], *edges, others[-1]]) + "\n"


def render(dot_text: str, out: Path) -> None:
    """Lay the graph out with `dot` into `out` (format from its suffix). `dot` writes to stdout
    and `out` is replaced whole once it succeeded: a failed or killed `dot` leaves it as it was."""
    dot = shutil.which("dot")
    if dot is None:
        raise SystemExit("rulegraph: Graphviz's `dot` is not installed "
                         "(e.g. apt-get install graphviz)")
    fmt = out.suffix.lstrip(".")
    done = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode(), capture_output=True)
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()
        raise SystemExit(f"rulegraph: dot -T{fmt} failed:\n{why}")
    try:
        with atomic_path(out) as tmp:
            tmp.write_bytes(done.stdout)
    except OSError as error:
        raise SystemExit(f"rulegraph: {write_error_line(error, out)}") from None


def main(argv: list[str]) -> None:
    """Bad arguments (an OUT that cannot be written too): one line, exit 2, before Snakemake runs;
    a missing tool or a failed run of Snakemake or `dot`: its message, exit 1."""
    if not argv or argv[0].startswith("-"):
        print("usage: rulegraph.py OUT.svg [TARGET ...]", file=sys.stderr)
        raise SystemExit(2)
    if not Path(argv[0]).suffix:
        print(f"rulegraph: {argv[0]} has no suffix to pick the format from (.svg, .png, .pdf)",
              file=sys.stderr)
        raise SystemExit(2)
    try:
        check_writable(argv[0])
    except OutputError as error:
        print(f"rulegraph: {error.strerror}", file=sys.stderr)
        raise SystemExit(2) from None
    render(rule_graph(argv[1:] or DEFAULT_TARGETS), Path(argv[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
