"""Exponential moving average of the weights (the model every reported number uses)."""
from __future__ import annotations

import copy

import torch
from torch import nn


def make_ema(model: nn.Module) -> nn.Module:
    """A frozen copy of `model` in eval mode."""
    ema = copy.deepcopy(model).eval()
    for parameter in ema.parameters():
        parameter.requires_grad_(False)
    return ema


@torch.no_grad()
def update_ema(ema: nn.Module, model: nn.Module, decay: float, *,
               average_buffers: bool = False) -> None:
    """ema <- decay * ema + (1 - decay) * model for parameters. Buffers (batch-norm statistics)
    are copied, or with `average_buffers` averaged the same way (integer ones, the batch
    counters, are always copied): weights averaged over many steps with the model's latest
    statistics can disagree, which a long EMA horizon (Mean Teacher's teacher) makes visible."""
    # One fused launch per group on a GPU instead of one per tensor (WRN-28-10 has ~100 tensors).
    torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1.0 - decay)
    if not average_buffers:
        buffers = list(ema.buffers())
        if buffers:  # the foreach ops refuse empty lists (a module without buffers)
            torch._foreach_copy_(buffers, list(model.buffers()))
        return
    pairs = list(zip(ema.buffers(), model.buffers()))
    statistics = [(e, m) for e, m in pairs if e.is_floating_point()]
    counters = [(e, m) for e, m in pairs if not e.is_floating_point()]
    if statistics:  # the foreach ops refuse empty lists
        torch._foreach_lerp_([e for e, _ in statistics], [m for _, m in statistics], 1.0 - decay)
    if counters:
        torch._foreach_copy_([e for e, _ in counters], [m for _, m in counters])
