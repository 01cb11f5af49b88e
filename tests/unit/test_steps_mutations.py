"""Mutation tests for wscat/steps/*.py (split, pseudo, train, validate, evaluate, table, paper,
analyse; add_dataset has its own files): each test kills hand-made mutants that went through the
unit tests importing the step, with expectations from the steps' docstrings, docs/pipeline.md and
docs/workflow.md, and wscat.paths' patterns, never from the function under test. The long parts
(training, attacks, t-SNE) are stood in for: what is checked is what a step passes to them, the
refusals before them and what it writes.

What is checked, and from which fact:
- paper: a results file is one of the paper's inputs only under its own pattern (a folder whose
  name merely ends like `metrics`, a seed that is not a number, are not); a validation file names
  its run; a missing input names the Snakemake target under results/ and the step that writes it
  (`wscat evaluate --part extra`, `wscat analyse`, `wscat train` for a training log); `require`
  checks every file; a table CSV's mean of 0 is a number a table holds, an empty mean, a percentage
  over 100 (Mean-paper too) and negative seconds are not; the metrics a paper table reads are
  checked, an extra file's settings included, a hand-written file (no manifest) is not refused for
  what it lacks; `run_figure` dispatches each figure to its own drawing (stood in for: no
  matplotlib) and refuses an unknown one; `run_table` checks its metrics and writes the LaTeX to
  --tex, the CSV to --csv; index.md's links are relative to its folder and its rebuild line names
  index.md; `run_index` refuses while an output is missing; a run's curves are titled by its
  folder, an unwritable --out refused before the log is read; a companion's --label must be the
  table's, and its table's numbers are checked. (A validation file's checks, `check_validation`,
  are test_fingerprint_gaps'.)
- table: an unknown experiment, one with `table: false` and metrics of another model (its
  check_training) are refused; the paired note is said only when the reference is not among the
  methods; the reference, the adversarial methods (not Standard, Mean Teacher: report.names) and
  DMAT's footnote (only without generated data, the dataset's own override counted) reach
  write_table; check_training refuses a file of another dataset/model, another run (the seed alone
  differing), a method the params lack, an unfinished training's checkpoint, another training (the
  forcerun target is the checkpoint), other evaluation settings, an extra part's and a `--part all`
  file's other extra settings (the target is the file's own path), and `unrecorded` lets through
  only what a file does not record.
- evaluate: the option refusals before any work (--part, --core, --core-wait); a core file of
  another run, or whose numbers the extras' checks would misread (a missing paper column, no
  Square, Square alone, a clean accuracy or accuracy outside [0, 100], warnings not text, a missing
  AA key: ValueError, not KeyError); the weights digest (16 hex digits) sees shapes and every byte;
  an extra part is bound to its core on training and on evaluation settings, also when it waited
  for it, and a waited-for file is checked for its kind; the evaluated images are the first n of
  the stratified order; the run's manifest: `part` only for core/extra, the test set's name, the
  checkpoint's epoch and `which`, test_set_size the whole test split, the provenance,
  extra_settings for all and extra, no shards left, a short NRF warned of by `--part all`;
  check_which and check_trained_by; each part's attacks (`_suite`).
- validate: the validation images (not the test set), validation.pgd_steps (not evaluation's), eps
  and step size in their places, the run's seed, finite=True; the manifest's training and
  validation fingerprints, the checkpoint's epoch, set "validation", n; an unwritable --out before
  loading; check_run, check_which, check_trained_by; a split that does not fit the dataset (indices
  past its images, validation images that are test images) refused as train, evaluate and
  pseudo-label refuse it (check_split_fits).
- pseudo: refusals (no unlabelled images, a split larger than the dataset, another labeler's or
  training's checkpoint, another kind of file given as --split); per-class accuracy over every
  class present; the npz's labeler, labeler_training, seed and model; n is the unlabelled count;
  both outputs guarded against the inputs and checked writable before labelling.
- split: the seed, test_fraction, unlabelled_fraction and train_size (a dataset with an official
  test set) reach make_split; an unwritable --out, and an --out that is the dataset's own file, are
  refused before the dataset is read.
- train: --pseudo required exactly when the method trains on pseudo-labels (a wrong kind of file
  there named as the labeler's pseudo-labels); an unwritable --out-dir; --labeler-checkpoint
  refused for a method without generated images, naming the methods that have them; a split larger
  than the dataset; the pseudo-labels' labeler training is the labeler's; the "trains again from
  the start" line only for a finished run; selection cw/hm warned about the CW/PGD validation
  attack; the checkpoint's meta carries the training fingerprint; --out-dir holding another run
  refused; a paper-size model (WRN-34-10) on a CPU only with --device cpu; DMAT's labeler checked
  as generated_labeler's run and training, its predictions the generated images' labels.
- analyse: unknown figure and a tier without the section refused; the entry of the dataset asked;
  similarity's first n test images, each method's beta and blocks (RLFAT: 2 unless set), one seeded
  generator per method; feature's pool of labelled and unlabelled images, sorted, its t-SNE seed; a
  checkpoint of another run refused; the manifest's checkpoints; an unwritable --out refused before
  any checkpoint is read.
"""
from __future__ import annotations

import copy
import json
import os
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.helpers.tiny import tiny_params
from wscat import paths
from wscat.config import ConfigError, training_for, validate_params
from wscat.workflow import (evaluation_fingerprint, extra_fingerprint, training_fingerprint,
                            validation_fingerprint)

CPU = torch.device("cpu")
CORE = {"Natural": 90.0, "FGSM": 50.0, "PGD": 40.0, "CW": 41.0, "AA": 30.0, "Mean": 45.0}


@pytest.fixture(scope="module")
def params() -> dict[str, Any]:
    return validate_params(tiny_params(epochs=1))


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _metrics(params: dict[str, Any], run: paths.Run, *, part: str | None = None,
             manifest: bool = True, **changes: Any) -> dict[str, Any]:
    """A metrics file of `run` as `wscat evaluate` records it (core, extra or all)."""
    accuracy = {"AA-paper": 29.0, "NRF": 35.0} if part == "extra" else dict(CORE)
    if part == "all":
        accuracy.update({"AA-paper": 29.0, "NRF": 35.0})
    data = {"dataset": run.dataset, "model": run.model, "method": run.method, "seed": run.seed,
            "accuracy": accuracy}
    if part == "extra":
        data["part"] = "extra"
    if manifest:
        data["manifest"] = {
            "training": {"fingerprint": training_fingerprint(params, run.dataset, run.model,
                                                             run.method)},
            "evaluation_settings": evaluation_fingerprint(params, run.dataset)}
        if part is not None:
            data["manifest"]["extra_settings"] = extra_fingerprint(params, run.dataset)
        data["manifest"].update(changes)
    return data


# --- paper.py: which results file is which, and what makes it ----------------------------------

def test_made_by_takes_only_the_patterns_own_paths() -> None:
    from wscat.steps.paper import made_by

    found = made_by("copy/metrics/digits/cnn/standard/seed1.json")
    assert found is not None and found[1] == "wscat evaluate --part core"
    assert made_by("copy/xmetrics/digits/cnn/standard/seed1.json") is None  # another folder
    assert made_by("copy/metrics/digits/cnn/standard/seedx.json") is None  # no seed number
    extra = made_by("results/metrics/digits/cnn/standard/seed1-extra.json")
    assert extra is not None and extra[1] == "wscat evaluate --part extra"


