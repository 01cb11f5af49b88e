"""docs/api.md's example runs as written (on tiny params): load data, predict, evaluate, export.
The exported model is what RobustBench and AutoAttack take (images -> logits), the evaluation's
extras come on request, and the API's errors speak Python."""
from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
import torch

from benchmarks.api_times import example_code
from tests.helpers.tiny import tiny_params, write_params
from wscat import api
from wscat.config import ConfigError

CORE = {"Natural", "FGSM", "PGD", "CW", "AA", "Mean"}


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, dict, str]:
    """The example's block executed in a fresh folder whose params.yaml is the tiny one: (the
    folder, the names it defined, what it printed)."""
    work = tmp_path_factory.mktemp("api-example")
    write_params(work / "params.yaml", tiny_params(epochs=1))
    namespace: dict = {"__name__": "__docs__"}
    printed = io.StringIO()
    here = os.getcwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(example_code(), "docs/api.md", "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(here)
    return work, namespace, printed.getvalue()


@pytest.mark.slow
def test_the_documented_example_runs_as_written(example):
    work, names, printed = example
    runs = work / "runs/digits"
    for path in ("mt/best.pt", "wscat/best.pt", "wscat/metrics.json", "wscat-digits.json",
                 "wscat-digits.pt"):
        assert (runs / path).is_file(), path
    assert names["run"].checkpoint == Path("runs/digits/wscat/best.pt")
    assert set(names["result"].accuracy) == CORE  # part="core" by default: no extras
    test, predicted = names["test"], names["predicted"]
    assert test.images.dtype == torch.float32 and 0 <= test.images.min() <= test.images.max() <= 1
    assert len(test.images) == len(test.labels) == len(predicted) > 0
    right = 100 * (predicted == test.labels).float().mean()
    lines = printed.splitlines()
    assert lines[1] == f"wscat: {right:.2f}% of {len(test.labels)} test images right"
    assert lines[-1].endswith("torch.Size([4, 10])"), lines[-1]
    assert names["entry"]["clean_acc"] == f"{names['result'].accuracy['Natural']:.2f}"


@pytest.mark.slow
def test_the_exported_model_returns_logits_and_autoattack_runs_on_it(example):
    from pyautoattack import AutoAttack

    _, names, _ = example
    shared, net, test = names["shared"], names["net"], names["test"]
    with torch.no_grad():
        logits = shared(test.images)
        assert isinstance(logits, torch.Tensor) and logits.shape == (len(test.images), 10)
        assert torch.equal(logits, net(test.images)[1])  # the evaluated EMA weights, bit for bit
    assert torch.equal(api.predict(shared, test.images), names["predicted"])
    right = (logits.argmax(1) == test.labels).nonzero().flatten()[:2]  # what AA has to attack
    assert len(right) > 0
    x, y = test.images[right], test.labels[right]
    eps = names["params"]["datasets"]["digits"]["eps"]
    # AutoAttack's own checks of the model (output range, classes, randomness) and two of its
    # attacks, the targeted one asking for every class's logit (the standard four take ~1 min).
    adversary = AutoAttack(shared, attacks=["apgd-ce", "apgd-t"], norm="Linf", eps=eps,
                           version="custom", seed=0, device="cpu")
    x_adv, y_adv = adversary.run_standard_evaluation(x, y, batch_size=len(x))
    assert x_adv.shape == x.shape and (x_adv - x).abs().max() <= eps + 1e-6
    assert 0 <= x_adv.min() and x_adv.max() <= 1
    with torch.no_grad():
        assert torch.equal(shared(x_adv).argmax(1), y_adv)


@pytest.mark.slow
def test_the_extras_come_on_request(example):
    work, names, _ = example
    checkpoint = work / names["run"].checkpoint
    core = (checkpoint.parent / "metrics.json").read_bytes()
    extra = api.evaluate_checkpoint(checkpoint, params=work / "params.yaml", part="extra")
    assert extra.path == checkpoint.parent / "metrics-extra.json"
    assert {"AA-paper", "NRF"} <= set(extra.accuracy)
    assert (checkpoint.parent / "metrics.json").read_bytes() == core  # the core file is kept
    with pytest.raises(ValueError, match="unknown part 'everything'"):
        api.evaluate_checkpoint(checkpoint, params=work / "params.yaml", part="everything")


def test_load_params_outside_the_repository_speaks_python(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        api.load_params("params.yaml")
    message = str(error.value)
    assert "--params" not in message and "\n" not in message
    assert str(tmp_path / "params.yaml") in message
    assert "api.load_params(" in message and "params= a dict" in message
    with pytest.raises(ConfigError, match="api.load_params"):
        api.train_method("standard", out_dir=tmp_path / "runs")  # the default params.yaml


def test_training_a_paper_size_model_on_an_automatic_cpu_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # "auto" finds no GPU
    with pytest.raises(ValueError, match="paper-size") as error:
        api.train_method("standard", model="wrn-28-10", out_dir=tmp_path,
                         params=tiny_params(epochs=1), device="auto")
    assert "device='cpu'" in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "standard").exists()
