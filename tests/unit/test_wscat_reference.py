"""WSCAT's outer loss (paper Eq. 9, with the AE of Eq. 8 and l_con of Eq. 7) against an independent
float64 reference written from the equations and the notes on the released code
(docs/official-code.md), on a tiny deterministic model with BatchNorm.

The attack's randomness is taken out: `wscat.methods.wscat.pgd` is replaced by a stand-in that
returns a given x' (and evaluates the inner objective there, inside the attack's BatchNorm
context), so the comparison covers the gradients of every trainable parameter, the positives and
the BatchNorm buffers, not the loss value alone."""
from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

from tests.helpers.references import ref_ce, ref_kl
from wscat.methods import Batch, StepContext
from wscat.methods import wscat as wscat_module
from wscat.methods.wscat import Wscat

NUM_CLASSES, FEATURES, PROJECTION = 3, 8, 4
LAM, BETA, TEMPERATURE, SMOOTHING = 5.0, 0.7, 0.5, 0.1
TOL = 1e-10


class TinyNet(nn.Module):
    """(features, logits): Linear -> BatchNorm1d -> tanh -> Linear, float64, fixed weights."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Linear(16, FEATURES, bias=False)  # a bias before BN has no gradient
        self.bn = nn.BatchNorm1d(FEATURES)
        self.classifier = nn.Linear(FEATURES, NUM_CLASSES)
        with torch.no_grad():  # BN's affine parameters away from (1, 0): their gradients matter
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
        self.feature_dim = FEATURES
        self.double()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.tanh(self.bn(self.body(x.flatten(1))))
        return features, self.classifier(features)


def _wscat(anchors: str = "both") -> Wscat:
    torch.manual_seed(1)
    return Wscat(FEATURES, lam=LAM, beta=BETA, temperature=TEMPERATURE, anchors=anchors,
                 label_smoothing=SMOOTHING, projection_dim=PROJECTION).double()


def _ctx(model: nn.Module, steps: int = 3) -> StepContext:
    return StepContext(eps=0.1, step_size=0.04, steps=steps,
                       generator=torch.Generator().manual_seed(0), ema_model=model,
                       progress=0.0, augment=lambda t: t)


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of 6 and a fixed x' in its 0.1-ball."""
    g = torch.Generator().manual_seed(3)
    x = torch.rand(6, 1, 4, 4, generator=g, dtype=torch.float64)
    x_adv = (x + 0.1 * (2 * torch.rand(x.shape, generator=g, dtype=torch.float64) - 1)).clamp(0, 1)
    return x, x_adv


# --- the reference, from the equations -----------------------------------------------------------


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.pow(2).sum().sqrt()


def ref_l_con(z: torch.Tensor, z_adv: torch.Tensor, classes: list[int], anchors: str
              ) -> torch.Tensor:
    """Eq. 7 with s = cosine / temperature. "adversarial": anchor z'_i, denominator over every
    natural z_n, positives the z_p with classes[p] == classes[i]. "both" (the release's form): every
    one of the 2B vectors {z, z'} an anchor, denominator over the 2B-1 others, positives the others
    of the anchor's class; mean over anchors."""
    nat = [_unit(v) for v in z]
    adv = [_unit(v) for v in z_adv]
    per_anchor = []
    if anchors == "adversarial":
        for i, a in enumerate(adv):
            s = [torch.dot(a, n) / TEMPERATURE for n in nat]
            log_den = torch.logsumexp(torch.stack(s), 0)
            pos = [s[p] - log_den for p in range(len(nat)) if classes[p] == classes[i]]
            per_anchor.append(-torch.stack(pos).mean())
    else:
        views, labels = nat + adv, classes + classes
        for i, a in enumerate(views):
            others = [j for j in range(len(views)) if j != i]
            s = {j: torch.dot(a, views[j]) / TEMPERATURE for j in others}
            log_den = torch.logsumexp(torch.stack([s[j] for j in others]), 0)
            pos = [s[j] - log_den for j in others if labels[j] == labels[i]]
            per_anchor.append(-torch.stack(pos).mean())
    return torch.stack(per_anchor).mean()


