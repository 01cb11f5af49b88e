"""The baselines' losses against independent float64 references, as
tests/unit/test_wscat_reference.py does for WSCAT: Standard, TRADES (and its configurations RST and
DMAT), Mean Teacher, RLFAT_T and PUAT (the classifier's loss and its players' losses), each written
here from its paper and docs/methods.md (and, for PUAT, the terms wscat/methods/puat.py's docstring
lists from the authors' released code), never by calling wscat.losses.

Randomness is taken out: each method's PGD is replaced by a stand-in that evaluates the inner
objective (value and gradient) at a given x' and returns it; RLFAT's random block shuffle by a
given block swap; PUAT's latent draws by given (z, y). The comparisons cover the loss, every
trainable parameter's gradient and the BatchNorm running statistics (which forwards moved them, in
which mode), on tiny deterministic models with BatchNorm whose running statistics differ from any
batch's, so that eval mode and train mode give different outputs."""
from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

from tests.helpers.references import log_softmax, ref_ce, ref_kl
from wscat.data.sources.base import ImageDataset
from wscat.data.split import Split
from wscat.data.training_data import training_data
from wscat.methods import Batch, StepContext
from wscat.methods import puat as puat_module
from wscat.methods import rlfat as rlfat_module
from wscat.methods import trades as trades_module
from wscat.methods.mean_teacher import MeanTeacher
from wscat.methods.puat import Puat
from wscat.methods.rlfat import Rlfat
from wscat.methods.standard import Standard
from wscat.methods.trades import Trades
from wscat.training import trainer as trainer_module

K, FEATURES = 3, 6
TOL = 1e-10
FLOAT32_TOL = 1e-6  # a term the code computes in float32 whatever the model's precision


class TinyNet(nn.Module):
    """(features, logits): Linear -> BatchNorm1d -> tanh -> Linear, float64, fixed weights, and
    running statistics away from (0, 1), so that eval mode differs from train mode."""

    def __init__(self, seed: int = 0, inputs: int = 16) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Linear(inputs, FEATURES, bias=False)  # a bias before BN has no gradient
        self.bn = nn.BatchNorm1d(FEATURES)
        self.classifier = nn.Linear(FEATURES, K)
        with torch.no_grad():
            self.body.weight.mul_(3.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
            self.bn.running_mean.uniform_(-0.3, 0.3)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.feature_dim = FEATURES
        self.double()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.tanh(self.bn(self.body(x.flatten(1))))
        return features, self.classifier(features)

    def batch_statistics(self, x: torch.Tensor) -> torch.Tensor:
        """The logits with BatchNorm on the batch's statistics, its running ones neither read nor
        written."""
        h = nn.functional.batch_norm(self.body(x.flatten(1)), None, None, self.bn.weight,
                                     self.bn.bias, training=True, eps=self.bn.eps)
        return self.classifier(torch.tanh(h))


def _images(n: int, seed: int, side: int = 4) -> torch.Tensor:
    return torch.rand(n, 1, side, side, generator=torch.Generator().manual_seed(seed),
                      dtype=torch.float64)


def _near(x: torch.Tensor, seed: int, eps: float = 0.1) -> torch.Tensor:
    """A fixed point of the eps-ball around x (in [0, 1])."""
    noise = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype)
    return (x + eps * (2 * noise - 1)).clamp(0, 1)


def _ctx(ema: nn.Module | None = None, progress: float = 0.0, seed: int = 0,
         augment: Callable[[torch.Tensor], torch.Tensor] = lambda t: t, eps: float = 0.1
         ) -> StepContext:
    return StepContext(eps=eps, step_size=0.04, steps=3,
                       generator=torch.Generator().manual_seed(seed), ema_model=ema,
                       progress=progress, augment=augment)


# --- the references' pieces, from the definitions ------------------------------------------------


