"""How the paper names methods, and which compete for bold in its tables (no torch here, but for
your own method's class)."""
from __future__ import annotations

from typing import Any

from wscat import own_method

# How the paper's tables name each configured method.
DISPLAY_NAMES = {"standard": "Standard", "trades": "TRADES", "rlfat": "RLFAT", "dmat": "DMAT",
                 "wscat-sup": "WSCAT-sup", "mt": "MT", "rst": "RST", "puat": "PUAT",
                 "wscat": "WSCAT", "wscat-fixed": "WSCAT-fixed", "wscat-self": "WSCAT-self",
                 "wscat-std": "WSCAT-std"}
NON_ADVERSARIAL_OBJECTIVES = {"standard", "mean_teacher"}
# One colour per method in every figure (Table 2's column order, then the ablation's variants),
# whatever else a figure draws beside it; a method not listed takes the next colour left over.
METHOD_COLOURS = {"Standard": "tab:blue", "TRADES": "tab:orange", "RLFAT": "tab:green",
                  "DMAT": "tab:olive", "WSCAT-sup": "tab:purple", "MT": "tab:brown",
                  "RST": "tab:pink", "PUAT": "tab:gray", "WSCAT": "black",
                  "WSCAT-fixed": "tab:cyan", "WSCAT-self": "tab:red", "WSCAT-std": "goldenrod"}
SPARE_COLOURS = ("navy", "teal", "maroon", "darkgreen", "indigo", "sienna")


def method_colours(names: list[str]) -> dict[str, str]:
    """A colour per displayed method name: its own (METHOD_COLOURS), else a spare in turn."""
    spare = iter(SPARE_COLOURS * (1 + len(names) // len(SPARE_COLOURS)))
    return {name: METHOD_COLOURS.get(name) or next(spare) for name in names}


def display_name(method: str) -> str:
    """The paper's name of a method key (unknown keys are shown as they are)."""
    return DISPLAY_NAMES.get(method, method)


def is_adversarial(method_params: dict[str, Any]) -> bool:
    """Whether a method is adversarial training (only those compete for bold in the tables).
    Your own method says so by its class's `adversarial` (read by importing its file: torch)."""
    objective = method_params["objective"]
    if own_method.is_own(objective):
        return bool(own_method.load(objective).adversarial)
    return objective not in NON_ADVERSARIAL_OBJECTIVES
