"""Training methods, one module each; variants (RST, DMAT, WSCAT-sup, -fixed, -self, -std) are
configuration, not copies."""
from __future__ import annotations

from typing import Any

from wscat.methods.base import Batch, Method, StepContext
from wscat.methods.mean_teacher import MeanTeacher
from wscat.methods.puat import Puat
from wscat.methods.rlfat import Rlfat
from wscat.methods.standard import Standard
from wscat.methods.trades import Trades
from wscat.methods.wscat import Wscat

# How the paper's tables name each configured method.
DISPLAY_NAMES = {"standard": "Standard", "trades": "TRADES", "rlfat": "RLFAT", "dmat": "DMAT",
                 "wscat-sup": "WSCAT-sup", "mt": "MT", "rst": "RST", "puat": "PUAT",
                 "wscat": "WSCAT", "wscat-fixed": "WSCAT-fixed", "wscat-self": "WSCAT-self",
                 "wscat-std": "WSCAT-std"}
NON_ADVERSARIAL_OBJECTIVES = {"standard", "mean_teacher"}


def display_name(method: str) -> str:
    """The paper's name of a method key (unknown keys are shown as they are)."""
    return DISPLAY_NAMES.get(method, method)


def is_adversarial(method_params: dict[str, Any]) -> bool:
    """Whether a method is adversarial training (only those compete for bold in the tables)."""
    return method_params["objective"] not in NON_ADVERSARIAL_OBJECTIVES


def build_method(method_params: dict[str, Any], *, feature_dim: int, num_classes: int,
                 image_shape: tuple[int, int, int]) -> Method:
    """The method object for a params.yaml `methods.<name>` entry."""
    objective = method_params["objective"]
    if objective == "standard":
        return Standard()
    if objective == "trades":  # TRADES, RST, DMAT; knobs left out keep TRADES' own choices
        optional = ("label_smoothing", "random_start", "attack_batchnorm")
        return Trades(lam=method_params["lam"],
                      **{k: method_params[k] for k in optional if k in method_params})
    if objective == "rlfat":
        if method_params["blocks"] > min(image_shape[1:]):
            raise ValueError(f"rlfat: blocks={method_params['blocks']} exceeds the image side "
                             f"{min(image_shape[1:])}")
        return Rlfat(**{k: method_params[k] for k in ("lam", "alpha", "blocks")})
    if objective == "wscat":  # WSCAT and its variants; positives left out = "predicted" (WSCAT)
        keys = ("lam", "beta", "temperature", "anchors", "label_smoothing", "projection_dim")
        optional = ("positives",)
        return Wscat(feature_dim, **{k: method_params[k] for k in keys},
                     **{k: method_params[k] for k in optional if k in method_params})
    if objective == "mean_teacher":
        keys = ("consistency", "rampup_epochs", "teacher_decay", "teacher_decay_late",
                "label_smoothing")
        return MeanTeacher(**{k: method_params[k] for k in keys})
    if objective == "puat":
        keys = ("pretrain_epochs", "gan_start_epochs", "adv_rampup_epochs", "consistency",
                "consistency_rampup_epochs", "uae_weight", "rae_weight", "gan_weight", "gan_alpha",
                "label_smoothing", "d_steps", "n_generated", "latent_dim", "gan_width",
                "latent_eps", "gan_lr")
        return Puat(num_classes=num_classes, image_shape=image_shape, feature_dim=feature_dim,
                    **{k: method_params[k] for k in keys})
    raise ValueError(f"unknown objective '{objective}'")


__all__ = ["Batch", "DISPLAY_NAMES", "Method", "StepContext", "build_method", "display_name",
           "is_adversarial"]