def ref_mse_softmax(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """Mean over samples and classes of (softmax a - softmax b)^2 (Mean Teacher's consistency)."""
    total = logits_a.new_zeros(())
    for u, v in zip(logits_a, logits_b):
        total = total + (log_softmax(u).exp() - log_softmax(v).exp()).pow(2).sum()
    return total / logits_a.numel()


def ramp(t: float) -> float:
    """exp(-5 (1 - t)^2), t clipped to [0, 1] (Laine & Aila 2017; Tarvainen & Valpola 2017)."""
    t = min(max(t, 0.0), 1.0)
    return math.exp(-5.0 * (1.0 - t) ** 2)


def _forwards(model: nn.Module, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """The state of a copy of `model` after train-mode forwards of `inputs`, in that order."""
    twin = copy.deepcopy(model).train()
    with torch.no_grad():
        for x in inputs:
            twin(x)
    return twin.state_dict()


def _same_state(got: nn.Module, want: dict[str, torch.Tensor]) -> bool:
    state = got.state_dict()
    return state.keys() == want.keys() and all(torch.allclose(state[k].double(), want[k].double(),
                                                              rtol=0, atol=TOL) for k in want)


def _gradients_match(loss: torch.Tensor, params: list[nn.Parameter], expected: torch.Tensor,
                     params_ref: list[nn.Parameter], names: list[str], tol: float = TOL) -> None:
    """Every gradient of `loss` w.r.t. `params` equals that of `expected` w.r.t. `params_ref`
    (a parameter `loss` does not reach has gradient 0); the case leaves none idle."""
    got = [torch.zeros_like(p) if g is None else g
           for p, g in zip(params, torch.autograd.grad(loss, params, allow_unused=True))]
    want = torch.autograd.grad(expected, params_ref)
    assert all(float(w.abs().max()) > 1e-6 for w in want), "a parameter the case leaves idle"
    differing = {name: f"{float((g - w).abs().max()):.3g}" for name, g, w in zip(names, got, want)
                 if not torch.allclose(g, w, rtol=0, atol=tol)}
    assert not differing, f"gradients differ from the reference's (max abs): {differing}"


def _names(model: nn.Module) -> list[str]:
    return [name for name, _ in model.named_parameters()]


def _fixed_attack(monkeypatch: pytest.MonkeyPatch, module: object, x_adv: torch.Tensor
                  ) -> list[dict]:
    """Replace `module.pgd`: evaluate the inner objective (value and gradient) at x' where the
    attack runs it, record how it was called, and return x'."""
    calls: list[dict] = []

    def fake_pgd(objective: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, **kwargs
                 ) -> torch.Tensor:
        point = x_adv.clone().requires_grad_(True)
        value = objective(point)
        (grad,) = torch.autograd.grad(value, point)
        calls.append({"value": value.detach(), "grad": grad, "x": x.detach().clone(), **kwargs})
        return x_adv.clone()

    monkeypatch.setattr(module, "pgd", fake_pgd)
    return calls


# --- Standard ------------------------------------------------------------------------------------


def test_standard_is_plain_ce_on_the_augmented_batch_in_train_mode():
    """CE (no smoothing) of C(x) on the augmented x, train mode (BatchNorm on the batch, one
    update of its running statistics)."""
    x_raw = _images(6, 1)
    x = x_raw.flip(-1)  # the augmented view: not x_raw
    labels = torch.tensor([0, 2, 1, 1, 0, 2])
    model = TinyNet()
    model_ref = copy.deepcopy(model)
    loss, stats = Standard().loss(model.train(), Batch(x, x_raw, labels), _ctx())
    expected = ref_ce(model_ref.train()(x)[1], labels.tolist())
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=TOL)
    assert float(stats["ce"]) == pytest.approx(float(expected.detach()), abs=TOL)
    _gradients_match(loss, list(model.parameters()), expected, list(model_ref.parameters()),
                     _names(model))
    assert _same_state(model, _forwards(TinyNet(), x)) and model.training


# --- TRADES, RST, DMAT ---------------------------------------------------------------------------

# name: (lam, label smoothing, random start, attack BatchNorm); params.yaml's values
TRADES_CASES = {"trades": (6.0, 0.0, "normal", "eval"), "rst": (6.0, 0.0, "normal", "eval"),
                "dmat": (5.0, 0.1, "uniform", "batch")}


def _trades_batch(name: str) -> Batch:
    x_raw = _images(6, 3)
    # RST: true labels on the first two, the labeler's pseudo-labels on the rest: all in the CE
    labels = torch.tensor([0, 2, 1, -1, 1, 0]) if name == "trades" else torch.tensor(
        [0, 2, 1, 2, 1, 0])
    return Batch(x_raw.flip(-1), x_raw, labels)  # x: the augmented view


def _trades_setup(monkeypatch: pytest.MonkeyPatch, name: str
                  ) -> tuple[Batch, torch.Tensor, nn.Module, nn.Module, list[dict]]:
    """Case `name`'s batch, a fixed x' near it, a TinyNet and its copy for the reference, and
    the calls of the stand-in attack that returns x'."""
    batch = _trades_batch(name)
    x_adv = _near(batch.x, 4)
    model = TinyNet()
    return batch, x_adv, model, copy.deepcopy(model), _fixed_attack(monkeypatch, trades_module,
                                                                     x_adv)


@pytest.mark.parametrize("name", list(TRADES_CASES))
def test_trades_outer_loss_gradients_and_batchnorm_match_the_reference(monkeypatch, name):
    """Zhang et al. 2019, Eq. 5: CE_ls(C(x), y) + lam KL(C(x) || C(x')), train mode, the KL target
    not detached; after the step BatchNorm's running statistics are those of the two outer
    forwards (x, then x'): the attack's forwards leave them alone in either attack mode."""
    lam, smoothing, random_start, attack_bn = TRADES_CASES[name]
    batch, x_adv, model, model_ref, calls = _trades_setup(monkeypatch, name)
    method = Trades(lam, label_smoothing=smoothing, random_start=random_start,
                    attack_batchnorm=attack_bn)
    ctx = _ctx()
    loss, stats = method.loss(model.train(), batch, ctx)

    model_ref.train()
    logits, logits_adv = model_ref(batch.x)[1], model_ref(x_adv)[1]
    ce, kl = ref_ce(logits, batch.labels.tolist(), smoothing), ref_kl(logits, logits_adv)
    expected = ce + lam * kl
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=TOL)
    assert float(stats["ce"]) == pytest.approx(float(ce.detach()), abs=TOL)
    assert float(stats["kl"]) == pytest.approx(float(kl.detach()), abs=TOL)
    _gradients_match(loss, list(model.parameters()), expected, list(model_ref.parameters()),
                     _names(model))
    assert _same_state(model, _forwards(TinyNet(), batch.x, x_adv)) and model.training
    assert len(calls) == 1 and calls[0]["random_start"] == random_start
    assert torch.equal(calls[0]["x"], batch.x)
    assert (calls[0]["eps"], calls[0]["step_size"], calls[0]["steps"], calls[0]["generator"]) == (
        ctx.eps, ctx.step_size, ctx.steps, ctx.generator)


