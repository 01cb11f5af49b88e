"""Paste generated Markdown tables into the README, between the markers
<!-- begin: PATH --> and <!-- end: PATH --> that name the file.

    python workflow/scripts/readme_tables.py README.md results/tables/digits.md [...]
"""
from __future__ import annotations

import errno
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this repo's package
from wscat.io import write_text  # noqa: E402


def refuse(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit 2, nothing written."""
    print(f"readme_tables: {message}", file=sys.stderr)
    raise SystemExit(2)


def paste(readme: str, path: str, table: str) -> str:
    """The README with the block of `path` replaced by `table`; a missing marker is refused."""
    pattern = re.compile(rf"(<!-- begin: {re.escape(path)} -->\n).*?(<!-- end: {re.escape(path)} -->)",
                         re.S)
    if not pattern.search(readme):
        refuse(f"no '<!-- begin: {path} -->' ... '<!-- end: {path} -->' markers in the README; "
               "add them where the table belongs")
    return pattern.sub(lambda m: m.group(1) + table.rstrip("\n") + "\n" + m.group(2), readme)


def read(path: Path, what: str) -> str:
    """A file's text, or a one-line refusal naming it."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        refuse(f"{what} {path}: cannot be read ({getattr(error, 'strerror', None) or error}); "
               + ("build it first (`make readme` runs the demo's target)" if what == "table"
                  else "give the README's path"))


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        refuse("usage: readme_tables.py README.md TABLE.md [TABLE.md ...]")
    readme_path, tables = Path(argv[0]), argv[1:]
    readme = read(readme_path, "README")
    for table in tables:
        readme = paste(readme, table, read(Path(table), "table"))
    try:  # the README is replaced whole or not at all, its temporary file gone even on Ctrl-C
        write_text(readme_path, readme)
    except OSError as error:
        why = os.strerror(error.errno) if error.errno in errno.errorcode else error.strerror
        refuse(f"cannot write {readme_path} ({why or error}); make its folder "
               "writable, then run again")
    print(f"pasted {', '.join(tables)} into {readme_path}")


if __name__ == "__main__":
    main(sys.argv[1:])
