"""Mean Teacher and Standard as labelers: each labeler's accuracy on the labelled validation split
(the score a choice may use) and its pseudo-label accuracy (a diagnostic), per seed.

No label outside the budget (docs/evaluation.md#no-label-outside-the-budget): a knob is fixed
a priori or chosen on the labelled validation split, by the same procedure for every method it
touches. The *validation* column is that score: the labeler's checkpoint (the one the pipeline
labels with) on the split's labelled validation images.
The *pseudo-label* column reads the true labels of the unlabelled training images, which a user of
the method does not have: it is a diagnostic, printed to see what a choice did, and must never
pick a knob. Nothing here reads the test set.

This trains, on a dataset's own split (`wscat split`), the labelers under the schedules given,
with the project's steps (`wscat train`, `wscat pseudo-label`).

    .venv/bin/python benchmarks/mt_labeler.py --dataset digits --seeds 1 2 3 \\
        --runs standard standard:100 mt:40:copy mt:100:copy --tag digits-validation
    python3 benchmarks/mt_labeler.py --npz data/proxy/cifar10-proxy.npz --device cuda \\
        --runs standard standard:60 mt:15:copy mt:60:copy --tag h100        # WRN-16-4, a GPU
    .venv/bin/python benchmarks/mt_labeler.py --npz data/proxy/cifar10-proxy.npz --model cnn \\
        --threads 1 --tag cpu-cnn                                          # a CPU look, ~25 min

The committed mt-labeler-h100.md and mt-labeler-cpu-cnn.md ran under an older default,
`--runs standard mt:15:copy mt:60:copy mt:60:average`, when `standard` trained 15 epochs: their
pages give those runs.

Runs: `standard` and `mt` (the labeler exactly as params.yaml has it), `standard:<epochs>`
(Standard with its own epochs) and `mt:<epochs>:<copy|average>[:<warmup_fraction>]` (Mean Teacher
with its own epochs and EMA buffers; its ramp-up keeps its share of the run; a warm-up fraction
of 0 gives the learning rate a plain cosine). Writes
benchmarks/results/mt-labeler-<tag>.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import mps  # noqa: E402
from cifar10_proxy import EXPERIMENT, proxy_params  # noqa: E402

from wscat.config import load_params, method_for, training_for, validate_params  # noqa: E402
from wscat.data import load_dataset  # noqa: E402
from wscat.data.split import load_split  # noqa: E402
from wscat.inference import load_model, predict  # noqa: E402
from wscat.errors import OutputError  # noqa: E402
from wscat.io import guard_outputs, write_text  # noqa: E402
from wscat.steps import pseudo as pseudo_step, split as split_step  # noqa: E402
from wscat.steps import train as train_step  # noqa: E402

DEFAULT_RUNS = ["standard", "standard:60", "mt", "mt:60:copy"]  # both labelers, two lengths
PROXY = EXPERIMENT  # the proxy's experiment and dataset share the name


RUN_FIELDS = {"standard": (1, 2), "mt": (1, 3, 4)}  # 'standard[:E]', 'mt[:E:B[:W]]'


def configure(base: dict, run: str, dataset: str = PROXY) -> tuple[dict, str]:
    """params for one run ('standard', 'mt', 'standard:<epochs>' or
    'mt:<epochs>:<copy|average>[:<warmup_fraction>]', the last 0 for a plain cosine), and its
    method."""
    if labeler_of(run) not in ("mt", "standard"):
        raise ValueError(f"{labeler_of(run)!r} is not a labeler (standard or mt)")
    fields, allowed = run.count(":") + 1, RUN_FIELDS[labeler_of(run)]
    if fields not in allowed:  # else a field past the last known one would be ignored
        raise ValueError(f"{fields} ':'-separated fields, where {labeler_of(run)} takes "
                         + ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}")
    params = yaml.safe_load(yaml.safe_dump(base))
    if run in ("mt", "standard"):
        return validate_params(params), run
    per_method = params["training"][dataset].setdefault("per_method", {})
    if run.startswith("standard:"):  # the run's knobs over what params.yaml already sets
        per_method.setdefault("standard", {})["epochs"] = int(run.split(":")[1])
        return validate_params(params), "standard"
    own = training_for(base, dataset, "mt")["epochs"]
    _, epochs, buffers, *warmup = run.split(":")
    per_method.setdefault("mt", {}).update(epochs=int(epochs), ema_buffers=buffers)
    if warmup:
        per_method["mt"]["warmup_fraction"] = float(warmup[0])
    rampup = method_for(base, "mt", dataset)["rampup_epochs"]
    params["methods"]["mt"].setdefault("per_dataset", {}).setdefault(dataset, {})[
        "rampup_epochs"] = max(1, round(int(epochs) * rampup / own))
    return validate_params(params), "mt"


def labeler_of(run: str) -> str:
    """The labeler a run trains: 'standard' or 'mt'."""
    return run.split(":")[0]


def choose(validation: dict[str, list[float]], epochs: dict[str, int]) -> dict[str, str]:
    """The rule (benchmarks/results/labeler-choice-*.md): per labeler, the run with the higher
    validation score summed over the seeds; a tie goes to the run of fewer epochs (a longer run
    must earn its cost). Pseudo-label accuracy never enters."""
    chosen: dict[str, str] = {}
    for run in validation:
        best = chosen.get(labeler_of(run))
        if best is None or (sum(validation[run]), -epochs[run]) > (sum(validation[best]),
                                                                   -epochs[best]):
            chosen[labeler_of(run)] = run
    return chosen


TRAINER_DEFAULTS = {"ema_buffers": "copy"}  # a knob params.yaml may leave out (the schema)


def overrides(base: dict, run: str, dataset: str = PROXY) -> list[str]:
    """What params.yaml needs for `run` beside `base`, as 'dotted.key: value' lines: the knobs
    whose effective value differs (none for a run that is params.yaml as it is)."""
    params, method = configure(base, run, dataset)
    now, before = training_for(params, dataset, method), training_for(base, dataset, method)
    lines = [f"training.{dataset}.per_method.{method}.{key}: {now[key]}"
             for key in sorted(now) if key != "per_method"
             and now[key] != before.get(key, TRAINER_DEFAULTS.get(key))]
    if method == "mt":
        rampup = method_for(params, "mt", dataset)["rampup_epochs"]
        if rampup != method_for(base, "mt", dataset)["rampup_epochs"]:
            lines.append(f"methods.mt.per_dataset.{dataset}.rampup_epochs: {rampup}")
    return lines


def validation_accuracy(params: dict, dataset: str, split_path: Path, checkpoint: Path,
                        device: torch.device) -> float:
    """The labeler's accuracy (%) on the split's labelled validation images: the score a choice
    may use (docs/evaluation.md#no-label-outside-the-budget)."""
    split = load_split(split_path)
    source = load_dataset(dataset, params["datasets"][dataset])
    model, _ = load_model(checkpoint, device)
    index = torch.as_tensor(split.validation)
    predicted = predict(model, source.images[index], device)
    return 100.0 * float((predicted == source.labels[index]).float().mean())


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


def one_run(base: dict, run: str, dataset: str, model: str, seed: int, split: Path, out: Path,
            device: torch.device) -> dict[str, float]:
    """Train one labeler run on a seed's split; its validation accuracy (the score), its
    pseudo-label accuracy (a diagnostic) and its training seconds."""
    params, method = configure(base, run, dataset)
    started = time.monotonic()
    train_step.run(params, dataset=dataset, model=model, method=method, seed=seed,
                   split_path=split, pseudo_path=None, out_dir=out, device=device)
    seconds = time.monotonic() - started
    report = pseudo_step.run(params, dataset=dataset, seed=seed, split_path=split,
                             checkpoint=out / "best.pt", out=out / "pseudo.npz",
                             metrics=out / "pseudo.json", labeler=method, device=device)
    score = validation_accuracy(params, dataset, split, out / "best.pt", device)
    print(f"seed {seed} {run}: validation {score:.2f}, pseudo-labels {report['accuracy']:.2f} "
          f"(diagnostic), {seconds:.0f} s", flush=True)
    return {"validation": score, "accuracy": report["accuracy"], "seconds": seconds}


def in_parallel(args: argparse.Namespace, work: list[tuple[int, str, Path]],
                splits: dict[int, Path], tmp: Path) -> list[dict[str, float]]:
    """Every (seed, run) of `work` in its own process, `--jobs` at once, as clients of MPS where
    it runs (benchmarks/mps.py; `--mps`); the results in `work`'s order."""
    try:
        service, note = mps.start_as(args.mps, tmp / "mps", device=args.device)
    except mps.NotRunning as error:
        print(f"MPS: {error.note}", flush=True)
        raise SystemExit(f"mt_labeler.py: {error}") from None
    print(f"MPS: {note}", flush=True)
    env = {**(service.env if service else os.environ), "PYTHONUNBUFFERED": "1"}
    base_argv = [sys.executable, str(Path(__file__).resolve()), "--dataset", args.dataset,
                 "--params", str(args.params), "--device", args.device, "--threads",
                 str(args.threads), "--tag", args.tag, "--seeds", *map(str, args.seeds)]
    base_argv += ["--npz", str(args.npz)] if args.npz else []
    base_argv += ["--model", args.model] if args.model else []

    def launch(item: tuple[int, str, Path]) -> dict[str, float]:
        seed, run, out = item
        answer = out.with_suffix(".json")
        done = subprocess.run([*base_argv, "--worker", run, str(seed), str(splits[seed]),
                               str(out), str(answer)], env=env)
        if done.returncode != 0:
            raise SystemExit(f"mt_labeler.py: the run {run} on seed {seed} failed "
                             f"(exit {done.returncode})")
        return json.loads(answer.read_text())

    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            return list(pool.map(launch, work))
    finally:
        if service is not None:
            service.stop()


def worker(args: argparse.Namespace) -> int:
    """`--worker RUN SEED SPLIT OUT ANSWER`: one run of `in_parallel`, its result to ANSWER."""
    run, seed, split, out, answer = args.worker
    base, model = base_params(args)
    result = one_run(base, run, args.dataset, model, int(seed), Path(split), Path(out),
                     torch.device(args.device))
    write_text(Path(answer), json.dumps(result))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=PROXY,
                        help="a datasets: key, generated ones too (e.g. digits-unlabelled10)")
    parser.add_argument("--npz", type=Path, default=None, help="the proxy's images as one npz")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--model", default=None,
                        help="a models: key (default: the experiment's); 'cnn' for the proxy "
                             "on a CPU")
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS,
                        help="standard, mt, standard:EPOCHS or mt:EPOCHS:copy|average[:WARMUP] "
                             "(WARMUP: the learning rate warm-up's share of the epochs, 0 for a "
                             "plain cosine; default: " + " ".join(DEFAULT_RUNS) + ")")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tag", required=True, help="names benchmarks/results/mt-labeler-TAG.md")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each in its own process (they share the device)")
    parser.add_argument("--mps", choices=("auto", "on", "off"), default="auto",
                        help="with --jobs > 1 on a GPU: the runs as clients of NVIDIA's "
                             "Multi-Process Service (benchmarks/mps.py); auto: where it starts")
    parser.add_argument("--page", type=Path, default=None,
                        help="where to write the page (default benchmarks/results/"
                             "mt-labeler-TAG.md)")
    parser.add_argument("--worker", nargs=5, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        return worker(args)
    if args.jobs < 1:
        raise SystemExit(f"mt_labeler.py: --jobs {args.jobs}: give a whole number of at least 1")
    target = args.page or ROOT / "benchmarks" / "results" / f"mt-labeler-{args.tag}.md"
    try:  # the page is written last: refuse, before hours of training, one that is an input
        guard_outputs({"--params": args.params, "--npz": args.npz}, {"--page": target})
    except OutputError as error:
        print(f"mt_labeler.py: {error.strerror}", file=sys.stderr)
        return 2
    base, model = base_params(args)
    dataset, device = args.dataset, torch.device(args.device)
    # Before any training: a run named twice would count its seeds twice in the rule's sum, and
    # a run `configure` refuses would stop the script after the runs before it had trained.
    twice = sorted({run for run in args.runs if args.runs.count(run) > 1})
    if twice:
        print(f"mt_labeler.py: --runs names {', '.join(twice)} more than once; give each run "
              "once", file=sys.stderr)
        return 2
    epochs: dict[str, int] = {}
    for run in args.runs:
        try:
            params, method = configure(base, run, dataset)
        except ValueError as error:
            print(f"mt_labeler.py: --runs {run}: {error}; a run is standard, mt, "
                  "standard:<epochs> or mt:<epochs>:<copy|average>[:<warmup_fraction>]",
                  file=sys.stderr)
            return 2
        epochs[run] = training_for(params, dataset, method)["epochs"]
    accuracy: dict[str, list[float]] = {run: [] for run in args.runs}  # diagnostic only
    validation: dict[str, list[float]] = {run: [] for run in args.runs}
    seconds = dict.fromkeys(args.runs, 0.0)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        splits = {}
        for seed in args.seeds:
            splits[seed] = Path(tmp) / f"split-{seed}.npz"
            split_step.run(validate_params(base), dataset, seed, splits[seed])
        work = [(seed, run, Path(tmp) / f"{run.replace(':', '-')}-{seed}")
                for seed in args.seeds for run in args.runs]
        if args.jobs == 1:
            results = [one_run(base, run, dataset, model, seed, splits[seed], out, device)
                       for seed, run, out in work]
        else:
            results = in_parallel(args, work, splits, Path(tmp))
        for (seed, run, _), result in zip(work, results):
            seconds[run] += result["seconds"]
            accuracy[run].append(result["accuracy"])
            validation[run].append(result["validation"])
    wall = time.monotonic() - started
    machine = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else cpu_model()
    several = len(args.seeds) > 1

    def table(scores: dict[str, list[float]]) -> str:
        rows = []
        for run in args.runs:
            values = scores[run]
            rows.append(f"| {run} | {epochs[run]} | "
                        f"{seconds[run]:.0f} | " + " | ".join(f"{v:.2f}" for v in values)
                        + (f" | {sum(values) / len(values):.2f} | {min(values):.2f} |"
                           if several else " |"))
        return ("| run | epochs | seconds | " + " | ".join(f"seed {s}" for s in args.seeds)
                + (" | mean | min |" if several else " |") + "\n|---|---:|---:|"
                + "---:|" * (len(args.seeds) + 2 * several) + "\n" + "\n".join(rows) + "\n")

    page = (f"# Labelers on {dataset}: validation accuracy (the choice) and pseudo-label "
            "accuracy (a diagnostic)\n\n"
            f"`{' '.join(['benchmarks/mt_labeler.py', *sys.argv[1:]])}`\n\n"
            f"Model {model}, seeds {' '.join(map(str, args.seeds))}, {machine}, "
            f"{args.threads} thread(s), {args.jobs} run(s) at once, {wall:.0f} s in all. "
            "Each labeler's checkpoint is the one the pipeline labels "
            "with (best.pt: Standard's by validation accuracy, Mean Teacher's the last); seconds "
            "of training, summed over the seeds (with several runs at once, each run's own).\n\n"
            "## Accuracy on the labelled validation split (%): the score a choice may use\n\n"
            + table(validation) +
            "\n## Pseudo-label accuracy on the unlabelled training images (%): a diagnostic\n\n"
            "It reads the true labels of the unlabelled images, which a user of the method does "
            "not have (docs/evaluation.md#no-label-outside-the-budget): it says what a choice "
            "did and never makes one.\n\n"
            + table(accuracy))
    chosen = choose(validation, epochs)
    page += "\n## What the rule chose (higher validation sum; a tie to fewer epochs)\n\n"
    for labeler, run in chosen.items():
        lines = overrides(base, run, dataset)
        page += (f"- {labeler}: **{run}** ({epochs[run]} epochs); params.yaml "
                 + ("as it is" if not lines else "needs: " + "; ".join(f"`{line}`"
                                                                      for line in lines)) + "\n")
        print(f"chosen for {labeler}: {run}" + (f" ({'; '.join(lines)})" if lines else
                                                 " (params.yaml as it is)"), flush=True)
    write_text(target, page)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
