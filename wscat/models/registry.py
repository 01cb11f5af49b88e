"""build_model(name, ...) and the logits-only view that third-party attacks expect."""
from __future__ import annotations

import torch
from torch import nn

from wscat.models.cnn import SmallCNN

MODELS = {"cnn": SmallCNN}


def build_model(name: str, *, in_channels: int, num_classes: int, mean: tuple[float, ...],
                std: tuple[float, ...]) -> nn.Module:
    """A model returning (features, logits) with a `feature_dim` attribute."""
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}'; known models: {', '.join(sorted(MODELS))}")
    return MODELS[name](in_channels=in_channels, num_classes=num_classes, mean=mean, std=std)


class LogitsOnly(nn.Module):
    """Wraps a (features, logits) model as x -> logits, for AutoAttack."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[1]
