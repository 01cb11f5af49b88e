"""A small CNN for 8x8 inputs (the embedded default): three conv-BN-ReLU blocks (the second with
stride 2), global average pooling and a linear classifier."""
from __future__ import annotations

import torch
from torch import nn

from wscat.models.normalize import Normalize
from wscat.models.pooling import GlobalAvgPool


def _block(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class SmallCNN(nn.Module):
    """C = g o f: f = conv features + global average pooling (the embedding z), g = linear classifier."""

    def __init__(self, in_channels: int, num_classes: int, mean: tuple[float, ...],
                 std: tuple[float, ...], width: int = 16) -> None:
        super().__init__()
        self.normalize = Normalize(mean, std)
        self.features = nn.Sequential(_block(in_channels, width), _block(width, 2 * width, stride=2),
                                      _block(2 * width, 4 * width),
                                      GlobalAvgPool())
        self.feature_dim = 4 * width
        self.classifier = nn.Linear(self.feature_dim, num_classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(self.normalize(x))
        return features, self.classifier(features)
