"""The PGD engine: stays in the eps-ball and [0,1], lowers accuracy, needs eval mode; BN freezing;
the CW margin."""
import pytest
import torch

from wscat.attacks import (ce_objective, cw_margin, cw_objective, eval_mode_enforced, fgsm,
                           frozen_batchnorm_stats, pgd)
from wscat.evaluation import accuracy, harmonic_mean
from wscat.models import build_model


def _model():
    torch.manual_seed(0)
    return build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,)).eval()


def test_pgd_stays_in_ball_and_unit_box():
    model = _model()
    x = torch.rand(8, 1, 8, 8)
    y = torch.randint(0, 10, (8,))
    for objective in (ce_objective(model, y), cw_objective(model, y)):
        x_adv = pgd(objective, x, eps=0.1, step_size=0.05, steps=5,
                    generator=torch.Generator().manual_seed(0))
        assert float((x_adv - x).abs().max()) <= 0.1 + 1e-6
        assert float(x_adv.min()) >= 0.0 and float(x_adv.max()) <= 1.0
    x_fgsm = fgsm(ce_objective(model, y), x, eps=0.1)
    assert float((x_fgsm - x).abs().max()) <= 0.1 + 1e-6


def test_pgd_increases_the_loss_and_eps_zero_is_natural():
    model = _model()
    x, y = torch.rand(32, 1, 8, 8), torch.randint(0, 10, (32,))
    objective = ce_objective(model, y)
    x_adv = pgd(objective, x, eps=0.2, step_size=0.05, steps=10,
                generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert float(objective(x_adv)) > float(objective(x))
    assert accuracy(model, x, y, attack="PGD", eps=0.0, step_size=0.0, steps=10) == accuracy(model, x, y)


def test_attacks_refuse_a_model_in_train_mode():
    model = _model().train()
    with pytest.raises(RuntimeError, match="eval mode"):
        accuracy(model, torch.rand(4, 1, 8, 8), torch.zeros(4, dtype=torch.long))


def test_eval_mode_is_enforced_on_every_forward_pass():
    model = _model()
    with eval_mode_enforced(model):
        model(torch.rand(2, 1, 8, 8))
        model.features[1].train()
        with pytest.raises(RuntimeError, match="train mode"):
            model(torch.rand(2, 1, 8, 8))
    model(torch.rand(2, 1, 8, 8))  # the hooks are gone afterwards
    with pytest.raises(RuntimeError, match="eval mode"):
        with eval_mode_enforced(model):
            pass


def test_cw_margin_by_hand():
    logits = torch.tensor([[2.0, 1.0, 0.5], [0.0, 3.0, 1.0], [1.0, 1.0, 4.0]])
    labels = torch.tensor([0, 0, 2])
    # max other - true, capped at kappa: 1 - 2 = -1; 3 - 0 = 3 -> 0; 1 - 4 = -3
    assert cw_margin(logits, labels).tolist() == [-1.0, 0.0, -3.0]
    assert cw_margin(logits, labels, kappa=5.0).tolist() == [-1.0, 3.0, -3.0]


def test_frozen_batchnorm_keeps_running_statistics():
    model = _model().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with frozen_batchnorm_stats(model):
        model(torch.rand(16, 1, 8, 8))
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    model(torch.rand(16, 1, 8, 8))  # outside the context, statistics move again
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_harmonic_mean():
    assert harmonic_mean([50.0, 100.0]) == pytest.approx(2 / (1 / 50 + 1 / 100))
    assert harmonic_mean([0.0, 90.0]) == 0.0
