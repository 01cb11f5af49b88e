"""The shared trainer against answers worked out by hand, where mutation testing of
wscat/training, wscat/checkpoint.py and wscat/optim.py found it unguarded (42 of the 45 hand-made
mutants the other tests let through; the other 3 are equivalent).

The other trainer tests compare a run with another run (resumed against unbroken, true labels
against scrambled), so a change that breaks both alike goes through. Here every expectation comes
from the documented rule, not from wscat's code:

- the one-cycle schedule, docs/official-code.md: linear warm-up (e + 1) / (ceil(w) + 1) over
  w = warmup_fraction * epochs epochs, then 0.5 (1 + cos(pi (e - w) / (epochs - w)));
- the EMA, docs/pipeline.md and docs/official-code.md: e <- d e + (1 - d) w after every update,
  d = 0 (a copy) while progress < ema_warmup_epochs, then ema_decay; Mean Teacher's teacher
  d = min(tau(progress), 1 - 1/(t + 1)) at update t of the whole run; batch-norm buffers copied;
- the optimiser: SGD with params' lr, momentum, Nesterov and weight decay over the classifier and
  the method's own parameters, fresh gradients each update, none for a parameter a loss leaves out;
- the selection: the EMA model validated, with the selection's attack and the `validation` steps;
  every val_every epochs and after the last; ties to the later epoch; best.pt the EMA of the best
  epoch; a resumed run keeps the best it had, and resumes before its first validation too;
- the log: the learning rate an epoch trained with, and its mean loss;
- checkpoints: read without running code, non-finite tensors found at any depth, a model of
  another spec or training refused, the resume fingerprint covering what the training reads.

The runs are tiny (4 classes of random 1x8x8 images, batch 16, 4 updates an epoch, width-16 CNN);
spies record what the trainer does (weights after each update, drawn batches, what it validates)
and the test recomputes the rest.
"""
from __future__ import annotations

import copy
import csv
import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tests.helpers.tiny import tiny_params
from wscat.checkpoint import (FORMAT, CheckpointError, check_model, check_trained_by,
                              load_checkpoint, nonfinite, save_checkpoint)
from wscat.config import RunConfig
from wscat.data.training_data import TrainingData
from wscat.methods import Batch
from wscat.optim import SGD
from wscat.training import run_folder, train
from wscat.training import trainer as trainer_module
from wscat.training.ema import make_ema, update_ema
from wscat.training.schedule import one_cycle

BATCH = 16
ITERATIONS = 4  # updates an epoch: n_train = ITERATIONS * BATCH
LR = 0.1


def _data(*, unlabelled: int = 0, seed: int = 0) -> TrainingData:
    """32 labelled random images of 4 classes, `unlabelled` more without labels, 12 for
    validation; an epoch of ITERATIONS batches."""
    g = torch.Generator().manual_seed(seed)
    return TrainingData(
        labelled_x=torch.rand(32, 1, 8, 8, generator=g), labelled_y=torch.arange(32) % 4,
        unlabelled_x=torch.rand(unlabelled, 1, 8, 8, generator=g),
        unlabelled_y=torch.full((unlabelled,), -1),
        validation_x=torch.rand(12, 1, 8, 8, generator=g), validation_y=torch.arange(12) % 4,
        num_classes=4, mean=(0.5,), std=(0.29,), n_train=ITERATIONS * BATCH)


def _run(method: str = "standard", *, epochs: int, warmup_fraction: float = 0.0,
         ema_decay: float = 0.8, ema_warmup_epochs: float = 0.0, val_every: int = 1,
         selection: str | None = None, **method_knobs: Any) -> RunConfig:
    """The digits run of `method` on the tiny schedule above."""
    params = tiny_params(epochs=epochs)
    params["validation"] = {"pgd_steps": 3, "cw_steps": 4}  # told apart
    params["training"]["digits"].update(
        batch_size=BATCH, lr=LR, warmup_fraction=warmup_fraction, ema_decay=ema_decay,
        ema_warmup_epochs=ema_warmup_epochs, val_every=val_every, labelled_per_batch=None)
    if selection:
        params["methods"][method]["selection"] = selection
    params["methods"][method].update(method_knobs)
    params["methods"][method].pop("per_dataset", None)
    return RunConfig.from_params(params, dataset="digits", model="cnn", method=method, seed=1)


def _params(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the module's parameters (not its buffers), by name."""
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-6) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=atol) for k in a)


