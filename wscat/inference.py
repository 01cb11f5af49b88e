"""A trained model from its checkpoint (the EMA weights, in eval mode) and its predictions:
what pseudo-labelling, evaluation and the figures share. Beside wscat.checkpoint, which reads and
writes the files."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from wscat.attacks.mode import require_eval
from wscat.checkpoint import (CheckpointError, check_finished, check_model, load_checkpoint,
                              load_weights, model_spec)
from wscat.data import to_unit
from wscat.models import build_model


def load_model(checkpoint: Path, device: torch.device, *, model: str | None = None,
               spec: dict[str, Any] | None = None) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The EMA model of a checkpoint, in eval mode, and the checkpoint's metadata. A checkpoint
    of an unfinished training is refused (`wscat.checkpoint.check_finished`); with `model` and
    `spec` (its params.yaml entry), so is one of another model."""
    check_finished(checkpoint)
    state = load_checkpoint(checkpoint, map_location=device)
    meta = state["meta"]
    if model is not None and spec is not None:
        check_model(checkpoint, meta, model, spec)
    try:
        net = build_model(**model_spec(meta), in_channels=meta["in_channels"],
                          num_classes=meta["num_classes"], mean=tuple(meta["mean"]),
                          std=tuple(meta["std"])).to(device)
        weights = state["ema"]
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{checkpoint}: its metadata does not describe a model "
                              f"({type(error).__name__}: {error}); delete it and retrain") from error
    load_weights(net, weights, checkpoint)
    return net.eval(), {**meta, "epoch": epochs_completed(state), "which": which_of(state)}


def which_of(state: dict[str, Any]) -> str:
    """Which checkpoint of a run `state` is, from its content: "last" (last.pt, the final
    training state a resume continues from: weights, optimiser, history) or "best" (best.pt,
    the validation-selected weights)."""
    return "last" if "optimizer" in state else "best"


def epochs_completed(state: dict[str, Any]) -> int | None:
    """The epochs trained into a checkpoint's weights. best.pt records that number; last.pt
    records its last epoch's 0-based index (the one a resume continues after,
    wscat.training.trainer._resume), one less."""
    if "epoch" not in state:  # the best epoch's record, counted as best.pt counts
        best = state.get("best")
        return best.get("epoch") if isinstance(best, dict) else None
    return int(state["epoch"]) + 1 if which_of(state) == "last" else state["epoch"]


def check_which(checkpoint: Path, which: str, wanted: str, step: str = "evaluate") -> None:
    """Refuse (ValueError, one line) evaluating (`step`: validating) another checkpoint of a run
    than the params' evaluation.checkpoint names: the metrics record which one they measured."""
    if which != wanted:
        raise ValueError(f"{checkpoint} is a run's {which}.pt, but these params {step} its "
                         f"{wanted}.pt (evaluation.checkpoint: {wanted}); pass its {wanted}.pt, "
                         f"or set evaluation.checkpoint: {which} in the params")


def logits_of(output: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The logits of a wscat model's (features, logits), or of a logits-only model's output."""
    return output[1] if isinstance(output, tuple) else output


class NonFiniteOutputs(ValueError):
    """Logits that hold NaN or inf on `bad` of `total` images (under `attack`: on its adversarial
    images): argmax would read them as class 0, a prediction the model never made."""

    def __init__(self, bad: int, total: int, *, attack: str = "Natural", images: str = "images",
                 source: str | None = None) -> None:
        self.bad, self.total, self.attack = bad, total, attack
        under = "" if attack == "Natural" else f" under {attack}"
        where = "" if source is None else f"{source}: "
        super().__init__(f"{where}the model's outputs are NaN or inf on {bad} of {total} "
                         f"{images}{under}; its weights overflow: retrain it (with a lower "
                         "learning rate)")


def nonfinite_rows(logits: torch.Tensor) -> torch.Tensor:
    """How many rows of `logits` hold a NaN or an infinity (a 0-d tensor on their device: no
    synchronisation until it is read)."""
    return (~torch.isfinite(logits).all(dim=1)).sum()


def refuse_nonfinite(bad: torch.Tensor | int, total: int, attack: str = "Natural") -> None:
    """Raise NonFiniteOutputs when `bad` (nonfinite_rows, summed) of `total` images had
    non-finite logits."""
    count = int(bad)
    if count:
        raise NonFiniteOutputs(count, total, attack=attack)


@contextmanager
def outputs_of(checkpoint: str | Path, images: str) -> Iterator[None]:
    """Name `checkpoint` and the images its model ran on (`images`: "test images") in a
    NonFiniteOutputs raised inside."""
    try:
        yield
    except NonFiniteOutputs as error:
        raise NonFiniteOutputs(error.bad, error.total, attack=error.attack, images=images,
                               source=str(checkpoint)) from None


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's parameters (else buffers) are; the CPU for a model with neither."""
    return next((t.device for t in (*model.parameters(), *model.buffers())), torch.device("cpu"))


@torch.no_grad()
def predict(model: torch.nn.Module, images: torch.Tensor, device: torch.device | None = None
            ) -> torch.Tensor:
    """argmax labels of an eval-mode model on un-augmented images, in batches of 512, on
    `device` (default: the model's). A model in train mode is refused (ValueError): its
    BatchNorm would use each batch's statistics and overwrite its running ones. Logits that hold
    NaN or inf are refused (NonFiniteOutputs): argmax would make class 0 of them."""
    require_eval(model, error=ValueError,
                 message="the model is in train mode: its batch norm would predict from each "
                         "batch's statistics and change its own; call model.eval() first "
                         "(api.load_model returns it in eval mode)")
    if device is None:
        device = model_device(model)
    labels, bad = [], torch.zeros((), dtype=torch.long, device=device)
    for i in range(0, len(images), 512):
        logits = logits_of(model(to_unit(images[i:i + 512].to(device))))
        bad = bad + nonfinite_rows(logits)
        labels.append(logits.argmax(1).cpu())
    refuse_nonfinite(bad, len(images))
    return torch.cat(labels)
