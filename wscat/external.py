"""A model from elsewhere (RobustBench's, an exported wscat entry, your own) under the paper's core
attack suite: Natural, FGSM, PGD-20, CW-20 and the official standard AutoAttack, with their
harmonic Mean, at a dataset's threat model and params.yaml's `evaluation` settings, on the images
the workflow's `evaluate` picks (`api.evaluate_model`)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wscat.api_checks import native
from wscat.attacks.mode import require_eval
from wscat.config import evaluation_for, short_attacks, training_for
from wscat.data.capacity import known_labels
from wscat.data.sources.base import to_unit
from wscat.evaluation import core_suite, decode_flags, stratified_order
from wscat.inference import model_device, outputs_of
from wscat.models import MODELS, LogitsOnly
from wscat.training.speed import autocast, backend_held, configure_backend


# C x H x W of the images of each fixed source (an npz's are its own: not checked).
IMAGE_SHAPES = {"digits": (1, 8, 8), "cifar10": (3, 32, 32), "cifar100": (3, 32, 32),
                "imagenet32": (3, 32, 32)}


@dataclass(frozen=True)
class ModelEvaluation:
    """Test accuracies (%) under each core attack and their harmonic Mean; the threat model's
    `eps` (the dataset's); how each attack was measured (`attacks`, as a metrics file's manifest
    has them); `indices`: the positions, in the images given, of the images attacked, in the
    order attacked (the first `evaluation.n_examples` of the class-stratified order); `correct`:
    per attack of the five, a bool per image, True where the model stays right, in that order
    over the images every attack saw (`indices[:len(correct["AA"])]`: all of them unless
    `evaluation.autoattack.n_examples` cuts AutoAttack's), as a metrics file's `per_image`."""

    accuracy: dict[str, float]
    eps: float
    attacks: dict[str, Any]
    indices: torch.Tensor
    correct: dict[str, torch.Tensor]


def check_image_size(dataset: str, cfg: dict[str, Any], image_shape: tuple[int, ...]) -> None:
    """Refuse images of another size than `dataset`'s source holds (its eps would be the wrong
    threat model). An npz dataset's size is not known without its file: not checked."""
    shape = IMAGE_SHAPES.get(cfg.get("source", dataset))
    if shape is not None and tuple(image_shape) != shape:
        raise ValueError(f"images are {' x '.join(map(str, image_shape))} (C x H x W), dataset "
                         f"'{dataset}' holds {' x '.join(map(str, shape))}: pass dataset= the "
                         "one the images come from (its eps is the threat model)")


def check_classes(dataset: str, cfg: dict[str, Any], num_classes: int) -> None:
    """Refuse a model of another number of classes than `dataset` has (where it is known without
    its files)."""
    known = known_labels(cfg, dataset)
    if known is not None and known[1] != num_classes:
        raise ValueError(f"the model has {num_classes} classes, dataset '{dataset}' {known[1]}: "
                         "pass dataset= the one the model was trained on")


class FeaturesLogits(nn.Module):
    """A logits-only model as the (features, logits) pair the attack suite reads; it has no
    features (None): only the logits are attacked. LogitsOnly's inverse."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[None, torch.Tensor]:
        return None, self.model(x)


def as_pair(model: nn.Module, probe: torch.Tensor) -> tuple[nn.Module, int]:
    """The model as (features, logits) (an exported entry: its wscat network) and its number of
    classes, read from its output on `probe` (one image). Only a wscat network's output is a
    (features, logits) pair: another model's tuple is refused, its order unknown (a (logits,
    aux) pair read as (features, logits) attacks the wrong output), as is any output that is not
    N x K float logits, a model that is not float32 and one through which no gradient reaches
    the images (the white-box attacks need it)."""
    if isinstance(model, LogitsOnly):
        model = model.model
    wide = [f"{p.dtype}" for p in model.parameters() if p.is_floating_point()
            and p.dtype != torch.float32]
    if wide:
        raise ValueError(f"model= has {wide[0]} parameters; the attacks run in float32 (bf16 "
                         "where evaluation.precision says so): pass model.float()")
    ours = isinstance(model, tuple(MODELS.values()))
    with torch.enable_grad():
        x = probe.detach().clone().requires_grad_(True)
        logits = _probe_logits(_run_probe(model, x), ours)
        if not logits.requires_grad or torch.autograd.grad(
                logits.sum(), x, allow_unused=True)[0] is None:
            raise ValueError("no gradient reaches the images through model= (a no_grad or "
                             "detach in its forward, or logits that do not depend on the "
                             "images); the white-box attacks need one")
    return (model if ours else FeaturesLogits(model)), logits.shape[1]


def check_logits_model(model: nn.Module, probe: torch.Tensor,
                       device: torch.device | None = None) -> None:
    """Refuse (ValueError, one line) a model whose predictions argmax cannot read, from its
    output on `probe` (one image): a wscat network gives (features, logits) and an exported one
    logits; another model must give N x K logits. Another model's tuple is refused, its order
    unknown (a (logits, aux) pair read as (features, logits) predicted from aux, silently). A
    model in train mode is not run (its batch norm would learn from the probe): predict refuses
    it."""
    if isinstance(model, (LogitsOnly, *MODELS.values())) or any(
            module.training for module in model.modules()):
        return
    place = device if device is not None else model_device(model)
    with torch.no_grad():
        _probe_logits(_run_probe(model, to_unit(probe).to(place)), ours=False)


def _run_probe(model: nn.Module, x: torch.Tensor) -> Any:
    """The model's output on the probe image; a forward that fails on it is one line."""
    try:
        return model(x)
    except (RuntimeError, ValueError, TypeError, IndexError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(f"model= fails on one of the images ({first}); pass images of the "
                         "size and layout it takes") from None


def _probe_logits(output: Any, ours: bool) -> torch.Tensor:
    """The logits of the probe's `output`: a wscat network's (features, logits) second part,
    another model's output itself, which must be 1 x K float logits (a tuple is refused)."""
    if isinstance(output, tuple) and not ours:
        raise ValueError(f"model= returns a tuple of {len(output)}, whose logits wscat cannot "
                         "tell; pass a module that returns the logits alone (N x K)")
    logits = output[1] if ours and isinstance(output, tuple) else output
    if not (isinstance(logits, torch.Tensor) and logits.ndim == 2 and len(logits) == 1
            and logits.shape[1] >= 2 and logits.is_floating_point()):
        raise ValueError("model= must map N images to N x K logits (K classes, at least 2), "
                         f"or be a wscat network; its output on one image is {_form(output)}")
    return logits


def _form(output: Any) -> str:
    if isinstance(output, torch.Tensor):
        return f"a {output.dtype} tensor of shape {tuple(output.shape)}"
    if isinstance(output, tuple):
        return f"a tuple of {len(output)}"
    return f"a {type(output).__name__}"


def checked_labels(labels: Any, n_images: int, num_classes: int) -> torch.Tensor:
    """The labels as an int64 CPU tensor of one class in 0..num_classes-1 per image; anything
    else refused in one line saying what to pass."""
    if isinstance(labels, np.ndarray):
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels are a numpy array of {labels.dtype}; pass integers, one "
                             "class per image")
        labels = torch.from_numpy(np.ascontiguousarray(native(labels)))
    elif not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels= takes a torch.Tensor or a numpy array of class indices, not "
                         f"{type(labels).__name__}")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"labels are {labels.dtype}; pass integers, one class per image")
    if labels.ndim != 1 or len(labels) != n_images:
        raise ValueError(f"labels are {tuple(labels.shape)} for {n_images} images; pass one "
                         "class index per image (shape (N,))")
    labels = labels.to("cpu", torch.int64)
    if len(labels) and not (0 <= int(labels.min()) and int(labels.max()) < num_classes):
        raise ValueError(f"labels run from {int(labels.min())} to {int(labels.max())}; the "
                         f"model has {num_classes} classes, 0..{num_classes - 1}")
    return labels


