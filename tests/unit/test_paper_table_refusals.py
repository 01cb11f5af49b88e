"""Bad inputs of `wscat table`, `paper-table`, `paper-figure` and `paper-compare`: metrics of
another training, run or evaluation than the params give, NaN where a number belongs, a missing
input. Each is refused in one line (exit 2, no traceback, nothing written); the same files made
good are accepted. The inputs are written by hand (with the fingerprints `wscat evaluate`
records), so nothing trains."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.tiny import ROOT, tiny_params, write_params
from tests.workflow.test_bad_input import one_line_error as bad_input_line
from wscat import cli
from wscat.config import load_params, validate_params
from wscat.metrics import harmonic_mean
from wscat.report import paper
from wscat.workflow import evaluation_fingerprint, extra_fingerprint, training_fingerprint

PARAMS = ROOT / "params.yaml"  # its paper tier `digits`
TIER, LABEL = "digits", "Tab-RQ1-digits"


def one_line_error(command: list[str], phrases: tuple[str, ...], work: Path, capsys) -> str:
    """tests/workflow/test_bad_input.py's check (exit 2, one stderr line, no traceback, nothing
    new or changed under `work`), with every one of `phrases` in the line."""
    line = bad_input_line(command, phrases[0], work, capsys)
    for phrase in phrases[1:]:
        assert phrase in line, line
    return line


def accepted(command: list[str], capsys) -> None:
    capsys.readouterr()
    code = cli.main(command)
    assert code == 0, capsys.readouterr().err


def metrics(params: dict, run: paper.Run, *, part: str | None = None,
            accuracy: dict | None = None) -> dict:
    """A metrics file of `run` as `wscat evaluate` records it under `params` (numbers made up)."""
    accuracy = accuracy or {"Natural": 80.0 + run.seed, "FGSM": 50.0, "PGD": 40.0 - run.seed,
                            "CW": 35.0, "AA": 30.0, "Mean": 43.0}
    return {"dataset": run.dataset, "model": run.model, "method": run.method, "seed": run.seed,
            **({"part": part} if part else {}),
            "accuracy": {"AA-paper": 29.0} if part == "extra" else accuracy,
            "manifest": {"training": {"fingerprint": training_fingerprint(
                             params, run.dataset, run.model, run.method),
                             "weights_sha256": "0" * 16},
                         "evaluation_settings": evaluation_fingerprint(params, run.dataset),
                         **({"extra_settings": extra_fingerprint(params, run.dataset)}
                            if part == "extra" else {})}}


def write(path: str | Path, data: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data))


def edit(path: str | Path, change) -> None:
    data = json.loads(Path(path).read_text())
    change(data)
    Path(path).write_text(json.dumps(data))


@pytest.fixture(scope="module")
def tier_params() -> dict:
    return load_params(PARAMS)


# --- `wscat table`: the experiment's dataset, and the evaluation the params give ---------------

@pytest.fixture
def table_work(tmp_path: Path, monkeypatch) -> tuple[Path, dict]:
    """A work folder: the tiny params (40 test images) and a good core + extra file of seed 1."""
    monkeypatch.chdir(tmp_path)
    params = tiny_params()
    params["experiments"]["digits"]["methods"] = ["standard"]
    write_params(tmp_path / "params.yaml", params)
    expanded = validate_params(params)
    run = paper.Run("digits", "cnn", "standard", 1)
    write(tmp_path / "m.json", metrics(expanded, run))
    write(tmp_path / "m-extra.json", metrics(expanded, run, part="extra"))
    return tmp_path, params


def table(params: str, *files: str) -> list[str]:
    return ["table", "--params", params, "--experiment", "digits", "--tex", "out/t.tex",
            "--csv", "out/t.csv", "--summary", "out/t.json", *files]


def test_table_refuses_metrics_of_other_evaluation_settings(table_work, capsys) -> None:
    """Measured on 40 test images, tabulated under params asking for all 359: refused, with the
    count and what to do; under the params they were made with, the same files (and their
    `--part extra` file) make the table."""
    work, params = table_work
    params["evaluation"]["n_examples"] = None
    write_params(work / "all.yaml", params)
    line = one_line_error(table("all.yaml", "m.json", "m-extra.json"),
                          ("1 metrics file(s)", "other evaluation settings", "m.json",
                           "re-evaluate"), work, capsys)
    assert "m-extra.json" not in line  # folded into its core file: one run, counted once
    params["evaluation"]["n_examples"] = 40
    params["evaluation"]["per_dataset"]["digits"]["autoattack"]["n_examples"] = 16
    write_params(work / "aa.yaml", params)
    one_line_error(table("aa.yaml", "m.json"), ("other evaluation settings",), work, capsys)
    accepted(table("params.yaml", "m.json", "m-extra.json"), capsys)
    assert (work / "out/t.tex").is_file()


def test_table_refuses_metrics_without_evaluation_settings(table_work, capsys) -> None:
    work, _ = table_work
    edit(work / "m.json", lambda data: data["manifest"].pop("evaluation_settings"))
    one_line_error(table("params.yaml", "m.json"), ("none recorded",), work, capsys)


@pytest.mark.parametrize("key, value", [("dataset", "toy"), ("model", "resnet-99"),
                                        ("method", "madry")])
def test_table_refuses_metrics_of_another_dataset_model_or_method(table_work, capsys, key,
                                                                   value) -> None:
    """Metrics of a dataset (model, method) the params lack stopped with "unexpected KeyError"."""
    work, _ = table_work
    edit(work / "m.json", lambda data: data.update({key: value}))
    one_line_error(table("params.yaml", "m.json"), ("m.json", value), work, capsys)


# --- `wscat paper-table`: the check `wscat table` makes ----------------------------------------

@pytest.fixture
def tier_work(tmp_path: Path, monkeypatch, tier_params) -> Path:
    """results/ holding good metrics (core and extra) of every run of Tab-RQ1-digits."""
    monkeypatch.chdir(tmp_path)  # first: the runs' paths are relative (results/...)
    for run in paper.experiment_runs(tier_params, "digits-table2"):
        write(run.metrics("results"), metrics(tier_params, run))
        write(run.extra("results"), metrics(tier_params, run, part="extra"))
    return tmp_path


def paper_table(out: str = "ptr") -> list[str]:
    return ["paper-table", "--params", str(PARAMS), "--tier", TIER, "--label", LABEL,
            "--results", "results", "--tex", f"{out}.tex", "--csv", f"{out}.csv"]


def test_a_paper_table_across_models_takes_its_good_files(
        tmp_path: Path, monkeypatch, tier_params, capsys) -> None:
    """tab-sup holds runs of one method and seed on two models (cnn, cnn-wide; the paper tier's
    Tab-mode, on three datasets, likewise): each extra file is checked with its own model's core
    file, not refused as a second extra of that method and seed."""
    label = "tab-sup"
    monkeypatch.chdir(tmp_path)
    files = paper.table_inputs(tier_params, TIER, label, "results")
    for path in files:
        run = paper.Run(*Path(path).parts[-4:-1], int(Path(path).stem.split("-")[0][4:]))
        write(path, metrics(tier_params, run, part="extra" if "-extra" in path else None))
    assert len({Path(path).parts[-4:-2] for path in files}) > 1  # more than one model or dataset
    accepted(["paper-table", "--params", str(PARAMS), "--tier", TIER, "--label", label,
              "--results", "results", "--tex", "t.tex", "--csv", "t.csv"], capsys)


def test_paper_table_refuses_metrics_of_another_training(tier_work, tier_params, capsys) -> None:
    """Metrics of another training (a changed schedule or model) made a paper table that
    `wscat table` refused on the same files."""
    accepted(paper_table("good"), capsys)
    assert (tier_work / "good.tex").is_file()
    stale = paper.Run("digits", "cnn", "trades", 2)
    edit(stale.metrics("results"), lambda data: data["manifest"]["training"].update(
        fingerprint="0" * 16))
    edit(stale.extra("results"), lambda data: data["manifest"]["training"].update(
        fingerprint="0" * 16))
    one_line_error(paper_table(), ("1 metrics file(s)", "another training",
                                   stale.metrics("results"), "--forcerun"), tier_work, capsys)


def test_paper_table_refuses_metrics_of_other_evaluation_settings(tier_work, capsys) -> None:
    for path in paper.Run("digits", "cnn", "wscat", 3).evaluated("results"):  # core and extra
        edit(path, lambda data: data["manifest"].update(evaluation_settings="e" * 16))
    one_line_error(paper_table(), ("other evaluation settings", "wscat/seed3.json"), tier_work,
                   capsys)


def test_paper_table_refuses_another_runs_file(tier_work, capsys) -> None:
    """standard's seed-1 metrics copied over WSCAT's."""
    shutil.copyfile(paper.Run("digits", "cnn", "standard", 1).metrics("results"),
                    paper.Run("digits", "cnn", "wscat", 1).metrics("results"))
    one_line_error(paper_table(), ("results/metrics/digits/cnn/wscat/seed1.json", "standard",
                                   "not"), tier_work, capsys)


def test_paper_table_says_what_makes_a_missing_file(tier_work, capsys) -> None:
    missing = paper.Run("digits", "cnn", "rst", 2)
    Path(missing.extra("results")).unlink()
    one_line_error(paper_table(), (missing.extra("results"), "not found", "snakemake",
                                   "--part extra"), tier_work, capsys)


# --- `wscat paper-figure --figure Fig-beta` ---------------------------------------------------

@pytest.fixture
def beta_work(tmp_path: Path, monkeypatch, tier_params) -> Path:
    """results/ holding good metrics and validation files of the beta sweep (validation HM best
    at beta 0.2)."""
    monkeypatch.chdir(tmp_path)
    entry = paper.tier_spec(tier_params, TIER)["datasets"][0]
    for run in paper.beta_runs(tier_params, TIER, entry):
        beta = next(b for b, m in paper.beta_points(tier_params, TIER, entry) if m == run.method)
        natural, pgd = 90.0 - 20 * beta, 20.0 + 30 * min(beta, 0.2)
        write(run.metrics("results"), metrics(tier_params, run, accuracy={
            "Natural": natural, "FGSM": pgd, "PGD": pgd, "CW": pgd, "AA": pgd, "Mean": pgd}))
        write(run.validation("results"), {
            "Natural": natural, "PGD": pgd, "HM": harmonic_mean([natural, pgd]),
            "dataset": run.dataset, "model": run.model, "method": run.method, "seed": run.seed,
            "n": 20, "set": "validation"})
    return tmp_path


def beta(out: str = "fig/beta") -> list[str]:
    return ["paper-figure", "--params", str(PARAMS), "--tier", TIER, "--figure", "Fig-beta",
            "--results", "results", "--out", out]


def beta_run(method: str = "wscat-beta0") -> paper.Run:
    return paper.Run("digits", "cnn", method, 1)


def test_fig_beta_accepts_the_good_sweep(beta_work, capsys) -> None:
    accepted(beta(), capsys)
    with open(beta_work / "fig/beta.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [float(row["beta"]) for row in rows if row["chosen"] == "True"] == [0.2]


@pytest.mark.parametrize("where, key, value", [("validation", "HM", float("nan")),
                                               ("validation", "PGD", float("nan")),
                                               ("validation", "Natural", 250.0),
                                               ("validation", "HM", None),
                                               ("metrics", "PGD", float("nan")),
                                               ("metrics", "Natural", float("inf"))])
def test_fig_beta_refuses_nan_and_out_of_range_accuracies(beta_work, capsys, where, key,
                                                         value) -> None:
    """A validation HM of NaN was written as `nan` into Fig-beta.csv and its beta chosen."""
    run = beta_run()
    path = run.validation("results") if where == "validation" else run.metrics("results")
    edit(path, lambda data: (data if where == "validation" else data["accuracy"]).update(
        {key: value}))
    one_line_error(beta(), (path, key), beta_work, capsys)


def test_beta_figure_itself_refuses_a_nan_validation_hm(beta_work, tier_params) -> None:
    """The Python API (wscat.report.figures.beta_figure) too, before anything is written."""
    from wscat.report.figures import beta_figure

    edit(beta_run().validation("results"), lambda data: data.update(HM=float("nan")))
    with pytest.raises(ValueError, match="HM"):
        beta_figure(tier_params, TIER, "results", beta_work / "out")
    assert not list(beta_work.glob("out.*"))


@pytest.mark.parametrize("kind", ["metrics", "validation"])
def test_fig_beta_refuses_another_runs_files(beta_work, capsys, kind) -> None:
    """Copies of standard's files accepted as the wscat-beta0 run's."""
    run = beta_run()
    path = getattr(run, kind)("results")
    edit(path, lambda data: data.update(method="standard"))
    one_line_error(beta(), (path, "standard", "wscat-beta0"), beta_work, capsys)


def test_fig_beta_refuses_metrics_of_another_training(beta_work, capsys) -> None:
    path = beta_run("wscat-beta0.5").metrics("results")
    edit(path, lambda data: data["manifest"]["training"].update(fingerprint="0" * 16))
    one_line_error(beta(), ("another training", path), beta_work, capsys)


@pytest.mark.parametrize("kind, step", [("validation", "wscat validate"),
                                        ("metrics", "wscat evaluate")])
def test_fig_beta_says_what_makes_a_missing_file(beta_work, capsys, kind, step) -> None:
    path = getattr(beta_run("wscat-beta1"), kind)("results")
    Path(path).unlink()
    line = one_line_error(beta(), (path, "not found", step, "snakemake"), beta_work, capsys)
    assert "No such file" not in line


# --- `wscat paper-compare`: the table CSV's numbers ---------------------------------------------

GOOD_ROW = "Tab-RQ1-CIFAR10,CIFAR10 proxy,CNN,Standard,FGSM,8.75,5.30,2\n"
HEADER = "table,dataset,model,method,metric,mean,std,n_seeds\n"


def compare(table_csv: str = "tc.csv") -> list[str]:
    return ["paper-compare", "--label", "Tab-RQ1-CIFAR10", "--table-csv", table_csv,
            "--paper-cells", "CIFAR10", "WRN-28-10", "--tex", "pc.tex", "--csv", "pc.csv"]


@pytest.mark.parametrize("mean, std, column", [("nan", "10.61", "mean"), ("inf", "10.61", "mean"),
                                               ("1e9", "10.61", "mean"), ("-5", "10.61", "mean"),
                                               ("abc", "10.61", "mean"), ("50.00", "nan", "std"),
                                               ("50.00", "-1.00", "std")])
def test_paper_compare_refuses_non_finite_or_out_of_range_numbers(tmp_path: Path, monkeypatch,
                                                                  capsys, mean, std,
                                                                  column) -> None:
    """NaN and infinity were written into the companion as numbers."""
    monkeypatch.chdir(tmp_path)
    Path("ok.csv").write_text(HEADER + GOOD_ROW)
    accepted(compare("ok.csv"), capsys)
    Path("tc.csv").write_text(HEADER + GOOD_ROW
                              + f"Tab-RQ1-CIFAR10,CIFAR10 proxy,CNN,Standard,Natural,{mean},"
                                f"{std},2\n")
    one_line_error(compare(), ("tc.csv", "line 3", column, "paper-table"), tmp_path, capsys)


@pytest.mark.parametrize("content, says", [
    (None, "none.csv: not found; pass the .csv `wscat paper-table` wrote"),
    (b"\xff\xfe\x00table", "none.csv is not a CSV text file; pass the .csv `wscat paper-table` "
                          "wrote"),
    (b"table,mean\n\x00\n", "none.csv is not a CSV text file"),
], ids=["missing", "not-utf-8", "nul-bytes"])
def test_paper_compare_refuses_a_table_csv_that_is_no_csv_text(tmp_path: Path, monkeypatch,
                                                               capsys, content, says) -> None:
    """Before: "No such file or directory: none.csv" and "'utf-8' codec can't decode byte 0xff
    ...", neither saying which file to pass (the second not even which file)."""
    monkeypatch.chdir(tmp_path)
    if content is not None:
        Path("none.csv").write_bytes(content)
    line = one_line_error(compare("none.csv"), (says,), tmp_path, capsys)
    assert "codec" not in line and "No such file" not in line, line


