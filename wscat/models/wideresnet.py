"""WideResNet (Zagoruyko & Komodakis, 2016): pre-activation basic blocks, ReLU, no dropout.

WRN-d-k has depth d = 6n + 4 (n blocks per stage), stage widths 16k, 32k, 64k with strides
1, 2, 2 after a 16-channel stem; WRN-28-10 is the paper's model (feature_dim 640).
"""
from __future__ import annotations

import torch
from torch import nn

from wscat.models.normalize import Normalize
from wscat.models.pooling import GlobalAvgPool


def wideresnet_blocks(depth: int) -> int:
    """Blocks per stage, n = (depth - 4) / 6; a ValueError names the valid depths otherwise."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 10 or (depth - 4) % 6:
        raise ValueError(f"WideResNet depth must be 6n+4 with n >= 1 (10, 16, 22, 28, 34, 40, ...); "
                         f"got {depth!r}")
    return (depth - 4) // 6


class PreActBlock(nn.Module):
    """BN-ReLU-conv3x3-BN-ReLU-conv3x3 plus a shortcut; a 1x1 conv on the activated input when
    the shape changes (as in the pre-activation ResNet), the raw input otherwise."""

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.projection = stride != 1 or in_planes != planes
        self.shortcut = (nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False)
                         if self.projection else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In-place ReLU is safe: BN's backward needs its input, not its output.
        activated = self.relu1(self.bn1(x))
        shortcut = self.shortcut(activated if self.projection else x)
        out = self.conv2(self.relu2(self.bn2(self.conv1(activated))))
        return out + shortcut


class WideResNet(nn.Module):
    """C = g o f: f = stem, three stages, BN-ReLU, global average pooling (the embedding z);
    g = linear classifier."""

    def __init__(self, in_channels: int, num_classes: int, mean: tuple[float, ...],
                 std: tuple[float, ...], depth: int = 28, width: int = 10) -> None:
        super().__init__()
        n = wideresnet_blocks(depth)
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"WideResNet width must be a positive integer; got {width!r}")
        widths = (16, 16 * width, 32 * width, 64 * width)
        self.normalize = Normalize(mean, std)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)]
        for in_planes, planes, stride in zip(widths[:-1], widths[1:], (1, 2, 2)):
            layers += [PreActBlock(in_planes if i == 0 else planes, planes, stride if i == 0 else 1)
                       for i in range(n)]
        layers += [nn.BatchNorm2d(widths[-1]), nn.ReLU(inplace=True),
                   GlobalAvgPool()]
        self.features = nn.Sequential(*layers)
        self.feature_dim = widths[-1]
        self.classifier = nn.Linear(self.feature_dim, num_classes)
        init_weights(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(self.normalize(x))
        return features, self.classifier(features)


def init_weights(model: nn.Module) -> None:
    """The standard initialisation: Kaiming normal (fan_out) convs, BN 1/0, zero linear bias.
    Nothing on torch's meta device (a parameter count: no values to draw, and drawing there
    imports torch._dynamo, ~2 s of every training's start)."""
    if any(parameter.is_meta for parameter in model.parameters()):
        return
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)
