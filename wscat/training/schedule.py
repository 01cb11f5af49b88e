"""One-cycle learning rate stepped per epoch: linear warm-up, then cosine to 0 (the notes).

Not the release's own schedule, PyTorch's OneCycleLR with its defaults: that one starts at lr/25,
warms up on a cosine, ends at lr/25/1e4 and cycles SGD's momentum 0.95 -> 0.85 -> 0.95, where this
keeps the optimiser's (docs/official-code.md, "Release details wscat does not follow")."""
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
