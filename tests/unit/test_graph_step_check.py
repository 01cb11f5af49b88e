"""benchmarks/graph_step_check.py: it compares three runs of the trainer's step and flags a
graphed run that parts from the compiled one. torch.compile is replaced here (a CPU has no CUDA
graphs, and compiling costs CI a minute); the GPU run is the real check."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import graph_step_check  # noqa: E402

ARGS = ["--model", "cnn", "--methods", "mt", "--steps", "2", "--batch", "8", "--threads", "1",
        "--attack-steps", "1"]


class _Stale(nn.Module):
    """A stand-in for a graph that reads a stale input: logits a little off the model's."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features, logits = self.model(x)
        return features, logits * 1.01


def test_identical_runs_pass_and_the_report_is_written(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile", lambda model, mode: model)
    assert graph_step_check.main([*ARGS, "--out", str(tmp_path)]) == 0
    text = (tmp_path / "graph-step-check.md").read_text()
    assert "| eager / default | rounding: eager against compiled | 0 | 0 | 0 | 0 |" in text
    assert "graphs change nothing beyond rounding" in text and "DIFFER" not in text


def test_a_graphed_run_that_parts_from_the_compiled_one_is_flagged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile",
                        lambda model, mode: model if mode == "default" else _Stale(model))
    graph_step_check.main([*ARGS, "--out", str(tmp_path)])
    text = (tmp_path / "graph-step-check.md").read_text()
    assert "GRAPHS DIFFER beyond rounding in loss, weights, ema_weights, ema_statistics" in text


def test_the_verdict_compares_each_quantity_with_its_rounding_gap() -> None:
    def trace(loss: float, weight: float) -> graph_step_check.Trace:
        w = {"w": torch.tensor([weight])}
        return graph_step_check.Trace([loss], w, w, {"running_mean": torch.tensor([0.0])}, 0.0)

    rows = graph_step_check.compare({"eager": trace(1.0, 0.0), "default": trace(1.5, 0.2),
                                     "reduce-overhead": trace(1.4, 0.5)})
    assert rows[0]["loss"] == pytest.approx(0.5) and rows[1]["loss"] == pytest.approx(0.1)
    assert rows[1]["weights"] == pytest.approx(0.3)
    assert graph_step_check.verdict(rows).startswith("GRAPHS DIFFER beyond rounding in weights,")


def _trace(loss: float, weight: float) -> graph_step_check.Trace:
    """A one-step trace: its loss, and one weight (the model's and the EMA's)."""
    weights = {"a": torch.tensor([0.0]), "w": torch.tensor([weight])}
    return graph_step_check.Trace([0.5, loss], weights, weights,
                                  {"running_mean": torch.tensor([0.0])}, 0.0)


def test_a_graphed_run_with_a_nan_loss_fails_and_names_the_loss() -> None:
    """NaN is not greater than any rounding gap, and Python's max drops a NaN that is not first:
    a diverged graphed run must fail all the same, and the table say 'non-finite'."""
    traces = {"eager": _trace(1.0, 0.0), "default": _trace(1.1, 0.0),
              "reduce-overhead": _trace(float("nan"), 0.0)}
    rows = graph_step_check.compare(traces)
    assert rows[1]["loss"] != rows[1]["loss"]  # NaN, not the first step's gap of 0
    text = graph_step_check.verdict(rows)
    assert text.startswith("NON-FINITE") and "loss (default / reduce-overhead)" in text
    assert "weights" not in text and "nothing beyond rounding" not in text
    args = argparse.Namespace(steps=2, model="cnn", batch=8, precision="fp32", progress=40.0)
    table = graph_step_check.report("mt", traces, args, "cpu")
    assert "| non-finite | 0 | 0 | 0 |" in table and "nan" not in table


def test_a_graphed_run_with_nan_weights_fails_and_names_the_weights() -> None:
    traces = {"eager": _trace(1.0, 0.0), "default": _trace(1.0, 0.1),
              "reduce-overhead": _trace(1.0, float("nan"))}
    rows = graph_step_check.compare(traces)
    text = graph_step_check.verdict(rows)
    assert text.startswith("NON-FINITE")
    assert "weights, ema_weights (default / reduce-overhead)" in text and "loss" not in text
