"""`wscat curves` and `wscat analyse` on bad input: one line, exit 2, nothing written.

curves: a CSV that is no training log, one without a plottable column, a value that is not a
finite number (NaN included: refused, never drawn as a gap), an output path that is a folder, and
an --out whose name has a dot (kept: run.v2 -> run.v2.pdf). analyse: a checkpoint of another
method in a run's folder."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.report.figures import curves_files

UNEXPECTED = ": error: unexpected "
LOG = ("epoch,lr,loss,ce,val_natural,score,seconds\n"
       "1,0.05,2.1,2.1,,,0.2\n"
       "2,0.05,1.7,1.7,41.0,41.0,0.4\n")


def _files(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder`, a file's bytes (None for a folder)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def _refused(argv: list[str], folder: Path, capsys: pytest.CaptureFixture[str],
             *needles: str) -> str:
    """`wscat argv`: exit 2, one line holding every needle, no file under `folder` changed."""
    before = _files(folder)
    capsys.readouterr()
    code = cli.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and UNEXPECTED not in lines[0] and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert _files(folder) == before, "a refused command wrote or changed files"
    return lines[0]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train_log.csv").write_text(LOG)
    return tmp_path


def _curves(log: str, out: str = "o/c") -> list[str]:
    return ["curves", "--train-log", log, "--out", out]


@pytest.mark.parametrize("content, needles", [
    ("dataset,method,Natural\ndigits,standard,90.1\n", ["t.csv", "epoch", "loss", "val_*"]),
    ("", ["t.csv is empty"]),
    ("epoch,foo\n1,2\n", ["t.csv", "loss, val_*", "columns: epoch, foo"]),
    ("epoch,loss,val_natural\n", ["t.csv", "no epochs logged"]),
    ("epoch,loss,val_natural\n1,abc,30\n", ["t.csv, line 2", "loss is 'abc'", "not a finite"]),
    ("epoch,loss,val_natural\n1,2.0,30\n2,nan,31\n", ["line 3", "loss is 'nan'", "NaN"]),
    ("epoch,loss,val_natural\n1,2.0,inf\n", ["line 2", "val_natural is 'inf'"]),
    ("epoch,loss,val_natural\n1,,30\n", ["line 2", "loss is empty"]),
])
def test_curves_refuses_a_log_it_cannot_plot(work: Path, capsys: pytest.CaptureFixture[str],
                                            content: str, needles: list[str]) -> None:
    (work / "t.csv").write_text(content)
    _refused(_curves("t.csv"), work, capsys, *needles)


def test_curves_says_a_missing_log_is_not_found_and_which_to_pass(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "No such file or directory: nolog.csv", without what to pass."""
    line = _refused(_curves("nolog.csv"), work, capsys)
    assert line.endswith("error: train log not found: nolog.csv; pass a run's train_log.csv "
                         "(`wscat train` writes it in its --out-dir)"), line


def test_curves_checks_every_output_before_writing_any(work: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (work / "o" / "c.png").mkdir(parents=True)
    _refused(_curves("train_log.csv"), work, capsys, "o/c.png", "is a folder")
    assert not (work / "o" / "c.pdf").exists()


def test_curves_keeps_the_name_given_and_draws_gaps(work: Path) -> None:
    """An empty val_ cell (an epoch not validated) is a gap, not a refusal."""
    assert cli.main(_curves("train_log.csv", "o/run.v2")) == 0
    assert sorted(os.listdir(work / "o")) == ["run.v2.pdf", "run.v2.png"]
    assert (work / "o" / "run.v2.png").stat().st_size > 1000


def test_curves_files() -> None:
    assert curves_files(Path("a/run.v2")) == {"pdf": Path("a/run.v2.pdf"),
                                              "png": Path("a/run.v2.png")}
    assert curves_files(Path("a/c.png")) == {"pdf": Path("a/c.pdf"), "png": Path("a/c.png")}


# --- analyse: a run's folder holding another method's checkpoint ------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny params.yaml with a paper tier, its split and a standard run's best.pt."""
    root = tmp_path_factory.mktemp("analyse")
    params = tiny_params(epochs=1)
    params["paper"] = {"t": {
        "datasets": [{"dataset": "digits", "name": "Digits",
                      "performance": {"experiment": "digits", "label": "Tab-RQ1-digits"}}],
        "model_names": {"cnn": "CNN"},
        "similarity": {"methods": ["trades", "wscat"], "model": "wscat", "seed": 1,
                       "n_examples": 10},
        "feature": {"methods": ["wscat", "standard"], "seed": 1, "n_examples": 20}}}
    write_params(root / "params.yaml", params)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        split = root / "results" / "splits" / "digits" / "seed1.npz"
        assert cli.main(["split", "--dataset", "digits", "--seed", "1", "--out", str(split)]) == 0
        assert cli.main(["train", "--dataset", "digits", "--model", "cnn", "--method",
                         "standard", "--seed", "1", "--split", str(split), "--out-dir", "run",
                         "--threads", "1"]) == 0
    finally:
        os.chdir(cwd)
    for method in ("wscat", "standard"):
        folder = root / "results" / "models" / "digits" / "cnn" / method / "seed1"
        folder.mkdir(parents=True)
        shutil.copy(root / "run" / "best.pt", folder / "best.pt")  # wscat's: the wrong one
    shutil.rmtree(root / "run")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("figure", ["Fig-similarity", "Fig-feature"])
def test_analyse_refuses_a_checkpoint_of_another_method(trained: Path, figure: str,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(trained)
    _refused(["analyse", "--tier", "t", "--figure", figure, "--dataset", "digits", "--out",
              "a.npz", "--threads", "1"], trained, capsys,
             "models/digits/cnn/wscat/seed1/best.pt holds standard seed 1 on digits, not wscat")


def test_the_cli_guards_the_files_curves_writes() -> None:
    """The output guard and lock see the names `curves` writes: run.v2.pdf, not run.pdf."""
    from wscat.cli import DERIVED_OUTPUTS

    assert DERIVED_OUTPUTS["curves"](Path("o/run.v2")) == [Path("o/run.v2.pdf"),
                                                          Path("o/run.v2.png")]
