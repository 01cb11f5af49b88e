"""How often the paired comparison against WSCAT calls a difference that is not there (its false-
positive rate, meant to be at most 5%) and how often it finds one that is (power), by simulation.

    .venv/bin/python benchmarks/paired_null.py --repeats 10000               # ~25 min; prints
    .venv/bin/python benchmarks/paired_null.py --repeats 10000 --write docs  # and rewrites docs
    .venv/bin/python benchmarks/paired_null.py --images 1000 --shapes --repeats 2000  # the proxy's

`--images` draws test sets of another size (the CIFAR-10 proxy's 1,000): the level at three seeds
depends on it, since fewer images add more test-set noise for the interval to cover; `--shapes`
prints the second table alone (seconds, where the first takes minutes).

The simulated evaluation has the demo's shape: 359 test images, 3 seeds, five attacks with the
demo's accuracies (WSCAT's row). Each repetition draws a fresh test set from a population of
images: every image has a difficulty shared by all methods and attacks, and every method its own
per-image deviation, so that two methods with equal accuracy on the population still differ on a
given test set (the shared test-set term of `wscat.report.paired`). Each (method, seed) shifts all
five accuracies by a seed effect with standard deviation `seed_sd` points, independently for the
two methods; the per-image correctness is then drawn. Under the null both methods have the same
population accuracies; under the alternative the compared method is `gap` points lower on every
attack. The rate is compared with the old interval (a percentile bootstrap that also drew the
seeds with replacement), which is kept here only to show what changed. The same interval on each
attack's accuracy alone (`paired_by_attack`, the Markdown table's per-attack section) is run on
the same evaluations; the table shows the highest of its five rates.

A second table draws the seed effects from other shapes (`SHAPES`): unequal, correlated, heavy-
tailed, and a method whose seed now and then collapses (the digits WSCAT seed that fell to 64.3,
PUAT's 49.2 +- 15.7), always with the same expected Mean for both methods. It is vectorised
(`shape_rates`: every repetition of a chunk in one array, the Means of the bootstrap draws by one
float32 product, exact for counts below 2^24) and calls `interval` and `apart` of
`wscat.report.paired` on each repetition, so `tests/unit/test_paired.py` runs tens of thousands of
repetitions in seconds.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wscat.evaluation import ATTACKS  # noqa: E402
from wscat.report.paired import (apart, image_draws, interval, paired_by_attack,  # noqa: E402
                                 paired_interval, score, seed_means, t_quantile)

N_IMAGES, N_SEEDS = 359, 3
BASE = {"Natural": 92.8, "FGSM": 76.6, "PGD": 73.0, "CW": 68.1, "AA": 65.1}  # the demo's WSCAT
IMAGE_SD, METHOD_IMAGE_SD = 2.0, 0.7  # logit scale: image difficulty; a method's own deviation
SCENARIOS = [(0.0, 0.0), (3.0, 0.0), (5.0, 0.0), (2.9, 11.0), (2.05, 11.0)]  # (seed sd, gap)
DOCS = ROOT / "docs" / "evaluation.md"
MARKERS = ("<!-- begin: benchmarks/paired_null.py -->", "<!-- end: benchmarks/paired_null.py -->")


def _population_offsets() -> np.ndarray:
    """Per-attack logit offsets that give the BASE accuracies on average over images and over a
    method's own deviations: the logit is offset + difficulty + own, a normal of sd
    hypot(IMAGE_SD, METHOD_IMAGE_SD) around the offset (fitted to the difficulty alone, the
    simulated accuracies came out 0.5-0.7 points below BASE)."""
    z = np.random.default_rng(12345).normal(size=(200_000, 1))
    sd = math.hypot(IMAGE_SD, METHOD_IMAGE_SD)
    offsets = []
    for attack in ATTACKS:
        low, high = -10.0, 10.0
        for _ in range(60):
            mid = 0.5 * (low + high)
            mean = float(np.mean(1.0 / (1.0 + np.exp(-(mid + sd * z)))))
            low, high = (mid, high) if mean < BASE[attack] / 100.0 else (low, mid)
        offsets.append(0.5 * (low + high))
    return np.array(offsets)


OFFSETS = _population_offsets()


def simulate(rng: np.random.Generator, seed_sd: float, gap: float = 0.0
             ) -> dict[str, dict[int, np.ndarray]]:
    """One evaluation: method -> seed -> (attacks, images) correctness; 'other' is `gap` lower."""
    difficulty = IMAGE_SD * rng.normal(size=N_IMAGES)
    flags: dict[str, dict[int, np.ndarray]] = {}
    for method, shift in (("wscat", 0.0), ("other", -gap)):
        own = METHOD_IMAGE_SD * rng.normal(size=N_IMAGES)
        p = 1.0 / (1.0 + np.exp(-(OFFSETS[:, None] + difficulty[None, :] + own[None, :])))
        flags[method] = {}
        for seed in range(1, N_SEEDS + 1):
            effect = (shift + seed_sd * rng.normal()) / 100.0
            flags[method][seed] = rng.random(p.shape) < np.clip(p + effect, 0.0, 1.0)
    return flags


Shape = Callable[[np.random.Generator, int], np.ndarray]


def normal(sd_wscat: float, sd_other: float | None = None, rho: float = 0.0) -> Shape:
    """Normal seed effects (points), sd per method, correlated rho between the methods' seeds."""
    sd_other = sd_wscat if sd_other is None else sd_other

    def draw(rng: np.random.Generator, repeats: int) -> np.ndarray:
        z = rng.normal(size=(repeats, 2, N_SEEDS))
        other = rho * z[:, 0] + math.sqrt(1.0 - rho * rho) * z[:, 1]
        return np.stack([sd_wscat * z[:, 0], sd_other * other], axis=1)
    return draw


