"""Resumable AutoAttack: the examples are cut into shards of `shard_size`, and each finished shard
is written to `shard_dir`, so a killed evaluation continues with the first unfinished shard.

A shard file is reused only if its key matches: the model (its classes, parameters and buffers,
non-persistent ones included), the inputs and labels of the shard, the variant's settings, eps,
seed, batch size, device type, the autocast precision the attack runs under
(`evaluation.precision`) and the library versions.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from wscat.attacks import autoattack
from wscat.attacks.autoattack import ShardResult, Variant
from wscat.io import write_json
from wscat.progress import left_at_pace


@dataclass(frozen=True)
class AutoAttackResult:
    """Accuracies in percent. `after[attack]` is the robust accuracy after that attack (cumulative,
    AutoAttack's order); `clean` is AutoAttack's own count of correct points before the attacks."""

    accuracy: float
    clean: float
    after: dict[str, float]
    warnings: list[str]
    settings: dict[str, Any]
    n_examples: int
    n_shards: int
    robust: list[bool] = field(default_factory=list)  # per example, in the order given


def _digest(*tensors: torch.Tensor) -> str:
    """SHA-256 of each tensor's dtype, shape and bytes: the same bytes in another shape (a
    shard's images transposed, a reshaped layer) are other inputs."""
    h = hashlib.sha256()
    for tensor in tensors:
        h.update(f"{tensor.dtype}:{tuple(tensor.shape)}:".encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _model_digest(model: nn.Module) -> str:
    """SHA-256 of the model's module classes and of every parameter and buffer by name, the
    non-persistent buffers a state dict leaves out included (wscat's Normalize keeps its mean
    and std in such): the same weights under another normalisation are another model. State in
    plain attributes (an outside model's preprocessing constants) is not seen."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    layout = json.dumps([[type(m).__module__ + "." + type(m).__qualname__ for m in model.modules()],
                         [name for name, _ in tensors]])
    return hashlib.sha256((layout + _digest(*(t for _, t in tensors))).encode()).hexdigest()


def _load(path: Path, key: str) -> ShardResult | None:
    """A finished shard's result, or None (attack it again) for a file that is unreadable, of
    another key, or not the object `run` writes (valid JSON of another shape, a field missing)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    try:
        return ShardResult(clean=data["clean"], flipped=data["flipped"], robust=data["robust"],
                           warnings=data["warnings"])
    except KeyError:
        return None


def _autocast(device_type: str) -> str:
    """The autocast dtype forward passes on `device_type` run in now ("off" outside autocast):
    a shard attacked in bf16 is not an fp32 one. A device type autocast does not know (meta)
    runs without it."""
    try:
        if not torch.is_autocast_enabled(device_type):
            return "off"
        return str(torch.get_autocast_dtype(device_type))
    except RuntimeError:
        return "off"


def _shard_key(model_digest: str, x: torch.Tensor, y: torch.Tensor, *, variant: Variant,
               config: dict[str, Any], eps: float, seed: int, batch_size: int) -> str:
    """What a finished shard's file must match to be reused."""
    return hashlib.sha256(json.dumps({
        "model": model_digest, "inputs": _digest(x, y), "variant": variant,
        "settings": config, "eps": eps, "seed": seed, "batch_size": batch_size,
        "device": x.device.type, "autocast": _autocast(x.device.type),
        "pyautoattack": autoattack.library_version(),
        "torch": torch.__version__}, sort_keys=True).encode()).hexdigest()


def _combine(results: list[ShardResult], config: dict[str, Any], n_examples: int
             ) -> AutoAttackResult:
    """The shards' counts as accuracies over all `n_examples`."""
    n = max(n_examples, 1)
    clean = sum(r.clean for r in results)
    after, left = {}, clean
    for attack in config["order"]:
        left -= sum(r.flipped.get(attack, 0) for r in results)
        after[attack] = 100.0 * left / n
    return AutoAttackResult(
        accuracy=100.0 * sum(sum(r.robust) for r in results) / n, clean=100.0 * clean / n,
        after=after, warnings=list(dict.fromkeys(w for r in results for w in r.warnings)),
        settings=config, n_examples=n_examples, n_shards=len(results),
        robust=[bool(flag) for r in results for flag in r.robust])


def autoattack_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, variant: Variant,
                        eps: float, seed: int, batch_size: int, shard_size: int,
                        shard_dir: Path | None = None) -> AutoAttackResult:
    """AutoAttack `variant` on (x, y), shard by shard; finished shards are kept in `shard_dir`.
    The model's parameters are frozen meanwhile (`frozen_parameters`): the library's backward
    passes then compute input gradients only."""
    from wscat.attacks.mode import frozen_parameters

    with frozen_parameters(model):
        return _autoattack_accuracy(model, x, y, variant=variant, eps=eps, seed=seed,
                                    batch_size=batch_size, shard_size=shard_size,
                                    shard_dir=shard_dir)


def _autoattack_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, variant: Variant,
                         eps: float, seed: int, batch_size: int, shard_size: int,
                         shard_dir: Path | None) -> AutoAttackResult:
    from wscat.models import LogitsOnly

    logits = LogitsOnly(model).eval()
    with torch.no_grad():
        n_classes = logits(x[:1]).shape[1]
    adversary = autoattack.build(logits, variant=variant, eps=eps, seed=seed, n_classes=n_classes,
                                 device=x.device)
    config = autoattack.settings(adversary)
    model_digest = _model_digest(model)
    results: list[ShardResult] = []
    starts = range(0, len(x), shard_size)
    times: list[float] = []  # the shards this process attacked, for the time left
    for number, start in enumerate(starts):
        part = slice(start, min(start + shard_size, len(x)))
        key = _shard_key(model_digest, x[part], y[part], variant=variant, config=config, eps=eps,
                         seed=seed, batch_size=batch_size)
        path = None if shard_dir is None else shard_dir / f"aa-{variant}-{number:05d}.json"
        result = _load(path, key) if path is not None else None
        if result is None:
            started = time.perf_counter()
            result = autoattack.run_shard(adversary, logits, x[part], y[part], eps=eps,
                                          batch_size=batch_size)
            if path is not None:
                write_json(path, {"key": key, **result.__dict__})
            times.append(time.perf_counter() - started)
            status = "done"
        else:
            status = "resumed from disk"
        print(f"AutoAttack {variant}: shard {number + 1}/{len(starts)} {status}"
              f"{left_at_pace(number + 1, len(starts), times)}", file=sys.stderr, flush=True)
        results.append(result)
    return _combine(results, config, len(x))