@pytest.mark.parametrize("name", list(TRADES_CASES))
def test_trades_inner_objective_is_kl_from_the_fixed_clean_prediction(monkeypatch, name):
    """The objective PGD maximises, at a given x': KL(C(x) || C(x')) with C(x) fixed, both in the
    attack's BatchNorm mode: eval (running statistics; TRADES' and RST's code) or batch statistics
    (DMAT's code); its gradient w.r.t. x' too."""
    _, _, _, attack_bn = TRADES_CASES[name]
    batch, x_adv, model, model_ref, calls = _trades_setup(monkeypatch, name)
    Trades(6.0, attack_batchnorm=attack_bn).loss(model.train(), batch, _ctx())

    twin = model_ref.train(attack_bn == "batch")  # batch statistics from a copy: nothing kept
    with torch.no_grad():
        target = twin(batch.x)[1]
    point = x_adv.clone().requires_grad_(True)
    inner = ref_kl(target, twin(point)[1])
    (grad,) = torch.autograd.grad(inner, point)
    assert float(calls[0]["value"]) == pytest.approx(float(inner.detach()), abs=TOL)
    assert torch.allclose(calls[0]["grad"], grad, rtol=0, atol=TOL)
    other = copy.deepcopy(model_ref).train(attack_bn != "batch")  # the other mode differs
    with torch.no_grad():
        assert float(ref_kl(other(batch.x)[1], other(x_adv)[1])) != pytest.approx(
            float(inner.detach()), abs=1e-6)


