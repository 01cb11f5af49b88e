"""Losses of the paper: smoothed CE, TRADES' KL, the weakly supervised dynamic contrastive loss
l_con (Eq. 5; both the released code's two-view form and the paper's Eq. 4-style adversarial-anchor
form), and Mean Teacher's consistency."""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

Anchors = Literal["both", "adversarial"]


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0
                  ) -> torch.Tensor:
    """Mean CE over the samples that carry a label (true or pseudo); labels < 0 are skipped."""
    has_label = labels >= 0
    if not bool(has_label.any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits[has_label], labels[has_label], label_smoothing=label_smoothing)


def kl_divergence(logits_natural: torch.Tensor, logits_adversarial: torch.Tensor) -> torch.Tensor:
    """KL(C(x) || C(x')) with batch-mean reduction (TRADES, Zhang et al. 2019, Eq. 5)."""
    return F.kl_div(F.log_softmax(logits_adversarial, dim=1), F.softmax(logits_natural, dim=1),
                    reduction="batchmean")


def dynamic_contrastive_loss(z_natural: torch.Tensor, z_adversarial: torch.Tensor,
                             labels: torch.Tensor, *, temperature: float = 0.07,
                             anchors: Anchors = "both") -> torch.Tensor:
    """Weakly supervised dynamic loss l_con(z', z) (paper Eq. 5), s = cosine / temperature.

    `labels` are the current classifier's predictions argmax C(x) (weak supervision), so positives
    of x are the batch samples predicted in the same class.
    anchors="both": the released code's form: SupCon over the 2B vectors {z, z'}; every vector is an
    anchor, its denominator runs over the 2B-1 others, its positives are the others with its label.
    anchors="adversarial": the paper's form: anchor z'_i, denominator over the natural z_n of the
    batch, positives the natural z_p with label_p == label_i (i included); mean over the batch.
    """
    z = F.normalize(z_natural, dim=1)
    z_adv = F.normalize(z_adversarial, dim=1)
    if anchors == "both":
        views = torch.cat([z, z_adv], dim=0)
        view_labels = torch.cat([labels, labels], dim=0)
        logits = views @ views.T / temperature
        self_mask = torch.eye(len(views), dtype=torch.bool, device=views.device)
        logits = logits.masked_fill(self_mask, float("-inf"))
        positives = (view_labels[:, None] == view_labels[None, :]) & ~self_mask
    elif anchors == "adversarial":
        logits = z_adv @ z.T / temperature
        positives = labels[:, None] == labels[None, :]
    else:
        raise ValueError(f"anchors must be 'both' or 'adversarial', got {anchors!r}")
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    log_prob = log_prob.masked_fill(~positives, 0.0)
    return (-log_prob.sum(1) / positives.sum(1)).mean()


def consistency_mse(logits_student: torch.Tensor, logits_teacher: torch.Tensor) -> torch.Tensor:
    """Mean Teacher's consistency: MSE between softmax outputs, mean over samples and classes."""
    return F.mse_loss(F.softmax(logits_student, dim=1), F.softmax(logits_teacher, dim=1))
