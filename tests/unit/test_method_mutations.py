"""Mutation tests for wscat/losses.py and wscat/methods/*.py: each test kills mutants that survived
the existing suites (tests/unit/test_losses.py, test_methods.py, test_wscat_reference.py,
test_baseline_references.py, test_puat.py), with expected values worked out by hand from the
paper (wscat-cvpr2025.tex, Eq. 7-9), docs/official-code.md / official-code-notes.md and the
methods' documented contracts; nothing here calls the function under test to get its expectation.

What is checked, and from which fact:
- RLFAT's L_RLFT (Song et al. 2020, Eq. 9) is computed in float32 even on bf16 logits (losses.py's
  contract): 255^2 = 65025 is exact in float32, not in bf16.
- WSCAT has TWO projection heads, one for natural and one for adversarial features (the notes:
  "There are two heads"), both trained by the outer loss: a by-hand l_con (Eq. 7, both-views form,
  temperature 1) with hand-set head weights, and the trainer's parameter list.
- The inner maximisation (Eq. 8) gets C(x) and z detached ("p_nat is detached"; the heads are
  fixed during the attack).
- Standard's CE is over labelled samples only (label -1: no label).
- RBS (Song et al. Sec. 3.1): k - 1 distinct cut points in 1..side-1, so with k = side every line is
  its own strip and all side! orders of the lines occur; with k = side = 2 the two lines swap.
- The sigmoid ramp exp(-5 (1 - t)^2) clips t to [0, 1] at both ends (Laine & Aila 2017).
- PUAT's phases (puat.py's docstring, the released code): D and G play FROM gan_start_epochs, and
  pre-training is progress < pretrain_epochs, so at progress == pretrain_epochs the adversarial
  terms are on with r = exp(-5) (the ramp's start), and A plays.
- RLFAT's k may equal the image side (k x k blocks of one pixel): build_method accepts it.
- Mean Teacher's and PUAT's teacher runs in eval mode (running statistics), whatever mode it comes
  in, without gradient, its buffers untouched (mean_teacher.py / puat.py docstrings); MSE of the
  softmaxes averaged over samples and classes; w = consistency when the ramp-up is 0.
- WSCAT puts the model in train mode itself: the natural and adversarial outer forwards use batch
  statistics and update the running ones (two forwards), even if the model came in eval mode.
- PUAT's discriminator is back in train mode after C's GAN term (eval only for the scores).
- PUAT's masked means are 0, not NaN, when no row has weight 1 (a D step whose coins make every
  unlabelled row real); G, D and A each have their own Adam with the released code's betas
  (0, 0.99) and lr gan_lr (puat.py's docstring).
- RLFAT's outer forwards (rlfat.py's docstring, as their code): natural x, then RBS(x'), then x',
  each its own forward (BatchNorm's running statistics depend on the order).
- PUAT's latent draws: z ~ N(0, I), y ~ U{0..K-1} (puat.py's docstring): over 4000 fixed-seed
  draws every class occurs about 400 times and z has mean ~0, standard deviation ~1.
- Methods other than Mean Teacher leave the EMA decay to the trainer (None); `adversarial` of each
  built-in agrees with the report's list of non-adversarial objectives.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
import torch
from torch import nn

from wscat.losses import logit_pairing
from wscat.methods import OBJECTIVES, Batch, StepContext, build_method
from wscat.methods import wscat as wscat_module
from wscat.methods.base import sigmoid_rampup
from wscat.methods.mean_teacher import MeanTeacher
from wscat.methods.puat import Puat, discriminator_loss, weighted_mean
from wscat.methods.rlfat import Rlfat, random_block_shuffle
from wscat.methods.standard import Standard
from wscat.methods.trades import Trades
from wscat.methods.wscat import Wscat
from wscat.report.names import NON_ADVERSARIAL_OBJECTIVES

E = math.e


class Identity2(nn.Module):
    """(features, logits) = (x flattened, x flattened) times a scale parameter 1: 2-d inputs,
    2 classes; argmax C(x) is the larger input coordinate."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones((), dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = x.flatten(1) * self.scale
        return features, features


