"""A checkpoint's contents as comparable bytes."""
from __future__ import annotations

import torch


def flat_state(state: object, prefix: str) -> list[tuple[str, bytes]]:
    """(dotted key, bytes) of every tensor in `state` (nested dicts and lists), and the repr of
    every other value: two states are bit for bit the same when these lists are equal."""
    if isinstance(state, torch.Tensor):
        return [(prefix, state.detach().cpu().contiguous().numpy().tobytes())]
    if isinstance(state, dict):
        return [item for k, v in state.items() for item in flat_state(v, f"{prefix}.{k}")]
    if isinstance(state, (list, tuple)):
        return [item for i, v in enumerate(state) for item in flat_state(v, f"{prefix}.{i}")]
    return [(prefix, repr(state).encode())]
