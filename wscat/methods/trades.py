"""TRADES (Zhang et al. 2019, Eq. 5): CE(C(x), y) + lam * max_{x'} KL(C(x) || C(x')).

Variants are configuration of this one loss:
- RST (Carmon et al. 2019): data: pseudo, TRADES on labelled + pseudo-labelled data.
- DMAT (Wang et al. 2023, "Better diffusion models further improve adversarial training"): CE with
  label smoothing 0.1, a uniform random start and the attack in train mode with frozen BatchNorm
  statistics (their code, built on Rebuffi et al. 2021), EMA of the weights (the trainer's), and
  70% generated images in every batch (the data pipeline).
Defaults are TRADES' own code: attack in eval mode from x + 0.001 N(0, I), no smoothing.
3 + train_steps forward passes a step (13 at CIFAR's PGD-10): one clean (no grad) for the
attack's target, the attack's steps, natural + adversarial.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Literal

import torch
from torch import nn

from wscat.attacks import frozen_batchnorm_stats, pgd
from wscat.attacks.pgd import RandomStart
from wscat.losses import cross_entropy, kl_divergence
from wscat.methods.base import Batch, Method, StepContext

AttackBatchNorm = Literal["eval", "batch"]


def trades_attack(model: nn.Module, x: torch.Tensor, ctx: StepContext, *,
                  random_start: RandomStart = "normal", batchnorm: AttackBatchNorm = "eval"
                  ) -> torch.Tensor:
    """x' = argmax_{x' in B_eps(x)} KL(C(x) || C(x')) with C(x) fixed (TRADES' inner maximisation).

    batchnorm="eval": running statistics (the TRADES and RST code); "batch": batch statistics with
    the running statistics left untouched (the DMAT code).
    Leaves the model in train mode.
    """
    if batchnorm not in ("eval", "batch"):
        raise ValueError(f"attack batchnorm must be 'eval' or 'batch', got {batchnorm!r}")
    model.train(batchnorm == "batch")
    with frozen_batchnorm_stats(model) if batchnorm == "batch" else nullcontext():
        with torch.no_grad():  # a copy: under CUDA graphs the next forward reuses its memory
            target = model(x)[1].clone()
        x_adv = pgd(lambda x_: kl_divergence(target, model(x_)[1]), x, eps=ctx.eps,
                    step_size=ctx.step_size, steps=ctx.steps, random_start=random_start,
                    generator=ctx.generator)
    model.train()
    return x_adv


class Trades(Method):
    def __init__(self, lam: float, *, label_smoothing: float = 0.0,
                 random_start: RandomStart = "normal", attack_batchnorm: AttackBatchNorm = "eval"
                 ) -> None:
        super().__init__()
        self.lam, self.label_smoothing = lam, label_smoothing
        self.random_start, self.attack_batchnorm = random_start, attack_batchnorm

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        x_adv = trades_attack(model, batch.x, ctx, random_start=self.random_start,
                              batchnorm=self.attack_batchnorm)
        _, logits_natural = model(batch.x)
        _, logits_adversarial = model(x_adv)
        ce = cross_entropy(logits_natural, batch.labels, self.label_smoothing)
        kl = kl_divergence(logits_natural, logits_adversarial)
        return ce + self.lam * kl, {"ce": ce.detach(), "kl": kl.detach()}