def test_rst_trains_on_the_labelers_pseudo_labels():
    """RST (Carmon et al. 2019): the unlabelled images carry the labeler's pseudo-labels into the
    batches (and so into TRADES' CE), not -1; MT's data (semi) carries -1, never the true label."""
    images = torch.rand(12, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    true = torch.tensor([0, 1, 2] * 4)
    source = ImageDataset("tiny", images, true, 3, (0.5,), (0.25,))
    split = Split("tiny", 1, labelled=np.array([0, 1, 2]), unlabelled=np.array([3, 4, 5, 6, 7]),
                  validation=np.array([8, 9]), test=np.array([10, 11]))
    pseudo = np.array([2, 2, 0, 1, 1])  # differs from the true labels (0, 1, 2, 0, 1) at 3 of 5
    data = training_data(source, split, "pseudo", pseudo)
    assert data.unlabelled_y.tolist() == pseudo.tolist()
    cfg = {"batch_size": 6, "labelled_per_batch": 2}
    pool = trainer_module._pool(data, cfg, torch.device("cpu"))
    x, labels = pool.batch(torch.tensor([2, 0]), torch.tensor([4, 1, 3, 0]), False)
    assert labels.tolist() == [2, 0, 1, 2, 1, 2]
    assert torch.allclose(x, torch.cat([images[[2, 0]], images[[7, 4, 6, 3]]]))
    semi = training_data(source, split, "semi", None)
    pool = trainer_module._pool(semi, cfg, torch.device("cpu"))
    assert pool.batch(torch.tensor([2, 0]), torch.tensor([4, 1, 3, 0]), False)[1].tolist() == [
        2, 0, -1, -1, -1, -1]


# --- Mean Teacher --------------------------------------------------------------------------------

MT_KNOBS = dict(consistency=7.0, rampup_epochs=4, teacher_decay=0.9, teacher_decay_late=0.99,
                label_smoothing=0.1)


@pytest.mark.parametrize("progress", [0.0, 1.5, 6.0])
def test_mean_teacher_loss_gradients_and_batchnorm_match_the_reference(progress):
    """Tarvainen & Valpola 2017 as docs/methods.md's MT column: CE_ls(student(x), y) over the
    labelled samples only + w(t) MSE(softmax student(x), softmax teacher(x~)), the MSE averaged
    over samples and classes, w(t) = consistency exp(-5 (1 - t)^2), t = progress / rampup; the
    teacher is ctx's EMA model in eval mode on its own augmentation x~ = augment(x_raw), no
    gradient; the student one train-mode forward; the teacher's buffers untouched."""
    x_raw = _images(6, 5)
    x = (x_raw * 0.8 + 0.1).flip(-1)  # the student's view
    augment = lambda t: t.flip(-2)  # noqa: E731 (the teacher's view: neither x nor x_raw)
    labels = torch.tensor([1, -1, 0, -1, 2, -1])
    model, teacher = TinyNet(), TinyNet(seed=5).eval()
    model_ref, teacher_ref = copy.deepcopy(model), copy.deepcopy(teacher)
    method = MeanTeacher(**MT_KNOBS)
    loss, stats = method.loss(model.train(), Batch(x, x_raw, labels),
                              _ctx(teacher, progress, augment=augment))

    logits = model_ref.train()(x)[1]
    with torch.no_grad():
        logits_teacher = teacher_ref.eval()(augment(x_raw))[1]
    ce = ref_ce(logits, labels.tolist(), 0.1)
    consistency = ref_mse_softmax(logits, logits_teacher)
    weight = 7.0 * ramp(progress / 4)
    expected = ce + weight * consistency
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=TOL)
    assert float(stats["ce"]) == pytest.approx(float(ce.detach()), abs=TOL)
    assert float(stats["consistency"]) == pytest.approx(float(consistency.detach()), abs=TOL)
    _gradients_match(loss, list(model.parameters()), expected, list(model_ref.parameters()),
                     _names(model))
    assert _same_state(model, _forwards(TinyNet(), x)) and model.training
    assert _same_state(teacher, TinyNet(seed=5).state_dict())


