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
def update_ema(ema: nn.Module, model: nn.Module, decay: float) -> None:
    """ema <- decay * ema + (1 - decay) * model for parameters; buffers (BN statistics) copied."""
    for e, m in zip(ema.parameters(), model.parameters()):
        e.lerp_(m, 1.0 - decay)
    for e, m in zip(ema.buffers(), model.buffers()):
        e.copy_(m)
