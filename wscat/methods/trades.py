"""TRADES (Zhang et al. 2019, Eq. 5): CE(C(x), y) + lam * max_{x'} KL(C(x) || C(x')).

With data: pseudo this is RST (Carmon et al. 2019): TRADES on labelled + pseudo-labelled data.
The attack runs in eval mode from x + 0.001 N(0, I), as both papers' code does. 13 forward passes a
step: one clean (eval mode) for the attack's target, 10 attack steps, natural + adversarial.
"""
from __future__ import annotations

import torch
from torch import nn

from wscat.attacks import pgd
from wscat.losses import cross_entropy, kl_divergence
from wscat.methods.base import Batch, Method, StepContext


class Trades(Method):
    def __init__(self, lam: float) -> None:
        super().__init__()
        self.lam = lam

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.eval()
        with torch.no_grad():
            target = model(batch.x)[1]
        x_adv = pgd(lambda x: kl_divergence(target, model(x)[1]), batch.x, eps=ctx.eps,
                    step_size=ctx.step_size, steps=ctx.steps, random_start="normal",
                    generator=ctx.generator)
        model.train()
        _, logits_natural = model(batch.x)
        _, logits_adversarial = model(x_adv)
        ce = cross_entropy(logits_natural, batch.labels)
        kl = kl_divergence(logits_natural, logits_adversarial)
        return ce + self.lam * kl, {"ce": ce.detach(), "kl": kl.detach()}
