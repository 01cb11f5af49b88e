"""MART (Wang et al., ICLR 2020, "Improving adversarial robustness requires revisiting
misclassified examples"), Eq. 8, as your own method: a file outside the package that wscat trains,
attacks and tabulates beside its built-in methods (docs/methods.md, "Your own method").

    L = BCE(p(x'), y) + lam * KL(p(x) || p(x')) * (1 - p_y(x))
    BCE(p(x'), y) = -log p_y(x') - log(1 - max_{k != y} p_k(x'))

x' maximises CE(C(x'), y) by PGD from x + 0.001 N(0, I) in eval mode (their attack); lam = 6 is
their CIFAR-10 value. A sample without a label (label -1: `data: semi`) adds nothing; with
`data: pseudo` a pseudo-label is its label, as RST trains TRADES.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from wscat.attacks import ce_objective, pgd
from wscat.methods import Batch, Method, StepContext


def mart_loss(logits_natural: torch.Tensor, logits_adversarial: torch.Tensor,
              labels: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, BCE, weighted KL) of MART's Eq. 8, each the mean over the samples with a label."""
    has_label = labels >= 0
    y = labels.clamp(min=0)
    p_adversarial = F.softmax(logits_adversarial, dim=1)
    p_natural = F.softmax(logits_natural, dim=1)
    true_adversarial = p_adversarial.gather(1, y[:, None]).squeeze(1)
    others = p_adversarial.masked_fill(F.one_hot(y, p_adversarial.shape[1]).bool(), float("-inf"))
    bce = -torch.log(true_adversarial + 1e-12) - torch.log(1 - others.max(dim=1).values + 1e-12)
    kl = (p_natural * (torch.log(p_natural + 1e-12) - torch.log(p_adversarial + 1e-12))).sum(1)
    weighted_kl = kl * (1 - p_natural.gather(1, y[:, None]).squeeze(1))
    count = has_label.sum().clamp(min=1)
    bce_mean = (bce * has_label).sum() / count
    kl_mean = (weighted_kl * has_label).sum() / count
    return bce_mean + lam * kl_mean, bce_mean, kl_mean


class Mart(Method):
    """MART: boosted CE on x' plus the KL to x weighted by how misclassified x is."""

    def __init__(self, lam: float = 6.0) -> None:
        super().__init__()
        self.lam = lam

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.eval()  # their attack: eval mode, from x + 0.001 N(0, I)
        x_adv = pgd(ce_objective(model, batch.labels.clamp(min=0)), batch.x, eps=ctx.eps,
                    step_size=ctx.step_size, steps=ctx.steps, random_start="normal",
                    generator=ctx.generator)
        model.train()
        _, logits_natural = model(batch.x)
        _, logits_adversarial = model(x_adv)
        loss, bce, kl = mart_loss(logits_natural, logits_adversarial, batch.labels, self.lam)
        return loss, {"bce": bce.detach(), "kl": kl.detach()}
