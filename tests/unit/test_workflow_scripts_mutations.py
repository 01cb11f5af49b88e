"""Mutation tests for workflow/scripts/readme_tables.py (the README's tables, pasted from results),
workflow/scripts/rulegraph.py (the README's data-flow picture) and
workflow/scripts/report_screenshot.py (docs/report.png): each test kills hand-made mutants that went
through the unit tests importing them (tests/unit/test_paired.py pastes one block; nothing else runs
the other two without Snakemake, Graphviz or Chromium), with expectations from the scripts'
docstrings, the Makefile, README.md ("Data flow") and docs/workflow.md, never from the scripts' own
functions. Snakemake, `dot` and Chromium are stood in for by small shell scripts that record what
they are given and answer as told.

What is checked, and from which fact:
- readme_tables ("paste generated Markdown tables into the README, between the markers that name
  the file"; `make readme`): each table lands, byte for byte, in every block named by the path as
  given (a block named by another path, or by a path that reads the same as a pattern, keeps its
  text), the markers stay, one newline before the end marker, prose between blocks is kept, a
  backslash in a table ($\\beta$) is pasted as written; every table named is pasted; the README
  alone is refused; a table whose markers are missing refuses with nothing written, the tables
  before it included; a table or README that cannot be read is one line; each refusal is bad
  input (exit 2, one line); no temporary file is left.
- rulegraph ("`snakemake --rulegraph` on the targets (default: every table and figure of the digits
  tier) ... laid out with `dot`; the output's suffix picks the format"): the venv's Snakemake
  before PATH's, run in the repository on exactly the targets given (or
  results/paper/digits/index.md), quiet, with the user's XDG_CACHE_HOME or the repository's
  .cache; a failed or graph-less run refused with Snakemake's own message, text before `digraph`
  dropped; every node and edge kept, the edges sorted by (source, target) as numbers, the closing
  brace last; `dot -T<suffix>` reads the graph on stdin, and what it prints replaces OUT whole
  (its folder made, no temporary file left); a missing Snakemake or `dot` and a failed `dot`
  (with its words) refused in one line; a missing or option-like OUT and an OUT without a suffix
  refused as bad input (one line, exit 2) before Snakemake runs.
- report_screenshot ("headless Chromium (Debian's `chromium` package)", "by default the per-run
  metrics table", "the report file itself is not changed: a copy with two extra lines"): Debian's,
  then Ubuntu's name; no Chromium is one line on stderr, exit 1, nothing written; headless, in a
  throw-away profile beside the copy, with time for the page's app to mount, at the window size
  asked (1280x720 by default), the screenshot where asked (its folder made); the copy is the
  report with the lines before its last </body>, opening "Per-run metrics" (JSON-quoted) unless
  the category is '', the report untouched; Chromium's failure (its exit status, or no picture)
  is one line with its exit status and stderr, and leaves an earlier picture as it was (never
  taking it, or a killed run's temporary one, for this run's) and nothing else in its folder; a
  Chromium past its time (subprocess.run's timeout stood in for) is one line too; a report that
  is not a page (Markdown, a report.zip), a missing report or a folder are bad input, one line
  and exit 2, Chromium not run; a --size that is not WIDTHxHEIGHT is argparse's refusal, exit 2,
  before Chromium runs.
"""
from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from workflow.scripts import readme_tables, report_screenshot, rulegraph

ROOT = Path(__file__).resolve().parents[2]
DIGITS = "results/tables/digits.md"
SH = "#!/bin/sh\nPATH=/usr/bin:/bin\n"


