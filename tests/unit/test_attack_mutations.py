"""The evaluation attacks against answers known from first principles, on tiny linear models.

Each test here kills mutations of the attack code that the other attack tests let through
(mutation testing of wscat/attacks and wscat/evaluation): every expectation is computed from the
model's weights, not from wscat's code.

On a linear model z = W x + b, an L-inf attack of radius eps on a point x (away from the [0, 1]
box) that only has to beat one other class j moves every pixel by eps in the direction
sign(w_j - w_y): the margin z_y - z_j falls by exactly eps * ||w_y - w_j||_1, and no point of the
ball does better. So a point is robust exactly when its margin exceeds that, and FGSM, PGD
(enough steps), CW and AutoAttack must all find the same flags.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from wscat.attacks import autoattack, ce_objective, cw_objective, fgsm, pgd
from wscat.attacks.shards import autoattack_accuracy
from wscat.evaluation import accuracy, core_suite, correct
from wscat.models import LogitsOnly

EPS = 0.1
FAR = -100.0  # the bias of classes no attack can reach (their logits never matter)


class Linear(nn.Module):
    """(features, logits) of the fixed linear classifier z = W x + b on flattened inputs; records
    the mode of every forward pass."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        self.fc = nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            self.fc.weight.copy_(weight)
            self.fc.bias.copy_(bias)
        self.modes: list[bool] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.modes.append(self.training)
        features = x.flatten(1)
        return features, self.fc(features)


def pairwise(n: int = 24, classes: int = 4, seed: int = 0, fractions=(0.3, 0.6, 1.4, 1.7)):
    """A linear model whose classes 0 and 1 fight over 1x4x4 images (the others sit at FAR), and
    n images in the box's interior whose margin is a known fraction of eps * ||w_1 - w_0||_1.
    Returns the model, images, labels, the direction sign(w_other - w_label) per image, and the
    robust flags (fraction > 1)."""
    g = torch.Generator().manual_seed(seed)
    d = 16
    w = torch.randn(d, generator=g)
    w = w.sign() * (w.abs() + 0.2)  # no pixel without a gradient
    weight = torch.zeros(classes, d)
    weight[1] = w
    bias = torch.full((classes,), FAR)
    bias[0], bias[1] = 0.0, float(-(w * 0.5).sum())  # z_1 - z_0 = w . (x - 0.5)
    reach = EPS * float(w.abs().sum())
    picked = torch.tensor(fractions)[torch.randint(len(fractions), (n,), generator=g)]
    side = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    target = side * picked * reach  # z_1 - z_0 of each image
    h = (torch.rand(n, d, generator=g) * 2 - 1) * 0.05
    alpha = (target - h @ w) / w.abs().sum()
    x = (0.5 + h + alpha[:, None] * w.sign()).reshape(n, 1, 4, 4)
    assert float(x.min()) > EPS + 0.05 and float(x.max()) < 1 - EPS - 0.05
    y = (side > 0).long()
    direction = torch.where(y[:, None] == 1, -w.sign(), w.sign()).reshape(n, 1, 4, 4)
    return Linear(weight, bias).eval(), x, y, direction, picked > 1


# --- the PGD engine --------------------------------------------------------------------------

def test_fgsm_is_one_signed_step_of_eps_from_the_clean_point():
    """x + eps sign(w_j - w_y) exactly; and no random start: under an objective whose gradient
    is zero, FGSM returns x itself."""
    model, x, y, direction, _ = pairwise()
    assert torch.allclose(fgsm(ce_objective(model, y), x, eps=EPS), x + EPS * direction,
                          atol=1e-6)
    assert torch.equal(fgsm(lambda v: (v * 0).sum(), x, eps=EPS), x)


@pytest.mark.parametrize("steps, step_size, moved", [(3, 0.02, 0.06), (7, 0.02, EPS),
                                                     (1, 0.05, 0.05)])
def test_pgd_without_random_start_walks_steps_of_step_size_then_stops_at_eps(steps, step_size,
                                                                            moved):
    """On a pair of classes the signed gradient of the cross-entropy never changes: each step
    moves step_size along it, the projection stops the walk at eps."""
    model, x, y, direction, _ = pairwise()
    x_adv = pgd(ce_objective(model, y), x, eps=EPS, step_size=step_size, steps=steps,
                random_start="none")
    assert torch.allclose(x_adv, x + moved * direction, atol=1e-6)