def test_mean_teacher_views_and_modes_matter_in_the_case():
    """The case above tells the teacher's alternatives apart: the student's view, the raw batch,
    train mode and the student itself each give another consistency."""
    x_raw = _images(6, 5)
    x = (x_raw * 0.8 + 0.1).flip(-1)
    model, teacher = TinyNet(), TinyNet(seed=5)
    with torch.no_grad():
        student = model.train()(x)[1]
        right = ref_mse_softmax(student, teacher.eval()(x_raw.flip(-2))[1])
        for other in (teacher.eval()(x)[1], teacher.eval()(x_raw)[1],
                      copy.deepcopy(teacher).train()(x_raw.flip(-2))[1],
                      copy.deepcopy(model).eval()(x_raw.flip(-2))[1]):
            assert float(ref_mse_softmax(student, other)) != pytest.approx(float(right), abs=1e-6)


def test_mean_teacher_ema_decay_during_and_after_the_ramp_up():
    """The teacher's decay: teacher_decay during the ramp-up, teacher_decay_late after; the trainer
    caps it at 1 - 1/(step + 1) (a true average of the steps so far)."""
    method = MeanTeacher(**MT_KNOBS)
    assert [method.ema_decay(p) for p in (0.0, 3.99, 4.0, 9.0)] == [0.9, 0.9, 0.99, 0.99]
    cfg = {"ema_warmup_epochs": 100, "ema_decay": 0.5}  # the trainer's default: not used
    assert trainer_module._ema_decay(method, 0.0, 0, cfg) == 0.0
    assert trainer_module._ema_decay(method, 0.1, 3, cfg) == pytest.approx(0.75)
    assert trainer_module._ema_decay(method, 1.0, 1000, cfg) == 0.9
    assert trainer_module._ema_decay(method, 5.0, 1000, cfg) == 0.99
    assert method.weight(2.0) == pytest.approx(7.0 * math.exp(-5 * 0.25))
    assert MeanTeacher(**{**MT_KNOBS, "rampup_epochs": 0}).weight(0.0) == 7.0


# --- RLFAT_T -------------------------------------------------------------------------------------


def _block_swap(x: torch.Tensor) -> torch.Tensor:
    """One RBS outcome for k = 2: both axes cut at 1 and the strips swapped (blocks moved whole)."""
    return x.roll(shifts=(-1, -1), dims=(-2, -1))


