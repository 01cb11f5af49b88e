"""The attack suite on a model: Natural, FGSM, PGD-20, CW-20, AutoAttack (official standard `AA`
and the paper's variant `AA-paper`), NRF, the harmonic Mean of the paper's five, and the
gradient-masking checks.

Every attack runs with the model in eval mode, checked on every forward pass. Accuracies are
percentages. The examples come in a seeded class-stratified order (`stratified_order`): an attack
on n examples takes the first n, a class-balanced subset named in the manifest.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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
from wscat.inference import nonfinite_rows, refuse_nonfinite
from wscat.metrics import ATTACKS, harmonic_mean  # noqa: F401  (re-exported)


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
def _correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, finite: bool
             ) -> tuple[torch.Tensor, torch.Tensor | int]:
    """Per-example correctness, and, with `finite`, how many examples' logits hold NaN or inf (on
    the device; 0 without, uncounted)."""
    logits = model(x)[1]
    return logits.argmax(1) == y, nonfinite_rows(logits) if finite else 0


def correct(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, attack: str = "Natural",
            eps: float = 0.0, step_size: float = 0.0, steps: int = 0, batch_size: int = 256,
            generator: torch.Generator | None = None, finite: bool = False) -> torch.Tensor:
    """Per-example correctness (bool) under Natural, FGSM, PGD (CE, random start) or CW (margin,
    random start): the paired bootstrap of the tables resamples these. With `finite`, logits
    (clean, or the attack's final adversarial ones) that hold NaN or inf are refused
    (wscat.inference.NonFiniteOutputs), read once at the end."""
    require_eval(model)
    flags, bad = [], 0
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
        right, nonfinite = _correct(model, xb, yb, finite)
        flags.append(right.cpu())
        bad = bad + nonfinite
    if finite:
        refuse_nonfinite(bad, len(x), attack)
    return torch.cat(flags) if flags else torch.zeros(0, dtype=torch.bool)


def percent(flags: torch.Tensor) -> float:
    """Accuracy (%) of per-example correctness flags."""
    return 100.0 * int(flags.sum()) / max(len(flags), 1)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, attack: str = "Natural",
             eps: float = 0.0, step_size: float = 0.0, steps: int = 0, batch_size: int = 256,
             generator: torch.Generator | None = None, finite: bool = False) -> float:
    """Accuracy (%) under Natural, FGSM, PGD (CE, random start) or CW (margin, random start);
    `finite` as `correct`'s."""
    return percent(correct(model, x, y, attack=attack, eps=eps, step_size=step_size, steps=steps,
                           batch_size=batch_size, generator=generator, finite=finite))


def encode_flags(flags: torch.Tensor) -> str:
    """Per-example correctness as a string of 0/1, in the evaluated (stratified) order."""
    return "".join("1" if f else "0" for f in flags.tolist())


def decode_flags(text: str) -> torch.Tensor:
    """`encode_flags`' inverse: the bool per example of a string of 0/1."""
    return torch.tensor([c == "1" for c in text], dtype=torch.bool)


@dataclass(frozen=True)
class SuiteResult:
    """What a metrics file holds: accuracies, per-attack settings, checks, AutoAttack warnings and
    the per-example correctness of the paper's five columns (`per_image`, stratified order)."""

    accuracy: dict[str, float]
    attacks: dict[str, dict[str, Any]]
    checks: dict[str, dict[str, Any]]
    autoattack_warnings: dict[str, list[str]]
    per_image: dict[str, str]


@contextmanager
def _timed(what: str) -> Iterator[None]:
    """Log an attack's wall-clock seconds to stderr (the job log; benchmarks/demo_profile.py)."""
    started = time.perf_counter()
    yield
    print(f"timing: {what} {time.perf_counter() - started:.2f} s", file=sys.stderr, flush=True)


def _size(n: int | None, total: int) -> int:
    return total if n is None else min(n, total)


def _named(count: int, total: int, subset_seed: int) -> dict[str, Any]:
    return {"n_examples": count, "subset": subset_name(count, total, subset_seed)}


def _autoattack_manifest(result: AutoAttackResult, *, variant: str, eps: float,
                         aa: Mapping[str, Any], named: dict[str, Any]) -> dict[str, Any]:
    return {"variant": variant, "library": "pyautoattack", "library_version": library_version(),
            "norm": "Linf", "eps": eps, "seed": aa["seed"], "shard_size": aa["shard_size"],
            "shards": result.n_shards, "attacks": result.settings,
            "clean_accuracy": round(result.clean, 4),
            "robust_accuracy_after": {k: round(v, 4) for k, v in result.after.items()}, **named}


def _white_box_manifest(*, eps: float, step_size: float, evaluation: Mapping[str, Any],
                        seed: int, named: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Settings of the suite's own columns: Natural, FGSM, PGD and CW (on the same images)."""
    return {
        "Natural": dict(named),
        "FGSM": {"library": "wscat", "eps": eps, "steps": 1, "step_size": eps,
                 "random_start": False, "loss": "ce", **named},
        "PGD": {"library": "wscat", "eps": eps, "steps": evaluation["pgd_steps"],
                "step_size": step_size, "random_start": True, "restarts": 1, "loss": "ce",
                "seed": seed, **named},
        "CW": {"library": "wscat", "eps": eps, "steps": evaluation["cw_steps"],
               "step_size": step_size, "random_start": True, "restarts": 1, "loss": "cw_margin",
               "kappa": 0.0, "seed": seed, **named},
    }


def _nrf_manifest(*, eps: float, step_size: float, config: Mapping[str, Any], seed: int,
                  found: dict[str, Any], named: dict[str, Any]) -> dict[str, Any]:
    """Settings of the NRF column (`wscat.attacks.nrf`), with what its bottleneck found."""
    return {"library": "wscat", "eps": eps, "steps": config["steps"], "step_size": step_size,
            "random_start": True, "restarts": 1, "seed": seed,
            "loss": "cw_margin, gradient boosted on non-robust channels",
            "reference": "Kim, Lee & Ro, NeurIPS 2021 (information bottleneck)",
            "ib_steps": config["ib_steps"], "ib_lr": config["ib_lr"],
            "ib_beta": config["ib_beta"], "weight": config["weight"], **found, **named}


def core_suite(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
               step_size: float, evaluation: Mapping[str, Any], seed: int,
               test_set_size: int | None = None, shard_dir: Path | None = None) -> SuiteResult:
    """The paper's five columns (Natural, FGSM, PGD-20, CW-20, official standard AutoAttack) and
    their harmonic Mean, on (x, y) given in `stratified_order`, with per-example correctness.
    Finished AutoAttack shards are kept in `shard_dir` (resume)."""
    model.eval()
    n, bs, subset_seed = len(x), evaluation["batch_size"], evaluation["subset_seed"]
    total = n if test_set_size is None else test_set_size
    aa = evaluation["autoattack"]
    n_aa = _size(aa["n_examples"], n)
    with eval_mode_enforced(model), _timed("Natural"):
        generator = torch.Generator().manual_seed(seed)
        flags = {"Natural": correct(model, x, y, batch_size=bs, finite=True)}
    with eval_mode_enforced(model), _timed("FGSM"):
        flags["FGSM"] = correct(model, x, y, attack="FGSM", eps=eps, batch_size=bs, finite=True)
    for name, steps in (("PGD", evaluation["pgd_steps"]), ("CW", evaluation["cw_steps"])):
        with eval_mode_enforced(model), _timed(name):
            flags[name] = correct(model, x, y, attack=name, eps=eps, step_size=step_size,
                                  steps=steps, batch_size=bs, generator=generator, finite=True)
    with eval_mode_enforced(model), _timed("AA"):
        standard = autoattack_accuracy(model, x[:n_aa], y[:n_aa], variant="standard", eps=eps,
                                       seed=aa["seed"], batch_size=bs,
                                       shard_size=aa["shard_size"], shard_dir=shard_dir)
    acc = {name: percent(f) for name, f in flags.items()}
    acc["AA"] = standard.accuracy
    acc["Mean"] = harmonic_mean([acc[a] for a in ATTACKS])
    # Per-example flags on the images every attack saw (all of them unless AA ran on a subset).
    per_image = {name: encode_flags(f[:n_aa]) for name, f in flags.items()}
    per_image["AA"] = encode_flags(torch.tensor(standard.robust, dtype=torch.bool))
    attacks: dict[str, dict[str, Any]] = {
        **_white_box_manifest(eps=eps, step_size=step_size, evaluation=evaluation, seed=seed,
                              named=_named(n, total, subset_seed)),
        "AA": _autoattack_manifest(standard, variant="standard", eps=eps, aa=aa,
                                   named=_named(n_aa, total, subset_seed)),
        "Mean": {"of": list(ATTACKS), "kind": "harmonic"},
    }
    return SuiteResult(accuracy=acc, attacks=attacks, checks={},
                       autoattack_warnings={"AA": standard.warnings}, per_image=per_image)


def extra_suite(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *,
                core: SuiteResult | Callable[[], SuiteResult], eps: float, step_size: float,
                evaluation: Mapping[str, Any], seed: int, test_set_size: int | None = None,
                shard_dir: Path | None = None) -> SuiteResult:
    """Beyond the paper's five: the paper's AutoAttack variant (AA-paper), NRF and the
    gradient-masking checks, which read the core suite's numbers (`core`; a function that
    returns them is called only then, after AA-paper and NRF: a core evaluation may still be
    running beside this one). Clean logits that hold NaN or inf are refused before any attack."""
    model.eval()
    n, bs, subset_seed = len(x), evaluation["batch_size"], evaluation["subset_seed"]
    total = n if test_set_size is None else test_set_size
    aa, nrf_config = evaluation["autoattack"], evaluation["nrf"]
    n_aa, n_nrf = _size(aa["n_examples"], n), _size(nrf_config["n_examples"], n)
    with eval_mode_enforced(model):  # finite clean logits, before any attack runs
        correct(model, x, y, batch_size=bs, finite=True)
    with eval_mode_enforced(model), _timed("AA-paper"):
        paper = autoattack_accuracy(model, x[:n_aa], y[:n_aa], variant="paper", eps=eps,
                                    seed=aa["seed"], batch_size=bs, shard_size=aa["shard_size"],
                                    shard_dir=shard_dir)
    acc = {"AA-paper": paper.accuracy}
    with eval_mode_enforced(model), _timed("NRF"):
        acc["NRF"], found = nrf_accuracy(model, x[:n_nrf], y[:n_nrf], eps=eps, step_size=step_size,
                                         config=nrf_config, batch_size=bs,
                                         generator=torch.Generator().manual_seed(seed))
    if callable(core):
        core = core()
    with eval_mode_enforced(model), _timed("checks"):
        standard = core.attacks["AA"]
        warnings = {**core.autoattack_warnings, "AA-paper": paper.warnings}
        checks = _checks(model, x, y, acc={**core.accuracy, **acc}, n_aa=n_aa, eps=eps,
                         step_size=step_size, evaluation=evaluation, seed=seed,
                         clean={"AA": standard["clean_accuracy"], "AA-paper": paper.clean},
                         standard_after=standard["robust_accuracy_after"], warnings=warnings)
    attacks = {
        "AA-paper": {**_autoattack_manifest(paper, variant="paper", eps=eps, aa=aa,
                                            named=_named(n_aa, total, subset_seed)),
                     "note": ("the paper's released evaluation: 10 iterations, n_classes - 1 "
                              "targets; weaker than the standard AutoAttack (column AA)")},
        "NRF": _nrf_manifest(eps=eps, step_size=step_size, config=nrf_config, seed=seed,
                             found=found, named=_named(n_nrf, total, subset_seed)),
    }
    return SuiteResult(accuracy=acc, attacks=attacks, checks=checks,
                       autoattack_warnings={"AA-paper": paper.warnings}, per_image={})


def attack_suite(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                 step_size: float, evaluation: Mapping[str, Any], seed: int,
                 test_set_size: int | None = None, shard_dir: Path | None = None) -> SuiteResult:
    """Every attack of `evaluation` (params.yaml) on (x, y): `core_suite` then `extra_suite`,
    merged as one metrics file holds them."""
    common = dict(eps=eps, step_size=step_size, evaluation=evaluation, seed=seed,
                  test_set_size=test_set_size, shard_dir=shard_dir)
    core = core_suite(model, x, y, **common)
    extra = extra_suite(model, x, y, core=core, **common)
    return merge(core, extra)


def merge(core: SuiteResult, extra: SuiteResult) -> SuiteResult:
    """One result of the core suite and the extras, columns in the order of the tables."""
    accuracy = {k: core.accuracy[k] for k in (*ATTACKS[:4], "AA")}
    accuracy.update(extra.accuracy)
    accuracy["Mean"] = core.accuracy["Mean"]
    return SuiteResult(accuracy=accuracy, attacks={**core.attacks, **extra.attacks},
                       checks=extra.checks,
                       autoattack_warnings={**core.autoattack_warnings,
                                            **extra.autoattack_warnings},
                       per_image=core.per_image)


def _checks(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, acc: dict[str, float],
            n_aa: int, eps: float, step_size: float, evaluation: Mapping[str, Any], seed: int,
            clean: dict[str, float], standard_after: dict[str, float],
            warnings: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """The gradient-masking checks (`wscat.attacks.masking`) on this model."""
    config, bs = evaluation["checks"], evaluation["batch_size"]
    tolerance = config["tolerance"]
    # The suite's PGD also ran with a fresh generator seeded by `seed`: the same point.
    memo = {(eps, step_size, evaluation["pgd_steps"]): acc["PGD"]}

    def pgd_at(factor: float, steps: int) -> float:
        key = (factor * eps, factor * step_size, steps)
        if key not in memo:  # a fresh generator per point: each point stands on its own
            memo[key] = accuracy(model, x, y, attack="PGD", eps=key[0], step_size=key[1],
                                 steps=steps, batch_size=bs, finite=True,
                                 generator=torch.Generator().manual_seed(seed))
        return memo[key]

    steps_grid, factors = config["pgd_steps"], config["eps_factors"]
    natural_aa = accuracy(model, x[:n_aa], y[:n_aa], batch_size=bs, finite=True)
    return {
        "pgd_steps_monotone": masking.falls_monotonically(
            steps_grid, [pgd_at(1.0, s) for s in steps_grid], tolerance=tolerance, what="steps"),
        "pgd_eps_monotone": masking.falls_monotonically(
            [round(f * eps, 6) for f in factors],
            [pgd_at(f, evaluation["pgd_steps"]) for f in factors], tolerance=tolerance,
            what="eps"),
        "eps_zero_equals_natural": masking.eps_zero_is_natural(
            {"PGD": acc["Natural"], "AA": natural_aa, "AA-paper": natural_aa},
            {"PGD": pgd_at(0.0, evaluation["pgd_steps"]), "AA": clean["AA"],
             "AA-paper": clean["AA-paper"]}),
        "square_not_better_than_white_box": masking.square_not_better(standard_after),
        "autoattack_no_warnings": masking.no_autoattack_warnings(warnings),
        "pgd_not_weaker_than_fgsm": masking.iterative_not_weaker(
            acc["FGSM"], acc["PGD"], tolerance=tolerance),
    }
