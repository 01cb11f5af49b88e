"""The figures read as drawn (wscat/report/figures.py, robustness_figure.py): a title never
over a panel's title, a legend never over Fig-beta's lines, whole markers at its axes' ends,
"seed 1" rather than "seeds 1", every cosine inside Fig-similarity's bins (they began at -0.2:
lower ones were left out unseen), Fig-feature's colours named per class, and each method of
the robustness curves a marker of its own (Standard and MT at 0 were one line). Each figure is
drawn on a Agg canvas, and what is checked is where matplotlib put things."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tests.unit.test_figure_mutations import TIER, loaded  # noqa: F401 (the params fixture's)
from wscat.report import figures, paper
from wscat.report import robustness_figure as robustness


@pytest.fixture
def params(loaded: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    """params.yaml, the digits tier's first dataset only."""
    params = copy.deepcopy(loaded)
    params["paper"][TIER]["datasets"] = params["paper"][TIER]["datasets"][:1]
    return params


class Drawn:
    """The figure a stand-in `save` was handed, drawn (positions exist only then) and kept."""

    fig: plt.Figure

    def __call__(self, fig: plt.Figure, prefix: Path, table: Any = None, files: Any = None
                 ) -> None:
        fig.canvas.draw()
        self.fig = fig

    def suptitle_clear_of_panel_titles(self) -> bool:
        box = self.fig._suptitle.get_window_extent()
        return all(box.y0 >= ax.title.get_window_extent().y1 for ax in self.fig.axes
                   if ax.get_title())


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Drawn:
    stand_in = Drawn()
    monkeypatch.setattr(figures, "save", stand_in)
    yield stand_in
    plt.close("all")


def write_json(path: str | Path, data: Any) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data))


@pytest.mark.parametrize("seeds, label", [([1], "seed 1"), ([1, 2, 3], "seeds 1, 2, 3")])
def test_one_seed_is_a_seed(seeds: list[int], label: str) -> None:
    assert figures.seeds_label(seeds) == label


def test_beta_legend_beside_the_lines_whole_end_markers_and_the_seed(
        params: dict[str, Any], tmp_path: Path, drawn: Drawn) -> None:
    """Natural near the top at every beta: the legend's usual corner was on it."""
    spec = params["paper"][TIER]
    spec["beta"]["values"], spec["beta"]["seeds"] = [0.0, 0.2, 1.0], [1]
    entry = spec["datasets"][0]
    for beta, method in paper.beta_points(params, TIER, entry):
        run = paper.Run("digits", "cnn", method, 1)
        write_json(run.metrics(str(tmp_path)), {"accuracy": {"Natural": 95.0, "PGD": 70.0}})
        write_json(run.validation(str(tmp_path)), {"Natural": 90.0, "PGD": 60.0, "HM": 72.0})
    figures.beta_figure(params, TIER, str(tmp_path), tmp_path / "Fig-beta")
    (ax,) = drawn.fig.axes
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    assert [line.get_clip_on() for line in ax.get_lines() if line.get_marker() == "o"] == [
        False, False, False, False]  # Natural, PGD, HM on test; HM on validation
    title = drawn.fig._suptitle.get_text()
    assert "(seed 1)" in title and "HM: the harmonic mean of Natural and PGD" in title
    assert drawn.suptitle_clear_of_panel_titles()


def test_unlabel_title_clear_of_the_panel_names_the_mean_and_seed(
        params: dict[str, Any], tmp_path: Path, drawn: Drawn) -> None:
    spec = params["paper"][TIER]
    spec["unlabelled"]["fractions"], spec["unlabelled"]["seeds"] = [0.3, 1.0], [1]
    for fraction, dataset in paper.unlabelled_points(params, TIER, spec["datasets"][0]):
        run = paper.Run(dataset, "cnn", "wscat", 1)
        write_json(run.metrics(str(tmp_path)), {"accuracy": {"Mean": 60.0 + 10 * fraction}})
        Path(run.split(str(tmp_path))).parent.mkdir(parents=True, exist_ok=True)
        np.savez(run.split(str(tmp_path)), dataset=np.array(dataset), seed=np.array(1),
                 labelled=np.arange(5),
                 unlabelled=np.arange(10, 10 + int(100 * fraction)), validation=np.arange(5, 8),
                 test=np.arange(8, 10))
    figures.unlabel_figure(params, TIER, str(tmp_path), tmp_path / "Fig-unlabel")
    (ax,) = drawn.fig.axes
    assert ax.get_ylabel() == "Mean (%)"
    title = drawn.fig._suptitle.get_text()
    assert "(WSCAT, seed 1)" in title and "harmonic mean of Natural, FGSM, PGD, CW and AA" in title
    assert drawn.suptitle_clear_of_panel_titles()


