"""One-cycle learning rate stepped per epoch: linear warm-up, then cosine to 0 (the notes)."""
from __future__ import annotations

import math

import torch


def one_cycle(epochs: int, warmup_fraction: float):
    """Factor of the base lr at epoch e (0-based)."""
    warmup = warmup_fraction * epochs

    def factor(epoch: int) -> float:
        if epoch < warmup:
            return (epoch + 1) / (math.ceil(warmup) + 1)
        progress = (epoch - warmup) / max(epochs - warmup, 1e-8)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def make_scheduler(optimizer: torch.optim.Optimizer, epochs: int, warmup_fraction: float
                   ) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, one_cycle(epochs, warmup_fraction))