@pytest.mark.parametrize("lam,alpha", [(6.0, 1.0), (2.0, 0.5)])
def test_rlfat_loss_gradients_and_batchnorm_match_the_reference(monkeypatch, lam, alpha):
    """Song et al. 2020, RLFAT_T (arXiv v5 Eq. 7 and 9; docs/methods.md): with x' TRADES' AE,
    L = CE(C(x), y) + lam KL(C(x) || C(RBS(x'))) + alpha (1/m) sum_i ||u(RBS(x'_i)) - u(x'_i)||^2,
    u the logits, nothing detached; RBS applied to x' (not x) with k = blocks; natural x, RBS(x')
    and x' each their own train-mode forward (three updates of the running statistics, not a
    joint batch)."""
    x_raw = _images(5, 6)
    x = x_raw.flip(-1)  # the augmented view
    labels = torch.tensor([0, 2, 1, 1, 0])
    x_adv = _near(x, 7)
    model = TinyNet()
    model_ref = copy.deepcopy(model)
    _fixed_attack(monkeypatch, trades_module, x_adv)
    shuffled_inputs: list[tuple] = []

    def fake_rbs(images: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
        shuffled_inputs.append((images.detach().clone(), k, generator))
        return _block_swap(images)

    monkeypatch.setattr(rlfat_module, "random_block_shuffle", fake_rbs)
    ctx = _ctx()
    loss, stats = Rlfat(lam=lam, alpha=alpha, blocks=2).loss(model.train(),
                                                             Batch(x, x_raw, labels), ctx)
    assert len(shuffled_inputs) == 1
    assert torch.equal(shuffled_inputs[0][0], x_adv) and shuffled_inputs[0][1:] == (
        2, ctx.generator)

    model_ref.train()
    x_rbs = _block_swap(x_adv)
    logits, logits_rbs, logits_adv = model_ref(x)[1], model_ref(x_rbs)[1], model_ref(x_adv)[1]
    ce, kl = ref_ce(logits, labels.tolist()), ref_kl(logits, logits_rbs)
    rlft = sum((a - b).pow(2).sum() for a, b in zip(logits_rbs, logits_adv)) / len(x)
    expected = ce + lam * kl + alpha * rlft
    # L_RLFT is computed in float32 (wscat.losses.logit_pairing, for bf16 autocast's sake)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=FLOAT32_TOL)
    for key, part in (("ce", ce), ("kl", kl), ("rlft", rlft)):
        assert float(stats[key]) == pytest.approx(float(part.detach()), abs=FLOAT32_TOL), key
    _gradients_match(loss, list(model.parameters()), expected, list(model_ref.parameters()),
                     _names(model), tol=FLOAT32_TOL)
    # Three separate forwards, in some order (the order is the code's choice).
    assert int(model.bn.num_batches_tracked) == 3 and model.training
    assert any(_same_state(model, _forwards(TinyNet(), *order))
               for order in itertools.permutations((x, x_rbs, x_adv)))


def test_rlfat_case_tells_the_shuffle_apart():
    """In the case above RBS(x') is not x', and C(RBS(x')) not C(x'): dropping the shuffle or the
    RLFT term changes the loss."""
    x_adv = _near(_images(5, 6).flip(-1), 7)
    with torch.no_grad():
        model = TinyNet().train()
        gap = (model(_block_swap(x_adv))[1] - model(x_adv)[1]).abs().max()
    assert not torch.equal(_block_swap(x_adv), x_adv) and float(gap) > 1e-3


# --- PUAT ----------------------------------------------------------------------------------------

SIDE = 8
PUAT_KNOBS = dict(pretrain_epochs=1.0, gan_start_epochs=0.25, adv_rampup_epochs=2.0,
                  consistency=4.0, consistency_rampup_epochs=3.0, uae_weight=1.5,
                  rae_weight=4.0, gan_weight=0.3, gan_alpha=0.4, label_smoothing=0.1, d_steps=2,
                  n_generated=5, latent_dim=4, gan_width=4, latent_eps=0.3, gan_lr=1e-3)
PUAT_EPS = 0.02  # the run's eps, also the UAE's ball around G(z, y): small, so it clips


def _puat() -> Puat:
    torch.manual_seed(11)
    method = Puat(num_classes=K, image_shape=(1, SIDE, SIDE), feature_dim=FEATURES, **PUAT_KNOBS)
    return method.double().train()


def _puat_batch() -> Batch:
    x_raw = _images(6, 8, SIDE)
    return Batch((x_raw * 0.9 + 0.05).flip(-1), x_raw, torch.tensor([2, 0, -1, -1, -1, -1]))


def _latents(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, PUAT_KNOBS["latent_dim"], generator=g, dtype=torch.float64),
            torch.randint(K, (n,), generator=g))


