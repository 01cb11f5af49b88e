"""Mutation tests for the report's extra figures and labels and the trainer's small helpers:
wscat/report/paired_figure.py, validation_figure.py, labels.py and names.py, and
wscat/training/speed.py, threads.py and log.py. Each test kills hand-made mutants that went
through the unit tests importing the module, with expectations worked out by hand from the
modules' docstrings, docs/workflow.md (train_log.csv), the paper's names (wscat/report/reported.csv,
transcribed from the paper) and torch's documented flags, never from the function under test.
The figures are checked through the numbers handed to matplotlib (the captured figure's lines,
markers, ticks and labels); nothing is rendered.

What is checked, and from which fact:
- the paired figure (docstring): one panel per attack in the paper's order Natural, FGSM, PGD,
  CW, AA, then Mean; per (column, method) the method's display name, the difference method -
  WSCAT (not its negative), its interval (low, high) and whether it excludes 0, and the
  paper's difference looked up by the display name and that column; drawn: the interval as a
  bar at the method's row, the point filled only where the interval excludes 0, an x at the
  paper's difference (a difference of exactly 0 too), the rows labelled in order from the top,
  the zero line, the reference in the x label, the joint-test caveat counting only the rows
  that have an interval.
- the validation figure (docstring): a run's points are its validated epochs only (an epoch
  without validation is no point, never a NaN drawn as data), each run (method, seed) its own
  line in the panel of its selection metric (CW-20 where logged, PGD-20 for a run selected by
  the harmonic mean, else natural), the accuracy to 4 places, exactly one epoch marked: the one
  best.pt holds by the trainer's rule; a log without a score column is refused in one line.
- the labels of `snakemake --report` (docstring): the method's and labeler's paper name, the
  seed, the epochs logged, the last validation scores (CW or PGD, upper-case, or "-" for a run
  without a robust validation), test accuracies to 2 places in the tables' row order.
- the names (reported.csv, the paper's tables): each configured method's paper name; only
  Standard and Mean Teacher are not adversarial training; an unknown key is shown as it is.
- the speed switches (docstring, torch's documentation of the flags): on a CUDA device
  deterministic turns cuDNN autotuning off and cuDNN's deterministic mode on (and the reverse),
  TF32 on in both modes, CUBLAS_WORKSPACE_CONFIG set only when unset; torch's deterministic
  mode with warn_only; tf32_flags reads each flag under its own name, on CUDA only; bf16
  autocast computes a matmul in bfloat16, fp32 in float32, any other precision refused;
  channels_last is NHWC; CUDA graphs only for a compiled model in reduce-overhead mode;
  inductor's determinism follows torch's.
- the CPU threads record (docstring): recorded on a CPU device only (an MPS device computes on
  its GPU); a resume compares its count with the latest stretch's, and leaves the checkpoint's
  record unchanged.
- the training log (docstring): train_log.csv's header is every column any row has, in first
  seen order (an epoch 1 without validation does not drop the val_ columns), every row written.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.colors
import pandas as pd
import pytest
import torch

from wscat.report import figures, labels
from wscat.report import paired_figure as pf
from wscat.report import validation_figure as vf
from wscat.report.names import METHOD_COLOURS, method_colours
from wscat.report.names import DISPLAY_NAMES, display_name, is_adversarial
from wscat.training import speed, threads
from wscat.training.log import write_log

THE_PAPERS_COLUMNS = ("Natural", "FGSM", "PGD", "CW", "AA", "Mean")


class Captured:
    """A stand-in for wscat.report.figures.save: keeps the figure and the table it was given."""

    def __init__(self) -> None:
        self.fig: Any = None
        self.table: list[dict] | None = None

    def __call__(self, fig: Any, prefix: Path, table: list[dict] | None = None,
                 files: Any = None) -> None:
        self.fig, self.table = fig, table

    def lines(self, ax: int) -> list[tuple[str, list[float], list[float], str, Any]]:
        """(marker, x, y, label, face colour) of each line of axis `ax` but the axvline."""
        found = []
        for line in self.fig.axes[ax].get_lines():
            x, y = ([float(v) for v in values] for values in line.get_data())
            found.append((str(line.get_marker()), x, y, line.get_label(),
                          line.get_markerfacecolor()))
        return found


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Captured:
    stand_in = Captured()
    monkeypatch.setattr(figures, "save", stand_in)
    return stand_in


def _rgba(colour: Any) -> tuple[float, ...]:
    return tuple(matplotlib.colors.to_rgba(colour))


# --- the paired figure -------------------------------------------------------------------------

def _paired_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """by_attack and mean as wscat.report.paired writes them, numbers chosen by hand: TRADES
    below WSCAT with an interval that excludes 0, RST with one that holds 0."""
    by_attack = []
    for i, column in enumerate(THE_PAPERS_COLUMNS[:5]):
        by_attack += [{"column": column, "method": "trades", "delta_mean": -10.5 - i,
                       "ci_low": -12.25 - i, "ci_high": -8.75 - i, "excludes_zero": True},
                      {"column": column, "method": "rst", "delta_mean": 0.5 + i,
                       "ci_low": -1.5, "ci_high": 2.5 + i, "excludes_zero": False}]
    mean = pd.DataFrame([{"method": "trades", "delta_mean": -20.1234, "ci_low": -25.5,
                          "ci_high": -14.75, "excludes_zero": True},
                         {"method": "rst", "delta_mean": 1.25, "ci_low": -0.5, "ci_high": 3.0,
                          "excludes_zero": False}])
    return pd.DataFrame(by_attack), mean


def test_the_panels_are_the_paper_s_columns_in_its_order() -> None:
    assert pf.PANELS == THE_PAPERS_COLUMNS


def test_paired_rows_hold_each_method_s_difference_interval_and_paper_gap() -> None:
    by_attack, mean = _paired_frames()
    gaps = {("TRADES", "Mean"): -28.78, ("RST", "PGD"): 0.0, ("RST", "AA"): 1.5,
            ("trades", "AA"): 99.0}  # a method key, not a paper name: never looked up
    plotted = pf.rows(by_attack, mean, gaps, {"trades": "TRADES", "rst": "RST"})
    expected = []
    for i, column in enumerate(THE_PAPERS_COLUMNS[:5]):
        expected += [{"column": column, "method": "TRADES", "difference": -10.5 - i,
                      "ci_low": -12.25 - i, "ci_high": -8.75 - i, "excludes_zero": True,
                      "paper_difference": None},
                     {"column": column, "method": "RST", "difference": 0.5 + i,
                      "ci_low": -1.5, "ci_high": 2.5 + i, "excludes_zero": False,
                      "paper_difference": {"PGD": 0.0, "AA": 1.5}.get(column)}]
    expected += [{"column": "Mean", "method": "TRADES", "difference": -20.1234, "ci_low": -25.5,
                  "ci_high": -14.75, "excludes_zero": True, "paper_difference": -28.78},
                 {"column": "Mean", "method": "RST", "difference": 1.25, "ci_low": -0.5,
                  "ci_high": 3.0, "excludes_zero": False, "paper_difference": None}]
    assert plotted == expected


def test_the_joint_note_counts_only_the_rows_with_an_interval() -> None:
    with_interval = {"ci_low": -1.0, "ci_high": 1.0}
    without = {"ci_low": None, "ci_high": None}
    assert pf.joint_note([with_interval, without, without]) == "One interval at 95%."
    assert pf.joint_note([without, without]) == (
        "No interval (one seed, or no usable per-image flags).")
    assert pf.joint_note([with_interval, with_interval, without]).startswith(
        "2 intervals, each at 95% on its own, not a joint test")


def _plotted_by_hand() -> list[dict]:
    """Two methods in every panel: TRADES (excludes 0, a paper gap in Mean only), RST (holds 0,
    the paper's gap 0.0 in PGD)."""
    out = []
    for column in THE_PAPERS_COLUMNS:
        out += [{"column": column, "method": "TRADES", "difference": -10.0, "ci_low": -12.0,
                 "ci_high": -8.0, "excludes_zero": True,
                 "paper_difference": -28.78 if column == "Mean" else None},
                {"column": column, "method": "RST", "difference": 0.5, "ci_low": -1.5,
                 "ci_high": 2.5, "excludes_zero": False,
                 "paper_difference": 0.0 if column == "PGD" else None}]
    return out


def test_the_paired_figure_draws_each_row_s_point_bar_and_paper_mark(captured: Captured) -> None:
    plotted = _plotted_by_hand()
    pf.paired_figure(plotted, Path("unused"), reference="REF", paper_note="; NOTE")
    assert captured.table == plotted
    fig = captured.fig
    assert [ax.get_title() for ax in fig.axes] == list(THE_PAPERS_COLUMNS)
    for index, column in enumerate(THE_PAPERS_COLUMNS):
        ax = fig.axes[index]
        assert list(ax.get_yticks()) == [0, 1]  # the labels: a shared axis shows them once
        assert ax.yaxis.get_major_formatter().format_ticks([0, 1]) == ["TRADES", "RST"]
        assert ax.get_ylim() == (1.5, -0.5)  # the first method at the top
        assert ax.get_xlabel() == "method − REF (points)"
        lines = captured.lines(index)
        zero = [line for line in lines if line[1] == [0.0, 0.0] and line[2] == [0.0, 1.0]]
        assert len(zero) == 1  # the axvline at 0 (axes coordinates in y)
        bars = sorted((x, y) for marker, x, y, _, _ in lines if marker == "None" and
                      (x, y) != ([0.0, 0.0], [0.0, 1.0]))
        assert bars == [([-12.0, -8.0], [0.0, 0.0]), ([-1.5, 2.5], [1.0, 1.0])]
        points = sorted((x, y, _rgba(face)) for marker, x, y, _, face in lines if marker == "o")
        assert points == [([-10.0], [0.0], _rgba("tab:blue")), ([0.5], [1.0], _rgba("white"))]
        crosses = sorted((x, y) for marker, x, y, _, _ in lines if marker == "x")
        assert crosses == {"Mean": [([-28.78], [0.0])], "PGD": [([0.0], [1.0])]}.get(column, [])
    title = fig._suptitle.get_text()
    assert title.startswith("Difference from REF: ours")
    assert "; NOTE\n12 intervals, each at 95% on its own, not a joint test" in title


def test_a_row_without_an_interval_is_drawn_without_a_bar(captured: Captured) -> None:
    plotted = [{**row, "ci_low": None, "ci_high": None, "excludes_zero": False}
               for row in _plotted_by_hand() if row["method"] == "RST"]
    pf.paired_figure(plotted, Path("unused"))
    assert captured.fig.axes[0].get_xlabel() == "method − WSCAT (points)"
    markers = [marker for marker, *_ in captured.lines(0)]
    assert sorted(markers) == ["None", "o"]  # the zero line and the point, no bar
    assert captured.fig._suptitle.get_text().endswith(
        "\nNo interval (one seed, or no usable per-image flags).")


# --- the validation figure ---------------------------------------------------------------------

FIELDS = ["epoch", "loss", "lr", "val_natural", "val_cw", "score", "seconds"]


def _log(path: Path, rows: list[dict], fields: list[str] = FIELDS) -> Path:
    """A train_log.csv as `wscat train` writes it: an epoch not validated has empty val_ and
    score cells."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _validated_every_second_epoch(cw: tuple[float, float]) -> list[dict]:
    """Four epochs, validated at 2 and 4 (val_every 2), CW-20 accuracy `cw` there."""
    rows = []
    for epoch in (1, 2, 3, 4):
        row = {"epoch": epoch, "loss": 2.0 - epoch / 10, "lr": 0.1, "val_natural": "",
               "val_cw": "", "score": "", "seconds": 1.5}
        if epoch % 2 == 0:
            value = cw[epoch // 2 - 1]
            row.update(val_natural=50.0 + epoch, val_cw=value, score=value)
        rows.append(row)
    return rows


def test_a_log_without_a_score_column_is_refused_in_one_line(tmp_path: Path) -> None:
    rows = [{k: v for k, v in row.items() if k != "score"}
            for row in _validated_every_second_epoch((30.0, 28.0))]
    path = _log(tmp_path / "train_log.csv", rows, [f for f in FIELDS if f != "score"])
    with pytest.raises(ValueError, match="no validated epoch has a score") as error:
        vf.checkpoint_epoch(path, "cw")
    assert "\n" not in str(error.value)


def test_validation_rows_are_the_validated_epochs_of_each_run_and_seed(tmp_path: Path) -> None:
    seed1 = _log(tmp_path / "s1.csv", _validated_every_second_epoch((30.12345, 28.5)))
    seed2 = _log(tmp_path / "s2.csv", _validated_every_second_epoch((27.0, 29.25)))
    plotted = vf.rows({("wscat", 1): seed1, ("wscat", 2): seed2}, {"wscat": "cw"},
                      {"wscat": "WSCAT"})
    # CW-20 30.12345 to 4 places; best.pt holds epoch 2 for seed 1 (30.12 > 28.5), epoch 4 for
    # seed 2 (29.25 > 27.0); epochs 1 and 3 were not validated: no point.
    assert plotted == [
        {"method": "WSCAT", "seed": 1, "epoch": 2, "metric": "val_cw", "accuracy": 30.1234,
         "checkpoint": True},
        {"method": "WSCAT", "seed": 1, "epoch": 4, "metric": "val_cw", "accuracy": 28.5,
         "checkpoint": False},
        {"method": "WSCAT", "seed": 2, "epoch": 2, "metric": "val_cw", "accuracy": 27.0,
         "checkpoint": False},
        {"method": "WSCAT", "seed": 2, "epoch": 4, "metric": "val_cw", "accuracy": 29.25,
         "checkpoint": True}]


def test_a_run_selected_by_the_harmonic_mean_is_drawn_with_its_pgd_accuracy(
        tmp_path: Path) -> None:
    """selection: hm validates with PGD-20 (val_pgd) and keeps the best harmonic mean (score):
    not a run without an attack, whose natural accuracy the figure would otherwise draw."""
    fields = ["epoch", "loss", "val_natural", "val_pgd", "score"]
    rows = [{"epoch": 1, "loss": 1.5, "val_natural": 60.0, "val_pgd": 20.0, "score": 30.0},
            {"epoch": 2, "loss": 1.2, "val_natural": 70.0, "val_pgd": 18.0, "score": 28.6364}]
    path = _log(tmp_path / "hm.csv", rows, fields)
    plotted = vf.rows({("trades", 3): path}, {"trades": "hm"}, {"trades": "TRADES"})
    assert [(r["metric"], r["epoch"], r["accuracy"], r["checkpoint"]) for r in plotted] == [
        ("val_pgd", 1, 20.0, True), ("val_pgd", 2, 18.0, False)]


def test_the_validation_figure_draws_a_line_per_run_and_dots_its_checkpoint(
        captured: Captured) -> None:
    plotted = [
        {"method": "MT", "seed": 1, "epoch": 1, "metric": "val_natural", "accuracy": 60.0,
         "checkpoint": False},
        {"method": "MT", "seed": 1, "epoch": 2, "metric": "val_natural", "accuracy": 65.5,
         "checkpoint": True},
        *({"method": "WSCAT", "seed": seed, "epoch": epoch, "metric": "val_cw",
           "accuracy": accuracy, "checkpoint": chosen}
          for seed, epoch, accuracy, chosen in ((1, 2, 30.5, True), (1, 4, 28.5, False),
                                                (2, 2, 27.0, False), (2, 4, 29.25, True)))]
    vf.validation_figure(plotted, Path("unused"))
    assert captured.table == plotted
    natural, cw = captured.fig.axes
    assert (natural.get_ylabel(), cw.get_ylabel()) == ("validation natural accuracy (%)",
                                                       "validation CW-20 accuracy (%)")
    assert natural.get_title() == "runs without an attack: the labelers, Standard"
    assert cw.get_title() == "adversarially trained runs"
    assert natural.get_xlabel() == cw.get_xlabel() == "epoch"
    lines = {label: (x, y) for marker, x, y, label, _ in captured.lines(1) if marker == "None"}
    assert lines == {"WSCAT, seed 1": ([2.0, 4.0], [30.5, 28.5]),
                     "WSCAT, seed 2": ([2.0, 4.0], [27.0, 29.25])}
    dots = sorted((x, y) for marker, x, y, _, _ in captured.lines(1) if marker == "o")
    assert dots == [([2.0], [30.5]), ([4.0], [29.25])]
    assert [(x, y) for marker, x, y, _, _ in captured.lines(0) if marker == "o"] == [
        ([2.0], [65.5])]
    assert [t.get_text() for t in cw.get_legend().get_texts()] == ["WSCAT", "seed 1", "seed 2"]
    assert [h.get_linestyle() for h in cw.get_legend().legend_handles] == ["-", "-", "--"]
    assert [t.get_text() for t in natural.get_legend().get_texts()] == ["MT", "seed 1"]
    # a method's colour is its own in every figure, not its place in this one's list
    drawn = {line.get_label(): line.get_color() for ax in captured.fig.axes
             for line in ax.get_lines() if "seed" in line.get_label()}
    assert drawn == {"MT, seed 1": METHOD_COLOURS["MT"], "WSCAT, seed 1": METHOD_COLOURS["WSCAT"],
                     "WSCAT, seed 2": METHOD_COLOURS["WSCAT"]}, drawn


def test_each_method_has_one_colour_whatever_the_figure_s_other_methods() -> None:
    """WSCAT was green in Fig-similarity, brown in the proxy's curves and olive in the digits
    tier's robustness curves: the colour of its place in each figure's list."""
    alone, many = method_colours(["WSCAT"]), method_colours(["TRADES", "RST", "MART", "WSCAT"])
    assert alone["WSCAT"] == many["WSCAT"] == METHOD_COLOURS["WSCAT"]
    assert len(set(METHOD_COLOURS.values())) == len(METHOD_COLOURS)  # no two methods alike
    own = method_colours(["MART", "Mine", "WSCAT"])  # methods of a user's: spare colours
    assert own["MART"] != own["Mine"] and not {own["MART"], own["Mine"]} & set(
        METHOD_COLOURS.values())


def test_only_the_panels_of_logged_metrics_are_drawn(captured: Captured) -> None:
    plotted = [{"method": "MT", "seed": 1, "epoch": 1, "metric": "val_natural",
                "accuracy": 60.0, "checkpoint": True}]
    vf.validation_figure(plotted, Path("unused"))
    assert [ax.get_ylabel() for ax in captured.fig.axes] == ["validation natural accuracy (%)"]
    vf.validation_figure([{**plotted[0], "metric": "val_pgd"}], Path("unused"))
    assert [ax.get_ylabel() for ax in captured.fig.axes] == ["validation PGD-20 accuracy (%)"]


# --- the labels of `snakemake --report` --------------------------------------------------------

def test_a_training_s_label_has_its_name_seed_epochs_and_last_validation(tmp_path: Path) -> None:
    log = _log(tmp_path / "train_log.csv", _validated_every_second_epoch((30.5, 31.75)))
    shown = labels.train(SimpleNamespace(method="wscat-sup", seed="3"), SimpleNamespace(log=log))
    assert shown == {"method": "WSCAT-sup", "seed": "3", "epochs": 4, "val natural": "54.0",
                     "val robust": "CW 31.75"}
    pgd = _log(tmp_path / "hm.csv", [{"epoch": 1, "loss": 1.0, "val_natural": 60.0,
                                      "val_pgd": 20.5, "score": 30.0}],
               ["epoch", "loss", "val_natural", "val_pgd", "score"])
    assert labels.train(SimpleNamespace(method="trades", seed="1"),
                        SimpleNamespace(log=pgd))["val robust"] == "PGD 20.5"
    plain = _log(tmp_path / "standard.csv", [{"epoch": 1, "loss": 1.0, "val_natural": 60.0,
                                              "score": 60.0}],
                 ["epoch", "loss", "val_natural", "score"])
    assert labels.train(SimpleNamespace(method="standard", seed="1"),
                        SimpleNamespace(log=plain))["val robust"] == "-"


def test_a_metrics_label_has_two_places_in_the_tables_row_order(tmp_path: Path) -> None:
    accuracy = {"Mean": 40.0, "AA": 30.1267, "AA-paper": 30.5, "NRF": 31.0, "CW": 31.004,
                "PGD": 32.999, "FGSM": 45.5, "Natural": 80.12345}
    path = tmp_path / "seed1.json"
    path.write_text(json.dumps({"accuracy": accuracy}))
    shown = labels.metrics(SimpleNamespace(method="mt", seed="1"), [path])
    assert list(shown.items()) == [
        ("method", "MT"), ("seed", "1"), ("Natural", "80.12"), ("FGSM", "45.50"),
        ("PGD", "33.00"), ("CW", "31.00"), ("AA", "30.13"), ("Mean", "40.00"),
        ("AA-paper", "30.50"), ("NRF", "31.00")]


def test_a_pseudo_label_s_label_names_the_labeler(tmp_path: Path) -> None:
    path = tmp_path / "pseudo.json"
    path.write_text(json.dumps({"accuracy": 87.6543}))
    assert labels.pseudo(SimpleNamespace(labeler="mt", seed="2"), SimpleNamespace(
        metrics=path)) == {"labeler": "MT", "seed": "2", "accuracy": "87.65"}


# --- the paper's names -------------------------------------------------------------------------

def test_each_method_is_named_as_the_paper_names_it() -> None:
    paper = {"standard": "Standard", "trades": "TRADES", "rlfat": "RLFAT", "dmat": "DMAT",
             "wscat-sup": "WSCAT-sup", "mt": "MT", "rst": "RST", "puat": "PUAT",
             "wscat": "WSCAT", "wscat-fixed": "WSCAT-fixed", "wscat-self": "WSCAT-self",
             "wscat-std": "WSCAT-std"}
    assert DISPLAY_NAMES == paper
    reported = Path(figures.__file__).with_name("reported.csv")
    with open(reported, newline="") as handle:
        in_the_paper = {row["method"] for row in csv.DictReader(handle)}
    assert set(paper.values()) <= in_the_paper
    assert display_name("mart") == "mart" and display_name("wscat") == "WSCAT"


@pytest.mark.parametrize("objective, adversarial", [
    ("standard", False), ("mean_teacher", False), ("trades", True), ("wscat", True),
    ("rlfat", True), ("puat", True)])
def test_only_standard_and_mean_teacher_are_not_adversarial(objective: str,
                                                            adversarial: bool) -> None:
    assert is_adversarial({"objective": objective}) is adversarial


# --- the speed switches ------------------------------------------------------------------------

@pytest.fixture
def backend_restored(monkeypatch: pytest.MonkeyPatch):
    """The cuDNN, TF32 and determinism flags (and CUBLAS_WORKSPACE_CONFIG) put back after."""
    flags = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
             torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    yield
    (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
     torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) = flags[:4]
    torch._C._set_deterministic_algorithms(flags[4], warn_only=flags[5])  # as speed.py sets it


def test_a_deterministic_cuda_backend_turns_autotuning_off(backend_restored) -> None:
    """Setting the flags needs no GPU: torch.backends holds them for the first CUDA call."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    speed.configure_backend(torch.device("cuda"), deterministic=True)
    assert not torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.is_deterministic_algorithms_warn_only_enabled()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"  # the user's own: kept
    speed.configure_backend(torch.device("cuda"), deterministic=False)
    assert torch.backends.cudnn.benchmark and not torch.backends.cudnn.deterministic
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert not torch.are_deterministic_algorithms_enabled()


def test_a_cpu_backend_leaves_the_cuda_flags_alone(backend_restored) -> None:
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = True, True
    speed.configure_backend(torch.device("cpu"), deterministic=False)
    assert torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_tf32_flags_reads_each_flag_under_its_name(backend_restored) -> None:
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, False
    assert speed.tf32_flags(torch.device("cuda")) == {"matmul": True, "cudnn": False}
    assert speed.tf32_flags(torch.device("cpu")) is None
    assert speed.tf32_flags(torch.device("mps")) is None  # TF32 is CUDA's alone


def test_autocast_computes_in_the_precision_asked_and_refuses_another() -> None:
    a, b = torch.rand(4, 4), torch.rand(4, 4)
    with speed.autocast(torch.device("cpu"), "bf16"):
        assert (a @ b).dtype == torch.bfloat16
    with speed.autocast(torch.device("cpu"), "fp32"):
        assert (a @ b).dtype == torch.float32
    with pytest.raises(ValueError, match="precision must be fp32 or bf16, got 'fp16'"):
        with speed.autocast(torch.device("cpu"), "fp16"):  # type: ignore[arg-type]
            pass


def test_channels_last_is_nhwc_and_prepare_model_applies_it() -> None:
    assert speed.memory_format(True) is torch.channels_last
    assert speed.memory_format(False) is torch.contiguous_format
    conv = torch.nn.Conv2d(3, 4, 3)
    assert speed.prepare_model(conv, channels_last=True, compile=False) is conv
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert not conv.weight.is_contiguous()


@pytest.mark.parametrize("compile, mode, graphs", [
    (True, "reduce-overhead", True), (True, "default", False),
    (True, "max-autotune-no-cudagraphs", False), (False, "reduce-overhead", False)])
def test_cuda_graphs_only_for_a_compiled_reduce_overhead_model(compile: bool, mode: str,
                                                               graphs: bool) -> None:
    assert speed.uses_cuda_graphs(compile, mode) is graphs


def test_inductor_determinism_follows_torch_s(backend_restored,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.config as inductor

    monkeypatch.setattr(torch, "compile", lambda model, mode: model)
    # inductor's config module is patched by its own `patch` (monkeypatch's undo left
    # `deterministic` unreadable for the next torch.compile in the same process)
    with inductor.patch(deterministic=False):
        for deterministic in (True, False):
            speed.configure_backend(torch.device("cpu"), deterministic=deterministic)
            speed.prepare_model(torch.nn.Linear(2, 2), channels_last=False, compile=True)
            assert inductor.deterministic is deterministic


# --- the CPU threads record --------------------------------------------------------------------

def test_an_mps_device_records_no_cpu_threads() -> None:
    assert threads.cpu_count("mps") is None and threads.training_record("mps") == {}
    assert threads.cpu_count("cpu") == torch.get_num_threads()


def test_a_resume_leaves_the_checkpoint_s_record_as_it_was() -> None:
    previous = {"from epoch 1": torch.get_num_threads() + 1}
    record, said = threads.resumed_record(previous, 3, "cpu", "wscat seed 1")
    assert previous == {"from epoch 1": torch.get_num_threads() + 1}
    assert record == {"cpu_threads": {**previous, "from epoch 4": torch.get_num_threads()}}
    assert said is not None and said.startswith("wscat seed 1 resumes on ")


def test_a_resume_at_the_count_of_the_latest_stretch_adds_none() -> None:
    """Compared with the latest stretch (the epochs just before the resume), not the first."""
    now = torch.get_num_threads()
    previous = {"from epoch 1": now + 1, "from epoch 3": now}
    assert threads.resumed_record(previous, 5, "cpu", "x") == ({"cpu_threads": previous}, None)


# --- the training log --------------------------------------------------------------------------

def test_the_log_s_header_is_every_column_in_first_seen_order(tmp_path: Path) -> None:
    history = [{"epoch": 1, "loss": 2.5, "lr": 0.1, "seconds": 1.0},
               {"epoch": 2, "loss": 2.0, "lr": 0.05, "val_natural": 60.0, "val_cw": 30.0,
                "score": 30.0, "seconds": 2.0}]
    write_log(tmp_path / "train_log.csv", history)
    lines = (tmp_path / "train_log.csv").read_text().splitlines()
    assert lines == ["epoch,loss,lr,seconds,val_natural,val_cw,score",
                     "1,2.5,0.1,1.0,,,", "2,2.0,0.05,2.0,60.0,30.0,30.0"]
