"""How far `wscat add-dataset`'s cost line is from a real build: a subset of the embedded digits,
stored as a researcher would store their own images (uint8 0..255, its own test part), added
with add-dataset's defaults, then its table built and timed.

    .venv/bin/python benchmarks/add_dataset_cost.py [--images 875] [--out FILE.md]
    .venv/bin/python benchmarks/add_dataset_cost.py --npz FILE.npz [--seed 1] [--out FILE.md]

It clones the repository's HEAD into a temporary folder (committed code only), writes
`mini.npz` there (`--images` digits drawn at random, a fifth of them its test part; or copies
`--npz`, your own images), runs `wscat add-dataset mini mini.npz` (the cost line it prints is
the estimate), then `snakemake --cores 2 -- results/tables/mini.tex` under `time`, and
`benchmarks/demo_profile.py` on its results. With `--seed S` it builds only that seed's metrics
files (every method's, the labelers' pseudo-labels on the way) and sets them beside the estimate's
share of one seed (the estimate is linear in the seeds): a third of the time for a dataset whose
whole build takes hours. Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from wscat.config import load_params  # noqa: E402
from wscat.paths import METRICS, fill  # noqa: E402
from wscat.steps.add_dataset import inspect  # noqa: E402
from wscat.steps.add_dataset_summary import about, cost_seconds  # noqa: E402

BIN = Path(sys.executable).parent
COST = re.compile(r"^cost: (~\S+ \S+) to build", re.M)


def write_subset(path: Path, images: int, seed: int = 0) -> tuple[int, int]:
    """`images` digits at random, as uint8 0..255 (the 17 grey levels x 255/16), the last fifth
    the test part. Returns (train, test) sizes."""
    from wscat.data.sources.digits import load_digits_table

    pixels, target = load_digits_table()
    x = np.rint(pixels.reshape(-1, 8, 8, 1) * 255 / 16).astype(np.uint8)
    keep = np.random.default_rng(seed).permutation(len(target))[:images]
    x, y = x[keep], target[keep].astype(np.int64)
    cut = images * 4 // 5
    np.savez(path, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])
    return cut, images - cut


def seed_targets(params: dict, name: str, seed: int) -> list[str]:
    """One seed's metrics files, a file per method of experiment `name` (the labelers' trainings
    and pseudo-labels come with them)."""
    experiment = params["experiments"][name]
    if seed not in experiment["seeds"]:
        print(f"add_dataset_cost: --seed {seed} is not one of {name}'s seeds "
              f"{experiment['seeds']}; pass one of them", file=sys.stderr)
        sys.exit(2)
    return [fill(METRICS, dataset=name, model=experiment["model"], method=method, seed=seed)
            for method in experiment["methods"]]


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"add_dataset_cost: {' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=875)
    parser.add_argument("--npz", type=Path, help="your own images instead of the digits subset")
    parser.add_argument("--seed", type=int, help="build only this seed's metrics files")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/add-dataset-cost.md, "
                        "with --npz add-dataset-cost-NAME.md (NAME: the npz's)")
    args = parser.parse_args()
    if args.npz and not args.npz.is_file():
        print(f"add_dataset_cost: --npz {args.npz} is not a file; pass your images' .npz",
              file=sys.stderr)
        sys.exit(2)
    if args.out is None:
        args.out = ROOT / "benchmarks/results" / (
            f"add-dataset-cost-{args.npz.stem}.md" if args.npz else "add-dataset-cost.md")
    if args.npz and args.out.resolve() == args.npz.resolve():
        print(f"add_dataset_cost: --out {args.out} is the --npz it reads; write the page elsewhere",
              file=sys.stderr)
        sys.exit(2)
    commit = run(["git", "rev-parse", "--short", "HEAD"], ROOT, dict(os.environ)).strip()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               "XDG_CACHE_HOME": str(Path(tmp) / "cache"), "DVC_NO_ANALYTICS": "1"}
        run(["git", "clone", "-q", str(ROOT), str(repo)], ROOT, env)
        if args.npz:
            shutil.copyfile(args.npz, repo / "mini.npz")
        else:
            write_subset(repo / "mini.npz", args.images)
        printed = run([str(BIN / "wscat"), "add-dataset", "mini", "mini.npz"], repo, env)
        estimate = COST.search(printed.replace("\n    ", " "))
        params = load_params(repo / "params.yaml")
        summary = inspect("mini", repo / "mini.npz")
        seconds_estimated = cost_seconds("mini", params, summary)
        targets = (seed_targets(params, "mini", args.seed) if args.seed is not None
                   else ["results/tables/mini.tex"])
        seeds = len(params["experiments"]["mini"]["seeds"])
        start = time.monotonic()
        run([str(BIN / "snakemake"), "--cores", "2", "--", *targets], repo, env)
        seconds = time.monotonic() - start
        profile = run([sys.executable, str(ROOT / "benchmarks/demo_profile.py"), "--results",
                       "results"], repo, env)
    minutes, rest = divmod(round(seconds), 60)
    flags = (f"--npz {args.npz}" if args.npz else f"--images {args.images}") + (
        f" --seed {args.seed}" if args.seed is not None else "")
    what = (f"{summary.pool} images to train on and {summary.test} test images of "
            f"{summary.shape[1]}x{summary.shape[2]}x{summary.shape[0]} from `{args.npz.name}`"
            if args.npz else f"{summary.pool} digits to train on and {summary.test} test images "
            "of 8x8 (uint8, 17 grey levels x 255/16)")
    built = (f"seed {args.seed}'s metrics files (`snakemake --cores 2 -- {' '.join(targets)}`)"
             if args.seed is not None else "`snakemake --cores 2 -- results/tables/mini.tex`")
    share = ""
    if args.seed is not None and seconds_estimated is not None:
        share = (f"- its share of one seed of {seeds}: **{about(seconds_estimated / seeds)}** "
                 f"({seconds_estimated / seeds:.0f} s)\n")
    line = estimate.group(1) if estimate else "none printed"
    if seconds_estimated is not None:
        line += f" ({seconds_estimated:.0f} s)"
    text = (f"# add-dataset's cost line against a real build\n\n"
            f"`.venv/bin/python benchmarks/add_dataset_cost.py {flags}` at "
            f"{commit}, {time.strftime('%Y-%m-%d')}: {what}, added with add-dataset's defaults "
            "(eps 8/255, the demo's five methods, three seeds).\n\n"
            f"- add-dataset's cost line: **{line}**\n" + share)
    text += (f"- {built}: **{minutes} min {rest} s** ({seconds:.0f} s)\n\n"
             "## Where its time went (`benchmarks/demo_profile.py`)\n\n" + profile)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