def heavy(df: int, sd: float) -> Shape:
    """Student-t seed effects with `df` degrees of freedom, scaled to standard deviation `sd`."""
    scale = sd / math.sqrt(df / (df - 2.0))
    return lambda rng, repeats: scale * rng.standard_t(df, size=(repeats, 2, N_SEEDS))


def collapse(p: float, drop: float, sd: float) -> Shape:
    """WSCAT's seed collapses by `drop` points with probability `p` (else normal, sd `sd`); the
    other method is steady, `p * drop` lower on every seed: the same expected Mean."""
    def draw(rng: np.random.Generator, repeats: int) -> np.ndarray:
        effects = sd * rng.normal(size=(repeats, 2, N_SEEDS))
        effects[:, 0] -= drop * (rng.random((repeats, N_SEEDS)) < p)
        effects[:, 1] -= p * drop
        return effects
    return draw


SHAPES: dict[str, Shape] = {
    "normal, sd 3 each": normal(3.0),
    "normal, sd 5 each": normal(5.0),
    "normal, sd 3.5 (WSCAT) and 0.4": normal(3.5, 0.4),
    "normal, sd 3 each, correlated 0.8": normal(3.0, rho=0.8),
    "Student t3 tails, sd 3 each": heavy(3, 3.0),
    "WSCAT collapses: p 0.33, drop 9, else sd 1": collapse(0.33, 9.0, 1.0),
    "WSCAT collapses: p 0.2, drop 12, else sd 1": collapse(0.2, 12.0, 1.0),
    "WSCAT collapses: p 0.1, drop 20, else sd 1": collapse(0.1, 20.0, 1.0),
    "WSCAT collapses: p 0.15, drop 15, else sd 0.5": collapse(0.15, 15.0, 0.5),
    "WSCAT collapses: p 0.1, drop 25, else sd 0.5": collapse(0.1, 25.0, 0.5),
}


def _probabilities(rng: np.random.Generator, repeats: int) -> np.ndarray:
    """(repeats, 2, attacks, images) population probabilities of fresh test sets, as `simulate`."""
    difficulty = IMAGE_SD * rng.normal(size=(repeats, 1, 1, N_IMAGES))
    own = METHOD_IMAGE_SD * rng.normal(size=(repeats, 2, 1, N_IMAGES))
    return 1.0 / (1.0 + np.exp(-(OFFSETS[None, None, :, None] + difficulty + own)))


