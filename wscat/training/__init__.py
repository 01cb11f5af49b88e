"""The shared trainer: SGD + Nesterov, one-cycle per epoch, EMA, validation-based selection,
best/last checkpoints and exact resume."""
from wscat.training.trainer import TrainingData, train

__all__ = ["TrainingData", "train"]