def test_a_cw_step_that_breaks_no_point_moves_like_the_ce_step():
    """0.02 < 0.3 eps: no point's margin is reached, so the CW margin's gradient is w_j - w_y."""
    model, x, y, direction, _ = pairwise()
    x_adv = pgd(cw_objective(model, y), x, eps=EPS, step_size=0.02, steps=1, random_start="none")
    assert torch.allclose(x_adv, x + 0.02 * direction, atol=1e-6)


def test_every_point_the_objective_sees_is_in_the_ball_and_the_box():
    """PGD evaluates the objective once per step, each time at a feasible point (the random
    start included), even for pixels at 0 and 1, and returns a feasible point."""
    g = torch.Generator().manual_seed(3)
    x = torch.rand(6, 1, 4, 4, generator=g)
    x[0], x[1], x[2, 0, 0] = 0.0, 1.0, 0.02
    weight = torch.randn(3, 16, generator=g) * 5
    model = Linear(weight, torch.zeros(3)).eval()
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    for objective in (ce_objective(model, y), cw_objective(model, y, kappa=50.0)):
        seen = []

        def recorded(v: torch.Tensor, objective=objective) -> torch.Tensor:
            seen.append(v.detach().clone())
            return objective(v)

        x_adv = pgd(recorded, x, eps=0.3, step_size=0.07, steps=9,
                    generator=torch.Generator().manual_seed(0))
        assert len(seen) == 9
        for v in [*seen, x_adv]:
            assert float((v - x).abs().max()) <= 0.3 + 1e-6
            assert float(v.min()) >= 0.0 and float(v.max()) <= 1.0


def test_the_uniform_random_start_fills_the_eps_ball():
    """With a zero gradient PGD stays at its random start: uniform on [-eps, eps] per pixel."""
    x = torch.full((4000,), 0.5)
    delta = pgd(lambda v: (v * 0).sum(), x, eps=EPS, step_size=0.01, steps=1,
                generator=torch.Generator().manual_seed(0)) - x
    assert float(delta.abs().max()) <= EPS + 1e-6
    assert float(delta.min()) < -0.95 * EPS and float(delta.max()) > 0.95 * EPS
    quarters = torch.histc(delta, bins=4, min=-EPS, max=EPS) / len(delta)
    assert torch.all((quarters - 0.25).abs() < 0.03), quarters


def test_the_same_generator_seed_gives_the_same_attack_whatever_the_global_seed():
    """One step of 0.01 from the random start: which points flip depends on the start, so the
    flags are a fingerprint of the generator; the global RNG must not enter."""
    model, x, y, _, _ = pairwise(n=60, fractions=(0.1, 0.15))
    runs = {}
    with torch.random.fork_rng():  # the global seeds set here stay here
        for attack in ("PGD", "CW"):
            for global_seed, seed in ((1, 0), (2, 0), (3, 1)):
                torch.manual_seed(global_seed)
                runs[attack, global_seed] = correct(
                    model, x, y, attack=attack, eps=EPS, step_size=0.01, steps=1, batch_size=16,
                    generator=torch.Generator().manual_seed(seed))
            assert torch.equal(runs[attack, 1], runs[attack, 2])
            assert not torch.equal(runs[attack, 1], runs[attack, 3])  # the start does matter
            assert 0 < int(runs[attack, 1].sum()) < len(y)
        points = []
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)
            points.append(pgd(ce_objective(model, y), x, eps=EPS, step_size=0.01, steps=1,
                              generator=torch.Generator().manual_seed(0)))
    assert torch.equal(*points)


# --- the objectives --------------------------------------------------------------------------

def test_the_cw_objective_caps_the_margin_at_its_kappa():
    logits = torch.tensor([[2.0, 1.0, 0.5], [0.0, 3.0, 1.0], [1.0, 1.0, 4.0], [0.0, 9.0, 1.0]])
    labels = torch.tensor([0, 0, 2, 0])
    model = lambda v: (v, v)  # noqa: E731  (features, logits) = the input itself
    # max other - true per row: -1, 3, -3, 9
    assert float(cw_objective(model, labels)(logits)) == -1 + 0 - 3 + 0
    assert float(cw_objective(model, labels, kappa=5.0)(logits)) == -1 + 3 - 3 + 5


