"""How far `wscat add-dataset`'s cost line is from a real build: a subset of the embedded digits,
stored as a researcher would store their own images (uint8 0..255, its own test part), added
with add-dataset's defaults, then its table built and timed.

    .venv/bin/python benchmarks/add_dataset_cost.py [--images 875] [--out FILE.md]

It clones the repository's HEAD into a temporary folder (committed code only), writes
`mini.npz` there (`--images` digits drawn at random, a fifth of them its test part), runs
`wscat add-dataset mini mini.npz` (the cost line it prints is the estimate), then `snakemake
--cores 2 -- results/tables/mini.tex` under `time`, and `benchmarks/demo_profile.py` on its
results. Run it on a quiet machine: it takes about as long as `make demo`.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COST = re.compile(r"^cost: (~\S+ \S+) to build", re.M)


def write_subset(path: Path, images: int, seed: int = 0) -> tuple[int, int]:
    """`images` digits at random, as uint8 0..255 (the 17 grey levels x 255/16), the last fifth
    the test part. Returns (train, test) sizes."""
    sys.path.insert(0, str(ROOT))
    from wscat.data.sources.digits import load_digits_table

    pixels, target = load_digits_table()
    x = np.rint(pixels.reshape(-1, 8, 8, 1) * 255 / 16).astype(np.uint8)
    keep = np.random.default_rng(seed).permutation(len(target))[:images]
    x, y = x[keep], target[keep].astype(np.int64)
    cut = images * 4 // 5
    np.savez(path, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])
    return cut, images - cut


def run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"add_dataset_cost: {' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=875)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/add-dataset-cost.md")
    args = parser.parse_args()
    commit = run(["git", "rev-parse", "--short", "HEAD"], ROOT, dict(os.environ)).strip()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               "XDG_CACHE_HOME": str(Path(tmp) / "cache"), "DVC_NO_ANALYTICS": "1"}
        run(["git", "clone", "-q", str(ROOT), str(repo)], ROOT, env)
        train, test = write_subset(repo / "mini.npz", args.images)
        printed = run([str(BIN / "wscat"), "add-dataset", "mini", "mini.npz"], repo, env)
        estimate = COST.search(printed.replace("\n    ", " "))
        start = time.monotonic()
        run([str(BIN / "snakemake"), "--cores", "2", "--", "results/tables/mini.tex"], repo, env)
        seconds = time.monotonic() - start
        profile = run([sys.executable, str(ROOT / "benchmarks/demo_profile.py"), "--results",
                       "results"], repo, env)
    minutes, rest = divmod(round(seconds), 60)
    text = (f"# add-dataset's cost line against a real build\n\n"
            f"`.venv/bin/python benchmarks/add_dataset_cost.py --images {args.images}` at "
            f"{commit}, {time.strftime('%Y-%m-%d')}: {train} digits to train on and {test} test "
            "images of 8x8 (uint8, 17 grey levels x 255/16), added with add-dataset's defaults "
            "(eps 8/255, the demo's five methods, three seeds).\n\n"
            f"- add-dataset's cost line: **{estimate.group(1) if estimate else 'none printed'}**\n"
            f"- `snakemake --cores 2 -- results/tables/mini.tex`: **{minutes} min {rest} s**\n\n"
            "## Where its time went (`benchmarks/demo_profile.py`)\n\n" + profile)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
