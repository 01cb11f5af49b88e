"""How params.yaml's digits eps was chosen: Standard and TRADES (seed 1) at several eps.

    .venv/bin/python benchmarks/eps_calibration.py [--eps 0.1 0.15 0.2]

Step sizes follow CIFAR's ratios (training eps/4, evaluation eps/8). Prints one row per
(eps, method) with the six accuracies. About 1 minute per eps on a 2-core CPU.
"""
from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import torch

from wscat import pipeline
from wscat.config import load_params, validate_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.15, 0.2])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = load_params(args.params)
    print("eps    method    Natural  FGSM    PGD     CW      AA      Mean")
    with tempfile.TemporaryDirectory() as tmp:
        split = Path(tmp) / "split.npz"
        pipeline.run_split(base, "digits", 1, split)
        for eps in args.eps:
            params = copy.deepcopy(base)
            params["datasets"]["digits"].update(eps=eps, train_step_size=eps / 4,
                                                eval_step_size=eps / 8)
            validate_params(params)
            for method in ("standard", "trades"):
                out = Path(tmp) / f"{eps}-{method}"
                pipeline.run_train(params, dataset="digits", model="cnn", method=method, seed=1,
                                   split_path=split, pseudo_path=None, out_dir=out,
                                   device=torch.device("cpu"))
                result = pipeline.run_evaluate(params, dataset="digits", model="cnn", method=method,
                                               seed=1, split_path=split,
                                               checkpoint=out / "best.pt", out=out / "m.json",
                                               device=torch.device("cpu"))
                row = "  ".join(f"{v:6.2f}" for v in result["accuracy"].values())
                print(f"{eps:<6} {method:<9} {row}", flush=True)


if __name__ == "__main__":
    main()
