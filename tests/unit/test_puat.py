"""PUAT: each loss term by hand, the players' updates, phases, determinism, exact resume, the
classifier's BatchNorm statistics, and a short run through the real trainer."""
import copy
import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.helpers.killed import killed_after_first_epoch
from tests.helpers.tiny import digits_split, tiny_params
from wscat.checkpoint import load_checkpoint
from wscat.config import RunConfig
from wscat.data.training_data import training_data
from wscat.methods import Batch, StepContext
from wscat.methods.puat import (Puat, classifier_gan_loss, discriminator_loss, pair_roles,
                                project, sigmoid_rampup)
from wscat.models import SmallCNN
from wscat.models.gan import Attacker, Discriminator, Generator, halvings
from wscat.training import train
from wscat.training.ema import make_ema

KNOBS = dict(pretrain_epochs=1, gan_start_epochs=0.5, adv_rampup_epochs=1, consistency=50.0,
             consistency_rampup_epochs=3, uae_weight=1.0, rae_weight=6.0, gan_weight=0.1,
             gan_alpha=0.5, label_smoothing=0.1, d_steps=2, n_generated=7, latent_dim=8,
             gan_width=8, latent_eps=0.1, gan_lr=2e-3)
ADVERSARIAL, PRETRAIN_GAN, PRETRAIN_ALONE = 2.5, 0.7, 0.2  # progress in each phase
PLAYERS = ("generator", "discriminator", "attacker")


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = SmallCNN(1, 10, (0.3,), (0.38,), width=4)
    method = Puat(num_classes=10, image_shape=(1, 8, 8), feature_dim=model.feature_dim, **KNOBS)
    return model, method, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _batch() -> Batch:
    g = torch.Generator().manual_seed(1)
    x = torch.rand(20, 1, 8, 8, generator=g)
    labels = torch.full((20,), -1)
    labels[:6] = torch.arange(6)
    return Batch(x, x.clone(), labels)


def _ctx(ema: torch.nn.Module, progress: float, seed: int = 2) -> StepContext:
    return StepContext(eps=0.15, step_size=0.05, steps=2,
                       generator=torch.Generator().manual_seed(seed),
                       ema_model=ema, progress=progress, augment=lambda v: v)


def _train_step(model, method, optimizer, ema, progress, seed=2):
    """What the trainer does with a method's loss."""
    loss, stats = method.loss(model, _batch(), _ctx(ema, progress, seed))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach(), stats


def _params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _changed(before, module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))


# --- networks --------------------------------------------------------------------------------

def test_networks_follow_the_image_shape():
    assert (halvings(8), halvings(32), halvings(28), halvings(64)) == (1, 3, 2, 4)
    for shape in ((1, 8, 8), (3, 32, 32)):
        g = Generator(shape, 10, latent_dim=16, width=8)
        d = Discriminator(shape, 10, width=8).eval()  # no power iteration between calls
        assert len(g.blocks) == halvings(shape[1]) and len(d.blocks) == halvings(shape[1]) + 1
        z, y = torch.randn(5, 16), torch.arange(5)
        x = g(z, y)
        assert x.shape == (5, *shape) and x.min() >= 0 and x.max() <= 1
        scores = d.scores(x)
        assert scores.shape == (5, 10)
        assert torch.allclose(d(x, y), scores[torch.arange(5), y])


def test_generator_is_class_conditional_and_discriminator_is_a_projection():
    torch.manual_seed(0)
    g, d = Generator((1, 8, 8), 3, latent_dim=4, width=4), Discriminator((1, 8, 8), 3, width=4)
    with torch.no_grad():
        for block in g.blocks:  # give each class its own scale and shift
            block.bn1.scale.normal_()
            block.bn1.shift.normal_()
    z = torch.randn(4, 4)
    zeros, ones = torch.zeros(4, dtype=torch.long), torch.ones(4, dtype=torch.long)
    assert not torch.allclose(g(z, zeros), g(z, ones))
    d.eval()
    x = torch.rand(4, 1, 8, 8)
    phi = F.relu(d.blocks(x * 2 - 1)).sum((2, 3))  # D(x, y) = w.phi + <e_y, phi>
    expected = phi @ d.linear.weight.T + d.linear.bias + phi @ d.embedding.weight
    assert torch.allclose(d.scores(x), expected, atol=1e-5)


def test_attacker_shift_is_bounded_per_coordinate():
    a = Attacker(6, 10, latent_eps=0.1, hidden=6)
    with torch.no_grad():
        for p in a.parameters():
            p.mul_(50)  # saturate tanh
    z, y = torch.randn(32, 6), torch.randint(0, 10, (32,))
    shift = a(z, y) - z
    assert shift.abs().max() <= 0.1 + 1e-6 and shift.abs().max() > 0.09