def ref_outer(model: nn.Module, method: Wscat, x: torch.Tensor, x_adv: torch.Tensor,
              labels: torch.Tensor, anchors: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Eq. 9: CE_ls(C(x), y) + lam (KL(C(x) || C(x')) + beta l_con(z', z)), train mode, positives
    argmax C(x); z = head_natural(f(x)), z' = head_adversarial(f(x')), none of them detached."""
    model.train()
    features, logits = model(x)
    features_adv, logits_adv = model(x_adv)
    classes = [int(row.argmax()) for row in logits]
    ce = ref_ce(logits, labels, SMOOTHING)
    kl = ref_kl(logits, logits_adv)
    con = ref_l_con(method.head_natural(features), method.head_adversarial(features_adv), classes,
                    anchors)
    return ce + LAM * (kl + BETA * con), {"ce": ce, "kl": kl, "l_con": con}


# --- driving Wscat.loss with a given x' ----------------------------------------------------------


def _fixed_attack(monkeypatch: pytest.MonkeyPatch, x_adv: torch.Tensor) -> list[dict]:
    """Replace the attack's PGD: evaluate the inner objective (value and gradient) at x' where the
    attack runs it, and return x'."""
    calls: list[dict] = []

    def fake_pgd(objective: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, **_: object
                 ) -> torch.Tensor:
        point = x_adv.clone().requires_grad_(True)
        value = objective(point)
        (grad,) = torch.autograd.grad(value, point)
        calls.append({"value": value.detach(), "grad": grad})
        return x_adv.clone()

    monkeypatch.setattr(wscat_module, "pgd", fake_pgd)
    return calls


def _trainable(model: nn.Module, method: Wscat) -> list[nn.Parameter]:
    return list(model.parameters()) + list(method.parameters())


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("anchors", ["both", "adversarial"])
def test_outer_loss_gradients_match_the_reference(monkeypatch, anchors):
    """Every gradient (classifier, BatchNorm affine, both projection heads), not only the loss:
    the KL target and z carry gradient, and so do the adversarial features."""
    x, x_adv = _inputs()
    labels = torch.tensor([0, 2, 1, -1, 1, 0])  # -1: a sample without a label, out of CE
    model, method = TinyNet(), _wscat(anchors)
    model_ref, method_ref = copy.deepcopy(model), copy.deepcopy(method)
    _fixed_attack(monkeypatch, x_adv)

    loss, stats = method.loss(model, Batch(x, x, labels), _ctx(model))
    expected, parts = ref_outer(model_ref, method_ref, x, x_adv, labels, anchors)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), abs=TOL)
    for key in ("ce", "kl", "l_con"):
        assert float(stats[key]) == pytest.approx(float(parts[key].detach()), abs=TOL), key

    got = [torch.zeros_like(p) if g is None else g for p, g in zip(  # None: no gradient at all
        _trainable(model, method), torch.autograd.grad(loss, _trainable(model, method),
                                                      allow_unused=True))]
    want = torch.autograd.grad(expected, _trainable(model_ref, method_ref))
    names = [f"model.{n}" for n, _ in model.named_parameters()] + [
        f"method.{n}" for n, _ in method.named_parameters()]
    assert all(float(w.abs().max()) > 1e-6 for w in want), "a parameter the case leaves idle"
    differing = {name: f"{float((g - w).abs().max()):.3g}" for name, g, w in zip(names, got, want)
                 if not torch.allclose(g, w, rtol=0, atol=TOL)}
    assert not differing, f"gradients differ from the reference's (max abs): {differing}"


