"""Training methods, one module each; variants (RST, DMAT, WSCAT-sup, -fixed, -self, -std) are
configuration, not copies.

A method's knobs are the keyword arguments of its constructor; params.schema.yaml says which of
them each objective requires (tests/unit/test_methods.py checks that the two agree), and
`build_method` passes the resolved params.yaml entry's values for exactly those names. An objective
`FILE.py:Class` is your own method, a class in a file of yours (`wscat.own_method`).
"""
from __future__ import annotations

import inspect
from typing import Any

from wscat import own_method as own
from wscat.methods.base import Batch, Method, StepContext
from wscat.methods.mean_teacher import MeanTeacher
from wscat.methods.puat import Puat
from wscat.methods.rlfat import Rlfat
from wscat.methods.standard import Standard
from wscat.methods.trades import Trades
from wscat.methods.wscat import Wscat
from wscat.own_method_check import constructor_knobs

# The method class of each `objective` in params.yaml.
OBJECTIVES: dict[str, type[Method]] = {"standard": Standard, "trades": Trades, "rlfat": Rlfat,
                                       "wscat": Wscat, "mean_teacher": MeanTeacher, "puat": Puat}
# Constructor arguments the model and data decide, not params.yaml.
SHAPES = own.SHAPES


def method_class(objective: str) -> type[Method]:
    """The class of an objective: a built-in (OBJECTIVES) or your own (FILE.py:Class)."""
    if objective in OBJECTIVES:
        return OBJECTIVES[objective]
    if own.is_own(objective):
        return own.load(objective)
    raise ValueError(f"unknown objective '{objective}'")


def knobs(objective: str) -> dict[str, bool]:
    """The params.yaml knobs an objective's constructor takes, each with whether it is required
    (no default: the schema requires it for a built-in, wscat.config for your own)."""
    return constructor_knobs(method_class(objective))


def build_method(method_params: dict[str, Any], *, feature_dim: int, num_classes: int,
                 image_shape: tuple[int, int, int]) -> Method:
    """The method object for a resolved params.yaml `methods.<name>` entry; a knob left out
    keeps the constructor's default (TRADES' own choices, WSCAT's positives="predicted")."""
    objective = method_params["objective"]
    cls = method_class(objective)
    if objective == "rlfat" and method_params["blocks"] > min(image_shape[1:]):
        raise ValueError(f"rlfat: blocks={method_params['blocks']} exceeds the image side "
                         f"{min(image_shape[1:])}")
    shapes = {"feature_dim": feature_dim, "num_classes": num_classes, "image_shape": image_shape}
    parameters = inspect.signature(cls).parameters
    arguments = {name: shapes[name] for name in parameters if name in shapes}
    arguments.update({name: method_params[name] for name in knobs(objective)
                      if name in method_params})
    if own.is_own(objective):  # its errors and its loss's return, said in one line
        return own.build(objective, cls, arguments)
    return cls(**arguments)


__all__ = ["Batch", "Method", "OBJECTIVES", "StepContext", "build_method", "knobs", "method_class"]