def test_run_of_names_a_validation_files_run() -> None:
    from wscat.steps.paper import run_of

    assert run_of("r/validation/digits/cnn/wscat/seed2.json") == paths.Run(
        "digits", "cnn", "wscat", 2)
    assert run_of("r/metrics/digits/cnn/mt/seed3-extra.json") == paths.Run("digits", "cnn", "mt", 3)
    assert run_of("r/splits/digits/seed1.npz") is None


def test_missing_input_names_the_target_under_results_and_its_step() -> None:
    from wscat.steps.paper import missing_input

    line = missing_input("copy/metrics/digits/cnn/standard/seed1-extra.json")
    assert "`snakemake -- results/metrics/digits/cnn/standard/seed1-extra.json`" in line
    assert "`wscat evaluate --part extra`" in line
    line = missing_input("copy/analysis/t/Fig-feature/digits.npz")
    assert "results/analysis/t/Fig-feature/digits.npz" in line and "`wscat analyse`" in line
    assert "`wscat train`" in missing_input("copy/models/digits/cnn/mt/seed1/train_log.csv")


def test_require_checks_every_file(tmp_path: Path) -> None:
    from wscat.steps.paper import require

    here = _write(tmp_path / "a.json", {})
    with pytest.raises(ValueError, match="splits/digits/seed1.npz: not found"):
        require([str(tmp_path / "results/splits/digits/seed1.npz"), str(here)])


def _table_csv(tmp_path: Path, metric: str, mean: str, std: str = "1.0") -> Path:
    path = tmp_path / "t.csv"
    path.write_text(f"metric,mean,std\n{metric},{mean},{std}\n")
    return path


@pytest.mark.parametrize("metric, mean, std, refused", [
    ("PGD", "0.0", "", False),            # 0 % is an accuracy (PGD on Standard)
    ("Natural", "0", "0", False),
    ("Natural", "", "", True),            # an empty mean is refused, an empty std is not
    ("Natural", "100.5", "1", True),      # a percentage
    ("Mean-paper", "150", "1", True),     # the paper's Mean is a percentage too
    ("time", "-1", "", True),             # seconds: a number >= 0
])
def test_check_numbers_per_cell(tmp_path: Path, metric: str, mean: str, std: str,
                                refused: bool) -> None:
    from wscat.steps.paper import check_numbers

    path = _table_csv(tmp_path, metric, mean, std)
    if refused:
        with pytest.raises(ValueError, match="line 2: mean is"):
            check_numbers(path)
    else:
        check_numbers(path)


def _digits_run(method: str = "standard", seed: int = 1) -> paths.Run:
    return paths.Run("digits", "cnn", method, seed)


def test_check_metrics_checks_extra_files_and_lets_hand_written_ones_through(
        params: dict[str, Any], tmp_path: Path) -> None:
    from wscat.steps.paper import check_metrics

    run = _digits_run()
    root = str(tmp_path / "r")
    core = _write(Path(run.metrics(root)), _metrics(params, run))
    extra = _write(Path(run.extra(root)), _metrics(params, run, part="extra"))
    check_metrics(params, [str(core), str(extra)])
    _write(extra, _metrics(params, run, part="extra", extra_settings="e" * 16))
    with pytest.raises(ValueError, match="extra settings eeee"):
        check_metrics(params, [str(core), str(extra)])
    _write(core, _metrics(params, run, manifest=False))  # by hand: no manifest
    check_metrics(params, [str(core)])


@pytest.fixture(scope="module")
def tier_params(params: dict[str, Any]) -> dict[str, Any]:
    """The tiny params with a paper tier `t` on digits (as test_curves_analyse_input's)."""
    given = copy.deepcopy(params)
    given["paper"] = {"t": {
        "datasets": [{"dataset": "digits", "name": "Digits",
                      "performance": {"experiment": "digits", "label": "Tab-RQ1-digits"}}],
        "model_names": {"cnn": "CNN"},
        "similarity": {"methods": ["trades", "rlfat", "wscat"], "model": "wscat", "seed": 1,
                       "n_examples": 6},
        "feature": {"methods": ["wscat", "standard"], "seed": 3, "n_examples": 20}}}
    return validate_params(given)


def _figures(monkeypatch: pytest.MonkeyPatch, called: list[str]) -> types.ModuleType:
    """A stand-in for wscat.report.figures (no matplotlib): each drawing records its name."""
    import wscat.report

    fake = types.ModuleType("wscat.report.figures")
    for name in ("beta_figure", "unlabel_figure", "similarity_figure", "feature_figure"):
        setattr(fake, name, lambda *a, name=name: called.append(name))
    fake._load = lambda path, run: {}  # check_validation reads no file here
    fake.curves = lambda log, out, title: called.append(title)
    fake.curves_files = lambda out: {ext: Path(f"{out}.{ext}") for ext in ("pdf", "png")}
    fake.LOG_HINT = "pass a run's train_log.csv"  # run_curves' line for a missing log
    monkeypatch.setitem(sys.modules, "wscat.report.figures", fake)
    monkeypatch.setattr(wscat.report, "figures", fake, raising=False)
    return fake


@pytest.mark.parametrize("figure, drawn", [
    ("Fig-beta", "beta_figure"), ("Fig-unlabel", "unlabel_figure"),
    ("Fig-similarity", "similarity_figure"), ("Fig-feature", "feature_figure")])
def test_run_figure_draws_the_figure_asked(tier_params: dict[str, Any], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, figure: str,
                                           drawn: str) -> None:
    from wscat.report import paper as report_paper
    from wscat.steps.paper import run_figure

    called: list[str] = []
    _figures(monkeypatch, called)
    monkeypatch.setattr(report_paper, "figure_inputs", lambda *a: [])
    run_figure(tier_params, tier="t", figure=figure, results="r", out=tmp_path / "f")
    assert called == [drawn]
    with pytest.raises(ValueError, match="unknown figure 'Fig-x'"):
        run_figure(tier_params, tier="t", figure="Fig-x", results="r", out=tmp_path / "f")
    assert called == [drawn]