# --- loss terms by hand ----------------------------------------------------------------------

def test_projection_onto_the_ball_around_the_generated_image():
    x_g = torch.tensor([0.5, 0.5, 0.5, 0.95, 0.05])
    x_uae = torch.tensor([0.9, 0.1, 0.55, 1.3, -0.4])
    assert torch.allclose(project(x_uae, x_g, 0.2), torch.tensor([0.7, 0.3, 0.55, 1.0, 0.0]))


def test_pair_roles():
    labels = torch.tensor([3, -1, -1, 0, -1])
    coin = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0])
    real, classifier = pair_roles(labels, coin)
    assert real.tolist() == [1, 1, 0, 1, 0]        # labelled rows, and unlabelled rows with coin 1
    assert classifier.tolist() == [0, 0, 1, 0, 1]  # the other unlabelled rows
    real, classifier = pair_roles(torch.tensor([1, 2]), torch.tensor([0.0, 1.0]))
    assert real.tolist() == classifier.tolist() == [1, 1]  # no unlabelled rows: C's pairs = x_l


def test_discriminator_loss_by_hand():
    scores = torch.tensor([[0.5, 2.0], [-1.0, 0.2], [0.0, -0.5], [1.0, -3.0]])  # D(x, .), 4 rows
    y_real = torch.tensor([0, 1, 0, 0])
    real_weight = torch.tensor([1.0, 1.0, 0.0, 0.0])      # rows 0, 1: real pairs (labels 0, 1)
    classifier_weight = torch.tensor([0.0, 0.0, 1.0, 1.0])  # rows 2, 3: C's pairs, weighted by p_C
    probs = torch.tensor([[0.9, 0.1], [0.9, 0.1], [0.25, 0.75], [0.5, 0.5]])
    s_gen = torch.tensor([[-2.0, 0.3]])                     # one generated pair, label 1
    real = (max(0, 1 - 0.5) + max(0, 1 - 0.2)) / 2                     # 0.65
    clf = ((0.25 * 1 + 0.75 * 0.5) + (0.5 * 2 + 0.5 * 0)) / 2          # 0.8125
    gen = max(0, 1 + 0.3)                                              # 1.3
    loss = discriminator_loss(scores, y_real, real_weight, probs, classifier_weight, s_gen,
                              torch.tensor([1]), 0.3)
    assert loss.item() == pytest.approx(real + 0.3 * clf + 0.7 * gen)


def test_classifier_gan_loss_by_hand():
    # p_C = (1/4, 3/4), (1/2, 1/2), and a third row that is not one of C's pairs
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0], [5.0, 0.0]], requires_grad=True)
    scores = torch.tensor([[2.0, -1.0], [4.0, 0.0], [9.0, 9.0]], requires_grad=True)
    loss = classifier_gan_loss(logits, scores, torch.tensor([1.0, 1.0, 0.0]))
    assert loss.item() == pytest.approx(-((0.5 - 0.75) + 2.0) / 2)
    loss.backward()
    assert logits.grad is not None and scores.grad is None  # D's scores are fixed in C's term


def test_ramps():
    assert sigmoid_rampup(0.0) == pytest.approx(math.exp(-5))
    assert sigmoid_rampup(0.5) == pytest.approx(math.exp(-1.25))
    assert sigmoid_rampup(1.0) == sigmoid_rampup(7.0) == 1.0
    _, method, _ = _setup()
    assert method.adversarial_ramp(0.99) == 0.0
    assert method.adversarial_ramp(1.5) == pytest.approx(math.exp(-1.25))
    assert method.adversarial_ramp(2.0) == 1.0
    assert method.consistency_weight(1.5) == pytest.approx(50 * math.exp(-5 * 0.25))


def test_returned_loss_is_the_sum_of_its_terms():
    model, method, _ = _setup()
    reference = copy.deepcopy(model).train()
    batch = _batch()
    loss, stats = method.loss(model, batch, _ctx(make_ema(model), ADVERSARIAL))
    # C's parameters are not changed by the players' updates: an untouched copy gives the same CE
    logits = reference(batch.x)[1]
    ce = F.cross_entropy(logits[:6], batch.labels[:6], label_smoothing=0.1)
    assert stats["ce"].item() == pytest.approx(ce.item(), rel=1e-5)
    w, r = method.consistency_weight(ADVERSARIAL), method.adversarial_ramp(ADVERSARIAL)
    assert r == 1.0
    expected = (stats["ce"] + w * stats["consistency"]
                + r * (1.0 * stats["uae"] + 0.1 * stats["gan"] + 6.0 * stats["rae"]))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert all(stats[k].item() != 0 for k in ("uae", "gan", "rae", "d_loss", "g_loss", "a_loss"))


