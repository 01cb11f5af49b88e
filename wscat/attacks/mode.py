"""Attacks run on a model in eval mode: checked up front and on every forward pass."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


def require_eval(model: nn.Module, *, error: type[Exception] = RuntimeError,
                 message: str = "attacks must run with the model in eval mode; call model.eval() "
                                "first") -> None:
    """Refuse (`error`, `message`) a model with any module in train mode (BatchNorm would use
    batch statistics)."""
    if any(m.training for m in model.modules()):
        raise error(message)


@contextmanager
def eval_mode_enforced(model: nn.Module) -> Iterator[None]:
    """Every forward pass inside the block fails if the module it enters is in train mode, so no
    attack (ours or a library's) can switch the model to train mode unnoticed."""

    def check(module: nn.Module, _inputs: object) -> None:
        if module.training:
            raise RuntimeError(f"an attack ran {type(module).__name__} in train mode; "
                               "attacks must run with the model in eval mode")

    require_eval(model)
    handles = [module.register_forward_pre_hook(check) for module in model.modules()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def frozen_parameters(model: nn.Module) -> Iterator[None]:
    """The model's parameters stop requiring gradients inside the block: an attack differentiates
    with respect to its inputs only, and a library that calls `loss.backward()` (pyautoattack's
    APGD and FAB do) would otherwise also compute, and accumulate into `.grad`, every weight's
    gradient. The input gradients are the same bits either way."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