def shape_rates(shape: Shape, repeats: int, *, n_bootstrap: int = 200, seed: int = 0,
                chunk: int = 500) -> dict[str, float]:
    """Under a true difference of 0 with seed effects drawn from `shape`: the share of repetitions
    whose Mean interval says 'lower' or 'higher' than WSCAT ('excludes' both), whose row has a
    seed apart ('apart'), and both ('excludes_apart'); `simulate`'s evaluation, vectorised over
    a chunk of repetitions."""
    rng = np.random.default_rng(seed)
    counts = {"lower": 0, "higher": 0, "apart": 0, "excludes_apart": 0}
    for start in range(0, repeats, chunk):
        size = min(chunk, repeats - start)
        effects = shape(rng, size)[:, :, :, None, None] / 100.0  # (size, 2, seeds, 1, 1)
        p = (_probabilities(rng, size)[:, :, None] + effects).astype(np.float32)
        # No clip needed: a uniform draw in [0, 1) is below p >= 1 always, below p <= 0 never.
        flags = (rng.random(p.shape, dtype=np.float32) < p).astype(np.float32)
        weights = image_draws(N_IMAGES, n_bootstrap, rng).astype(np.float32)
        drawn = (flags @ weights.T) * (100.0 / N_IMAGES)  # (size, 2, seeds, attacks, B)
        means = score(100.0 * flags.mean(axis=-1).astype(np.float64))  # (size, 2, seeds)
        boot = score(np.moveaxis(drawn, -1, -2).astype(np.float64))  # (size, 2, seeds, B)
        d, d_boot = means[:, 1] - means[:, 0], np.swapaxes(boot[:, 1] - boot[:, 0], 1, 2)
        for one, its_boot in zip(d, d_boot):
            low, high, *_ = interval(one, its_boot)
            odd = apart(one, its_boot) is not None
            counts["lower"] += high < 0
            counts["higher"] += low > 0
            counts["apart"] += odd
            counts["excludes_apart"] += odd and (high < 0 or low > 0)
    rates = {k: v / repeats for k, v in counts.items()}
    return {**rates, "excludes": rates["lower"] + rates["higher"]}


def old_interval(flags: dict[str, dict[int, np.ndarray]], rng: np.random.Generator,
                 n_bootstrap: int) -> tuple[float, float]:
    """The interval before issue 24: images and seeds both drawn with replacement, percentiles."""
    stacked = {m: np.stack([flags[m][s] for s in sorted(flags[m])]) for m in flags}
    weights = rng.multinomial(N_IMAGES, np.full(N_IMAGES, 1.0 / N_IMAGES), size=n_bootstrap)
    drawn = rng.integers(0, N_SEEDS, size=(n_bootstrap, N_SEEDS))
    boot = {m: np.take_along_axis(seed_means(f, weights), drawn, axis=1).mean(axis=1)
            for m, f in stacked.items()}
    low, high = np.percentile(boot["other"] - boot["wscat"], [2.5, 97.5])
    return float(low), float(high)


def satterthwaite_excludes_zero(row: dict) -> bool:
    """The same interval with Welch-Satterthwaite degrees of freedom instead of the bound k - 1
    (the alternative wscat.report.paired does not take)."""
    seeds_part, shared = row["sd_seeds"] ** 2 / N_SEEDS, row["se_test_set"] ** 2
    if seeds_part == 0.0:
        return False
    df = (N_SEEDS - 1) * ((seeds_part + shared) / seeds_part) ** 2
    half = t_quantile(0.975, round(df, 1)) * math.sqrt(seeds_part + shared)
    return abs(row["delta_mean"]) > half


def rates(seed_sd: float, gap: float, *, repeats: int, n_bootstrap: int = 200, seed: int = 0,
          old: bool = False, attacks: bool = False) -> dict[str, float]:
    """The share of repetitions whose interval excludes 0 (new; with `old`, also the old
    bootstrap and the Welch-Satterthwaite variant; with `attacks`, the interval on each attack's
    accuracy alone, `wscat.report.paired.paired_by_attack`, as 'attack:<name>')."""
    rng = np.random.default_rng([seed, int(10 * seed_sd), int(10 * gap)])
    hits = {"new": 0, "old": 0, "satterthwaite": 0, **{f"attack:{a}": 0 for a in ATTACKS}}
    for repeat in range(repeats):
        flags = simulate(rng, seed_sd, gap)
        row = paired_interval(flags, ["other"], n_bootstrap=n_bootstrap, seed=repeat).iloc[0]
        hits["new"] += bool(row["excludes_zero"])
        if old:
            low, high = old_interval(flags, rng, n_bootstrap)
            hits["old"] += bool(low > 0 or high < 0)
            hits["satterthwaite"] += satterthwaite_excludes_zero(row.to_dict())
        if attacks:
            for attack_row in paired_by_attack(flags, ["other"], n_bootstrap=n_bootstrap,
                                               seed=repeat).to_dict("records"):
                hits[f"attack:{attack_row['column']}"] += bool(attack_row["excludes_zero"])
    wanted = {"new"} | ({"old", "satterthwaite"} if old else set()) | (
        {f"attack:{a}" for a in ATTACKS} if attacks else set())
    return {k: v / repeats for k, v in hits.items() if k in wanted}