def test_run_table_checks_its_metrics_and_writes_each_file(
        tier_params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.report import paper as report_paper, paper_tables
    from wscat.steps.paper import run_table

    run = _digits_run()
    core = _write(Path(run.metrics(str(tmp_path / "r"))), _metrics(tier_params, run))
    monkeypatch.setattr(report_paper, "table_inputs", lambda *a: [str(core)])
    monkeypatch.setattr(paper_tables, "build", lambda *a: ("the tex", "the csv"))
    kw = dict(tier="t", label="Tab-RQ1-digits", results=str(tmp_path / "r"),
              tex=tmp_path / "t.tex", csv=tmp_path / "t.csv")
    run_table(tier_params, **kw)
    assert ((tmp_path / "t.tex").read_text(), (tmp_path / "t.csv").read_text()) == (
        "the tex", "the csv")
    _write(core, _metrics(tier_params, run, evaluation_settings="s" * 16))
    with pytest.raises(ValueError, match="other evaluation settings"):
        run_table(tier_params, **kw)


def test_index_links_relative_to_its_folder(tier_params: dict[str, Any]) -> None:
    from wscat.steps.paper import index

    text = index(tier_params, "t", "res")
    # Snakemake's target, whatever the folder was typed as (an absolute one was no target).
    assert "Rebuild: `snakemake --cores 2 -- results/paper/t/index.md`" in text
    assert index(tier_params, "t", os.path.abspath("res")).splitlines()[2] == text.splitlines()[2]
    links = re.findall(r"^- \[(.+)\]\((.+)\)$", text, flags=re.M)
    assert links
    for shown, link in links:  # each link, from res/paper/t/, is the file its text names
        assert os.path.normpath(os.path.join("res/paper/t", link)) == os.path.join("res", shown)


def test_run_index_refuses_while_an_output_is_missing(tier_params: dict[str, Any],
                                                      tmp_path: Path) -> None:
    from wscat.steps.paper import run_index

    out = tmp_path / "index.md"
    with pytest.raises(ValueError, match="not found; make it first"):
        run_index(tier_params, tier="t", results=str(tmp_path / "r"), out=out)
    assert not out.exists()


def test_curves_are_titled_by_the_runs_folder(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps.paper import run_curves

    titles: list[str] = []
    _figures(monkeypatch, titles)
    log = _write(tmp_path / "seed1" / "train_log.csv", "")
    run_curves(train_log=log, out=tmp_path / "c")
    run_curves(train_log=log, out=tmp_path / "c", title="mine")
    assert titles == [str(tmp_path / "seed1"), "mine"]
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="is a file, not a folder"):  # before the log is read
        run_curves(train_log=log, out=tmp_path / "file" / "c")
    assert len(titles) == 2


def test_a_companion_is_of_the_table_its_label_names(tmp_path: Path) -> None:
    from wscat.report.paper import reported
    from wscat.steps.paper import run_compare

    row = reported()[0]  # a cell the paper reports: join finds it
    path = tmp_path / "t.csv"
    keys = ("table", "dataset", "model", "method", "metric")
    path.write_text(",".join((*keys, "mean", "std")) + "\n"
                    + ",".join((*(row[k] for k in keys), "50.0", "1.0")) + "\n")
    with pytest.raises(ValueError, match="--label Tab-other: .* holds table"):
        run_compare(label="Tab-other", table_csv=path, paper_cells=None, tex=tmp_path / "c.tex",
                    csv=tmp_path / "c.csv")
    path.write_text(",".join((*keys, "mean", "std")) + "\n"
                    + ",".join((*(row[k] for k in keys), "150.0", "1.0")) + "\n")
    with pytest.raises(ValueError, match="mean is '150.0'"):
        run_compare(label=row["table"], table_csv=path, paper_cells=None,
                    tex=tmp_path / "c.tex", csv=tmp_path / "c.csv")


# --- table.py: the experiment's table and the checks on what it reads ---------------------------

def test_table_refuses_an_unknown_experiment_and_one_without_a_table(
        params: dict[str, Any], tmp_path: Path) -> None:
    from wscat.steps import table

    outs = dict(metrics=[], tex=tmp_path / "t.tex", csv=tmp_path / "t.csv",
                summary=tmp_path / "t.json")
    with pytest.raises(ConfigError, match="unknown experiment 'nope'"):
        table.run(params, experiment="nope", **outs)
    no_table = copy.deepcopy(params)
    no_table["experiments"]["digits"]["table"] = False
    with pytest.raises(ConfigError, match="has no table of its own"):
        table.run(no_table, experiment="digits", **outs)
    assert not list(tmp_path.iterdir())
    other = _write(tmp_path / "o.json", {**_metrics(params, _digits_run()), "model": "resnet18"})
    with pytest.raises(ValueError, match="experiment 'digits' is on digits/cnn"):
        table.run(params, experiment="digits", **{**outs, "metrics": [other]})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json"]


@pytest.mark.parametrize("reference, said", [("trades", False), ("puat", True)])
def test_table_passes_its_reference_methods_and_notes(
        params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], reference: str, said: bool) -> None:
    from wscat.steps import table

    given = copy.deepcopy(params)
    given["experiments"]["digits"].update(reference=reference,
                                          methods=["standard", "mt", "trades", "dmat"])
    got = {}
    monkeypatch.setattr(table, "write_table", lambda **kw: got.update(kw))
    monkeypatch.setattr(table, "check_training", lambda *a, **k: None)
    table.run(given, experiment="digits", metrics=[], tex=tmp_path / "t.tex",
              csv=tmp_path / "t.csv", summary=tmp_path / "t.json",
              paired_csv=tmp_path / "p.csv")
    assert ("no paired comparison" in capsys.readouterr().out) is said
    assert got["reference"] == reference
    assert set(got["adversarial"]) == {"trades", "dmat"}  # not Standard, Mean Teacher
    assert len(got["notes"]) == 1 and got["notes"][0].startswith("DMAT")


def test_table_notes_only_without_generated_data(params: dict[str, Any]) -> None:
    from wscat.steps.table import table_notes

    given = copy.deepcopy(params)
    assert [n.split(":")[0] for n in table_notes(given, "digits", ["trades", "dmat"])] == ["DMAT"]
    given["methods"]["dmat"]["per_dataset"] = {"digits": {"generated": "gen.npz"}}
    assert table_notes(given, "digits", ["trades", "dmat"]) == []  # digits' own knob counts
    given["methods"]["dmat"]["generated"] = "gen.npz"
    assert table_notes(given, "digits", ["trades", "dmat"]) == []


def test_check_run_file_compares_the_seed_too() -> None:
    from wscat.steps.table import check_run_file

    run = _digits_run("wscat", 2)
    check_run_file("f.json", {"dataset": "digits", "model": "cnn", "method": "wscat", "seed": 2},
                   run)
    with pytest.raises(ValueError, match="holds the numbers of wscat seed 1 on digits/cnn"):
        check_run_file("f.json", {"dataset": "digits", "model": "cnn", "method": "wscat",
                                  "seed": 1}, run)


def _check(params: dict[str, Any], files: list[Path], **kw: Any) -> None:
    from wscat.steps.table import check_training

    check_training(params, files, **kw)


def test_check_training_refusals(params: dict[str, Any], tmp_path: Path) -> None:
    run = _digits_run()
    core = _write(tmp_path / "m.json", _metrics(params, run))
    _check(params, [core], experiment="digits")
    other_model = _write(tmp_path / "o.json", {**_metrics(params, run), "model": "resnet18"})
    with pytest.raises(ValueError, match="experiment 'digits' is on digits/cnn"):
        _check(params, [other_model], experiment="digits")
    with pytest.raises(ValueError, match="holds the numbers of standard seed 1"):
        _check(params, [core], runs={str(core): _digits_run("standard", 2)})
    unknown = _write(tmp_path / "u.json", {**_metrics(params, run), "method": "mine"})
    with pytest.raises(ValueError, match="method 'mine', which the params do not configure"):
        _check(params, [unknown])
    resumed = _write(tmp_path / "r.json", _metrics(params, run, checkpoint={
        "path": "results/models/digits/cnn/standard/seed1/resume/last.pt"}))
    with pytest.raises(ValueError, match="unfinished training"):
        _check(params, [resumed])


def test_check_training_stale_files_and_what_to_rerun(params: dict[str, Any],
                                                      tmp_path: Path) -> None:
    run = _digits_run()
    trained = _write(tmp_path / "t.json", _metrics(params, run, training={"fingerprint": "t" * 16}))
    with pytest.raises(ValueError, match=r"another training .* snakemake --forcerun "
                                         r"results/models/digits/cnn/standard/seed1/best.pt --"):
        _check(params, [trained])
    bare = _write(tmp_path / "b.json", _metrics(params, run, manifest=False))
    with pytest.raises(ValueError, match="training none recorded"):
        _check(params, [bare])  # recorded nothing, and not told to let that through
    _check(params, [bare], unrecorded=True)
    settings = _write(tmp_path / "s.json", _metrics(params, run, evaluation_settings="s" * 16))
    with pytest.raises(ValueError, match="other evaluation settings"):
        _check(params, [settings])


