"""NRF (Kim et al. 2021): the model split, the bottleneck's channel rule on a hand-built head,
the attack's gradient against an explicit computation, the eps-ball, and weight 0 = CW."""
import pytest
import torch
from torch import nn

from wscat.attacks import cw_margin, cw_objective, pgd
from wscat.attacks.nrf import non_robust_channels, nrf_objective, split_model
from wscat.models import build_model


def _model(architecture: str = "cnn", **options):
    torch.manual_seed(0)
    return build_model(architecture, in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,),
                       **options).eval()


@pytest.mark.parametrize("architecture, options, shape", [
    ("cnn", {"width": 8}, (16, 4, 4)),                   # block 2 of 3
    ("wideresnet", {"depth": 10, "width": 1}, (32, 4, 4)),  # stem + 3 blocks: block 2
    ("resnet", {"depth": 18}, (128, 4, 4)),              # stem + 6 spatial blocks: stage 2's first
])
def test_split_reproduces_the_logits_at_a_middle_feature_map(architecture, options, shape):
    model = _model(architecture, **options)
    x = torch.rand(3, 1, 8, 8)
    split = split_model(model, x)
    z = split.front(x)
    assert tuple(z.shape[1:]) == shape and split.channels == shape[0]
    assert torch.allclose(split.tail(z), model(x)[1], atol=1e-5)


def test_split_names_the_layers_it_accepts():
    model = _model(width=8)
    assert split_model(model, torch.rand(1, 1, 8, 8), "features.2").layer == "features.2"
    with pytest.raises(ValueError, match="valid: auto, last, features.0, features.1, features.2"):
        split_model(model, torch.rand(1, 1, 8, 8), "features.3")


@pytest.mark.parametrize("architecture, options, layer, kind", [
    ("cnn", {"width": 8}, "features.2", "Sequential"),
    ("wideresnet", {"depth": 10, "width": 1}, "features.4", "BatchNorm2d"),  # after the last BN
    ("resnet", {"depth": 18}, "features.10", "BasicBlock"),                  # layer4's output
])
def test_last_is_where_kim_et_al_and_the_release_cut(architecture, options, layer, kind):
    """`last`: their code's `pop_number=3`, the last stage's map (WRN: after its final batch
    norm, before the ReLU), which `auto` and features.K (BN outputs excluded) cannot name."""
    model = _model(architecture, **options)
    x = torch.rand(3, 1, 32, 32)  # CIFAR's size: ResNet's last stage is still 4 x 4
    split = split_model(model, x, "last")
    assert split.layer == layer
    assert type(model.features[int(layer.split(".")[1])]).__name__ == kind
    assert torch.allclose(split.tail(split.front(x)), model(x)[1], atol=1e-5)


def test_bottleneck_rule_on_a_hand_built_head():
    """Class 0's logit reads channel 0 linearly and channel 1 squared; channel 2 is ignored.
    Noise on channel 0 only hurts (sigma shrinks: non-robust); noise on channel 1 raises the
    true logit, so its sigma grows past every channel's variance (robust); channel 2's sigma
    settles at its own variance, below the maximum (non-robust, Kim et al.'s rule)."""

    def tail(z):
        pooled = z.mean(dim=(2, 3))
        class0 = 3 * pooled[:, 0] + (z[:, 1] ** 2).mean(dim=(1, 2))
        return torch.stack([class0, torch.zeros_like(class0)], dim=1)

    z = torch.randn(4, 3, 4, 4, generator=torch.Generator().manual_seed(0)) * 0.3
    labels = torch.zeros(4, dtype=torch.long)
    mask = non_robust_channels(tail, z, labels, steps=200, lr=0.1, beta=0.3,
                               generator=torch.Generator().manual_seed(0))
    assert mask.tolist() == [[True, False, True]] * 4
    # beta 30: the KL holds channel 1's sigma^2 at its variance too (all flagged); lr 0.001:
    # sigma^2 barely leaves softplus(0)^2 = 0.48, above every channel's variance (~0.09).
    for beta, lr, row in ((30.0, 0.1, [True] * 3), (0.3, 0.001, [False] * 3)):
        mask = non_robust_channels(tail, z, labels, steps=200, lr=lr, beta=beta,
                                   generator=torch.Generator().manual_seed(0))
        assert mask.tolist() == [row] * 4, (beta, lr)


