"""Paired comparison of every adversarially trained method against WSCAT: the difference in the
paper's Mean (the harmonic mean of Natural, FGSM, PGD-20, CW-20 and AA) with a 95% interval.
`paired_by_attack` applies the same interval to each attack's accuracy alone, and `leads` to the
table's bold (the row's highest AT mean, where its lead over every other AT method holds).

Its level, by simulation at three seeds (docs/evaluation.md, "Paired comparison";
benchmarks/paired_null.py): it holds 95% when the seed effects are roughly normal (normal, unequal,
correlated or t3-tailed seed effects: at most 3.4% of equal pairs called different). Where one
method's seed now and then collapses, it can call about 6-7% of equal pairs different: the true
difference carries collapses that three seeds often do not show, so the rows it gets wrong look
clean. `apart` flags the rows where a collapse does show. Those rates are the demo's 359 test
images'; on 1,000 (the CIFAR-10 proxy's) normal seeds reach 4.0% and collapses up to 27%, on
5,000 and 10,000 (ImageNet32-100's, CIFAR's) normal seeds about 5% and collapses up to 53% and 59%
(`paired_null.py --images N --shapes`; the captions quote each size's: markdown.LEVELS).

Two sources of noise, crossed: the seeds (split, initialisation, batches) and the test images,
which are the same in every seed. Per seed s the paired difference of Means is
d_s = mu + a_s + c + e_s: a_s the seed's training noise, c the draw of the test set (shared by
every seed) and e_s the seed-specific image noise. The estimate is mean(d), and
Var(mean(d)) = (var(a) + var(e)) / k + var(c).

- The sample variance of the d_s (ddof=1) over k estimates the first term, within-seed image
  noise included; adding each seed's image variance to it would count var(e) twice. This is the
  summary-statistic (two-stage) analysis of a random-effects model: each seed is reduced to its
  d_s, and Student's t with k - 1 degrees of freedom carries the seeds' variance (Student 1908;
  the paired t test on per-seed scores, Bouthillier et al., "Accounting for variance in machine
  learning benchmarks", MLSys 2021, who also show that the test set's own sampling noise must
  be added).
- The shared term var(c) cancels in d_s - mean(d), so the seeds cannot see it. It is the
  covariance between two seeds' d_s over bootstrap resamples of the test images (one draw applied
  to every seed and both methods; Efron & Tibshirani 1993), averaged over pairs of seeds and
  clipped at 0.
- Interval: mean(d) +- t(k - 1, 0.975) * sqrt(s_d^2 / k + var(c)). The Welch-Satterthwaite
  degrees of freedom of that sum (Satterthwaite, Biometrics Bulletin 2, 1946) are at least k - 1
  and grow with the test set's share, but at k = 3 that approximation runs over its level in the
  simulation (benchmarks/paired_null.py), so the interval keeps the bound k - 1, the
  conservative choice of Hsu (1938) for Welch's problem. With k = 3, t(2, 0.975) = 4.30: the
  interval is wide, and that is what three seeds can say.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from wscat.metrics import ATTACKS
from wscat.report.names import display_name

REFERENCE = "wscat"
LEVEL = 0.95
COLUMNS = ["method", "reference", "delta_mean", "ci_low", "ci_high", "excludes_zero", "n_seeds",
           "n_images", "n_bootstrap", "sd_seeds", "se_test_set", "df", "apart_seed", "note"]
ONE_SEED = "one seed: no interval"
_TOLERANCE = 2e-3  # metrics files keep 4 decimals; a harmonic Mean of them moves less than this
_SAME_IMAGES = ("evaluation_set", "test_set", "test_set_size", "n_examples")
# A seed apart (`apart`): its difference lies farther from the other seeds' mean than APART_RATIO
# times the largest of their range, APART_SE standard errors of one seed's difference over the
# test images and APART_POINTS accuracy points. Chosen by simulation (benchmarks/paired_null.py,
# docs/evaluation.md): normal seed effects of sd 3 trip it in ~0.1% of rows, sd 5 in ~4-5%, and
# most single collapses of 20 points do, on 359 test images as on 10,000. Without the floor in
# points the standard error's term shrinks with the test set, and on 10,000 images a third of
# rows with normal seeds tripped it (benchmarks/apart_floor.py chose 4: the rates it holds alike
# at every size, the demo's 359 images' unchanged but for one row in thousands).
APART_RATIO, APART_SE, APART_POINTS = 4.0, 3.0, 4.0


class NotTheTablesMean(ValueError):
    """Per-image flags that do not give the table's accuracies (AutoAttack on a subset, or a
    file whose numbers are not its own flags')."""