def test_check_training_extra_settings_of_both_kinds_of_file(params: dict[str, Any],
                                                            tmp_path: Path) -> None:
    run = _digits_run()
    both = _write(tmp_path / "a.json", _metrics(params, run, part="all"))
    _check(params, [both])
    _write(both, _metrics(params, run, part="all", extra_settings="x" * 16))
    with pytest.raises(ValueError, match=r"extra settings xxxx.*--part all.*--forcerun "
                                         r"results/metrics/digits/cnn/standard/seed1.json --"):
        _check(params, [both])
    core = _write(tmp_path / "m.json", _metrics(params, run))
    extra = _write(tmp_path / "e.json", _metrics(params, run, part="extra"))
    unrecorded = _metrics(params, run, part="extra")
    unrecorded["manifest"].pop("extra_settings")
    _write(extra, unrecorded)
    _check(params, [core, extra], unrecorded=True)
    with pytest.raises(ValueError, match="extra settings none recorded"):
        _check(params, [core, extra])


# --- evaluate.py: refusals, the core file the extras read, the manifest -------------------------

@pytest.mark.parametrize("kw, needle", [
    ({"part": "some"}, "unknown part 'some'"),
    ({"part": "extra"}, "--part extra reads the core metrics"),
    ({"part": "core", "core_path": Path("c.json")}, "--core is read by --part extra only"),
    ({"part": "all", "core_wait": 5.0}, "--core-wait is read by --part extra only"),
    ({"part": "extra", "core_path": Path("c.json"), "core_wait": -1.0}, "--core-wait -1"),
])
def test_evaluate_option_refusals(params: dict[str, Any], tmp_path: Path, kw: dict[str, Any],
                                  needle: str) -> None:
    from wscat.steps import evaluate

    with pytest.raises(ValueError, match=re.escape(needle)):
        evaluate.run(params, dataset="digits", model="cnn", method="standard", seed=1,
                     split_path=tmp_path / "s.npz", checkpoint=tmp_path / "b.pt",
                     out=tmp_path / "m.json", device=CPU, **kw)
    assert not list(tmp_path.iterdir())


def _core(**aa: Any) -> dict[str, Any]:
    after = aa.pop("after", {"apgd-ce": 31.0, "square": 30.0})
    data = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1,
            "accuracy": dict(CORE),
            "manifest": {"attacks": {"AA": {"clean_accuracy": 90.0,
                                            "robust_accuracy_after": after, **aa}}}}
    return data


RUN = ("digits", "cnn", "standard", 1)


@pytest.mark.parametrize("change, needle", [
    (lambda d: d.update(seed=2), "holds standard seed 2 on digits/cnn, not standard seed 1"),
    (lambda d: d["accuracy"].pop("AA"), "accuracy.AA is missing"),
    (lambda d: d["accuracy"].update(FGSM=150.0), "accuracy.FGSM is 150.0"),
    (lambda d: d["manifest"]["attacks"]["AA"].update(clean_accuracy=101.0),
     "AA.clean_accuracy is 101.0"),
    (lambda d: d["manifest"]["attacks"]["AA"].update(
        robust_accuracy_after={"apgd-ce": 31.0, "apgd-t": 30.0}), "after.square is missing"),
    (lambda d: d["manifest"]["attacks"]["AA"].update(robust_accuracy_after={"square": 30.0}),
     "no white-box attack beside square"),
    (lambda d: d.update(autoattack_warnings={"AA": [3]}), "autoattack_warnings is"),
    (lambda d: d["manifest"]["attacks"]["AA"].pop("clean_accuracy"),
     "c.json: not a core metrics file of `wscat evaluate` (no "
     "`manifest.attacks.AA.clean_accuracy`); rerun `wscat evaluate --part core`"),
    (lambda d: d.update(manifest=[1]), "(manifest is a list, not an object); rerun `wscat "
                                       "evaluate --part core`"),
    (lambda d: d.pop("seed"), "(no `seed`); rerun `wscat evaluate --part core`"),
    (lambda d: d["manifest"]["attacks"].update(AA="x"), "(manifest.attacks.AA is text, not an "
                                                        "object)"),
])
def test_the_core_file_the_extras_read_is_checked(tmp_path: Path, change: Any,
                                                  needle: str) -> None:
    from wscat.steps.evaluate import _core_result

    good = _write(tmp_path / "good.json", _core())
    assert _core_result(good, RUN).accuracy == CORE
    data = _core()
    change(data)
    with pytest.raises(ValueError, match=re.escape(needle)):
        _core_result(_write(tmp_path / "c.json", data), RUN)
    with pytest.raises(FileNotFoundError, match=re.escape("`wscat evaluate --part core`")):
        _core_result(tmp_path / "none.json", RUN)


def test_weights_digest_sees_shapes_and_every_byte() -> None:
    from wscat.steps.evaluate import weights_digest

    def module(shape: tuple[int, ...], values: list[float]) -> torch.nn.Module:
        net = torch.nn.Module()
        net.w = torch.nn.Parameter(torch.tensor(values, dtype=torch.float32).reshape(shape))
        return net

    first = weights_digest(module((2, 3), [1, 2, 3, 4, 5, 6]))
    assert re.fullmatch("[0-9a-f]{16}", first)
    assert weights_digest(module((2, 3), [1, 2, 3, 4, 5, 6])) == first
    assert weights_digest(module((3, 2), [1, 2, 3, 4, 5, 6])) != first
    assert weights_digest(module((2, 3), [1, 2, 3, 4, 5, 7])) != first


def test_an_extra_part_is_bound_to_its_core_on_training_and_settings(tmp_path: Path) -> None:
    from wscat.steps.evaluate import _check_bound

    here = {"training": {"fingerprint": "a" * 16, "weights_sha256": "b" * 16},
            "evaluation_settings": "c" * 16}
    core = tmp_path / "c.json"
    _write(core, {"manifest": here})
    _check_bound(core, here)
    _write(core, {"manifest": {**here, "training": {"fingerprint": "a" * 16,
                                                    "weights_sha256": "d" * 16}}})
    with pytest.raises(ValueError, match="another checkpoint or training"):
        _check_bound(core, here)
    _write(core, {"manifest": {**here, "evaluation_settings": "e" * 16}})
    with pytest.raises(ValueError, match="other evaluation settings"):
        _check_bound(core, here)


def test_a_waited_for_core_is_checked_as_one_there_at_the_start(tmp_path: Path) -> None:
    from wscat.steps.evaluate import _waited_core

    fields = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1}
    here = {"training": {"fingerprint": "a" * 16}, "evaluation_settings": "c" * 16}
    core = _write(tmp_path / "c.json", {**_core(), "manifest": {
        **_core()["manifest"], "training": {"fingerprint": "z" * 16},
        "evaluation_settings": "c" * 16}})
    with pytest.raises(ValueError, match="another checkpoint or training"):
        _waited_core(core, 0.0, RUN, here, fields)
    split = tmp_path / "s.npz"
    np.savez(split, labelled=np.arange(3), unlabelled=np.arange(3, 6), validation=np.arange(6, 8),
             test=np.arange(8, 10))
    with pytest.raises(ValueError, match="not a metrics"):
        _waited_core(split, 0.0, RUN, here, fields)
    started = time.monotonic()
    with pytest.raises(ValueError, match="did not appear within 0.05 s"):
        _waited_core(tmp_path / "never.json", 0.05, RUN, here, fields)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("part, called", [("core", "core_suite"), ("extra", "extra_suite"),
                                          ("all", "attack_suite")])