# --- the players' updates and the phases ------------------------------------------------------

def test_a_step_updates_g_d_a_and_leaves_the_classifier_to_the_trainer():
    model, method, _ = _setup()
    before = {name: _params(getattr(method, name)) for name in PLAYERS}
    classifier = _params(model)
    loss, _ = method.loss(model, _batch(), _ctx(make_ema(model), ADVERSARIAL))
    assert torch.isfinite(loss)
    for name, params in before.items():
        assert _changed(params, getattr(method, name)), name
    assert not _changed(classifier, model)
    assert all(p.grad is None for p in model.parameters())      # nothing leaked into C's grads
    assert list(method.trainable_parameters()) == []
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert all(p.grad is None for p in method.parameters())     # the returned graph ends at C


@pytest.mark.parametrize("progress, moved", [(PRETRAIN_ALONE, ()),
                                             (PRETRAIN_GAN, ("generator", "discriminator")),
                                             (ADVERSARIAL, PLAYERS)])
def test_phases(progress, moved):
    model, method, _ = _setup()
    before = {name: _params(getattr(method, name)) for name in PLAYERS}
    loss, stats = method.loss(model, _batch(), _ctx(make_ema(model), progress))
    for name, params in before.items():
        assert _changed(params, getattr(method, name)) == (name in moved), name
    adversarial = progress >= KNOBS["pretrain_epochs"]
    assert all((stats[k].item() != 0) == adversarial for k in ("uae", "gan", "rae", "a_loss"))
    if not adversarial:  # pre-training: Mean Teacher
        expected = stats["ce"] + method.consistency_weight(progress) * stats["consistency"]
        assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_two_steps_are_deterministic():
    runs = []
    for _ in range(2):
        model, method, optimizer = _setup()
        ema = make_ema(model)
        losses = [_train_step(model, method, optimizer, ema, ADVERSARIAL, seed=s)[0]
                  for s in (3, 4)]
        runs.append((losses, model.state_dict(), method.state_dict()))
    (l1, m1, p1), (l2, m2, p2) = runs
    assert [x.item() for x in l1] == [x.item() for x in l2]
    assert all(torch.equal(m1[k], m2[k]) for k in m1)
    assert all(torch.equal(p1[k], p2[k]) for k in p1 if k != "_extra_state")


def _roundtrip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)  # how checkpoints are read


def _adam_states(method):
    return [s for opt in method.optimizers.values() for s in opt.state.values()]


def test_state_dict_round_trip_resumes_exactly():
    model, method, optimizer = _setup(seed=0)
    ema = make_ema(model)
    for s in (3, 4):
        _train_step(model, method, optimizer, ema, ADVERSARIAL, seed=s)
    saved = _roundtrip({"model": model.state_dict(), "ema": ema.state_dict(),
                        "method": method.state_dict(), "optimizer": optimizer.state_dict()})
    assert set(saved["method"]["_extra_state"]) == {"generator", "discriminator", "attacker"}

    resumed_model, resumed, resumed_optimizer = _setup(seed=9)  # other initial weights
    resumed_ema = make_ema(resumed_model)
    resumed_model.load_state_dict(saved["model"])
    resumed_ema.load_state_dict(saved["ema"])
    resumed.load_state_dict(saved["method"])
    resumed_optimizer.load_state_dict(saved["optimizer"])
    for a, b in zip(_adam_states(method), _adam_states(resumed)):
        assert all(torch.equal(a[k], b[k]) for k in a)

    straight = _train_step(model, method, optimizer, ema, ADVERSARIAL, seed=5)
    again = _train_step(resumed_model, resumed, resumed_optimizer, resumed_ema, ADVERSARIAL, seed=5)
    assert straight[0].item() == again[0].item()
    for a, b in ((model, resumed_model), (method, resumed)):
        sa, sb = a.state_dict(), b.state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa if k != "_extra_state")


