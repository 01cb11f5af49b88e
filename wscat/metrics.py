"""The paper's five attacks, in the order of its tables, and their Mean. Without torch, so that
the report steps (`wscat table`, the paper's tables and figures, the curves) start without
loading it."""
from __future__ import annotations

import math

ATTACKS = ("Natural", "FGSM", "PGD", "CW", "AA")  # the paper's Mean is over these five

# `AA-paper`, the AutoAttack the paper's AA numbers came from: the release's eval_aa.py runs
# torchattacks' AutoAttack(version="standard", n_classes=...), which is APGD-CE, APGD-T and
# FAB-T at torchattacks' default 10 iterations with n_classes - 1 targets, then Square with 5,000
# queries, one restart and torchattacks' defaults (p_init 0.8, the rescaled p schedule)
# (docs/official-code.md). wscat.attacks.autoattack builds it from pyautoattack's classes; the
# extra part's settings (wscat.workflow.evaluate_params) include it, so a change of it reruns
# and refuses the AA-paper numbers measured before.
AA_PAPER = {"order": ["apgd-ce", "apgd-t", "fab-t", "square"], "iterations": 10,
            "square": {"queries": 5000, "restarts": 1, "p_init": 0.8, "rescaled_schedule": True}}


def harmonic_mean(values: list[float]) -> float:
    """Harmonic mean (0 if any value is 0): the paper's 'Mean' row and its beta-tuning criterion."""
    if any(v <= 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def is_percent(value: object) -> bool:
    """Whether `value` is an accuracy in percent: a finite real number in [0, 100] (not a bool)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= 100)


def aa_paper_difference(ran: dict | None) -> str | None:
    """How the AA-paper a metrics file's manifest records (its `attacks` settings, as
    wscat.attacks.autoattack.settings reads them) differs from AA_PAPER, in words; None where
    it is the same, or where the file records none."""
    if not ran:
        return None
    order = list(ran.get("order") or [])
    if order != AA_PAPER["order"]:
        return f"AA-paper ran {', '.join(order)}; it runs {', '.join(AA_PAPER['order'])} now"
    for attack in AA_PAPER["order"][:3]:
        iterations = (ran.get(attack) or {}).get("iterations", AA_PAPER["iterations"])
        if iterations != AA_PAPER["iterations"]:
            return (f"AA-paper's {attack} ran {iterations} iterations; it runs "
                    f"{AA_PAPER['iterations']} now")
    square = ran.get("square") or {}
    changed = [key for key, value in AA_PAPER["square"].items()
               if key in square and square[key] != value]
    if changed:
        return ("AA-paper's Square ran with " + ", ".join(f"{k} {square[k]}" for k in changed)
                + "; it runs with " + ", ".join(f"{k} {AA_PAPER['square'][k]}" for k in changed)
                + " now")
    return None
