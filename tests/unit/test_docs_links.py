"""Every relative link of the committed Markdown (README, docs/, DEVELOPERS.md, the results'
pages) reaches its file, and its #anchor a heading there, as GitHub renders it: a moved page or
a renamed section breaks no reader's path."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (outside code blocks)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def broken(page: Path) -> list[str]:
    """`page`'s relative links whose file or heading is missing, as 'target: why'."""
    found = []
    for match in LINK.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path) if path else page
        if not dest.exists():
            found.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            found.append(f"{target}: no heading with that anchor in {dest.name}")
    return found


def pages() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [ROOT / name for name in listed]


def test_every_relative_link_of_the_docs_reaches_its_file_and_heading() -> None:
    found = {str(page.relative_to(ROOT)): broken(page) for page in pages()}
    assert len(found) > 40 and "README.md" in found and "docs/workflow.md" in found
    assert {page: links for page, links in found.items() if links} == {}


@pytest.mark.parametrize(("link", "why"), [
    ("[a](docs/nowhere.md)", "no such file"),
    ("[a](docs/workflow.md#no-such-section)", "no heading with that anchor"),
    ("[a](#not-here)", "no heading with that anchor"),
])
def test_a_missing_page_or_heading_is_caught(tmp_path: Path, link: str, why: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/workflow.md").write_text("# Workflow\n\n## Your own images\n")
    page = tmp_path / "README.md"
    page.write_text(f"# Top\n\n{link} and [fine](docs/workflow.md#your-own-images), "
                    "[web](https://example.org), [top](#top)\n")
    assert [why in line for line in broken(page)] == [True]


def test_headings_slug_as_github_does() -> None:
    assert slug("How the demo's settings were chosen: with labels outside the budget") == \
        "how-the-demos-settings-were-chosen-with-labels-outside-the-budget"
    assert slug("Fresh seeds: the answer") == "fresh-seeds-the-answer"
    assert slug("`wscat evaluate` on your checkpoint") == "wscat-evaluate-on-your-checkpoint"