def test_a_resumed_adam_keeps_its_step_counts_as_a_fresh_one_does():
    """A resume maps the checkpoint onto the device, and torch's Adam leaves `step` where the
    state dict has it; on a GPU each step then read every count back to the host. Here a
    checkpoint's counts come in another form (float64): they are made CPU float32 scalars, as
    a fresh Adam's, with the same values."""
    model, method, optimizer = _setup(seed=0)
    _train_step(model, method, optimizer, make_ema(model), ADVERSARIAL, seed=3)
    saved = _roundtrip({"method": method.state_dict()})["method"]
    for state in saved["_extra_state"].values():
        for entry in state["state"].values():
            entry["step"] = entry["step"].double()
    _, resumed, _ = _setup(seed=9)
    resumed.load_state_dict(saved)
    steps = [entry["step"] for entry in _adam_states(resumed)]
    assert steps and all(step.device.type == "cpu" and step.dtype == torch.float32
                         and step.dim() == 0 for step in steps)
    assert [float(step) for step in steps] == [float(s["step"]) for s in _adam_states(method)]


def test_resume_without_the_optimiser_states_would_differ():
    """The Adam states matter: fresh ones give another step (the round trip is not vacuous)."""
    model, method, optimizer = _setup()
    ema = make_ema(model)
    _train_step(model, method, optimizer, ema, ADVERSARIAL, seed=3)
    fresh_model, fresh = copy.deepcopy(model), copy.deepcopy(method)
    fresh_optimizer = copy.deepcopy(optimizer)
    for name in fresh.optimizers:
        fresh.optimizers[name] = torch.optim.Adam(getattr(fresh, name).parameters(), lr=2e-3,
                                                  betas=(0.0, 0.99))
    _train_step(model, method, optimizer, ema, ADVERSARIAL, seed=4)
    _train_step(fresh_model, fresh, fresh_optimizer, copy.deepcopy(ema), ADVERSARIAL, seed=4)
    assert _changed(_params(fresh.generator), method.generator)


def test_generated_images_never_enter_the_classifiers_batchnorm_statistics():
    """Running statistics are updated by the natural batch and the RAEs only: UAEs (generated),
    PGD iterates and the players' updates (C in eval mode) leave them alone."""
    model, method, _ = _setup()
    updates: list[int] = []

    def record(module, inputs):
        if module.training and module.track_running_stats and module.momentum != 0:
            updates.append(len(inputs[0]))

    bn = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bn:
        m.register_forward_pre_hook(record)
    method.loss(model, _batch(), _ctx(make_ema(model), ADVERSARIAL))
    assert KNOBS["n_generated"] not in updates
    assert updates == [20] * (2 * len(bn))  # natural forward + the RAE forward
    updates.clear()
    method.loss(model, _batch(), _ctx(make_ema(model), PRETRAIN_GAN))
    assert updates == [20] * len(bn)


# --- through the real trainer -----------------------------------------------------------------

PUAT_PARAMS = {"objective": "puat", "data": "semi", "selection": "cw",
               **{**KNOBS, "d_steps": 5, "n_generated": 64, "latent_dim": 32, "gan_width": 16,
                  "gan_start_epochs": 0.5}}


@pytest.fixture
def puat_run():
    """A 2-epoch digits run (pre-training, then the game) and its data."""
    params = tiny_params(epochs=2)
    params["methods"]["puat"] = PUAT_PARAMS
    source, split = digits_split()
    data = training_data(source, split, "semi", None)
    assert bool((data.unlabelled_y == -1).all())
    return RunConfig.from_params(params, dataset="digits", model="cnn", method="puat", seed=1), data


@pytest.mark.slow
def test_a_killed_run_through_the_trainer_resumes_exactly(tmp_path, monkeypatch, puat_run):
    run, data = puat_run
    summary = train(run, data, tmp_path / "straight")
    assert summary["epochs"] == 2
    log = (tmp_path / "straight" / "train_log.csv").read_text().splitlines()
    header, rows = log[0].split(","), [dict(zip(log[0].split(","), r.split(","))) for r in log[1:]]
    assert {"uae", "rae", "gan", "d_loss", "g_loss", "a_loss"} <= set(header)
    assert float(rows[0]["uae"]) == 0.0 and float(rows[1]["uae"]) > 0.0  # pre-training, the game
    assert all(np.isfinite(float(r["loss"])) for r in rows)

    killed_after_first_epoch(monkeypatch, lambda: train(run, data, tmp_path / "killed"))
    train(run, data, tmp_path / "killed")  # resumes from epoch 2: the game, with the Adam states
    straight = load_checkpoint(tmp_path / "straight" / "last.pt")
    resumed = load_checkpoint(tmp_path / "killed" / "last.pt")
    assert set(resumed["method"]["_extra_state"]) == set(PLAYERS)
    for key in ("model", "ema", "method"):
        a, b = straight[key], resumed[key]
        assert all(torch.equal(a[k], b[k]) for k in a if k != "_extra_state"), key
