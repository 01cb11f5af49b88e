"""The CIFAR-10 proxy for one seed in one GPU call (docs/paper-scale.md, "CIFAR-10 proxy").

The same `wscat` steps the Snakemake rules run for `results/tables/cifar10-proxy.tex` and
`results/paper/cifar10-proxy/`: split -> Mean Teacher and Standard (the labelers) -> pseudo-labels
-> Standard, TRADES, WSCAT-sup, MT, RST, WSCAT -> the attack suite on every test image -> Table 2
(WSCAT, Zhang et al., CVPR 2025), its companion beside the paper's CIFAR-10 numbers, training
curves. The lent GPU machine has no Snakemake, so benchmarks/jobrunner.py runs the steps in
dependency order, a few at a time. Progress goes to stdout and OUT/progress.log; OUT gets
summary.md (machine, timings, tables) and results.tar.gz (tables, metrics, logs, curves).

    python benchmarks/cifar10_proxy.py --npz data/proxy/cifar10-proxy.npz --seed 1 --out "$OUT"
    python benchmarks/cifar10_proxy.py --params tiny.yaml --jobs 2 --out /tmp/proxy   # a CPU check

Rerunning the same command continues where the last call stopped: a step whose output files are
all in --results (results/, git-ignored, so it stays on a warm lent machine) is kept, not rerun
("kept" in the progress and the summary); a step killed at --deadline left none of its outputs
and runs again, resuming (training from <model dir>/resume/, AutoAttack from its finished shards
in <metrics>.shards/). To start over, delete --results (or pass another); with other params
(e.g. --epochs) than the ones --results was made with, the script stops and says so.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import platform
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
MISSING = ("jsonschema", "dvclive", "pyautoattack")  # not on the lent machine: carried as wheels
if any(importlib.util.find_spec(name) is None for name in MISSING):
    sys.exit(f"cifar10_proxy: needs {', '.join(MISSING)}; on a lent GPU machine install the "
             "carried wheels first (DEVELOPERS.md, 'The CIFAR-10 proxy on a lent GPU')")

from jobrunner import Job, echo, run_jobs, tail  # noqa: E402

from wscat.config import evaluation_for, load_params, method_for, training_for  # noqa: E402
from wscat.io import atomic_path, write_text  # noqa: E402
from wscat.report import paper  # noqa: E402

EXPERIMENT = TIER = "cifar10-proxy"


def proxy_params(base: dict[str, Any], *, seed: int, npz: Path | None,
                 epochs: int | None) -> dict[str, Any]:
    """params.yaml as the run uses it: one seed; with `npz`, the offline source of the same
    images (CIFAR-10's normalisation, as the archive source gives); `epochs` overrides."""
    from wscat.data.sources.cifar import CIFAR10

    params = yaml.safe_load(yaml.safe_dump(base))
    experiment = params["experiments"][EXPERIMENT]
    experiment["seeds"] = [seed]
    dataset = experiment["dataset"]
    if npz is not None:
        entry = params["datasets"][dataset]
        for key in ("root", "download", "md5"):  # the archive's knobs
            entry.pop(key, None)
        entry.update(source="npz", path=str(npz), mean=list(CIFAR10.mean), std=list(CIFAR10.std))
    if epochs is not None:  # every run, the per-method schedules (Mean Teacher's) too
        training = params["training"][dataset]
        training["epochs"] = epochs
        for method, knobs in list((training.get("per_method") or {}).items()):
            knobs.pop("epochs", None)
            if not knobs:
                del training["per_method"][method]
        if not training.get("per_method", True):
            del training["per_method"]
    return params


def build_jobs(params: dict[str, Any], params_file: Path, seed: int, results: Path,
               threads: int) -> list[Job]:
    """Every step of one seed, in the order they should start when ready (longest chains
    first), with the command lines of the Snakemake rules."""
    experiment = params["experiments"][EXPERIMENT]
    dataset, model, methods = experiment["dataset"], experiment["model"], experiment["methods"]
    root = str(results)
    wscat = [sys.executable, "-m", "wscat"]
    common = ["--params", str(params_file), "--dataset", dataset, "--seed", str(seed)]
    split = paper.Run(dataset, "", "", seed).split(root)
    logs = results / "logs" / "proxy"
    jobs = [Job("split", [*wscat, "split", *common, "--out", split], [], [Path(split)])]
    labelers = [m for m in dict.fromkeys(method_for(params, m, dataset).get("labeler")
                                         for m in methods) if m]
    order = labelers + [m for m in methods if m not in labelers
                        and method_for(params, m, dataset)["data"] != "pseudo"]
    order += [m for m in methods if m not in order]
    checkpoint = evaluation_for(params, dataset)["checkpoint"]
    for method in order:
        run = paper.Run(dataset, model, method, seed)
        argv = [*wscat, "train", *common, "--model", model, "--method", method, "--split", split,
                "--out-dir", run.model_dir(root), "--threads", str(threads)]
        deps = ["split"]
        labeler = method_for(params, method, dataset).get("labeler")
        if labeler:
            argv += ["--pseudo", f"{root}/pseudo/{dataset}/{model}/{labeler}/seed{seed}.npz"]
            deps.append(f"pseudo-label {labeler}")
        model_dir = Path(run.model_dir(root))  # what a finished training leaves (resume/ goes)
        jobs.append(Job(f"train {method}", argv, deps,
                        [model_dir / name for name in ("best.pt", "last.pt", "train_log.csv")]))
        if method in labelers:
            out = f"{root}/pseudo/{dataset}/{model}/{method}/seed{seed}"
            jobs.append(Job(f"pseudo-label {method}", [
                *wscat, "pseudo-label", *common, "--model", model, "--labeler", method,
                "--split", split, "--checkpoint", run.checkpoint(root), "--out", f"{out}.npz",
                "--metrics", f"{out}.json", "--threads", str(threads)], [f"train {method}"],
                [Path(f"{out}.npz"), Path(f"{out}.json")]))
    for method in reversed(order):  # the semi-supervised runs finish last: evaluate them first
        run = paper.Run(dataset, model, method, seed)
        evaluate = [*wscat, "evaluate", *common, "--model", model, "--method", method,
                    "--split", split, "--checkpoint", f"{run.model_dir(root)}/{checkpoint}.pt",
                    "--threads", str(threads)]
        jobs.append(Job(f"evaluate {method}", [*evaluate, "--part", "core", "--out",
                                               run.metrics(root)], [f"train {method}"],
                        [Path(run.metrics(root))]))
        jobs.append(Job(f"evaluate-extra {method}", [
            *evaluate, "--part", "extra", "--core", run.metrics(root), "--out", run.extra(root)],
            [f"evaluate {method}"], [Path(run.extra(root))]))
    jobs += report_jobs(params, params_file, seed, results, wscat)
    for job in jobs:
        job.log = logs / (job.name.replace(" ", "-") + ".log")
    return jobs


def report_jobs(params: dict[str, Any], params_file: Path, seed: int, results: Path,
                wscat: list[str]) -> list[Job]:
    """Table 2 of the experiment, the tier's tables, the companion and the training curves."""
    experiment = params["experiments"][EXPERIMENT]
    dataset, model, methods = experiment["dataset"], experiment["model"], experiment["methods"]
    root = str(results)
    runs = [paper.Run(dataset, model, m, seed) for m in methods]
    core = [f"evaluate {m}" for m in methods]
    evaluated = core + [f"evaluate-extra {m}" for m in methods]
    tables = f"{root}/tables/{EXPERIMENT}"
    written = {"--tex": f"{tables}.tex", "--csv": f"{tables}.csv",
               "--summary": f"{root}/metrics/{EXPERIMENT}.json", "--md": f"{tables}.md",
               "--paired-csv": f"{tables}-paired.csv", "--paired-tex": f"{tables}-paired.tex"}
    jobs = [Job("table", [*wscat, "table", "--params", str(params_file), "--experiment",
                          EXPERIMENT, *[a for item in written.items() for a in item],
                          *[run.metrics(root) for run in runs]], core,
                [Path(path) for path in written.values()])]
    out = f"{root}/paper/{TIER}"
    for label in paper.table_labels(params, TIER):
        jobs.append(Job(f"paper-table {label}", [
            *wscat, "paper-table", "--params", str(params_file), "--tier", TIER, "--label", label,
            "--tex", f"{out}/{label}.tex", "--csv", f"{out}/{label}.csv", "--results", root],
            evaluated if label != "Tab-datasets" else ["split"],
            [Path(f"{out}/{label}.tex"), Path(f"{out}/{label}.csv")]))
        if paper.has_companion(params, TIER, label):
            cells = paper.paper_cells(params, TIER, label)
            jobs.append(Job(f"paper-compare {label}", [
                *wscat, "paper-compare", "--label", label, "--table-csv", f"{out}/{label}.csv",
                "--tex", f"{out}/{label}-vs-paper.tex", "--csv", f"{out}/{label}-vs-paper.csv",
                *(["--paper-cells", *cells] if cells else [])], [f"paper-table {label}"],
                [Path(f"{out}/{label}-vs-paper.tex"), Path(f"{out}/{label}-vs-paper.csv")]))
    for run in runs:
        jobs.append(Job(f"curves {run.method}", [
            *wscat, "curves", "--train-log", run.train_log(root), "--out", run.curves(root),
            "--title", f"{dataset} / {model} / {run.method} / seed {seed}"],
            [f"train {run.method}"], [Path(run.curves(root) + ".pdf"),
                                      Path(run.curves(root) + ".png")]))
    return jobs


def epoch_note(job: Job, epochs: int | None = None) -> str:
    """'(epoch k/epochs done)' of a running training job: while it trains, from the DVCLive
    summary the trainer rewrites after every epoch (<out-dir>/dvclive/metrics.json, whose "step"
    is the 1-based epoch); once it has finished, from its train_log.csv; '(epoch 1)' before the
    first epoch ends."""
    if not job.name.startswith("train "):
        return ""
    out_dir = Path(job.argv[job.argv.index("--out-dir") + 1])
    done = _live_step(out_dir / "dvclive" / "metrics.json") or _logged(out_dir / "train_log.csv")
    if not done:
        return "(epoch 1)"
    return f"(epoch {done}{f'/{epochs}' if epochs else ''} done)"


def _live_step(summary: Path) -> int:
    """The step of a DVCLive summary; 0 where there is none (or it is being rewritten)."""
    try:
        return int(json.loads(summary.read_text()).get("step", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def _logged(train_log: Path) -> int:
    """The epochs a train_log.csv holds (its rows, not its header); 0 where there is none."""
    if not train_log.is_file():
        return 0
    with open(train_log, newline="") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def wide(path: Path, cell: str = "mean") -> str:
    """A long table CSV (method, metric, ...) as Markdown: a row per method, a column per metric;
    `cell`: the CSV column shown ('mean'), or columns joined by '+' ('ours+paper')."""
    if not path.is_file():
        return f"({path.name} was not made)\n"
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    methods = list(dict.fromkeys(row["method"] or row["dataset"] for row in rows))
    metrics = list(dict.fromkeys(row["metric"] for row in rows))
    cells = {(row["method"] or row["dataset"], row["metric"]):
             " / ".join(row[c] for c in cell.split("+")) for row in rows}
    lines = ["| | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    lines += [f"| {m} | " + " | ".join(cells.get((m, k), "") for k in metrics) + " |"
              for m in methods]
    return "\n".join(lines) + "\n"


def machine() -> str:
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() \
        or platform.machine()
    return f"{device}; torch {torch.__version__}; python {platform.python_version()}"


def summary(params: dict[str, Any], jobs: list[Job], results: Path, seed: int,
            npz: Path | None, elapsed: float) -> str:
    """summary.md: what ran where, how long each step took, and the tables."""
    experiment = params["experiments"][EXPERIMENT]
    dataset = experiment["dataset"]
    training = params["training"][dataset]
    out = results / "paper" / TIER
    text = io.StringIO()
    text.write(f"# CIFAR-10 proxy, seed {seed}\n\n- machine: {machine()}\n"
               f"- data: {npz or params['datasets'][dataset].get('root', 'data/raw')} "
               f"(subset {params['datasets'][dataset].get('subset')})\n"
               f"- model {experiment['model']}, {training['epochs']} epochs{_longer(params)}, "
               f"{training['precision']}, channels_last {training['channels_last']}, "
               f"deterministic {training['deterministic']}\n- wall time {elapsed:.0f} s\n\n"
               "## Steps\n\n")
    if any(job.kept for job in jobs):
        text.write("kept: done by an earlier call on the same results; its outputs were there, "
                   "so it did not run again (0 s here).\n\n")
    text.write("| step | status | seconds |\n|---|---|---|\n")
    text.writelines(f"| {job.name} | {'kept' if job.kept else job.status} | {job.seconds:.0f} |\n"
                    for job in jobs)
    for name, path, cell in (
            ("Table 2, accuracy (%)", out / "Tab-RQ1-CIFAR10.csv", "mean"),
            ("Ours / the paper's CIFAR-10 WRN-28-10 (Table 2)",
             out / "Tab-RQ1-CIFAR10-vs-paper.csv", "ours+paper"),
            ("Tab-datasets", out / "Tab-datasets.csv", "mean")):
        text.write(f"\n## {name}\n\n{wide(path, cell)}")
    text.write("\n## Per run (also when the tables were not made)\n\n"
               "| method | epochs | s/epoch | accuracy (%) |\n|---|---|---|---|\n")
    for method in experiment["methods"]:
        run = paper.Run(dataset, experiment["model"], method, seed)
        text.write(f"| {method} | {_epochs(Path(run.train_log(str(results))))} | "
                   f"{_accuracies(Path(run.metrics(str(results))))} |\n")
    for pseudo in sorted((results / "pseudo").glob(f"{dataset}/*/*/seed{seed}.json")):
        report = json.loads(pseudo.read_text())
        text.write(f"\npseudo-label accuracy of {pseudo.parent.name} on the {report.get('n')} "
                   f"unlabelled images: {report['accuracy']:.2f}%\n")
    for job in jobs:
        if job.status in ("failed", "killed"):
            text.write(f"\n## {job.name}: {job.status}\n\n```\n{tail(job.log)}\n```\n")
    return text.getvalue()


def _longer(params: dict[str, Any]) -> str:
    """' (mt: 60)': the methods that train other epochs (training.<dataset>.per_method)."""
    experiment = params["experiments"][EXPERIMENT]
    dataset = experiment["dataset"]
    epochs = params["training"][dataset]["epochs"]
    own = {m: e for m in experiment["methods"]
           if (e := training_for(params, dataset, m)["epochs"]) != epochs}
    return f" ({', '.join(f'{m}: {e}' for m, e in own.items())})" if own else ""


def _epochs(train_log: Path) -> str:
    """'epochs | mean seconds an epoch' from a train_log.csv."""
    if not train_log.is_file():
        return "- | -"
    with open(train_log, newline="") as handle:
        seconds = [float(row["seconds"]) for row in csv.DictReader(handle) if row.get("seconds")]
    return f"{len(seconds)} | {sum(seconds) / max(len(seconds), 1):.1f}"


def _accuracies(metrics: Path) -> str:
    if not metrics.is_file():
        return "-"
    accuracy = json.loads(metrics.read_text())["accuracy"]
    return ", ".join(f"{name} {value:.2f}" for name, value in accuracy.items())


def bundle(results: Path, dataset: str, target: Path) -> None:
    """results.tar.gz: tables, metrics, pseudo-label reports, training logs and curves, the
    steps' logs and the params file; not the checkpoints."""
    keep = [results / "tables", results / "metrics" / f"{EXPERIMENT}.json",
            results / "metrics" / dataset, results / "paper" / TIER, results / "curves" / dataset,
            results / "pseudo" / dataset, results / "logs" / "proxy", results / "proxy"]
    logs = list((results / "models" / dataset).glob("*/*/*/train_log.csv"))
    with atomic_path(target) as tmp, tarfile.open(tmp, "w:gz") as tar:
        for path in [p for p in keep if p.exists()] + logs:
            tar.add(path, arcname=str(Path("results") / path.relative_to(results)),
                    filter=lambda info: None if info.name.endswith((".pt", ".npz")) else info)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--npz", type=Path, default=None,
                        help="the proxy's images as one npz (offline source; default: the archive)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=None, help="override training epochs")
    parser.add_argument("--jobs", type=int, default=6, help="steps at once (they share the GPU)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per step")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "proxy-out")))
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds after which running steps are killed and the summary written")
    args = parser.parse_args()
    say = echo(args.out / "progress.log")
    params = proxy_params(yaml.safe_load(args.params.read_text()), seed=args.seed,
                          npz=args.npz.resolve() if args.npz else None, epochs=args.epochs)
    params_file = args.results / "proxy" / "params.yaml"
    text = yaml.safe_dump(params, sort_keys=False)
    if params_file.is_file() and params_file.read_text() != text:
        sys.exit(f"cifar10_proxy: {args.results} was made with other params than these "
                 f"({params_file}); its steps would be kept though stale. Delete it (or pass "
                 "another --results) to start over.")
    write_text(params_file, text)
    params = load_params(params_file)  # validated, as every step reads it
    say(f"CIFAR-10 proxy, seed {args.seed}, on {machine()}; params {params_file}")
    jobs = build_jobs(params, params_file, args.seed, args.results, args.threads)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]), "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    dataset = params["experiments"][EXPERIMENT]["dataset"]
    epochs = {method: training_for(params, dataset, method)["epochs"]
              for method in params["experiments"][EXPERIMENT]["methods"]}
    run_jobs(jobs, parallel=args.jobs, say=say, deadline_s=args.deadline,
             status=lambda job: epoch_note(job, epochs.get(job.name.removeprefix("train "))),
             env=env)
    elapsed = time.monotonic() - t0
    write_text(args.out / "summary.md", summary(params, jobs, args.results, args.seed, args.npz,
                                                elapsed))
    bundle(args.results, dataset, args.out / "results.tar.gz")
    for path in args.out.iterdir():  # atomic writes leave 0600 files; let any reader fetch them
        path.chmod(0o644)
    done, kept = sum(job.status == "done" for job in jobs), sum(job.kept for job in jobs)
    say(f"{done} of {len(jobs)} steps done in {elapsed:.0f} s"
        + (f" ({kept} kept from an earlier call)" if kept else "") + f"; {args.out}/summary.md")
    return 0 if done == len(jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
