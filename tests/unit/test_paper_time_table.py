"""`wscat paper-table --label Tab-ap-time` (the epoch times of WSCAT and RST) reads every run's
train_log.csv through the checked reader: a log cut short, or with a `seconds` cell missing or
NaN on any epoch, is refused in one line naming the file and the Snakemake command that retrains
its run (it used to say `cannot convert float NaN to integer`, or to average the other epochs'
times in silence). An unknown tier's line names no params file it was not given."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from tests.helpers.tiny import ROOT
from tests.workflow.test_bad_input import one_line_error
from wscat import cli
from wscat.checkpoint import save_checkpoint

TIER, LABEL = "digits", "Tab-ap-time"
BROKEN = "R/models/digits/cnn/rst/seed2/train_log.csv"
RETRAIN = ("snakemake --forcerun results/models/digits/cnn/rst/seed2/train_log.csv -- "
           "results/paper/digits/Tab-ap-time.tex")
LOG = ("epoch,lr,loss,ce,val_natural,score,seconds\n"
       "1,0.05,2.164224,2.164224,30.0,30.0,2.0\n"
       "2,0.07728822550972524,1.483811,1.483811,70.0,70.0,4.0\n"
       "3,0.026171563998934607,0.803547,0.803547,80.0,80.0,6.0\n")


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """params.yaml's digits tier, copied as full.yaml, and R/models/digits/cnn/{wscat,rst}/
    seed{1,2,3}/ with a best.pt and a train_log.csv of 2, 4 and 6 s epochs."""
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(ROOT / "params.yaml", "full.yaml")
    for method in ("wscat", "rst"):
        for seed in (1, 2, 3):
            folder = Path(f"R/models/digits/cnn/{method}/seed{seed}")
            folder.mkdir(parents=True)
            (folder / "train_log.csv").write_text(LOG)
            save_checkpoint(folder / "best.pt", {"meta": {"machine": "a test machine"}})
    return tmp_path


def command(tier: str = TIER) -> list[str]:
    return ["paper-table", "--params", "full.yaml", "--tier", tier, "--label", LABEL,
            "--tex", "at.tex", "--csv", "at.csv", "--results", "R"]


def test_the_epoch_time_is_the_mean_of_every_epochs_seconds(work: Path, capsys) -> None:
    capsys.readouterr()
    assert cli.main(command()) == 0, capsys.readouterr().err
    with open("at.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["method"], row["mean"], row["n_seeds"]) for row in rows] == [
        ("WSCAT", "4.00", "3"), ("RST", "4.00", "3")]


def _nan_in_one_epoch(text: str) -> str:
    return text.replace("70.0,70.0,4.0", "70.0,70.0,nan")


def _empty_in_one_epoch(text: str) -> str:
    return text.replace("70.0,70.0,4.0", "70.0,70.0,")


def _no_seconds_column(text: str) -> str:
    return "\n".join(line.rsplit(",", 1)[0] for line in text.splitlines()) + "\n"


@pytest.mark.parametrize("change, phrase", [
    (lambda text: text[:60], "line 2: seconds is empty"),  # `head -c 60`: one epoch, cut
    (lambda text: text[:100], "line 3: loss is empty"),  # cut inside the second epoch
    (_nan_in_one_epoch, "line 3: seconds is 'nan', not a time >= 0"),
    (_empty_in_one_epoch, "line 3: seconds is empty, not a time >= 0"),
    (lambda text: text.replace(",6.0", ",-6.0"), "line 4: seconds is '-6.0'"),
    (_no_seconds_column, "lacks the seconds column"),
    (lambda text: "", "is empty, not a training log"),
], ids=["cut-60", "cut-100", "nan", "empty", "negative", "no-column", "empty-file"])
def test_a_log_without_every_epochs_seconds_is_refused_naming_it(work: Path, capsys, change,
                                                                phrase: str) -> None:
    path = Path(BROKEN)
    path.write_text(change(LOG))
    line = one_line_error(command(), phrase, work, capsys)
    assert line.startswith(f"wscat paper-table: error: {BROKEN}") and RETRAIN in line, line


def test_an_unknown_tier_names_no_file_it_was_not_given(work: Path, capsys) -> None:
    """--params full.yaml: the line used to say `params.yaml paper: has ...`."""
    line = one_line_error(command("digitz"), "unknown paper tier 'digitz'", work, capsys)
    assert "params.yaml" not in line and "digits, paper" in line, line
