"""Augmentation on image tensors (works on any device): random crop with padding, flip, rotation."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def augment(x: torch.Tensor, *, crop_padding: int, flip: bool, rotation: float,
            generator: torch.Generator) -> torch.Tensor:
    """Random crop (zero padding), horizontal flip and rotation in degrees, drawn per sample."""
    n, _, h, w = x.shape
    device = x.device
    where = generator.device  # draws happen on the generator's device (no host copy on a GPU)
    if rotation > 0:
        angle = (torch.rand(n, generator=generator, device=where) * 2 - 1) * math.radians(rotation)
        cos, sin = angle.cos(), angle.sin()
        theta = torch.stack([torch.stack([cos, -sin, torch.zeros(n, device=where)], 1),
                             torch.stack([sin, cos, torch.zeros(n, device=where)], 1)], 1).to(device, x.dtype)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")
    if crop_padding > 0:
        p = crop_padding
        padded = F.pad(x, (p, p, p, p))
        dy = torch.randint(0, 2 * p + 1, (n,), generator=generator, device=where).to(device)
        dx = torch.randint(0, 2 * p + 1, (n,), generator=generator, device=where).to(device)
        rows = (dy[:, None] + torch.arange(h, device=device))[:, None, :, None]
        cols = (dx[:, None] + torch.arange(w, device=device))[:, None, None, :]
        batch = torch.arange(n, device=device)[:, None, None, None]
        channel = torch.arange(x.shape[1], device=device)[None, :, None, None]
        x = padded[batch, channel, rows, cols]
    if flip:
        mask = (torch.rand(n, generator=generator, device=where) < 0.5).to(device)[:, None, None, None]
        x = torch.where(mask, x.flip(3), x)
    return x
