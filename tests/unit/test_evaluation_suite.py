"""The attack suite on a digits model trained here: the gradient-masking checks pass on it and flag
the same model behind a non-differentiable input quantisation; no attack runs in train mode;
our FGSM, PGD and CW agree with independent implementations written below."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.helpers.tiny import tiny_params
from wscat.attacks import ce_objective, cw_objective, fgsm, pgd
from wscat.config import evaluation_for
from wscat.data import load_dataset
from wscat.evaluation import accuracy, attack_suite, stratified_order
from wscat.inference import load_model
from wscat.steps import split as split_step, train as train_step
from wscat.data import to_unit

EPS, STEP = 0.15, 0.01875  # digits' threat model (params.yaml)


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory):
    """A TRADES model on digits (6 short epochs) and the test set in the evaluation's order."""
    folder = tmp_path_factory.mktemp("digits")
    params = tiny_params(epochs=6)
    split = split_step.run(params, "digits", 1, folder / "split.npz")
    train_step.run(params, dataset="digits", model="cnn", method="trades", seed=1,
                   split_path=folder / "split.npz", pseudo_path=None,
                   out_dir=folder / "trades", device=torch.device("cpu"))
    model, _ = load_model(folder / "trades" / "best.pt", torch.device("cpu"))
    source = load_dataset("digits", params["datasets"]["digits"])
    test = torch.as_tensor(split.test)
    test = test[stratified_order(source.labels[test], 0)]
    return model, to_unit(source.images[test]), source.labels[test]


def _evaluation(n_autoattack: int = 10, n_nrf: int = 20) -> dict:
    evaluation = evaluation_for(tiny_params(), "digits")
    evaluation["pgd_steps"] = evaluation["cw_steps"] = 20
    evaluation["autoattack"] = {**evaluation["autoattack"], "n_examples": n_autoattack}
    evaluation["nrf"] = {**evaluation["nrf"], "n_examples": n_nrf}
    return evaluation


def test_the_checks_pass_on_the_digits_model(digits):
    model, x, y = digits
    suite = attack_suite(model, x[:100], y[:100], eps=EPS, step_size=STEP,
                         evaluation=_evaluation(), seed=1, test_set_size=len(x))
    failed = {name: check["detail"] for name, check in suite.checks.items() if not check["passed"]}
    assert not failed
    assert set(suite.accuracy) == {"Natural", "FGSM", "PGD", "CW", "AA", "AA-paper", "NRF", "Mean"}
    assert suite.accuracy["Natural"] > 80 and 20 < suite.accuracy["PGD"] < suite.accuracy["FGSM"]
    assert suite.autoattack_warnings == {"AA": [], "AA-paper": []}
    assert suite.attacks["AA"]["subset"] == f"class-stratified subset: 10 of {len(x)} test images (seed 0)"
    assert suite.attacks["AA"]["attacks"]["apgd-ce"]["iterations"] == 100
    assert suite.attacks["AA-paper"]["attacks"]["apgd-ce"]["iterations"] == 10


class Quantise(nn.Module):
    """Rounds inputs to digits' 17 grey levels: clean accuracy unchanged, zero gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x * 16) / 16


@pytest.mark.slow
def test_a_masked_model_is_flagged(digits):
    model, x, y = digits
    masked = copy.deepcopy(model)
    masked.normalize = nn.Sequential(Quantise(), masked.normalize)
    masked.eval()
    assert accuracy(masked, x, y) == accuracy(model, x, y)
    suite = attack_suite(masked, x[:40], y[:40], eps=EPS, step_size=STEP,
                         evaluation=_evaluation(n_nrf=5), seed=1)
    checks = suite.checks
    assert not checks["square_not_better_than_white_box"]["passed"]
    assert not checks["autoattack_no_warnings"]["passed"]
    assert "zero gradient" in checks["autoattack_no_warnings"]["detail"]
    assert any("zero gradient" in w for w in suite.autoattack_warnings["AA"])


class SwitchesToTrain(nn.Module):
    """An identity that puts the whole model in train mode after `after` calls."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls, self.owner = after, 0, []  # a list: no submodule cycle

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > self.after:
            self.owner[0].train()
        return x


@pytest.mark.parametrize("when", ["before the attacks", "during PGD", "during AutoAttack"])
def test_no_attack_runs_with_the_model_in_train_mode(digits, when, monkeypatch):
    """Whenever the model leaves eval mode (before the attacks, during PGD, during AutoAttack),
    the next forward pass stops the evaluation."""
    import wscat.evaluation as evaluation

    model, x, y = digits
    sneaky = copy.deepcopy(model)
    switch = SwitchesToTrain({"before the attacks": 0, "during PGD": 3}.get(when, 10**9))
    switch.owner.append(sneaky)
    sneaky.normalize = nn.Sequential(switch, sneaky.normalize)
    if when == "during AutoAttack":  # a few forward passes into the first AutoAttack
        original = evaluation.autoattack_accuracy

        def switching(*args, **kwargs):
            switch.after = switch.calls + 5
            return original(*args, **kwargs)

        monkeypatch.setattr(evaluation, "autoattack_accuracy", switching)
    with pytest.raises(RuntimeError, match="train mode"):
        attack_suite(sneaky, x[:30], y[:30], eps=EPS, step_size=STEP,
                     evaluation=_evaluation(n_autoattack=10, n_nrf=5), seed=1)


# --- independent implementations: per-example loops on x.grad, no shared code ----------------

def _uniform_start(x: torch.Tensor, eps: float, seed: int) -> torch.Tensor:
    """The same draw as the engine's uniform random start (one generator, one call)."""
    noise = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    return (x + noise * eps).clamp(0, 1)


def _margin(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    top2 = logits.topk(2, dim=1)
    other = torch.where(top2.indices[:, 0] == y, top2.values[:, 1], top2.values[:, 0])
    return torch.minimum(other - logits[torch.arange(len(y)), y], torch.zeros(len(y)))


def _reference(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str, steps: int,
               step: float, start: torch.Tensor) -> torch.Tensor:
    adv = start.clone()
    for _ in range(steps):
        adv = adv.detach().requires_grad_(True)
        logits = model(adv)[1]
        value = F.cross_entropy(logits, y) if loss == "ce" else _margin(logits, y).mean()
        value.backward()
        delta = (adv.detach() + step * adv.grad.sign() - x).clamp(-EPS, EPS)
        adv = (x + delta).clamp(0, 1)
    return adv.detach()


def test_fgsm_pgd_cw_agree_with_independent_implementations(digits):
    """Tolerance: FGSM identical to 1e-6; PGD-20 and CW-20 from the same start move at least 99%
    of the pixels identically (to 1e-5) and give the same accuracy to within one image."""
    model, x, y = digits
    x, y = x[:200], y[:200]
    ours = fgsm(ce_objective(model, y), x, eps=EPS)
    theirs = _reference(model, x, y, "ce", 1, EPS, x)
    assert torch.allclose(ours, theirs, atol=1e-6)
    for loss, objective in (("ce", ce_objective(model, y)), ("cw", cw_objective(model, y))):
        ours = pgd(objective, x, eps=EPS, step_size=STEP, steps=20,
                   generator=torch.Generator().manual_seed(7))
        theirs = _reference(model, x, y, loss, 20, STEP, _uniform_start(x, EPS, 7))
        agree = float(((ours - theirs).abs() <= 1e-5).float().mean())
        assert agree >= 0.99, (loss, agree)
        with torch.no_grad():
            correct = [int((model(a)[1].argmax(1) == y).sum()) for a in (ours, theirs)]
        assert abs(correct[0] - correct[1]) <= 1, (loss, correct)
