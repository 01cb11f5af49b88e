"""Attack objectives to maximise: CE and the CW margin (kappa = 0), summed over the batch."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from wscat.attacks.pgd import Objective

Model = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def ce_objective(model: Model, labels: torch.Tensor) -> Objective:
    """Cross-entropy of the true label (PGD, FGSM)."""
    return lambda x: F.cross_entropy(model(x)[1], labels, reduction="sum")


def cw_margin(logits: torch.Tensor, labels: torch.Tensor, kappa: float = 0.0) -> torch.Tensor:
    """Per example: the Carlini-Wagner margin max_{j != y} z_j - z_y, capped at kappa."""
    true = logits.gather(1, labels[:, None]).squeeze(1)
    other = logits.masked_fill(F.one_hot(labels, logits.shape[1]).bool(), float("-inf")).amax(1)
    return (other - true).clamp(max=kappa)


def cw_objective(model: Model, labels: torch.Tensor, kappa: float = 0.0) -> Objective:
    """The CW margin summed over the batch (the L-inf 'CW' attack)."""
    return lambda x: cw_margin(model(x)[1], labels, kappa).sum()
