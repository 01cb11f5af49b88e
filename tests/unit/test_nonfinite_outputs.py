"""A model whose logits are NaN or inf (finite weights that overflow: every weight x 1e12) once
got Natural=10.00 from `wscat evaluate` (argmax of NaN is class 0), labels from `wscat
pseudo-label` and scores from `wscat validate`, exit 0. Each now refuses it in one line naming
the checkpoint and how many images, exit 2, nothing written; the evaluation checks the clean
pass and each attack's final adversarial logits (AutoAttack's recount and NRF's too), without a
synchronisation per step. The trainer's per-epoch validation of the EMA model stops the run on
them, as on a diverged step."""
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
    # Without `finite`, the flags come as before: no refusal.
    assert len(correct(model, x, y, attack="FGSM", eps=0.1)) == 6


class OffGridNaN(nn.Module):
    """x on images of 8-bit pixels (k/255), NaN on any other."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        off = ((x * 255 - (x * 255).round()).abs() > 1e-3).flatten(1).any(1)
        return torch.where(off[:, None, None, None], torch.full_like(x, float("nan")), x)


class OffGridNet(nn.Module):
    """OffGrid as a wscat model is built, classifier(features(normalize(x))) with 10 classes
    (what AutoAttack's targeted attacks and NRF's split need): finite logits on the clean images,
    NaN on an attack's."""

    def __init__(self) -> None:
        super().__init__()
        with torch.random.fork_rng():  # the same weights every time, the global seed untouched
            torch.manual_seed(0)
            self.normalize = OffGridNaN()
            self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                                          nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.Flatten())
            self.classifier = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(self.normalize(x))
        return features, self.classifier(features)


def _on_grid(n: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(1, 255, (n, 1, 2, 2), generator=torch.Generator().manual_seed(0)) / 255
    return x, torch.arange(n) % 10


@pytest.mark.parametrize("variant, column", [("standard", "AA"), ("paper", "AA-paper")])
def test_autoattack_s_nan_logits_are_refused_and_no_shard_is_kept(tmp_path, variant,
                                                                  column) -> None:
    """The robust flags AutoAttack's x_adv get from our own recount: NaN there once read as
    class 0 (robust wherever the label is 0)."""
    from wscat.attacks.shards import autoattack_accuracy
    from wscat.inference import NonFiniteOutputs

    model, (x, y) = OffGridNet().eval(), _on_grid()
    assert torch.isfinite(model(x)[1]).all()
    with pytest.raises(NonFiniteOutputs, match=rf"^the model's outputs are NaN or inf on \d of 6 "
                                               rf"images under {column};"):
        autoattack_accuracy(model, x, y, variant=variant, eps=0.1, seed=0, batch_size=4,
                            shard_size=6, shard_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the shard is not kept as finished


def test_nrf_s_nan_logits_are_refused() -> None:
    from wscat.attacks.nrf import nrf_accuracy

    model, (x, y) = OffGridNet().eval(), _on_grid()
    config = {"layer": "auto", "ib_steps": 2, "ib_lr": 0.1, "ib_beta": 0.3, "steps": 3,
              "weight": 1.0}
    with pytest.raises(ValueError, match=r"^the model's outputs are NaN or inf on 6 of 6 images "
                                         r"under NRF;"):
        nrf_accuracy(model, x, y, eps=0.1, step_size=0.02, config=config, batch_size=4,
                     generator=torch.Generator().manual_seed(0))


def test_validate_s_pgd_refuses_nan_logits() -> None:
    """Fig-beta's validation numbers (`wscat validate`): PGD's adversarial logits were read as
    class 0 where only the clean pass was checked."""
    from wscat.analysis import validation_accuracies

    model, (x, y) = OffGridNet().eval(), _on_grid()
    with pytest.raises(ValueError, match=r"^the model's outputs are NaN or inf on 6 of 6 images "
                                         r"under PGD;"):
        validation_accuracies(model, x, y, eps=0.1, step_size=0.02, steps=3, batch_size=4,
                              seed=0, finite=True)


def test_nan_validation_outputs_stop_the_training_and_keep_the_last_good_epoch(
        runs, capsys, monkeypatch, tmp_path) -> None:  # noqa: F811
    """The EMA model's per-epoch validation once scored NaN logits as class 0 (and could keep
    them as best.pt); they now stop the run as a diverged step does, epoch 2 of 2 here."""
    from wscat.training import trainer

    real = trainer._one_epoch

    def overflowing_ema(training: trainer._Training, step_model: nn.Module, pool: object,
                        run: object, epoch: int) -> dict:
        row = real(training, step_model, pool, run, epoch)
        if epoch == 1:  # epoch 2's updates left finite weights whose outputs overflow
            with torch.no_grad():
                for name, value in training.ema.state_dict().items():
                    if name.endswith("weight"):
                        value.mul_(1e12)
        return row

    monkeypatch.setattr(trainer, "_one_epoch", overflowing_ema)
    out = tmp_path / "run"
    capsys.readouterr()
    code = _main("train", "--params", runs / "params.yaml", "--dataset", "digits", "--model",
                 "cnn", "--method", "standard", "--seed", 1, "--split", runs / "s1.npz",
                 "--device", "cpu", "--out-dir", out)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("wscat train: error: training standard seed 1 diverged at epoch 2: "
                           "its EMA model's outputs are NaN or inf on "), line
    assert "validation images; resume/last.pt (epoch 1) is kept; lower training.digits.lr" in line
    assert not (out / "best.pt").exists() and not (out / "last.pt").exists()  # never a NaN model
    assert sorted(p.name for p in (out / "resume").iterdir()) == ["best.pt", "last.pt"]
    assert load_checkpoint(out / "resume/last.pt")["epoch"] == 0  # finite, else refused
    assert load_checkpoint(out / "resume/best.pt")["epoch"] == 1
