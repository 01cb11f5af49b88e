"""benchmarks/graph_step_check.py: it compares three runs of the trainer's step and flags a
graphed run that parts from the compiled one. torch.compile is replaced here (a CPU has no CUDA
graphs, and compiling costs CI a minute); the GPU run is the real check."""
from __future__ import annotations

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
