"""benchmarks/forward_variants.py's folded batch norm (issue 26's lever for the model's share of
AutoAttack) and benchmarks/autoattack_speed.py's page when wscat's path runs that forward."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from autoattack_speed import render  # noqa: E402
from forward_variants import fold_batch_norm, measure  # noqa: E402

from wscat.models.cnn import SmallCNN  # noqa: E402


def trained_cnn() -> SmallCNN:
    """A CNN whose batch norms hold statistics and affine weights far from the defaults."""
    torch.manual_seed(0)
    model = SmallCNN(1, 10, (0.5,), (0.25,), width=8)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            nn.init.uniform_(module.weight, 0.5, 2.0)
            nn.init.uniform_(module.bias, -1.0, 1.0)
    model.train()
    with torch.no_grad():
        for _ in range(20):
            model(torch.rand(64, 1, 8, 8) * 3)
    return model.eval()


def test_folding_removes_every_batch_norm_and_keeps_the_function() -> None:
    model = trained_cnn()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    folded = fold_batch_norm(model)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 3
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # a copy
    assert not any(p.requires_grad for p in folded.parameters())
    x = torch.rand(100, 1, 8, 8)
    with torch.no_grad():
        (z, logits), (z_folded, logits_folded) = model(x), folded(x)
    torch.testing.assert_close(logits_folded, logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z_folded, z, rtol=1e-5, atol=1e-5)
    assert torch.equal(logits_folded.argmax(1), logits.argmax(1))


def test_measure_reports_eager_as_identical_and_folded_as_not() -> None:
    model = trained_cnn()
    for p in model.parameters():
        p.requires_grad_(False)
    x, y = torch.rand(32, 1, 8, 8), torch.randint(0, 10, (32,))
    rows = measure(model, x, y, rounds=1, repeats=1, compile_too=False)
    assert set(rows) == {"eager", "inference-mode", "folded-bn", "channels-last",
                         "folded-bn+channels-last"}
    assert rows["eager"]["identical"] and rows["eager"]["max_logit_diff"] == 0
    assert rows["inference-mode"]["identical"]
    assert 0 < rows["folded-bn"]["max_logit_diff"] < 1e-4
    assert all(row["forward_ms"] > 0 and row["gradient_ms"] > 0 for row in rows.values())


def fake_run(robust: str, forward: str) -> dict:
    attacks = {"apgd-ce": {"wall_s": 2.0, "cpu_s": 2.0, "points": 4}}
    return {"attacks": attacks, "total": {"wall_s": 4.0, "cpu_s": 4.0}, "n_examples": 4,
            "batch_size": 512, "forward": forward, "robust": robust, "x_adv_sha": forward}


def test_the_page_counts_the_flags_a_folded_forward_moves() -> None:
    args = argparse.Namespace(device="cpu", threads=1, forward="folded-bn")
    runs = [{"method": "wscat", "seed": 1, "library": fake_run("1101", "eager"),
             "wscat": fake_run("1001", "folded-bn")}]
    page = render(runs, args, "cmd")
    assert "wscat's forward folded-bn: 1 flags differ (2 robust)" in page
    assert "`folded-bn` forward" in page
    assert "1 robust flag(s) differ" in page and "identical on every" not in page
    same = [{"method": "wscat", "seed": 1, "library": fake_run("1101", "eager"),
             "wscat": {**fake_run("1101", "eager"), "x_adv_sha": "other"}}]
    assert "**DIFFER**" in render(same, argparse.Namespace(device="cpu", threads=1,
                                                           forward="eager"), "cmd")
    assert "NOT identical" in render(same, argparse.Namespace(device="cpu", threads=1,
                                                              forward="eager"), "cmd")