class BadFlags(ValueError):
    """Per-image flags no `wscat evaluate` writes (not a string of 0 and 1, attacks of different
    lengths, or fewer or more than its AutoAttack ran on): a damaged file, refused wherever it
    is read, never taken for 'no per-image results'."""


def _flag_rows(name: str, correct: Mapping[str, object], manifest: Mapping) -> list[np.ndarray]:
    """The five attacks' flags as bool rows, each checked to be what `wscat evaluate` writes: a
    string of 0 and 1 (wscat.evaluation.encode_flags), every attack on as many images, and as
    many as its manifest says AutoAttack ran on (`attacks.AA.n_examples`, where recorded)."""
    remedy = "a damaged or hand-edited file; re-evaluate it (`wscat evaluate`)"
    for attack in ATTACKS:
        flags = correct[attack]
        if not isinstance(flags, str) or flags.strip("01"):
            what = (f"hold {next(c for c in flags if c not in '01')!r}"
                    if isinstance(flags, str) else f"are a JSON {type(flags).__name__}")
            raise BadFlags(f"{name}: its per-image flags of {attack} {what}, not a string of 0 "
                           f"and 1: {remedy}")
    lengths = {attack: len(correct[attack]) for attack in ATTACKS}
    if len(set(lengths.values())) != 1:
        said = ", ".join(f"{a} {n}" for a, n in lengths.items())
        raise BadFlags(f"{name}: its per-image flags cover different numbers of images ({said}); "
                       f"every attack's cover the same images: {remedy}")
    aa = ((manifest.get("attacks") or {}).get("AA") or {}).get("n_examples")
    n = lengths[ATTACKS[0]]
    if n == 0:
        raise BadFlags(f"{name}: its per-image flags are empty: {remedy}")
    if isinstance(aa, int) and not isinstance(aa, bool) and n != aa:
        raise BadFlags(f"{name}: its per-image flags cover {n} images, but its AutoAttack ran on "
                       f"{aa} (manifest attacks.AA.n_examples): {remedy}")
    return [np.frombuffer(correct[a].encode(), dtype=np.uint8) == ord("1") for a in ATTACKS]


def correctness(datas: Sequence[Mapping], *, order: str | None = None
                ) -> dict[str, dict[int, np.ndarray]]:
    """method -> seed -> (attacks, images) bool array of the five columns of the paper's Mean.

    Refused: a run without per-image correctness; flags no evaluation writes (`BadFlags`);
    images in another
    order than `order` (else than the first run's) or another evaluation set; per-image flags
    whose accuracies or harmonic Mean are not the metrics file's (e.g. AutoAttack on a subset)."""
    flags: dict[str, dict[int, np.ndarray]] = {}
    first: tuple[str, dict] | None = None
    for data in datas:
        name = f"{data['method']} seed {data['seed']}"
        per_image = data.get("per_image") or {}
        correct = per_image.get("correct") if isinstance(per_image, dict) else per_image
        if correct and not isinstance(correct, dict):
            raise BadFlags(f"{name}: its per_image{'.correct' * isinstance(per_image, dict)} is "
                           f"a JSON {type(correct).__name__}, not attack -> flags: a damaged or "
                           "hand-edited file; re-evaluate it (`wscat evaluate`)")
        if not correct or any(a not in correct for a in ATTACKS):
            raise ValueError(f"{name}: the metrics file has no per-image correctness of every "
                             "attack (rerun `wscat evaluate`)")
        rows = _flag_rows(name, correct, data.get("manifest") or {})
        seen = (str(per_image.get("order") or ""),
                {k: (data.get("manifest") or {}).get(k) for k in _SAME_IMAGES})
        if not seen[0]:
            raise ValueError(f"{name}: the metrics file does not say in which order its images "
                             "are (rerun `wscat evaluate`)")
        if order is not None and seen[0] != order:
            raise ValueError(f"{name}: images in the order '{seen[0]}', not '{order}'; "
                             "rerun `wscat evaluate` with the same evaluation.subset_seed")
        if first is not None and seen != first:
            raise ValueError(f"{name}: evaluated on other images or in another order "
                             f"({seen[0]}; {seen[1]}) than {first[0]}; {first[1]}: evaluate "
                             "every method with the same evaluation settings")
        first = first or seen
        _check_against_table(name, np.stack(rows), data["accuracy"],
                             (data.get("manifest") or {}).get("n_examples"))
        flags.setdefault(data["method"], {})[data["seed"]] = np.stack(rows)
    return flags