class Recorder:
    """Spies on a training: weights before the first update and after each, each update's loss,
    each epoch's drawn batches, and each accuracy call (its attack settings, the weights of the
    model it scored)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.initial: dict[str, torch.Tensor] | None = None
        self.weights: list[dict[str, torch.Tensor]] = []
        self.losses: list[float] = []
        self.batches: list[list[torch.Tensor]] = []
        self.scored: list[tuple[dict[str, Any], dict[str, torch.Tensor]]] = []
        real_step, real_draw = trainer_module.train_step, trainer_module.sample_batch_indices
        real_accuracy = trainer_module.accuracy

        def train_step(method: Any, step_model: nn.Module, model: nn.Module, *args: Any,
                       **kwargs: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            if self.initial is None:
                self.initial = _params(model)
            loss, stats = real_step(method, step_model, model, *args, **kwargs)
            self.weights.append(_params(model))
            self.losses.append(float(loss))
            return loss, stats

        def draw(*args: Any, **kwargs: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
            batches = real_draw(*args, **kwargs)
            self.batches.append([li.clone() for li, _ in batches])
            return batches

        def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, **kwargs: Any) -> float:
            self.scored.append((kwargs, _params(model)))
            return real_accuracy(model, x, y, **kwargs)

        monkeypatch.setattr(trainer_module, "train_step", train_step)
        monkeypatch.setattr(trainer_module, "sample_batch_indices", draw)
        monkeypatch.setattr(trainer_module, "accuracy", accuracy)


def _ema_by_hand(initial: dict[str, torch.Tensor], weights: list[dict[str, torch.Tensor]],
                 decay: Callable[[int], float]) -> list[dict[str, torch.Tensor]]:
    """The EMA after each update t: e <- d_t e + (1 - d_t) w_t, in float64, from the copy of the
    initial weights."""
    ema = {k: v.double() for k, v in initial.items()}
    out = []
    for t, w in enumerate(weights):
        d = decay(t)
        ema = {k: d * ema[k] + (1 - d) * w[k].double() for k in ema}
        out.append({k: v.float() for k, v in ema.items()})
    return out


# --- one recorded run: 4 epochs, warm-up 1 epoch of 4, EMA copied for 1 epoch, then 0.8 -------

EMA_DECAY, EMA_WARMUP = 0.8, 1.0
Recorded = tuple[Recorder, RunConfig, Path]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    run = _run(epochs=4, warmup_fraction=0.25, ema_decay=EMA_DECAY, ema_warmup_epochs=EMA_WARMUP,
               selection="cw")
    out = tmp_path_factory.mktemp("recorded")
    with pytest.MonkeyPatch.context() as monkeypatch:
        recorder = Recorder(monkeypatch)
        train(run, _data(), out)
    return recorder, run, out


def _log(out: Path) -> list[dict[str, str]]:
    with open(out / "train_log.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_ema_copies_during_its_warm_up_then_averages_with_its_decay(recorded: Recorded) -> None:
    """Progress t / 4 < 1 epoch: a copy; from update 4 (progress exactly 1.0) on, decay 0.8.
    The saved EMA is that average of the recorded weights; its batch-norm buffers the model's."""
    recorder, _, out = recorded
    assert len(recorder.weights) == 4 * ITERATIONS
    by_hand = _ema_by_hand(recorder.initial, recorder.weights,
                           lambda t: 0.0 if t / ITERATIONS < EMA_WARMUP else EMA_DECAY)
    last = load_checkpoint(out / "last.pt")
    ema = {k: v for k, v in last["ema"].items() if k in by_hand[-1]}
    assert _same(ema, by_hand[-1])
    assert not _same(ema, recorder.weights[-1], atol=1e-4)  # the average is no copy
    buffers = [k for k in last["model"] if k not in by_hand[-1]]
    assert buffers and all(torch.equal(last["ema"][k], last["model"][k]) for k in buffers)


