"""The faster AutoAttack path against the library, bit for bit: `FastSquareAttack` against
pyautoattack's `SquareAttack`, and AutoAttack's gradient attacks with frozen weights against the
same attacks with weights requiring gradients; on random models and inputs and on a trained model."""
import numpy as np
import pytest
import torch
from pyautoattack.square import SquareAttack
from sklearn.datasets import load_digits
from torch import nn

from wscat.attacks import autoattack
from wscat.attacks.mode import frozen_parameters
from wscat.attacks.square import FastSquareAttack, batch_independent
from wscat.memory import keep_freed_memory
from wscat.models import LogitsOnly, build_model


def _cnn(seed: int, width: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    net = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.3,), width=width)
    with torch.no_grad():  # batch-norm statistics that are not the identity
        net.train()(torch.rand(64, 1, 8, 8))
    return net.eval()


@pytest.fixture(scope="module")
def trained():
    """A small CNN trained for a few epochs on real digits, and test images it gets right."""
    digits = load_digits()
    x = torch.tensor(digits.images[:, None] / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    net = _cnn(0)
    net.train()
    optimiser = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        for batch in torch.randperm(1500, generator=generator).split(64):
            optimiser.zero_grad()
            nn.functional.cross_entropy(net(x[batch])[1], y[batch]).backward()
            optimiser.step()
    net.eval()
    with torch.no_grad():
        right = net(x[1500:])[1].argmax(1) == y[1500:]
    return net, x[1500:][right][:120], y[1500:][right][:120]


def _square(cls, model: nn.Module, eps: float, queries: int, seed: int = 0,
            rescaled: bool = False):
    return cls(LogitsOnly(model).eval(), p_init=0.8, n_queries=queries, eps=eps, norm="Linf",
               n_restarts=1, seed=seed, verbose=False, device=torch.device("cpu"),
               resc_schedule=rescaled)


def _both(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float, queries: int,
          seed: int = 0, rescaled: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    library = _square(SquareAttack, model, eps, queries, seed, rescaled).perturb(x, y)
    ours = _square(FastSquareAttack, model, eps, queries, seed, rescaled).perturb(x, y)
    return library, ours


@pytest.mark.parametrize("seed,n", [(0, 40), (1, 2), (2, 3), (3, 1), (4, 17)])
def test_square_matches_the_library_on_random_models(seed, n):
    model = _cnn(seed)
    x = torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        y = model(x)[1].argmax(1)
    # 1,200 queries reach the single-pixel windows (after query 1,000) where most skips happen.
    library, ours = _both(model, x, y, eps=0.05, queries=1200, seed=seed)
    assert torch.equal(library, ours)
    with torch.no_grad():  # the attack did something, and left some points standing
        fooled = (model(library)[1].argmax(1) != y).sum().item()
    assert n == 1 or 0 <= fooled < n


def test_square_matches_the_library_on_a_trained_model(trained):
    model, x, y = trained
    library, ours = _both(model, x, y, eps=0.1, queries=1500)
    assert torch.equal(library, ours)
    with torch.no_grad():
        robust = int((model(library)[1].argmax(1) == y).sum())
    assert 0 < robust < len(y)  # a real contest: some points fall, some hold


def test_square_matches_the_library_with_the_rescaled_schedule(trained):
    """AA-paper's Square (the release's: p's schedule rescaled to the query budget)."""
    model, x, y = trained
    library, ours = _both(model, x, y, eps=0.1, queries=800, rescaled=True)
    assert torch.equal(library, ours)
    plain = _square(SquareAttack, model, 0.1, 800).perturb(x, y)
    assert not torch.equal(plain, library)  # the rescaling is in force


def _queried_points(attack, monkeypatch, x, y) -> int:
    """How many points `attack` evaluates the model on, over its whole run."""
    counted = []
    real = attack.margin_and_loss
    monkeypatch.setattr(attack, "margin_and_loss",
                        lambda xs, ys: counted.append(len(xs)) or real(xs, ys))
    attack.perturb(x, y)
    return sum(counted)


def test_square_skips_queries_whose_answer_is_known(trained, monkeypatch):
    model, x, y = trained
    ours = _queried_points(_square(FastSquareAttack, model, 0.1, 1500), monkeypatch, x, y)
    library = _queried_points(_square(SquareAttack, model, 0.1, 1500), monkeypatch, x, y)
    assert ours < 0.8 * library


class _BatchMean(nn.Module):
    """Logits that depend on the rest of the batch (like batch norm in train mode)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.flatten(1)
        logits = (flat - flat.mean(0, keepdim=True))[:, :10] * 10
        return flat, logits


def test_a_batch_dependent_model_runs_the_library_loop():
    model = _BatchMean()
    x = torch.rand(12, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    assert not batch_independent(LogitsOnly(model), x)
    assert batch_independent(LogitsOnly(_cnn(0)), x)
    with torch.no_grad():
        y = model(x)[1].argmax(1)
    library, ours = _both(model, x, y, eps=0.05, queries=300)
    assert torch.equal(library, ours)


def test_frozen_weights_give_the_same_gradient_attacks(trained):
    """APGD-CE, APGD-T and FAB-T (10 iterations each) with and without frozen weights."""
    model, x, y = trained
    x, y = x[:48], y[:48]

    def attacked(freeze: bool) -> torch.Tensor:
        adversary = autoattack.build(LogitsOnly(model), variant="paper", eps=0.1, seed=0,
                                     n_classes=10, device=torch.device("cpu"))
        adversary.attacks_to_run = ["apgd-ce", "apgd-t", "fab-t"]
        context = frozen_parameters(model) if freeze else torch.enable_grad()
        with context:
            return adversary.run_standard_evaluation(x, y, batch_size=64)[0]

    for p in model.parameters():
        p.grad = None
    unfrozen = attacked(False)
    assert any(p.grad is not None for p in model.parameters())  # the library's .backward()
    for p in model.parameters():
        p.grad = None
    frozen = attacked(True)
    assert all(p.grad is None for p in model.parameters())
    assert all(p.requires_grad for p in model.parameters())  # restored
    assert torch.equal(unfrozen, frozen)


def test_keeping_freed_memory_changes_no_result():
    model = _cnn(5)
    x = torch.rand(64, 1, 8, 8, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        before = model(x)[1]
    keep_freed_memory()
    with torch.no_grad():
        after = model(x)[1]
    assert torch.equal(before, after)
    assert np.isfinite(after.numpy()).all()
