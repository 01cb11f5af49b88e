"""How the workflow's helper scripts write their outputs: never over a file they read, a folder or
an unwritable place (one line, exit 2, before the work), and whole or not at all (a failed or
interrupted write leaves the earlier file and no temporary one).

- workflow/scripts/dvc_yaml.py: an --output that is params.yaml or the Snakefile replaced the file
  it read; a folder or a missing folder was a traceback; the write was not atomic.
- workflow/scripts/report_screenshot.py: a PNG path that is the report replaced the report (its
  docstring: "the report file itself is not changed"); a PNG path that cannot be written was
  found out only after Chromium ran.
- workflow/scripts/rulegraph.py: `dot -o OUT` wrote the tracked docs/rulegraph.svg itself, so a
  failed or killed `dot` left it truncated.
- workflow/scripts/readme_tables.py: a Ctrl-C while writing left its fixed `.README.md.tmp`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.unit.test_workflow_scripts_mutations import executable
from workflow.scripts import dvc_yaml, readme_tables, report_screenshot, rulegraph

GRAPH = 'digraph g {\n\t0[label = "all"];\n\t1[label = "table"];\n\t1 -> 0\n}\n'


def one_line_exit_2(capsys: pytest.CaptureFixture[str], prefix: str, call) -> str:
    """`call` refuses with SystemExit(2) and one line on stderr starting with `prefix`."""
    with pytest.raises(SystemExit) as stop:
        call()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(prefix) and err.count("\n") == 1, err
    return err


def interrupt_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Path.write_text writes half its text, then Ctrl-C arrives."""
    original = Path.write_text

    def half(self: Path, text: str, *args, **kwargs) -> int:
        original(self, text[:len(text) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half)


# ---------------------------------------------------------------- dvc_yaml

@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """dvc_yaml.render stood in for (no Snakemake): the roots it was called with."""
    calls: list[Path] = []

    def render(root: Path, names, every) -> str:
        calls.append(root)
        return "stages:\n  demo: {}\n"

    monkeypatch.setattr(dvc_yaml, "render", render)
    return calls


@pytest.fixture
def root(tmp_path: Path, renders: list[Path]) -> Path:
    """A workflow root: params.yaml, Snakefile, workflow/."""
    (tmp_path / "params.yaml").write_text("experiments: {}\n")
    (tmp_path / "Snakefile").write_text("rule all:\n")
    (tmp_path / "workflow").mkdir()
    return tmp_path


@pytest.mark.parametrize("output", ["params.yaml", "Snakefile", "./sub/../params.yaml", "link"])
def test_dvc_yaml_refuses_an_output_it_reads(root: Path, renders: list[Path], capsys,
                                             output: str) -> None:
    (root / "sub").mkdir()
    (root / "link").symlink_to(root / "params.yaml")
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    err = one_line_exit_2(capsys, "dvc_yaml: ", lambda: dvc_yaml.main(
        ["--root", str(root), "--output", str(root / output)]))
    assert "is the input" in err and "nothing was written" in err
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == before
    assert renders == []  # refused before Snakemake's DAG is asked for


@pytest.mark.parametrize("output", ["workflow", "params.yaml/dvc.yaml"])
def test_dvc_yaml_refuses_a_folder_or_a_path_under_a_file(root: Path, renders: list[Path],
                                                           capsys, output: str) -> None:
    err = one_line_exit_2(capsys, "dvc_yaml: cannot write ", lambda: dvc_yaml.main(
        ["--root", str(root), "--output", str(root / output)]))
    assert str(root / output) in err
    assert (root / "params.yaml").read_text() == "experiments: {}\n"
    assert sorted(p.name for p in root.iterdir()) == ["Snakefile", "params.yaml", "workflow"]
    assert list((root / "workflow").iterdir()) == []
    assert renders == []


@pytest.mark.parametrize("content", [b"import os\n", b"", b"\xff\xfe binary"])
def test_dvc_yaml_keeps_a_file_it_did_not_write(root: Path, renders: list[Path], capsys,
                                                content: bytes) -> None:
    """`--output wscat/io.py` (any file the script did not generate: a source file, yours, an
    empty one) is refused before Snakemake runs; one it generated is replaced."""
    mine = root / "workflow/mine.py"
    mine.write_bytes(content)
    err = one_line_exit_2(capsys, "dvc_yaml: --output ", lambda: dvc_yaml.main(
        ["--root", str(root), "--output", str(mine)]))
    assert "a file this script did not write" in err and "delete it first" in err
    assert mine.read_bytes() == content and renders == []
    generated = root / "dvc.yaml"
    generated.write_text(dvc_yaml.HEADER + "stages: {}\n")
    assert dvc_yaml.main(["--root", str(root), "--output", str(generated)]) == 0
    assert generated.read_text() == "stages:\n  demo: {}\n"


def test_dvc_yaml_writes_into_a_new_folder(root: Path) -> None:
    assert dvc_yaml.main(["--root", str(root), "--output", str(root / "new/dvc.yaml")]) == 0
    assert (root / "new/dvc.yaml").read_text() == "stages:\n  demo: {}\n"
    assert dvc_yaml.main(["--root", str(root)]) == 0  # the default: ROOT/dvc.yaml
    assert (root / "dvc.yaml").read_text() == "stages:\n  demo: {}\n"


def test_dvc_yaml_interrupted_leaves_the_earlier_file(root: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    earlier = dvc_yaml.HEADER + "stages: {}\n"  # one it wrote before
    (root / "dvc.yaml").write_text(earlier)
    interrupt_writes(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        dvc_yaml.main(["--root", str(root)])
    assert (root / "dvc.yaml").read_text() == earlier
    assert sorted(p.name for p in root.iterdir()) == ["Snakefile", "dvc.yaml", "params.yaml",
                                                      "workflow"]


# ---------------------------------------------------------------- report_screenshot

REPORT = '<html><body><div id="app"></div></body></html>\n'


@pytest.fixture
def chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in `chromium` on PATH that writes PNG at --screenshot and records that it ran."""
    executable(tmp_path / "bin/chromium",
               f'touch {tmp_path}/ran\nfor a in "$@"; do case "$a" in --screenshot=*) '
               'echo PNG > "${a#--screenshot=}";; esac; done\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r").mkdir()
    (tmp_path / "r/report.html").write_text(REPORT)
    return tmp_path


@pytest.mark.parametrize("png", ["r/report.html", "./r/../r/report.html", "hard.html"])
def test_report_screenshot_refuses_the_report_as_the_picture(chromium: Path, capsys,
                                                             png: str) -> None:
    """The picture at the report's own path (or a hard link of it) replaced the report."""
    os.link(chromium / "r/report.html", chromium / "hard.html")
    assert report_screenshot.main(["r/report.html", png]) == 2
    err = capsys.readouterr().err
    assert err.startswith("report_screenshot: the screenshot ") and err.count("\n") == 1, err
    assert "is the input the report" in err
    assert (chromium / "r/report.html").read_text() == REPORT
    assert sorted(p.name for p in (chromium / "r").iterdir()) == ["report.html"]
    assert not (chromium / "ran").exists()  # refused before Chromium


@pytest.mark.parametrize("png", ["r", "r/report.html/shot.png"])
def test_report_screenshot_refuses_an_unwritable_picture_before_chromium(chromium: Path, capsys,
                                                                         png: str) -> None:
    """A folder, or a path under a file: refused (one line, exit 2) before Chromium runs; it
    once ran first, and then the rename failed (exit 1)."""
    assert report_screenshot.main(["r/report.html", png]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"report_screenshot: cannot write {png}") and err.count("\n") == 1, err
    assert not (chromium / "ran").exists()
    assert sorted(p.name for p in (chromium / "r").iterdir()) == ["report.html"]


# ---------------------------------------------------------------- rulegraph

@pytest.mark.parametrize("dies", ["exit 1", "kill -9 $$"])
def test_rulegraph_a_failing_dot_leaves_the_earlier_picture(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            dies: str) -> None:
    """A `dot` that writes half a picture (to -o's file, or to stdout) and fails or is killed."""
    executable(tmp_path / "bin/dot", 'if [ "$2" = -o ]; then echo "<svg half" > "$3"; '
                                     f'else echo "<svg half"; fi\n{dies}\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    out = tmp_path / "docs/rulegraph.svg"
    out.parent.mkdir()
    out.write_text("<svg>earlier</svg>\n")
    with pytest.raises(SystemExit, match=r"^rulegraph: dot -Tsvg failed:"):
        rulegraph.render(GRAPH, out)
    assert out.read_text() == "<svg>earlier</svg>\n"
    assert list(out.parent.iterdir()) == [out]


@pytest.mark.parametrize("out", ["docs", "docs/f/g.svg"])
def test_rulegraph_refuses_an_unwritable_output_before_snakemake(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, out: str) -> None:
    """No Snakemake on PATH: the refusal must come first (a folder named docs.svg, a file f)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "empty/python"))
    (tmp_path / "docs.svg").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/f").write_text("a file\n")
    out = "docs.svg" if out == "docs" else out
    err = one_line_exit_2(capsys, f"rulegraph: cannot write {out}", lambda: rulegraph.main([out]))
    assert "snakemake" not in err


# ---------------------------------------------------------------- readme_tables

def test_readme_tables_interrupted_leaves_the_readme_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.md").write_text("| a |\n")
    readme = "# x\n<!-- begin: t.md -->\nold\n<!-- end: t.md -->\n"
    (tmp_path / "README.md").write_text(readme)
    interrupt_writes(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        readme_tables.main(["README.md", "t.md"])
    assert (tmp_path / "README.md").read_text() == readme
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "t.md"]