def test_each_epoch_validates_the_ema_with_the_selection_attack(recorded: Recorded) -> None:
    """Per epoch: a clean pass, then CW with the threat model's eps and eval step size and the
    `validation` section's cw_steps, both on the EMA as it stands after the epoch's last update
    (not the raw model); the epoch's score is the CW accuracy."""
    recorder, run, out = recorded
    by_hand = _ema_by_hand(recorder.initial, recorder.weights,
                           lambda t: 0.0 if t / ITERATIONS < EMA_WARMUP else EMA_DECAY)
    assert len(recorder.scored) == 2 * 4
    for epoch in range(4):
        (clean, clean_w), (attack, attack_w) = recorder.scored[2 * epoch: 2 * epoch + 2]
        assert clean.get("attack", "Natural") == "Natural"
        assert {k: attack[k] for k in ("attack", "eps", "step_size", "steps")} == {
            "attack": "CW", "eps": run.data["eps"], "step_size": run.data["eval_step_size"],
            "steps": run.validation["cw_steps"]}
        end = by_hand[(epoch + 1) * ITERATIONS - 1]
        assert _same(clean_w, end) and _same(attack_w, end)
        if epoch:  # from the second epoch the EMA lags the model
            assert not _same(clean_w, recorder.weights[(epoch + 1) * ITERATIONS - 1], atol=1e-4)
    rows = _log(out)
    assert all(row["score"] == row["val_cw"] for row in rows)
    assert any(row["val_cw"] != row["val_natural"] for row in rows)  # the test can tell them apart


def test_the_log_holds_each_epochs_learning_rate_and_mean_loss(recorded: Recorded) -> None:
    """4 epochs, warm-up w = 0.25 * 4 = 1: lr 0.1 times 1/2, then 0.5 (1 + cos(pi (e - 1) / 3))
    = 1, 3/4, 1/4: the rate each epoch trained with. The loss column is the mean of the epoch's
    update losses (to 6 decimals)."""
    recorder, _, out = recorded
    rows = _log(out)
    assert [float(r["lr"]) for r in rows] == pytest.approx([0.05, 0.1, 0.075, 0.025], rel=1e-12)
    for epoch, row in enumerate(rows):
        losses = recorder.losses[epoch * ITERATIONS:(epoch + 1) * ITERATIONS]
        assert float(row["loss"]) == pytest.approx(sum(losses) / ITERATIONS, abs=2e-6)


def test_every_epoch_draws_its_own_batches(recorded: Recorded) -> None:
    """The generator is seeded by (seed, epoch): the four epochs' labelled draws all differ."""
    recorder, _, _ = recorded
    draws = [torch.stack(epoch).tolist() for epoch in recorder.batches]
    assert len(draws) == 4 and all(draws[i] != draws[j] for i in range(4) for j in range(i))


def test_hm_selection_scores_the_harmonic_mean_of_clean_and_pgd_accuracy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """selection hm (the paper's text): PGD with the `validation` section's pgd_steps, and the
    score 2 n r / (n + r): clean 80 and PGD 40 give 53.33, not their mean 60."""
    run = _run("trades", epochs=2, selection="hm")
    calls: list[dict[str, Any]] = []

    def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, **kwargs: Any) -> float:
        calls.append(kwargs)
        return 80.0 if kwargs.get("attack", "Natural") == "Natural" else 40.0

    monkeypatch.setattr(trainer_module, "accuracy", accuracy)
    scores = trainer_module._validate(nn.Identity(), _data(), run)
    assert scores == {"val_natural": 80.0, "val_pgd": 40.0,
                      "score": pytest.approx(2 * 80 * 40 / 120, rel=1e-12)}
    assert {k: calls[1][k] for k in ("attack", "eps", "step_size", "steps")} == {
        "attack": "PGD", "eps": run.data["eps"], "step_size": run.data["eval_step_size"],
        "steps": run.validation["pgd_steps"]}


# --- Mean Teacher's teacher: a true average of the updates so far, capped by its decay ----------

def test_the_mean_teacher_decay_ramps_as_a_true_average_over_the_whole_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """decay_t = min(0.7 before rampup_epochs = 1, else 0.95; 1 - 1/(t + 1)), t counted over the
    whole run: 0, 1/2, 0.667, 0.7 in epoch 1, then 0.8, 0.833, 0.857, 0.875 (the cap 0.95 not yet
    reached) in epoch 2."""
    run = _run("mt", epochs=2, rampup_epochs=1, teacher_decay=0.7, teacher_decay_late=0.95)
    recorder = Recorder(monkeypatch)
    train(run, _data(unlabelled=32), tmp_path)

    def decay(t: int) -> float:
        return min(0.7 if t / ITERATIONS < 1 else 0.95, 1 - 1 / (t + 1))

    by_hand = _ema_by_hand(recorder.initial, recorder.weights, decay)
    ema = load_checkpoint(tmp_path / "last.pt")["ema"]
    assert _same({k: ema[k] for k in by_hand[-1]}, by_hand[-1])