def test_each_part_runs_its_suite(monkeypatch: pytest.MonkeyPatch, part: str,
                                  called: str) -> None:
    from wscat.steps import evaluate

    for name in ("core_suite", "extra_suite", "attack_suite"):
        monkeypatch.setattr(evaluate, name, lambda *a, name=name, **k: name)
    assert evaluate._suite(part, None, None, None, None, {}) == called


@pytest.fixture(scope="module")
def split_file(params: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from wscat.steps import split as split_step

    path = tmp_path_factory.mktemp("split") / "seed1.npz"
    split_step.run(params, "digits", 1, path)
    return path


class _Net(torch.nn.Module):
    """A stand-in model (its weights are only digested)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2))


def _meta(params: dict[str, Any], method: str = "standard", **changes: Any) -> dict[str, Any]:
    return {"dataset": "digits", "method": method, "seed": 1, "epoch": 7, "which": "best",
            "training_fingerprint": training_fingerprint(params, "digits", "cnn", method),
            **changes}


def _evaluate(params: dict[str, Any], split_file: Path, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch, meta: dict[str, Any], **kw: Any
              ) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    from wscat.evaluation import SuiteResult
    from wscat.steps import evaluate

    calls = []

    def suite(part: str, net: Any, x: torch.Tensor, y: torch.Tensor, core: Any,
              common: dict[str, Any]) -> SuiteResult:
        calls.append((part, x, y, core, common))
        return SuiteResult(accuracy={"Natural": 12.3456789}, attacks={}, checks={},
                           autoattack_warnings={}, per_image={"Natural": "10"})

    monkeypatch.setattr(evaluate, "load_model", lambda *a, **k: (_Net(), dict(meta)))
    monkeypatch.setattr(evaluate, "_suite", suite)
    monkeypatch.setattr(evaluate, "configure_backend", lambda *a, **k: None)
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"stand-in")
    result = evaluate.run(params, dataset="digits", model="cnn", method="standard", seed=1,
                          split_path=split_file, checkpoint=checkpoint, out=tmp_path / "m.json",
                          device=CPU, **kw)
    return result, calls


def test_evaluate_writes_its_manifest(params: dict[str, Any], split_file: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data import load_split

    test = load_split(split_file).test
    (tmp_path / "m.json.shards").mkdir()  # a killed run's shards: gone once it is written
    result, calls = _evaluate(params, split_file, tmp_path, monkeypatch, _meta(params))
    assert json.loads((tmp_path / "m.json").read_text()) == result
    assert "part" not in result and result["accuracy"] == {"Natural": 12.3457}
    manifest = result["manifest"]
    assert manifest["test_set"] == "fixed stratified test split"  # digits: no official test set
    assert manifest["evaluation_set"] == (f"class-stratified subset: 40 of {len(test)} test "
                                          "images (seed 0)")
    assert manifest["checkpoint"] == {"path": str(tmp_path / "best.pt"), "epoch": 7, "ema": True,
                                      "which": "best"}
    assert manifest["training"]["fingerprint"] == training_fingerprint(params, "digits", "cnn",
                                                                       "standard")
    assert manifest["evaluation_settings"] == evaluation_fingerprint(params, "digits")
    assert manifest["extra_settings"] == extra_fingerprint(params, "digits")
    assert not (tmp_path / "m.json.shards").exists()
    (part, x, y, _, common), = calls
    assert part == "all" and common["test_set_size"] == len(test) and len(x) == 40
    assert torch.bincount(y, minlength=10).tolist() == [4] * 10  # the stratified order's first 40


def test_evaluate_core_part(params: dict[str, Any], split_file: Path, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = _evaluate(params, split_file, tmp_path, monkeypatch, _meta(params), part="core")
    assert result["part"] == "core" and "extra_settings" not in result["manifest"]



def test_evaluate_all_warns_of_a_short_nrf(params: dict[str, Any], split_file: Path,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    given = copy.deepcopy(params)
    given["evaluation"].update(pgd_steps=100, cw_steps=100)
    given["evaluation"]["nrf"]["steps"] = 1  # 1 x 0.01875 < eps 0.15: NRF alone falls short
    _evaluate(given, split_file, tmp_path, monkeypatch, _meta(given))
    warning = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("wscat evaluate: ")]
    assert len(warning) == 1 and "NRF" in warning[0]


@pytest.mark.parametrize("changes, needle", [({"which": "last"}, "is a run's last.pt"),
                                             ({"training_fingerprint": "f" * 16},
                                              "trained with other params")])
def test_evaluate_refuses_another_checkpoint_or_training(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        _evaluate(params, split_file, tmp_path, monkeypatch, _meta(params, **changes))
    assert not (tmp_path / "m.json").exists()


def test_evaluate_extra_refuses_a_core_of_another_training_before_attacking(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    core = _core()
    core["manifest"].update(training={"fingerprint": "z" * 16, "weights_sha256": "0" * 16},
                            evaluation_settings=evaluation_fingerprint(params, "digits"))
    _write(tmp_path / "c.json", core)
    with pytest.raises(ValueError, match="another checkpoint or training"):
        _evaluate(params, split_file, tmp_path, monkeypatch, _meta(params), part="extra",
                  core_path=tmp_path / "c.json", core_wait=30.0)
    assert "waiting" not in capsys.readouterr().err  # the file is there: no wait
    assert not (tmp_path / "m.json").exists()


# --- validate.py: Fig-beta's numbers on the validation images ----------------------------------

def _validate(params: dict[str, Any], split_file: Path, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch, meta: dict[str, Any]
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    from wscat.steps import validate

    got: dict[str, Any] = {}

    def accuracies(net: Any, x: torch.Tensor, y: torch.Tensor, **kw: Any) -> dict[str, float]:
        got.update(kw, x=x, y=y)
        return {"Natural": 50.0, "PGD": 25.0, "HM": 33.3333}

    monkeypatch.setattr(validate, "load_model", lambda *a, **k: (_Net(), dict(meta)))
    monkeypatch.setattr(validate, "validation_accuracies", accuracies)
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"stand-in")
    result = validate.run(params, dataset="digits", model="cnn", method="standard", seed=1,
                          split_path=split_file, checkpoint=checkpoint, out=tmp_path / "v.json",
                          device=CPU)
    return result, got


def test_validate_measures_the_validation_images_with_validations_pgd(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data import load_dataset, load_split

    given = copy.deepcopy(params)
    given["validation"]["pgd_steps"] = 3  # evaluation.pgd_steps stays 5
    result, got = _validate(given, split_file, tmp_path, monkeypatch, _meta(given))
    validation = load_split(split_file).validation
    labels = load_dataset("digits").labels
    assert torch.equal(got["y"], labels[torch.as_tensor(validation)])
    digits = given["datasets"]["digits"]
    assert (got["eps"], got["step_size"], got["steps"], got["seed"], got["finite"]) == (
        digits["eps"], digits["eval_step_size"], 3, 1, True)
    assert result["set"] == "validation" and result["n"] == len(validation)
    manifest = result["manifest"]
    assert (manifest["pgd_steps"], manifest["eps"], manifest["step_size"], manifest["epoch"]) == (
        3, digits["eps"], digits["eval_step_size"], 7)
    assert manifest["training"] == {"fingerprint": training_fingerprint(given, "digits", "cnn",
                                                                        "standard")}
    assert manifest["validation_settings"] == validation_fingerprint(given, "digits")
    assert json.loads((tmp_path / "v.json").read_text()) == result


@pytest.mark.parametrize("changes, needle", [({"method": "trades"}, "holds trades seed 1"),
                                             ({"which": "last"}, "is a run's last.pt"),
                                             ({"training_fingerprint": "f" * 16},
                                              "trained with other params")])
def test_validate_refuses_another_checkpoint(params: dict[str, Any], split_file: Path,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            changes: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        _validate(params, split_file, tmp_path, monkeypatch, _meta(params, **changes))
    assert not (tmp_path / "v.json").exists()


def test_validate_checks_its_output_before_loading(params: dict[str, Any], split_file: Path,
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.io import OutputError
    from wscat.steps import validate

    def unread(*a: Any, **k: Any) -> None:
        raise AssertionError("the checkpoint was loaded")

    monkeypatch.setattr(validate, "load_model", unread)
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        validate.run(params, dataset="digits", model="cnn", method="standard", seed=1,
                     split_path=split_file, checkpoint=tmp_path / "best.pt",
                     out=tmp_path / "file" / "v.json", device=CPU)


def test_validate_refuses_a_split_that_does_not_fit_the_dataset(
        params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As train, evaluate and pseudo-label refuse it (check_split_fits): indices past the
    dataset's 1797 images, or validation images that are test images, one line naming the file,
    nothing written (it used to end in an IndexError, or measure on test images)."""
    from wscat.data.split import Split, save_split
    from wscat.workflow import split_params

    parts = {"labelled": np.arange(10), "unlabelled": np.arange(10, 20),
             "validation": np.arange(1790, 1800), "test": np.arange(30, 40)}
    overlapping = {**parts, "validation": np.arange(30, 35)}
    for name, kept in (("big", parts), ("overlap", overlapping)):
        save_split(Split("digits", 1, **kept), tmp_path / f"{name}.npz",
                   made_with=split_params(params, "digits"))
    with pytest.raises(ValueError, match="big.npz: `validation` holds indices outside 0..1796"):
        _validate(params, tmp_path / "big.npz", tmp_path, monkeypatch, _meta(params))
    with pytest.raises(ValueError, match="overlap.npz: `validation` shares images with `test`"):
        _validate(params, tmp_path / "overlap.npz", tmp_path, monkeypatch, _meta(params))
    assert not (tmp_path / "v.json").exists()


# --- pseudo.py: the labels of the unlabelled part, and whose they are -------------------------

class _Nines(torch.nn.Module):
    """A labeler that answers class 9 for every image."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.full((len(x),), 9), 10).float() + self.w


def _pseudo(params: dict[str, Any], split: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            meta: dict[str, Any], **kw: Any) -> dict[str, Any]:
    from wscat.steps import pseudo

    monkeypatch.setattr(pseudo, "load_model", lambda *a, **k: (_Nines().eval(), dict(meta)))
    checkpoint = tmp_path / "labeler.pt"
    checkpoint.write_bytes(b"stand-in")
    outs = {"out": tmp_path / "p.npz", "metrics": tmp_path / "p.json", **kw}
    return pseudo.run(params, dataset="digits", seed=1, split_path=split, checkpoint=checkpoint,
                      labeler="mt", device=CPU, **outs)


def test_pseudo_labels_and_their_record(params: dict[str, Any], split_file: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data import load_dataset, load_split

    meta = _meta(params, "mt")
    report = _pseudo(params, split_file, tmp_path, monkeypatch, meta, model="cnn")
    unlabelled = load_split(split_file).unlabelled
    truth = load_dataset("digits").labels[torch.as_tensor(unlabelled)]
    assert report["n"] == len(unlabelled)
    assert report["accuracy"] == pytest.approx(100.0 * float((truth == 9).float().mean()), abs=1e-3)
    present = sorted(str(c) for c in truth.unique().tolist())
    assert report["per_class_accuracy"] == {c: 100.0 if c == "9" else 0.0 for c in present}
    assert "9" in present and report["manifest"]["checkpoint_epoch"] == 7
    with np.load(tmp_path / "p.npz") as saved:
        assert (str(saved["labeler"]), str(saved["labeler_training"]), int(saved["seed"]),
                str(saved["dataset"]), str(saved["model"])) == (
            "mt", meta["training_fingerprint"], 1, "digits", "cnn")
        assert np.array_equal(saved["indices"], unlabelled)
        assert (saved["pseudo_labels"] == 9).all()
    assert json.loads((tmp_path / "p.json").read_text()) == report


def test_pseudo_labels_and_their_record_are_written_together(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The labels and their report belong together (Snakemake's two outputs): a report that
    cannot be written (a full disk) leaves no new labels beside an old report."""
    (tmp_path / "p.npz").write_bytes(b"earlier labels")
    real = Path.write_text

    def full_disk(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        if self.name.startswith(".p.json."):
            raise OSError(28, "No space left on device", str(self))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError):
        _pseudo(params, split_file, tmp_path, monkeypatch, _meta(params, "mt"), model="cnn")
    assert (tmp_path / "p.npz").read_bytes() == b"earlier labels"
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("changes, model, needle", [
    ({"seed": 2}, None, "holds mt seed 2"),
    ({"training_fingerprint": "f" * 16}, "cnn", "trained with other params"),
])
def test_pseudo_refuses_another_labeler(params: dict[str, Any], split_file: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any],
                                        model: str | None, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        _pseudo(params, split_file, tmp_path, monkeypatch, _meta(params, "mt", **changes),
                model=model)
    assert not (tmp_path / "p.npz").exists()


def test_pseudo_refusals_before_labelling(params: dict[str, Any], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data.split import Split, save_split
    from wscat.io import OutputError
    from wscat.steps import split as split_step
    from wscat.workflow import split_params

    all_labelled = copy.deepcopy(params)
    all_labelled["datasets"]["digits"]["labelled"] = None
    split_step.run(all_labelled, "digits", 1, tmp_path / "full.npz")
    with pytest.raises(ValueError, match="has no unlabelled images to label"):
        _pseudo(all_labelled, tmp_path / "full.npz", tmp_path, monkeypatch, _meta(params, "mt"))
    big = Split("digits", 1, labelled=np.arange(10), unlabelled=np.arange(10, 20),
                validation=np.arange(20, 30), test=np.arange(1790, 1800))  # 1797 images
    save_split(big, tmp_path / "big.npz", made_with=split_params(params, "digits"))
    with pytest.raises(ValueError, match="big.npz"):
        _pseudo(params, tmp_path / "big.npz", tmp_path, monkeypatch, _meta(params, "mt"))
    metrics = _write(tmp_path / "m.json", _metrics(params, _digits_run()))
    with pytest.raises(ValueError, match="pass --split"):
        _pseudo(params, metrics, tmp_path, monkeypatch, _meta(params, "mt"))
    with pytest.raises(OutputError, match="--metrics"):
        _pseudo(params, tmp_path / "full.npz", tmp_path, monkeypatch, _meta(params, "mt"),
                metrics=tmp_path / "full.npz")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a file, not a folder"):  # before any labelling
        _pseudo(params, tmp_path / "full.npz", tmp_path, monkeypatch, _meta(params, "mt"),
                metrics=tmp_path / "file" / "p.json")
    assert not (tmp_path / "p.npz").exists() and not (tmp_path / "p.json").exists()


# --- split.py: what reaches make_split, and the output's checks --------------------------------

def test_split_passes_the_datasets_settings(params: dict[str, Any], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from wscat.data import load_dataset, load_split, make_split
    from wscat.steps import split as split_step

    labels = load_dataset("digits").labels
    monkeypatch.setattr(split_step, "load_dataset", lambda *a: SimpleNamespace(
        labels=labels, num_classes=10, train_size=1500))  # an official test set: the last 297
    got: dict[str, Any] = {}

    def make(*args: Any, **kw: Any) -> Any:
        got.update(kw)
        return make_split(*args, **kw)

    monkeypatch.setattr(split_step, "make_split", make)
    given = copy.deepcopy(params)
    given["datasets"]["digits"].update(test_fraction=0.25, unlabelled_fraction=0.5)
    split_step.run(given, "digits", 7, tmp_path / "s.npz")
    assert (got["seed"], got["test_fraction"], got["unlabelled_fraction"], got["train_size"],
            got["labelled"], got["val_fraction"], got["val_max"]) == (7, 0.25, 0.5, 1500, 100,
                                                                     0.2, 2000)
    assert load_split(tmp_path / "s.npz").seed == 7


def test_split_checks_its_output_before_reading(params: dict[str, Any], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.io import OutputError
    from wscat.steps import split as split_step

    def unread(*a: Any) -> None:
        raise AssertionError("the dataset was read")

    monkeypatch.setattr(split_step, "load_dataset", unread)
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a file, not a folder"):
        split_step.run(params, "digits", 1, tmp_path / "file" / "s.npz")
    archive = tmp_path / "digits.npz"
    archive.write_text("")
    monkeypatch.setattr(split_step, "raw_files", lambda *a: [archive])
    with pytest.raises(OutputError, match="is the input dataset digits"):
        split_step.run(params, "digits", 1, archive)


# --- train.py: what a training is given, and what it refuses ---------------------------------

def _train(params: dict[str, Any], split: Path, out_dir: Path, monkeypatch: pytest.MonkeyPatch,
           method: str = "standard", **kw: Any) -> dict[str, Any]:
    from wscat.steps import train as train_step

    got: dict[str, Any] = {}

    def train(run: Any, data: Any, out: Path, *, device: torch.device,
              meta: dict[str, Any]) -> dict[str, Any]:
        got.update(run=run, data=data, out=out, meta=meta)
        return got

    monkeypatch.setattr(train_step, "train", train)
    return train_step.run(params, dataset="digits", model="cnn", method=method, seed=1,
                          split_path=split, pseudo_path=kw.pop("pseudo_path", None),
                          out_dir=out_dir, device=CPU, **kw)


def _checkpoint(path: Path, **meta: Any) -> Path:
    from wscat.checkpoint import FORMAT

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": FORMAT, "meta": {"dataset": "digits", "model": "cnn",
                                           "method": "standard", "seed": 1, **meta}}, path)
    return path


def test_train_is_given_the_runs_fingerprint_and_says_a_finished_run_restarts(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    got = _train(params, split_file, tmp_path / "run", monkeypatch)
    assert got["meta"]["training_fingerprint"] == training_fingerprint(params, "digits", "cnn",
                                                                       "standard")
    assert "trains again from the start" not in capsys.readouterr().err  # nothing there yet
    _checkpoint(tmp_path / "run" / "best.pt")
    _train(params, split_file, tmp_path / "run", monkeypatch)
    assert "holds this run, finished: it trains again from the start" in capsys.readouterr().err
    _checkpoint(tmp_path / "run" / "resume" / "last.pt")  # unfinished: it resumes, nothing said
    _train(params, split_file, tmp_path / "run", monkeypatch)
    assert "trains again" not in capsys.readouterr().err
    _checkpoint(tmp_path / "other" / "best.pt", seed=2)
    with pytest.raises(ValueError, match="holds a finished run of"):
        _train(params, split_file, tmp_path / "other", monkeypatch)


def test_a_paper_size_model_trains_on_a_cpu_only_when_named(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import train as train_step

    monkeypatch.setattr(train_step, "train", lambda run, *a, **k: {"model": run.model})
    kw = dict(dataset="digits", model="wrn-34-10", method="standard", seed=1,
              split_path=split_file, pseudo_path=None, out_dir=tmp_path / "run", device=CPU)
    with pytest.raises(ValueError, match="model 'wrn-34-10' has .*M parameters"):
        train_step.run(params, **kw)  # chosen by `--device auto`: refused (46M: WRN-34-10)
    assert train_step.run(params, **kw, device_named=True) == {"model": "wrn-34-10"}


@pytest.mark.parametrize("selection, attack", [("cw", "CW"), ("hm", "PGD")])
def test_train_warns_of_a_short_selection_attack(params: dict[str, Any], split_file: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str],
                                                 selection: str, attack: str) -> None:
    given = copy.deepcopy(params)
    given["methods"]["standard"]["selection"] = selection
    given["validation"] = {"pgd_steps": 1000, "cw_steps": 1000}
    given["validation"][f"{attack.lower()}_steps"] = 1  # 1 step of 0.01875 < eps 0.15
    _train(given, split_file, tmp_path / "run", monkeypatch)
    err = capsys.readouterr().err
    assert err.startswith("wscat train: ") and attack in err


def test_train_refuses_inputs_its_method_does_not_read(params: dict[str, Any], split_file: Path,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="trains on pseudo-labels from 'mt': pass --pseudo"):
        _train(params, split_file, out, monkeypatch, method="wscat")
    with pytest.raises(ValueError, match="trains on no pseudo-labels"):
        _train(params, split_file, out, monkeypatch, pseudo_path=tmp_path / "p.npz")
    with pytest.raises(ValueError, match=re.escape(  # a split given as wscat's pseudo-labels
            "pass --pseudo results/pseudo/digits/cnn/mt/seed1.npz")):
        _train(params, split_file, out, monkeypatch, method="wscat", pseudo_path=split_file)
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="is a file, not a folder"):
        _train(params, split_file, tmp_path / "file" / "run", monkeypatch)
    given = copy.deepcopy(params)
    given["methods"]["dmat"]["generated"] = str(tmp_path / "gen.npz")
    with pytest.raises(ValueError, match=r"has no generated images to label .*: dmat\)$"):
        _train(given, split_file, out, monkeypatch, labeler_checkpoint=tmp_path / "l.pt")
    assert not out.exists()


def test_train_reads_the_labelers_pseudo_labels_and_refuses_a_larger_split(
        params: dict[str, Any], split_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data import load_split
    from wscat.data.split import Split, save_split
    from wscat.workflow import split_params

    unlabelled = load_split(split_file).unlabelled
    pseudo = tmp_path / "p.npz"
    np.savez(pseudo, indices=unlabelled, pseudo_labels=np.zeros(len(unlabelled), dtype=np.int64),
             labeler=np.array("mt"),
             labeler_training=np.array(training_fingerprint(params, "digits", "cnn", "mt")))
    got = _train(params, split_file, tmp_path / "run", monkeypatch, method="wscat",
                 pseudo_path=pseudo)
    assert got["run"].method == "wscat"
    big = Split("digits", 1, labelled=np.arange(10), unlabelled=np.arange(10, 20),
                validation=np.arange(20, 30), test=np.arange(1790, 1800))  # 1797 images
    save_split(big, tmp_path / "big.npz", made_with=split_params(params, "digits"))
    with pytest.raises(ValueError, match="big.npz"):
        _train(params, tmp_path / "big.npz", tmp_path / "run2", monkeypatch)


def test_dmats_labeler_is_its_generated_labelers_run(params: dict[str, Any], split_file: Path,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import train as train_step

    given = copy.deepcopy(params)
    gen = tmp_path / "gen.npz"
    np.savez(gen, images=np.zeros((4, 8, 8, 1), dtype=np.uint8))  # no labels: the labeler's
    given["methods"]["dmat"]["generated"] = str(gen)
    fingerprint = training_fingerprint(given, "digits", "cnn", "mt")
    labels = []

    def labeler(meta: dict[str, Any]) -> None:
        monkeypatch.setattr(train_step, "load_model", lambda *a, **k: (_Nines().eval(), meta))
        _train(given, split_file, tmp_path / "run", monkeypatch, method="dmat",
               labeler_checkpoint=tmp_path / "mt.pt")
        labels.append(True)

    labeler({"dataset": "digits", "method": "mt", "seed": 1, "training_fingerprint": fingerprint})
    got = _train(given, split_file, tmp_path / "run", monkeypatch, method="dmat",
                 labeler_checkpoint=tmp_path / "mt.pt")
    assert got["data"].unlabelled_y[-4:].tolist() == [9] * 4  # the labeler's predictions
    with pytest.raises(ValueError, match=re.escape(  # a split given as the labeler: mt's best.pt
            "pass --labeler-checkpoint results/models/digits/cnn/mt/seed1/best.pt")):
        _train(given, split_file, tmp_path / "run", monkeypatch, method="dmat",
               labeler_checkpoint=split_file)
    with pytest.raises(ValueError, match="holds dmat seed 1"):
        labeler({"dataset": "digits", "method": "dmat", "seed": 1})
    with pytest.raises(ValueError, match="trained with other params"):
        labeler({"dataset": "digits", "method": "mt", "seed": 1,
                 "training_fingerprint": "f" * 16})
    assert labels == [True]


# --- analyse.py: what Fig-similarity and Fig-feature are computed on ---------------------------

class _Heads:
    beta = -1.0


def _analyse(params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             figure: str, method_of: Any = None) -> tuple[dict[str, Any], list[Any]]:
    from wscat import analysis
    from wscat.data.split import Split
    from wscat.steps import analyse

    calls: list[Any] = []
    net = _Net()
    net.feature_dim = 4

    def load(checkpoint: Path, device: torch.device) -> tuple[Any, dict[str, Any]]:
        method = Path(checkpoint).parent.parent.name
        return net, {"dataset": "digits", "method": (method_of or method), "seed":
                     int(Path(checkpoint).parent.name[4:]), "num_classes": 10}

    heads = _Heads()

    def adversarial(objective: str, model: Any, x: torch.Tensor, ctx: Any, *, heads: Any,
                    blocks: int = 2, batch_size: int | None = None) -> torch.Tensor:
        calls.append(("ae", objective, heads.beta, blocks, float(torch.rand(1, generator=ctx)),
                      batch_size))
        return x

    monkeypatch.setattr(analyse, "load_model", load)
    monkeypatch.setattr(analyse, "load_split", lambda path: Split(
        "digits", 3, labelled=np.arange(10), unlabelled=np.arange(10, 40),
        validation=np.arange(40, 50), test=np.arange(100, 120)))
    monkeypatch.setattr(analysis, "wscat_heads", lambda *a: heads)
    monkeypatch.setattr(analysis, "attack_context", lambda cfg, generator: generator)
    monkeypatch.setattr(analysis, "adversarial_examples", adversarial)
    monkeypatch.setattr(analysis, "cosine_similarity", lambda model, x, x_adv: (
        calls.append(("x", x)), np.zeros(len(x)))[1])
    monkeypatch.setattr(analysis, "features", lambda model, x: x.flatten(1).numpy())
    monkeypatch.setattr(analysis, "tsne", lambda emb, seed: (
        calls.append(("tsne", seed)), np.zeros((len(emb), 2)))[1])
    analyse.run(params, tier="t", figure=figure, dataset="digits", out=tmp_path / "a.npz",
                device=CPU, root=str(tmp_path / "r"))
    with np.load(tmp_path / "a.npz") as saved:
        return {k: saved[k] for k in saved.files}, calls


def test_similarity_is_measured_on_the_first_test_images_with_each_methods_knobs(
        tier_params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data import load_dataset

    given = copy.deepcopy(tier_params)
    given["methods"]["rlfat"].pop("blocks")  # unset: RBS's 2 strips per axis
    saved, calls = _analyse(given, tmp_path, monkeypatch, "Fig-similarity")
    images = load_dataset("digits").images[100:106]
    xs = [c[1] for c in calls if c[0] == "x"]
    assert len(xs) == 3 and all(torch.equal(x, images) for x in xs)
    aes = [c for c in calls if c[0] == "ae"]
    assert [(c[1], c[3]) for c in aes] == [("trades", 2), ("rlfat", 2), ("wscat", 2)]
    assert aes[2][2] == given["methods"]["wscat"]["beta"]  # WSCAT's own beta for its l_con
    assert len({c[4] for c in aes}) == 1  # each method's attack from the same seeded generator
    # In batches of the WSCAT model's own training batch: Eq. 7's l_con sums over a batch.
    assert {c[5] for c in aes} == {training_for(given, "digits", "wscat")["batch_size"]}
    assert saved["methods"].tolist() == ["trades", "rlfat", "wscat"]
    assert saved["cos"].shape == (3, 6)
    manifest = json.loads(str(saved["manifest"]))
    assert manifest == {"tier": "t", "figure": "Fig-similarity", "dataset": "digits", "seed": 1,
                        "checkpoints": [str(tmp_path / "r/models/digits/cnn/wscat/seed1/best.pt")]}


def test_feature_embeds_a_sorted_seeded_subset_of_the_training_images(
        tier_params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.data import load_dataset

    saved, calls = _analyse(tier_params, tmp_path, monkeypatch, "Fig-feature")
    chosen = saved["index"]
    assert len(chosen) == 20 and set(chosen) <= set(range(40))  # labelled and unlabelled: 40
    assert (np.diff(chosen) > 0).all()
    assert np.array_equal(saved["label"], load_dataset("digits").labels.numpy()[chosen])
    assert calls == [("tsne", 3), ("tsne", 3)] and saved["tsne"].shape == (2, 20, 2)
    manifest = json.loads(str(saved["manifest"]))
    assert manifest["figure"] == "Fig-feature" and manifest["checkpoints"] == [
        str(tmp_path / f"r/models/digits/cnn/{m}/seed3/best.pt") for m in ("wscat", "standard")]


def test_analyse_refusals(tier_params: dict[str, Any], tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.checkpoint import CheckpointError

    with pytest.raises(ConfigError, match="'Fig-beta' needs no analysis"):
        _analyse(tier_params, tmp_path, monkeypatch, "Fig-beta")
    no_feature = copy.deepcopy(tier_params)
    no_feature["paper"]["t"].pop("feature")
    with pytest.raises(ConfigError, match="has no feature: section"):
        _analyse(no_feature, tmp_path, monkeypatch, "Fig-feature")
    with pytest.raises(CheckpointError, match="holds trades seed 3 on digits, not wscat"):
        _analyse(tier_params, tmp_path, monkeypatch, "Fig-feature", method_of="trades")
    assert not (tmp_path / "a.npz").exists()
    from wscat.steps import analyse

    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="is a file, not a folder"):  # before any checkpoint is read
        analyse.run(tier_params, tier="t", figure="Fig-feature", dataset="digits",
                    out=tmp_path / "file" / "a.npz", device=CPU, root=str(tmp_path / "r"))
