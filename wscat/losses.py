"""Losses of the paper and its baselines: smoothed CE, TRADES' KL, the weakly supervised dynamic
contrastive loss l_con (Eq. 7; both the released code's two-view form and the paper's adversarial-
anchor form; with fixed or per-sample labels it is SupCon or InfoNCE / NT-Xent), RLFAT's logit
pairing, and Mean Teacher's consistency."""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

Anchors = Literal["both", "adversarial"]


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0
                  ) -> torch.Tensor:
    """Mean CE over the samples that carry a label (true or pseudo); labels < 0 are skipped.

    Masked arithmetic instead of boolean indexing: no host synchronisation on a GPU (0 when no
    sample carries a label)."""
    has_label = labels >= 0
    per_sample = F.cross_entropy(logits, labels.clamp(min=0), reduction="none",
                                 label_smoothing=label_smoothing)
    return (per_sample * has_label).sum() / has_label.sum().clamp(min=1)


def kl_divergence(logits_natural: torch.Tensor, logits_adversarial: torch.Tensor) -> torch.Tensor:
    """KL(C(x) || C(x')) with batch-mean reduction (TRADES, Zhang et al. 2019, Eq. 5)."""
    return F.kl_div(F.log_softmax(logits_adversarial, dim=1), F.softmax(logits_natural, dim=1),
                    reduction="batchmean")


def dynamic_contrastive_loss(z_natural: torch.Tensor, z_adversarial: torch.Tensor,
                             labels: torch.Tensor, *, temperature: float = 0.07,
                             anchors: Anchors = "both") -> torch.Tensor:
    """Weakly supervised dynamic loss l_con(z', z) (paper Eq. 7), s = cosine / temperature.

    `labels` are the current classifier's predictions argmax C(x) (weak supervision), so positives
    of x are the batch samples predicted in the same class. Other labels give the paper's variants:
    fixed (true or pseudo) labels give SupCon (Khosla et al. 2020; WSCAT-fixed), and one distinct
    label per sample leaves the sample's own other view as its only positive: InfoNCE (paper Eq. 6)
    with anchors="adversarial", NT-Xent (SimCLR, Chen et al. 2020) with anchors="both" (WSCAT-self).
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


def logit_pairing(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """(1/m) sum_i ||u_a(i) - u_b(i)||_2^2: squared L2 distance between logit vectors, summed over
    classes and averaged over the batch (RLFAT's L_RLFT, Song et al. 2020, Eq. 9; the released code
    divides the summed squared difference by the batch size, which is this). In float32 even
    under bf16 autocast."""
    return (logits_a.float() - logits_b.float()).pow(2).sum(dim=1).mean()


def consistency_mse(logits_student: torch.Tensor, logits_teacher: torch.Tensor) -> torch.Tensor:
    """Mean Teacher's consistency: MSE between softmax outputs, mean over samples and classes."""
    return F.mse_loss(F.softmax(logits_student, dim=1), F.softmax(logits_teacher, dim=1))
