"""PUAT's generative players, sized from the image shape: a class-conditional ResNet generator
G(z, y), a projection discriminator D(x, y) with spectral norm (the SNGAN design of Miyato & Koyama
2018, which PUAT's released code uses) and the latent attacker
A(z, y) = z + latent_eps * tanh(f(z, y)).

G starts from a bottom x bottom map and doubles it `halvings(H)` times (8x8: 4 -> 8, one block;
32x32: 4 -> 8 -> 16 -> 32, three blocks, as the released code); D halves the image one time more,
down to 2x2 (8x8: two blocks; 32x32: four). Images are in [0,1] (tanh, then (h + 1) / 2).
Up- (nearest) and down-sampling (2x2 mean) are reshapes and class embeddings one-hot products:
deterministic backward passes on a GPU too (bilinear upsampling, the released code's, has none).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm


def halvings(size: int) -> int:
    """How often an image side is halved to reach the generator's bottom map (>= 4 and whole)."""
    count = 0
    while size % 2 == 0 and size // 2 >= 4:
        size //= 2
        count += 1
    return count


def _upsample(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    return x[:, :, :, None, :, None].expand(n, c, h, 2, w, 2).reshape(n, c, 2 * h, 2 * w)


def _downsample(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).mean((3, 5))


def _one_hot(y: torch.Tensor, num_classes: int, like: torch.Tensor) -> torch.Tensor:
    return F.one_hot(y, num_classes).to(like.dtype)


class ConditionalBatchNorm2d(nn.Module):
    """BatchNorm without its own affine map; a per-class scale (init 1) and shift (init 0)."""

    def __init__(self, channels: int, num_classes: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.norm = nn.BatchNorm2d(channels, affine=False)
        self.scale = nn.Parameter(torch.ones(num_classes, channels))
        self.shift = nn.Parameter(torch.zeros(num_classes, channels))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        one_hot = _one_hot(y, self.num_classes, x)
        scale, shift = one_hot @ self.scale, one_hot @ self.shift
        return self.norm(x) * scale[:, :, None, None] + shift[:, :, None, None]


class _UpBlock(nn.Module):
    """CBN-ReLU-up-conv3-CBN-ReLU-conv3, plus an up-conv1 shortcut."""

    def __init__(self, c_in: int, c_out: int, num_classes: int) -> None:
        super().__init__()
        self.bn1 = ConditionalBatchNorm2d(c_in, num_classes)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.bn2 = ConditionalBatchNorm2d(c_out, num_classes)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.shortcut = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.conv1(_upsample(F.relu(self.bn1(x, y))))
        h = self.conv2(F.relu(self.bn2(h, y)))
        return h + self.shortcut(_upsample(x))


class Generator(nn.Module):
    """x = G(z, y) in [0,1]^{C x H x W}: linear to a bottom map, conditional up-blocks, conv,
    tanh."""

    def __init__(self, image_shape: tuple[int, int, int], num_classes: int, *, latent_dim: int,
                 width: int) -> None:
        super().__init__()
        channels, height, width_px = image_shape
        if height != width_px:
            raise ValueError(f"PUAT's generator needs square images, got {height}x{width_px}")
        self.latent_dim, self.width = latent_dim, width
        self.bottom = height >> halvings(height)
        self.linear = nn.Linear(latent_dim, width * self.bottom ** 2)
        self.blocks = nn.ModuleList(_UpBlock(width, width, num_classes)
                                    for _ in range(halvings(height)))
        self.out_norm = nn.BatchNorm2d(width)
        self.out_conv = nn.Conv2d(width, channels, 3, padding=1)

    def forward(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.linear(z).view(len(z), self.width, self.bottom, self.bottom)
        for block in self.blocks:
            h = block(h, y)
        return (torch.tanh(self.out_conv(F.relu(self.out_norm(h)))) + 1.0) / 2.0


class _DownBlock(nn.Module):
    """Spectrally normalised residual block that halves the map; `first` is SNGAN's optimised
    block (no activation before the first conv, pooling before the shortcut conv)."""

    def __init__(self, c_in: int, c_out: int, *, first: bool) -> None:
        super().__init__()
        self.first = first
        self.conv1 = spectral_norm(nn.Conv2d(c_in, c_out, 3, padding=1))
        self.conv2 = spectral_norm(nn.Conv2d(c_out, c_out, 3, padding=1))
        self.shortcut = spectral_norm(nn.Conv2d(c_in, c_out, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x if self.first else F.relu(x)
        h = _downsample(self.conv2(F.relu(self.conv1(h))))
        if self.first:
            return h + self.shortcut(_downsample(x))
        return h + _downsample(self.shortcut(x))


class Discriminator(nn.Module):
    """Projection discriminator: D(x, y) = w . phi(x) + <e_y, phi(x)>, phi = sum-pooled SN-ResNet
    features. `scores(x)` gives D(x, y) for every class y at once (B x K)."""

    def __init__(self, image_shape: tuple[int, int, int], num_classes: int, *, width: int) -> None:
        super().__init__()
        channels, height, _ = image_shape
        depth = halvings(height) + 1
        self.num_classes = num_classes
        self.blocks = nn.Sequential(*(_DownBlock(channels if i == 0 else width, width, first=i == 0)
                                      for i in range(depth)))
        self.linear = spectral_norm(nn.Linear(width, 1))
        self.embedding = spectral_norm(nn.Linear(num_classes, width, bias=False))

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        phi = F.relu(self.blocks(x * 2.0 - 1.0)).sum((2, 3))
        # embedding.weight is width x K, so phi @ weight gives <e_y, phi> for every class y
        return self.linear(phi) + phi @ self.embedding.weight

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.scores(x).gather(1, y[:, None]).squeeze(1)


class Attacker(nn.Module):
    """A(z, y) = z + latent_eps * tanh(MLP([z, onehot(y)])): a class-conditional latent shift,
    each coordinate bounded by latent_eps (the released code's a_clip)."""

    def __init__(self, latent_dim: int, num_classes: int, *, latent_eps: float,
                 hidden: int) -> None:
        super().__init__()
        self.num_classes, self.latent_eps = num_classes, latent_eps
        self.net = nn.Sequential(nn.Linear(latent_dim + num_classes, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, latent_dim))

    def forward(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        shift = torch.tanh(self.net(torch.cat([z, _one_hot(y, self.num_classes, z)], 1)))
        return z + self.latent_eps * shift
