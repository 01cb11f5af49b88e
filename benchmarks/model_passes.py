"""The model's own share of an attack: every pass the attack asked of the model (its batch size,
and whether a gradient flowed back through it), recorded while the attack runs, then replayed
alone on the same model and images. The replay's seconds are what no change outside the model's
kernels can remove (issue 26: how far below the library's time AutoAttack can go on a CPU).

Used by `benchmarks/autoattack_speed.py --model-passes`.
"""
from __future__ import annotations

import resource
import time
from typing import Any

import torch
from torch import nn


class PassRecorder(nn.Module):
    """Wraps a logits model: each call appends {attack, n, backward} to `calls`, `attack` being
    `current` (set by the caller while an attack runs); `backward` turns true when a gradient
    reaches the call's output (a tensor hook), so a forward whose graph was dropped counts as a
    forward only."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.current: str | None = None
        self.calls: list[dict[str, Any]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        record = {"attack": self.current, "n": int(x.shape[0]), "backward": False}
        self.calls.append(record)
        if out.requires_grad:
            def mark(grad: torch.Tensor, record: dict[str, Any] = record) -> None:
                record["backward"] = True
            out.register_hook(mark)
        return out


def cpu_seconds() -> float:
    """This process's CPU time so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def tally(calls: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per attack: passes with and without a gradient, and the images they ran on."""
    out: dict[str, dict[str, int]] = {}
    for call in calls:
        entry = out.setdefault(str(call["attack"]), {"forward": 0, "gradient": 0, "images": 0})
        entry["gradient" if call["backward"] else "forward"] += 1
        entry["images"] += call["n"]
    return out


def _images(x: torch.Tensor, n: int) -> torch.Tensor:
    """n of the evaluated images (repeated where the attack ran on more than there are)."""
    reps = -(-n // len(x))
    return x.repeat(reps, *[1] * (x.dim() - 1))[:n].contiguous()


def replay(model: nn.Module, x: torch.Tensor, calls: list[dict[str, Any]],
           synchronise: Any = lambda: None) -> dict[str, dict[str, float]]:
    """Seconds (wall, CPU of this process) of running every recorded pass again, per attack: a
    forward without a graph, or a forward and the gradient of the summed logits with respect to
    the input (what an attack's backward costs through the model; the weights need no
    gradient). Same batch sizes, same order."""
    spent: dict[str, dict[str, float]] = {}
    inputs: dict[int, torch.Tensor] = {}
    for call in calls:
        images = inputs.setdefault(call["n"], _images(x, call["n"]))
        synchronise()
        wall, used = time.perf_counter(), cpu_seconds()
        if call["backward"]:
            point = images.clone().requires_grad_(True)
            torch.autograd.grad(model(point).sum(), point)
        else:
            with torch.no_grad():
                model(images)
        synchronise()
        entry = spent.setdefault(str(call["attack"]), {"wall_s": 0.0, "cpu_s": 0.0})
        entry["wall_s"] += time.perf_counter() - wall
        entry["cpu_s"] += cpu_seconds() - used
    return spent
