"""Mean Teacher (Tarvainen & Valpola 2017), the paper's pseudo-labeler and its 'MT' column.

loss = CE_ls(student(x_l), y_l) + w(t) * MSE(softmax student(x), softmax teacher(x~)) over the whole
batch, x and x~ two augmentations; w(t) = consistency * exp(-5 (1 - t)^2), t = progress / rampup.
The teacher is the trainer's EMA model, decay teacher_decay during the ramp-up, then
teacher_decay_late (the notes), in eval mode on the student's running batch-norm statistics: a
departure, as the release's and Tarvainen & Valpola's teachers run in train mode throughout (batch
statistics; docs/official-code.md). It sees its own augmentation x~ (theirs; the release's teacher
sees the student's x). Unlabelled samples carry label -1 and never reach the CE, averaged over the
labelled ones (the release's).
"""
from __future__ import annotations

import torch
from torch import nn

from wscat.losses import consistency_mse, cross_entropy
from wscat.methods.base import Batch, Method, StepContext, sigmoid_rampup


class MeanTeacher(Method):
    adversarial = False

    def __init__(self, *, consistency: float, rampup_epochs: int, teacher_decay: float,
                 teacher_decay_late: float, label_smoothing: float) -> None:
        super().__init__()
        self.consistency, self.rampup_epochs = consistency, rampup_epochs
        self.teacher_decay, self.teacher_decay_late = teacher_decay, teacher_decay_late
        self.label_smoothing = label_smoothing

    def weight(self, progress: float) -> float:
        if self.rampup_epochs == 0:
            return self.consistency
        return self.consistency * sigmoid_rampup(progress / self.rampup_epochs)

    def ema_decay(self, progress: float) -> float:
        return self.teacher_decay if progress < self.rampup_epochs else self.teacher_decay_late

    def loss(self, model: nn.Module, batch: Batch, ctx: StepContext
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        _, logits_student = model(batch.x)
        ctx.ema_model.eval()
        with torch.no_grad():
            _, logits_teacher = ctx.ema_model(ctx.augment(batch.x_raw))
        ce = cross_entropy(logits_student, batch.labels, self.label_smoothing)
        consistency = consistency_mse(logits_student, logits_teacher)
        loss = ce + self.weight(ctx.progress) * consistency
        return loss, {"ce": ce.detach(), "consistency": consistency.detach()}