def test_similarity_bins_hold_every_cosine_and_the_title_clears_the_panel(
        params: dict[str, Any], tmp_path: Path, drawn: Drawn) -> None:
    """A cosine of -0.6 (a method whose AE turns the embedding around) was outside the fixed
    bins from -0.2; now the bins start at or below the smallest cosine."""
    cos = np.array([[0.9, 0.95, 1.0], [-0.6, 0.5, 0.99], [0.97, 0.98, 0.99]])
    path = Path(paper.analysis_file(TIER, "Fig-similarity", "digits", str(tmp_path)))
    path.parent.mkdir(parents=True)
    np.savez(path, methods=np.array(["trades", "rlfat", "wscat"]), cos=cos)
    figures.similarity_figure(params, TIER, str(tmp_path), tmp_path / "Fig-similarity")
    (ax,) = drawn.fig.axes
    for bars in ax.containers:  # each method's bars: every cosine counted
        edges = sorted(bar.get_x() for bar in bars)
        assert edges[0] <= cos.min() and edges[-1] + bars[-1].get_width() >= cos.max() - 1e-9
    assert drawn.suptitle_clear_of_panel_titles()


@pytest.mark.parametrize("labels, legend", [(np.arange(10) % 4, True), (np.arange(10), True),
                                            (np.arange(12), False)])
def test_feature_names_each_class_colour(params: dict[str, Any], tmp_path: Path,
                                         drawn: Drawn, labels: np.ndarray, legend: bool) -> None:
    """Up to 10 classes: a legend entry per class present; more: a colour bar."""
    methods = params["paper"][TIER]["feature"]["methods"]
    path = Path(paper.analysis_file(TIER, "Fig-feature", "digits", str(tmp_path)))
    path.parent.mkdir(parents=True)
    n = len(labels)
    np.savez(path, methods=np.array(methods), index=np.arange(n), label=labels,
             tsne=np.random.default_rng(0).normal(size=(len(methods), n, 2)))
    figures.feature_figure(params, TIER, str(tmp_path), tmp_path / "Fig-feature")
    panels = drawn.fig.axes[:len(methods)]
    if legend:
        found = panels[-1].get_legend()
        assert [t.get_text() for t in found.get_texts()] == [
            str(c) for c in sorted(set(labels.tolist()))]
        assert found.get_title().get_text() == "class"
    else:
        assert len(drawn.fig.axes) == len(methods) + 1  # the colour bar's axes
        assert drawn.fig.axes[-1].get_ylabel() == "class"
    assert drawn.suptitle_clear_of_panel_titles()


def test_robustness_curves_give_each_method_its_own_marker(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Standard and MT with the same numbers: two hollow markers, the later one smaller."""
    drawn = Drawn()
    monkeypatch.setattr(figures, "save", drawn)
    rows = [{"dataset": "D", "method": method, "seed": 1, "panel": panel, "x": x,
             "accuracy": 0.0}
            for method in ("Standard", "MT", "WSCAT")
            for panel, xs in (("eps", [0.0, 0.031373]), ("steps", [10, 20])) for x in xs]
    robustness.robustness_figure(rows, tmp_path / "r", {"D": (0.031373, 20)})
    for ax in drawn.fig.axes:
        means = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
        assert [line.get_label() for line in means] == ["Standard", "MT", "WSCAT"]
        assert len({line.get_marker() for line in means}) == 3
        assert all(line.get_markerfacecolor() == "none" for line in means)
        sizes = [line.get_markersize() for line in means]
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 3
    plt.close("all")
