"""A model whose logits are NaN or inf (finite weights that overflow: every weight x 1e12) once
got Natural=10.00 from `wscat evaluate` (argmax of NaN is class 0), labels from `wscat
pseudo-label` and scores from `wscat validate`, exit 0. Each now refuses it in one line naming
the checkpoint and how many images, exit 2, nothing written; the evaluation checks the clean
pass and each attack's final adversarial logits, without a synchronisation per step."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tests.unit.test_unfinished_runs import _main, refused, runs  # noqa: F401
from wscat import api
from wscat.checkpoint import load_checkpoint, save_tensors


@pytest.fixture(scope="module")
def overflowing(runs: Path) -> Path:  # noqa: F811 - the fixture imported above
    """run/best.pt with every weight of its EMA model times 1e12: finite weights, NaN logits."""
    state = load_checkpoint(runs / "run/best.pt")
    state["ema"] = {name: value * 1e12 if name.endswith("weight") else value
                    for name, value in state["ema"].items()}
    path = runs / "overflow/best.pt"
    path.parent.mkdir()
    save_tensors(path, state)
    return path


def _line(checkpoint: Path, images: str, total: int) -> str:
    return (f"{checkpoint}: the model's outputs are NaN or inf on {total} of {total} {images}; "
            "its weights overflow: retrain it (with a lower learning rate)")


def _common(runs: Path, checkpoint: Path) -> list[object]:  # noqa: F811
    return ["--params", runs / "params.yaml", "--dataset", "digits", "--model", "cnn",
            "--seed", 1, "--split", runs / "s1.npz", "--checkpoint", checkpoint,
            "--device", "cpu"]


@pytest.mark.parametrize("part", ["core", "all"])
def test_evaluate_refuses_nan_logits(runs, overflowing, capsys, tmp_path,  # noqa: F811
                                     part) -> None:
    out = tmp_path / "m.json"
    line = refused(capsys, "evaluate", *_common(runs, overflowing), "--method", "standard",
                   "--out", out, "--part", part)
    assert line.endswith(_line(overflowing, "test images", 40)), line
    assert list(tmp_path.iterdir()) == []  # no metrics, no AutoAttack shards


def test_pseudo_label_and_validate_refuse_nan_logits(runs, overflowing, capsys,  # noqa: F811
                                                     tmp_path) -> None:
    line = refused(capsys, "pseudo-label", *_common(runs, overflowing), "--labeler", "standard",
                   "--out", tmp_path / "p.npz", "--metrics", tmp_path / "p.json")
    assert "the model's outputs are NaN or inf on" in line and "unlabelled images;" in line, line
    assert line.startswith(f"wscat pseudo-label: error: {overflowing}: "), line
    line = refused(capsys, "validate", *_common(runs, overflowing), "--method", "standard",
                   "--out", tmp_path / "v.json")
    assert "the model's outputs are NaN or inf on" in line and "validation images;" in line, line
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_nan_logits(runs, overflowing, tmp_path) -> None:  # noqa: F811
    net, _ = api.load_model(overflowing)
    with pytest.raises(ValueError, match=r"^the model's outputs are NaN or inf on 4 of 4 images"):
        api.predict(net, torch.rand(4, 1, 8, 8))
    params = api.load_params(runs / "params.yaml")
    with pytest.raises(ValueError) as refusal:
        api.evaluate_checkpoint(overflowing, params=params, out=tmp_path / "m.json",
                                device="cpu")
    assert str(refusal.value) == _line(overflowing, "test images", 40)
    assert list(tmp_path.iterdir()) == []
    assert not (overflowing.parent / "split-seed1.npz").exists()  # the split it made: removed


def test_the_extra_part_refuses_nan_logits_before_any_attack(runs, overflowing,  # noqa: F811
                                                             monkeypatch) -> None:
    from wscat import evaluation
    from wscat.config import evaluation_for

    def no_attack(*args: object, **kwargs: object) -> None:
        raise AssertionError("an attack ran on a model whose clean logits are NaN")

    monkeypatch.setattr(evaluation, "autoattack_accuracy", no_attack)
    monkeypatch.setattr(evaluation, "nrf_accuracy", no_attack)
    net, _ = api.load_model(overflowing)
    params = api.load_params(runs / "params.yaml")
    x, y = torch.rand(8, 1, 8, 8), torch.arange(8) % 10
    with pytest.raises(ValueError, match=r"^the model's outputs are NaN or inf on 8 of 8 images;"):
        evaluation.extra_suite(net, x, y, core=no_attack, eps=0.1, step_size=0.01,
                               evaluation=evaluation_for(params, "digits"), seed=1)


class OffGrid(nn.Module):
    """A model whose logits are finite on images of 8-bit pixels (k/255) and NaN on any other:
    an attack's perturbed images, never the clean ones."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.flatten(1)
        logits = self.linear(flat)
        off = ((flat * 255 - (flat * 255).round()).abs() > 1e-3).any(1, keepdim=True)
        return flat, torch.where(off, torch.full_like(logits, float("nan")), logits)


def test_an_attack_s_nan_logits_are_refused_and_clean_ones_pass() -> None:
    from wscat.evaluation import correct

    model = OffGrid().eval()
    x = torch.randint(1, 255, (6, 1, 2, 2), generator=torch.Generator().manual_seed(0)) / 255
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    assert len(correct(model, x, y, finite=True)) == 6  # clean: on the grid, finite
    with pytest.raises(ValueError, match=r"^the model's outputs are NaN or inf on \d of 6 images "
                                         r"under FGSM;"):
        correct(model, x, y, attack="FGSM", eps=0.1, finite=True)
    # Without `finite` (the trainer's validation), the flags come as before: no refusal.
    assert len(correct(model, x, y, attack="FGSM", eps=0.1)) == 6