def _ctx(eps: float = 0.0, seed: int = 0, steps: int = 2) -> StepContext:
    return StepContext(eps=eps, step_size=eps / 2, steps=steps,
                       generator=torch.Generator().manual_seed(seed), ema_model=nn.Identity(),
                       progress=0.0, augment=lambda t: t)


def _wscat(lam: float = 1.0, beta: float = 1.0) -> Wscat:
    torch.manual_seed(0)
    return Wscat(2, lam=lam, beta=beta, temperature=1.0, anchors="both", label_smoothing=0.0,
                 projection_dim=2).double()


# --- losses --------------------------------------------------------------------------------------


def test_logit_pairing_is_float32_under_bf16() -> None:
    """||u_a - u_b||^2 in float32: a bf16 difference of 255 squares to 65025 exactly in float32;
    bf16 (8 significant bits) would round it to 65024."""
    a = torch.tensor([[256.0, 0.0]], dtype=torch.bfloat16)
    b = torch.tensor([[1.0, 0.0]], dtype=torch.bfloat16)
    got = logit_pairing(a, b)
    assert got.dtype == torch.float32
    assert float(got) == 65025.0


# --- WSCAT: two heads, both trained, fixed during the attack -------------------------------------


def _set_heads(method: Wscat) -> None:
    """head_natural = identity, head_adversarial = rotation by +90 degrees (e1 -> e2, e2 -> -e1)."""
    with torch.no_grad():
        method.head_natural.linear.weight.copy_(torch.eye(2, dtype=torch.float64))
        method.head_natural.linear.bias.zero_()
        method.head_adversarial.linear.weight.copy_(
            torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64))
        method.head_adversarial.linear.bias.zero_()


def test_wscat_l_con_uses_a_natural_and_an_adversarial_head() -> None:
    """eps = 0: x' = x = (e1, e2); predictions (0, 1), so each sample's only positive is its other
    view. z = (e1, e2) by the natural head, z' = (e2, -e1) by the adversarial one; temperature 1.
    Views (n0, n1, a0, a1) = (e1, e2, e2, -e1), labels (0, 1, 0, 1):
      n0: others sims (0, 0, -1), positive a0 (0)  -> log(2 + 1/e)
      n1: others sims (0, 1, 0),  positive a1 (0)  -> log(2 + e)
      a0: others sims (0, 1, 0),  positive n0 (0)  -> log(2 + e)
      a1: others sims (-1, 0, 0), positive n1 (0)  -> log(2 + 1/e)
    l_con = (log(2 + e) + log(2 + 1/e)) / 2; KL = 0 (x' = x); CE(no smoothing) of labels (0, 1)."""
    method = _wscat(lam=2.0, beta=0.5)
    _set_heads(method)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64).reshape(2, 1, 1, 2)
    labels = torch.tensor([0, 1])
    loss, stats = method.loss(Identity2(), Batch(x, x, labels), _ctx(eps=0.0))
    l_con = (math.log(2 + E) + math.log(2 + 1 / E)) / 2
    ce = math.log(1 + 1 / E)  # -log softmax([1, 0])[0] for both samples
    assert float(stats["l_con"]) == pytest.approx(l_con, rel=1e-12)
    assert float(stats["kl"]) == pytest.approx(0.0, abs=1e-12)
    assert float(stats["ce"]) == pytest.approx(ce, rel=1e-12)
    assert float(loss.detach()) == pytest.approx(ce + 2.0 * (0.0 + 0.5 * l_con), rel=1e-12)


