"""Float64 references written from the papers' formulas, as loops, for the loss tests
(tests/unit/test_wscat_reference.py, test_baseline_references.py): nothing from wscat.losses."""
from __future__ import annotations

from collections.abc import Sequence

import torch


def log_softmax(row: torch.Tensor) -> torch.Tensor:
    """log softmax of one row of logits, shifted by its max."""
    return row - row.max() - torch.log(torch.exp(row - row.max()).sum())


def ref_ce(logits: torch.Tensor, labels: Sequence[int] | torch.Tensor,
           smoothing: float = 0.0) -> torch.Tensor:
    """Mean over the samples with a (true or pseudo) label of -(1-s) log p_y - (s/K) sum_k log p_k;
    a label of -1 is no label."""
    labels = labels.tolist() if isinstance(labels, torch.Tensor) else labels
    terms = []
    for row, y in zip(logits, labels):
        if y >= 0:
            log_p = log_softmax(row)
            terms.append(-(1 - smoothing) * log_p[y] - smoothing / len(row) * log_p.sum())
    return torch.stack(terms).sum() / len(terms)


def ref_kl(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = (1/B) sum_i sum_k p_ik (log p_ik - log q_ik) (TRADES' and WSCAT's
    KL(C(x) || C(x'))); nothing detached."""
    total = logits_p.new_zeros(())
    for u, v in zip(logits_p, logits_q):
        log_p, log_q = log_softmax(u), log_softmax(v)
        total = total + (log_p.exp() * (log_p - log_q)).sum()
    return total / len(logits_p)
