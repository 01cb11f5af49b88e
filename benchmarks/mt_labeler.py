"""Mean Teacher as a labeler: its pseudo-label accuracy against Standard's, per seed.

The first GPU run of the proxy (benchmarks/results/cifar10-proxy-h100-seed1-partial.md) found
Mean Teacher's pseudo-labels 43% accurate against Standard's 74%; on digits, the demo's Mean
Teacher labels some seeds worse than Standard does. This trains, on a dataset's own split
(`wscat split`), Standard and Mean Teacher under the schedules given, with the project's steps
(`wscat train`, `wscat pseudo-label`), and reports the accuracy of each labeler's pseudo-labels
on the unlabelled training images (their true labels are read only to score them; nothing is
selected on the test set).

    .venv/bin/python benchmarks/mt_labeler.py --npz data/proxy/cifar10-proxy.npz --model cnn \\
        --threads 1 --tag cpu-cnn                                          # a CPU look, ~25 min
    python3 benchmarks/mt_labeler.py --npz data/proxy/cifar10-proxy.npz --device cuda \\
        --tag h100                                                         # WRN-16-4, a GPU
    .venv/bin/python benchmarks/mt_labeler.py --dataset digits --seeds 4 5 6 7 8 9 \\
        --runs standard mt mt:40:average mt:100:copy mt:100:average --tag digits

Runs: `standard` (the dataset's schedule), `mt` (Mean Teacher exactly as params.yaml has it) and
`mt:<epochs>:<copy|average>` (Mean Teacher with its own epochs and EMA buffers; its ramp-up
keeps its share of the run). Writes benchmarks/results/mt-labeler-<tag>.md.
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

from wscat.config import load_params, method_for, training_for, validate_params  # noqa: E402
from wscat.io import write_text  # noqa: E402
from wscat.steps import pseudo as pseudo_step, split as split_step  # noqa: E402
from wscat.steps import train as train_step  # noqa: E402

DEFAULT_RUNS = ["standard", "mt:15:copy", "mt:60:copy", "mt:60:average"]
PROXY = EXPERIMENT  # the proxy's experiment and dataset share the name


def configure(base: dict, run: str, dataset: str = PROXY) -> tuple[dict, str]:
    """params for one run ('standard', 'mt' or 'mt:<epochs>:<copy|average>'), and its method."""
    params = yaml.safe_load(yaml.safe_dump(base))
    if run == "mt":
        return validate_params(params), "mt"
    training = params["training"][dataset]
    training.pop("per_method", None)
    if run == "standard":
        return validate_params(params), "standard"
    own = training_for(base, dataset, "mt")["epochs"]
    _, epochs, buffers = run.split(":")
    training["per_method"] = {"mt": {"epochs": int(epochs), "ema_buffers": buffers}}
    rampup = method_for(base, "mt", dataset)["rampup_epochs"]
    params["methods"]["mt"].setdefault("per_dataset", {}).setdefault(dataset, {})[
        "rampup_epochs"] = max(1, round(int(epochs) * rampup / own))
    return validate_params(params), "mt"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def base_params(args: argparse.Namespace) -> tuple[dict, str]:
    """The params the runs start from, and the model key."""
    base = load_params(args.params)
    if args.dataset == PROXY:
        if args.npz is None:
            raise SystemExit("mt_labeler.py: the proxy needs --npz (its images as one npz)")
        base = proxy_params(base, seed=args.seeds[0], npz=args.npz.resolve(), epochs=None)
    if args.dataset not in base["datasets"]:
        raise SystemExit(f"mt_labeler.py: no dataset {args.dataset!r} in {args.params}")
    model = args.model or (base["experiments"].get(args.dataset) or {"model": "cnn"})["model"]
    if args.dataset == PROXY and model == "cnn":
        base["models"]["cnn"] = {"architecture": "cnn", "width": 16}
    if args.device == "cpu":  # bf16 autocast and channels_last are the GPU's switches
        base["training"][args.dataset].update(precision="fp32", channels_last=False)
    return base, model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=PROXY,
                        help="a datasets: key, generated ones too (e.g. digits-unlabelled10)")
    parser.add_argument("--npz", type=Path, default=None, help="the proxy's images as one npz")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--model", default=None,
                        help="a models: key (default: the experiment's); 'cnn' for the proxy "
                             "on a CPU")
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tag", required=True, help="names benchmarks/results/mt-labeler-TAG.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base, model = base_params(args)
    dataset, device = args.dataset, torch.device(args.device)
    accuracy: dict[str, list[float]] = {run: [] for run in args.runs}
    seconds = dict.fromkeys(args.runs, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            split = Path(tmp) / f"split-{seed}.npz"
            split_step.run(validate_params(base), dataset, seed, split)
            for run in args.runs:
                params, method = configure(base, run, dataset)
                out = Path(tmp) / f"{run.replace(':', '-')}-{seed}"
                started = time.monotonic()
                train_step.run(params, dataset=dataset, model=model, method=method, seed=seed,
                               split_path=split, pseudo_path=None, out_dir=out, device=device)
                seconds[run] += time.monotonic() - started
                report = pseudo_step.run(params, dataset=dataset, seed=seed, split_path=split,
                                         checkpoint=out / "best.pt", out=out / "pseudo.npz",
                                         metrics=out / "pseudo.json", labeler=method,
                                         device=device)
                accuracy[run].append(report["accuracy"])
                print(f"seed {seed} {run}: {report['accuracy']:.2f}", flush=True)
    machine = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else cpu_model()
    rows = []
    for run in args.runs:
        params, method = configure(base, run, dataset)
        values = accuracy[run]
        rows.append(f"| {run} | {training_for(params, dataset, method)['epochs']} | "
                    f"{seconds[run]:.0f} | " + " | ".join(f"{v:.2f}" for v in values)
                    + (f" | {sum(values) / len(values):.2f} | {min(values):.2f} |"
                       if len(values) > 1 else " |"))
    several = len(args.seeds) > 1
    page = (f"# Mean Teacher as the {dataset} labeler\n\n"
            f"`{' '.join(['benchmarks/mt_labeler.py', *sys.argv[1:]])}`\n\n"
            f"Model {model}, seeds {' '.join(map(str, args.seeds))}, {machine}, "
            f"{args.threads} thread(s). Pseudo-label accuracy on the {dataset} split's "
            "unlabelled training images (%), from the checkpoint the pipeline labels with "
            "(best.pt: Standard's by validation accuracy, Mean Teacher's the last); seconds of "
            "training, summed over the seeds.\n\n"
            "| run | epochs | seconds | " + " | ".join(f"seed {s}" for s in args.seeds)
            + (" | mean | min |" if several else " |") + "\n|---|---:|---:|"
            + "---:|" * (len(args.seeds) + 2 * several) + "\n" + "\n".join(rows) + "\n")
    target = ROOT / "benchmarks" / "results" / f"mt-labeler-{args.tag}.md"
    write_text(target, page)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
