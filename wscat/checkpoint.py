"""Checkpoint files: written atomically, read with torch.load(weights_only=True) so that loading
never executes code from the file."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from wscat.io import atomic_path

FORMAT = "wscat-checkpoint-v1"


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated or not ours; the message says what to do."""


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Save `state` (tensors, numbers, strings, lists, dicts only) atomically."""
    with atomic_path(path) as tmp:
        torch.save({"format": FORMAT, **state}, tmp)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint saved by `save_checkpoint`; one clear error line for any broken file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path} (train the method first: `wscat train`)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises several types for truncated or foreign files
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"checkpoint {path} cannot be read ({reason}); it is truncated or "
                              "not a wscat checkpoint: delete it and retrain") from error
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a {FORMAT} file; delete it and retrain")
    return state
