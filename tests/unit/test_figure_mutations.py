"""Mutation tests for wscat/report/figures.py (the paper's Fig-similarity, Fig-beta, Fig-unlabel,
Fig-feature and a run's training curves) and wscat/report/robustness_figure.py (PGD accuracy
against eps and steps): each test kills hand-made mutants that went through the unit tests
importing the two modules, with expectations worked out by hand from the modules' docstrings,
docs/paper-tables.md, docs/workflow.md (train_log.csv) and the metrics, validation, split and
analysis file formats, never from the function under test. What is checked is each figure's CSV
(its columns, rows and numbers) and the numbers handed to matplotlib (the lines of the captured
figure); nothing is rendered but by the `save` tests, on a one-line figure.

What is checked, and from which fact:
- Fig-beta (docstring, paper-tables.md: "β is picked by the validation harmonic mean ... the
  CSV's `chosen` column records it"): the chosen beta is the one of the highest validation HM
  (the validation files' own HM, averaged over the sweep's seeds), never the test HM, and is
  the one beta marked chosen and drawn as the dotted line; a tie of validation HM goes to the
  smaller beta; natural, pgd are the test accuracies averaged over `beta.seeds` (not
  `unlabelled.seeds`), hm the mean of each seed's harmonic mean, val_natural, val_pgd, val_hm
  the validation files' numbers averaged, each rounded to 4 places; one row per (dataset,
  beta), the dataset named as the tier names it, the method the sweep's key; the lines drawn
  are the test natural, PGD and HM.
- Fig-unlabel (docstring): per point the unlabelled images the split of the point's dataset
  holds (not its labelled ones), the Mean over seeds (the metrics files' `Mean`) and the seed
  std (sample std, ddof=1: wscat.report.table.seed_std's docstring); x drawn is the count, y
  the mean, every point.
- Fig-similarity (docstring, paper-tables.md): per method, in params.yaml's order, the n, mean,
  median, 10% and 90% quantiles of that method's cosines in the Fig-similarity analysis file,
  and its own histogram; an analysis of other methods is refused.
- Fig-feature (docstring): one CSV row per (method, point): the training index and true label
  from the analysis file, x and y the t-SNE's first and second coordinate, every method kept.
- both (wscat/steps/analyse.py's docstring: `cos` methods x images, `tsne` methods x images x 2,
  an `index` and `label` per image): an analysis file short of a method's row or an image, with
  no such array, or with a NaN, is refused in one line (was: zip dropped the method or image
  unseen, a NaN cosine made the CSV's mean `nan`, a missing array a KeyError traceback).
- training curves (docstring, workflow.md): loss terms on the left panel, val_ columns on the
  right (their legend without `val_`), against the epoch column, lr and seconds not drawn;
  read_train_log refuses a log without epoch or loss or any val_ column, with no rows, with an
  empty epoch or loss cell or a non-finite number (naming its line: the header is line 1); an
  empty val_ cell is a gap; curves_files keeps a dotted name and drops a .PDF ending.
- save (docstring): the CSV's columns in the table's key order and every row, no CSV without a
  table, each format its own bytes, the `files` mapping honoured, the figure closed, every path
  checked before any is written, nothing moved into place when a rendering fails.
- _load and _percent: a missing file names what makes it, a JSON list and another run's file
  are refused, an accuracy outside [0, 100] (wscat.metrics.is_percent) is refused.
- robustness curves (module docstring, paper-tables.md): rows carry the method's display name,
  the seed, the panel's x key (eps, steps), each accuracy at its own x as a float; a file whose
  check lacks numbers or has one fewer accuracy than x values, or another grid, is refused; an
  accuracy that is not a finite percentage (NaN, null, 140) or a file that is not a JSON object
  of checks is refused in one line naming the file (was: NaN drawn and written as `nan`, a
  null a TypeError); the line drawn per method is the mean over its seeds at each x, per
  dataset and panel, each seed's dots beside it; the dotted lines are the table's eps and PGD
  steps; the x ticks read eps as k/255 where it is one (_eps_label's docstring) and steps as
  integers; the title names the seeds the mean is over; the CSV is every row;
  tier_figure reads the extra file of every run of each dataset's performance experiment, under
  the tier's dataset name, with the dataset's eps and evaluation.pgd_steps.
"""
from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.colors import to_hex
from matplotlib.patches import Polygon
import numpy as np
import pytest

from wscat.config import load_params
from wscat.report import figures, names, paper
from wscat.report import robustness_figure as robustness

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
TIER = "digits"


@pytest.fixture(scope="module")
def loaded() -> dict[str, Any]:
    return load_params(PARAMS)