def test_nrf_accuracy_attacks_with_the_bottleneck_s_mask_and_the_config_s_weight(monkeypatch):
    """The attack's objective gets the mask the bottleneck found (not all channels) and
    `weight`; the rest of the plumbing: test_api_attacks_mutations.py."""
    from wscat.attacks import nrf

    model = _model(width=8)
    x, y = torch.rand(5, 1, 8, 8), torch.arange(5)
    config = {"layer": "auto", "ib_steps": 1, "ib_lr": 0.1, "ib_beta": 0.3, "steps": 2,
              "weight": 0.4}
    seen = {}

    def bottleneck(tail, z, labels, **kwargs):
        mask = torch.zeros(len(z), z.shape[1], dtype=torch.bool)
        mask[:, :3] = True  # 3 of 16 channels
        return mask

    def objective(split, labels, mask, weight):
        seen["mask"], seen["weight"] = mask.clone(), weight
        return cw_objective(model, labels)

    monkeypatch.setattr(nrf, "non_robust_channels", bottleneck)
    monkeypatch.setattr(nrf, "nrf_objective", objective)
    nrf.nrf_accuracy(model, x, y, eps=0.1, step_size=0.02, config=config, batch_size=8,
                     generator=torch.Generator().manual_seed(0))
    assert seen["mask"].sum(dim=1).tolist() == [3] * 5 and seen["weight"] == 0.4


def test_nrf_gradient_boosts_the_non_robust_channels():
    """d objective / d x = J^T (g + w ||g|| m g / ||m g||), computed here without the objective."""
    model = _model(width=8)
    x = torch.rand(5, 1, 8, 8, requires_grad=True)
    y = model(x)[1].argmax(1)  # correctly classified: the margin has a gradient
    split = split_model(model, x.detach())
    mask = torch.rand(5, split.channels, generator=torch.Generator().manual_seed(2)) > 0.5
    weight = 0.7
    (got,) = torch.autograd.grad(nrf_objective(split, y, mask, weight)(x), x)

    z = split.front(x)
    margin = cw_margin(split.tail(z), y).sum()
    (g,) = torch.autograd.grad(margin, z, retain_graph=True)
    masked = g * mask[:, :, None, None]
    direction = g + weight * masked * (g.flatten(1).norm(dim=1)
                                       / masked.flatten(1).norm(dim=1))[:, None, None, None]
    (expected,) = torch.autograd.grad(z, x, grad_outputs=direction)
    assert torch.allclose(got, expected, atol=1e-6)


def test_nrf_stays_in_the_ball_and_weight_zero_is_cw():
    model = _model(width=8)
    x, y = torch.rand(6, 1, 8, 8), torch.arange(6)
    split = split_model(model, x)
    mask = torch.ones(6, split.channels, dtype=torch.bool)
    adv = pgd(nrf_objective(split, y, mask, 1.0), x, eps=0.1, step_size=0.02, steps=10,
              generator=torch.Generator().manual_seed(0))
    assert float((adv - x).abs().max()) <= 0.1 + 1e-6 and 0 <= float(adv.min()) <= float(adv.max()) <= 1
    plain = pgd(nrf_objective(split, y, mask, 0.0), x, eps=0.1, step_size=0.02, steps=10,
                generator=torch.Generator().manual_seed(0))
    cw = pgd(cw_objective(model, y), x, eps=0.1, step_size=0.02, steps=10,
             generator=torch.Generator().manual_seed(0))
    assert torch.equal(plain, cw)


def test_nrf_needs_a_splittable_model():
    class Plain(nn.Module):
        def forward(self, x):
            return x.flatten(1), x.flatten(1)[:, :10]

    with pytest.raises(ValueError, match="classifier\\(features\\(normalize"):
        split_model(Plain(), torch.rand(1, 1, 8, 8))
