"""Where the images a knob was chosen on lie in the splits of the seeds it is used for.

No label outside the budget (docs/evaluation.md#no-label-outside-the-budget): a knob is chosen on
the labelled validation split. A labeler choice made on the validation images of some seeds
(`--chosen-on`) is then one number for every seed; in another seed's split, part of those
images are labelled, part validation, and part *unlabelled*, whose true labels the rule keeps for
reporting. This counts them, per seed, from the splits `wscat split` makes (the pipeline's own
split step, into a temporary folder); it trains nothing and reads no test label.

    .venv/bin/python benchmarks/choice_overlap.py --dataset digits --chosen-on 1 2 3 \\
        --seeds 1 2 3 10 11 12
    .venv/bin/python benchmarks/choice_overlap.py --npz data/proxy/cifar10-proxy.npz \\
        --chosen-on 1 --seeds 1 2 3

Writes benchmarks/results/choice-overlap-<dataset>.md (or `--out`).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cifar10_proxy import proxy_params  # noqa: E402
from wscat.config import load_params  # noqa: E402
from wscat.data.split import PARTS, Split  # noqa: E402
from wscat.steps import split as split_step  # noqa: E402

PROXY = "cifar10-proxy"


def splits(params: dict, dataset: str, seeds: list[int]) -> dict[int, Split]:
    """Each seed's split, as `wscat split` writes it."""
    with tempfile.TemporaryDirectory() as folder:
        return {seed: split_step.run(params, dataset, seed, Path(folder) / f"seed{seed}.npz")
                for seed in sorted(set(seeds))}


def overlap(chosen_on: np.ndarray, split: Split) -> dict[str, int]:
    """How many of the images `chosen_on` lie in each part of `split`."""
    return {part: int(np.isin(chosen_on, getattr(split, part)).sum()) for part in PARTS}


def page(dataset: str, command: str, chosen: list[int], rows: dict[int, dict[str, int]],
         n_chosen: int) -> str:
    """The Markdown page: a row per seed, the images of the choice in each part of its split."""
    seeds = ", ".join(str(s) for s in chosen)
    lines = [f"# Where a choice's validation images lie in each seed's split: {dataset}", "",
             f"`{command}`", "",
             f"The choice read the labels of the {n_chosen} labelled validation images of seed(s) "
             f"{seeds} (their union). In each seed's split, as `wscat split` makes it:", "",
             "| seed | in its labelled part | in its validation part | in its unlabelled part "
             "(labels the rule keeps for reporting) | in its test part |",
             "|---:|---:|---:|---:|---:|"]
    for seed, counts in rows.items():
        lines.append(f"| {seed} | {counts['labelled']} | {counts['validation']} | "
                     f"{counts['unlabelled']} | {counts['test']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=PROXY)
    parser.add_argument("--npz", type=Path, default=None, help="the proxy's images as one npz")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--chosen-on", type=int, nargs="+", required=True,
                        help="the seeds whose validation images the choice was scored on")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    params = load_params(args.params)
    if args.dataset == PROXY:
        if args.npz is None or not args.npz.is_file():
            print("choice_overlap.py: the proxy needs --npz, its images as one npz (a copy of "
                  "../shared/datasets/cifar10-proxy.npz)", file=sys.stderr)
            return 2
        params = proxy_params(params, seed=args.chosen_on[0], npz=args.npz.resolve(),
                              epochs=None)
    if args.dataset not in params["datasets"]:
        print(f"choice_overlap.py: no dataset {args.dataset!r} in {args.params}", file=sys.stderr)
        return 2
    made = splits(params, args.dataset, args.chosen_on + args.seeds)
    chosen_on = np.unique(np.concatenate([made[s].validation for s in args.chosen_on]))
    rows = {seed: overlap(chosen_on, made[seed]) for seed in args.seeds}
    command = "python benchmarks/choice_overlap.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    out = args.out or ROOT / "benchmarks" / "results" / f"choice-overlap-{args.dataset}.md"
    out.write_text(page(args.dataset, command, args.chosen_on, rows, len(chosen_on)))
    print(out.read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
