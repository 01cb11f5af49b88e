"""The attack suite on a model: Natural, FGSM, PGD-20, CW-20, AutoAttack (official standard `AA`
and the paper's variant `AA-paper`), NRF, the harmonic Mean of the paper's five, and the
gradient-masking checks.

Every attack runs with the model in eval mode, checked on every forward pass. Accuracies are
percentages. The examples come in a seeded class-stratified order (`stratified_order`): an attack
on n examples takes the first n, a class-balanced subset named in the manifest.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wscat.attacks import ce_objective, cw_objective, fgsm, masking, pgd
from wscat.attacks.autoattack import library_version
from wscat.attacks.mode import eval_mode_enforced, require_eval
from wscat.attacks.nrf import nrf_accuracy
from wscat.attacks.shards import AutoAttackResult, autoattack_accuracy

ATTACKS = ("Natural", "FGSM", "PGD", "CW", "AA")  # the paper's Mean is over these five
AUTOATTACK_COLUMNS = {"standard": "AA", "paper": "AA-paper"}


def harmonic_mean(values: list[float]) -> float:
    """Harmonic mean (0 if any value is 0): the paper's 'Mean' row and its beta-tuning criterion."""
    if any(v <= 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def stratified_order(labels: torch.Tensor, seed: int) -> torch.Tensor:
    """Positions 0..N-1 in a seeded order whose every prefix is class-balanced (to within one):
    classes take turns, each class's members shuffled."""
    labels = labels.cpu()
    shuffled = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    classes = labels[shuffled]
    rank = torch.zeros_like(classes)
    for c in classes.unique():
        members = classes == c
        rank[members] = torch.arange(int(members.sum()))
    return shuffled[torch.argsort(rank * (int(classes.max()) + 1) + classes, stable=True)]


def subset_name(n: int, total: int, seed: int) -> str:
    """How an attack's examples are named in the manifest and tables."""
    if n == total:
        return f"full test set ({total} images)"
    return f"class-stratified subset: {n} of {total} test images (seed {seed})"


def _batches(n: int, batch_size: int) -> list[slice]:
    return [slice(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]


@torch.no_grad()
def _correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    return int((model(x)[1].argmax(1) == y).sum())


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, attack: str = "Natural",
             eps: float = 0.0, step_size: float = 0.0, steps: int = 0, batch_size: int = 256,
             generator: torch.Generator | None = None) -> float:
    """Accuracy (%) under Natural, FGSM, PGD (CE, random start) or CW (margin, random start)."""
    require_eval(model)
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


@dataclass(frozen=True)
class SuiteResult:
    """What the metrics file holds: accuracies, per-attack settings, checks, AutoAttack warnings."""

    accuracy: dict[str, float]
    attacks: dict[str, dict[str, Any]]
    checks: dict[str, dict[str, Any]]
    autoattack_warnings: dict[str, list[str]]


def _size(n: int | None, total: int) -> int:
    return total if n is None else min(n, total)


def attack_suite(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                 step_size: float, evaluation: Mapping[str, Any], seed: int,
                 test_set_size: int | None = None, shard_dir: Path | None = None) -> SuiteResult:
    """All attacks of `evaluation` (params.yaml) on (x, y), given in `stratified_order`: the
    first n of a test set of `test_set_size` (default: all of it). Finished AutoAttack shards are
    kept in `shard_dir` (resume)."""
    model.eval()
    n, bs, subset_seed = len(x), evaluation["batch_size"], evaluation["subset_seed"]
    total = n if test_set_size is None else test_set_size
    with eval_mode_enforced(model):
        generator = torch.Generator().manual_seed(seed)
        acc = {"Natural": accuracy(model, x, y, batch_size=bs),
               "FGSM": accuracy(model, x, y, attack="FGSM", eps=eps, batch_size=bs)}
        for name, steps in (("PGD", evaluation["pgd_steps"]), ("CW", evaluation["cw_steps"])):
            acc[name] = accuracy(model, x, y, attack=name, eps=eps, step_size=step_size,
                                 steps=steps, batch_size=bs, generator=generator)
        aa = evaluation["autoattack"]
        n_aa = _size(aa["n_examples"], n)
        autoattack: dict[str, AutoAttackResult] = {}
        for variant, column in AUTOATTACK_COLUMNS.items():
            autoattack[variant] = autoattack_accuracy(
                model, x[:n_aa], y[:n_aa], variant=variant, eps=eps, seed=aa["seed"],
                batch_size=bs, shard_size=aa["shard_size"], shard_dir=shard_dir)
            acc[column] = autoattack[variant].accuracy
        nrf_config = evaluation["nrf"]
        n_nrf = _size(nrf_config["n_examples"], n)
        acc["NRF"], found = nrf_accuracy(model, x[:n_nrf], y[:n_nrf], eps=eps, step_size=step_size,
                                         config=nrf_config, batch_size=bs,
                                         generator=torch.Generator().manual_seed(seed))
        acc["Mean"] = harmonic_mean([acc[a] for a in ATTACKS])
        checks = _checks(model, x, y, acc=acc, autoattack=autoattack, n_aa=n_aa, eps=eps,
                         step_size=step_size, evaluation=evaluation, seed=seed)

    def named(count: int) -> dict[str, Any]:
        return {"n_examples": count, "subset": subset_name(count, total, subset_seed)}

    attacks: dict[str, dict[str, Any]] = {
        "Natural": named(n),
        "FGSM": {"library": "wscat", "eps": eps, "steps": 1, "step_size": eps,
                 "random_start": False, "loss": "ce", **named(n)},
        "PGD": {"library": "wscat", "eps": eps, "steps": evaluation["pgd_steps"],
                "step_size": step_size, "random_start": True, "restarts": 1, "loss": "ce",
                "seed": seed, **named(n)},
        "CW": {"library": "wscat", "eps": eps, "steps": evaluation["cw_steps"],
               "step_size": step_size, "random_start": True, "restarts": 1, "loss": "cw_margin",
               "kappa": 0.0, "seed": seed, **named(n)},
        "NRF": {"library": "wscat", "eps": eps, "steps": nrf_config["steps"],
                "step_size": step_size, "random_start": True, "restarts": 1, "seed": seed,
                "loss": "cw_margin, gradient boosted on non-robust channels",
                "reference": "Kim, Lee & Ro, NeurIPS 2021 (information bottleneck)",
                "ib_steps": nrf_config["ib_steps"], "ib_lr": nrf_config["ib_lr"],
                "ib_beta": nrf_config["ib_beta"], "weight": nrf_config["weight"], **found,
                **named(n_nrf)},
        "Mean": {"of": list(ATTACKS), "kind": "harmonic"},
    }
    for variant, column in AUTOATTACK_COLUMNS.items():
        result = autoattack[variant]
        attacks[column] = {
            "variant": variant, "library": "pyautoattack", "library_version": library_version(),
            "norm": "Linf", "eps": eps, "seed": aa["seed"], "shard_size": aa["shard_size"],
            "shards": result.n_shards, "attacks": result.settings,
            "clean_accuracy": round(result.clean, 4),
            "robust_accuracy_after": {k: round(v, 4) for k, v in result.after.items()},
            **named(n_aa)}
    attacks["AA-paper"]["note"] = ("the paper's released evaluation: 10 iterations, n_classes - 1 "
                                   "targets; weaker than the standard AutoAttack (column AA)")
    return SuiteResult(accuracy=acc, attacks=attacks, checks=checks,
                       autoattack_warnings={AUTOATTACK_COLUMNS[v]: r.warnings
                                            for v, r in autoattack.items()})


def _checks(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, acc: dict[str, float],
            autoattack: dict[str, AutoAttackResult], n_aa: int, eps: float, step_size: float,
            evaluation: Mapping[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """The gradient-masking checks (`wscat.attacks.masking`) on this model."""
    config, bs = evaluation["checks"], evaluation["batch_size"]
    tolerance = config["tolerance"]
    # The suite's PGD also ran with a fresh generator seeded by `seed`: the same point.
    memo = {(eps, step_size, evaluation["pgd_steps"]): acc["PGD"]}

    def pgd_at(factor: float, steps: int) -> float:
        key = (factor * eps, factor * step_size, steps)
        if key not in memo:  # a fresh generator per point: each point stands on its own
            memo[key] = accuracy(model, x, y, attack="PGD", eps=key[0], step_size=key[1],
                                 steps=steps, batch_size=bs,
                                 generator=torch.Generator().manual_seed(seed))
        return memo[key]

    steps_grid, factors = config["pgd_steps"], config["eps_factors"]
    natural_aa = accuracy(model, x[:n_aa], y[:n_aa], batch_size=bs)
    return {
        "pgd_steps_monotone": masking.falls_monotonically(
            steps_grid, [pgd_at(1.0, s) for s in steps_grid], tolerance=tolerance, what="steps"),
        "pgd_eps_monotone": masking.falls_monotonically(
            [round(f * eps, 6) for f in factors],
            [pgd_at(f, evaluation["pgd_steps"]) for f in factors], tolerance=tolerance,
            what="eps"),
        "eps_zero_equals_natural": masking.eps_zero_is_natural(
            {"PGD": acc["Natural"], "AA": natural_aa, "AA-paper": natural_aa},
            {"PGD": pgd_at(0.0, evaluation["pgd_steps"]), "AA": autoattack["standard"].clean,
             "AA-paper": autoattack["paper"].clean}),
        "square_not_better_than_white_box": masking.square_not_better(
            autoattack["standard"].after),
        "autoattack_no_warnings": masking.no_autoattack_warnings(
            {AUTOATTACK_COLUMNS[v]: r.warnings for v, r in autoattack.items()}),
        "pgd_not_weaker_than_fgsm": masking.iterative_not_weaker(
            acc["FGSM"], acc["PGD"], tolerance=tolerance),
    }
