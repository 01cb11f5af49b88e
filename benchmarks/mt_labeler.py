"""Mean Teacher as the CIFAR-10 proxy's labeler: its pseudo-label accuracy against Standard's.

The first GPU run of the proxy (benchmarks/results/cifar10-proxy-h100-seed1-partial.md) found
Mean Teacher's pseudo-labels 43% accurate against Standard's 74%. This trains, on the proxy's own
split (`wscat split`: 3,200 labelled, 800 validation, 11,000 unlabelled), Standard and Mean
Teacher under the schedules given, with the project's steps (`wscat train`, `wscat pseudo-label`),
and reports the accuracy of each labeler's pseudo-labels on the unlabelled images (their true
labels are read only to score them; nothing is selected on the test set).

    .venv/bin/python benchmarks/mt_labeler.py --npz data/proxy/cifar10-proxy.npz --model cnn \\
        --threads 1 --tag cpu-cnn                                          # a CPU look, ~25 min
    python3 benchmarks/mt_labeler.py --npz data/proxy/cifar10-proxy.npz --device cuda \\
        --tag h100                                                         # WRN-16-4, a GPU

Runs: `standard` (the proxy's 15 epochs) and `mt:<epochs>:<copy|average>` (Mean Teacher with its
own epochs and EMA buffers; the ramp-up stays a third of the run). Writes
benchmarks/results/mt-labeler-<tag>.md.
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cifar10_proxy import EXPERIMENT, proxy_params  # noqa: E402

from wscat.config import load_params, training_for, validate_params  # noqa: E402
from wscat.io import write_text  # noqa: E402
from wscat.steps import pseudo as pseudo_step, split as split_step  # noqa: E402
from wscat.steps import train as train_step  # noqa: E402

DEFAULT_RUNS = ["standard", "mt:15:copy", "mt:60:copy", "mt:60:average"]
DATASET = EXPERIMENT  # the proxy's experiment and dataset share the name


def configure(base: dict, run: str) -> tuple[dict, str]:
    """params for one run ('standard' or 'mt:<epochs>:<copy|average>'), and its method."""
    params = yaml.safe_load(yaml.safe_dump(base))
    dataset = DATASET
    training = params["training"][dataset]
    training.pop("per_method", None)
    if run == "standard":
        return validate_params(params), "standard"
    _, epochs, buffers = run.split(":")
    training["per_method"] = {"mt": {"epochs": int(epochs), "ema_buffers": buffers}}
    params["methods"]["mt"].setdefault("per_dataset", {}).setdefault(dataset, {})[
        "rampup_epochs"] = max(1, round(int(epochs) / 3))
    return validate_params(params), "mt"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npz", type=Path, required=True, help="the proxy's images as one npz")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--model", default="wrn-16-4", help="a models: key, or 'cnn' on a CPU")
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tag", required=True, help="names benchmarks/results/mt-labeler-TAG.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = proxy_params(load_params(args.params), seed=args.seed, npz=args.npz.resolve(),
                        epochs=None)
    if args.model == "cnn":
        base["models"]["cnn"] = {"architecture": "cnn", "width": 16}
    if args.device == "cpu":  # bf16 autocast and channels_last are the GPU's switches
        base["training"][DATASET].update(precision="fp32", channels_last=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        split = Path(tmp) / "split.npz"
        split_step.run(validate_params(base), DATASET, args.seed, split)
        for run in args.runs:
            params, method = configure(base, run)
            out = Path(tmp) / run.replace(":", "-")
            started = time.monotonic()
            train_step.run(params, dataset=DATASET, model=args.model, method=method,
                           seed=args.seed, split_path=split, pseudo_path=None, out_dir=out,
                           device=torch.device(args.device))
            seconds = time.monotonic() - started
            report = pseudo_step.run(params, dataset=DATASET, seed=args.seed, split_path=split,
                                     checkpoint=out / "best.pt", out=out / "pseudo.npz",
                                     metrics=out / "pseudo.json", labeler=method,
                                     device=torch.device(args.device))
            epochs = training_for(params, DATASET, method)["epochs"]
            rows.append(f"| {run} | {epochs} | {seconds:.0f} | {report['accuracy']:.2f} |")
            print(rows[-1], flush=True)
    machine = (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
               else cpu_model())
    page = ("# Mean Teacher as the CIFAR-10 proxy's labeler\n\n"
            f"`{' '.join(['benchmarks/mt_labeler.py', *sys.argv[1:]])}`\n\n"
            f"Model {args.model}, seed {args.seed}, {machine}, {args.threads} thread(s). "
            "Pseudo-label accuracy on the proxy's 11,000 unlabelled images (%), from the "
            "checkpoint the pipeline labels with (best.pt: Standard's by validation accuracy, "
            "Mean Teacher's the last).\n\n"
            "| run | epochs | seconds | pseudo-label accuracy |\n|---|---:|---:|---:|\n"
            + "\n".join(rows) + "\n")
    target = ROOT / "benchmarks" / "results" / f"mt-labeler-{args.tag}.md"
    write_text(target, page)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
