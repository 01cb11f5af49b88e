"""AutoAttack (Croce & Hein, ICML 2020) through pyautoattack, two ways.

- `standard`: the official standard version (APGD-CE, APGD-T with 9 target classes, FAB-T with 9,
  Square with 5,000 queries; 100 iterations), exactly as the library sets it up.
- `paper`: the configuration the paper's AA numbers came from (docs/official-code.md,
  `wscat.metrics.AA_PAPER`): the released code's third-party AutoAttack (torchattacks'
  "standard") runs APGD-CE, APGD-T and FAB-T with 10 iterations and n_classes - 1 target
  classes, then Square with 5,000 queries and the rescaled p schedule. Built from pyautoattack's
  own attack classes.

One call attacks one shard of examples; `wscat.attacks.shards` runs and resumes the shards.
Both variants run Square through `wscat.attacks.square.FastSquareAttack`, the library's attack
without the model evaluations whose answer it already holds (same results, bit for bit).
"""
from __future__ import annotations

import logging
import re
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from wscat.inference import logits_of, nonfinite_rows, refuse_nonfinite
from wscat.metrics import AA_PAPER

Variant = Literal["standard", "paper"]
VARIANTS: tuple[Variant, ...] = ("standard", "paper")
PAPER_ORDER = tuple(AA_PAPER["order"])  # the release's: the standard four, fewer iterations
PAPER_ITERATIONS = AA_PAPER["iterations"]
# "apgd-t - 1/2 - 10 out of 58 successfully perturbed": the library's per-batch debug line.
_PERTURBED = re.compile(r"^(?P<attack>[a-z-]+) - \d+/\d+ - (?P<k>\d+) out of (?P<m>\d+) "
                        r"successfully perturbed$")


def library_version() -> str:
    from importlib import metadata

    return metadata.version("pyautoattack")


def build(model: nn.Module, *, variant: Variant, eps: float, seed: int, n_classes: int,
          device: torch.device) -> Any:
    """A pyautoattack AutoAttack for `model` (returning logits), L-inf, seeded."""
    from pyautoattack import AutoAttack
    from pyautoattack.autopgd_base import APGDAttack, APGDAttack_targeted
    from pyautoattack.fab_pt import FABAttack_PT

    from wscat.attacks.square import FastSquareAttack

    if variant == "standard":
        adversary = AutoAttack(model, eps=eps, norm="Linf", version="standard", seed=seed,
                               device=device)
        adversary.square = FastSquareAttack.like(adversary.square)
        # The standard version targets 9 classes; with fewer than 10 every other class, as
        # AutoAttack's own check asks (it only warns, then indexes past the logits).
        for attack in (adversary.apgd_targeted, adversary.fab):
            attack.n_target_classes = min(attack.n_target_classes, n_classes - 1)
        return adversary
    if variant != "paper":
        raise ValueError(f"unknown AutoAttack variant '{variant}'; valid: {', '.join(VARIANTS)}")
    adversary = AutoAttack(model, eps=eps, norm="Linf", version="custom",
                           attacks=list(PAPER_ORDER), seed=seed, device=device)
    targets = n_classes - 1
    common = dict(eps=eps, norm="Linf", seed=seed, device=device)
    # n_iter must go to the constructors: APGD derives its step-size checkpoints from it there.
    adversary.apgd = APGDAttack(model, n_iter=PAPER_ITERATIONS, n_restarts=1, loss="ce",
                                eot_iter=1, rho=0.75, logger=adversary.logger, **common)
    adversary.apgd_targeted = APGDAttack_targeted(
        model, n_iter=PAPER_ITERATIONS, n_restarts=1, n_target_classes=targets, eot_iter=1,
        rho=0.75, logger=adversary.logger, **common)
    adversary.fab = FABAttack_PT(model, n_iter=PAPER_ITERATIONS, n_restarts=1,
                                 n_target_classes=targets, **common)
    square = AA_PAPER["square"]
    adversary.square = FastSquareAttack(model, n_queries=square["queries"],
                                        n_restarts=square["restarts"], p_init=square["p_init"],
                                        resc_schedule=square["rescaled_schedule"], **common)
    return adversary


