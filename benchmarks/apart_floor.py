"""How often `wscat.report.paired.apart` flags "seed s apart", by its floor in points and the
test set's size: the simulation that chose `paired.APART_POINTS`.

A seed is apart where its paired difference lies farther from the other seeds' mean than 4 times
the largest of their range, 3 standard errors of one seed's difference over the test images, and
a floor of P points. Without the floor (P 0) the standard error's term shrinks with the test set,
so the rule flags ever more rows whose seeds are merely normal: 0.1% at seed sd 3 on the demo's
359 test images, a third on CIFAR's 10,000. The rule of the choice (stated after a first look
at these rates in scratch runs of the same simulation, so the rule is not blind to them): the
smallest candidate floor at which, on every size, each normal shape (sd 3, sd 5, t3 tails) trips
it at most one point above its rate on the smallest size given (the demo's 359 images) with no
floor, so that a flag means about the same at every size. The same evaluations as
`benchmarks/paired_null.py --shapes` (its population, its shapes, a true gap of 0), with
`paired.apart` itself called at each floor.

    .venv/bin/python benchmarks/apart_floor.py --images 359 1000 5000 10000 --repeats 2000

Writes benchmarks/results/apart-floor.md (or `--out`).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import paired_null  # noqa: E402
from mt_labeler import cpu_model  # noqa: E402
from wscat.report.paired import APART_POINTS, apart, image_draws  # noqa: E402

SHAPES = ("normal, sd 3 each", "normal, sd 5 each", "Student t3 tails, sd 3 each",
          "WSCAT collapses: p 0.2, drop 12, else sd 1",
          "WSCAT collapses: p 0.1, drop 20, else sd 1",
          "WSCAT collapses: p 0.1, drop 25, else sd 0.5")
FLOORS = (0.0, 3.0, 4.0, 5.0, 6.0)


def differences(shape: str, images: int, repeats: int, *, n_bootstrap: int = 200,
                seed: int = 0, chunk: int = 250) -> list[tuple[np.ndarray, np.ndarray]]:
    """(d, d_boot) of `repeats` simulated rows: paired_null's draws on `images` test images
    (paired_null.N_IMAGES is set for the draws and put back after, so nothing else sees it)."""
    kept, paired_null.N_IMAGES = paired_null.N_IMAGES, images
    try:
        return _differences(shape, images, repeats, n_bootstrap, seed, chunk)
    finally:
        paired_null.N_IMAGES = kept


def _differences(shape: str, images: int, repeats: int, n_bootstrap: int, seed: int,
                 chunk: int) -> list[tuple[np.ndarray, np.ndarray]]:
    draw, rng, rows = paired_null.SHAPES[shape], np.random.default_rng(seed), []
    for start in range(0, repeats, chunk):
        size = min(chunk, repeats - start)
        effects = draw(rng, size)[:, :, :, None, None] / 100.0
        p = (paired_null._probabilities(rng, size)[:, :, None] + effects).astype(np.float32)
        flags = (rng.random(p.shape, dtype=np.float32) < p).astype(np.float32)
        weights = image_draws(images, n_bootstrap, rng).astype(np.float32)
        drawn = (flags @ weights.T) * (100.0 / images)
        means = paired_null.score(100.0 * flags.mean(axis=-1).astype(np.float64))
        boot = paired_null.score(np.moveaxis(drawn, -1, -2).astype(np.float64))
        d, d_boot = means[:, 1] - means[:, 0], np.swapaxes(boot[:, 1] - boot[:, 0], 1, 2)
        rows.extend(zip(d, d_boot))
    return rows


def rates(images: int, repeats: int) -> dict[str, dict[float, float]]:
    """shape -> floor -> the share of rows (%) with a seed apart."""
    out = {}
    for shape in SHAPES:
        rows = differences(shape, images, repeats)
        out[shape] = {floor: 100.0 * sum(apart(d, b, floor) is not None for d, b in rows) / len(rows)
                      for floor in FLOORS}
    return out


NORMAL = SHAPES[:3]  # the shapes with no collapse: what the floor must not flag more often
SLACK = 1.0  # points a normal shape may trip above its rate on the smallest size, no floor


def choose(found: dict[int, dict[str, dict[float, float]]]) -> float | None:
    """The rule (module docstring): the smallest floor at which, on every size, each normal
    shape trips at most SLACK points above its rate on the smallest size with no floor; None
    where no candidate does."""
    smallest = found[min(found)]
    return next((floor for floor in FLOORS
                 if all(table[shape][floor] <= smallest[shape][FLOORS[0]] + SLACK
                        for table in found.values() for shape in NORMAL)), None)


def page(command: str, found: dict[int, dict[str, dict[float, float]]], repeats: int,
         seconds: float) -> str:
    """The Markdown page: a table per test-set size, a column per floor."""
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True).stdout.strip() or "unknown"
    error = 100.0 * np.sqrt(0.05 * 0.95 / repeats)
    lines = ["# `paired.apart`'s floor in points, by test-set size", "",
             f"`{command}` at {revision} on {cpu_model()} "
             f"({seconds / 60:.0f} min). {repeats} rows a cell (Monte Carlo standard error at "
             f"5%: {error:.2f} points); a true gap of 0. The floor in use: "
             f"`paired.APART_POINTS` = {APART_POINTS:g}.", ""]
    for images, table in found.items():
        lines += [f"**{images} test images**: rows with a seed apart (%)", "",
                  "| seed effects (points) | " + " | ".join(f"floor {f:g}" for f in FLOORS) + " |",
                  "|---|" + "---:|" * len(FLOORS)]
        lines += [f"| {shape} | " + " | ".join(f"{table[shape][f]:.2f}" for f in FLOORS) + " |"
                  for shape in SHAPES]
        lines.append("")
    chosen = choose(found)
    lines.append(f"The rule picks: **floor {chosen:g}**" if chosen is not None else
                 "The rule picks: no candidate (every floor tried flags normal seeds too often)")
    lines.append(f"(`paired.APART_POINTS` is {APART_POINTS:g}"
                 + (")." if chosen == APART_POINTS else ": not what the rule picks here).") + "\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, nargs="+", default=[359, 1000, 5000, 10000])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/apart-floor.md")
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(n < 2 for n in args.images):
        parser.error("--repeats must be at least 1 and every --images at least 2")
    started = time.perf_counter()
    found = {images: rates(images, args.repeats) for images in args.images}
    command = ".venv/bin/python benchmarks/apart_floor.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = page(command, found, args.repeats, time.perf_counter() - started)
    args.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