def many_classes(n: int = 20) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """Class 0 is right at x = 0.5 (one pixel). Class 1 (logit -0.5 + 10 (x - 0.5)) is the
    largest other logit everywhere in the ball of 0.1 and beats class 0 at x + 0.1; 100 classes
    (logit -2.7 - 10 (x - 0.5)) carry more softmax weight than class 1 everywhere in the ball
    (ln 100 = 4.6 > 2.2 + 2). The CW margin's gradient points to class 1 (x up), the
    cross-entropy's to the 100 (x down): CW breaks every point, CE none."""
    weight = torch.tensor([[0.0], [10.0], *[[-10.0]] * 100])
    bias = torch.tensor([0.0, -5.5, *[-2.7 + 5.0] * 100])
    return Linear(weight, bias).eval(), torch.full((n, 1), 0.5), torch.zeros(n, dtype=torch.long)


def test_cw_follows_the_largest_other_logit_and_ce_the_softmax_mixture():
    model, x, y = many_classes()
    common = dict(eps=EPS, step_size=0.025, steps=10, generator=torch.Generator().manual_seed(0))
    assert accuracy(model, x, y) == 100.0
    assert accuracy(model, x, y, attack="CW", **common) == 0.0
    assert accuracy(model, x, y, attack="PGD", **common) == 100.0
    assert accuracy(model, x, y, attack="FGSM", eps=EPS) == 100.0


# --- the accuracies, flags and suite ---------------------------------------------------------

def test_accuracy_under_each_attack_is_the_closed_form():
    model, x, y, _, robust = pairwise(n=40)
    assert 0 < int(robust.sum()) < len(y)
    assert torch.equal(correct(model, x, y, batch_size=16), torch.ones(40, dtype=torch.bool))
    steps = dict(step_size=0.025, steps=10)  # 10 x 0.025 >= 2 eps: any start reaches the corner
    for attack, extra in (("FGSM", {}), ("PGD", steps), ("CW", steps)):
        flags = correct(model, x, y, attack=attack, eps=EPS, batch_size=16,
                        generator=torch.Generator().manual_seed(0), **extra)
        assert torch.equal(flags, robust), attack
        assert accuracy(model, x, y, attack=attack, eps=EPS, batch_size=16, **extra,
                        generator=torch.Generator().manual_seed(0)) == pytest.approx(
                            100.0 * int(robust.sum()) / 40)


def test_no_forward_pass_of_an_attack_runs_in_train_mode():
    model, x, y, _, _ = pairwise(n=8)
    for attack in ("Natural", "FGSM", "PGD", "CW"):
        model.modes.clear()
        correct(model, x, y, attack=attack, eps=EPS, step_size=0.025, steps=4,
                generator=torch.Generator().manual_seed(0))
        assert model.modes and not any(model.modes), attack
        assert not model.training


