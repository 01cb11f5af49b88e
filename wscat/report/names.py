"""How the paper names methods, and which compete for bold in its tables (no torch here)."""
from __future__ import annotations

from typing import Any

# How the paper's tables name each configured method.
DISPLAY_NAMES = {"standard": "Standard", "trades": "TRADES", "rlfat": "RLFAT", "dmat": "DMAT",
                 "wscat-sup": "WSCAT-sup", "mt": "MT", "rst": "RST", "puat": "PUAT",
                 "wscat": "WSCAT", "wscat-fixed": "WSCAT-fixed", "wscat-self": "WSCAT-self",
                 "wscat-std": "WSCAT-std"}
NON_ADVERSARIAL_OBJECTIVES = {"standard", "mean_teacher"}


def display_name(method: str) -> str:
    """The paper's name of a method key (unknown keys are shown as they are)."""
    return DISPLAY_NAMES.get(method, method)


def is_adversarial(method_params: dict[str, Any]) -> bool:
    """Whether a method is adversarial training (only those compete for bold in the tables)."""
    return method_params["objective"] not in NON_ADVERSARIAL_OBJECTIVES