def evaluate(model: nn.Module, images: torch.Tensor, labels: Any, *, params: dict[str, Any],
             dataset: str, seed: int, shard_dir: Path | None = None) -> ModelEvaluation:
    """The core suite on the model's device (images: N x C x H x W, uint8 or [0,1] floats, checked
    by the caller). The PGD and CW random starts are drawn from `seed`, as a run's are from its
    seed; the attacked images are the first `evaluation.n_examples` of the class-stratified
    order of `evaluation.subset_seed` (given a split's test set, those its metrics measured).
    Gradients are on inside, whatever the caller's grad mode; torch's random state (AutoAttack
    seeds it) and numeric switches (TF32, deterministic kernels) are the caller's again after;
    attacks too short to reach eps are warned of (UserWarning), as `wscat evaluate` warns.
    Finished AutoAttack shards are kept in `shard_dir` (a killed call given it again resumes;
    wscat.attacks.shards)."""
    if torch.is_inference_mode_enabled():
        raise ValueError("evaluate_model runs attacks, which need gradients: call it outside "
                         "torch.inference_mode()")
    require_eval(model, error=ValueError,
                 message="the model is in train mode: its batch norm would attack with each "
                         "batch's statistics and change its own; call model.eval() first")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            torch.enable_grad(), backend_held():
        # As `wscat evaluate` computes (TF32, the dataset's deterministic kernels; a dataset
        # with no training section, evaluated only: deterministic), the caller's switches back
        # after (speed.backend_held).
        training = training_for(params, dataset) if dataset in params["training"] else {}
        configure_backend(device, deterministic=training.get("deterministic", True))
        result = _evaluate(model, images, labels, params=params, dataset=dataset, seed=seed,
                           device=device, shard_dir=shard_dir)
    warning = short_attacks(params, dataset, "evaluation", ("PGD", "CW"))
    if warning:  # "warning: on digits, ...": the category says it already
        warnings.warn(warning.removeprefix("warning: "), stacklevel=3)
    return result


def _evaluate(model: nn.Module, images: torch.Tensor, labels: Any, *, params: dict[str, Any],
              dataset: str, seed: int, device: torch.device, shard_dir: Path | None
              ) -> ModelEvaluation:
    if not len(images):
        raise ValueError("images hold no image; pass the test images to attack (N x C x H x W)")
    threat = params["datasets"][dataset]
    check_image_size(dataset, threat, tuple(images.shape[1:]))
    pair, num_classes = as_pair(model, to_unit(images[:1].to(device)))
    check_classes(dataset, threat, num_classes)
    labels = checked_labels(labels, len(images), num_classes)
    evaluation = evaluation_for(params, dataset)
    order = stratified_order(labels, evaluation["subset_seed"])
    if evaluation["n_examples"] is not None:
        order = order[: evaluation["n_examples"]]
    x, y = to_unit(images[order].to(device)), labels[order].to(device)
    with autocast(device, evaluation["precision"]), outputs_of("model=", "images given"):
        suite = core_suite(pair, x, y, eps=threat["eps"], step_size=threat["eval_step_size"],
                           evaluation=evaluation, seed=seed, test_set_size=len(images),
                           shard_dir=shard_dir)
    correct = {name: decode_flags(flags) for name, flags in suite.per_image.items()}
    return ModelEvaluation(accuracy={k: round(v, 4) for k, v in suite.accuracy.items()},
                           eps=threat["eps"], attacks=suite.attacks, indices=order,
                           correct=correct)
