"""Check a rendered .tex table: compile it with a LaTeX engine when one is installed, and in
any case parse its tabular into rows of cells (column count from the column spec)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ENGINES = ("pdflatex", "lualatex", "xelatex")
PREAMBLE = "\\documentclass{article}\n\\usepackage{booktabs,bm,amsmath}\n\\begin{document}\n"


def engine() -> str | None:
    return next((name for name in ENGINES if shutil.which(name)), None)


def compile_tex(path: Path, workdir: Path) -> None:
    """Compile `path` inside a minimal document; raise with the log's error lines if it fails."""
    name = engine()
    assert name is not None
    document = workdir / f"{path.stem}-document.tex"
    document.write_text(PREAMBLE + path.read_text() + "\n\\end{document}\n")
    result = subprocess.run([name, "-interaction=nonstopmode", "-halt-on-error", document.name],
                            cwd=workdir, capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stdout.splitlines() if line.startswith("!")]
    assert result.returncode == 0, f"{path.name}: {name} failed: {errors[:3]}"


def tabular_rows(tex: str) -> list[list[str]]:
    """The rows (header included) of the only tabular in `tex`, each a list of cells; asserts
    that every row has as many cells as the column spec has columns."""
    match = re.search(r"\\begin\{tabular\}\{([^}]*)\}(.*?)\\end\{tabular\}", tex, re.S)
    assert match, "no tabular environment"
    spec, body = match.groups()
    columns = len(re.findall(r"[lcr]", spec))
    body = re.sub(r"\\(toprule|midrule|bottomrule)", "", body)
    rows = []
    for raw in re.split(r"\\\\", body):
        if not raw.strip():
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)&", raw)]
        assert len(cells) == columns, f"row {cells} has {len(cells)} cells, the spec {spec!r} {columns}"
        rows.append(cells)
    return rows


def check_table(path: Path, workdir: Path) -> list[list[str]]:
    """Compile (when a LaTeX engine is installed) and parse one table file."""
    if engine():
        compile_tex(path, workdir)
    return tabular_rows(path.read_text())
