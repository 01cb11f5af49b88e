"""The CPU threads a training or an evaluation computed with, where they change its numbers.

On a CPU, torch splits a float sum across its threads, so the same run at 1 and at 2 threads
differs in the last bits (MT's first epoch: loss 2.249523 against 2.249562). A checkpoint's meta,
a metrics manifest, a pseudo-label report and a validation file therefore record the count
(`cpu_threads`); on a CUDA device the math runs on the GPU (the CPU threads only load data), so
nothing is recorded there. The count is not part of the training fingerprint: runs made before
it was recorded stay valid.

A training's record maps the first epoch of each stretch to its count, e.g. `{"from epoch 1": 1}`,
or `{"from epoch 1": 1, "from epoch 4": 2}` for a run resumed at another count (a stretch on a
CUDA device: None). A checkpoint without the record is read as before.
"""
from __future__ import annotations

from typing import Any

import torch

KEY = "cpu_threads"


def cpu_count(device: torch.device | str) -> int | None:
    """torch's CPU threads where they change numbers (a CPU device); None on a CUDA device."""
    return torch.get_num_threads() if torch.device(device).type == "cpu" else None


def _plural(count: int) -> str:
    return f"{count} CPU thread{'s' if count != 1 else ''}"


def training_record(device: torch.device | str) -> dict[str, Any]:
    """The meta entry of a training that starts at its first epoch: {} on a CUDA device."""
    count = cpu_count(device)
    return {} if count is None else {KEY: {"from epoch 1": count}}


def resumed_record(previous: dict[str, Any] | None, epoch: int, device: torch.device | str,
                   who: str) -> tuple[dict[str, Any], str | None]:
    """The meta entry of a training resumed at `epoch` (0-based, the first still to train) on
    `device` after epochs that `previous` (the checkpoint's record, None if it has none)
    describes, and the line to print when the count changed on a CPU (None otherwise)."""
    count = cpu_count(device)
    stretches = dict(previous or {})
    if count is None and not stretches:
        return {}, None
    last = list(stretches.values())[-1] if stretches else None
    if stretches and last == count:
        return {KEY: stretches}, None
    stretches[f"from epoch {epoch + 1}"] = count
    if count is None or last is None:
        return {KEY: stretches}, None
    return {KEY: stretches}, (
        f"{who} resumes on {_plural(count)}, but its epochs so far computed on {_plural(last)}: "
        "its result will not equal a run on one thread count bit for bit (recorded as "
        f"meta.{KEY} in its checkpoints and in its metrics' manifest)")


def manifest_entry(meta: dict[str, Any], device: torch.device | str,
                   role: str = "evaluation") -> dict[str, Any]:
    """A metrics manifest's `cpu_threads`: the training's record (from the checkpoint's meta) and
    the count of the step that wrote it (`role`: the evaluation, the pseudo-labelling, the
    validation), each where it changes numbers; {} when neither does."""
    entry = {"training": meta.get(KEY), role: cpu_count(device)}
    entry = {key: value for key, value in entry.items() if value is not None}
    return {KEY: entry} if entry else {}