@pytest.fixture
def params(loaded: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(loaded)


def _top(bars: Any) -> float:
    """The left edge of a histogram's rightmost bar that holds any data."""
    return max(bar.get_x() for bar in bars if bar.get_height() > 0)


class Saved:
    """What a stood-in `save` was handed: the table and each axes' lines (label, x, y) and
    vertical lines (x), read before the figure is closed."""

    def __init__(self) -> None:
        self.table: list[dict[str, Any]] | None = None
        self.axes: list[dict[str, Any]] = []

    def __call__(self, fig: Any, prefix: Path, table: list[dict[str, Any]] | None = None,
                 files: dict[str, Path] | None = None) -> None:
        self.table, self.files = table, files
        self.title = fig._suptitle.get_text() if fig._suptitle else ""
        for ax in fig.axes:
            lines, vertical = [], []
            for line in ax.get_lines():
                x, y = (np.asarray(v, dtype=float) for v in line.get_data())
                if len(x) == 2 and x[0] == x[1] and line.get_linestyle() in ("--", ":"):
                    vertical.append(float(x[0]))
                else:
                    lines.append((line.get_label(), list(x), list(y)))
            self.axes.append({"lines": lines, "vertical": vertical, "title": ax.get_title(),
                              "ticks": [tick.get_text() for tick in ax.get_xticklabels()],
                              "scatter": [c.get_offsets().tolist() for c in ax.collections],
                              "hist": [(c[0].get_label(), _top(c)) for c in ax.containers],
                              "outlines": [to_hex(p.get_edgecolor()) for p in ax.patches
                                           if isinstance(p, Polygon)]})
        plt.close(fig)

    def line(self, ax: int, label: str) -> tuple[list[float], list[float]]:
        (found,) = [(x, y) for name, x, y in self.axes[ax]["lines"] if name == label]
        return found


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> Saved:
    stand_in = Saved()
    monkeypatch.setattr(figures, "save", stand_in)
    return stand_in


def write_json(path: str | Path, data: Any) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data))


# --- Fig-beta ----------------------------------------------------------------------------------

def _beta_tier(params: dict[str, Any], values: list[float], seeds: list[int],
               second: bool = False) -> dict[str, Any]:
    spec = params["paper"][TIER]
    spec["beta"]["values"], spec["beta"]["seeds"] = values, seeds
    spec["unlabelled"]["seeds"] = [7]  # never the beta sweep's
    if second:  # the same runs under another name: a second panel
        spec["datasets"] = [spec["datasets"][0], {**spec["datasets"][0], "name": "Digits bis"}]
    else:
        spec["datasets"] = spec["datasets"][:1]
    return spec["datasets"][0]


def _beta_files(params: dict[str, Any], root: Path, numbers: dict[tuple[float, int], dict]
                ) -> dict[float, str]:
    """numbers[(beta, seed)] = {"test": (natural, pgd), "val": (natural, pgd, hm)}."""
    entry = paper.tier_spec(params, TIER)["datasets"][0]
    methods = dict(paper.beta_points(params, TIER, entry))
    for (beta, seed), got in numbers.items():
        run = paper.Run("digits", "cnn", methods[beta], seed)
        natural, pgd = got["test"]
        write_json(run.metrics(str(root)), {"accuracy": {"Natural": natural, "PGD": pgd}})
        vn, vp, vh = got["val"]
        write_json(run.validation(str(root)), {"Natural": vn, "PGD": vp, "HM": vh})
    return methods


def test_beta_is_chosen_on_the_validation_hm_never_the_test_hm(
        params: dict[str, Any], tmp_path: Path, saved: Saved) -> None:
    """Test HM best at beta 1.0 (60/60), validation HM best at 0.2: 0.2 is chosen and drawn."""
    _beta_tier(params, [0.0, 0.2, 1.0], [1])
    _beta_files(params, tmp_path, {
        (0.0, 1): {"test": (80.0, 20.0), "val": (80.0, 20.0, 32.0)},
        (0.2, 1): {"test": (70.0, 30.0), "val": (70.0, 40.0, 50.0)},
        (1.0, 1): {"test": (60.0, 60.0), "val": (50.0, 30.0, 37.5)}})
    figures.beta_figure(params, TIER, str(tmp_path), tmp_path / "Fig-beta")
    assert [(row["beta"], row["chosen"]) for row in saved.table] == [
        (0.0, False), (0.2, True), (1.0, False)]
    assert saved.axes[0]["vertical"] == [0.2]


