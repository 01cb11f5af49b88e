"""SGD with momentum (Nesterov) and weight decay, as torch.optim.SGD computes it, without loading
torch's compiler stack.

torch.optim wraps `Optimizer.add_param_group`, `zero_grad`, `state_dict`, `load_state_dict` and
`SGD.step` so that torch.compile never traces into them; the first call of each wrapper imports
torch._dynamo, 1.1-1.4 s of every training job's start on a CPU (a `make demo` trains 15 models).
Outside torch.compile those wrappers do nothing else, so this subclass calls the functions they
wrap: the same code on the same tensors, the same updates bit for bit and the same state_dict
(tests/unit/test_sgd.py compares both with torch.optim.SGD). Nothing here is compiled: the
trainer compiles the model's forward only (wscat.training.speed).
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
_STEP = inspect.unwrap(torch.optim.SGD.step)


class SGD(torch.optim.SGD):
    """torch.optim.SGD (lr, momentum, Nesterov, weight decay) without the torch._dynamo import."""

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
            raise ValueError("wscat's SGD does not support differentiable=True")
        with torch.no_grad():
            return _STEP(self, closure)