def _fixed_latents(monkeypatch: pytest.MonkeyPatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Puat.sample_latent returns a new fixed (z, y) each call, recorded in order."""
    drawn: list[tuple[torch.Tensor, torch.Tensor]] = []

    def fake(self, n, ctx, device):
        drawn.append(_latents(n, 100 + len(drawn)))
        return drawn[-1]

    monkeypatch.setattr(Puat, "sample_latent", fake)
    return drawn


def ref_uae(generator: nn.Module, attacker: nn.Module, z: torch.Tensor, y: torch.Tensor,
            eps: float) -> torch.Tensor:
    """x_a = G(A(z, y), y) clipped to the L-inf eps-ball around G(z, y), and to [0, 1]."""
    x_g = generator(z, y)
    x_a = generator(attacker(z, y), y)
    return torch.maximum(torch.minimum(x_a, x_g + eps), x_g - eps).clamp(0, 1)


@pytest.mark.parametrize("progress", [1.8, 0.5])
def test_puat_classifier_loss_gradients_and_batchnorm_match_the_reference(monkeypatch, progress):
    """C's loss (wscat/methods/puat.py, docs/methods.md's PUAT column):
    CE_ls(C(x_l), y_l) + w(t) MSE(softmax C(x), softmax C_ema(x))
    + r(t) [uae_w CE_ls(C(x_a), y) - gan_w E_{C's pairs} sum_y p_C(y|x) D(x, y)
            + rae_w CE_ls(C(x_rae), y_hat)],
    the teacher the EMA model in eval mode on the same x; x_a the projected UAE of the given (z, y);
    C's pairs the unlabelled rows; D's scores fixed (eval mode); y_hat = y for labelled rows and
    argmax C(x) for the others; r(t) = 0 in pre-training, then the ramp; C's running statistics
    see the natural batch and the RAE only (the UAE forward uses batch statistics)."""
    batch = _puat_batch()
    x_rae = _near(batch.x, 9)
    model, teacher = TinyNet(inputs=SIDE * SIDE), TinyNet(seed=5, inputs=SIDE * SIDE).eval()
    method = _puat()
    model_ref, teacher_ref, method_ref = (copy.deepcopy(m) for m in (model, teacher, method))
    players: list[bool] = []
    monkeypatch.setattr(Puat, "update_players",
                        lambda self, m, b, c, adversarial: players.append(adversarial) or {})
    drawn = _fixed_latents(monkeypatch)
    calls = _fixed_attack(monkeypatch, puat_module, x_rae)
    loss, stats = method.loss(model.train(), batch, _ctx(teacher, progress, eps=PUAT_EPS))

    adversarial = progress >= PUAT_KNOBS["pretrain_epochs"]
    assert players == [adversarial]
    labels = batch.labels.tolist()
    model_ref.train()
    logits = model_ref(batch.x)[1]
    with torch.no_grad():
        logits_teacher = teacher_ref.eval()(batch.x)[1]
    ce = ref_ce(logits, labels, 0.1)
    consistency = ref_mse_softmax(logits, logits_teacher)
    expected = ce + 4.0 * ramp(progress / 3.0) * consistency
    if adversarial:
        assert len(drawn) == 1 and len(calls) == 1 and calls[0]["random_start"] == "normal"
        assert torch.equal(calls[0]["x"], batch.x) and calls[0]["eps"] == PUAT_EPS
        z, y = drawn[0]
        with torch.no_grad():
            x_a = ref_uae(method_ref.generator, method_ref.attacker, z, y, PUAT_EPS)
            unprojected = ref_uae(method_ref.generator, method_ref.attacker, z, y, 1.0)
            assert not torch.allclose(x_a, unprojected), "the case needs the ball to clip"
            method_ref.discriminator.eval()
            scores = method_ref.discriminator.scores(batch.x)
        uae = ref_ce(model_ref.batch_statistics(x_a), y.tolist(), 0.1)
        probs = torch.stack([log_softmax(row).exp() for row in logits])
        unlabelled = [i for i, label in enumerate(labels) if label < 0]
        gan = -sum((probs[i] * scores[i]).sum() for i in unlabelled) / len(unlabelled)
        targets = [label if label >= 0 else int(logits[i].argmax()) for i, label in
                   enumerate(labels)]
        assert targets != [max(label, 0) for label in labels], "the case needs y_hat != 0"
        rae = ref_ce(model_ref(x_rae)[1], targets, 0.1)
        r = ramp((progress - 1.0) / 2.0)
        assert 0.05 < r < 0.95
        expected = expected + r * (1.5 * uae + 0.3 * gan + 4.0 * rae)
        for key, part in (("uae", uae), ("gan", gan), ("rae", rae)):
            assert float(stats[key]) == pytest.approx(float(part.detach()), abs=TOL), key
        # the RAE's inner objective: sum_i CE(C(x'_i), y_hat_i), batch statistics
        point = x_rae.clone().requires_grad_(True)
        row_logits = model_ref.batch_statistics(point)
        inner = -sum(log_softmax(row)[t] for row, t in zip(row_logits, targets))
        (grad,) = torch.autograd.grad(inner, point)
        assert float(calls[0]["value"]) == pytest.approx(float(inner.detach()), abs=TOL)
        assert torch.allclose(calls[0]["grad"], grad, rtol=0, atol=TOL)
    else:
        assert not drawn and not calls
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=TOL)
    assert float(stats["ce"]) == pytest.approx(float(ce.detach()), abs=TOL)
    assert float(stats["consistency"]) == pytest.approx(float(consistency.detach()), abs=TOL)
    _gradients_match(loss, list(model.parameters()), expected, list(model_ref.parameters()),
                     _names(model))
    seen = (batch.x, x_rae) if adversarial else (batch.x,)
    assert _same_state(model, _forwards(TinyNet(inputs=SIDE * SIDE), *seen)) and model.training
    assert _same_state(teacher, TinyNet(seed=5, inputs=SIDE * SIDE).state_dict())


def test_puat_players_losses_and_gradients_match_the_reference(monkeypatch):
    """The players' losses at each of their steps (value and gradient w.r.t. the player's own
    parameters), C in eval mode on the un-augmented batch:
    L_D = mean_real relu(1 - D(x, y)) + alpha mean_{C's pairs} sum_y p_C(y|x) relu(1 + D(x, y))
          + (1 - alpha) mean_gen relu(1 + D(G(z, y), y)),
      real pairs: labelled rows (their labels) and unlabelled rows whose coin is 1 (argmax C(x));
      C's pairs: the unlabelled rows whose coin is 0; each D step's coin the generator's next B
      uniforms < 1/2, its (z, y) a fresh draw;
    L_G = -mean D(G(z, y), y);  L_A = -mean CE(C(x_a), y), x_a the projected UAE of (z, y).
    C's weights and statistics are left as they were."""
    batch = _puat_batch()
    model = TinyNet(inputs=SIDE * SIDE)
    method = _puat()
    before = copy.deepcopy(model.state_dict())
    drawn = _fixed_latents(monkeypatch)
    seed = 21
    coins = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        probs = torch.stack([log_softmax(r).exp() for r in copy.deepcopy(model).eval()(
            batch.x_raw)[1]])
    labels = batch.labels.tolist()
    y_real = [label if label >= 0 else int(probs[i].argmax()) for i, label in enumerate(labels)]
    assert any(y != 0 for i, y in enumerate(y_real) if labels[i] < 0), "the case needs y_hat != 0"
    players = {id(next(getattr(method, n).parameters())): n
               for n in ("discriminator", "generator", "attacker")}
    real_step = puat_module._adam_step
    steps: list[str] = []

    def checked_step(optimizer, loss, parameters):
        name = players[id(parameters[0])]
        steps.append(name)
        z, y = drawn[-1]  # the draw just before the step
        d = copy.deepcopy(method.discriminator).eval()  # the power iteration this step did, kept
        g = copy.deepcopy(method.generator)
        if name == "discriminator":
            coin = (torch.rand(len(labels), generator=coins) < 0.5).tolist()
            real = [i for i, label in enumerate(labels) if label >= 0 or coin[i]]
            fake = [i for i, label in enumerate(labels) if label < 0 and not coin[i]]
            assert real and fake, "the case needs both kinds of pair"
            with torch.no_grad():
                x_gen = g(z, y)
            s, s_gen = d.scores(batch.x_raw), d.scores(x_gen)
            expected = (sum(torch.relu(1 - s[i, y_real[i]]) for i in real) / len(real)
                        + 0.4 * sum((probs[i] * torch.relu(1 + s[i])).sum() for i in fake)
                        / len(fake)
                        + 0.6 * sum(torch.relu(1 + s_gen[j, y[j]]) for j in range(len(y)))
                        / len(y))
            reference = d
        elif name == "generator":
            x_gen = g(z, y)
            expected = -d.scores(x_gen).gather(1, y[:, None]).mean()
            reference = g
        else:
            a = copy.deepcopy(method.attacker)
            logits = copy.deepcopy(model).eval()(ref_uae(g, a, z, y, PUAT_EPS))[1]
            expected = -ref_ce(logits, y.tolist())
            reference = a
        got = torch.autograd.grad(loss, parameters, retain_graph=True)
        want = torch.autograd.grad(expected, list(reference.parameters()))
        tol = FLOAT32_TOL if name == "discriminator" else TOL  # D's p_C is taken in float32
        assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=tol), name
        assert all(torch.allclose(a_, b_, rtol=0, atol=tol) for a_, b_ in zip(got, want)), name
        real_step(optimizer, loss, parameters)

    monkeypatch.setattr(puat_module, "_adam_step", checked_step)
    stats = method.update_players(model.train(), batch,
                                  _ctx(progress=1.5, seed=seed, eps=PUAT_EPS), True)
    assert steps == ["discriminator", "discriminator", "generator", "attacker"]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.training and float(stats["a_loss"]) < 0