def executable(path: Path, body: str) -> Path:
    """A shell script at `path` (its folder made) that runs `body`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SH + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ---------------------------------------------------------------- readme_tables

def block(path: str, text: str) -> str:
    return f"<!-- begin: {path} -->\n{text}<!-- end: {path} -->\n"


# A table as the Markdown twin is written: a caption, a header, rows; a LaTeX beta with a
# backslash; trailing blank lines, which the paste drops (one newline before the end marker).
TABLE = ("*Performance on digits (cnn), $\\beta$ = 6.*\n\n| | TRADES | WSCAT |\n"
         "| --- | ---: | ---: |\n| Natural | 94.06 ± 0.64 | 92.76 ± 1.00 |\n"
         "| Mean | 62.99 ± 3.48 | 73.96 ± 3.52 |\n\n\n")
PASTED = TABLE.rstrip("\n") + "\n"
FRESH = "results/tables/digits+fresh.md"  # '+' reads as a repeat in a pattern: it must not here
DECOY = "results/tables/digitssfresh.md"  # what the path would match as a pattern
FRESH_TABLE = "| | WSCAT |\n| --- | ---: |\n| Mean | 70.00 ± 1.00 |\n"


def readme(digits: str, fresh: str, other: str) -> str:
    """A README with two blocks of the digits table (prose between), one of the fresh-seeds
    table and one of another file, in that order."""
    return ("# wscat\n\nIntro.\n\n" + block(DIGITS, digits) + "\nBetween.\n\n"
            + block("results/tables/digits-b.md", other) + block(FRESH, fresh)
            + "\nAgain:\n" + block(DIGITS, digits) + "tail\n")


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder laid out like the repository (the run's cwd): README.md and the two tables."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/tables").mkdir(parents=True)
    (tmp_path / DIGITS).write_text(TABLE)
    (tmp_path / FRESH).write_text(FRESH_TABLE)
    (tmp_path / "README.md").write_text(readme("old\nrows\n", "stale\n", "keep me\n"))
    return tmp_path


def test_readme_main_pastes_every_table_into_every_block_of_its_path(tables: Path,
                                                                     capsys) -> None:
    """Both tables, in each of their blocks, byte for byte; other blocks and prose kept."""
    readme_tables.main(["README.md", DIGITS, FRESH])
    assert (tables / "README.md").read_text() == readme(PASTED, FRESH_TABLE, "keep me\n")
    assert sorted(p.name for p in tables.iterdir()) == ["README.md", "results"]  # no temporary
    assert "README.md" in capsys.readouterr().out


def test_readme_main_pastes_one_table_given_alone(tables: Path) -> None:
    """The fresh-seeds table alone: the digits blocks keep their old text."""
    readme_tables.main(["README.md", FRESH])
    assert (tables / "README.md").read_text() == readme("old\nrows\n", FRESH_TABLE, "keep me\n")


def readme_refused(capsys: pytest.CaptureFixture, call: Callable[[], object]) -> str:
    """Bad input to readme_tables: exit 2 and one line on stderr, which is returned."""
    with pytest.raises(SystemExit) as stop:
        call()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("readme_tables: ") and err.count("\n") == 1
    return err


def test_readme_main_refuses_the_readme_alone(tables: Path, capsys) -> None:
    before = (tables / "README.md").read_text()
    assert "usage" in readme_refused(capsys, lambda: readme_tables.main(["README.md"]))
    assert (tables / "README.md").read_text() == before


def test_readme_missing_markers_write_nothing(tables: Path, capsys) -> None:
    """The second table has no block: refused, and the first table is not pasted either."""
    (tables / "results/tables/digits-c.md").write_text("| x |\n")
    before = (tables / "README.md").read_text()
    assert "'<!-- begin: results/tables/digits-c.md -->'" in readme_refused(
        capsys, lambda: readme_tables.main(["README.md", DIGITS, "results/tables/digits-c.md"]))
    assert (tables / "README.md").read_text() == before
    assert sorted(p.name for p in tables.iterdir()) == ["README.md", "results"]


def test_readme_a_write_that_fails_is_one_line_and_leaves_the_readme(
        tables: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A README on a read-only mount: its OSError was a traceback."""
    def refused(source: object, target: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refused)  # the rename onto the README
    before = (tables / "README.md").read_text()
    assert readme_refused(capsys, lambda: readme_tables.main(["README.md", DIGITS])) == (
        "readme_tables: cannot write README.md (Permission denied); make its folder writable, "
        "then run again\n")
    assert (tables / "README.md").read_text() == before
    assert sorted(p.name for p in tables.iterdir()) == ["README.md", "results"]  # no temporary


