"""Standard training: CE on labelled data (the paper's 'Standard' column; RST's labeler)."""
from __future__ import annotations

import torch
from torch import nn

from wscat.losses import cross_entropy
from wscat.methods.base import Batch, Method, StepContext


class Standard(Method):
    adversarial = False

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        _, logits = model(batch.x)
        loss = cross_entropy(logits, batch.labels)
        return loss, {"ce": loss.detach()}