def test_a_validation_tie_goes_to_the_smaller_beta(params: dict[str, Any], tmp_path: Path,
                                                   saved: Saved) -> None:
    _beta_tier(params, [0.0, 0.2, 1.0], [1])
    _beta_files(params, tmp_path, {
        (0.0, 1): {"test": (80.0, 20.0), "val": (80.0, 20.0, 32.0)},
        (0.2, 1): {"test": (70.0, 30.0), "val": (50.0, 50.0, 50.0)},
        (1.0, 1): {"test": (60.0, 60.0), "val": (50.0, 50.0, 50.0)}})
    figures.beta_figure(params, TIER, str(tmp_path), tmp_path / "Fig-beta")
    assert [row["beta"] for row in saved.table if row["chosen"]] == [0.2]
    assert saved.axes[0]["vertical"] == [0.2]


def test_every_beta_column_is_its_own_mean_over_the_beta_seeds(
        params: dict[str, Any], tmp_path: Path, saved: Saved) -> None:
    """Seeds 1 and 2 (the sweep's; unlabelled.seeds is [7], with no files): natural (90+50)/2,
    pgd (10+50)/2, hm (18+50)/2 (HM(90, 10) = 18), the validation numbers as written, averaged;
    the test lines drawn are natural, PGD and HM."""
    _beta_tier(params, [0.05, 0.5], [1, 2])
    methods = _beta_files(params, tmp_path, {
        (0.05, 1): {"test": (90.0, 10.0), "val": (81.0, 11.0, 12.5)},
        (0.05, 2): {"test": (50.0, 50.0), "val": (61.0, 41.0, 44.5)},
        (0.5, 1): {"test": (40.0, 40.0), "val": (30.0, 20.0, 10.0)},
        (0.5, 2): {"test": (20.0, 60.0), "val": (10.0, 40.0, 20.0)}})
    figures.beta_figure(params, TIER, str(tmp_path), tmp_path / "Fig-beta")
    first, second = saved.table
    assert first == {"dataset": "Digits", "beta": 0.05, "method": methods[0.05],
                     "natural": 70.0, "pgd": 30.0, "hm": 34.0, "val_natural": 71.0,
                     "val_pgd": 26.0, "val_hm": 28.5, "chosen": True}
    assert (second["natural"], second["pgd"], second["hm"]) == (30.0, 50.0, 35.0)  # HM(20,60)=30
    assert (second["val_natural"], second["val_pgd"], second["val_hm"]) == (20.0, 30.0, 15.0)
    assert methods[0.05] == "wscat" and methods[0.5] == "wscat-beta0.5"  # the configured beta
    assert saved.line(0, "Natural") == ([0.05, 0.5], [70.0, 30.0])
    assert saved.line(0, "PGD") == ([0.05, 0.5], [30.0, 50.0])
    assert saved.line(0, "HM") == ([0.05, 0.5], [34.0, 35.0])


def test_beta_numbers_keep_four_places(params: dict[str, Any], tmp_path: Path,
                                       saved: Saved) -> None:
    _beta_tier(params, [0.05], [1])
    _beta_files(params, tmp_path, {
        (0.05, 1): {"test": (12.34567, 23.45678), "val": (34.56789, 45.67891, 39.87654)}})
    figures.beta_figure(params, TIER, str(tmp_path), tmp_path / "Fig-beta")
    (row,) = saved.table
    assert (row["natural"], row["pgd"], row["val_natural"], row["val_pgd"], row["val_hm"]) == (
        12.3457, 23.4568, 34.5679, 45.6789, 39.8765)


def test_every_datasets_beta_rows_are_kept(params: dict[str, Any], tmp_path: Path,
                                           saved: Saved) -> None:
    _beta_tier(params, [0.05, 0.5], [1], second=True)
    _beta_files(params, tmp_path, {
        (0.05, 1): {"test": (90.0, 10.0), "val": (80.0, 10.0, 20.0)},
        (0.5, 1): {"test": (40.0, 40.0), "val": (30.0, 20.0, 10.0)}})
    figures.beta_figure(params, TIER, str(tmp_path), tmp_path / "Fig-beta")
    assert [(row["dataset"], row["beta"]) for row in saved.table] == [
        ("Digits", 0.05), ("Digits", 0.5), ("Digits bis", 0.05), ("Digits bis", 0.5)]
    assert [ax["vertical"] for ax in saved.axes] == [[0.05], [0.05]]


# --- Fig-unlabel -------------------------------------------------------------------------------

def _split(path: str, labelled: int, unlabelled: int) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, dataset=np.array("digits"), seed=np.array(1),
             labelled=np.arange(labelled), unlabelled=np.arange(100, 100 + unlabelled),
             validation=np.arange(50, 55), test=np.arange(60, 70))


