"""Paste generated Markdown tables into the README, between the markers
<!-- begin: PATH --> and <!-- end: PATH --> that name the file.

    python workflow/scripts/readme_tables.py README.md results/tables/digits.md [...]
"""
from __future__ import annotations

import re
import sys
from pathlib import Path


def paste(readme: str, path: str, table: str) -> str:
    """The README with the block of `path` replaced by `table`; a missing marker is an error."""
    pattern = re.compile(rf"(<!-- begin: {re.escape(path)} -->\n).*?(<!-- end: {re.escape(path)} -->)",
                         re.S)
    if not pattern.search(readme):
        raise SystemExit(f"readme_tables: no '<!-- begin: {path} -->' ... '<!-- end: {path} -->' "
                         "markers in the README; add them where the table belongs")
    return pattern.sub(lambda m: m.group(1) + table.rstrip("\n") + "\n" + m.group(2), readme)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: readme_tables.py README.md TABLE.md [TABLE.md ...]")
    readme_path, tables = Path(argv[0]), argv[1:]
    readme = readme_path.read_text()
    for table in tables:
        readme = paste(readme, table, Path(table).read_text())
    tmp = readme_path.with_name(f".{readme_path.name}.tmp")
    tmp.write_text(readme)
    tmp.replace(readme_path)
    print(f"pasted {', '.join(tables)} into {readme_path}")


if __name__ == "__main__":
    main(sys.argv[1:])