def test_wscat_heads_are_two_modules_both_trained_by_the_outer_loss() -> None:
    """The trainer steps the model's parameters plus `trainable_parameters()`: for WSCAT, exactly
    the weights and biases of its two separate heads (4 tensors); the outer loss reaches both."""
    method = _wscat()
    assert method.head_natural is not method.head_adversarial
    heads = list(method.head_natural.parameters()) + list(method.head_adversarial.parameters())
    assert len({id(p) for p in heads}) == 4
    assert {id(p) for p in method.trainable_parameters()} == {id(p) for p in heads}
    _set_heads(method)
    x = torch.tensor([[1.0, 0.2], [0.1, 1.0], [0.7, 0.3]], dtype=torch.float64).reshape(3, 1, 1, 2)
    loss, _ = method.loss(Identity2(), Batch(x, x, torch.tensor([0, 1, 0])), _ctx(eps=0.0))
    grads = torch.autograd.grad(loss, heads)
    assert all(float(g.abs().max()) > 1e-8 for g in grads)


def test_wscat_attack_gets_the_clean_prediction_and_z_detached(monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """Eq. 8 with C(x) and z fixed (the notes: p_nat detached, heads fixed during the attack): the
    target and z the attack receives carry no graph, and the inner objective's gradient never
    reaches the natural head."""
    method = _wscat()
    seen: dict[str, torch.Tensor] = {}

    def fake_pgd(objective: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, **_: object
                 ) -> torch.Tensor:
        value = objective(x.clone().requires_grad_(True))
        grads = torch.autograd.grad(value, list(method.head_natural.parameters()),
                                    allow_unused=True)
        seen["reaches_natural_head"] = torch.tensor(any(g is not None for g in grads))
        return x.clone()

    original = Wscat.attack

    def spy(self: Wscat, model: nn.Module, x: torch.Tensor, target: torch.Tensor,
            z_target: torch.Tensor, classes: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        seen["target_grad"] = torch.tensor(target.requires_grad)
        seen["z_grad"] = torch.tensor(z_target.requires_grad)
        return original(self, model, x, target, z_target, classes, ctx)

    monkeypatch.setattr(wscat_module, "pgd", fake_pgd)
    monkeypatch.setattr(Wscat, "attack", spy)
    x = torch.tensor([[1.0, 0.2], [0.1, 1.0], [0.7, 0.3]], dtype=torch.float64).reshape(3, 1, 1, 2)
    method.loss(Identity2(), Batch(x, x, torch.tensor([0, 1, 0])), _ctx(eps=0.1))
    assert not bool(seen["target_grad"]) and not bool(seen["z_grad"])
    assert not bool(seen["reaches_natural_head"])


# --- Standard ------------------------------------------------------------------------------------


def test_standard_ce_skips_samples_without_a_label() -> None:
    """Standard training: CE over the labelled samples only. Logits = inputs: sample 0
    ([2, 0], label 0) gives log(1 + e^-2); sample 1 ([0, 5], label -1) is left out."""
    x = torch.tensor([[2.0, 0.0], [0.0, 5.0]], dtype=torch.float64).reshape(2, 1, 1, 2)
    loss, _ = Standard().loss(Identity2(), Batch(x, x, torch.tensor([0, -1])), _ctx())
    assert float(loss.detach()) == pytest.approx(math.log(1 + math.exp(-2)), rel=1e-12)


# --- RLFAT's random block shuffle ---------------------------------------------------------------


def test_rbs_two_lines_two_blocks_swap_or_stay() -> None:
    """k = side = 2: the only cut point is 1, so each axis keeps or swaps its two lines, each
    half the time: all four arrangements of a 2 x 2 image occur over 200 samples."""
    x = torch.arange(4.0).reshape(1, 1, 2, 2).expand(200, 1, 2, 2).contiguous()
    out = random_block_shuffle(x, 2, torch.Generator().manual_seed(0))
    seen = {tuple(int(v) for v in o.flatten()) for o in out}
    assert seen == {(0, 1, 2, 3), (1, 0, 3, 2), (2, 3, 0, 1), (3, 2, 1, 0)}


def test_rbs_with_one_line_per_strip_reaches_every_order() -> None:
    """k = side = 3: cuts at 1 and 2, every line its own strip, strips in a random order: all
    3! = 6 orders of the rows (and of the columns) occur over 300 samples."""
    x = torch.arange(9.0).reshape(1, 1, 3, 3).expand(300, 1, 3, 3).contiguous()
    out = random_block_shuffle(x, 3, torch.Generator().manual_seed(1))
    rows = {tuple(int(v) // 3 for v in o[0, :, 0]) for o in out}
    cols = {tuple(int(v) % 3 for v in o[0, 0, :]) for o in out}
    every = set(itertools.permutations(range(3)))
    assert rows == every and cols == every


# --- ramps, EMA decay, flags ---------------------------------------------------------------------


def test_sigmoid_rampup_clips_below_zero_too() -> None:
    """exp(-5 (1 - t)^2) with t clipped to [0, 1]: any t <= 0 gives exp(-5), any t >= 1 gives 1."""
    assert sigmoid_rampup(-0.5) == pytest.approx(math.exp(-5.0), rel=1e-12)
    assert sigmoid_rampup(-3.0) == pytest.approx(math.exp(-5.0), rel=1e-12)
    assert sigmoid_rampup(0.25) == pytest.approx(math.exp(-5.0 * 0.5625), rel=1e-12)
    assert sigmoid_rampup(2.0) == 1.0


def test_only_mean_teacher_imposes_an_ema_decay() -> None:
    """Method.ema_decay: None (the trainer's EMA settings) except Mean Teacher's teacher."""
    assert Trades(lam=6.0).ema_decay(0.5) is None
    assert Standard().ema_decay(0.5) is None
    assert Rlfat(lam=6.0, alpha=1.0, blocks=2).ema_decay(50.0) is None
    assert _wscat().ema_decay(0.0) is None
    teacher = MeanTeacher(consistency=1.0, rampup_epochs=2, teacher_decay=0.9,
                          teacher_decay_late=0.99, label_smoothing=0.0)
    assert teacher.ema_decay(1.0) == 0.9


def test_adversarial_flag_of_each_builtin_matches_the_report() -> None:
    """Standard and Mean Teacher are not adversarial training; every other built-in is."""
    for objective, cls in OBJECTIVES.items():
        assert cls.adversarial == (objective not in NON_ADVERSARIAL_OBJECTIVES), objective
    assert Standard.adversarial is False and MeanTeacher.adversarial is False


# --- PUAT's phase boundaries ---------------------------------------------------------------------

PUAT_KNOBS = dict(pretrain_epochs=1.0, gan_start_epochs=0.5, adv_rampup_epochs=2.0,
                  consistency=3.0, consistency_rampup_epochs=0, uae_weight=1.0, rae_weight=1.0,
                  gan_weight=1.0, gan_alpha=0.5, label_smoothing=0.0, d_steps=1, n_generated=4,
                  latent_dim=4, gan_width=4, latent_eps=0.1, gan_lr=1e-3)


class Linear10(nn.Module):
    """(features, logits) of a fixed linear 10-class classifier on 1 x 8 x 8 images."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.linear = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = x.flatten(1)
        return features, self.linear(features)


def _puat() -> Puat:
    torch.manual_seed(0)
    return Puat(num_classes=10, image_shape=(1, 8, 8), feature_dim=64, **PUAT_KNOBS)


def test_puat_adversarial_ramp_starts_at_the_end_of_pre_training() -> None:
    """r(t) = 0 for progress < pretrain_epochs, then exp(-5 (1 - t)^2) with
    t = (progress - pretrain_epochs) / adv_rampup_epochs: exp(-5) exactly at the boundary."""
    method = _puat()
    assert method.adversarial_ramp(0.999) == 0.0
    assert method.adversarial_ramp(1.0) == pytest.approx(math.exp(-5.0), rel=1e-12)
    assert method.adversarial_ramp(2.0) == pytest.approx(math.exp(-5.0 * 0.25), rel=1e-12)
    assert method.adversarial_ramp(3.0) == 1.0
    assert method.consistency_weight(0.0) == 3.0  # no ramp-up: the full weight


@pytest.mark.parametrize("progress,plays", [(0.499, None), (0.5, False), (0.75, False),
                                            (1.0, True)])
def test_puat_players_start_at_gan_start_epochs(monkeypatch: pytest.MonkeyPatch, progress: float,
                                                plays: bool | None) -> None:
    """update_players is called from progress == gan_start_epochs on (D and G play), with A's
    step (adversarial=True) only once pre-training is over (progress >= pretrain_epochs)."""
    calls: list[bool] = []

    def record(self: Puat, model: nn.Module, batch: Batch, ctx: StepContext, adversarial: bool
               ) -> dict[str, torch.Tensor]:
        calls.append(adversarial)
        zero = torch.zeros(())
        return {"d_loss": zero, "g_loss": zero, "a_loss": zero}

    monkeypatch.setattr(Puat, "update_players", record)
    model, teacher = Linear10(), Linear10().eval()
    x = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    ctx = StepContext(eps=0.0, step_size=0.0, steps=0, generator=torch.Generator().manual_seed(2),
                      ema_model=teacher, progress=progress, augment=lambda t: t)
    _puat().loss(model, Batch(x, x, torch.tensor([0, 1, -1, -1])), ctx)
    assert calls == ([] if plays is None else [plays])


def test_rlfat_blocks_may_equal_the_image_side() -> None:
    """RBS needs 1 <= k <= min(H, W); k = 8 on 8 x 8 images (one-pixel blocks) is allowed, k = 9
    is not."""
    params = {"objective": "rlfat", "lam": 6.0, "alpha": 1.0, "blocks": 8}
    method = build_method(params, feature_dim=64, num_classes=10, image_shape=(1, 8, 8))
    assert isinstance(method, Rlfat) and method.blocks == 8
    with pytest.raises(ValueError):
        build_method({**params, "blocks": 9}, feature_dim=64, num_classes=10,
                     image_shape=(1, 8, 8))


# --- teachers in eval mode, no gradient; WSCAT in train mode -------------------------------------


class NormNet(nn.Module):
    """(features, logits) = (BN(x), BN(x)) on 2-d inputs; BatchNorm1d(2) without affine, eps 1e-12,
    running mean (1, 0) and variance (4, 1): eval mode gives ((x0 - 1) / 2, x1), train mode the
    batch-standardised x. One idle parameter, to see whether a gradient reaches the module."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(2, eps=1e-12, affine=False).double()
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.tensor([1.0, 0.0]))
            self.bn.running_var.copy_(torch.tensor([4.0, 1.0]))
        self.scale = nn.Parameter(torch.ones((), dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.bn(x.flatten(1)) * self.scale
        return features, features


# x = (3, 1), (1, 2). Student (Identity2) logits = x: p0 = sigmoid(2), sigmoid(-1).
# Teacher in eval mode: (1, 1) and (0, 2): q0 = 1/2, sigmoid(-2). (Train mode would standardise
# the batch to (1, -1), (-1, 1): q0 = sigmoid(2), sigmoid(-2).) With two classes the squared
# differences of both classes are equal, so the mean over classes is (p0 - q0)^2.
X_TEACHER = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64).reshape(2, 1, 1, 2)


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


MSE_EVAL_TEACHER = ((_sigmoid(2) - 0.5) ** 2 + (_sigmoid(-1) - _sigmoid(-2)) ** 2) / 2


def _teacher_ctx(teacher: nn.Module, progress: float = 0.0) -> StepContext:
    return StepContext(eps=0.0, step_size=0.0, steps=0, generator=torch.Generator().manual_seed(0),
                       ema_model=teacher, progress=progress, augment=lambda t: t)


def _assert_teacher_untouched(teacher: NormNet) -> None:
    assert not teacher.training
    assert torch.equal(teacher.bn.running_mean, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert torch.equal(teacher.bn.running_var, torch.tensor([4.0, 1.0], dtype=torch.float64))
    assert int(teacher.bn.num_batches_tracked) == 0
    assert teacher.scale.grad is None


def test_mean_teacher_teacher_is_eval_mode_without_gradient() -> None:
    """No labels (CE 0), ramp-up 0 (w = consistency = 3): loss = 3 MSE with the eval-mode teacher,
    though the teacher comes in train mode; the student's gradient does not reach the teacher."""
    teacher = NormNet().train()
    method = MeanTeacher(consistency=3.0, rampup_epochs=0, teacher_decay=0.9,
                         teacher_decay_late=0.99, label_smoothing=0.0)
    batch = Batch(X_TEACHER, X_TEACHER.clone(), torch.tensor([-1, -1]))
    loss, stats = method.loss(Identity2(), batch, _teacher_ctx(teacher))
    assert float(stats["consistency"]) == pytest.approx(MSE_EVAL_TEACHER, rel=1e-9)
    assert float(loss.detach()) == pytest.approx(3.0 * MSE_EVAL_TEACHER, rel=1e-9)
    loss.backward()
    _assert_teacher_untouched(teacher)


def test_puat_teacher_is_eval_mode_without_gradient() -> None:
    """PUAT's pre-training (progress < gan_start_epochs) is Mean Teacher with the teacher on the
    same view: loss = w MSE, w = consistency = 3 (no ramp-up), no labels."""
    teacher = NormNet().train()
    torch.manual_seed(0)
    method = Puat(num_classes=2, image_shape=(1, 8, 8), feature_dim=2, **PUAT_KNOBS)
    batch = Batch(X_TEACHER, X_TEACHER.clone(), torch.tensor([-1, -1]))
    loss, stats = method.loss(Identity2(), batch, _teacher_ctx(teacher, progress=0.0))
    assert float(stats["consistency"]) == pytest.approx(MSE_EVAL_TEACHER, rel=1e-9)
    assert float(loss.detach()) == pytest.approx(3.0 * MSE_EVAL_TEACHER, rel=1e-9)
    loss.backward()
    _assert_teacher_untouched(teacher)


def test_wscat_trains_in_train_mode_even_from_eval_mode() -> None:
    """Wscat.loss sets train mode: with eps = 0 (x' = x) the natural forward standardises the
    batch to (1, -1), (-1, 1) (eval mode would give (1, 1), (0, 2)), so CE of labels (0, 1) is
    log(1 + e^-2) per sample; the natural and adversarial forwards update the running statistics
    (two of them), and the model is left in train mode."""
    model = NormNet().eval()
    method = _wscat(lam=1.0, beta=0.0)
    loss, stats = method.loss(model, Batch(X_TEACHER, X_TEACHER, torch.tensor([0, 1])),
                              _ctx(eps=0.0))
    assert float(stats["ce"]) == pytest.approx(math.log(1 + math.exp(-2)), rel=1e-9)
    assert float(stats["kl"]) == pytest.approx(0.0, abs=1e-12)
    assert model.training and int(model.bn.num_batches_tracked) == 2
    # running mean after two momentum-0.1 updates with the batch mean (2, 1.5) from (1, 0)
    expected_mean = [1.0 + (2.0 - 1.0) * (1 - 0.9 ** 2), 0.0 + 1.5 * (1 - 0.9 ** 2)]
    assert model.bn.running_mean.tolist() == pytest.approx(expected_mean, rel=1e-12)


def test_puat_discriminator_is_back_in_train_mode_after_the_step() -> None:
    """C's GAN term scores with D in eval mode (no power iteration) and puts it back: after a step
    of the full game D is in train mode, ready for the next step's updates."""
    method = _puat()
    model, teacher = Linear10(), Linear10().eval()
    x = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    ctx = StepContext(eps=0.05, step_size=0.02, steps=1, generator=torch.Generator().manual_seed(2),
                      ema_model=teacher, progress=2.0, augment=lambda t: t)
    method.train()
    _, stats = method.loss(model, Batch(x, x, torch.tensor([0, 1, -1, -1])), ctx)
    assert float(stats["gan"]) != 0.0
    assert method.discriminator.training


def test_puat_latents_are_standard_normal_and_uniform_over_every_class() -> None:
    """z ~ N(0, I) (negative values, mean ~0, sd ~1) and y uniform over all K = 10 classes."""
    method = _puat()
    ctx = _teacher_ctx(nn.Identity())
    z, y = method.sample_latent(4000, ctx, torch.device("cpu"))
    assert z.shape == (4000, PUAT_KNOBS["latent_dim"]) and y.shape == (4000,)
    counts = torch.bincount(y, minlength=10)
    assert len(counts) == 10 and int(counts.min()) > 300 and int(counts.max()) < 500
    assert abs(float(z.mean())) < 0.05 and 0.95 < float(z.std()) < 1.05


def test_rlfat_outer_forwards_are_natural_then_shuffled_then_adversarial() -> None:
    """After the attack's passes, the last three forwards see x, RBS(x') and x', in that order:
    RBS(x') holds the same pixel values as x' per sample (a block permutation), x' lies in the
    eps-ball around x and differs from it."""
    seen: list[torch.Tensor] = []

    class Recorder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(4)
            self.linear = nn.Linear(16, 3).double()

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            seen.append(x.detach().clone())
            return x.flatten(1), self.linear(x.flatten(1))

    x = torch.rand(8, 1, 4, 4, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    labels = torch.zeros(8, dtype=torch.long)
    method = Rlfat(lam=6.0, alpha=1.0, blocks=2)
    method.loss(Recorder(), Batch(x, x, labels), _ctx(eps=0.1, steps=2))
    assert len(seen) == 1 + 2 + 3  # clean target, 2 attack steps, the three outer forwards
    natural, shuffled, adversarial = seen[-3:]
    assert torch.equal(natural, x)
    assert not torch.equal(adversarial, x) and float((adversarial - x).abs().max()) <= 0.1 + 1e-12
    assert not torch.equal(shuffled, adversarial)
    assert torch.equal(shuffled.flatten(1).sort(1).values, adversarial.flatten(1).sort(1).values)


def test_puat_masked_means_are_zero_without_rows() -> None:
    """weighted_mean: (1 + 4) / 2 over rows 0 and 2; 0 when no row has weight 1. L_D with no C's
    pair: relu(1 - 0.5) + alpha * 0 + (1 - alpha) relu(1 + 0.2) = 0.5 + 0.5 * 1.2 = 1.1."""
    values = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    assert float(weighted_mean(values, torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64))) == 2.5
    assert float(weighted_mean(values, torch.zeros(3, dtype=torch.float64))) == 0.0
    loss = discriminator_loss(torch.tensor([[0.5, -0.5]], dtype=torch.float64), torch.tensor([0]),
                              torch.tensor([1.0], dtype=torch.float64),
                              torch.tensor([[0.5, 0.5]], dtype=torch.float64),
                              torch.tensor([0.0], dtype=torch.float64),
                              torch.tensor([[0.2, 0.0]], dtype=torch.float64), torch.tensor([0]),
                              0.5)
    assert float(loss) == pytest.approx(1.1, rel=1e-12)


def test_puat_players_have_their_own_adams_with_the_released_betas() -> None:
    """Adam(lr = gan_lr, betas = (0, 0.99)) for each of G, D and A, over that player's parameters
    only."""
    method = _puat()
    for name in ("generator", "discriminator", "attacker"):
        optimizer = method.optimizers[name]
        assert isinstance(optimizer, torch.optim.Adam), name
        (group,) = optimizer.param_groups
        assert tuple(group["betas"]) == (0.0, 0.99) and group["lr"] == PUAT_KNOBS["gan_lr"], name
        assert [id(p) for p in group["params"]] == [
            id(p) for p in getattr(method, name).parameters()], name
