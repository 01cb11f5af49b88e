"""wscat/report/robustness_figure.py: the curves it plots are the gradient-masking checks'
numbers in each run's extra metrics file, and a file without them, or on another grid, is one
line naming it."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wscat.report import robustness_figure as figure

EPS = [0.0, 0.015686, 0.031373, 0.062745]  # 0, 1/2, 1, 2 x 8/255, as the checks round them
STEPS = [5, 10, 20, 40]


def _extra(path: Path, eps_accuracy: list[float], steps_accuracy: list[float],
           eps: list[float] = EPS) -> Path:
    """An extra metrics file with only what the figure reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"checks": {
        "pgd_eps_monotone": {"eps": eps, "accuracy": eps_accuracy, "passed": True},
        "pgd_steps_monotone": {"steps": STEPS, "accuracy": steps_accuracy, "passed": True}}}))
    return path


def test_rows_are_each_files_numbers_and_the_figure_writes_them(tmp_path: Path) -> None:
    extras = {("wscat", 1): _extra(tmp_path / "w1.json", [60.0, 45.0, 30.0, 10.0],
                                   [40.0, 33.0, 30.0, 29.5]),
              ("wscat", 2): _extra(tmp_path / "w2.json", [58.0, 44.0, 31.0, 12.0],
                                   [41.0, 34.0, 31.0, 31.0]),
              ("standard", 1): _extra(tmp_path / "s1.json", [80.0, 0.5, 0.0, 0.0],
                                      [1.0, 0.0, 0.0, 0.0])}
    plotted = figure.rows(extras, {"wscat": "WSCAT", "standard": "Standard"}, "CIFAR10")
    assert len(plotted) == 3 * 8 and {r["dataset"] for r in plotted} == {"CIFAR10"}
    seed2 = [(r["panel"], r["x"], r["accuracy"]) for r in plotted
             if (r["method"], r["seed"]) == ("WSCAT", 2)]
    assert seed2 == ([("eps", x, a) for x, a in zip(EPS, [58.0, 44.0, 31.0, 12.0])]
                     + [("steps", x, a) for x, a in zip(STEPS, [41.0, 34.0, 31.0, 31.0])])
    figure.robustness_figure(plotted, tmp_path / "curves", {"CIFAR10": (8 / 255, 20)})
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "curves.pdf").read_bytes().startswith(b"%PDF")
    with open(tmp_path / "curves.csv", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert [(r["dataset"], r["method"], int(r["seed"]), r["panel"], float(r["x"]),
             float(r["accuracy"])) for r in written] == [
        (r["dataset"], r["method"], r["seed"], r["panel"], r["x"], r["accuracy"]) for r in plotted]


def test_a_file_without_the_checks_or_on_another_grid_is_one_line(tmp_path: Path) -> None:
    good = _extra(tmp_path / "good.json", [60.0, 45.0, 30.0, 10.0], [40.0, 33.0, 30.0, 29.5])
    core = tmp_path / "core.json"
    core.write_text(json.dumps({"accuracy": {"Natural": 60.0}}))  # the core part has no checks
    with pytest.raises(ValueError, match=r"core\.json: no pgd_eps_monotone numbers .*--part "
                                         r"extra"):
        figure.rows({("wscat", 1): good, ("wscat", 2): core}, {})
    other = _extra(tmp_path / "other.json", [60.0, 30.0, 10.0], [40.0, 33.0, 30.0, 29.5],
                   eps=[0.0, 0.031373, 0.062745])
    with pytest.raises(ValueError, match=r"other\.json: its pgd_eps_monotone ran at eps .*"
                                         r"good\.json's at .*same evaluation\.checks"):
        figure.rows({("wscat", 1): good, ("trades", 1): other}, {})
    short = _extra(tmp_path / "short.json", [60.0, 45.0], [40.0, 33.0, 30.0, 29.5])
    with pytest.raises(ValueError, match="short.json: no pgd_eps_monotone numbers"):
        figure.rows({("wscat", 1): short}, {})


@pytest.mark.parametrize("value, label", [(8 / 255, "8/255"), (0.015686, "4/255"), (0.0, "0"),
                                          (0.15, "0.15"), (0.075, "0.075")])
def test_a_budget_reads_as_k_over_255_where_it_is_one(value: float, label: str) -> None:
    assert figure._eps_label(value) == label


def test_every_tier_has_the_figure_from_its_performance_tables_extra_files() -> None:
    from tests.workflow.test_workflow import real_params
    from wscat.config import validate_params
    from wscat.report import paper

    params = validate_params(real_params())
    for tier in params["paper"]:
        assert paper.tier_figures(params, tier)[-1] == figure.NAME
        runs = [run for entry in params["paper"][tier]["datasets"]
                for run in paper.experiment_runs(params, entry["performance"]["experiment"])]
        # the extras it draws, and their core files (checked together, as Table 2 reads them)
        assert paper.figure_inputs(params, tier, figure.NAME) == [
            path for run in runs for path in (run.metrics(), run.extra())]
        assert paper.figure_inputs(params, tier, figure.NAME) == [
            path for entry in params["paper"][tier]["datasets"]
            for path in paper.table_inputs(params, tier, entry["performance"]["label"])]


def _demo_results(root: Path) -> tuple[dict, str, list]:
    """The real params, the demo's experiment, and under `root` a core and an extra metrics file
    for each of its runs (only what the figure reads; each run's numbers its own)."""
    from tests.workflow.test_workflow import real_params
    from wscat.config import validate_params
    from wscat.report import paper
    from wscat.targets import default_experiment

    params = validate_params(real_params())
    demo = default_experiment(params)
    runs = paper.experiment_runs(params, demo)
    for i, run in enumerate(runs):
        names = {"dataset": run.dataset, "model": run.model, "method": run.method,
                 "seed": run.seed}
        core = Path(run.metrics(str(root)))
        core.parent.mkdir(parents=True, exist_ok=True)
        core.write_text(json.dumps({**names, "accuracy": dict.fromkeys(
            ("Natural", "FGSM", "PGD", "CW", "AA", "Mean"), 30.0)}))
        extra = _extra(Path(run.extra(str(root))), [90.0 - i, 40.0 - i, 30.0 - i, 5.0],
                       [35.0 - i, 32.0 - i, 30.0 - i, 29.0 - i], eps=[0.0, 0.075, 0.15, 0.3])
        extra.write_text(json.dumps({**names, "part": "extra", "accuracy": {"NRF": 30.0},
                                     **json.loads(extra.read_text())}))
    return params, demo, runs


def test_the_demo_s_figure_draws_every_run_of_its_table(tmp_path: Path) -> None:
    """`wscat robustness-curves --experiment digits` (`make robustness-demo`): every run of the
    demo's table, each with the numbers of its own extra file, on the demo's dataset."""
    from wscat import paths, targets
    from wscat.report.names import display_name
    from wscat.steps.paper import run_robustness_curves

    root = tmp_path / "results"
    params, demo, runs = _demo_results(root)
    assert demo == "digits" and len(runs) == 15  # 5 methods x 3 seeds
    assert paths.fill(paths.ROBUSTNESS_PNG, experiment=demo) == "results/robustness-curves/digits.png"
    # what the rule waits for: each run's core file, then its extra file
    assert targets.robustness_inputs(params, demo, str(root)) == [
        path for run in runs for path in (run.metrics(str(root)), run.extra(str(root)))]
    run_robustness_curves(params, experiment=demo, results=str(root), out=tmp_path / "curves")
    assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "curves.pdf").read_bytes().startswith(b"%PDF")
    with open(tmp_path / "curves.csv", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert {row["dataset"] for row in written} == {"digits"}
    for run in runs:
        checks = json.loads(Path(run.extra(str(root))).read_text())["checks"]
        mine = [(row["panel"], float(row["x"]), float(row["accuracy"])) for row in written
                if (row["method"], int(row["seed"])) == (display_name(run.method), run.seed)]
        assert mine == [(key, x, a) for check, key in (("pgd_eps_monotone", "eps"),
                                                       ("pgd_steps_monotone", "steps"))
                        for x, a in zip(checks[check][key], checks[check]["accuracy"])]
    assert len(written) == len(runs) * 8


def test_the_demo_s_figure_names_a_missing_extra_file_and_its_target(tmp_path: Path) -> None:
    from wscat.config import ConfigError
    from wscat.steps.paper import run_robustness_curves

    root = tmp_path / "results"
    params, demo, runs = _demo_results(root)
    missing = runs[-1].extra(str(root))
    Path(missing).unlink()
    with pytest.raises(ValueError, match=rf"{missing}: not found; make it first: `snakemake -- "
                                         rf"{runs[-1].extra()}`"):
        run_robustness_curves(params, experiment=demo, results=str(root), out=tmp_path / "c")
    # what makes every input is the figure's own target, not a paper tier's (the experiment may
    # be in no tier, and `wscat robustness-curves` names an experiment, not a tier)
    with pytest.raises(ValueError) as refused:
        run_robustness_curves(params, experiment=demo, results=str(root), out=tmp_path / "c")
    assert str(refused.value).endswith(
        "; `snakemake -- results/robustness-curves/digits.png` makes every input)"), refused.value
    assert "tier" not in str(refused.value), refused.value
    with pytest.raises(ConfigError, match=r"no experiment 'digit' in params\.yaml, so no "
                                          r"results/robustness-curves/digit\.\*; experiments: "
                                          r"digits, digits-fresh"):
        run_robustness_curves(params, experiment="digit", results=str(root), out=tmp_path / "c")
    assert not list(tmp_path.glob("c.*"))
