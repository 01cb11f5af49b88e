"""No label outside the budget reaches training (docs/evaluation.md#no-label-outside-the-budget).
Through the CLI, the real chain (split, the labelers' training, the real `wscat pseudo-label`, the
methods that learn from their pseudo-labels) runs on a dataset and on copies of it with one kind
of label changed:

- the unlabelled images' labels: every method that sees unlabelled data (MT, RST, WSCAT and its
  variants, PUAT, DMAT) trains bit for bit the same: best.pt, last.pt, the model, its EMA, the
  method's own parts, the training log, and the pseudo-labels;
- the test labels: every output of the chain is the same, the split included;
- the validation labels: the weights after every epoch are the same (selection may differ).

A planted leak (the test images with their true labels appended to the training data) makes the
test-label check fail: the suite catches the leak it is written for."""
from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import wscat.steps.train as train_step
import wscat.training.trainer as trainer
from tests.helpers.states import flat_state
from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.checkpoint import load_checkpoint

METHODS = ["mt", "rst", "wscat", "wscat-fixed", "wscat-self", "wscat-std", "puat", "dmat"]
CHAIN = ["standard", "mt", "trades", "rst", "wscat"]  # every kind of data: labelled, semi, pseudo
LABELER = {"rst": "standard", "wscat-std": "standard", "wscat": "mt", "wscat-fixed": "mt",
           "wscat-self": "mt"}
N_TRAIN = 1437  # digits' first 1,437 images train, the other 360 test
pytestmark = pytest.mark.slow  # the fixture trains the chain on four datasets


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


def _save(path: Path, images: np.ndarray, train: np.ndarray, test: np.ndarray) -> None:
    np.savez(path, x_train=images[:N_TRAIN], y_train=train, x_test=images[N_TRAIN:], y_test=test)