def test_positives_are_the_current_predictions_not_the_labels(monkeypatch):
    """Eq. 7's positives: argmax C(x) of the current model on the clean batch, taken once before
    the attack; not the (pseudo-)labels, not C(x')'s predictions, not the EMA model's."""
    x, x_adv = _inputs()
    model, method = TinyNet(), _wscat()
    model.train()
    with torch.no_grad():
        predicted = model(x)[1].argmax(1)
        predicted_adv = model(x_adv)[1].argmax(1)
    model = TinyNet()  # fresh running statistics
    assert len(set(predicted.tolist())) >= 2, "the case needs more than one predicted class"
    labels = (predicted + 1) % NUM_CLASSES  # every label differs from the prediction
    labels[0] = predicted[0]  # ... but one, so the two partitions differ in shape too
    ema = TinyNet(seed=5).eval()  # ctx's EMA model, another model: its predictions differ
    with torch.no_grad():
        predicted_ema = ema(x)[1].argmax(1)
    for other, what in ((labels, "y"), (predicted_adv, "argmax C(x')"), (predicted_ema, "EMA")):
        assert not torch.equal(other, predicted), f"the case needs {what} unlike argmax C(x)"
    calls = _fixed_attack(monkeypatch, x_adv)

    model_ref, method_ref = copy.deepcopy(model), copy.deepcopy(method)
    _, stats = method.loss(model, Batch(x, x, labels), _ctx(ema))
    z = method_ref.head_natural(model_ref.train()(x)[0])
    z_adv = method_ref.head_adversarial(model_ref(x_adv)[0])

    def l_con(classes: torch.Tensor) -> float:
        return float(ref_l_con(z, z_adv, classes.tolist(), "both").detach())

    assert float(stats["l_con"]) == pytest.approx(l_con(predicted), abs=TOL)
    for other in (labels, predicted_adv, predicted_ema):  # each other source: another l_con
        assert l_con(other) != pytest.approx(l_con(predicted), abs=1e-6)
    assert len(calls) == 1


def test_inner_objective_is_eq8_with_batch_statistics(monkeypatch):
    """The objective PGD maximises, at a given x': KL(C(x) || C(x')) + beta l_con(z', z) with
    C(x), z fixed, positives argmax C(x), BatchNorm on the batch's statistics (train mode); its
    gradient w.r.t. x' too."""
    x, x_adv = _inputs()
    labels = torch.tensor([0, 2, 1, 1, 1, 0])
    model, method = TinyNet(), _wscat()
    model_ref, method_ref = copy.deepcopy(model), copy.deepcopy(method)
    calls = _fixed_attack(monkeypatch, x_adv)
    method.loss(model, Batch(x, x, labels), _ctx(model))

    model_ref.train()
    with torch.no_grad():
        features, logits = model_ref(x)
        z = method_ref.head_natural(features)
    classes = logits.argmax(1).tolist()
    point = x_adv.clone().requires_grad_(True)
    features_adv, logits_adv = model_ref(point)
    inner = ref_kl(logits, logits_adv) + BETA * ref_l_con(
        z, method_ref.head_adversarial(features_adv), classes, "both")
    (grad,) = torch.autograd.grad(inner, point)
    assert float(calls[0]["value"]) == pytest.approx(float(inner.detach()), abs=TOL)
    assert torch.allclose(calls[0]["grad"], grad, rtol=0, atol=TOL)


def test_batchnorm_running_statistics_move_only_with_the_outer_forwards(monkeypatch):
    """The real attack (3 PGD steps) leaves BatchNorm's running statistics alone: after
    Wscat.loss every buffer is that of exactly two train-mode forwards, the natural batch then
    the AE the attack returned (num_batches_tracked 2)."""
    x, _ = _inputs()
    labels = torch.tensor([0, 2, 1, 1, 1, 0])
    model, method = TinyNet(), _wscat()
    model_ref = copy.deepcopy(model)
    returned: list[torch.Tensor] = []
    real_pgd = wscat_module.pgd

    def recording_pgd(*args, **kwargs):
        returned.append(real_pgd(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(wscat_module, "pgd", recording_pgd)
    method.loss(model, Batch(x, x, labels), _ctx(model, steps=3))
    assert len(returned) == 1 and not torch.equal(returned[0], x)

    model_ref.train()
    with torch.no_grad():
        model_ref(x)
        model_ref(returned[0])
    assert int(model.bn.num_batches_tracked) == 2, (
        "BatchNorm counted more forwards than the natural and the adversarial batch")
    state, expected = model.state_dict(), model_ref.state_dict()
    for key in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
        assert torch.equal(state[key], expected[key]), key
    assert all(torch.equal(state[k], expected[k]) for k in expected)
    assert model.training
