"""The paper's five attacks, in the order of its tables, and their Mean. Without torch, so that
the report steps (`wscat table`, the paper's tables and figures, the curves) start without
loading it."""
from __future__ import annotations

import math

ATTACKS = ("Natural", "FGSM", "PGD", "CW", "AA")  # the paper's Mean is over these five


def harmonic_mean(values: list[float]) -> float:
    """Harmonic mean (0 if any value is 0): the paper's 'Mean' row and its beta-tuning criterion."""
    if any(v <= 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def is_percent(value: object) -> bool:
    """Whether `value` is an accuracy in percent: a finite real number in [0, 100] (not a bool)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= 100)
