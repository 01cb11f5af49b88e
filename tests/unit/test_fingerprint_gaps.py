"""Two results files that recorded too little to be checked: Fig-beta's validation files (no
training, no validation settings) and the extra metrics files (only the core's evaluation
settings, not NRF's and the checks'). `wscat validate` and `wscat evaluate --part extra` now record
them, and `paper-figure`, `table` and `paper-table` refuse a file whose record differs from what
the params give now, in one line naming the file and the Snakemake target that rebuilds it."""
from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.tiny import tiny_params, write_params
from tests.unit.test_paper_table_refusals import (accepted, beta, beta_run, beta_work,  # noqa: F401
                                                  edit, metrics, one_line_error, paper_table,
                                                  table, table_work, tier_params, tier_work,
                                                  write)
from tests.unit.test_run_identity import _main, _validate, work  # noqa: F401
from wscat.config import validate_params
from wscat.evaluation import SuiteResult
from wscat.report import paper
from wscat.workflow import extra_fingerprint, training_fingerprint, validation_fingerprint


# --- `wscat validate` records, `paper-figure --figure Fig-beta` checks ------------------------

def test_validate_records_its_training_and_validation_settings(work, tmp_path) -> None:
    assert _main(*_validate(work, "standard", "run_s1/best.pt", out=tmp_path)) == 0
    manifest = json.loads((tmp_path / "v.json").read_text())["manifest"]
    params = validate_params(tiny_params(epochs=1))
    assert manifest["training"] == {"fingerprint": training_fingerprint(params, "digits", "cnn",
                                                                        "standard")}
    assert manifest["validation_settings"] == validation_fingerprint(params, "digits")


def test_validation_fingerprint_follows_what_validate_measures_with() -> None:
    """PGD's steps (model selection's, `validation`) and step size change it; the core's
    AutoAttack subset does not."""
    params = tiny_params()
    before = validation_fingerprint(validate_params(params), "digits")
    params["evaluation"]["autoattack"]["n_examples"] = 5
    assert validation_fingerprint(validate_params(params), "digits") == before
    for change in (lambda p: p["validation"].update(pgd_steps=7),
                   lambda p: p["datasets"]["digits"].update(eval_step_size=0.01)):
        changed = tiny_params()
        change(changed)
        assert validation_fingerprint(validate_params(changed), "digits") != before


def test_fig_beta_refuses_validation_of_another_training(beta_work, capsys) -> None:
    """A validation file of an older checkpoint picked beta beside today's test numbers."""
    path = beta_run("wscat-beta0.5").validation("results")
    edit(path, lambda data: data.update(manifest={"training": {"fingerprint": "0" * 16}}))
    one_line_error(beta(), ("1 validation file(s)", path, "training 0000000000000000",
                            f"snakemake --forcerun {path}"), beta_work, capsys)


def test_fig_beta_refuses_validation_of_other_settings_and_takes_today_s(beta_work, tier_params,
                                                                          capsys) -> None:
    run = beta_run("wscat-beta1")
    now = {"training": {"fingerprint": training_fingerprint(tier_params, run.dataset, run.model,
                                                            run.method)},
           "validation_settings": validation_fingerprint(tier_params, run.dataset)}
    edit(run.validation("results"), lambda data: data.update(
        manifest={**now, "validation_settings": "v" * 16}))
    one_line_error(beta(), (run.validation("results"), "validation settings vvvv",
                            "--forcerun"), beta_work, capsys)
    edit(run.validation("results"), lambda data: data.update(manifest=now))
    accepted(beta(), capsys)


# --- `wscat evaluate --part extra` records, `table` and `paper-table` check --------------------

