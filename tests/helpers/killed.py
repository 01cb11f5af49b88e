"""A training killed right after its first epoch's checkpoint (resume/last.pt), as Ctrl-C or a
preempted job would kill it: what a resume starts from."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from wscat.training import trainer


def killed_after_first_epoch(monkeypatch: pytest.MonkeyPatch, training: Callable[[], Any]) -> None:
    """Run `training` (a call of wscat.training.train) until it has saved resume/last.pt once,
    then stop it with KeyboardInterrupt; the trainer's checkpointing is its own again after."""
    real_save = trainer.save_checkpoint

    def save_then_die(path, state):
        real_save(path, state)
        if path.name == "last.pt":
            raise KeyboardInterrupt("killed after epoch 1")

    monkeypatch.setattr(trainer, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        training()
    monkeypatch.setattr(trainer, "save_checkpoint", real_save)