# --- one update -----------------------------------------------------------------------------

class _SumLoss:
    """A method whose loss is the sum of the model's outputs: its gradient is the same every
    step (the column sums of the inputs for a bias-free linear model)."""

    def loss(self, model: nn.Module, batch: Batch, ctx: Any) -> tuple[torch.Tensor, dict]:
        return model(batch.x).sum(), {}


def test_an_update_starts_from_fresh_gradients_and_moves_the_ema_by_its_decay() -> None:
    """Two plain SGD steps (lr 0.1) of a gradient g: w0 - 0.2 g, not w0 - 0.3 g (gradients kept
    from step 1); the EMA at decay 0.75: 0.75 e + 0.25 w after each step (a model without
    buffers: update_ema once raised on the empty buffer list)."""
    model = nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, -2.0, 0.5]]))
    ema = make_ema(model)
    optimizer = SGD(model.parameters(), lr=0.1, momentum=0.0)
    x = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    g = x.sum(0)
    w0 = model.weight.detach().clone()
    for _ in range(2):
        trainer_module.train_step(_SumLoss(), model, model, optimizer, ema,
                                  Batch(x, x, torch.zeros(2, dtype=torch.long)), None,
                                  precision="fp32", ema_decay=0.75)
    w1, w2 = w0 - 0.1 * g, w0 - 0.2 * g
    assert torch.allclose(model.weight, w2, atol=1e-6)
    e1 = 0.75 * w0 + 0.25 * w1
    assert torch.allclose(ema.weight, 0.75 * e1 + 0.25 * w2, atol=1e-6)


def test_make_ema_is_a_frozen_copy_in_eval_mode_and_update_ema_lerps_the_weights() -> None:
    """make_ema: equal weights, eval mode, no gradient (the model keeps its own mode and
    gradients); update_ema(d = 0.75): 0.75 ema + 0.25 model for every parameter."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).train()
    ema = make_ema(model)
    assert not ema.training and model.training
    assert not any(p.requires_grad for p in ema.parameters())
    assert all(p.requires_grad for p in model.parameters())
    before = _params(ema)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    update_ema(ema, model, 0.75)
    now = _params(model)
    assert _same(_params(ema), {k: 0.75 * before[k] + 0.25 * now[k] for k in now})


# --- the schedule -----------------------------------------------------------------------------

def test_the_one_cycle_factor_at_known_epochs() -> None:
    """100 epochs, 2.5% warm-up (w = 2.5): 1/4, 2/4, 3/4 (docs: lr 0.025, 0.05, 0.075), then the
    cosine from w: epoch 3 just below 1, epoch 99 about 2.6e-4 (not 0: the last epoch trains).
    No warm-up: a plain cosine from 1, half way at epoch 5 of 10."""
    factor = one_cycle(100, 0.025)
    assert [factor(e) for e in range(3)] == pytest.approx([0.25, 0.5, 0.75], rel=1e-12)
    for epoch in (3, 50, 99):
        expected = 0.5 * (1 + math.cos(math.pi * (epoch - 2.5) / 97.5))
        assert factor(epoch) == pytest.approx(expected, rel=1e-12)
    assert 2e-4 < factor(99) < 3e-4
    plain = one_cycle(10, 0.0)
    assert plain(0) == 1.0 and plain(5) == pytest.approx(0.5, rel=1e-12)


# --- model selection with scripted validation scores ---------------------------------------------

def _scripted(monkeypatch: pytest.MonkeyPatch, scores: list[float]) -> None:
    """Replace the validation by `scores`, one per validation, in order."""
    queue: Iterator[float] = iter(scores)

    def validate(ema: nn.Module, data: TrainingData, run: RunConfig) -> dict[str, float]:
        score = next(queue)
        return {"val_natural": score, "score": score}

    monkeypatch.setattr(trainer_module, "_validate", validate)


def test_the_best_epoch_is_the_ema_of_the_later_tie_and_survives_a_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores 50, 70, 70, 60 with a kill after epoch 3: best.pt is epoch 3 (a tie goes to the
    later epoch), named 1-based, and holds that epoch's EMA (not its raw model); the resumed
    epoch 4 (60) does not displace it."""
    run = _run(epochs=4)
    _scripted(monkeypatch, [50.0, 70.0, 70.0, 60.0])
    saved: list[dict[str, Any]] = []  # every resume/last.pt state, copied
    real, kill = trainer_module.save_checkpoint, [True]

    def save(path: Path, state: dict[str, Any]) -> None:
        real(path, state)
        if path.name == "last.pt":
            saved.append(copy.deepcopy({k: state[k] for k in ("epoch", "ema", "model")}))
            if kill and state["epoch"] == 2:
                kill.clear()
                raise KeyboardInterrupt("killed after epoch 3")

    monkeypatch.setattr(trainer_module, "save_checkpoint", save)
    with pytest.raises(KeyboardInterrupt):
        train(run, _data(), tmp_path)
    summary = train(run, _data(), tmp_path)
    assert [s["epoch"] for s in saved] == [0, 1, 2, 3]  # resumed, not trained afresh
    assert summary["best_epoch"] == 3 and summary["best_score"] == 70.0
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == 3 and best["best"] == {"score": 70.0, "epoch": 3}
    third = saved[2]["ema"]
    assert all(torch.equal(best["ema"][k], third[k]) for k in third)
    assert not all(torch.equal(third[k], saved[2]["model"][k]) for k in saved[2]["model"])