def test_unlabel_points_are_the_splits_unlabelled_count_and_the_seeds_mean_and_std(
        params: dict[str, Any], tmp_path: Path, saved: Saved) -> None:
    """Means 40, 50 (seeds 1, 2): mean 45, sample std sqrt(50) = 7.0711 (population: 5)."""
    spec = params["paper"][TIER]
    spec["datasets"] = spec["datasets"][:1]
    spec["unlabelled"]["fractions"], spec["unlabelled"]["seeds"] = [0.1, 1.0], [1, 2]
    spec["beta"]["seeds"] = [9]
    entry = spec["datasets"][0]
    points = paper.unlabelled_points(params, TIER, entry)
    means = {0.1: (40.0, 50.0), 1.0: (70.0, 72.0)}
    counts = {0.1: 13, 1.0: 130}
    for fraction, dataset in points:
        for seed, mean in zip((1, 2), means[fraction]):
            run = paper.Run(dataset, "cnn", "wscat", seed)
            write_json(run.metrics(str(tmp_path)),
                       {"accuracy": {"Mean": mean, "PGD": 99.0, "Natural": 98.0}})
            if seed == 1:
                _split(run.split(str(tmp_path)), labelled=7, unlabelled=counts[fraction])
    figures.unlabel_figure(params, TIER, str(tmp_path), tmp_path / "Fig-unlabel")
    assert saved.table == [
        {"dataset": "Digits", "fraction": 0.1, "unlabelled": 13, "mean": 45.0,
         "std": round(math.sqrt(50), 4), "n_seeds": 2},
        {"dataset": "Digits", "fraction": 1.0, "unlabelled": 130, "mean": 71.0,
         "std": round(math.sqrt(2), 4), "n_seeds": 2}]
    (only,) = saved.axes[0]["lines"]
    assert (only[1], only[2]) == ([13.0, 130.0], [45.0, 71.0])


# --- Fig-similarity and Fig-feature ------------------------------------------------------------

SQUARES = np.arange(11) ** 2 / 100  # 0, .01, .04, ... 1: mean .35, median .25, q10 .01, q90 .81


def test_similarity_rows_are_each_methods_own_cosines(params: dict[str, Any], tmp_path: Path,
                                                      saved: Saved) -> None:
    """trades, rlfat, wscat (params.yaml's order) with cosines SQUARES x 1, 0.5, 0.25."""
    spec = params["paper"][TIER]
    spec["datasets"] = spec["datasets"][:1]
    methods = spec["similarity"]["methods"]
    assert methods == ["trades", "rlfat", "wscat"]
    path = Path(paper.analysis_file(TIER, "Fig-similarity", "digits", str(tmp_path)))
    path.parent.mkdir(parents=True)
    np.savez(path, methods=np.array(methods), cos=np.stack([SQUARES, SQUARES / 2, SQUARES / 4]))
    figures.similarity_figure(params, TIER, str(tmp_path), tmp_path / "Fig-similarity")
    assert saved.table == [
        {"dataset": "Digits", "method": name, "n": 11, "mean": round(0.35 * s, 4),
         "median": round(0.25 * s, 4), "q10": round(0.01 * s, 4), "q90": round(0.81 * s, 4)}
        for name, s in (("TRADES", 1), ("RLFAT", 0.5), ("WSCAT", 0.25))]
    # each histogram its own method's: its top bar (bins 0.02 wide) holds the largest cosine
    hist = saved.axes[0]["hist"]
    assert [name for name, _ in hist] == ["TRADES", "RLFAT", "WSCAT"]
    for (_, top), largest in zip(hist, (1.0, 0.5, 0.25)):
        assert largest - 0.02 - 1e-9 <= top <= largest + 1e-9
    # and an outline each, in its colour: TRADES' and WSCAT's fills lie on one another
    colours = names.method_colours(["TRADES", "RLFAT", "WSCAT"])
    assert saved.axes[0]["outlines"] == [to_hex(colours[n]) for n in ("TRADES", "RLFAT", "WSCAT")]


def test_similarity_refuses_an_analysis_of_other_methods(params: dict[str, Any],
                                                         tmp_path: Path, saved: Saved) -> None:
    path = Path(paper.analysis_file(TIER, "Fig-similarity", "digits", str(tmp_path)))
    path.parent.mkdir(parents=True)
    np.savez(path, methods=np.array(["wscat", "rlfat", "trades"]), cos=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="analyses wscat, rlfat, trades, params.yaml asks for "
                                         "trades, rlfat, wscat"):
        figures.similarity_figure(params, TIER, str(tmp_path), tmp_path / "Fig-similarity")
    assert saved.table is None


def _similarity_file(root: Path, **arrays: Any) -> None:
    path = Path(paper.analysis_file(TIER, "Fig-similarity", "digits", str(root)))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, methods=np.array(["trades", "rlfat", "wscat"]), **arrays)


def _feature_file(root: Path, **arrays: Any) -> None:
    path = Path(paper.analysis_file(TIER, "Fig-feature", "digits", str(root)))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, methods=np.array(["wscat", "wscat-fixed", "wscat-self"]), **arrays)


