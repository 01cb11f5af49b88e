"""Projection head of WSCAT's contrastive loss: Linear(feature_dim, dim); the loss L2-normalises."""
from __future__ import annotations

import torch
from torch import nn


class ProjectionHead(nn.Module):
    """z = W f(x) + b. WSCAT has two: one for natural, one for adversarial features (the notes)."""

    def __init__(self, feature_dim: int, dim: int = 256) -> None:
        super().__init__()
        self.linear = nn.Linear(feature_dim, dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear(features)