def test_paper_compare_takes_epoch_seconds_above_100(tmp_path: Path, monkeypatch, capsys) -> None:
    """Tab-ap-time's numbers are seconds, not percentages."""
    monkeypatch.chdir(tmp_path)
    Path("time.csv").write_text(HEADER + "Tab-ap-time,CIFAR10,WRN-28-10,WSCAT,epoch_seconds,"
                                         "314.00,2.00,3\n")
    capsys.readouterr()
    assert cli.main(["paper-compare", "--label", "Tab-ap-time", "--table-csv", "time.csv",
                     "--tex", "pc.tex", "--csv", "pc.csv"]) == 0, capsys.readouterr().err


# --- `wscat paper-index`: an index of files that are there ---------------------------------------

def test_paper_index_refuses_a_tier_whose_outputs_are_missing(tmp_path: Path, tier_params,
                                                             capsys) -> None:
    """It used to exit 0 with a list of ~60 links to files that were not there (an empty
    --results); now one line names the first missing one and the target that makes it."""
    results = tmp_path / "empty"
    results.mkdir()
    first = paper.tier_outputs(tier_params, "digits", str(results))[0]
    one_line_error(["paper-index", "--params", str(PARAMS), "--tier", "digits", "--results",
                    str(results), "--out", str(tmp_path / "index.md")],
                   (f"{first}: not found; make it first", "Snakemake target"), tmp_path, capsys)


def test_tab_datasets_reads_no_official_archive_for_its_classes(tmp_path: Path) -> None:
    """Table 1's classes: the fixed count of an official archive, with no archive there to read
    (it loaded the whole dataset for this number once: ImageNet32-100's batches are gigabytes);
    a user's npz is read, and its `num_classes` counts."""
    from wscat.report.paper_tables import _classes

    missing = {"root": str(tmp_path / "no-archives"), "download": False}
    assert _classes("cifar10", {**missing}) == 10
    assert _classes("cifar10-proxy", {**missing, "source": "cifar10", "subset": [800, 100]}) == 10
    assert _classes("cifar100", {**missing}) == 100
    assert _classes("imagenet32", {**missing}) == 100
    assert _classes("digits", {}) == 10
    rng = np.random.default_rng(0)
    path = tmp_path / "mine.npz"
    np.savez(path, x_train=rng.integers(0, 256, size=(12, 5, 6, 3), dtype=np.uint8),
             y_train=np.arange(12) % 3, x_test=rng.integers(0, 256, size=(6, 5, 6, 3),
                                                             dtype=np.uint8),
             y_test=np.arange(6) % 3)
    assert _classes("mine", {"source": "npz", "path": str(path), "num_classes": 4}) == 4
