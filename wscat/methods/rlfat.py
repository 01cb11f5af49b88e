"""RLFAT_T (Song et al. 2020, "Robust local features for improving the generalization of
adversarial training", ICLR; arXiv 1909.10147): the TRADES-based form.

    x'    = argmax_{x' in B_eps(x)} KL(C(x) || C(x'))                 (TRADES' attack)
    L     = L_RLFL + alpha * L_RLFT                                   (their total objective)
    L_RLFL = CE(C(x), y) + lam * KL(C(x) || C(RBS(x')))               (Eq. 7, TRADES instance)
    L_RLFT = (1/m) sum_i ||u(RBS(x'_i)) - u(x'_i)||_2^2,  u = logits    (Eq. 9)
(equation numbers of arXiv v5). Gradients flow through every term; the KL target C(x) is not
detached, as in TRADES and their code. A supervised baseline in the WSCAT paper (data: labelled).

RBS (their Sec. 3.1, random block shuffle) splits an image into k strips horizontally and shuffles
them, then does the same vertically, at random cut points as in their code; block (i, j) of the
k x k grid so cut lands at (sigma(i), tau(j)). Their defaults, all datasets: k = 2, lam = 6
(TRADES' 1/lambda), alpha = 1 (alpha = 0.5 is RLFAT_P's). The squared distance is summed over
classes and averaged over the batch: their code divides the summed squared difference by the
batch size.

Departures: the shuffle is drawn per sample (their code draws one for the whole batch) with k - 1
distinct cut points in 1..side-1 (theirs may repeat or sit at 0, leaving fewer blocks); the
attack runs as our TRADES's (eval-mode BatchNorm, start x + 0.001 N(0, I), clipped to [0, 1]:
docs/methods.md, "TRADES' start"), where their TensorFlow graph attacks with train-mode BatchNorm
that also updates the running statistics.

4 + train_steps forward passes a step (14 at CIFAR's PGD-10): one clean (no grad) for the
attack's target, the attack's steps, then natural x, shuffled RBS(x') and adversarial x' (for
L_RLFT), in that order, each its own forward as in their code (a joint forward would mix their
BatchNorm batch statistics).
"""
from __future__ import annotations

import torch
from torch import nn

from wscat.losses import cross_entropy, kl_divergence, logit_pairing
from wscat.methods.base import Batch, Method, StepContext
from wscat.methods.trades import trades_attack


def _strip_order(n: int, side: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """(n, side) source indices: each sample's line 0..side-1 cut into k strips at k - 1 random
    distinct points, the strips laid out in a random order, each strip's lines kept in order."""
    device = generator.device  # drawn where the generator lives (the training device)
    # Stable sorts: a tie between two draws resolves the same way on every run and device.
    cuts = torch.rand(n, side - 1, generator=generator, device=device).argsort(
        dim=1, stable=True)[:, :k - 1] + 1
    position = torch.rand(n, k, generator=generator, device=device).argsort(dim=1, stable=True)
    lines = torch.arange(side, device=device)
    strip = (lines[None, :, None] >= cuts[:, None, :]).sum(dim=2)  # strip of each line
    key = position.gather(1, strip) * side + lines  # by the strip's new position, then by line
    return key.argsort(dim=1)


def random_block_shuffle(x: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """RBS(x) for a batch (B, C, H, W), drawn independently per sample; k = 1 is the identity."""
    n, _, height, width = x.shape
    if not 1 <= k <= min(height, width):
        raise ValueError(f"RBS needs 1 <= k <= min(H, W) = {min(height, width)}, got k={k}")
    if k == 1:
        return x
    rows = _strip_order(n, height, k, generator).to(x.device)
    cols = _strip_order(n, width, k, generator).to(x.device)
    x = x.gather(2, rows[:, None, :, None].expand_as(x))
    return x.gather(3, cols[:, None, None, :].expand_as(x))


class Rlfat(Method):
    def __init__(self, *, lam: float, alpha: float, blocks: int) -> None:
        super().__init__()
        self.lam, self.alpha, self.blocks = lam, alpha, blocks

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        x_adv = trades_attack(model, batch.x, ctx)
        x_shuffled = random_block_shuffle(x_adv, self.blocks, ctx.generator)
        _, logits_natural = model(batch.x)
        _, logits_shuffled = model(x_shuffled)
        _, logits_adversarial = model(x_adv)
        ce = cross_entropy(logits_natural, batch.labels)
        kl = kl_divergence(logits_natural, logits_shuffled)
        rlft = logit_pairing(logits_shuffled, logits_adversarial)
        loss = ce + self.lam * kl + self.alpha * rlft
        return loss, {"ce": ce.detach(), "kl": kl.detach(), "rlft": rlft.detach()}
