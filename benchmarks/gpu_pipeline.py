"""The paper-tier chain on a GPU, small: a CIFAR-10 archive in the official format (built here,
tinted noise), WRN-16-4, the CIFAR-10 training config (bf16, channels_last, deterministic),
split → Mean Teacher → pseudo-labels → WSCAT twice → evaluate both. Checks that the two WSCAT
runs are bit for bit and their metrics equal, and prints seconds per epoch.

    python benchmarks/gpu_pipeline.py [--model wrn-16-4] [--per-class 300] [--epochs 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from archives import write_cifar10  # noqa: E402

from wscat.steps import evaluate as evaluate_step, pseudo as pseudo_step  # noqa: E402
from wscat.steps import split as split_step, train as train_step  # noqa: E402
from wscat.checkpoint import load_checkpoint  # noqa: E402
from wscat.config import load_params  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="wrn-16-4")
    parser.add_argument("--per-class", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    work = Path(tempfile.mkdtemp(prefix="wscat-gpu-"))
    md5 = write_cifar10(work / "raw", train_per_class=args.per_class, test_per_class=20)
    params = load_params(ROOT / "params.yaml")
    params["datasets"]["cifar10"].update(root=str(work / "raw"), md5=md5, download=False,
                                         labelled=min(400, 5 * args.per_class))
    params["training"]["cifar10"].update(epochs=args.epochs)
    params["evaluation"]["n_examples"] = 200
    params["evaluation"]["per_dataset"]["cifar10"] = {"autoattack": {"n_examples": 50}}
    common = {"dataset": "cifar10", "model": args.model, "seed": 1}
    split = work / "split.npz"
    split_step.run(params, "cifar10", 1, split)
    started = time.perf_counter()
    train_step.run(params, **common, method="mt", split_path=split, pseudo_path=None,
                   out_dir=work / "mt", device=device)
    print(f"mean teacher: {(time.perf_counter() - started) / args.epochs:.1f} s/epoch", flush=True)
    pseudo = work / "pseudo.npz"
    report = pseudo_step.run(params, dataset="cifar10", seed=1, split_path=split,
                             checkpoint=work / "mt/best.pt", out=pseudo,
                             metrics=work / "pseudo.json", labeler="mt", device=device)
    print(f"pseudo-label accuracy {report['accuracy']:.1f}%", flush=True)
    metrics = []
    for run in ("a", "b"):
        started = time.perf_counter()
        train_step.run(params, **common, method="wscat", split_path=split, pseudo_path=pseudo,
                       out_dir=work / run, device=device)
        print(f"wscat run {run}: {(time.perf_counter() - started) / args.epochs:.1f} s/epoch "
              f"({params['training']['cifar10']['precision']}, channels_last "
              f"{params['training']['cifar10']['channels_last']}, deterministic "
              f"{params['training']['cifar10']['deterministic']})", flush=True)
        started = time.perf_counter()
        result = evaluate_step.run(params, **common, method="wscat", split_path=split,
                                   checkpoint=work / run / "best.pt",
                                   out=work / f"{run}.json", device=device)
        print(f"evaluate {run}: {time.perf_counter() - started:.1f} s "
              f"{json.dumps(result['accuracy'])}", flush=True)
        metrics.append(result["accuracy"])
    first = load_checkpoint(work / "a/last.pt", map_location="cpu")["model"]
    second = load_checkpoint(work / "b/last.pt", map_location="cpu")["model"]
    same = all(torch.equal(first[k], second[k]) for k in first)
    print(f"{'PASS' if same else 'FAIL'} two WSCAT runs give bit-identical weights")
    print(f"{'PASS' if metrics[0] == metrics[1] else 'FAIL'} and identical metrics")
    return 0 if same and metrics[0] == metrics[1] else 1


if __name__ == "__main__":
    sys.exit(main())
