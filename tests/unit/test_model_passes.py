"""benchmarks/model_passes.py: what AutoAttack asks of the model, recorded and replayed alone
(`autoattack_speed.py --model-passes`, issue 26's floor)."""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from model_passes import PassRecorder, replay, tally  # noqa: E402


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 5)).eval()


def test_the_recorder_counts_each_pass_and_whether_a_gradient_went_through_it() -> None:
    inner = _model()
    recorder = PassRecorder(inner)
    x = torch.rand(6, 3, 2, 2)
    recorder.current = "apgd-t"
    point = x.clone().requires_grad_(True)
    out = recorder(point)
    assert torch.equal(out, inner(point))  # the same logits: the recorder only watches
    torch.autograd.grad(nn.functional.cross_entropy(out, torch.zeros(6, dtype=torch.long)),
                        point)
    recorder(x[:4].clone().requires_grad_(True))  # a graph built, never used: a forward
    recorder.current = "square"
    with torch.no_grad():
        recorder(x[:3])
        recorder(x[:2])
    recorder.current = None
    recorder(x)
    assert [(c["attack"], c["n"], c["backward"]) for c in recorder.calls] == [
        ("apgd-t", 6, True), ("apgd-t", 4, False), ("square", 3, False), ("square", 2, False),
        (None, 6, False)]
    assert tally(recorder.calls) == {
        "apgd-t": {"forward": 1, "gradient": 1, "images": 10},
        "square": {"forward": 2, "gradient": 0, "images": 5},
        "None": {"forward": 1, "gradient": 0, "images": 6}}


def test_the_replay_runs_every_pass_again_at_its_batch_size() -> None:
    sizes: list[tuple[int, bool]] = []
    inner = _model()
    inner.register_forward_hook(lambda m, args, out: sizes.append((len(args[0]),
                                                                   torch.is_grad_enabled())))
    calls = [{"attack": "fab-t", "n": 9, "backward": True},
             {"attack": "fab-t", "n": 9, "backward": False},
             {"attack": "square", "n": 4, "backward": False}]
    spent = replay(inner, torch.rand(5, 3, 2, 2), calls)  # 9 > 5 images: repeated
    assert sizes == [(9, True), (9, False), (4, False)]
    assert set(spent) == {"fab-t", "square"}
    assert all(entry["wall_s"] >= 0 and entry["cpu_s"] >= 0 for entry in spent.values())


def test_the_speed_page_shows_the_model_passes_and_their_share_of_the_library() -> None:
    import argparse

    from autoattack_speed import render

    def run(seconds: float) -> dict:
        return {"attacks": {"apgd-ce": {"wall_s": seconds, "cpu_s": seconds, "points": 4}},
                "total": {"wall_s": seconds, "cpu_s": seconds}, "n_examples": 4,
                "batch_size": 512, "forward": "eager", "robust": "1101", "x_adv_sha": "a"}

    wscat = {**run(6.0), "model_passes": {
        "count": {"apgd-ce": {"forward": 3, "gradient": 1200, "images": 5}},
        "alone": {"apgd-ce": {"wall_s": 4.5, "cpu_s": 4.0}}}}
    page = render([{"method": "wscat", "seed": 1, "library": run(10.0), "wscat": wscat}],
                  argparse.Namespace(device="cpu", threads=1, forward="eager"), "cmd")
    assert "| model passes alone s | passes |" in page
    assert ("| wscat seed 1 | apgd-ce | 4 | 10.0 (10.0) | 6.0 (6.0) | 0.60 | 4.5 (4.0) "
            "| 3 / 1,200 |") in page
    assert "replayed alone, took 4.0 s of CPU: 40% of the library's time" in page
    plain = render([{"method": "wscat", "seed": 1, "library": run(10.0), "wscat": run(6.0)}],
                   argparse.Namespace(device="cpu", threads=1, forward="eager"), "cmd")
    assert "model passes" not in plain