NAN_ROW = np.array([[0.5, 0.6], [0.5, np.nan], [0.5, 0.6]])


@pytest.mark.parametrize("figure, arrays, says", [
    ("Fig-similarity", {"cos": np.ones((2, 5))}, "`cos` is float64 (2, 5), not the finite numbers "
                                                 "of shape (3, 5)"),
    ("Fig-similarity", {"cos": NAN_ROW}, "`cos` is float64 (3, 2), not the finite"),
    ("Fig-similarity", {"cos": np.ones((3, 0))}, "`cos` is float64 (3, 0)"),
    ("Fig-similarity", {}, "`cos` is none"),
    ("Fig-feature", {"tsne": np.ones((3, 2, 2)), "index": np.arange(3), "label": np.arange(3)},
     "`index` is int64 (3,), not the finite numbers of shape (2,)"),
    ("Fig-feature", {"tsne": np.ones((3, 2, 2)), "index": np.arange(2)}, "`label` is none"),
    ("Fig-feature", {"tsne": np.ones((2, 2, 2)), "index": np.arange(2), "label": np.arange(2)},
     "`tsne` is float64 (2, 2, 2), not the finite numbers of shape (3, 2, 2)"),
])
def test_an_analysis_short_of_a_method_or_an_image_or_with_nan_is_refused(
        params: dict[str, Any], tmp_path: Path, saved: Saved, figure: str,
        arrays: dict[str, np.ndarray], says: str) -> None:
    """A method's row or an image's label short was dropped from the figure by zip, unseen; a
    NaN cosine made the CSV's mean `nan`; a missing array was a KeyError traceback."""
    params["paper"][TIER]["datasets"] = params["paper"][TIER]["datasets"][:1]
    (_similarity_file if figure == "Fig-similarity" else _feature_file)(tmp_path, **arrays)
    draw = figures.similarity_figure if figure == "Fig-similarity" else figures.feature_figure
    with pytest.raises(ValueError, match=re.escape(says)):
        draw(params, TIER, str(tmp_path), tmp_path / figure)
    assert saved.table is None


def test_feature_rows_are_each_points_index_label_and_coordinates(
        params: dict[str, Any], tmp_path: Path, saved: Saved) -> None:
    spec = params["paper"][TIER]
    spec["datasets"] = spec["datasets"][:1]
    methods = spec["feature"]["methods"]
    path = Path(paper.analysis_file(TIER, "Fig-feature", "digits", str(tmp_path)))
    path.parent.mkdir(parents=True)
    tsne = np.array([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]],
                     [[9.0, 10.0], [11.0, 12.0]]])
    np.savez(path, methods=np.array(methods), index=np.array([40, 41]), label=np.array([3, 8]),
             tsne=tsne)
    figures.feature_figure(params, TIER, str(tmp_path), tmp_path / "Fig-feature")
    assert saved.table == [
        {"dataset": "Digits", "method": name, "index": index, "label": label, "x": x, "y": y}
        for name, points in zip(("WSCAT", "WSCAT-fixed", "WSCAT-self"), tsne)
        for index, label, (x, y) in zip((40, 41), (3, 8), points.tolist())]
    assert [ax["scatter"] for ax in saved.axes] == [[points.tolist()] for points in tsne]


def test_a_file_that_is_no_analysis_is_refused(params: dict[str, Any], tmp_path: Path,
                                               saved: Saved) -> None:
    path = Path(paper.analysis_file(TIER, "Fig-similarity", "digits", str(tmp_path)))
    path.parent.mkdir(parents=True)
    np.savez(path, cos=np.ones((3, 4)))  # no `methods`
    with pytest.raises(ValueError, match="not an analysis file .*run `wscat analyse`"):
        figures.similarity_figure(params, TIER, str(tmp_path), tmp_path / "Fig-similarity")


# --- training curves ---------------------------------------------------------------------------

LOG = ("epoch,lr,loss,loss_ce,val_natural,val_pgd,seconds\n"
       "1,0.1,2.0,1.5,50.0,,3.0\n"
       "2,0.1,1.0,0.5,60.0,20.0,3.0\n"
       "3,0.01,0.5,0.25,70.0,30.0,3.0\n")


def test_curves_draw_losses_left_and_validation_right_against_the_epoch(
        tmp_path: Path, saved: Saved) -> None:
    (tmp_path / "train_log.csv").write_text(LOG)
    figures.curves(tmp_path / "train_log.csv", tmp_path / "run.v2", "a run")
    left, right = saved.axes
    assert [(name, x, y) for name, x, y in left["lines"]] == [
        ("loss", [1.0, 2.0, 3.0], [2.0, 1.0, 0.5]), ("loss_ce", [1.0, 2.0, 3.0], [1.5, 0.5, 0.25])]
    assert [name for name, _, _ in right["lines"]] == ["natural", "pgd"]
    assert left["title"].endswith("its terms unweighted")  # a term may sit above its loss
    assert saved.line(1, "pgd")[1][1:] == [20.0, 30.0] and math.isnan(saved.line(1, "pgd")[1][0])
    assert saved.files == {"pdf": tmp_path / "run.v2.pdf", "png": tmp_path / "run.v2.png"}


