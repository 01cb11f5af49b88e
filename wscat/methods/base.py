"""What the shared trainer hands a method each step, and what a method gives back."""
from __future__ import annotations

import abc
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Batch:
    """Natural images x (augmented), the same images un-augmented, and labels (-1: no label)."""

    x: torch.Tensor
    x_raw: torch.Tensor
    labels: torch.Tensor


@dataclass
class StepContext:
    """Threat model of the training attack, randomness, the EMA model and training progress."""

    eps: float
    step_size: float
    steps: int
    generator: torch.Generator
    ema_model: nn.Module
    progress: float  # epochs done, fractional
    augment: Callable[[torch.Tensor], torch.Tensor]


class Method(nn.Module, abc.ABC):
    """A training method: its loss on one page; trainable parts of its own live in this module."""

    adversarial: bool = True

    @abc.abstractmethod
    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The training loss on one batch and detached statistics for the log."""

    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        """The method's own parameters the trainer's optimiser updates with the classifier
        (WSCAT's projection heads). A method with parts on their own optimisers (PUAT's
        generator and discriminator) returns only the rest and steps those itself in `loss`,
        keeping their optimiser states in `get_extra_state` so a resumed run continues exactly."""
        return self.parameters()

    def ema_decay(self, progress: float) -> float | None:
        """EMA decay a method imposes (Mean Teacher's teacher); None: the trainer's default."""
        return None


def sigmoid_rampup(t: float) -> float:
    """exp(-5 (1 - t)^2) for t clipped to [0, 1] (Laine & Aila 2017): Mean Teacher's and PUAT's ramp."""
    t = min(max(t, 0.0), 1.0)
    return math.exp(-5.0 * (1.0 - t) ** 2)