def _changed(labels: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Every label at `where` moved to another class."""
    out = labels.copy()
    out[where] = (labels[where] + 1 + np.arange(len(where)) % 9) % 10
    return out


def _main(*args: object) -> None:
    assert cli.main([str(a) for a in args]) == 0


@contextmanager
def _epoch_weights(record: dict[str, list[str]]) -> Iterator[None]:
    """Record a digest of the weights (model, EMA, the method's parts) after every epoch, per
    run folder: the trainer checkpoints them in resume/last.pt each epoch."""
    save = trainer.save_checkpoint

    def spy(path: Path, state: dict) -> None:
        if Path(path).name == "last.pt":
            digest = hashlib.sha256()
            for part in ("model", "ema", "method"):
                for key, value in sorted(flat_state(state[part], part)):
                    digest.update(key.encode() + value)
            out = Path(path).parent.parent  # out_dir/resume/last.pt
            record.setdefault(f"{out.parent.name}/{out.name}", []).append(digest.hexdigest())
        save(path, state)

    trainer.save_checkpoint = spy
    try:
        yield
    finally:
        trainer.save_checkpoint = save


def _pseudo_of(source: str, name: str, labeler: str) -> str:
    """`source`'s pseudo-labels for a chain on `name`. Another chain's labels came from a labeler
    trained on another dataset file, which the training refuses by the labeler's training that
    the file records: a copy without that record (as a file written before it was kept) holds
    the labels fixed across the two chains, which is the point here."""
    path = f"{source}/{labeler}.npz"
    if source == name:
        return path
    with np.load(path) as data:
        kept = {key: data[key] for key in data.files if key != "labeler_training"}
    copy = f"{name}/{labeler}-of-{source}.npz"
    Path(name).mkdir(exist_ok=True)
    np.savez(copy, **kept)
    return copy


def _chain(name: str, methods: list[str], pseudo_from: str | None = None) -> None:
    """Train the labelers, pseudo-label with the real step, train `methods` on dataset `name`
    (in the current folder; split s.npz). With `pseudo_from`, the pseudo-labels of that run."""
    args = ("--params", f"{name}.yaml", "--dataset", "digits", "--seed", 1)
    for labeler in ("standard", "mt"):
        if labeler in methods or pseudo_from is None:
            _main("train", *args, "--model", "cnn", "--method", labeler, "--split", "s.npz",
                  "--out-dir", f"{name}/{labeler}")
        if pseudo_from is None:
            _main("pseudo-label", *args, "--model", "cnn", "--labeler", labeler,
                  "--split", "s.npz", "--checkpoint", f"{name}/{labeler}/best.pt",
                  "--out", f"{name}/{labeler}.npz", "--metrics", f"{name}/{labeler}.json")
    source = pseudo_from or name
    for method in methods:
        if method in ("standard", "mt"):
            continue
        extra: list[object] = []
        if method in LABELER:
            extra = ["--pseudo", _pseudo_of(source, name, LABELER[method])]
        if method == "dmat":
            extra = ["--labeler-checkpoint", f"{source}/mt/best.pt"]
        _main("train", *args, "--model", "cnn", "--method", method, "--split", "s.npz",
              "--out-dir", f"{name}/{method}", *extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """The chain on `true/` and on datasets with the unlabelled, the test or the validation
    labels changed; and the weights of every epoch of every run."""
    work = tmp_path_factory.mktemp("leakage")
    here = os.getcwd()
    os.chdir(work)
    epochs: dict[str, list[str]] = {}
    try:
        digits = load_digits()
        images = (digits.images * 15).astype(np.uint8)[..., None]  # 17 levels as k*15/255
        labels = digits.target.astype(np.int64)
        train, test = labels[:N_TRAIN], labels[N_TRAIN:]
        _save(work / "true.npz", images, train, test)
        np.savez(work / "generated.npz", images=images[:40])
        for name in ("true", "unlabelled", "test", "validation"):
            write_params(work / f"{name}.yaml", _params(f"{name}.npz"))
        _main("split", "--params", "true.yaml", "--dataset", "digits", "--seed", 1,
              "--out", "s.npz")
        split = np.load(work / "s.npz")
        _save(work / "unlabelled.npz", images, _changed(train, split["unlabelled"]), test)
        _save(work / "test.npz", images, train, _changed(test, np.arange(len(test))))
        _save(work / "validation.npz", images, _changed(train, split["validation"]), test)
        _main("split", "--params", "test.yaml", "--dataset", "digits", "--seed", 1,
              "--out", "s-test.npz")
        with _epoch_weights(epochs):
            _chain("true", sorted(set(METHODS) | set(CHAIN)))
            _chain("unlabelled", METHODS)
            _chain("test", CHAIN)
            _chain("validation", CHAIN, pseudo_from="true")
    finally:
        os.chdir(here)
    return work, epochs


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


def differences(true: Path, other: Path, methods: list[str]) -> list[str]:
    """What differs between two chains' training outputs: checkpoints (every part), training
    logs and pseudo-labels. Empty when no changed label reached training."""
    found = []
    for method in methods:
        for name, parts in (("best.pt", ("ema", "method", "epoch", "best")),
                            ("last.pt", ("model", "ema", "method", "epoch", "best"))):
            a, b = load_checkpoint(true / method / name), load_checkpoint(other / method / name)
            found += [f"{method} {name}: {part}" for part in parts if not _same(a[part], b[part])]
        if _log(true / method / "train_log.csv") != _log(other / method / "train_log.csv"):
            found.append(f"{method} train_log.csv")
    for labeler in ("standard", "mt"):
        if (other / f"{labeler}.npz").is_file():
            a, b = np.load(true / f"{labeler}.npz"), np.load(other / f"{labeler}.npz")
            if not all(np.array_equal(a[k], b[k]) for k in ("indices", "pseudo_labels")):
                found.append(f"pseudo-labels of {labeler}")
    return found


@pytest.mark.parametrize("method", METHODS)
def test_true_labels_of_unlabelled_data_never_reach_training(runs, method):
    work, _ = runs
    found = differences(work / "true", work / "unlabelled", [method])  # pseudo-labels included
    assert found == [], f"{method} depends on the unlabelled images' labels: {found}"


def test_test_labels_reach_no_output(runs):
    """Every output of the chain, the split and the pseudo-labels included, is the same."""
    work, _ = runs
    a, b = np.load(work / "s.npz"), np.load(work / "s-test.npz")
    assert all(np.array_equal(a[k], b[k]) for k in a.files), "the split reads test labels"
    assert differences(work / "true", work / "test", CHAIN) == []


def test_validation_labels_change_no_weights_of_any_epoch(runs):
    """Validation only selects: the weights after every epoch are the same; the scores (and so
    best.pt and the log's validation columns) may differ."""
    work, epochs = runs
    for method in CHAIN:
        true, other = epochs[f"true/{method}"], epochs[f"validation/{method}"]
        assert len(true) == 2 and true == other, f"{method}: validation labels moved its weights"
    log = _log(work / "validation" / "standard" / "train_log.csv")
    assert log != _log(work / "true" / "standard" / "train_log.csv")  # they were read, and differ


def test_the_changed_datasets_differ_where_they_should(runs):
    """The control: each copy changes its own labels, all of them, and nothing else."""
    work, _ = runs
    true = np.load(work / "true.npz")
    split = np.load(work / "s.npz")
    for name, part, where in (("unlabelled", "y_train", split["unlabelled"]),
                              ("validation", "y_train", split["validation"]),
                              ("test", "y_test", np.arange(len(true["y_test"])))):
        other = np.load(work / f"{name}.npz")
        assert np.array_equal(np.flatnonzero(true[part] != other[part]), where), name
        for key in {"x_train", "x_test", "y_train", "y_test"} - {part}:
            assert np.array_equal(true[key], other[key]), (name, key)


def test_a_planted_test_label_leak_fails_the_suite(runs, monkeypatch, tmp_path):
    """Append the test images with their true labels to every run's labelled data: the
    test-label check then finds differences (it would fail), so it can catch this leak."""
    work, _ = runs
    real = train_step.training_data

    def leaky(source, split, kind, pseudo):
        data = real(source, split, kind, pseudo)
        test = torch.as_tensor(split.test)
        data.labelled_x = torch.cat([data.labelled_x, source.images[test]])
        data.labelled_y = torch.cat([data.labelled_y, source.labels[test]])
        return data

    monkeypatch.setattr(train_step, "training_data", leaky)
    here = os.getcwd()
    os.chdir(work)
    try:
        for name in ("true", "test"):
            _main("train", "--params", f"{name}.yaml", "--dataset", "digits", "--seed", 1,
                  "--model", "cnn", "--method", "trades", "--split", "s.npz",
                  "--out-dir", tmp_path / name / "trades")
    finally:
        os.chdir(here)
    assert differences(tmp_path / "true", tmp_path / "test", ["trades"]) != []
