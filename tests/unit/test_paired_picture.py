"""The table's paired comparison as a picture (`wscat table --paired-figure`, the table rule's
-paired.pdf/.png): a forest plot of each method's difference from the reference in Mean and on
each attack, its numbers exactly the table's paired rows, written with the table's files or not
at all, the same bytes each time."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from wscat.report import paired_figure, write_table
from wscat.report.paired import correctness, paired_by_attack, paired_interval

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_paired import NAMES, _runs, _write  # noqa: E402 - the paired tests' metrics files

ROOT = Path(__file__).resolve().parents[2]
OUTS = (".tex", ".csv", ".json", ".md", "-p.csv", "-p.tex")


def _outputs(folder: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    texts = {k: folder / f"digits{k}" for k in OUTS}
    return texts, {"pdf": folder / "digits-p.pdf", "png": folder / "digits-p.png"}


def _table(folder: Path, runs: list[dict], methods: list[str]) -> tuple[dict, dict]:
    texts, figure = _outputs(folder)
    write_table(experiment="digits", dataset="digits", model="cnn",
                metrics_files=_write(folder, runs), methods=methods, display_names=NAMES,
                adversarial=set(methods) - {"standard"}, tex_path=texts[".tex"],
                csv_path=texts[".csv"], summary_path=texts[".json"], md_path=texts[".md"],
                paired_csv_path=texts["-p.csv"], paired_tex_path=texts["-p.tex"],
                paired_figure_files=figure)
    return texts, figure


@pytest.fixture
def drawn(monkeypatch) -> list[dict]:
    """What each call of paired_figure.draw was given (it still draws)."""
    calls: list[dict] = []
    real = paired_figure.draw

    def recording(plotted, **kwargs):
        calls.append({"plotted": plotted, **kwargs})
        return real(plotted, **kwargs)

    monkeypatch.setattr(paired_figure, "draw", recording)
    return calls


def test_the_picture_plots_the_tables_paired_rows(tmp_path: Path, drawn) -> None:
    runs = _runs({"standard": -0.4, "trades": -0.2, "rst": 0.02, "wscat": 0.0})
    _, figure = _table(tmp_path, runs, ["standard", "trades", "rst", "wscat"])
    assert figure["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert figure["pdf"].read_bytes()[:5] == b"%PDF-"
    (call,) = drawn
    assert call["reference"] == "WSCAT"
    flags = correctness([json.loads((tmp_path / f"{r['method']}-{r['seed']}.json").read_text())
                         for r in runs if r["method"] != "standard"])
    expected = [*paired_by_attack(flags, ["trades", "rst"]).to_dict("records"),
                *(dict(row, column="Mean") for row in
                  paired_interval(flags, ["trades", "rst"]).to_dict("records"))]
    plotted = call["plotted"]
    assert [(row["column"], row["method"]) for row in plotted] == [
        (column, NAMES[method]) for column in paired_figure.PANELS for method in ("trades", "rst")]
    for row in plotted:  # Standard is tabulated, never compared; WSCAT is the zero line
        want = next(e for e in expected if e["column"] == row["column"]
                    and NAMES[e["method"]] == row["method"])
        assert row["difference"] == pytest.approx(want["delta_mean"], abs=1e-4)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((want["ci_low"], want["ci_high"]),
                                                                abs=1e-4)
        assert row["excludes_zero"] == want["excludes_zero"] and row["paper_difference"] is None
    assert any(row["excludes_zero"] for row in plotted)  # TRADES, 20 points lower: filled
    assert not all(row["excludes_zero"] for row in plotted)  # RST, within noise: open


def test_the_same_numbers_give_the_same_bytes(tmp_path: Path) -> None:
    """A table's files are git's (results/tables/): a rerun must not change the picture."""
    runs = _runs({"trades": -0.2, "wscat": 0.0})
    written = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        _, figure = _table(tmp_path / name, runs, ["trades", "wscat"])
        written.append({ext: path.read_bytes() for ext, path in figure.items()})
    assert written[0] == written[1]


def test_one_seed_draws_points_without_bars_and_says_why(tmp_path: Path, drawn) -> None:
    _table(tmp_path, _runs({"trades": -0.2, "wscat": 0.0}, seeds=(1,)), ["trades", "wscat"])
    plotted = drawn[0]["plotted"]
    assert [row["column"] for row in plotted] == list(paired_figure.PANELS)  # the differences
    assert all(row["ci_low"] is None and row["ci_high"] is None and not row["excludes_zero"]
               for row in plotted)  # ... but no interval, so no bar and no filled point
    assert paired_figure.joint_note(plotted) == paired_figure.NO_INTERVAL


def test_without_the_reference_the_picture_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    """The pipeline asks every table for its picture: an experiment without WSCAT gets one with
    empty panels, its title saying why, as its paired files hold no row."""
    from wscat.config import load_params
    from wscat.report.figures import plt
    from wscat.steps import table

    params = load_params(ROOT / "params.yaml")
    params["experiments"]["mini"] = {**params["experiments"]["digits"],
                                     "methods": ["standard", "trades"]}
    monkeypatch.setattr(table, "check_training", lambda *a, **k: None)
    titles = []
    monkeypatch.setattr(plt, "close", lambda fig: titles.append(fig._suptitle.get_text()))
    texts, _ = _outputs(tmp_path)
    table.run(params, experiment="mini", tex=texts[".tex"], csv=texts[".csv"],
              summary=texts[".json"], paired_csv=texts["-p.csv"],
              paired_figure=tmp_path / "mini-paired",
              metrics=_write(tmp_path, _runs({"standard": -0.4, "trades": -0.2})))
    assert "its paired files hold no row" in capsys.readouterr().out
    assert (tmp_path / "mini-paired.pdf").exists() and (tmp_path / "mini-paired.png").exists()
    (title,) = titles
    assert title.endswith("\nNo paired comparison: WSCAT is not among the experiment's methods "
                          "(experiments.mini.reference names another).")
    assert "the paper's (x)" not in title  # no paper marks on an experiment's own table
    assert title.startswith("Difference from WSCAT (o, 95% paired interval; filled where it "
                            "excludes 0)\n")


@pytest.mark.parametrize("failing", ["render", "write_texts"])
def test_a_failure_writes_neither_the_picture_nor_the_table(tmp_path: Path, monkeypatch,
                                                           failing: str) -> None:
    """The picture moves into place with the table's texts: a failure in either (a full disk,
    Ctrl-C) leaves no file of the two, never a picture of other numbers beside a new table."""
    import wscat.report.figures as figures
    import wscat.report.table as report_table

    def fail(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(figures if failing == "render" else report_table, failing, fail)
    with pytest.raises(OSError, match="No space left"):
        _table(tmp_path, _runs({"trades": -0.2, "wscat": 0.0}), ["trades", "wscat"])
    texts, figure = _outputs(tmp_path)
    assert not [path for path in [*texts.values(), *figure.values()] if path.exists()]
    assert not list(tmp_path.glob(".*.tmp"))  # nor a temporary file left behind


def test_the_command_names_both_files_as_its_outputs(tmp_path: Path) -> None:
    """`--paired-figure PATH` writes PATH.pdf and PATH.png (a dot in the name stays), and the
    command's output checks see both: one of them being an input is refused before writing."""
    from wscat.cli import build_parser, step_outputs
    from wscat.steps.table import figure_files

    assert figure_files(Path("results/tables/v1.2-paired")) == {
        "pdf": Path("results/tables/v1.2-paired.pdf"), "png": Path("results/tables/v1.2-paired.png")}
    args = build_parser().parse_args(["table", "--experiment", "digits", "--tex", "t.tex",
                                      "--csv", "t.csv", "--summary", "s.json",
                                      "--paired-figure", "out/d-paired", "m.json"])
    files, _ = step_outputs(args)
    assert files["--paired-figure (d-paired.pdf)"] == Path("out/d-paired.pdf")
    assert files["--paired-figure (d-paired.png)"] == Path("out/d-paired.png")
    assert "--paired-figure" not in files


def test_a_picture_over_another_output_or_an_input_is_refused(tmp_path: Path) -> None:
    from wscat.config import load_params
    from wscat.io import OutputError
    from wscat.steps import table

    params = load_params(ROOT / "params.yaml")
    metrics = _write(tmp_path, _runs({"trades": -0.2, "wscat": 0.0}, seeds=(1,)))
    texts, _ = _outputs(tmp_path)
    common = dict(experiment="digits", metrics=metrics, csv=texts[".csv"],
                  summary=texts[".json"])
    with pytest.raises(OutputError, match=r"--paired-figure \(t.pdf\) \S*t.pdf and --tex \S*t.pdf are the same output"):
        table.run(params, tex=tmp_path / "t.pdf", paired_figure=tmp_path / "t", **common)
    stem = metrics[0].with_suffix("")  # its .png: a metrics file renamed, read as an input
    metrics[0].rename(stem.with_suffix(".png"))
    with pytest.raises(OutputError, match=r"is the input metrics file"):
        table.run(params, tex=texts[".tex"], paired_figure=stem,
                  **{**common, "metrics": [stem.with_suffix(".png"), *metrics[1:]]})
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".pdf", ".tex", ".csv")]
