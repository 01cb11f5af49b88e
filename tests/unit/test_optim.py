"""wscat.optim's SGD and Adam against torch.optim's: the same updates and state, bit for bit,
and no torch._dynamo import (the reason they exist)."""
from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from wscat.training.schedule import make_scheduler
from wscat.optim import SGD, Adam

SETTINGS = dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 3))


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int) -> None:
    scheduler = make_scheduler(optimizer, epochs=steps, warmup_fraction=0.25)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.rand(8, 1, 8, 8, generator=generator)
        y = torch.randint(0, 3, (8,), generator=generator)
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        scheduler.step()


def _same_state(a: dict, b: dict) -> bool:
    """The same param_groups and, per parameter, the same state tensors (SGD's momentum buffer,
    Adam's step and moments)."""
    return a["param_groups"] == b["param_groups"] and a["state"].keys() == b["state"].keys() and all(
        torch.equal(a["state"][k][part], b["state"][k][part])
        for k in a["state"] for part in a["state"][k])


@pytest.mark.parametrize("settings", [SETTINGS, dict(SETTINGS, nesterov=False),
                                      dict(lr=0.05, momentum=0.0, weight_decay=0.0)])
def test_same_updates_and_state_as_torch(settings):
    ours, theirs = _model(0), _model(0)
    ours_opt, theirs_opt = SGD(ours.parameters(), **settings), torch.optim.SGD(
        theirs.parameters(), **settings)
    _train(ours, ours_opt, steps=12, seed=1)
    _train(theirs, theirs_opt, steps=12, seed=1)
    for p, q in zip(ours.state_dict().values(), theirs.state_dict().values()):
        assert torch.equal(p, q)
    assert _same_state(ours_opt.state_dict(), theirs_opt.state_dict())


def test_resumes_from_a_torch_state_dict_as_torch_does():
    """A checkpoint's optimizer state (written by torch.optim.SGD before this class) loads, and
    the run goes on with the same updates."""
    first = _model(2)
    torch_opt = torch.optim.SGD(first.parameters(), **SETTINGS)
    _train(first, torch_opt, steps=5, seed=3)
    state = torch_opt.state_dict()
    ours, theirs = _model(9), _model(9)
    ours.load_state_dict(first.state_dict())
    theirs.load_state_dict(first.state_dict())
    ours_opt = SGD(ours.parameters(), **SETTINGS)
    theirs_opt = torch.optim.SGD(theirs.parameters(), **SETTINGS)
    # load_state_dict keeps the momentum tensors it is given, and steps update them in place
    ours_opt.load_state_dict(copy.deepcopy(state))
    theirs_opt.load_state_dict(copy.deepcopy(state))
    _train(ours, ours_opt, steps=4, seed=4)
    _train(theirs, theirs_opt, steps=4, seed=4)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(p, q)
    assert _same_state(ours_opt.state_dict(), theirs_opt.state_dict())


ADAM = [dict(lr=1e-3), dict(lr=2e-4, betas=(0.5, 0.999)),
        dict(lr=0.01, weight_decay=1e-4, amsgrad=True)]  # NRF's, PUAT's, and the other branch


@pytest.mark.parametrize("settings", ADAM)
def test_adam_same_updates_and_state_as_torch(settings):
    ours, theirs = _model(0), _model(0)
    ours_opt = Adam(ours.parameters(), **settings)
    theirs_opt = torch.optim.Adam(theirs.parameters(), **settings)
    _train(ours, ours_opt, steps=12, seed=1)
    _train(theirs, theirs_opt, steps=12, seed=1)
    for p, q in zip(ours.state_dict().values(), theirs.state_dict().values()):
        assert torch.equal(p, q)
    assert _same_state(ours_opt.state_dict(), theirs_opt.state_dict())
    restored = Adam(_model(5).parameters(), **settings)  # a checkpoint's state loads as torch's
    restored.load_state_dict(copy.deepcopy(theirs_opt.state_dict()))
    assert _same_state(restored.state_dict(), theirs_opt.state_dict())


@pytest.mark.parametrize("optimizer", [SGD, Adam])
def test_refuses_differentiable(optimizer):
    with pytest.raises(ValueError, match="differentiable"):
        optimizer(_model(0).parameters(), lr=0.1, differentiable=True).step()


def test_does_not_import_dynamo():
    """A fresh interpreter trains a few steps with each optimiser, saves and loads its state:
    torch._dynamo stays unloaded (torch.optim's own optimiser loads it on construction, the
    check's teeth). One interpreter for both: each costs ~3 s of CI."""
    script = textwrap.dedent("""
        import sys
        import torch
        from wscat.optim import SGD, Adam
        for optimizer_class, settings in ((SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
                                          (Adam, dict(lr=1e-3))):
            model = torch.nn.Linear(3, 2)
            optimizer = optimizer_class(model.parameters(), **settings)
            for _ in range(3):
                optimizer.zero_grad()
                model(torch.ones(4, 3)).sum().backward()
                optimizer.step()
            optimizer.load_state_dict(optimizer.state_dict())
            print("torch._dynamo" in sys.modules)
        torch.optim.SGD(model.parameters(), lr=0.1)
        print("torch._dynamo" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False", "False", "True"]
