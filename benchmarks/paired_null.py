"""How often the paired comparison against WSCAT calls a difference that is not there (its false-
positive rate, meant to be at most 5%) and how often it finds one that is (power), by simulation.

    .venv/bin/python benchmarks/paired_null.py                  # ~2 min; prints the table
    .venv/bin/python benchmarks/paired_null.py --write docs     # also rewrites its docs table

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
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wscat.evaluation import ATTACKS  # noqa: E402
from wscat.report.paired import (paired_by_attack, paired_interval, seed_means,  # noqa: E402
                                 t_quantile)

N_IMAGES, N_SEEDS = 359, 3
BASE = {"Natural": 92.8, "FGSM": 76.6, "PGD": 73.0, "CW": 68.1, "AA": 65.1}  # the demo's WSCAT
IMAGE_SD, METHOD_IMAGE_SD = 2.0, 0.7  # logit scale: image difficulty; a method's own deviation
SCENARIOS = [(0.0, 0.0), (3.0, 0.0), (5.0, 0.0), (2.9, 11.0), (2.05, 11.0)]  # (seed sd, gap)
DOCS = ROOT / "docs" / "evaluation.md"
MARKERS = ("<!-- begin: benchmarks/paired_null.py -->", "<!-- end: benchmarks/paired_null.py -->")


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1.0 - p))


def _population_offsets() -> np.ndarray:
    """Per-attack logit offsets that give the BASE accuracies on average over images."""
    z = np.random.default_rng(12345).normal(size=(200_000, 1))
    offsets = []
    for attack in ATTACKS:
        low, high = -10.0, 10.0
        for _ in range(60):
            mid = 0.5 * (low + high)
            mean = float(np.mean(1.0 / (1.0 + np.exp(-(mid + IMAGE_SD * z)))))
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
            f"{repeats}`.\n\n" + "\n".join(lines) + "\n")


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=repeats_count, default=1000,
                        help="null repetitions a row (default 1000)")
    parser.add_argument("--write", choices=["docs"], default=None,
                        help="rewrite the table between the markers in docs/evaluation.md")
    args = parser.parse_args(argv)
    text = table(args.repeats)
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