def _check_against_table(name: str, flags: np.ndarray, accuracy: Mapping[str, float],
                         evaluated: object = None) -> None:
    """The accuracies and the Mean the interval resamples must be the table's; the refusal says
    what differs: a Mean that is not the harmonic mean of accuracies the flags give, flags on
    fewer images than were `evaluated` (the manifest's n_examples: AutoAttack on a subset), or
    an accuracy its flags on every evaluated image do not give."""
    acc = 100.0 * flags.mean(axis=1)
    mean = float(_harmonic(acc))
    shown = [(a, float(accuracy[a]), float(v)) for a, v in zip(ATTACKS, acc)]
    shown.append(("Mean", float(accuracy["Mean"]), mean))
    wrong = [(a, table, own) for a, table, own in shown if abs(table - own) > _TOLERANCE]
    if not wrong:
        return
    a, table, own = wrong[0]
    n = flags.shape[1]
    said = f"{name}: its per-image flags give {a} {own:.2f}, the table {table:.2f}"
    if a == "Mean":  # every accuracy is its flags': the file's Mean is not theirs
        raise NotTheTablesMean(
            f"{said}: its five accuracies are those of its flags on {n} images, but its Mean is "
            "not their harmonic mean (a file edited by hand?); re-evaluate it (`wscat evaluate`)")
    known = isinstance(evaluated, int) and not isinstance(evaluated, bool)
    if known and n == evaluated:
        raise NotTheTablesMean(
            f"{said} on all {n} images evaluated: its {a} is not its own flags' accuracy (a file "
            "edited by hand, or flags of another run?); re-evaluate it (`wscat evaluate`)")
    where = (f"on {n} of the {evaluated} images evaluated (AutoAttack on a subset)"
             if known and n < evaluated else f"on {n} images (AutoAttack on a subset?)")
    raise NotTheTablesMean(
        f"{said} {where}; the paired comparison needs every attack on the same images: set "
        "evaluation.autoattack.n_examples to null, or cut evaluation.n_examples")


def score(acc: np.ndarray, column: str = "Mean") -> np.ndarray:
    """`column`'s score from accuracies with the ATTACKS on the last axis: their harmonic mean
    (the paper's Mean), or one attack's accuracy."""
    return _harmonic(acc) if column == "Mean" else acc[..., ATTACKS.index(column)]


def _harmonic(acc: np.ndarray) -> np.ndarray:
    """Harmonic mean over the last axis (0 where any value is 0), as evaluation.harmonic_mean."""
    safe = np.where(acc > 0, acc, 1.0)
    mean = acc.shape[-1] / np.sum(1.0 / safe, axis=-1)
    return np.where(np.all(acc > 0, axis=-1), mean, 0.0)


def seed_means(flags: np.ndarray, weights: np.ndarray | None = None, column: str = "Mean"
               ) -> np.ndarray:
    """Per-seed scores of `column`: the paper's Mean (the harmonic mean of the five attacks'
    accuracies), or one attack's accuracy (an entry of ATTACKS). flags (seeds, attacks, images),
    weights (B, images) counts of image draws -> (B, seeds); without weights (seeds,), the
    table's numbers."""
    if column != "Mean":
        flags = flags[:, [ATTACKS.index(column)], :]  # that attack alone: its accuracy
    one = _harmonic if column == "Mean" else (lambda acc: acc[..., 0])
    if weights is None:
        return one(100.0 * flags.mean(axis=2))
    seeds, attacks, n = flags.shape
    # Integer products: exact, and no BLAS threads (a shared CPU makes them slow).
    counts = weights.astype(np.int64) @ flags.reshape(seeds * attacks, n).T.astype(np.int64)
    return one(100.0 * counts.reshape(len(weights), seeds, attacks) / n)


def image_draws(n_images: int, n_bootstrap: int, rng: np.random.Generator) -> np.ndarray:
    """(n_bootstrap, n_images) counts: how often each test image is in a bootstrap resample."""
    drawn = rng.integers(0, n_images, size=(n_bootstrap, n_images))
    drawn += np.arange(n_bootstrap)[:, None] * n_images
    return np.bincount(drawn.ravel(), minlength=n_bootstrap * n_images).reshape(n_bootstrap,
                                                                                n_images)