def table(repeats: int) -> str:
    """The Markdown table of docs/evaluation.md."""
    mc = math.sqrt(0.05 * 0.95 / repeats)
    lines = ["| seed sd of each method (points) | seed sd of the paired difference | true gap "
             "(points) | excludes 0: this interval | the same, Welch–Satterthwaite df | the old "
             "bootstrap | one attack alone: the highest of the five |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for seed_sd, gap in SCENARIOS:
        r = rates(seed_sd, gap, repeats=repeats, old=True, attacks=True)
        attack = max(ATTACKS, key=lambda a: r[f"attack:{a}"])
        lines.append(f"| {seed_sd:g} | {seed_sd * math.sqrt(2):.1f} | {gap:g} | "
                     f"{100 * r['new']:.1f}% | {100 * r['satterthwaite']:.1f}% | "
                     f"{100 * r['old']:.1f}% | {100 * r[f'attack:{attack}']:.1f}% ({attack}) |")
    return (f"{repeats} repetitions a row (Monte Carlo standard error at 5%: "
            f"{100 * mc:.1f} points); `.venv/bin/python benchmarks/paired_null.py --repeats "
            f"{repeats}`.\n\n" + "\n".join(lines) + "\n\n" + shapes_table(repeats))


def shapes_table(repeats: int) -> str:
    """The Markdown table of the seed effects' shapes (`SHAPES`), a true difference of 0."""
    lines = ["| seed effects (points) | excludes 0 | 'lower than WSCAT' | 'higher than WSCAT' "
             "| a seed apart (`apart`) | excludes 0 with a seed apart |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, shape in SHAPES.items():
        r = shape_rates(shape, repeats)
        lines.append(f"| {name} | {100 * r['excludes']:.2f}% | {100 * r['lower']:.2f}% | "
                     f"{100 * r['higher']:.2f}% | {100 * r['apart']:.1f}% | "
                     f"{100 * r['excludes_apart']:.2f}% |")
    return (f"Seed effects of other shapes, a true gap of 0, {repeats} repetitions a row (Monte "
            f"Carlo standard error at 5%: {100 * math.sqrt(0.05 * 0.95 / repeats):.2f} points):"
            "\n\n" + "\n".join(lines) + "\n")


def repeats_count(text: str) -> int:
    """--repeats: a whole number of at least 1 (a rate over no repetitions is not a rate)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    global N_IMAGES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=repeats_count, default=10000,
                        help="null repetitions a row (default 10000)")
    parser.add_argument("--write", choices=["docs"], default=None,
                        help="rewrite the table between the markers in docs/evaluation.md")
    parser.add_argument("--images", type=repeats_count, default=N_IMAGES,
                        help=f"test images a simulated evaluation has (default {N_IMAGES}, "
                        "the demo's)")
    parser.add_argument("--shapes", action="store_true",
                        help="only the second table (the seed effects' shapes)")
    args = parser.parse_args(argv)
    if args.write and (args.shapes or args.images != N_IMAGES):
        parser.error(f"--write docs rewrites both tables of the demo's {N_IMAGES} images; "
                     "leave out --shapes and --images")
    N_IMAGES = args.images
    text = (f"{N_IMAGES} test images. " + shapes_table(args.repeats) if args.shapes
            else table(args.repeats))
    print(text)
    if args.write == "docs":
        page = DOCS.read_text()
        pattern = re.compile(re.escape(MARKERS[0]) + ".*?" + re.escape(MARKERS[1]), re.S)
        if not pattern.search(page):
            raise SystemExit(f"paired_null.py: no {MARKERS[0]} ... {MARKERS[1]} in {DOCS}")
        DOCS.write_text(pattern.sub(lambda _: f"{MARKERS[0]}\n{text}{MARKERS[1]}", page))
    return 0


if __name__ == "__main__":
    sys.exit(main())
