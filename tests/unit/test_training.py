"""The shared trainer: label hygiene, exact resume after a kill, determinism, forward-pass budget."""
import numpy as np
import pytest
import torch

from tests.helpers.tiny import tiny_params
from wscat.checkpoint import load_checkpoint
from wscat.config import RunConfig
from wscat.data import load_dataset, make_split
from wscat.data.training_data import training_data
from wscat.methods import Batch, StepContext, build_method
from wscat.models import build_model
from wscat.training import train
from wscat.training import trainer as trainer_module


@pytest.fixture(scope="module")
def setting():
    params = tiny_params(epochs=2)
    source = load_dataset("digits")
    split = make_split("digits", source.labels.numpy(), num_classes=10, seed=1, test_fraction=0.2,
                       labelled=300, val_fraction=0.2, val_max=2000)
    return params, source, split


def _run(params, method):
    return RunConfig.from_params(params, dataset="digits", model="cnn", method=method, seed=1)


def _weights(path):
    return load_checkpoint(path)["model"]


def _scrambled(source, split):
    labels = source.labels.clone()
    idx = torch.as_tensor(split.unlabelled)
    labels[idx] = (labels[idx] + 1 + torch.arange(len(idx)) % 9) % 10  # every label changed
    return source.__class__(source.name, source.images, labels, source.num_classes, source.mean,
                            source.std)


@pytest.mark.parametrize("method", ["mt", "wscat"])
def test_unlabelled_true_labels_never_reach_a_loss(tmp_path, setting, method):
    params, source, split = setting
    pseudo = np.random.default_rng(0).integers(0, 10, len(split.unlabelled))
    kind = params["methods"][method]["data"]
    for name, src in (("true", source), ("scrambled", _scrambled(source, split))):
        data = training_data(src, split, kind, pseudo if kind == "pseudo" else None)
        train(_run(params, method), data, tmp_path / name)
    a, b = _weights(tmp_path / "true" / "last.pt"), _weights(tmp_path / "scrambled" / "last.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_killed_training_resumes_exactly(tmp_path, setting, monkeypatch):
    params, source, split = setting
    params = tiny_params(epochs=3)
    run = _run(params, "trades")
    data = training_data(source, split, "labelled", None)
    train(run, data, tmp_path / "straight")

    real_save, saves = trainer_module.save_checkpoint, []

    def save_then_die(path, state):
        real_save(path, state)
        if path.name == "last.pt":
            saves.append(path)
            if len(saves) == 2:
                raise KeyboardInterrupt("killed after epoch 2")

    monkeypatch.setattr(trainer_module, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train(run, data, tmp_path / "killed")
    assert (tmp_path / "killed" / "resume" / "last.pt").is_file()
    assert not (tmp_path / "killed" / "last.pt").exists()
    monkeypatch.setattr(trainer_module, "save_checkpoint", real_save)
    train(run, data, tmp_path / "killed")
    straight, resumed = load_checkpoint(tmp_path / "straight" / "last.pt"), load_checkpoint(
        tmp_path / "killed" / "last.pt")
    for key in ("model", "ema"):
        assert all(torch.equal(straight[key][k], resumed[key][k]) for k in straight[key])
    assert [r["loss"] for r in straight["history"]] == [r["loss"] for r in resumed["history"]]
    assert not (tmp_path / "killed" / "resume").exists()


def _count_forwards(method_name, params):
    torch.manual_seed(0)
    model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,))
    method = build_method(params["methods"][method_name], feature_dim=model.feature_dim,
                          num_classes=10, image_shape=(1, 8, 8))
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
    ctx = StepContext(eps=0.1, step_size=0.025, steps=10, generator=torch.Generator().manual_seed(0),
                      ema_model=model, progress=0.0, augment=lambda t: t)
    method.loss(model, Batch(x, x, y), ctx)
    return len(calls)


def test_forward_pass_budget_per_step():
    params = tiny_params()
    # TRADES: 1 clean (eval, attack target) + 10 attack + natural + adversarial = 13, not 23.
    assert _count_forwards("trades", params) == 13
    # WSCAT reuses the natural forward for the attack's target and positives: 12.
    assert _count_forwards("wscat", params) == 12