@functools.lru_cache(maxsize=64)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile, p in (0.5, 1) (no scipy in the pinned stack)."""
    low, high = 0.0, 1e4
    for _ in range(200):  # bisection on the CDF; 1 - F(t) = I_{df/(df+t^2)}(df/2, 1/2) / 2
        mid = 0.5 * (low + high)
        if 1.0 - 0.5 * _beta_inc(df / 2.0, 0.5, df / (df + mid * mid)) < p:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def _beta_inc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) by its continued fraction (Lentz)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _beta_inc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x)) / a
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            term = 1.0
        elif i % 2 == 0:
            term = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            term = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + term * d
        d = 1e-300 if abs(d) < 1e-300 else d
        c = 1.0 + term / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        f *= c * d
        if abs(1.0 - c * d) < 1e-14:
            break
    return front * (f - 1.0)


def interval(d: np.ndarray, d_boot: np.ndarray, level: float = LEVEL
             ) -> tuple[float, float, float, float, int]:
    """(low, high, sd of the d_s, se of the shared test-set term, df) from the per-seed paired
    differences d (k,) and their image-bootstrap draws d_boot (B, k)."""
    k = len(d)
    sd = float(np.std(d, ddof=1))
    cov = np.cov(d_boot, rowvar=False, ddof=1)
    shared = max(0.0, float((cov.sum() - np.trace(cov)) / (k * (k - 1))))
    df = k - 1
    half = t_quantile(0.5 + level / 2.0, df) * math.sqrt(sd * sd / k + shared)
    centre = float(np.mean(d))
    return centre - half, centre + half, sd, math.sqrt(shared), df


def apart(d: np.ndarray, d_boot: np.ndarray, points: float = APART_POINTS) -> int | None:
    """The index of a seed whose paired difference stands apart (a collapsed seed, say): farther
    from the mean of the other seeds than APART_RATIO times the largest of their range, APART_SE
    standard errors of one seed's difference over the test images (from d_boot, (B, k)) and
    `points`. None where no seed does, or with fewer than three seeds."""
    if len(d) < 3:
        return None
    se = math.sqrt(float(np.mean(np.var(d_boot, axis=0, ddof=1))))
    for i in range(len(d)):
        rest = np.delete(d, i)
        if abs(d[i] - rest.mean()) > APART_RATIO * max(float(np.ptp(rest)), APART_SE * se,
                                                       points):
            return i
    return None


def paired_interval(flags: Mapping[str, Mapping[int, np.ndarray]], methods: Sequence[str], *,
                    reference: str = REFERENCE, n_bootstrap: int = 2000, seed: int = 0,
                    column: str = "Mean") -> pd.DataFrame:
    """method - reference in `column` (the Mean, or one attack's accuracy: `seed_means`), its 95%
    interval (module docstring), whether it excludes 0; `delta_mean` is that difference averaged
    over the seeds. With one seed there is no interval (its cells stay empty)."""
    if column != "Mean" and column not in ATTACKS:
        raise ValueError(f"no column '{column}' to compare; one of {', '.join(ATTACKS)}, Mean")
    return _frame(_compare(flags, methods, (column,), reference, n_bootstrap, seed), COLUMNS)


def paired_by_attack(flags: Mapping[str, Mapping[int, np.ndarray]], methods: Sequence[str], *,
                     reference: str = REFERENCE, n_bootstrap: int = 2000, seed: int = 0
                     ) -> pd.DataFrame:
    """`paired_interval` on each attack's accuracy alone, one row per (attack, method) with the
    attack in `column`: the same procedure and the same image draws as the Mean's. Each interval
    holds its level by itself (benchmarks/paired_null.py); the five are not simultaneous."""
    return _frame(_compare(flags, methods, ATTACKS, reference, n_bootstrap, seed),
                  ["column", *COLUMNS])


def _frame(rows: list[dict], columns: Sequence[str]) -> pd.DataFrame:
    """The rows as a frame; the seed apart as a whole number (empty where none: no 3.00, no nan)."""
    return pd.DataFrame(rows, columns=columns).astype({"apart_seed": "Int64"})


def _compare(flags: Mapping[str, Mapping[int, np.ndarray]], methods: Sequence[str],
             columns: Sequence[str], reference: str, n_bootstrap: int, seed: int
             ) -> list[dict]:
    """The rows of `paired_interval`, column by column: one set of image draws for them all."""
    seeds, stacked = _stacked(flags, methods, reference)
    n_images = stacked[reference].shape[2]
    weights = image_draws(n_images, n_bootstrap, np.random.default_rng(seed))
    rows = []
    for column in columns:
        ref_point = seed_means(stacked[reference], column=column)
        ref_boot = seed_means(stacked[reference], weights, column)
        for method in methods:
            d = seed_means(stacked[method], column=column) - ref_point
            row = {"column": column, "method": method, "reference": reference,
                   "delta_mean": float(np.mean(d)), "ci_low": None, "ci_high": None,
                   "excludes_zero": False, "n_seeds": len(seeds), "n_images": n_images,
                   "n_bootstrap": n_bootstrap, "sd_seeds": None, "se_test_set": None,
                   "df": None, "apart_seed": None, "note": ONE_SEED}
            if len(seeds) > 1:
                d_boot = seed_means(stacked[method], weights, column) - ref_boot
                low, high, sd, se, df = interval(d, d_boot)
                odd = apart(d, d_boot)
                row.update(ci_low=low, ci_high=high, excludes_zero=bool(low > 0 or high < 0),
                           sd_seeds=sd, se_test_set=se, df=df, note="",
                           apart_seed=None if odd is None else seeds[odd])
            rows.append(row)
    return rows


def _stacked(flags: Mapping[str, Mapping[int, np.ndarray]], methods: Sequence[str],
             reference: str) -> tuple[list[int], dict[str, np.ndarray]]:
    """(the seeds, method -> (seeds, attacks, images) flags) of `methods` and `reference`,
    refused unless every method has the reference's seeds and images."""
    if reference not in flags:
        raise ValueError(f"no metrics for the reference method '{reference}'")
    seeds = sorted(flags[reference])
    shape = flags[reference][seeds[0]].shape
    for method in methods:
        if sorted(flags.get(method, {})) != seeds:
            raise ValueError(f"{method} was not evaluated on the seeds of {reference} ({seeds})")
        if any(flags[method][s].shape != shape for s in seeds):
            raise ValueError(f"{method} and {reference} were evaluated on different test images")
    return seeds, {m: np.stack([flags[m][s] for s in seeds]) for m in [*methods, reference]}


def leads(flags: Mapping[str, Mapping[int, np.ndarray]], methods: Sequence[str], *,
          columns: Sequence[str] = (*ATTACKS, "Mean"), n_bootstrap: int = 2000, seed: int = 0
          ) -> dict[str, str]:
    """column -> the method of `methods` with the highest seed-averaged score there, where the
    paired interval of (it - each other method) excludes 0 for every one of them: the same
    interval and image draws as `paired_interval` with it as the reference. A column without such
    a lead is left out, and all are with fewer than two methods or one seed."""
    if len(methods) < 2:
        return {}
    seeds, stacked = _stacked(flags, methods[1:], methods[0])
    if len(seeds) < 2:
        return {}
    weights = image_draws(stacked[methods[0]].shape[2], n_bootstrap, np.random.default_rng(seed))
    out = {}
    for column in columns:
        point = {m: seed_means(stacked[m], column=column) for m in methods}
        leader = max(methods, key=lambda m: float(np.mean(point[m])))  # the first of a tie
        boot = seed_means(stacked[leader], weights, column)
        if all(interval(point[leader] - point[m],
                        boot - seed_means(stacked[m], weights, column))[0] > 0
               for m in methods if m != leader):
            out[column] = leader
    return out


def without_interval(datas: Sequence[Mapping], methods: Sequence[str], reason: str, *,
                     reference: str = REFERENCE) -> pd.DataFrame:
    """The table's differences in Mean, with no interval and the reason why (`note`): what the
    comparison says when its per-image flags cannot give the table's Mean."""
    means: dict[str, dict[int, float]] = {}
    for data in datas:
        means.setdefault(data["method"], {})[data["seed"]] = float(data["accuracy"]["Mean"])
    if reference not in means:
        raise ValueError(f"no metrics for the reference method '{reference}'")
    seeds = sorted(means[reference])
    rows = []
    for method in methods:
        if sorted(means.get(method, {})) != seeds:
            raise ValueError(f"{method} was not evaluated on the seeds of {reference} ({seeds})")
        delta = float(np.mean([means[method][s] - means[reference][s] for s in seeds]))
        rows.append({"method": method, "reference": reference, "delta_mean": delta,
                     "ci_low": None, "ci_high": None, "excludes_zero": False,
                     "n_seeds": len(seeds), "n_images": None, "n_bootstrap": None,
                     "sd_seeds": None, "se_test_set": None, "df": None, "apart_seed": None,
                     "note": f"no interval: {reason}"})
    return _frame(rows, COLUMNS)


def has_interval(row: Mapping) -> bool:
    return row["ci_low"] is not None and not pd.isna(row["ci_low"])


def verdict(row: Mapping) -> str:
    """What a reader may say of one row, and which seed stands apart (`apart`) where one does."""
    if not has_interval(row):
        return "no interval" if row["n_seeds"] > 1 else ONE_SEED
    reference = display_name(row.get("reference") or REFERENCE)
    said = ("within noise" if not row["excludes_zero"] else
            f"higher than {reference}" if row["delta_mean"] > 0 else f"lower than {reference}")
    odd = row.get("apart_seed")
    return said if odd is None or pd.isna(odd) else f"{said}; seed {int(odd)} apart"
