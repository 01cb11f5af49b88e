"""Model selection's attack has its own knob (`validation`), apart from the test-time attacks
(`evaluation`): a stronger PGD or CW at test time re-evaluates every model and retrains none, and
a training killed while someone edits an evaluation knob resumes instead of starting afresh."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers.killed import killed_after_first_epoch
from tests.helpers.tiny import ROOT, digits_split, tiny_params
from wscat.checkpoint import load_checkpoint
from wscat.config import RunConfig, load_params, validate_params
from wscat.data.training_data import training_data
from wscat.training import train
from wscat.workflow import evaluation_fingerprint, training_fingerprint, validation_fingerprint

PROXY = ROOT / "benchmarks/results/cifar10-proxy/seed1"
DIGITS = ("digits", "cnn")


def _fingerprints(params: dict) -> dict[str, str]:
    params = validate_params(params)
    return {method: training_fingerprint(params, *DIGITS, method)
            for method in params["experiments"]["digits"]["methods"]}


def test_test_time_steps_retrain_nothing_and_rerun_every_evaluation() -> None:
    params = tiny_params()
    before, evaluated = _fingerprints(params), evaluation_fingerprint(validate_params(params),
                                                                      "digits")
    params["evaluation"].update(pgd_steps=50, cw_steps=50)
    assert _fingerprints(params) == before
    assert evaluation_fingerprint(validate_params(params), "digits") != evaluated


@pytest.mark.parametrize("key", ["pgd_steps", "cw_steps"])
def test_the_selection_steps_retrain(key: str) -> None:
    params = tiny_params()
    before = _fingerprints(params)
    params["validation"][key] += 1
    after = _fingerprints(params)
    assert all(after[method] != before[method] for method in before)


def test_validate_measures_with_the_selection_pgd_not_the_test_time_one() -> None:
    params = tiny_params()
    before = validation_fingerprint(validate_params(params), "digits")
    params["evaluation"]["pgd_steps"] = 50
    assert validation_fingerprint(validate_params(params), "digits") == before
    params["validation"]["pgd_steps"] = 50
    assert validation_fingerprint(validate_params(params), "digits") != before


def test_a_params_file_without_the_section_means_what_it_meant_before() -> None:
    """Older params files (the proxy's committed seed 1) selected with the evaluation's steps:
    read so, every fingerprint is the one it recorded."""
    params = tiny_params()
    older = copy.deepcopy(params)
    del older["validation"]
    assert _fingerprints(older) == _fingerprints(params)
    assert (validation_fingerprint(validate_params(older), "digits")
            == validation_fingerprint(validate_params(params), "digits"))
    older["evaluation"]["pgd_steps"] = 7
    assert _fingerprints(older) != _fingerprints(params)


def test_the_committed_proxy_seed_is_the_training_today_s_params_give() -> None:
    """Seeds 2 and 3 run with today's params.yaml, as the proxy's script rewrites it (the npz at
    seed 1's path); seed 1 (committed, an older file) must be the same training for the
    three-seed table to take them together."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cifar10_proxy import proxy_params

    old = load_params(PROXY / "params.yaml")
    npz = Path(old["datasets"]["cifar10-proxy"]["path"])
    now = validate_params(proxy_params(yaml.safe_load((ROOT / "params.yaml").read_text()),
                                       seed=2, npz=npz, epochs=None))
    metrics = sorted((PROXY / "metrics").glob("*/*/*/seed1.json"))
    assert len(metrics) == 6
    for path in metrics:
        dataset, model, method = path.parts[-4:-1]
        recorded = json.loads(path.read_text())["manifest"]["training"]["fingerprint"]
        assert training_fingerprint(old, dataset, model, method) == recorded, path
        assert training_fingerprint(now, dataset, model, method) == recorded, path


def test_a_killed_run_resumes_across_an_edit_of_the_test_time_attacks(tmp_path: Path,
                                                                      monkeypatch,
                                                                      capsys) -> None:
    """Killed after its first epoch; then the AutoAttack subset, the PGD steps and the batch of
    the evaluation are edited: the training resumes (it never reads them) and ends where a run
    that was never killed ends."""
    params = tiny_params(epochs=2)
    source, split = digits_split()
    pseudo = np.random.default_rng(0).integers(0, 10, len(split.unlabelled))
    data = training_data(source, split, "pseudo", pseudo)

    def run(p: dict) -> RunConfig:
        return RunConfig.from_params(validate_params(p), dataset="digits", model="cnn",
                                     method="wscat", seed=1)

    killed_after_first_epoch(monkeypatch, lambda: train(run(params), data, tmp_path / "run"))
    edited = copy.deepcopy(params)
    edited["evaluation"].update(pgd_steps=9, batch_size=64)
    edited["evaluation"]["autoattack"]["shard_size"] = 7
    capsys.readouterr()
    train(run(edited), data, tmp_path / "run")
    assert "resuming wscat seed 1 from epoch 1" in capsys.readouterr().err
    train(run(params), data, tmp_path / "straight")
    resumed, straight = (load_checkpoint(tmp_path / name / "last.pt") for name in
                         ("run", "straight"))
    for key in ("model", "ema"):
        assert all(torch.equal(resumed[key][k], straight[key][k]) for k in straight[key])


def test_an_edit_of_the_selection_steps_still_starts_afresh(tmp_path: Path, monkeypatch,
                                                            capsys) -> None:
    params = tiny_params(epochs=2)
    source, split = digits_split()
    data = training_data(source, split, "labelled", None)
    run = RunConfig.from_params(validate_params(params), dataset="digits", model="cnn",
                                method="trades", seed=1)
    killed_after_first_epoch(monkeypatch, lambda: train(run, data, tmp_path / "run"))
    edited = copy.deepcopy(params)
    edited["validation"]["cw_steps"] = 2
    capsys.readouterr()
    train(RunConfig.from_params(validate_params(edited), dataset="digits", model="cnn",
                                method="trades", seed=1), data, tmp_path / "run")
    assert "ignoring resume/last.pt: it was made with other params" in capsys.readouterr().err