def test_validation_every_n_epochs_and_after_the_last_selection_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """val_every 2 over 5 epochs: validated after epochs 2, 4 and 5 (the last); with selection
    `last` the final epoch is best whatever the scores (90, 50, 10). train_log.csv has every
    column any row has, empty where an epoch was not validated."""
    run = _run(epochs=5, val_every=2, selection="last")
    _scripted(monkeypatch, [90.0, 50.0, 10.0])
    summary = train(run, _data(), tmp_path)
    rows = _log(tmp_path)
    assert [r["epoch"] for r in rows if r["score"]] == ["2", "4", "5"]
    assert [r["score"] for r in rows] == ["", "90.0", "", "50.0", "10.0"]
    assert summary["best_epoch"] == 5 == load_checkpoint(tmp_path / "best.pt")["epoch"]


# --- what the trainer builds, and what a resume must match ---------------------------------------

def test_the_optimiser_is_nesterov_sgd_with_weight_decay_over_model_and_method() -> None:
    """params' lr, momentum, nesterov and weight decay reach SGD, which updates the classifier
    and the method's own parameters (WSCAT's projection heads); the initial weights depend on the
    run's seed."""
    run = _run("wscat", epochs=2)
    built = trainer_module._build(run, _data(unlabelled=32), torch.device("cpu"), None)
    cfg = run.training
    (group,) = built.optimizer.param_groups
    assert (group["lr"], group["momentum"], group["nesterov"], group["weight_decay"]) == (
        cfg["lr"], cfg["momentum"], True, cfg["weight_decay"])
    assert cfg["nesterov"] is True and cfg["weight_decay"] > 0
    heads = list(built.method.parameters())
    assert heads
    optimised = {id(p) for p in group["params"]}
    assert optimised == {id(p) for p in [*built.model.parameters(), *heads]}
    other = dataclasses.replace(run, seed=2)
    again = trainer_module._build(run, _data(unlabelled=32), torch.device("cpu"), None)
    seed2 = trainer_module._build(other, _data(unlabelled=32), torch.device("cpu"), None)
    assert _same(_params(again.model), _params(built.model), atol=0)
    assert not _same(_params(seed2.model), _params(built.model))


def test_the_resume_fingerprint_covers_the_validation_set_and_the_batch_shape() -> None:
    """Another validation set (best.pt is chosen on it), another labelled share per batch, or
    other normalisation: another fingerprint; the same data: the same one."""
    run = _run(epochs=2)
    base = trainer_module._fingerprint(run, _data(), {})
    assert trainer_module._fingerprint(run, _data(), {}) == base
    changed = [_data() for _ in range(3)]
    changed[0].validation_y = changed[0].validation_y.roll(1)
    changed[1].labelled_per_batch = 8
    changed[2].mean = (0.4,)
    assert all(trainer_module._fingerprint(run, data, {}) != base for data in changed)


def test_a_run_killed_before_its_first_validation_resumes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """val_every 2, killed after epoch 1: no best epoch yet, so no best.pt is needed; the rerun
    resumes at epoch 2 instead of training afresh."""
    run = _run(epochs=2, val_every=2)
    _scripted(monkeypatch, [50.0])
    real, epochs = trainer_module.save_checkpoint, []

    def save(path: Path, state: dict[str, Any]) -> None:
        real(path, state)
        if path.name == "last.pt":
            epochs.append(state["epoch"])
            if epochs == [0]:
                raise KeyboardInterrupt("killed after epoch 1")

    monkeypatch.setattr(trainer_module, "save_checkpoint", save)
    with pytest.raises(KeyboardInterrupt):
        train(run, _data(), tmp_path)
    assert not (tmp_path / "resume" / "best.pt").exists()
    capsys.readouterr()
    assert train(run, _data(), tmp_path)["best_epoch"] == 2
    assert epochs == [0, 1] and "resuming standard seed 1 from epoch 1" in capsys.readouterr().err


