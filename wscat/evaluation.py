"""The attack suite on a model: Natural, FGSM, PGD-20, CW-20, AutoAttack and their harmonic Mean.

Every attack runs with the model in eval mode (checked, not assumed). Accuracies are percentages.
"""
from __future__ import annotations

import contextlib
import io
from typing import Any

import torch
from torch import nn

from wscat.attacks import ce_objective, cw_objective, fgsm, pgd

ATTACKS = ("Natural", "FGSM", "PGD", "CW", "AA")


def harmonic_mean(values: list[float]) -> float:
    """Harmonic mean (0 if any value is 0): the paper's 'Mean' row and its beta-tuning criterion."""
    if any(v <= 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def _require_eval(model: nn.Module) -> None:
    if any(m.training for m in model.modules()):
        raise RuntimeError("attacks must run with the model in eval mode; call model.eval() first")


def _batches(n: int, batch_size: int) -> list[slice]:
    return [slice(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]


@torch.no_grad()
def _correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    return int((model(x)[1].argmax(1) == y).sum())


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, attack: str = "Natural",
             eps: float = 0.0, step_size: float = 0.0, steps: int = 0, batch_size: int = 256,
             generator: torch.Generator | None = None) -> float:
    """Accuracy (%) under one of Natural, FGSM, PGD (CE, random start) or CW (margin, random start)."""
    _require_eval(model)
    correct = 0
    for part in _batches(len(x), batch_size):
        xb, yb = x[part], y[part]
        if attack == "FGSM":
            xb = fgsm(ce_objective(model, yb), xb, eps=eps)
        elif attack == "PGD":
            xb = pgd(ce_objective(model, yb), xb, eps=eps, step_size=step_size, steps=steps,
                     generator=generator)
        elif attack == "CW":
            xb = pgd(cw_objective(model, yb), xb, eps=eps, step_size=step_size, steps=steps,
                     generator=generator)
        elif attack != "Natural":
            raise ValueError(f"unknown attack '{attack}'")
        correct += _correct(model, xb, yb)
    return 100.0 * correct / max(len(x), 1)


def autoattack_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                        version: str, seed: int, batch_size: int) -> tuple[float, str]:
    """Robust accuracy (%) under the official AutoAttack (pyautoattack), and its printed log."""
    from pyautoattack import AutoAttack

    from wscat.models import LogitsOnly

    _require_eval(model)
    adversary = AutoAttack(LogitsOnly(model).eval(), eps=eps, norm="Linf", version=version,
                           seed=seed, device=x.device)
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        x_adv, _ = adversary.run_standard_evaluation(x, y, batch_size=batch_size)
    if (x_adv - x).abs().max() > eps + 1e-6:
        raise RuntimeError("AutoAttack returned points outside the eps-ball")
    correct = sum(_correct(model, x_adv[p], y[p]) for p in _batches(len(x), batch_size))
    return 100.0 * correct / max(len(x), 1), log.getvalue()


def attack_suite(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                 step_size: float, pgd_steps: int, cw_steps: int, batch_size: int,
                 aa_examples: int | None, aa_version: str, aa_seed: int, seed: int
                 ) -> tuple[dict[str, float], dict[str, Any]]:
    """All five accuracies and their harmonic mean, plus the per-attack settings for the manifest."""
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    accuracies = {
        "Natural": accuracy(model, x, y, batch_size=batch_size),
        "FGSM": accuracy(model, x, y, attack="FGSM", eps=eps, batch_size=batch_size),
        "PGD": accuracy(model, x, y, attack="PGD", eps=eps, step_size=step_size, steps=pgd_steps,
                        batch_size=batch_size, generator=generator),
        "CW": accuracy(model, x, y, attack="CW", eps=eps, step_size=step_size, steps=cw_steps,
                       batch_size=batch_size, generator=generator),
    }
    n_aa = len(x) if aa_examples is None else min(aa_examples, len(x))
    accuracies["AA"], aa_log = autoattack_accuracy(model, x[:n_aa], y[:n_aa], eps=eps,
                                                   version=aa_version, seed=aa_seed,
                                                   batch_size=batch_size)
    accuracies["Mean"] = harmonic_mean([accuracies[a] for a in ATTACKS])
    n = len(x)
    settings = {
        "Natural": {"n_examples": n},
        "FGSM": {"eps": eps, "steps": 1, "step_size": eps, "random_start": False, "loss": "ce",
                 "n_examples": n},
        "PGD": {"eps": eps, "steps": pgd_steps, "step_size": step_size, "random_start": True,
                "restarts": 1, "loss": "ce", "n_examples": n},
        "CW": {"eps": eps, "steps": cw_steps, "step_size": step_size, "random_start": True,
               "restarts": 1, "loss": "cw_margin", "kappa": 0.0, "n_examples": n},
        "AA": {"eps": eps, "norm": "Linf", "version": aa_version, "seed": aa_seed,
               "library": "pyautoattack", "n_examples": n_aa,
               "subset": f"first {n_aa} of {n} test images"},
        "Mean": {"of": list(ATTACKS), "kind": "harmonic"},
    }
    return accuracies, {"attacks": settings, "autoattack_log": aa_log.strip().splitlines()}