def test_the_extra_part_records_its_extra_settings(work, tmp_path, monkeypatch) -> None:
    """The real step on a trained checkpoint, its attacks stood in for (the manifest is the point):
    the extra file records the fingerprint of the settings NRF and the checks ran with."""
    from wscat.steps import evaluate

    params = validate_params(tiny_params(epochs=1))
    run = paper.Run("digits", "cnn", "standard", 1)
    core = metrics(params, run)
    core["manifest"]["attacks"] = {"AA": {"clean_accuracy": 80.0, "robust_accuracy_after": {
        "apgd-ce": 31.0, "square": 30.0}}}
    write(tmp_path / "core.json", core)
    monkeypatch.setattr(evaluate, "weights_digest", lambda net: "0" * 16)
    monkeypatch.setattr(evaluate, "_suite", lambda *args: SuiteResult(
        accuracy={"AA-paper": 29.0}, attacks={}, checks={}, autoattack_warnings={},
        per_image={}))
    result = evaluate.run(params, dataset="digits", model="cnn", method="standard", seed=1,
                          split_path=work / "s1.npz", checkpoint=work / "run_s1/best.pt",
                          out=tmp_path / "extra.json", device=torch.device("cpu"), part="extra",
                          core_path=tmp_path / "core.json")
    assert result["manifest"]["extra_settings"] == extra_fingerprint(params, "digits")


@pytest.mark.parametrize("change", [lambda e: e["nrf"].update(steps=7),
                                    lambda e: e["checks"].update(tolerance=2.0)],
                         ids=["nrf", "checks"])
def test_table_refuses_extra_metrics_of_other_nrf_or_checks_settings(table_work, capsys,
                                                                     change) -> None:
    """Every extra file equally old: a change of NRF's or the checks' settings went unnoticed."""
    work, params = table_work
    change(params["evaluation"])
    write_params(work / "changed.yaml", params)
    line = one_line_error(table("changed.yaml", "m.json", "m-extra.json"),
                          ("1 extra metrics file(s)", "m-extra.json", "NRF", "--part extra",
                           "snakemake --forcerun results/metrics/digits/cnn/standard/"
                           "seed1-extra.json"), work, capsys)
    assert "m.json" not in line.replace("m-extra.json", "")  # the core file is current
    accepted(table("params.yaml", "m.json", "m-extra.json"), capsys)


def test_table_refuses_extra_metrics_that_record_no_extra_settings(table_work, capsys) -> None:
    """`wscat table` checks unrecorded files too: an extra file from before the record is
    re-made, not taken on trust."""
    work, _ = table_work
    edit(work / "m-extra.json", lambda data: data["manifest"].pop("extra_settings"))
    one_line_error(table("params.yaml", "m.json", "m-extra.json"),
                   ("m-extra.json", "extra settings none recorded", "--part extra"), work, capsys)


def test_table_refuses_an_all_part_file_of_other_extra_settings(table_work, capsys) -> None:
    """`wscat evaluate --part all` writes the extras into the run's one file (no `part`)."""
    work, params = table_work
    run = paper.Run("digits", "cnn", "standard", 1)
    data = metrics(validate_params(params), run)
    data["accuracy"]["AA-paper"] = 29.0
    data["manifest"]["extra_settings"] = extra_fingerprint(validate_params(params), "digits")
    write(work / "all.json", data)
    params["evaluation"]["nrf"]["ib_steps"] = 3
    write_params(work / "changed.yaml", params)
    one_line_error(table("changed.yaml", "all.json"),
                   ("all.json", "extra settings", "`wscat evaluate --part all`"), work, capsys)
    accepted(table("params.yaml", "all.json"), capsys)


def test_paper_table_refuses_extra_metrics_of_other_settings_not_unrecorded_ones(
        tier_work, tier_params, capsys) -> None:
    """paper-table takes a hand-written file recording no extra settings (as it takes one with no
    training), and refuses one recording others than the params give."""
    edit(paper.Run("digits", "cnn", "trades", 1).extra("results"),
         lambda data: data["manifest"].pop("extra_settings"))
    accepted(paper_table("good"), capsys)
    stale = paper.Run("digits", "cnn", "wscat", 2).extra("results")
    edit(stale, lambda data: data["manifest"].update(extra_settings="e" * 16))
    one_line_error(paper_table(), ("1 extra metrics file(s)", stale, "eeee",
                                   f"--forcerun {stale}"), tier_work, capsys)


