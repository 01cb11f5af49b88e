"""Gradient-masking checks (Athalye et al. 2018; Carlini et al. 2019, "On evaluating adversarial
robustness", Sec. 5): each turns numbers the evaluation measured into {passed, detail, numbers}.

A masked model (e.g. a non-differentiable input quantisation) gives gradient attacks nothing to
follow: more steps or a larger eps stop lowering accuracy, a black-box attack beats the white-box
ones, AutoAttack warns of zero gradients, single-step FGSM does as well as iterative PGD.
"""
from __future__ import annotations

import math
from typing import Any

Check = dict[str, Any]


def falls_monotonically(values: list[float], accuracies: list[float], *, tolerance: float,
                        what: str) -> Check:
    """Accuracy (%) must not rise by more than `tolerance` points as `what` grows; a step with a
    number that is not finite counts as a rise (NaN compares False with anything)."""
    rises = [(a, b, acc_a, acc_b) for a, b, acc_a, acc_b
             in zip(values, values[1:], accuracies, accuracies[1:])
             if not (math.isfinite(acc_a) and math.isfinite(acc_b)) or acc_b > acc_a + tolerance]
    growing = {"steps": "with more steps", "eps": "with a larger eps"}.get(what, f"as {what} grows")
    detail = (f"PGD accuracy does not rise {growing} (tolerance {tolerance} points)"
              if not rises else
              "; ".join(f"PGD accuracy rises from {p:.2f}% ({what} {a}) to {q:.2f}% ({what} {b})"
                        for a, b, p, q in rises))
    return {"passed": not rises, "detail": detail, what: values,
            "accuracy": [round(a, 4) for a in accuracies], "tolerance": tolerance}


def eps_zero_is_natural(natural: dict[str, float], at_eps_zero: dict[str, float]) -> Check:
    """Accuracy under an attack with eps = 0 (and AutoAttack's own clean count) must equal the
    natural accuracy on the same examples: no randomness, no train-mode BatchNorm, same inputs.
    A number that is not finite differs (abs(nan - x) > 1e-3 is False)."""
    differ = {name: (natural[name], value) for name, value in at_eps_zero.items()
              if not (math.isfinite(natural[name]) and math.isfinite(value))
              or abs(natural[name] - value) > 1e-3}  # manifests keep 4 decimals
    detail = ("natural accuracy = accuracy at eps 0 (" + ", ".join(at_eps_zero) + ")"
              if not differ else "; ".join(f"{name}: {b:.2f}% at eps 0 vs {a:.2f}% natural"
                                           for name, (a, b) in differ.items()))
    return {"passed": not differ, "detail": detail,
            "natural": {k: round(natural[k], 4) for k in at_eps_zero},
            "at_eps_zero": {k: round(v, 4) for k, v in at_eps_zero.items()}}


def square_not_better(after: dict[str, float], *, tolerance: float = 0.2) -> Check:
    """Black-box Square, run after AutoAttack's white-box attacks, must not lower accuracy by more
    than `tolerance` points (AutoAttack's own threshold, 0.2%); a number that is not finite
    fails."""
    white_box = min(v for k, v in after.items() if k != "square")
    gain = white_box - after["square"]
    finite = all(math.isfinite(v) for v in after.values())
    detail = (f"Square lowers accuracy by {gain:.2f} points after the white-box attacks"
              + (" (more than the tolerance)" if gain > tolerance else "")
              + ("" if finite else " (an accuracy is not a finite number)"))
    return {"passed": finite and gain <= tolerance, "detail": detail,
            "white_box": round(white_box, 4),
            "after_square": round(after["square"], 4), "tolerance": tolerance}


# AutoAttack's warning that its black-box Square beat its white-box attacks (pyautoattack's
# checks.check_square_sr): a sign of masking after the standard AutoAttack's 100-step APGD, but
# expected after the paper's variant's 10 steps, which leave images a longer attack would flip.
SQUARE_SUCCESS = "Square Attack has decreased the robust accuracy"


def counted(name: str, warning: str) -> bool:
    """Whether a warning of AutoAttack `name` (AA, AA-paper) counts against the check: every
    one of the standard AutoAttack's; the paper's variant's but its Square success."""
    return name != "AA-paper" or not warning.startswith(SQUARE_SUCCESS)


def no_autoattack_warnings(warnings: dict[str, list[str]]) -> Check:
    """AutoAttack's own checks (zero gradients, randomised or dynamic defence, Square success),
    but Square's success after the paper's weak variant (`counted`; the metrics file keeps it
    under autoattack_warnings)."""
    failed = [(name, w) for name, ws in warnings.items() for w in ws if counted(name, w)]
    detail = ("AutoAttack raised no warning" if not failed else
              "; ".join(f"{name}: {w}" for name, w in failed))
    return {"passed": not failed, "detail": detail, "warnings": len(failed)}


def iterative_not_weaker(fgsm: float, pgd: float, *, tolerance: float) -> Check:
    """Iterative PGD must do at least as well as single-step FGSM with the same eps."""
    passed = pgd <= fgsm + tolerance
    detail = f"PGD {pgd:.2f}% vs FGSM {fgsm:.2f}%" + ("" if passed else ": FGSM is stronger")
    return {"passed": passed, "detail": detail, "fgsm": round(fgsm, 4), "pgd": round(pgd, 4),
            "tolerance": tolerance}
