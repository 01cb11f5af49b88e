"""wscat/report/validation_figure.py: the curves it plots are the train logs' numbers, and the
epoch it marks is the one best.pt holds by the trainer's rule."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from wscat.report import validation_figure as figure


def _log(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


ADVERSARIAL = [{"epoch": e, "loss": 1.0, "val_natural": 50 + e, "val_cw": cw, "score": cw,
                "seconds": 1.0} for e, cw in ((1, 20.0), (2, 25.0), (3, 22.0), (4, 25.0))]
LABELER = [{"epoch": e, "loss": 1.0, "val_natural": v, "score": v, "seconds": 1.0}
           for e, v in ((1, 60.0), (2, 70.0), (3, 65.0))]


def test_the_checkpoint_epoch_follows_the_trainers_rule(tmp_path: Path) -> None:
    adversarial = _log(tmp_path / "a.csv", ADVERSARIAL)
    assert figure.checkpoint_epoch(adversarial, "cw") == 4  # a tie goes to the later epoch
    labeler = _log(tmp_path / "l.csv", LABELER)
    assert figure.checkpoint_epoch(labeler, "last") == 3
    assert figure.checkpoint_epoch(labeler, "natural") == 2
    unscored = _log(tmp_path / "u.csv", [{**row, "score": ""} for row in LABELER])
    with pytest.raises(ValueError, match="no validated epoch has a score"):
        figure.checkpoint_epoch(unscored, "natural")


def test_rows_plot_the_selection_metric_and_mark_one_epoch_a_run(tmp_path: Path) -> None:
    logs = {("wscat", 1): _log(tmp_path / "w.csv", ADVERSARIAL),
            ("mt", 1): _log(tmp_path / "m.csv", LABELER)}
    plotted = figure.rows(logs, {"wscat": "cw", "mt": "last"}, {"wscat": "WSCAT", "mt": "MT"})
    wscat = [r for r in plotted if r["method"] == "WSCAT"]
    assert [(r["metric"], r["accuracy"]) for r in wscat] == [
        ("val_cw", row["val_cw"]) for row in ADVERSARIAL]
    assert [r["epoch"] for r in plotted if r["checkpoint"]] == [4, 3]
    figure.validation_figure(plotted, tmp_path / "curves")
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    with open(tmp_path / "curves.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == len(ADVERSARIAL) + len(LABELER)


def test_a_score_that_is_not_a_number_is_refused_in_one_line(tmp_path: Path) -> None:
    edited = _log(tmp_path / "e.csv", [{**row, "score": "high" if row["epoch"] == 2
                                        else row["score"]}
                                       for row in ADVERSARIAL])
    with pytest.raises(ValueError, match=r"e\.csv: column score holds a value that is not a nu"):
        figure.checkpoint_epoch(edited, "cw")
    assert figure.checkpoint_epoch(edited, "last") == 4  # `last` reads no score


def test_the_panels_name_the_validation_attacks_steps(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The y labels say how many steps the validation attacks took (params.yaml `validation`),
    the paper's 20 unless told otherwise."""
    from wscat.report import figures

    labels: list[list[str]] = []
    monkeypatch.setattr(figures, "save", lambda fig, prefix, rows: labels.append(
        [ax.get_ylabel() for ax in fig.axes]))
    pgd = [{"epoch": e, "loss": 1.0, "val_natural": 50.0, "val_pgd": p, "score": p,
            "seconds": 1.0} for e, p in ((1, 30.0), (2, 31.0))]
    logs = {("wscat", 1): _log(tmp_path / "w.csv", ADVERSARIAL),
            ("rst", 1): _log(tmp_path / "r.csv", pgd)}
    plotted = figure.rows(logs, {"wscat": "cw", "rst": "hm"}, {})
    figure.validation_figure(plotted, tmp_path / "paper")
    figure.validation_figure(plotted, tmp_path / "short", {"pgd_steps": 7, "cw_steps": 5})
    assert labels == [["validation CW-20 accuracy (%)", "validation PGD-20 accuracy (%)"],
                      ["validation CW-5 accuracy (%)", "validation PGD-7 accuracy (%)"]]
