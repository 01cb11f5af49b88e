"""WSCAT (paper Eq. 7-9 with the released code's details).

Inner maximisation (Eq. 8, complete AE generation):
    x' = argmax_{x' in B_eps(x)} KL(C(x) || C(x')) + beta * l_con(z', z)
with C(x) detached, positives from the CURRENT model's predictions argmax C(x) (computed once,
before the attack, and reused in the outer loss), BatchNorm in train mode with frozen running
statistics, uniform random start.
Outer minimisation (Eq. 9):
    CE_ls(C(x), y) over samples with a (true or pseudo) label
    + lam * (KL(C(x) || C(x')) + beta * l_con(z', z)),  the KL target not detached.
z = head_natural(f(x)), z' = head_adversarial(f(x')): two projection heads, trained by the outer
loss only. The natural forward is done once and serves the attack (detached) and the outer loss:
2 + train_steps forward passes a step (12 at CIFAR's PGD-10), whatever the positives.

Variants of the ablation study (RQ3: Tab-mode and the supplementary tables) are the `positives`
knob, everything else unchanged:
- "predicted" (WSCAT): positives share the current model's prediction argmax C(x) (Eq. 7).
- "labels" (WSCAT-fixed): SupCon (Khosla et al. 2020) on the fixed labels of D*: true labels for
  labelled samples, the labeler's pseudo-labels for unlabelled ones. A sample without a label
  (label -1, only with data: semi) is its own class: its other view is its only positive and it is
  a negative for every other anchor, so it still takes part in l_con.
- "self" (WSCAT-self): one class per sample, the other view the only positive: Eq. 6's InfoNCE
  with anchors="adversarial", NT-Xent with anchors="both".
WSCAT-std is WSCAT with a standard-trained labeler (params only).
"""
from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import nn

from wscat.attacks import frozen_batchnorm_stats, pgd
from wscat.losses import Anchors, cross_entropy, dynamic_contrastive_loss, kl_divergence
from wscat.methods.base import Batch, Method, StepContext
from wscat.models import ProjectionHead

Positives = Literal["predicted", "labels", "self"]


def positive_labels(positives: Positives, logits_natural: torch.Tensor, labels: torch.Tensor
                    ) -> torch.Tensor:
    """The labels that define l_con's positives (detached): see the module docstring."""
    if positives not in get_args(Positives):
        raise ValueError(f"positives must be one of {get_args(Positives)}, got {positives!r}")
    if positives == "predicted":
        return logits_natural.argmax(1).detach()
    own_class = -1 - torch.arange(len(labels), device=labels.device)  # distinct, never a class
    if positives == "labels":
        return torch.where(labels >= 0, labels, own_class)
    return own_class


class Wscat(Method):
    def __init__(self, feature_dim: int, *, lam: float, beta: float, temperature: float,
                 anchors: Anchors, label_smoothing: float, projection_dim: int,
                 positives: Positives = "predicted") -> None:
        super().__init__()
        self.head_natural = ProjectionHead(feature_dim, projection_dim)
        self.head_adversarial = ProjectionHead(feature_dim, projection_dim)
        self.lam, self.beta, self.temperature = lam, beta, temperature
        if positives not in get_args(Positives):
            raise ValueError(f"positives must be one of {get_args(Positives)}, got {positives!r}")
        self.anchors, self.label_smoothing, self.positives = anchors, label_smoothing, positives

    def l_con(self, z: torch.Tensor, z_adv: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        return dynamic_contrastive_loss(z, z_adv, classes, temperature=self.temperature,
                                        anchors=self.anchors)

    def attack(self, model: nn.Module, x: torch.Tensor, target: torch.Tensor,
               z_target: torch.Tensor, classes: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """Eq. 8, complete AE generation: x' = argmax KL(C(x) || C(x')) + beta * l_con(z', z)
        by PGD from a uniform random start, with C(x) = `target` and z = `z_target` fixed and the
        positives of `classes`. The caller sets the model's mode (training: train mode with
        frozen BatchNorm statistics; the analysis step: eval mode)."""
        def inner(x_: torch.Tensor) -> torch.Tensor:
            features_adv, logits_adv = model(x_)
            return (kl_divergence(target, logits_adv)
                    + self.beta * self.l_con(z_target, self.head_adversarial(features_adv), classes))

        return pgd(inner, x, eps=ctx.eps, step_size=ctx.step_size, steps=ctx.steps,
                   random_start="uniform", generator=ctx.generator)

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Eq. 9, with the AE of Eq. 8 (`attack`)."""
        model.train()
        features, logits_natural = model(batch.x)
        z = self.head_natural(features)
        classes = positive_labels(self.positives, logits_natural, batch.labels)
        with frozen_batchnorm_stats(model):
            x_adv = self.attack(model, batch.x, logits_natural.detach(), z.detach(), classes, ctx)
        features_adv, logits_adversarial = model(x_adv)
        ce = cross_entropy(logits_natural, batch.labels, self.label_smoothing)
        kl = kl_divergence(logits_natural, logits_adversarial)
        con = self.l_con(z, self.head_adversarial(features_adv), classes)
        loss = ce + self.lam * (kl + self.beta * con)
        return loss, {"ce": ce.detach(), "kl": kl.detach(), "l_con": con.detach()}
