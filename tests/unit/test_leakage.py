"""No method that sees unlabelled data learns from its true labels: through the CLI, every such
method (MT, RST, WSCAT and its variants, PUAT, DMAT) trains on a dataset and on the same dataset
with every unlabelled label changed, and both runs must agree bit for bit: best.pt and last.pt,
the model, its EMA and the method's own parts (heads, GAN), and the training log."""
from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.checkpoint import load_checkpoint

METHODS = ["mt", "rst", "wscat", "wscat-fixed", "wscat-self", "wscat-std", "puat", "dmat"]
N_TRAIN = 1437  # digits' first 1,437 images train, the other 360 test
pytestmark = pytest.mark.slow  # every test reads the `runs` fixture: 16 trainings


def _params(path: str) -> dict:
    """Two epochs, validated (and so selected) every epoch; the digits set read from `path`."""
    params = tiny_params(epochs=2)
    params["training"]["digits"]["val_every"] = 1
    params["datasets"]["digits"].update(source="npz", path=path, test_fraction=None,
                                        num_classes=10)
    puat = params["methods"]["puat"]["per_dataset"]["digits"]
    puat.update(pretrain_epochs=1, gan_start_epochs=0.5, adv_rampup_epochs=1,
                consistency_rampup_epochs=1, d_steps=1, n_generated=16, latent_dim=8, gan_width=8)
    params["methods"]["dmat"].update(generated="generated.npz")  # no labels: mt labels them
    return params


def _save_dataset(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    np.savez(path, x_train=images[:N_TRAIN], y_train=labels[:N_TRAIN],
             x_test=images[N_TRAIN:], y_test=labels[N_TRAIN:])


def _main(*args: object) -> None:
    assert cli.main([str(a) for a in args]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Every method trained twice: on `true/` and on `scrambled/` (unlabelled labels changed)."""
    work = tmp_path_factory.mktemp("leakage")
    here, threads = os.getcwd(), torch.get_num_threads()
    os.chdir(work)
    torch.set_num_threads(1)
    try:
        digits = load_digits()
        images = (digits.images * 15).astype(np.uint8)[..., None]  # 17 levels as k*15/255
        labels = digits.target.astype(np.int64)
        _save_dataset(work / "true.npz", images, labels)
        np.savez(work / "generated.npz", images=images[:40])
        for name in ("true", "scrambled"):
            write_params(work / f"{name}.yaml", _params(f"{name}.npz"))
        _main("split", "--params", "true.yaml", "--dataset", "digits", "--seed", 1, "--out", "s.npz")
        unlabelled = np.load(work / "s.npz")["unlabelled"]
        scrambled = labels.copy()
        scrambled[unlabelled] = (labels[unlabelled] + 1 + np.arange(len(unlabelled)) % 9) % 10
        _save_dataset(work / "scrambled.npz", images, scrambled)
        pseudo = np.random.default_rng(0).integers(0, 10, len(unlabelled))
        np.savez(work / "p.npz", indices=unlabelled, pseudo_labels=pseudo)
        for name in ("true", "scrambled"):
            for method in METHODS:
                extra = []
                if method in ("rst", "wscat", "wscat-fixed", "wscat-self", "wscat-std"):
                    extra = ["--pseudo", "p.npz"]
                if method == "dmat":
                    extra = ["--labeler-checkpoint", f"{name}/mt/best.pt"]
                _main("train", "--params", f"{name}.yaml", "--dataset", "digits", "--model", "cnn",
                      "--method", method, "--seed", 1, "--split", "s.npz",
                      "--out-dir", f"{name}/{method}", *extra)
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
    return work


def _same(a: object, b: object) -> bool:
    """Nested dicts, lists and tensors equal bit for bit."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _log(path: Path) -> list[dict[str, str]]:
    with open(path) as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


@pytest.mark.parametrize("method", METHODS)
def test_true_labels_of_unlabelled_data_never_reach_training(runs, method):
    true, scrambled = runs / "true" / method, runs / "scrambled" / method
    for name, parts in (("best.pt", ("ema", "method", "epoch", "best")),
                        ("last.pt", ("model", "ema", "method", "epoch", "best"))):
        a, b = load_checkpoint(true / name), load_checkpoint(scrambled / name)
        for part in parts:
            assert _same(a[part], b[part]), f"{method} {name}: {part} depends on unlabelled labels"
    assert _log(true / "train_log.csv") == _log(scrambled / "train_log.csv")


def test_the_scrambled_dataset_differs_where_it_should(runs):
    """The control: only unlabelled labels differ, all of them."""
    true, scrambled = np.load(runs / "true.npz"), np.load(runs / "scrambled.npz")
    unlabelled = np.load(runs / "s.npz")["unlabelled"]
    changed = np.flatnonzero(true["y_train"] != scrambled["y_train"])
    assert np.array_equal(changed, unlabelled)
    assert np.array_equal(true["x_train"], scrambled["x_train"])