@pytest.mark.parametrize("out, stem", [("run.v2", "run.v2"), ("c.PDF", "c"), ("c.png", "c")])
def test_curves_files_keep_a_dotted_name_and_drop_a_figure_ending(tmp_path: Path, out: str,
                                                                  stem: str) -> None:
    assert figures.curves_files(tmp_path / out) == {"pdf": tmp_path / f"{stem}.pdf",
                                                    "png": tmp_path / f"{stem}.png"}


@pytest.mark.parametrize("text, says", [
    ("epoch,val_natural\n1,50\n", "lacks the loss column"),
    ("loss,val_natural\n1,50\n", "lacks the epoch column"),
    ("epoch,loss,lr\n1,2.0,0.1\n", "lacks the val_* column"),
    ("epoch,loss,val_natural\n", "no epochs logged"),
    ("epoch,loss,val_natural\n1,2.0,50\n2,inf,50\n", "line 3: loss is 'inf', not a finite"),
    ("epoch,loss,val_natural\n1,,50\n", "line 2: loss is empty"),
    ("epoch,loss,val_natural\n,1.0,50\n", "line 2: epoch is empty"),
    ("epoch,loss,val_natural\n1,1.0,nan\n", "line 2: val_natural is 'nan'"),
    ("", "is empty, not a training log"),
])
def test_a_log_that_is_not_a_finished_runs_is_refused_naming_what(tmp_path: Path, text: str,
                                                                  says: str) -> None:
    (tmp_path / "log.csv").write_text(text)
    with pytest.raises(ValueError, match=says.replace("*", r"\*")):
        figures.read_train_log(tmp_path / "log.csv")


