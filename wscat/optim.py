"""torch.optim's SGD and Adam, computed by torch's own code, without loading its compiler stack.

torch.optim wraps `Optimizer.add_param_group`, `zero_grad`, `state_dict`, `load_state_dict` and
each optimiser's `step` so that torch.compile never traces into them; the first call of each
wrapper imports torch._dynamo, 1.1-1.7 s of a job's start on a CPU: every training (SGD: a
`make demo` trains 15 models), every NRF evaluation (its bottleneck search steps an Adam) and
PUAT's three players (Adam). Outside torch.compile those wrappers do nothing else, so these
subclasses call the functions they wrap: the same code on the same tensors, the same updates bit
for bit and the same state_dict (tests/unit/test_optim.py compares both with torch.optim).
Nothing here is compiled: the trainer compiles the model's forward only (wscat.training.speed).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

# The functions under torch's decorators (each sets __wrapped__ with functools.wraps).
_ADD_PARAM_GROUP = inspect.unwrap(torch.optim.Optimizer.add_param_group)
_ZERO_GRAD = inspect.unwrap(torch.optim.Optimizer.zero_grad)
_STATE_DICT = inspect.unwrap(torch.optim.Optimizer.state_dict)
_LOAD_STATE_DICT = inspect.unwrap(torch.optim.Optimizer.load_state_dict)
_STEPS = {name: inspect.unwrap(getattr(torch.optim, name).step) for name in ("SGD", "Adam")}


class _Unwrapped(torch.optim.Optimizer):
    """The Optimizer methods above, called without their torch._dynamo wrappers."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _ADD_PARAM_GROUP(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _ZERO_GRAD(self, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return _STATE_DICT(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _LOAD_STATE_DICT(self, state_dict)

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One update; gradients off, as torch's wrapper sets them for a non-differentiable
        optimizer (its other work, graph breaks for torch.compile, does nothing here)."""
        if self.defaults["differentiable"]:
            raise ValueError(f"wscat's {type(self).__name__} does not support differentiable=True")
        with torch.no_grad():
            return _STEPS[type(self).__name__](self, closure)


class SGD(_Unwrapped, torch.optim.SGD):
    """torch.optim.SGD (lr, momentum, Nesterov, weight decay) without the torch._dynamo import:
    the training's optimiser (the paper's SGD: Sec. 4.1.3, "Hyper-parameters and
    Implementation")."""


class Adam(_Unwrapped, torch.optim.Adam):
    """torch.optim.Adam without the torch._dynamo import: NRF's bottleneck search and PUAT's
    generator, discriminator and attacker."""
