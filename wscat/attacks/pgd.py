"""L-inf projected gradient ascent (Madry et al. 2018) on any objective(x') -> scalar."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import torch
from torch import nn

Objective = Callable[[torch.Tensor], torch.Tensor]
RandomStart = Literal["uniform", "normal", "none"]


def pgd(objective: Objective, x: torch.Tensor, *, eps: float, step_size: float, steps: int,
        random_start: RandomStart = "uniform", generator: torch.Generator | None = None
        ) -> torch.Tensor:
    """Maximise `objective` over the eps-ball around x (clamped to [0,1]); returns x' detached.

    random_start: "uniform" in the eps-ball (Madry; the WSCAT code), "normal" = x + 0.001 N(0, I)
    (TRADES' code), "none" (FGSM). The start is clipped to [0, 1] like every step; TRADES' code
    leaves its start unclipped (docs/methods.md, "TRADES' start": a stronger attack on digits).
    Only the gradient w.r.t. x' is computed, never parameter grads.
    """
    x = x.detach()
    if eps == 0 or steps == 0:
        return x.clone()
    # Noise is drawn on the generator's device (a CUDA generator in training, no host copy).
    where = generator.device if generator is not None else x.device
    if random_start == "uniform":
        noise = (torch.rand(x.shape, generator=generator, device=where) * 2 - 1).to(
            x.device, x.dtype) * eps
    elif random_start == "normal":
        noise = 0.001 * torch.randn(x.shape, generator=generator, device=where).to(x.device, x.dtype)
    else:
        noise = torch.zeros_like(x)
    x_adv = (x + noise).clamp(0.0, 1.0)
    for _ in range(steps):
        x_adv.requires_grad_(True)
        (grad,) = torch.autograd.grad(objective(x_adv), x_adv)
        x_adv = x_adv.detach() + step_size * grad.sign()
        x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0.0, 1.0)
    return x_adv.detach()


def fgsm(objective: Objective, x: torch.Tensor, *, eps: float) -> torch.Tensor:
    """FGSM (Goodfellow et al. 2015): one signed-gradient step of size eps, no random start."""
    return pgd(objective, x, eps=eps, step_size=eps, steps=1, random_start="none")


@contextmanager
def frozen_batchnorm_stats(model: nn.Module) -> Iterator[None]:
    """BatchNorm uses batch statistics (train mode) but its running statistics stay untouched.

    The released WSCAT code attacks this way; TRADES and RST attack in eval mode instead.
    With track_running_stats off, a train-mode BatchNorm normalises by the batch and neither reads
    nor writes its running buffers (no momentum update, no num_batches_tracked increment).
    """
    switched = [module for module in model.modules()
                if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.track_running_stats]
    for module in switched:
        module.track_running_stats = False
    try:
        yield
    finally:
        for module in switched:
            module.track_running_stats = True
