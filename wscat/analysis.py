"""What the paper's embedding figures and the beta-tuning rule measure on trained checkpoints.

- Fig-similarity (RQ2): cos(f(x), f(x')) between natural and adversarial embeddings, for the
  AEs of TRADES (max KL(C(x)||C(x')), also DMAT's and RST's), RLFAT (TRADES' AE, block-shuffled)
  and WSCAT (Eq. 8, `Wscat.attack`), all on the same natural data and model.
- Fig-feature (RQ3): 2-D t-SNE of training embeddings f(x).
- The validation numbers of the beta-tuning rule: natural and PGD accuracy on the validation
  set and their harmonic mean.
The analysis step (wscat.steps.analyse) writes the first two to files the figures read.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from wscat.checkpoint import CheckpointError, load_checkpoint
from wscat.config import SIMILARITY_OBJECTIVES
from wscat.errors import first_line
from wscat.evaluation import accuracy, harmonic_mean
from wscat.methods import StepContext, build_method
from wscat.methods.rlfat import random_block_shuffle
from wscat.methods.trades import trades_attack
from wscat.methods.wscat import Wscat, positive_labels


def attack_context(threat: dict[str, Any], generator: torch.Generator) -> StepContext:
    """The training attack's threat model of a dataset entry (`train_steps` of `train_step_size`:
    PGD-10 at eps/4 on CIFAR)."""
    return StepContext(eps=threat["eps"], step_size=threat["train_step_size"],
                       steps=threat["train_steps"], generator=generator, ema_model=None,
                       progress=0.0, augment=lambda t: t)


def wscat_heads(checkpoint: str, method_params: dict[str, Any], feature_dim: int,
                num_classes: int, image_shape: tuple[int, ...], device: torch.device) -> Wscat:
    """The projection heads trained with a WSCAT checkpoint (needed by its attack's l_con)."""
    method = build_method(method_params, feature_dim=feature_dim, num_classes=num_classes,
                          image_shape=image_shape)
    if not isinstance(method, Wscat):
        raise ValueError(f"{checkpoint}: Fig-similarity's model must be trained by a WSCAT "
                         "method (its attack needs the projection heads)")
    state = load_checkpoint(checkpoint, map_location=device)
    if "method" not in state:
        raise ValueError(f"{checkpoint} holds no projection heads (trained before wscat saved "
                         "them with the best checkpoint); retrain it")
    try:
        method.load_state_dict(state["method"])
    except (RuntimeError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{checkpoint}: its projection heads do not fit the method "
                              f"params.yaml configures ({first_line(error)}); retrain it") \
            from error
    return method.to(device).eval()


def wscat_examples(model: nn.Module, heads: Wscat, x: torch.Tensor, ctx: StepContext
                   ) -> torch.Tensor:
    """WSCAT's AE (Eq. 8) on a model in eval mode: positives from the model's own predictions."""
    with torch.no_grad():
        features, logits = model(x)
        z = heads.head_natural(features)
    classes = positive_labels(heads.positives, logits, torch.full_like(logits[:, 0], -1).long())
    return heads.attack(model, x, logits, z, classes, ctx)


def adversarial_examples(objective: str, model: nn.Module, x: torch.Tensor, ctx: StepContext, *,
                         heads: Wscat | None, blocks: int = 2, batch_size: int | None = None
                         ) -> torch.Tensor:
    """The AE a method's inner maximisation makes, by its objective, with `model` in eval mode,
    on batches of `batch_size` images in order (None: all at once), as in training: WSCAT's l_con
    (Eq. 7) sums over the current batch, not the whole set (Sec. 4.1.3), and a batch of the
    paper tier's 10,000 images at once would not fit in a GPU's memory."""
    if objective not in SIMILARITY_OBJECTIVES:
        raise ValueError(f"Fig-similarity compares AEs of TRADES-, RLFAT- and WSCAT-type "
                         f"methods, not objective '{objective}'")
    size = len(x) if batch_size is None else batch_size
    return torch.cat([_examples(objective, model, x[i:i + size], ctx, heads, blocks)
                      for i in range(0, len(x), size)])


def _examples(objective: str, model: nn.Module, x: torch.Tensor, ctx: StepContext,
              heads: Wscat | None, blocks: int) -> torch.Tensor:
    """adversarial_examples on one batch."""
    if objective == "wscat":
        return wscat_examples(model, heads, x, ctx)
    x_adv = trades_attack(model, x, ctx)
    model.eval()  # trades_attack leaves the model in train mode
    return random_block_shuffle(x_adv, blocks, ctx.generator) if objective == "rlfat" else x_adv


def cosine_similarity(model: nn.Module, x: torch.Tensor, x_adv: torch.Tensor) -> np.ndarray:
    """cos(f(x), f(x')) per sample, the embeddings taken in batches (`features`)."""
    return F.cosine_similarity(torch.from_numpy(features(model, x)),
                               torch.from_numpy(features(model, x_adv))).numpy()


@torch.no_grad()
def features(model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> np.ndarray:
    """The embeddings f(x), flattened, in batches."""
    return torch.cat([model(x[i:i + batch_size])[0].flatten(1).cpu()
                      for i in range(0, len(x), batch_size)]).numpy()


def tsne(embeddings: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D t-SNE (scikit-learn, PCA initialisation, fixed seed)."""
    from sklearn.manifold import TSNE

    perplexity = min(30.0, (len(embeddings) - 1) / 3)
    return TSNE(n_components=2, init="pca", random_state=seed, perplexity=perplexity
                ).fit_transform(embeddings.astype(np.float64))


def validation_accuracies(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                          step_size: float, steps: int, batch_size: int, seed: int,
                          finite: bool = False) -> dict[str, float]:
    """Natural and PGD accuracy (%) on the validation set and their harmonic mean (Fig-beta's
    tuning rule). The model must be in eval mode. With `finite`, clean or adversarial logits
    that hold NaN or inf are refused (wscat.evaluation.correct). The PGD start is drawn from a
    CPU generator, as the trainer's validation draws it, so on a GPU too the numbers are the
    train log's for the same checkpoint (and do not depend on how the images are batched)."""
    generator = torch.Generator().manual_seed(seed)
    natural = accuracy(model, x, y, batch_size=batch_size, finite=finite)
    robust = accuracy(model, x, y, attack="PGD", eps=eps, step_size=step_size, steps=steps,
                      batch_size=batch_size, generator=generator, finite=finite)
    return {"Natural": round(natural, 4), "PGD": round(robust, 4),
            "HM": round(harmonic_mean([natural, robust]), 4)}