def test_a_binary_file_is_no_training_log(tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_bytes(b"epoch,loss\n\xff\xfe\x00\x81,1\n")
    with pytest.raises(ValueError, match=r"log\.csv is not a training log \(not a CSV table"):
        figures.read_train_log(tmp_path / "log.csv")


def test_a_blank_validation_cell_is_a_gap_and_padded_numbers_are_read(tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_text("epoch,loss,val_natural\n 1 , 2.5 ,  \n2,1.5, 60 \n")
    log = figures.read_train_log(tmp_path / "log.csv")
    assert list(log["epoch"]) == [1.0, 2.0] and list(log["loss"]) == [2.5, 1.5]
    assert math.isnan(log["val_natural"][0]) and log["val_natural"][1] == 60.0


# --- save --------------------------------------------------------------------------------------

def _figure() -> plt.Figure:
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    return fig


def test_save_writes_every_row_in_the_tables_column_order(tmp_path: Path) -> None:
    fig = _figure()
    table = [{"zeta": 1, "alpha": 0.5, "chosen": True}, {"zeta": 2, "alpha": 0.25, "chosen": False}]
    figures.save(fig, tmp_path / "f", table)
    assert (tmp_path / "f.csv").read_text() == "zeta,alpha,chosen\n1,0.5,True\n2,0.25,False\n"
    assert (tmp_path / "f.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")
    assert fig.number not in plt.get_fignums()


def test_save_of_a_one_row_table_and_of_none(tmp_path: Path) -> None:
    figures.save(_figure(), tmp_path / "one", [{"a": 1}])
    assert (tmp_path / "one.csv").read_text() == "a\n1\n"
    figures.save(_figure(), tmp_path / "none")
    assert sorted(p.name for p in tmp_path.glob("none*")) == ["none.pdf", "none.png"]


def test_save_writes_where_files_say(tmp_path: Path) -> None:
    files = {"pdf": tmp_path / "a.v1.pdf", "png": tmp_path / "a.v1.png"}
    figures.save(_figure(), tmp_path / "ignored", files=files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.v1.pdf", "a.v1.png"]


def test_save_checks_every_path_before_writing_any(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder")
    files = {"pdf": tmp_path / "ok.pdf", "png": tmp_path / "blocker" / "f.png"}
    with pytest.raises(OSError, match="is a file, not a folder"):
        figures.save(_figure(), tmp_path / "x", files=files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


def test_save_moves_nothing_into_place_when_a_rendering_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fig = _figure()
    real = fig.savefig

    def savefig(target: Any, **kwargs: Any) -> None:
        if kwargs["format"] == "png":
            raise RuntimeError("renderer failed")
        real(target, **kwargs)

    monkeypatch.setattr(fig, "savefig", savefig)
    with pytest.raises(RuntimeError):
        figures.save(fig, tmp_path / "f", [{"a": 1}])
    assert list(tmp_path.iterdir()) == []


# --- _load and _percent ------------------------------------------------------------------------

RUN = paper.Run("digits", "cnn", "wscat", 1)


def test_load_refuses_a_missing_file_a_list_and_another_runs_file(tmp_path: Path) -> None:
    path = RUN.metrics(str(tmp_path))
    with pytest.raises(ValueError, match=r"not found; make it first: .*wscat evaluate"):
        figures._load(path, RUN)
    write_json(path, [1, 2])
    with pytest.raises(ValueError, match="a JSON list, not the object of a run's numbers"):
        figures._load(path, RUN)
    Path(path).write_text("{not json")
    with pytest.raises(ValueError, match=r"seed1\.json: not a readable JSON file .*--forcerun"):
        figures._load(path, RUN)
    write_json(path, {"method": "trades", "seed": 1, "accuracy": {}})
    with pytest.raises(ValueError, match="holds the numbers of trades seed 1"):
        figures._load(path, RUN)


@pytest.mark.parametrize("value", [100.5, -1, float("nan"), "50", None, True])
def test_percent_refuses_what_is_not_a_finite_percentage(value: Any) -> None:
    with pytest.raises(ValueError, match="PGD is .*not a finite percentage in"):
        figures._percent("m.json", {"PGD": value}, "PGD")


# --- robustness curves -------------------------------------------------------------------------

EPS = [0.0, 0.1, 0.2]
STEPS = [5, 10, 20]


def _extra(path: Path, eps_accuracy: list[Any], steps_accuracy: list[Any],
           eps: list[float] = EPS) -> Path:
    write_json(path, {"checks": {
        "pgd_eps_monotone": {"eps": eps, "accuracy": eps_accuracy, "passed": True},
        "pgd_steps_monotone": {"steps": STEPS, "accuracy": steps_accuracy, "passed": True}}})
    return path


def test_robustness_rows_name_the_method_seed_panel_and_each_accuracy_at_its_x(
        tmp_path: Path) -> None:
    extras = {("wscat", 2): _extra(tmp_path / "w2.json", [60, 40.0, 5.0], [42.0, 41.0, 40.5])}
    rows = robustness.rows(extras, {"wscat": "WSCAT"}, "Digits")
    assert rows == [{"dataset": "Digits", "method": "WSCAT", "seed": 2, "panel": panel, "x": x,
                     "accuracy": a}
                    for panel, xs, ys in (("eps", EPS, [60.0, 40.0, 5.0]),
                                          ("steps", STEPS, [42.0, 41.0, 40.5]))
                    for x, a in zip(xs, ys)]
    assert type(rows[0]["accuracy"]) is float


@pytest.mark.parametrize("eps_accuracy, steps_accuracy", [
    ([60.0, 40.0], [42.0, 41.0, 40.5]), ([60.0, 40.0, 5.0], []), ([60.0, 40.0, 5.0], None)])
def test_robustness_refuses_a_check_without_one_accuracy_per_x(
        tmp_path: Path, eps_accuracy: Any, steps_accuracy: Any) -> None:
    path = _extra(tmp_path / "e.json", eps_accuracy, steps_accuracy)
    with pytest.raises(ValueError, match=r"e\.json: no pgd_(eps|steps)_monotone numbers"):
        robustness.rows({("wscat", 1): path}, {})


@pytest.mark.parametrize("bad", [float("nan"), None, 140.0, -1.0, "40", True])
def test_robustness_refuses_an_accuracy_that_is_no_percentage(tmp_path: Path, bad: Any) -> None:
    """A NaN was drawn as a gap and written `nan` to the CSV as if measured; a null was a
    TypeError traceback."""
    path = _extra(tmp_path / "e.json", [60.0, 40.0, 5.0], [42.0, bad, 40.5])
    with pytest.raises(ValueError, match=r"e\.json: pgd_steps_monotone's accuracy at steps 10 is "
                                         r".*not a finite percentage"):
        robustness.rows({("wscat", 1): path}, {})


@pytest.mark.parametrize("text", ["[1, 2]", '{"checks": [1]}', "{not json",
                                  '{"checks": {"pgd_eps_monotone": [1]}}'])
def test_robustness_refuses_a_file_that_is_not_an_extra_metrics_object(tmp_path: Path,
                                                                      text: str) -> None:
    (tmp_path / "e.json").write_text(text)
    with pytest.raises(ValueError, match=r"e\.json: "):
        robustness.rows({("wscat", 1): tmp_path / "e.json"}, {})


def test_robustness_refuses_another_grid(tmp_path: Path) -> None:
    good = _extra(tmp_path / "a.json", [60.0, 40.0, 5.0], [42.0, 41.0, 40.5])
    other = _extra(tmp_path / "b.json", [60.0, 40.0, 5.0], [42.0, 41.0, 40.5], eps=[0, 0.1, 0.3])
    with pytest.raises(ValueError, match=r"b\.json: its pgd_eps_monotone ran at eps"):
        robustness.rows({("wscat", 1): good, ("wscat", 2): other}, {})


def test_robustness_lines_are_each_methods_mean_over_seeds_per_dataset_and_panel(
        tmp_path: Path, saved: Saved) -> None:
    """WSCAT seeds 1, 2, 3 at eps 0: 60, 50, 10 (mean 40, median 50, max 60); TRADES apart;
    a second dataset's numbers do not enter the first's panels."""
    first = robustness.rows(
        {("wscat", 1): _extra(tmp_path / "w1.json", [60.0, 40.0, 5.0], [42.0, 41.0, 40.0]),
         ("wscat", 2): _extra(tmp_path / "w2.json", [50.0, 30.0, 3.0], [32.0, 31.0, 30.0]),
         ("wscat", 3): _extra(tmp_path / "w3.json", [10.0, 20.0, 1.0], [22.0, 21.0, 20.0]),
         ("trades", 1): _extra(tmp_path / "t1.json", [90.0, 80.0, 70.0], [80.0, 80.0, 80.0])},
        {"wscat": "WSCAT", "trades": "TRADES"}, "Digits")
    second = robustness.rows(
        {("wscat", 1): _extra(tmp_path / "o.json", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])},
        {"wscat": "WSCAT"}, "Other")
    robustness.robustness_figure(first + second, tmp_path / "curves",
                                 {"Digits": (0.1, 10), "Other": (0.2, 20)})
    assert saved.table == first + second
    assert saved.line(0, "WSCAT") == (EPS, [40.0, 30.0, 3.0])
    assert saved.line(0, "TRADES") == (EPS, [90.0, 80.0, 70.0])
    assert saved.line(1, "WSCAT") == ([5.0, 10.0, 20.0], [32.0, 31.0, 30.0])
    assert saved.line(2, "WSCAT") == (EPS, [0.0, 0.0, 0.0])
    assert [ax["vertical"] for ax in saved.axes] == [[0.1], [10.0], [0.2], [20.0]]
    assert saved.axes[0]["ticks"] == ["0", "0.1", "51/255"]  # 0.2 = 51/255, 0.1 = 25.5/255
    assert saved.axes[1]["ticks"] == ["5", "10", "20"]
    assert "line: mean over seeds 1, 2, 3, dots: each seed" in saved.title
    seed_dots = [(x, y) for name, x, y in saved.axes[0]["lines"] if name.startswith("_")]
    assert sorted(zip(*seed_dots[0])) == sorted(zip(EPS * 3, [60.0, 40.0, 5.0, 50.0, 30.0, 3.0,
                                                            10.0, 20.0, 1.0]))


def test_the_tier_figure_reads_every_performance_runs_extra_file(
        params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """digits-table2: 9 methods x seeds 1-3, each an extra file whose eps-0 accuracy is its
    seed; the budget is digits' eps with evaluation.pgd_steps (set here to 30); a second tier
    dataset (the same runs under another name) adds its own rows."""
    params["evaluation"]["pgd_steps"] = 30
    first = params["paper"][TIER]["datasets"][0]
    params["paper"][TIER]["datasets"] = [first, {**first, "name": "Digits bis"}]
    runs = paper.experiment_runs(params, "digits-table2")
    assert len(runs) == 27
    for run in runs:
        _extra(Path(run.extra(str(tmp_path))), [float(run.seed), 2.0, 1.0], [3.0, 2.0, 1.0])
    handed = {}
    monkeypatch.setattr(robustness, "robustness_figure",
                        lambda plotted, prefix, budgets: handed.update(plotted=plotted,
                                                                       budgets=budgets))
    robustness.tier_figure(params, TIER, str(tmp_path), tmp_path / "curves")
    budget = (params["datasets"]["digits"]["eps"], 30)
    assert handed["budgets"] == {"Digits": budget, "Digits bis": budget}
    for name in ("Digits", "Digits bis"):
        eps0 = {(row["method"], row["seed"]): row["accuracy"] for row in handed["plotted"]
                if row["dataset"] == name and row["panel"] == "eps" and row["x"] == 0.0}
        assert eps0 == {(method, seed): float(seed) for seed in (1, 2, 3) for method in (
            "Standard", "TRADES", "RLFAT", "DMAT", "WSCAT-sup", "MT", "RST", "PUAT", "WSCAT")}
    assert len(handed["plotted"]) == 2 * 27 * 6