@pytest.mark.parametrize("args, says", [
    (["README.md", "results/tables/digits-x.md"],
     "table results/tables/digits-x.md: cannot be read (No such file or directory); build it "
     "first (`make readme` runs the demo's target)"),
    (["NOPE.md", DIGITS], "README NOPE.md: cannot be read (No such file or directory); give the "
                          "README's path"),
    (["README.md", "results"], "table results: cannot be read (Is a directory); build it first "
                               "(`make readme` runs the demo's target)")])
def test_readme_a_file_that_cannot_be_read_is_one_line(tables: Path, capsys, args: list[str],
                                                       says: str) -> None:
    before = (tables / "README.md").read_text()
    assert readme_refused(capsys, lambda: readme_tables.main(args)) == (
        f"readme_tables: {says}\n")
    assert (tables / "README.md").read_text() == before


def test_readme_paste_takes_the_path_literally(capsys) -> None:
    """A block named like the pattern the path would make ('+' as a repeat) is not the path's."""
    text = block(DECOY, "a\n") + block(FRESH, "b\n")
    assert readme_tables.paste(text, FRESH, "c\n") == (
        block(DECOY, "a\n") + block(FRESH, "c\n"))
    assert "markers" in readme_refused(
        capsys, lambda: readme_tables.paste(block(DECOY, "a\n"), FRESH, "c\n"))


# ---------------------------------------------------------------- rulegraph

# `snakemake --rulegraph` as Snakemake writes it: nodes in order, edges in set order (ids past 9
# so that sorting them as text would differ from sorting them as numbers).
HEADER = ("digraph snakemake_dag {\n    graph[bgcolor=white, margin=0];\n"
          "    node[shape=box, style=rounded, fontname=sans, fontsize=10, penwidth=2];\n"
          "    edge[penwidth=2, color=grey];\n")
NODES = "".join(f'\t{i}[label = "rule{i}", color = "0.{i:02d} 0.6 0.85", style="rounded"];\n'
                for i in range(12))