def settings(adversary: Any) -> dict[str, Any]:
    """What each attack of `adversary` runs with, read from the attack objects themselves."""
    apgd, targeted, fab, square = (adversary.apgd, adversary.apgd_targeted, adversary.fab,
                                   adversary.square)
    found = {
        "order": list(adversary.attacks_to_run),
        "apgd-ce": {"loss": "ce", "iterations": apgd.n_iter, "restarts": apgd.n_restarts,
                    "rho": apgd.thr_decr, "eot_iter": apgd.eot_iter},
        "apgd-t": {"loss": "dlr-targeted", "iterations": targeted.n_iter,
                   "restarts": targeted.n_restarts, "targets": targeted.n_target_classes},
        # AutoAttack sets FAB-T to one restart when it runs it.
        "fab-t": {"iterations": fab.n_iter, "restarts": 1, "targets": fab.n_target_classes},
        "square": {"queries": square.n_queries, "restarts": square.n_restarts,
                   "p_init": square.p_init, "rescaled_schedule": square.rescale_schedule},
    }
    return {key: value for key, value in found.items()  # only the attacks that run
            if key == "order" or key in adversary.attacks_to_run}


@dataclass
class ShardResult:
    """One shard: how many were correct before the attacks (AutoAttack's own count), how many
    each attack flipped, the robust flags recounted by our forward pass, and the warnings."""

    clean: int
    flipped: dict[str, int]
    robust: list[bool]
    warnings: list[str] = field(default_factory=list)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _captured(logger: logging.Logger) -> Iterator[tuple[_Records, list[warnings.WarningMessage]]]:
    """The library's log records (its warnings and per-batch counts) and Python warnings."""
    handler, level, propagate = _Records(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield handler, caught
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@contextmanager
def _timed_attacks(adversary: Any) -> Iterator[dict[str, float]]:
    """Seconds spent in each attack's `perturb` (AutoAttack calls it once per batch), by name."""
    seconds: dict[str, float] = {}
    attacks = {"apgd-ce": adversary.apgd, "apgd-t": adversary.apgd_targeted,
               "fab-t": adversary.fab, "square": adversary.square}
    originals = {name: attack.perturb for name, attack in attacks.items()}

    def timed(name: str, perturb: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return perturb(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started
        return wrapper

    for name, attack in attacks.items():
        attack.perturb = timed(name, originals[name])
    try:
        yield seconds
    finally:
        for name, attack in attacks.items():
            attack.perturb = originals[name]


def run_shard(adversary: Any, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
              batch_size: int) -> ShardResult:
    """Run the whole AutoAttack on one shard; refuse points outside the eps-ball or [0, 1], and
    adversarial logits that hold NaN or inf (wscat.inference.NonFiniteOutputs, under AA or
    AA-paper) in the robust recount."""
    with _captured(adversary.logger) as (handler, caught), _timed_attacks(adversary) as seconds:
        x_adv, _ = adversary.run_standard_evaluation(x, y, batch_size=batch_size)
    column = "AA" if adversary.version == "standard" else "AA-paper"
    for attack, spent in seconds.items():
        print(f"timing: {column}/{attack} {spent:.2f} s", file=sys.stderr, flush=True)
    if float((x_adv - x).abs().max()) > eps + 1e-6 or x_adv.min() < 0 or x_adv.max() > 1:
        raise RuntimeError("AutoAttack returned points outside the eps-ball or [0, 1]")
    flipped = {attack: 0 for attack in adversary.attacks_to_run}
    seen: dict[str, int] = {}
    for record in handler.records:
        match = _PERTURBED.match(record.getMessage())
        if match:
            flipped[match["attack"]] += int(match["k"])
            seen[match["attack"]] = seen.get(match["attack"], 0) + int(match["m"])
    # The first attack that ran saw every point that was correct before the attacks.
    clean = next((seen[a] for a in adversary.attacks_to_run if a in seen), 0)
    messages = [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING]
    messages += [str(w.message) for w in caught]
    flags, bad = [], 0
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            logits = logits_of(model(x_adv[i:i + batch_size]))
            bad = bad + nonfinite_rows(logits)
            flags.append(logits.argmax(1) == y[i:i + batch_size])
    refuse_nonfinite(bad, len(x), column)  # argmax would read NaN as class 0
    robust = torch.cat(flags)
    return ShardResult(clean=clean, flipped=flipped, robust=robust.tolist(),
                       warnings=list(dict.fromkeys(messages)))
