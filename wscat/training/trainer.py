"""The shared trainer. Each method supplies its loss; the trainer owns everything else.

Randomness is drawn from a generator seeded by (seed, epoch), so a run killed after epoch k and
resumed from its last checkpoint continues bit for bit as if it had never stopped.

Per-epoch metrics go to train_log.csv and to DVCLive curves (`wscat.training.log`).
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from wscat.checkpoint import load_checkpoint, save_checkpoint
from wscat.config import RunConfig
from wscat.data import augment, iterations_per_epoch, sample_batch_indices, to_unit
from wscat.data.sampler import labelled_per_batch
from wscat.data.training_data import TrainingData
from wscat.evaluation import accuracy, harmonic_mean
from wscat.inference import NonFiniteOutputs
from wscat.methods import Batch, Method, StepContext, build_method
from wscat.models import build_model
from wscat.training.ema import make_ema, update_ema
from wscat.training.log import log_epoch, open_curves
from wscat.training import run_folder
from wscat.training.run_folder import check_run_folder
from wscat.training.schedule import make_scheduler
from wscat.training import threads
from wscat.optim import SGD
from wscat import own_method
from wscat.provenance import code_digest
from wscat.progress import progress
from wscat.training.speed import (Precision, autocast, begin_graph_step, configure_backend,
                                  prepare_model, uses_cuda_graphs)


def _fingerprint(run: RunConfig, data: TrainingData, meta: dict[str, Any]) -> str:
    """What a resume/last.pt must have been made with to be resumed: the run's config, the
    training its step names (meta's training_fingerprint: its labelers' trainings, your own
    method's code), your method's code itself, and the training data's every image and label
    (pseudo-labels of a retrained labeler included). Anything else starts afresh; the test-time
    attacks (`evaluation`, which the training never reads) may change in between."""
    digest = hashlib.sha256()
    for tensor in (data.labelled_x, data.labelled_y, data.unlabelled_x, data.unlabelled_y,
                   data.validation_x, data.validation_y):
        digest.update(str((tensor.dtype, tuple(tensor.shape))).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    objective = run.method_params["objective"]
    code = own_method.digest(objective) if own_method.is_own(objective) else None
    shape = [data.n_train, data.labelled_per_batch, data.num_classes, data.mean, data.std]
    trained_with = {k: v for k, v in asdict(run).items() if k != "evaluation"}  # test-time only
    blob = json.dumps([trained_with, shape, digest.hexdigest(), code,
                       meta.get("training_fingerprint")], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _epoch_generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def _validate(ema: torch.nn.Module, data: TrainingData, run: RunConfig) -> dict[str, float]:
    """Validation score of the EMA model under the method's selection criterion. Logits that
    hold NaN or inf (clean, or the attack's final ones) raise NonFiniteOutputs: argmax would
    score them as class 0."""
    selection = run.method_params["selection"]
    x, y = data.validation_x, data.validation_y
    ema.eval()
    natural = accuracy(ema, x, y, finite=True)
    scores = {"val_natural": natural}
    attack = {"cw": "CW", "hm": "PGD"}.get(selection)
    if attack:
        steps = run.validation["cw_steps" if attack == "CW" else "pgd_steps"]
        robust = accuracy(ema, x, y, attack=attack, eps=run.data["eps"],
                          step_size=run.data["eval_step_size"], steps=steps, finite=True,
                          generator=torch.Generator().manual_seed(run.seed))
        scores[f"val_{attack.lower()}"] = robust
        scores["score"] = robust if selection == "cw" else harmonic_mean([natural, robust])
    else:
        scores["score"] = natural
    return scores


def train_step(method: Method, step_model: torch.nn.Module, model: torch.nn.Module,
               optimizer: torch.optim.Optimizer, ema: torch.nn.Module, batch: Batch,
               ctx: StepContext, *, precision: Precision, ema_decay: float,
               ema_buffers: str = "copy", cuda_graphs: bool = False
               ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One update: the method's loss (its attack inside) under autocast, SGD, EMA (its buffers
    copied or averaged: `ema_buffers`).

    `step_model` is what the loss calls (maybe compiled, channels_last); `model` owns the weights
    the EMA follows. `cuda_graphs`: the step model replays CUDA graphs, so the step is marked as
    one (`begin_graph_step`). No host synchronisation: the loss comes back as a device tensor.
    """
    if cuda_graphs:
        begin_graph_step()
    with autocast(batch.x.device, precision):
        loss, stats = method.loss(step_model, batch, ctx)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    update_ema(ema, model, ema_decay, average_buffers=ema_buffers == "average")
    return loss.detach(), stats


class TrainingDiverged(ValueError):
    """A step's loss or gradients, or the EMA model's validation outputs, became NaN or infinite;
    the message names the epoch (and the step)."""


def step_is_finite(loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """(loss finite, every gradient finite) of the step just taken, as a device tensor of two
    booleans: no host synchronisation (the trainer reads the flags once an epoch). The gradients
    are judged by their total norm: NaN or inf in any of them makes it so (as does a norm beyond
    float range, which only a diverged step reaches). Reading them changes nothing: a run's
    weights are bit for bit those without the check."""
    grads = [p.grad for group in optimizer.param_groups for p in group["params"]
             if p.grad is not None]
    norms = torch.nn.utils.get_total_norm(grads, error_if_nonfinite=False) if grads else loss
    return torch.stack([torch.isfinite(loss).all(), torch.isfinite(norms).all()])


def _check_finite(flags: torch.Tensor, run: RunConfig, epoch: int) -> None:
    """Stop the run at the first step whose loss or gradients were not finite (`flags`: one row
    of (loss, gradients) per step). Nothing of this epoch is saved: resume/ keeps the last good
    epoch's checkpoints, and no NaN model is ever written."""
    if bool(flags.all()):  # the epoch's one synchronisation, beside the mean losses'
        return
    step, which = (int(i) for i in (~flags).nonzero()[0])
    what = "loss" if which == 0 else "gradients"
    if epoch == 0 and step == 0:  # no update yet: the step size cannot be the cause
        objective = run.method_params["objective"]
        check = (f"your method's loss ({objective}) on one batch"
                 if own_method.is_own(objective) else f"methods.{run.method}'s knobs and the data")
        raise TrainingDiverged(
            f"training {run.method} seed {run.seed} failed at its first step, before any "
            f"update: its {what} was NaN or infinite on the initial weights, so the learning "
            f"rate is not the cause; no checkpoint was written; check {check}")
    raise TrainingDiverged(
        f"training {run.method} seed {run.seed} diverged at epoch {epoch + 1}, step {step + 1} "
        f"of {len(flags)}: its {what} became NaN or infinite; {_kept_and_advice(run, epoch)}")


def _diverged_outputs(error: NonFiniteOutputs, run: RunConfig, epoch: int) -> TrainingDiverged:
    """The stop for an EMA model whose validation logits (`error`) hold NaN or inf after epoch
    `epoch` (0-based): as for a diverged step, nothing of that epoch is saved."""
    under = "" if error.attack == "Natural" else f" under {error.attack}"
    return TrainingDiverged(
        f"training {run.method} seed {run.seed} diverged at epoch {epoch + 1}: its EMA model's "
        f"outputs are NaN or inf on {error.bad} of {error.total} validation images{under}; "
        f"{_kept_and_advice(run, epoch)}")


def _kept_and_advice(run: RunConfig, epoch: int) -> str:
    """What a run stopped in epoch `epoch` (0-based) keeps, and what to change."""
    kept = (f"resume/last.pt (epoch {epoch}) is kept" if epoch else
            "no checkpoint was written")
    return f"{kept}; lower training.{run.dataset}.lr (now {run.training['lr']}) and rerun"


@dataclass
class _Training:
    """What a run trains (classifier, method, optimiser, schedule, EMA) and the meta its
    checkpoints carry; `epoch`, `best` and `history` say where it stands."""

    model: torch.nn.Module
    method: Method
    optimizer: torch.optim.Optimizer
    scheduler: Any
    ema: torch.nn.Module
    meta: dict[str, Any]
    epoch: int = 0  # the first epoch still to train
    best: dict[str, Any] = field(default_factory=lambda: {"score": float("-inf"), "epoch": -1})
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Pool:
    """The training tensors on the device (uint8 for the big datasets: 4x less memory); a batch
    is gathered and converted there, so the inner loop never waits on the host."""

    labelled_x: torch.Tensor
    labelled_y: torch.Tensor
    unlabelled_x: torch.Tensor
    unlabelled_y: torch.Tensor
    device: torch.device
    iterations: int
    labelled_per_batch: int

    def draw(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """An epoch's (labelled, unlabelled) batch indices, one row per iteration, on the device."""
        batches = sample_batch_indices(len(self.labelled_x), len(self.unlabelled_x),
                                       iterations=self.iterations, batch_size=batch_size,
                                       n_labelled_per_batch=self.labelled_per_batch,
                                       generator=generator)
        labelled = torch.stack([li for li, _ in batches]).to(self.device)  # one copy an epoch
        return labelled, torch.stack([ui for _, ui in batches]).to(self.device)

    def batch(self, li: torch.Tensor, ui: torch.Tensor, channels_last: bool
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """Images in [0,1] (training memory format) and labels (unlabelled: pseudo-label or -1)."""
        if len(self.unlabelled_x):
            x = torch.cat([self.labelled_x[li], self.unlabelled_x[ui]])
            y = torch.cat([self.labelled_y[li], self.unlabelled_y[ui]])
        else:
            x, y = self.labelled_x[li], self.labelled_y[li]
        return to_unit(x, channels_last), y


def _pool(data: TrainingData, cfg: dict[str, Any], device: torch.device) -> _Pool:
    """`data` on `device`; its validation set is moved there too, in [0,1]."""
    x_l, y_l = data.labelled_x.to(device), data.labelled_y.to(device)
    x_u, y_u = data.unlabelled_x.to(device), data.unlabelled_y.to(device)
    data.validation_x = to_unit(data.validation_x.to(device))
    data.validation_y = data.validation_y.to(device)
    n_lpb = labelled_per_batch(len(x_l), len(x_u), cfg["batch_size"],
                               data.labelled_per_batch or cfg["labelled_per_batch"])
    return _Pool(x_l, y_l, x_u, y_u, device, iterations_per_epoch(data.n_train, cfg["batch_size"]),
                 n_lpb)


def _build(run: RunConfig, data: TrainingData, device: torch.device,
           meta: dict[str, Any] | None) -> _Training:
    """The classifier and the method (seeded by run.seed), SGD + Nesterov, the schedule, the EMA."""
    cfg = run.training
    configure_backend(device, deterministic=cfg["deterministic"])
    torch.manual_seed(run.seed)
    in_channels = data.labelled_x.shape[1]
    model = build_model(**run.model_spec, in_channels=in_channels, num_classes=data.num_classes,
                        mean=data.mean, std=data.std).to(device)
    method = build_method(run.method_params, feature_dim=model.feature_dim,
                          num_classes=data.num_classes,
                          image_shape=tuple(data.labelled_x.shape[1:])).to(device)
    parameters = list(model.parameters()) + list(method.trainable_parameters())
    optimizer = SGD(parameters, lr=cfg["lr"], momentum=cfg["momentum"], nesterov=cfg["nesterov"],
                    weight_decay=cfg["weight_decay"])
    scheduler = make_scheduler(optimizer, cfg["epochs"], cfg["warmup_fraction"])
    ema = make_ema(model)
    meta = {**(meta or {}), "model": run.model, "model_spec": dict(run.model_spec),
            "in_channels": in_channels,
            "num_classes": data.num_classes, "mean": list(data.mean), "std": list(data.std),
            "dataset": run.dataset, "method": run.method, "seed": run.seed,
            "fingerprint": _fingerprint(run, data, meta or {}),
            "code_sha256": code_digest(),  # checked on resume, beside the fingerprint
            **threads.training_record(device)}  # not in the fingerprint: older runs stay valid
    return _Training(model, method, optimizer, scheduler, ema, meta)


def _resume(training: _Training, resume_dir: Path, run: RunConfig, device: torch.device) -> None:
    """Continue from resume/last.pt when the same params made it and its best epoch's checkpoint
    is at hand (`run_folder.best_at_hand`); otherwise start afresh. Into a job's log (stderr
    not a terminal), which the rerun began afresh, it prints the epochs done again first."""
    if not (resume_dir / "last.pt").is_file():
        return
    state = load_checkpoint(resume_dir / "last.pt", map_location=device)
    if state["meta"]["fingerprint"] != training.meta["fingerprint"]:
        print("ignoring resume/last.pt: it was made with other params, data, labels or method "
              "code (its fingerprint differs)", file=sys.stderr)
        return
    code = state["meta"].get("code_sha256")  # None: saved before it was recorded
    if code is not None and code != training.meta["code_sha256"]:
        there = state["meta"].get("versions", {}).get("git", "unknown")
        now = training.meta.get("versions", {}).get("git", "unknown")
        done = state["epoch"] + 1
        span = "epoch 1" if done == 1 else f"epochs 1-{done}"
        print(f"ignoring resume/last.pt: its {span} ran on other wscat code (git {there}; this "
              f"is {now}); training {run.method} seed {run.seed} afresh (to continue instead, "
              "run the code that trained them)", file=sys.stderr)
        return
    if not run_folder.best_at_hand(state, resume_dir):
        print(f"ignoring resume/last.pt: resume/best.pt, the checkpoint of its best epoch "
              f"({state['best']['epoch']}), is missing; training {run.method} seed {run.seed} "
              "afresh", file=sys.stderr)
        return
    training.model.load_state_dict(state["model"])
    training.ema.load_state_dict(state["ema"])
    training.method.load_state_dict(state["method"])
    training.optimizer.load_state_dict(state["optimizer"])
    training.scheduler.load_state_dict(state["scheduler"])
    training.epoch, training.best = state["epoch"] + 1, state["best"]
    training.history = state["history"]
    print(f"resuming {run.method} seed {run.seed} from epoch {training.epoch}", file=sys.stderr)
    if not sys.stderr.isatty():  # a job's log, which its rerun began afresh: the epochs done
        for row in training.history:
            print(f"{_row_text(row)} | {row['epoch']}/{run.training['epochs']} epochs, from "
                  "resume/last.pt", file=sys.stderr)
    record, changed = threads.resumed_record(state["meta"].get(threads.KEY), training.epoch,
                                             device, f"{run.method} seed {run.seed}")
    training.meta.pop(threads.KEY, None)
    training.meta.update(record)  # its epochs' CPU threads so far, then this process's
    if changed:
        print(changed, file=sys.stderr)


def _ema_decay(method: Method, progress: float, step: int, cfg: dict[str, Any]) -> float:
    """The EMA decay of update `step` (0-based, over the whole run) at `progress` epochs."""
    decay = method.ema_decay(progress)
    if decay is None:  # the released code: copy during the warm-up, then average
        return 0.0 if progress < cfg["ema_warmup_epochs"] else cfg["ema_decay"]
    return min(decay, 1.0 - 1.0 / (step + 1))  # Mean Teacher: a true average of the steps so far


def _one_epoch(training: _Training, step_model: torch.nn.Module, pool: _Pool, run: RunConfig,
               epoch: int) -> dict[str, Any]:
    """Epoch `epoch`'s updates, every draw from the (seed, epoch) generator, then the schedule's
    step; returns the epoch's history row (learning rate, mean losses)."""
    cfg, threat, iterations = run.training, run.data, pool.iterations
    generator = _epoch_generator(run.seed, epoch)
    # Augmentation and attack noise are drawn on the device (CPU: the same generator).
    step_generator = generator if pool.device.type == "cpu" else torch.Generator(
        device=pool.device).manual_seed(run.seed * 1_000_003 + epoch)
    training.model.train()
    training.method.train()
    totals: dict[str, torch.Tensor] = {}
    finite = torch.ones(iterations, 2, dtype=torch.bool, device=pool.device)
    labelled_idx, unlabelled_idx = pool.draw(cfg["batch_size"], generator)
    graphs = uses_cuda_graphs(cfg["compile"], cfg.get("compile_mode", "default"))

    def view(x: torch.Tensor) -> torch.Tensor:
        return to_unit(augment(x, **threat["augment"], generator=step_generator),
                       cfg["channels_last"])

    for it in range(iterations):
        x_raw, labels = pool.batch(labelled_idx[it], unlabelled_idx[it], cfg["channels_last"])
        progress = epoch + it / iterations
        ctx = StepContext(eps=threat["eps"], step_size=threat["train_step_size"],
                          steps=threat["train_steps"], generator=step_generator,
                          ema_model=training.ema, progress=progress, augment=view)
        decay = _ema_decay(training.method, progress, epoch * iterations + it, cfg)
        loss, stats = train_step(training.method, step_model, training.model, training.optimizer,
                                 training.ema, Batch(view(x_raw), x_raw, labels), ctx,
                                 precision=cfg["precision"], ema_decay=decay,
                                 ema_buffers=cfg.get("ema_buffers", "copy"), cuda_graphs=graphs)
        finite[it] = step_is_finite(loss, training.optimizer)
        for key, value in {"loss": loss, **stats}.items():
            totals[key] = totals.get(key, 0.0) + value.float()
    _check_finite(finite, run, epoch)
    row: dict[str, Any] = {"epoch": epoch + 1, "lr": training.optimizer.param_groups[0]["lr"]}
    row.update({k: round(float(v) / iterations, 6) for k, v in totals.items()})
    training.scheduler.step()
    return row


def _select_and_save(training: _Training, row: dict[str, Any], run: RunConfig,
                     data: TrainingData, *, resume_dir: Path, curves: Any, started: float) -> None:
    """Validate the EMA every val_every epochs and after the last; keep the best epoch under the
    method's selection criterion in resume/best.pt; log the row; checkpoint resume/last.pt."""
    cfg, epoch = run.training, row["epoch"] - 1
    last_epoch = epoch + 1 == cfg["epochs"]
    if (epoch + 1) % cfg["val_every"] == 0 or last_epoch:
        try:
            scores = _validate(training.ema, data, run)
        except NonFiniteOutputs as error:  # stopped before anything of this epoch is saved
            raise _diverged_outputs(error, run, epoch) from None
        row.update({k: round(v, 4) for k, v in scores.items()})
        score = float(epoch) if run.method_params["selection"] == "last" else row["score"]
        if score >= training.best["score"]:  # ties go to the later, better-settled epoch
            training.best = {"score": score, "epoch": epoch + 1}
            save_checkpoint(resume_dir / "best.pt", {
                "ema": training.ema.state_dict(), "epoch": epoch + 1,
                "method": training.method.state_dict(), "best": training.best,
                "meta": training.meta})
    row["seconds"] = round(time.perf_counter() - started, 3)
    training.history.append(row)
    log_epoch(curves, row)
    save_checkpoint(resume_dir / "last.pt", {
        "model": training.model.state_dict(), "ema": training.ema.state_dict(),
        "method": training.method.state_dict(), "optimizer": training.optimizer.state_dict(),
        "scheduler": training.scheduler.state_dict(), "epoch": epoch, "best": training.best,
        "history": training.history, "meta": training.meta})


def _row_text(row: dict[str, Any]) -> str:
    """An epoch's row as `key=value` pairs, its learning rate to 4 significant digits."""
    return " ".join(f"{k}={v:.4g}" if k == "lr" else f"{k}={v}" for k, v in row.items())


def _show(bar: Any, row: dict[str, Any], total: int, times: list[float]) -> None:
    """An epoch's row on the progress bar, or as a log line when stderr is not a terminal (a job's
    log): the row (its learning rate to 4 significant digits; train_log.csv and the curves keep
    it exact), then how far the run is and about how long it has left (wscat.progress)."""
    message = _row_text(row)
    if bar.disable:
        print(f"{message} | {progress(row['epoch'], total, 'epochs', times)}", file=sys.stderr,
              flush=True)
    else:
        bar.set_postfix_str(message[:120])


def train(run: RunConfig, data: TrainingData, out_dir: str | Path, *,
          device: torch.device | str = "cpu", meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train `run.method`; write best.pt, last.pt and train_log.csv into `out_dir`.

    While training, the last and best checkpoints live in out_dir/resume/; a rerun of the same
    configuration resumes from there. Trained again into a finished run's folder, the old
    best.pt, last.pt, train_log.csv and dvclive/ stay until the new run ends. A folder that
    holds another run's checkpoints is refused before anything in it (dvclive/ included) is
    touched (`check_run_folder`). Returns the final summary (best epoch and score).
    """
    out_dir, device = Path(out_dir), torch.device(device)
    made_here = not out_dir.exists()  # removed again if the run stops before its first epoch
    check_run_folder(out_dir, dataset=run.dataset, model=run.model, method=run.method,
                     seed=run.seed)
    resume_dir, cfg = out_dir / "resume", run.training
    training = _build(run, data, device, meta)
    _resume(training, resume_dir, run, device)
    curves_dir = run_folder.curves_dir(out_dir, resume_dir)
    curves = open_curves(curves_dir, training.history)
    pool = _pool(data, cfg, device)
    step_model = prepare_model(training.model, channels_last=cfg["channels_last"],
                               compile=cfg["compile"],
                               mode=cfg.get("compile_mode", "default"))
    bar = tqdm(range(training.epoch, cfg["epochs"]), desc=f"{run.method} seed {run.seed}",
               initial=training.epoch, total=cfg["epochs"], disable=not sys.stderr.isatty())
    times: list[float] = []  # this process's epochs, for the time left
    try:
        for epoch in bar:
            started = time.perf_counter()
            row = _one_epoch(training, step_model, pool, run, epoch)
            _select_and_save(training, row, run, data, resume_dir=resume_dir, curves=curves,
                             started=started)
            times.append(time.perf_counter() - started)
            _show(bar, row, cfg["epochs"], times)
    except BaseException:
        if not training.history:  # stopped before its first epoch was logged: no curve to keep
            run_folder.drop_empty_curves(curves_dir, out_dir, made_here)
        raise
    run_folder.finish(out_dir, resume_dir, training.history)
    return {"best_epoch": training.best["epoch"], "best_score": training.best["score"],
            "epochs": cfg["epochs"]}