def test_the_aa_paper_configuration_is_part_of_the_extra_settings(monkeypatch) -> None:
    """AA-paper's attacks are fixed in code (wscat.metrics.AA_PAPER), not in params.yaml: a change
    of them changes the extras' fingerprint (the evaluate_extra rule's params, so Snakemake reruns
    them, and `wscat table` refuses the numbers measured before), never the core's."""
    import wscat.workflow as workflow
    from wscat.workflow import evaluation_fingerprint

    params = validate_params(tiny_params())
    extra, core = extra_fingerprint(params, "digits"), evaluation_fingerprint(params, "digits")
    assert '"aa_paper"' in workflow.evaluate_params(params, "digits", extra=True)
    monkeypatch.setattr(workflow, "AA_PAPER", {**workflow.AA_PAPER, "order": ["apgd-ce"]})
    assert extra_fingerprint(params, "digits") != extra
    assert evaluation_fingerprint(params, "digits") == core


def test_tables_refuse_aa_paper_of_other_attacks_even_unrecorded(table_work, tier_work,
                                                                 capsys) -> None:
    """A file whose manifest says AA-paper ran without Square (wscat's for part of 2026-11-27,
    before `extra_settings` was recorded) is refused by `wscat table` and by `paper-table`,
    which otherwise takes files that record no extra settings."""
    work, _ = table_work
    three = {"order": ["apgd-ce", "apgd-t", "fab-t"]}

    def without_square(data: dict) -> None:
        data["manifest"].pop("extra_settings", None)
        data["manifest"]["attacks"] = {"AA-paper": {"attacks": three}}

    edit(work / "m-extra.json", without_square)
    one_line_error(table("params.yaml", "m.json", "m-extra.json"),
                   ("m-extra.json", "AA-paper ran apgd-ce, apgd-t, fab-t",
                    "apgd-ce, apgd-t, fab-t, square now", "--part extra"), work, capsys)
    stale = paper.Run("digits", "cnn", "trades", 1).extra(str(tier_work / "results"))
    edit(stale, without_square)
    one_line_error(paper_table(), ("1 extra metrics file(s)", "trades/seed1-extra.json",
                                   "AA-paper ran apgd-ce, apgd-t, fab-t"), tier_work, capsys)


def test_paper_table_refuses_aa_paper_with_the_official_square_schedule(tier_work,
                                                                        capsys) -> None:
    """Before 2026-11-27 AA-paper ran Square with the official schedule (not rescaled, as the
    release's torchattacks runs it): same order, refused on the schedule its manifest records."""
    official = {"order": ["apgd-ce", "apgd-t", "fab-t", "square"],
                "apgd-ce": {"iterations": 10}, "apgd-t": {"iterations": 10},
                "fab-t": {"iterations": 10},
                "square": {"queries": 5000, "restarts": 1, "p_init": 0.8,
                           "rescaled_schedule": False}}

    def old(data: dict) -> None:
        data["manifest"].pop("extra_settings", None)
        data["manifest"]["attacks"] = {"AA-paper": {"attacks": official}}

    edit(paper.Run("digits", "cnn", "wscat", 3).extra("results"), old)
    one_line_error(paper_table(), ("wscat/seed3-extra.json", "Square ran with rescaled_schedule "
                                   "False; it runs with rescaled_schedule True"), tier_work,
                   capsys)
    official["square"]["rescaled_schedule"] = True  # what AA-paper runs now: taken
    edit(paper.Run("digits", "cnn", "wscat", 3).extra("results"), old)
    accepted(paper_table("good"), capsys)


def test_table_refuses_metrics_measured_on_an_unfinished_training(table_work, capsys) -> None:
    """Before `wscat evaluate` refused resume/ checkpoints, a training's epoch-6-of-30 weights
    could be measured and tabled as its result; a file that records one is refused."""
    work, _ = table_work
    edit(work / "m.json", lambda data: data["manifest"].update(checkpoint={
        "path": "results/models/digits/cnn/trades/seed1/resume/best.pt", "epoch": 6}))
    one_line_error(table("params.yaml", "m.json"),
                   ("m.json", "unfinished training (in its resume/ folder)",
                    "snakemake --forcerun results/metrics/digits/cnn/"), work, capsys)
