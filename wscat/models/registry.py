"""build_model(architecture, ...) and the logits-only view that third-party attacks expect."""
from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from wscat.models.cnn import SmallCNN
from wscat.models.resnet import ResNet
from wscat.models.wideresnet import WideResNet

MODELS: dict[str, type[nn.Module]] = {"cnn": SmallCNN, "resnet": ResNet, "wideresnet": WideResNet}
_COMMON = ("self", "in_channels", "num_classes", "mean", "std")


def model_options(architecture: str) -> dict[str, Any]:
    """The architecture's options and their defaults (e.g. wideresnet: depth 28, width 10)."""
    parameters = inspect.signature(MODELS[architecture]).parameters.values()
    return {p.name: p.default for p in parameters if p.name not in _COMMON}


def build_model(architecture: str, *, in_channels: int, num_classes: int,
                mean: tuple[float, ...], std: tuple[float, ...], **options: Any) -> nn.Module:
    """A model returning (features, logits) with a `feature_dim` attribute.

    Options: cnn (width), wideresnet (depth = 6n+4, width), resnet (depth in 18/34/50/101/152,
    block basic/bottleneck). A bad architecture, option name or value raises ValueError.
    """
    if architecture not in MODELS:
        raise ValueError(f"unknown architecture '{architecture}'; "
                         f"valid architectures: {', '.join(sorted(MODELS))}")
    valid = model_options(architecture)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for '{architecture}'; "
                         f"valid options: {', '.join(valid)}")
    return MODELS[architecture](in_channels=in_channels, num_classes=num_classes, mean=mean,
                                std=std, **options)


class LogitsOnly(nn.Module):
    """Wraps a (features, logits) model as x -> logits, for AutoAttack."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[1]
