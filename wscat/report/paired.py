"""Paired comparison of every adversarially trained method against WSCAT: the difference in the
paper's Mean (the harmonic mean of Natural, FGSM, PGD-20, CW-20 and AA) with a 95% interval from a
paired bootstrap over test images and seeds.

Every method is evaluated on the same test images in the same order, so a bootstrap draw resamples
the images (and the seeds) once and applies the draw to both methods: the interval is of the
paired difference, not of two independent means. This is what tells a gain from seed and test-set
noise; the paper, RobustBench and the authors' code report means (and stds) only.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from wscat.evaluation import ATTACKS

REFERENCE = "wscat"
COLUMNS = ["method", "reference", "delta_mean", "ci_low", "ci_high", "excludes_zero", "n_seeds",
           "n_images", "n_bootstrap"]


def correctness(datas: Sequence[Mapping]) -> dict[str, dict[int, np.ndarray]]:
    """method -> seed -> (attacks, images) bool array of the five columns of the paper's Mean."""
    flags: dict[str, dict[int, np.ndarray]] = {}
    for data in datas:
        per_image = (data.get("per_image") or {}).get("correct")
        if not per_image or any(a not in per_image for a in ATTACKS):
            raise ValueError(f"{data['method']} seed {data['seed']}: the metrics file has no "
                             "per-image correctness of every attack (rerun `wscat evaluate`)")
        rows = [np.frombuffer(per_image[a].encode(), dtype=np.uint8) == ord("1") for a in ATTACKS]
        if len({len(r) for r in rows}) != 1:
            raise ValueError(f"{data['method']} seed {data['seed']}: attacks saw different images")
        flags.setdefault(data["method"], {})[data["seed"]] = np.stack(rows)
    return flags


def _harmonic(acc: np.ndarray) -> np.ndarray:
    """Harmonic mean over the last axis (0 where any value is 0), as evaluation.harmonic_mean."""
    safe = np.where(acc > 0, acc, 1.0)
    mean = acc.shape[-1] / np.sum(1.0 / safe, axis=-1)
    return np.where(np.all(acc > 0, axis=-1), mean, 0.0)


def _mean_over_seeds(flags: np.ndarray, weights: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Bootstrap Means: flags (seeds, attacks, images); weights (B, images) counts of a draw;
    seeds (B, k) drawn seed positions -> (B,) the seed-averaged harmonic Mean."""
    acc = 100.0 * np.einsum("san,bn->bsa", flags.astype(np.float64), weights) / weights.shape[1]
    picked = np.take_along_axis(acc, seeds[:, :, None], axis=1)  # (B, k, attacks)
    return _harmonic(picked).mean(axis=1)


def paired_bootstrap(flags: Mapping[str, Mapping[int, np.ndarray]], methods: Sequence[str], *,
                     reference: str = REFERENCE, n_bootstrap: int = 2000, seed: int = 0
                     ) -> pd.DataFrame:
    """method - reference in Mean, its 95% percentile interval, and whether it excludes 0."""
    if reference not in flags:
        raise ValueError(f"no metrics for the reference method '{reference}'")
    seeds = sorted(flags[reference])
    shape = flags[reference][seeds[0]].shape
    for method in methods:
        if sorted(flags.get(method, {})) != seeds:
            raise ValueError(f"{method} was not evaluated on the seeds of {reference} ({seeds})")
        if any(flags[method][s].shape != shape for s in seeds):
            raise ValueError(f"{method} and {reference} were evaluated on different test images")
    n_images = shape[1]
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_images, np.full(n_images, 1.0 / n_images), size=n_bootstrap)
    drawn = rng.integers(0, len(seeds), size=(n_bootstrap, len(seeds)))
    identity = (np.ones((1, n_images)), np.arange(len(seeds))[None, :])
    stacked = {m: np.stack([flags[m][s] for s in seeds]) for m in [*methods, reference]}
    reference_boot = _mean_over_seeds(stacked[reference], weights, drawn)
    reference_point = _mean_over_seeds(stacked[reference], *identity)[0]
    rows = []
    for method in methods:
        boot = _mean_over_seeds(stacked[method], weights, drawn) - reference_boot
        point = _mean_over_seeds(stacked[method], *identity)[0] - reference_point
        low, high = np.percentile(boot, [2.5, 97.5])
        rows.append({"method": method, "reference": reference, "delta_mean": float(point),
                     "ci_low": float(low), "ci_high": float(high),
                     "excludes_zero": bool(low > 0 or high < 0), "n_seeds": len(seeds),
                     "n_images": n_images, "n_bootstrap": n_bootstrap})
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict(row: Mapping) -> str:
    """What a reader may say of one row."""
    if not row["excludes_zero"]:
        return "within noise"
    return "higher than WSCAT" if row["delta_mean"] > 0 else "lower than WSCAT"
