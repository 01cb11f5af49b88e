"""Makers of bad inputs for tests/workflow/test_bad_input.py: each writes one broken file into a work folder
that already holds a good params.yaml, split (s.npz), pseudo-labels (p.npz) and checkpoint
(run/best.pt)."""
from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import yaml

from wscat.checkpoint import FORMAT, load_checkpoint, save_tensors
from wscat.models import build_model

Maker = Callable[[Path], None]


def params_edit(change: Callable[[dict], None]) -> Maker:
    """params.yaml with `change` applied."""
    def make(work: Path) -> None:
        params = yaml.safe_load((work / "params.yaml").read_text())
        change(params)
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return make


def setting(dotted: str, value: object) -> Maker:
    """params.yaml with one value set, e.g. setting("datasets.digits.eps", 2.0)."""
    def change(params: dict) -> None:
        *parents, key = dotted.split(".")
        for name in parents:
            params = params[name]
        params[key] = value
    return params_edit(change)


def text(name: str, content: str | bytes) -> Maker:
    """A file with this content."""
    def make(work: Path) -> None:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return make


def truncated(source: str, name: str) -> Maker:
    """The first half of a good file."""
    def make(work: Path) -> None:
        whole = (work / source).read_bytes()
        (work / name).write_bytes(whole[: len(whole) // 2])
    return make


def npz_edit(source: str, name: str, change: Callable[[dict], None]) -> Maker:
    """A copy of a good .npz with its arrays changed."""
    def make(work: Path) -> None:
        with np.load(work / source) as data:
            arrays = dict(data)
        change(arrays)
        with open(work / name, "wb") as handle:
            np.savez(handle, **arrays)
    return make


def checkpoint_edit(name: str, change: Callable[[dict], None]) -> Maker:
    """A copy of run/best.pt with its state changed."""
    def make(work: Path) -> None:
        state = load_checkpoint(work / "run" / "best.pt")
        change(state)
        save_tensors(work / name, {**state, "format": FORMAT})  # as written, NaN weights too
    return make


def nan_weights(state: dict) -> None:
    """The EMA's first weight tensor full of NaN (a diverged run's model)."""
    name = next(k for k, v in state["ema"].items() if v.is_floating_point())
    state["ema"][name] = torch.full_like(state["ema"][name], float("nan"))


def raw_setting(dotted: str, literal: str) -> Maker:
    """params.yaml with one value written as this YAML literal (e.g. 1e400, too large for a
    float)."""
    def make(work: Path) -> None:
        setting(dotted, "__raw__")(work)
        path = work / "params.yaml"
        path.write_text(path.read_text().replace("__raw__", literal))
    return make


def link(name: str, target: str) -> Maker:
    """A symbolic link `name` -> `target`."""
    def make(work: Path) -> None:
        (work / name).symlink_to(target)
    return make


def copy(source: str, name: str) -> Maker:
    def make(work: Path) -> None:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes((work / source).read_bytes())
    return make


def images(n: int = 20, shape: tuple[int, ...] = (8, 8, 1), seed: int = 0) -> np.ndarray:
    """Random uint8 images N x H x W x C (a well-formed npz dataset's x)."""
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


def other_architecture(state: dict) -> None:
    """A well-formed checkpoint of the model `cnn-wide` (width 32)."""
    meta = state["meta"]
    meta.update(model="cnn-wide", model_spec={"architecture": "cnn", "width": 32})
    state["ema"] = build_model("cnn", width=32, in_channels=meta["in_channels"],
                               num_classes=meta["num_classes"], mean=tuple(meta["mean"]),
                               std=tuple(meta["std"])).state_dict()


def wrong_metadata(state: dict) -> None:
    """cnn weights under metadata that says cnn-wide: they do not fit."""
    state["meta"].update(model="cnn", model_spec={"architecture": "cnn", "width": 32})


class Payload:
    """A pickle that would run a command when unpickled without weights_only."""

    def __reduce__(self):
        return (print, ("this ran code from a checkpoint",))


def foreign_checkpoint(name: str) -> Maker:
    def make(work: Path) -> None:
        torch.save({"state_dict": {"w": torch.zeros(2)}}, work / name)
    return make


def malicious_checkpoint(name: str) -> Maker:
    def make(work: Path) -> None:
        torch.save({"format": "wscat-checkpoint-v1", "x": Payload()}, work / name)
    return make


def plain_pickle(name: str) -> Maker:
    def make(work: Path) -> None:
        (work / name).write_bytes(pickle.dumps({"format": "wscat-checkpoint-v1", "x": Payload()}))
    return make


def npz_dataset(name: str, **arrays: np.ndarray) -> Maker:
    """An npz dataset file holding `arrays`."""
    def make(work: Path) -> None:
        with open(work / name, "wb") as handle:
            np.savez(handle, **arrays)
    return make


def both(*makers: Maker) -> Maker:
    def make(work: Path) -> None:
        for maker in makers:
            maker(work)
    return make


def toy_dataset(path: str) -> Maker:
    """params.yaml with a dataset `toy` read from the npz at `path`."""
    def change(params: dict) -> None:
        params["datasets"]["toy"] = {**params["datasets"]["digits"], "source": "npz",
                                     "path": path, "test_fraction": None}
        params["training"]["toy"] = params["training"]["digits"]
    return params_edit(change)
