"""The number of jobs at a time changes no result: the demo's table on the test suite's tiny
params (seeds 1 and 2) built twice, with `--cores 1` and with `--cores 2`, then every metrics
file compared (per-image flags and accuracies, benchmarks/compare_metrics.py) and every tensor
of every checkpoint. Each job computes on one thread (`threads: 1`), so `make demo CORES=N`
only sets how many run side by side (docs/workflow.md).

    .venv/bin/python benchmarks/cores_parity.py --work /tmp/cores-parity   # ~3 min on 2 cores

Exit 0 when everything is the same, 1 when anything differs; the folder must be new or empty.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from compare_metrics import compare  # noqa: E402 - a sibling script

from tests.helpers.tiny import tiny_params  # noqa: E402
from tests.workflow.test_workflow import copy_workflow  # noqa: E402


def _differing_tensors(a: object, b: object, where: str = "") -> list[str]:
    """Where two loaded checkpoints hold tensors that are not equal (or not both there)."""
    if isinstance(a, torch.Tensor):
        return [] if isinstance(b, torch.Tensor) and torch.equal(a, b) else [where]
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in a for d in _differing_tensors(a[k], b.get(k), f"{where}/{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b))
                for d in _differing_tensors(x, y, f"{where}[{i}]")]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="a new or empty folder")
    args = parser.parse_args()
    if args.work.exists() and any(args.work.iterdir()):
        parser.error(f"{args.work} is not empty; pass a new folder")
    params = tiny_params()
    params["experiments"]["digits"]["seeds"] = [1, 2]
    runs = {}
    for cores in ("1", "2"):
        workdir = copy_workflow(args.work / f"cores{cores}", params)
        subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--cores", cores,
                        "--quiet", "--", "results/tables/digits.tex"], cwd=workdir, check=True)
        runs[cores] = workdir / "results"
    flags = compare(runs["1"], runs["2"], "digits")
    checkpoints = sorted(p.relative_to(runs["1"]) for p in runs["1"].glob("models/**/*.pt"))
    differing = [f"{rel}{where}" for rel in checkpoints for where in _differing_tensors(
        torch.load(runs["1"] / rel, weights_only=True),
        torch.load(runs["2"] / rel, weights_only=True))]
    print(f"checkpoints compared: {len(checkpoints)}; tensors differing: {len(differing)}"
          + "".join(f"\n  {d}" for d in differing))
    return int(bool(flags or differing or not checkpoints))


if __name__ == "__main__":
    raise SystemExit(main())