RAW = HEADER + NODES + "\t10 -> 2\n\t2 -> 1\n\t3 -> 10\n\t11 -> 1\n\t1 -> 0\n\t2 -> 0\n}\n"
# By source, then target, as numbers: 1->0, 2->0, 2->1, 3->10, 10->2, 11->1.
STABLE = HEADER + NODES + "\t1 -> 0\n\t2 -> 0\n\t2 -> 1\n\t3 -> 10\n\t10 -> 2\n\t11 -> 1\n}\n"


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-ins: the venv's `snakemake` (beside a fake sys.executable) prints `stdout` and
    `stderr` from the record folder, exits with `rc`, and records its arguments, cwd and
    XDG_CACHE_HOME; PATH holds a wrong `snakemake` and a `dot` that records its format and copies
    stdin to stdout. Returns the record folder."""
    record = tmp_path / "record"
    record.mkdir()
    (record / "stdout").write_text("Building DAG of jobs...\n" + RAW)
    (record / "stderr").write_text("")
    (record / "rc").write_text("0")
    venv, path = tmp_path / "venv/bin", tmp_path / "path"
    executable(venv / "snakemake",
               f'R={record}\nprintf "%s\\n" "$@" > $R/args\npwd > $R/cwd\n'
               'echo "${XDG_CACHE_HOME-unset}" > $R/cache\ncat $R/stdout\ncat $R/stderr >&2\n'
               "exit $(cat $R/rc)\n")
    executable(path / "snakemake", "echo 'not the venv one' >&2\nexit 9\n")
    executable(path / "dot", f'R={record}\nprintf "%s\\n" "$@" > $R/dot_args\ncat\n')
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    monkeypatch.setenv("PATH", str(path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)  # not the repository: the run must set its own cwd
    return record


def test_stable_keeps_every_node_and_sorts_the_edges_as_numbers() -> None:
    assert rulegraph.stable(RAW) == STABLE
    assert rulegraph.stable(STABLE) == STABLE


def test_rule_graph_runs_the_venvs_snakemake_on_the_targets_in_the_repository(tools: Path) -> None:
    assert rulegraph.rule_graph(["results/tables/digits.tex", "results/paper/digits/index.md"]) \
        == STABLE
    assert (tools / "args").read_text().splitlines() == [
        "--quiet", "all", "--rulegraph", "--", "results/tables/digits.tex",
        "results/paper/digits/index.md"]
    assert (tools / "cwd").read_text().strip() == str(ROOT)
    assert (tools / "cache").read_text().strip() == str(ROOT / ".cache")


def test_rule_graph_keeps_the_users_cache(tools: Path, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "mine"))
    rulegraph.rule_graph(["x"])
    assert (tools / "cache").read_text().strip() == str(tmp_path / "mine")


@pytest.mark.parametrize("rc, stdout", [(1, RAW), (1, ""), (0, "")])
def test_rule_graph_refuses_a_failed_or_empty_run_with_snakemakes_words(tools: Path, rc: int,
                                                                       stdout: str) -> None:
    (tools / "rc").write_text(str(rc))
    (tools / "stdout").write_text(stdout)
    (tools / "stderr").write_text("MissingInputException in rule table\n")
    with pytest.raises(SystemExit, match=r"^rulegraph: snakemake --rulegraph failed:\n"
                                         r"MissingInputException in rule table$"):
        rulegraph.rule_graph(["x"])


def test_rule_graph_refuses_without_snakemake(tools: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "empty/python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match=r"^rulegraph: snakemake is not installed; run `make "
                                         r"venv` first$"):
        rulegraph.rule_graph(["x"])


@pytest.mark.parametrize("name, fmt", [("docs/rulegraph.svg", "svg"), ("new/dir/graph.png", "png")])
def test_main_lays_the_default_targets_out_in_the_suffixs_format(
        tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, fmt: str) -> None:
    out = tmp_path / "elsewhere" / name
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # a relative output would land here, not in `out`
    rulegraph.main([str(out)])
    assert (tools / "args").read_text().splitlines()[-2:] == ["--", "results/paper/digits/index.md"]
    assert (tools / "dot_args").read_text().splitlines() == [f"-T{fmt}"]
    assert out.read_text() == STABLE
    assert list(out.parent.iterdir()) == [out]  # no temporary file left beside it
    assert list((tmp_path / "work").iterdir()) == []


def test_main_passes_the_targets_given(tools: Path, tmp_path: Path) -> None:
    rulegraph.main([str(tmp_path / "g.svg"), "results/tables/digits.tex"])
    assert (tools / "args").read_text().splitlines()[-2:] == ["--", "results/tables/digits.tex"]


@pytest.mark.parametrize("argv", [[], ["--help"], ["-o", "g.svg"]])
def test_main_refuses_no_output_or_an_option(tools: Path, argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        rulegraph.main(argv)
    assert stop.value.code == 2  # bad input
    assert capsys.readouterr().err == "usage: rulegraph.py OUT.svg [TARGET ...]\n"
    assert not (tools / "args").exists()


def test_main_refuses_an_output_without_a_suffix(tools: Path, capsys) -> None:
    """No suffix, no format: refused before Snakemake runs."""
    with pytest.raises(SystemExit) as stop:
        rulegraph.main(["docs/rulegraph"])
    assert stop.value.code == 2  # bad input
    assert capsys.readouterr().err == ("rulegraph: docs/rulegraph has no suffix to pick the "
                                       "format from (.svg, .png, .pdf)\n")
    assert not (tools / "args").exists()


def test_a_dot_failure_is_refused_with_dots_words(tools: Path, tmp_path: Path) -> None:
    executable(tmp_path / "path/dot", "echo 'Format: \"svgz2\" not recognized.' >&2\nexit 1\n")
    with pytest.raises(SystemExit, match=r'^rulegraph: dot -Tsvgz2 failed:\n'
                                         r'Format: "svgz2" not recognized\.$'):
        rulegraph.main([str(tmp_path / "g.svgz2")])


def test_render_refuses_without_dot(tools: Path, tmp_path: Path) -> None:
    (tmp_path / "path/dot").unlink()
    with pytest.raises(SystemExit, match=r"^rulegraph: Graphviz's `dot` is not installed"):
        rulegraph.render(STABLE, tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()


# ---------------------------------------------------------------- report_screenshot

# A report whose bundled script holds the string "</body>" before the page's own.
REPORT = ('<html><head><script>var t = "<p></p></body>";</script></head>\n'
          '<body><div id="app"></div></body></html>\n')
OWN_BODY = REPORT.rindex("</body>")


@pytest.fixture
def chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in `chromium` on PATH: records its arguments and the page it was given (the last
    argument, a file URI), writes a picture at --screenshot unless the record folder holds
    `nowrite`, says `stderr` on stderr and exits with `rc`. Returns the record folder."""
    record = tmp_path / "record"
    record.mkdir()
    (record / "rc").write_text("0")
    (record / "stderr").write_text("")
    executable(tmp_path / "bin/chromium",
               f'R={record}\nprintf "%s\\n" "$@" > $R/args\nfor a in "$@"; do case "$a" in '
               "--screenshot=*) png=\"${a#--screenshot=}\";; esac; page=\"$a\"; done\n"
               'echo "$page" > $R/uri\ncat "${page#file://}" > $R/page.html\n'
               '[ -e $R/nowrite ] || echo PNG > "$png"\ncat $R/stderr >&2\nexit $(cat $R/rc)\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.html").write_text(REPORT)
    return record


def args(record: Path) -> list[str]:
    return (record / "args").read_text().splitlines()


def test_find_chromium_takes_debians_then_ubuntus_name(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert report_screenshot.find_chromium() is None
    executable(tmp_path / "google-chrome", "")
    executable(tmp_path / "chromium-browser", "")
    assert report_screenshot.find_chromium() == str(tmp_path / "chromium-browser")
    executable(tmp_path / "chromium", "")
    assert report_screenshot.find_chromium() == str(tmp_path / "chromium")


def test_no_chromium_is_one_line_and_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.html").write_text(REPORT)
    assert report_screenshot.main(["report.html", "docs/report.png"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("report_screenshot: no Chromium on PATH (tried chromium, chromium-browser, "
                   "google-chrome); on Debian: apt-get install chromium\n")
    assert not (tmp_path / "docs").exists()


def test_main_screenshots_a_copy_opened_at_the_per_run_metrics(chromium: Path, tmp_path: Path,
                                                               capsys) -> None:
    """The documented command: headless, 1280x720, the copy opened at "Per-run metrics"."""
    assert report_screenshot.main(["report.html", "docs/report.png"]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "docs/report.png").read_text() == "PNG\n"
    assert (tmp_path / "report.html").read_text() == REPORT
    given = args(chromium)
    assert given[0] == "--headless"
    assert "--window-size=1280,720" in given
    assert any(a.startswith("--virtual-time-budget=") for a in given)  # the app mounts first
    page = Path(given[-1].removeprefix("file://"))
    assert given[-1].startswith("file:///") and page != tmp_path / "report.html"
    profile = [a.removeprefix("--user-data-dir=") for a in given
               if a.startswith("--user-data-dir=")]
    assert [Path(p).parent for p in profile] == [page.parent]  # a throw-away profile
    copy = (chromium / "page.html").read_text()
    assert copy.startswith(REPORT[:OWN_BODY]) and copy.endswith("\n" + REPORT[OWN_BODY:])
    extra = copy[OWN_BODY:-len(REPORT[OWN_BODY:])]
    assert extra.startswith("<style>") and ".h-screen" in extra  # the panes sized by the window
    assert 'app.showCategory("Per-run metrics")' in extra


def test_main_start_page_and_size(chromium: Path, tmp_path: Path) -> None:
    """--category '' is the start page (no category opened); --size WIDTHxHEIGHT."""
    assert report_screenshot.main(["report.html", "out.png", "--category", "",
                                   "--size", "1024x640"]) == 0
    assert "--window-size=1024,640" in args(chromium)
    copy = (chromium / "page.html").read_text()
    assert "showCategory" not in copy and "<style>" in copy


def test_screenshot_defaults_and_a_quoted_category(chromium: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    assert report_screenshot.screenshot(report, tmp_path / "a.png") == tmp_path / "a.png"
    assert "--window-size=1280,720" in args(chromium)
    assert 'app.showCategory("Per-run metrics")' in (chromium / "page.html").read_text()
    report_screenshot.screenshot(report, tmp_path / "b.png", category='Bob\'s "runs"')
    assert 'app.showCategory("Bob\'s \\"runs\\"")' in (chromium / "page.html").read_text()


@pytest.mark.parametrize("rc, writes", [(3, True), (0, False)])
def test_chromiums_failure_is_one_refusal(chromium: Path, tmp_path: Path, capsys, rc: int,
                                          writes: bool) -> None:
    """A failure leaves an earlier picture as it was (docs/report.png is committed), and an
    earlier picture is not taken for this run's when Chromium writes none."""
    (chromium / "rc").write_text(str(rc))
    (chromium / "stderr").write_text("GPU process crashed")
    if not writes:
        (chromium / "nowrite").touch()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/report.png").write_text("earlier")
    assert report_screenshot.main(["report.html", "docs/report.png"]) == 1
    err = capsys.readouterr().err
    assert err == (f"report_screenshot: {tmp_path / 'bin/chromium'} failed ({rc}): "
                   "GPU process crashed\n")
    assert [(p.name, p.read_text()) for p in (tmp_path / "docs").iterdir()] == [
        ("report.png", "earlier")]


def test_a_leftover_temporary_picture_is_not_taken(chromium: Path, tmp_path: Path) -> None:
    """A run killed outright leaves Chromium's temporary picture: the next run's Chromium, writing
    none, is refused rather than that picture taken."""
    (chromium / "nowrite").touch()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/.report.png.tmp.png").write_text("killed run's")
    assert report_screenshot.main(["report.html", "docs/report.png"]) == 1
    assert list((tmp_path / "docs").iterdir()) == []


def test_a_new_picture_replaces_the_earlier_one(chromium: Path, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/report.png").write_text("earlier")
    assert report_screenshot.main(["report.html", "docs/report.png"]) == 0
    assert [(p.name, p.read_text()) for p in (tmp_path / "docs").iterdir()] == [
        ("report.png", "PNG\n")]


@pytest.mark.parametrize("content", ["# not a page\n".encode(), b"PK\x03\x04\x80\xff zip"])
def test_a_report_that_is_not_a_page_is_one_line(chromium: Path, tmp_path: Path, capsys,
                                                 content: bytes) -> None:
    """The Markdown table or a report.zip given as the report: one line, Chromium not run."""
    (tmp_path / "report.zip").write_bytes(content)
    assert report_screenshot.main(["report.zip", "out.png"]) == 2  # bad input
    assert capsys.readouterr().err == ("report_screenshot: report.zip is not an HTML page; give "
                                       "the .html that `snakemake --report` wrote\n")
    assert not (chromium / "args").exists()


@pytest.mark.parametrize("report", ["missing.html", "."])
def test_a_missing_report_is_one_line(chromium: Path, capsys, report: str) -> None:
    assert report_screenshot.main([report, "out.png"]) == 2  # bad input
    err = capsys.readouterr().err
    assert err == (f"report_screenshot: {report}: no such file (a folder, or missing); give the "
                   ".html that `snakemake --report` wrote (`make report`)\n")
    assert not (chromium / "args").exists()


def test_chromium_past_its_time_is_one_line(chromium: Path, tmp_path: Path, capsys,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """subprocess.run's timeout stood in for: it is asked for, and its expiry is one line."""
    def hang(cmd: list[str], **kwargs) -> None:
        raise report_screenshot.subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(report_screenshot.subprocess, "run", hang)
    assert report_screenshot.main(["report.html", "out.png"]) == 1
    assert capsys.readouterr().err == (f"report_screenshot: {tmp_path / 'bin/chromium'} did not "
                                       "finish within 120 s\n")


@pytest.mark.parametrize("size", ["1280,720", "1280x", "x720", "0x720", "1280x720x2", "²x720"])
def test_a_malformed_size_is_refused_before_chromium(chromium: Path, capsys, size: str) -> None:
    with pytest.raises(SystemExit) as refused:
        report_screenshot.main(["report.html", "out.png", "--size", size])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(  # after argparse's prog name
        f": error: argument --size: {size!r} is not WIDTHxHEIGHT (e.g. 1280x720)")
    assert not (chromium / "args").exists()