def test_a_finished_best_pt_stands_in_only_for_the_same_best_epoch(tmp_path: Path) -> None:
    """resume/best.pt lost: the finished best.pt beside resume/ is copied back only when it has
    resume/last.pt's fingerprint and best (score, epoch); another best or fingerprint is no
    stand-in (the rerun trains afresh)."""
    resume = tmp_path / "resume"
    resume.mkdir()
    save_checkpoint(tmp_path / "best.pt", {"ema": {"w": torch.ones(2)}, "epoch": 2,
                                           "best": {"score": 70.0, "epoch": 2},
                                           "meta": {"fingerprint": "f"}})

    def state(score: float, epoch: int, fingerprint: str = "f") -> dict[str, Any]:
        return {"best": {"score": score, "epoch": epoch}, "meta": {"fingerprint": fingerprint}}

    assert not run_folder.best_at_hand(state(90.0, 3), resume)
    assert not run_folder.best_at_hand(state(70.0, 2, "g"), resume)
    assert not (resume / "best.pt").exists()
    assert run_folder.best_at_hand(state(70.0, 2), resume)
    assert (resume / "best.pt").read_bytes() == (tmp_path / "best.pt").read_bytes()


def test_a_checkpoint_is_read_without_running_code_it_holds(tmp_path: Path) -> None:
    """A .pt whose pickle would call os.makedirs on load (any code, in a downloaded file) is
    refused by the safe load, and the call never happens."""
    marker = tmp_path / "the-file-ran-code"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.makedirs, (str(marker),))

    torch.save({"format": FORMAT, "meta": {}, "payload": Payload()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()


def test_non_finite_tensors_are_found_inside_lists_and_tuples_too() -> None:
    """nonfinite walks nested dicts and lists (its docstring): a NaN or inf tensor anywhere is
    named by its path; Python floats (a -inf best score) are not weights."""
    nan, inf = torch.tensor([float("nan")]), torch.tensor([1.0, float("inf")])
    state = {"a": [torch.zeros(1), nan], "b": ({"c": inf},), "best": float("-inf")}
    assert nonfinite(state) == ["a.1", "b.0.c"]


def test_a_checkpoint_of_another_width_or_training_is_refused(tmp_path: Path) -> None:
    """check_model compares the whole model spec (a width-16 CNN is no width-32 one; an older
    checkpoint without a spec only by name); check_trained_by refuses another training
    fingerprint but passes a checkpoint from before fingerprints were written."""
    path = tmp_path / "best.pt"
    meta = {"model": "cnn", "model_spec": {"architecture": "cnn", "width": 16}}
    check_model(path, meta, "cnn", {"architecture": "cnn", "width": 16})
    with pytest.raises(CheckpointError, match="width 16"):
        check_model(path, meta, "cnn", {"architecture": "cnn", "width": 32})
    check_model(path, {"model": "cnn"}, "cnn", {"architecture": "cnn", "width": 32})
    check_trained_by(path, {"training_fingerprint": "a" * 16}, "a" * 16)
    check_trained_by(path, {}, "a" * 16)  # older than the fingerprint: not checked
    with pytest.raises(ValueError, match="trained with other params"):
        check_trained_by(path, {"training_fingerprint": "b" * 16}, "a" * 16)


def test_a_parameter_without_a_gradient_this_step_stays_put() -> None:
    """zero_grad (torch's default, set_to_none) then a step whose loss leaves b out: b has no
    gradient, so neither weight decay nor momentum moves it (torch.optim.SGD skips it)."""
    a, b = nn.Parameter(torch.tensor([1.0])), nn.Parameter(torch.tensor([2.0]))
    optimizer = SGD([a, b], lr=0.1, momentum=0.9, weight_decay=0.1)
    (a * b).sum().backward()
    optimizer.step()
    after_first = b.detach().clone()
    optimizer.zero_grad()
    (3 * a).sum().backward()
    optimizer.step()
    assert b.grad is None and torch.equal(b.detach(), after_first)
