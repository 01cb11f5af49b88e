"""A trained model from its checkpoint (the EMA weights, in eval mode) and its predictions:
what pseudo-labelling, evaluation and the figures share. Beside wscat.checkpoint, which reads and
writes the files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from wscat.checkpoint import CheckpointError, check_model, load_checkpoint, load_weights, model_spec
from wscat.data import to_unit
from wscat.models import build_model


def load_model(checkpoint: Path, device: torch.device, *, model: str | None = None,
               spec: dict[str, Any] | None = None) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The EMA model of a checkpoint, in eval mode, and the checkpoint's metadata. With `model`
    and `spec` (its params.yaml entry), a checkpoint of another model is refused."""
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
    return net.eval(), {**meta, "epoch": state.get("epoch", state.get("best", {}).get("epoch"))}


def logits_of(output: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The logits of a wscat model's (features, logits), or of a logits-only model's output."""
    return output[1] if isinstance(output, tuple) else output


@torch.no_grad()
def predict(model: torch.nn.Module, images: torch.Tensor, device: torch.device | None = None
            ) -> torch.Tensor:
    """argmax labels of an eval-mode model on un-augmented images, in batches of 512, on
    `device` (default: the model's)."""
    if device is None:
        device = next(model.parameters()).device
    return torch.cat([logits_of(model(to_unit(images[i:i + 512].to(device)))).argmax(1).cpu()
                      for i in range(0, len(images), 512)])