def test_the_core_suite_on_a_linear_model_reads_the_closed_form(monkeypatch):
    """Every column, the harmonic Mean and the per-image flags (in the given order) from the
    closed form; AutoAttack on the first n_examples, in shards whose flags are joined in order. The library's
    attack is replaced by the optimal one (the corner): its Square would take seconds on every
    robust point."""
    from pyautoattack import AutoAttack

    model, x, y, _, robust = pairwise(n=24)
    weight = model.fc.weight.detach()

    def optimal(self, x_in, y_in, *, batch_size=250, state_path=None):
        direction = (weight[1 - y_in] - weight[y_in]).sign().reshape(x_in.shape)
        return (x_in + EPS * direction).clamp(0, 1), y_in

    monkeypatch.setattr(AutoAttack, "run_standard_evaluation", optimal)
    n_aa = 11
    assert not torch.equal(robust[:n_aa], robust[-n_aa:])
    evaluation = {"batch_size": 8, "subset_seed": 0, "pgd_steps": 10, "cw_steps": 10,
                  "autoattack": {"n_examples": n_aa, "seed": 0, "shard_size": 4}}
    suite = core_suite(model, x, y, eps=EPS, step_size=0.025, evaluation=evaluation, seed=0)
    rate = 100.0 * int(robust.sum()) / len(y)
    expected = {"Natural": 100.0, "FGSM": rate, "PGD": rate, "CW": rate,
                "AA": 100.0 * int(robust[:n_aa].sum()) / n_aa}
    for name, value in expected.items():
        assert suite.accuracy[name] == pytest.approx(value), name
    assert suite.accuracy["Mean"] == pytest.approx(5 / sum(1 / v for v in expected.values()))
    as_text = lambda flags: "".join("1" if f else "0" for f in flags.tolist())  # noqa: E731
    assert suite.per_image == {"Natural": "1" * n_aa, "FGSM": as_text(robust[:n_aa]),
                               "PGD": as_text(robust[:n_aa]), "CW": as_text(robust[:n_aa]),
                               "AA": as_text(robust[:n_aa])}
    assert suite.attacks["AA"]["n_examples"] == n_aa and suite.attacks["AA"]["shards"] == 3


@pytest.mark.parametrize("variant", ["standard", "paper"])
def test_the_real_autoattack_breaks_every_point_within_reach(variant):
    """Points whose margin is below eps * ||w_1 - w_0||_1: the library's first attack breaks
    them all, and the recount on its points says so."""
    model, x, y, _, robust = pairwise(n=6, fractions=(0.3, 0.6))
    assert not robust.any()
    result = autoattack_accuracy(model, x, y, variant=variant, eps=EPS, seed=0, batch_size=8,
                                 shard_size=4)
    assert result.accuracy == 0.0 and result.robust == [False] * 6 and result.clean == 100.0


def test_the_standard_version_targets_every_other_class_below_ten_classes():
    """With 4 classes there are 3 targets (9 would index past the logits)."""
    model, _, _, _, _ = pairwise()
    adversary = autoattack.build(LogitsOnly(model), variant="standard", eps=EPS, seed=0,
                                 n_classes=4, device=torch.device("cpu"))
    assert adversary.apgd_targeted.n_target_classes == adversary.fab.n_target_classes == 3


# --- AutoAttack's checks on what the library returns -----------------------------------------

def run_shard_returning(x_adv: torch.Tensor, model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """wscat's checks and recount of one shard, the library's result replaced by `x_adv`."""
    logits = LogitsOnly(model).eval()
    adversary = autoattack.build(logits, variant="standard", eps=EPS, seed=0, n_classes=4,
                                 device=torch.device("cpu"))
    adversary.run_standard_evaluation = lambda x_in, y_in, batch_size: (x_adv, y_in)
    return autoattack.run_shard(adversary, logits, x, y, eps=EPS, batch_size=8)


def test_autoattack_s_points_are_recounted_and_the_ball_s_edge_is_in():
    """x + eps in float32 lies up to an ulp outside the ball: accepted. The robust flags are
    our forward pass on the returned points, each against its own label."""
    model, x, y, direction, robust = pairwise(n=20)
    corner = x + EPS * direction
    assert float((corner - x).abs().max()) > EPS  # rounding: the edge reads a little beyond
    result = run_shard_returning(corner, model, x, y)
    assert result.robust == robust.tolist()
    assert run_shard_returning(x, model, x, y).robust == [True] * 20


@pytest.mark.parametrize("where", ["outside the ball", "above 1", "below 0"])
def test_autoattack_s_points_outside_the_ball_or_the_box_are_refused(where):
    """5% beyond eps, or inside the ball but beyond [0, 1] (one pixel): refused."""
    model, x, y, direction, _ = pairwise(n=20)
    if where == "outside the ball":
        x_adv = x + 1.05 * EPS * direction
    else:
        x = x.clone()
        x[3, 0, 0, 0] = 0.97 if where == "above 1" else 0.03
        x_adv = x.clone()
        x_adv[3, 0, 0, 0] = 1.02 if where == "above 1" else -0.02
    with pytest.raises(RuntimeError, match="outside the eps-ball or"):
        run_shard_returning(x_adv, model, x, y)
