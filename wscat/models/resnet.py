"""ResNet (He et al., 2016) for 32x32 inputs, as in adversarial-training papers: a 3x3 stride-1
stem without max-pooling, four stages of 64, 128, 256, 512 planes (strides 1, 2, 2, 2), global
average pooling and a linear classifier.

Depths 50/101/152 use bottleneck blocks by default (expansion 4, feature_dim 2048). The released
code's "ResNet50"/"ResNet152" are basic-block nets with those stage counts: `block="basic"`.
"""
from __future__ import annotations

import torch
from torch import nn

from wscat.models.normalize import Normalize
from wscat.models.pooling import GlobalAvgPool
from wscat.models.wideresnet import init_weights

STAGE_BLOCKS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3),
                152: (3, 8, 36, 3)}
BLOCKS = ("basic", "bottleneck")


def _projection(in_planes: int, planes: int, stride: int) -> nn.Module:
    if stride == 1 and in_planes == planes:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                         nn.BatchNorm2d(planes))


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _projection(in_planes, planes, stride)
        self.relu2 = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """conv1x1-BN-ReLU-conv3x3(stride)-BN-ReLU-conv1x1(4x planes)-BN, plus the shortcut, ReLU."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        out_planes = self.expansion * planes
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut = _projection(in_planes, out_planes, stride)
        self.relu3 = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn3(self.conv3(self.relu2(self.bn2(self.conv2(out)))))
        return self.relu3(out + self.shortcut(x))


def resnet_layout(depth: int, block: str | None = None) -> tuple[type[nn.Module], tuple[int, ...]]:
    """(block class, blocks per stage) for a depth; `block=None` is the standard block."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth not in STAGE_BLOCKS:
        raise ValueError(f"ResNet depth must be one of {', '.join(map(str, STAGE_BLOCKS))}; "
                         f"got {depth!r}")
    if block is not None and block not in BLOCKS:
        raise ValueError(f"ResNet block must be one of {', '.join(BLOCKS)}; got {block!r}")
    if block == "bottleneck" and depth < 50:
        raise ValueError(f"ResNet-{depth} is built from basic blocks; block 'bottleneck' "
                         "needs depth 50, 101 or 152")
    standard = "basic" if depth < 50 else "bottleneck"
    return (BasicBlock if (block or standard) == "basic" else Bottleneck), STAGE_BLOCKS[depth]


class ResNet(nn.Module):
    """C = g o f: f = stem, four stages, global average pooling (the embedding z);
    g = linear classifier."""

    def __init__(self, in_channels: int, num_classes: int, mean: tuple[float, ...],
                 std: tuple[float, ...], depth: int = 18, block: str | None = None) -> None:
        super().__init__()
        block_class, stage_blocks = resnet_layout(depth, block)
        self.normalize = Normalize(mean, std)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, 64, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(64), nn.ReLU(inplace=True)]
        in_planes = 64
        for planes, stride, blocks in zip((64, 128, 256, 512), (1, 2, 2, 2), stage_blocks):
            for i in range(blocks):
                layers.append(block_class(in_planes, planes, stride if i == 0 else 1))
                in_planes = planes * block_class.expansion
        layers += [GlobalAvgPool()]
        self.features = nn.Sequential(*layers)
        self.feature_dim = in_planes
        self.classifier = nn.Linear(self.feature_dim, num_classes)
        init_weights(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(self.normalize(x))
        return features, self.classifier(features)
