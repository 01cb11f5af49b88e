"""The paper's five attacks, in the order of its tables. Without torch, so that the report
steps (`wscat table`, the paired comparison) start without loading it."""
from __future__ import annotations

ATTACKS = ("Natural", "FGSM", "PGD", "CW", "AA")  # the paper's Mean is over these five
