"""The CIFAR-10 proxy for one seed in one GPU call (docs/paper-scale.md, "CIFAR-10 proxy").

The same `wscat` steps the Snakemake rules run for `results/tables/cifar10-proxy.tex` and
`results/paper/cifar10-proxy/`: split -> Mean Teacher and Standard (the labelers) -> pseudo-labels
-> Standard, TRADES, WSCAT-sup, MT, RST, WSCAT -> the attack suite on every test image -> Table 2
(WSCAT, Zhang et al., CVPR 2025), its companion beside the paper's CIFAR-10 numbers, training
curves. The lent GPU machine has no Snakemake, so benchmarks/jobrunner.py runs the steps in
dependency order, a few at a time, the Mean Teacher -> WSCAT chain first (`chain_priorities`).
Progress goes to stdout, OUT/progress.log and results/proxy/progress.log (every call's); OUT gets
summary.md (machine, schedule, timings, tables), results.tar.gz (tables, metrics, logs, curves)
and seed{s}/, the seed's small files to commit as benchmarks/results/cifar10-proxy/seed{s}/
(`publish`; benchmarks/proxy_table.py renders Table 2 over such folders).

    python benchmarks/cifar10_proxy.py --npz data/proxy/cifar10-proxy.npz --seed 2 --out "$OUT"
    python benchmarks/cifar10_proxy.py --params tiny.yaml --seed 1 --jobs 2 --out /tmp/p  # on a CPU

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
import functools
import hashlib
import importlib.util
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
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

import mps as mps_service  # noqa: E402
from jobrunner import Job, echo, run_jobs, tail  # noqa: E402

from wscat.config import evaluation_for, load_params, method_for, training_for  # noqa: E402
from wscat.provenance import code_digest  # noqa: E402
from wscat.io import atomic_path, write_json, write_text  # noqa: E402
from wscat import paths  # noqa: E402
from wscat.report import paper  # noqa: E402

EXPERIMENT = TIER = "cifar10-proxy"
SMI_S = 5  # an nvidia-smi poll at most: a hung one must not push the deadline past timeout
CORE_WAIT_S = 1800  # an extra part's wait for its core file; the runner ends it sooner on a failure


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
               threads: int, *, priority: bool = True, labeler_beside: int | None = None,
               evaluations_after_training: bool = False) -> list[Job]:
    """Every step of one seed, with the command lines of the Snakemake rules, in the order they
    should start when ready; with `priority`, the chains through a labeler go first
    (`chain_priorities`: WSCAT's first), and the training and pseudo-labelling of WSCAT's labeler
    share the device with at most `labeler_beside` other steps. With
    `evaluations_after_training`, no evaluation starts before every training and pseudo-labelling
    has ended (an order, `Job.after`: on a card the processes take turns on, AutoAttack beside a
    training waits a turn behind it for each of its many small launches), and each extra part
    after its core part. Otherwise (MPS: the card shared at once) a model's extra part starts
    with its core part (`Job.alongside`, `wscat evaluate --core-wait`): its AA-paper and NRF need
    no core number, so only the checks wait for the core file, and the extra part leaves the
    critical path (WSCAT's training -> its core evaluation -> the tables)."""
    experiment = params["experiments"][EXPERIMENT]
    dataset, model, methods = experiment["dataset"], experiment["model"], experiment["methods"]
    root = str(results)
    wscat = [sys.executable, "-m", "wscat"]
    common = ["--params", str(params_file), "--dataset", dataset, "--seed", str(seed)]
    split = paper.Run(dataset, "", "", seed).split(root)
    logs = results / "logs" / "proxy"
    jobs = [Job("split", [*wscat, "split", *common, "--out", split], [], [Path(split)])]
    labeling = labelers(params)
    order = labeling + [m for m in methods if m not in labeling
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
        if method in labeling:
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
        extra = Job(f"evaluate-extra {method}", [
            *evaluate, "--part", "extra", "--core", run.metrics(root), "--out", run.extra(root)],
            [f"evaluate {method}"], [Path(run.extra(root))])
        if not evaluations_after_training:  # beside its core part; the runner ends it if that fails
            extra.argv += ["--core-wait", str(CORE_WAIT_S)]
            extra.deps, extra.alongside = [f"train {method}"], [f"evaluate {method}"]
        jobs.append(extra)
    if evaluations_after_training:
        trainings = [job.name for job in jobs if job.name.startswith(("train ", "pseudo-label "))]
        for job in jobs:
            if job.name.startswith("evaluate"):
                job.after = list(trainings)
    jobs += report_jobs(params, params_file, seed, results, wscat)
    chains = chain_priorities(params)
    first = max(chains, key=lambda labeler: chains[labeler][0], default=None)
    for job in jobs:
        job.log = logs / (job.name.replace(" ", "-") + ".log")
        if priority:
            job.priority = max([rank for rank, steps in chains.values() if job.name in steps],
                               default=0)
        if job.name in (f"train {first}", f"pseudo-label {first}"):
            job.beside = labeler_beside
    return jobs


PAPER_METHOD = "wscat"  # the method the table compares every other with (wscat.report.paired)


def chain_priorities(params: dict[str, Any]) -> dict[str, tuple[int, list[str]]]:
    """labeler -> (priority, the steps of its chain): training the labeler, its pseudo-labels,
    then training and evaluating every method that learns from them. The chain that ends in
    WSCAT (Mean Teacher -> its pseudo-labels -> WSCAT: the longest, issue 21's H100 run) gets 2,
    every other labeler's chain (Standard -> RST) 1, every other step 0."""
    experiment = params["experiments"][EXPERIMENT]
    dataset = experiment["dataset"]
    chains: dict[str, tuple[int, list[str]]] = {}
    for method in experiment["methods"]:
        labeler = method_for(params, method, dataset).get("labeler")
        if not labeler:
            continue
        rank, steps = chains.get(labeler, (1, [f"train {labeler}", f"pseudo-label {labeler}"]))
        chains[labeler] = (2 if method == PAPER_METHOD else rank,
                           steps + [f"train {method}", f"evaluate {method}",
                                    f"evaluate-extra {method}"])
    return chains


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


def _whole(value: str) -> str:
    """A count written as a float ('4000.00') as the whole number it is ('4,000')."""
    try:
        number = float(value)
    except ValueError:
        return value
    return f"{number:,.0f}" if number.is_integer() else value


def wide(path: Path, cell: str = "mean", counts: bool = False) -> str:
    """A long table CSV (method, metric, ...) as Markdown: a row per method, a column per metric;
    `cell`: the CSV column shown ('mean'), or columns joined by '+' ('ours+paper'); `counts`:
    whole numbers shown as such (Tab-datasets' images and classes)."""
    if not path.is_file():
        return f"({path.name} was not made)\n"
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    methods = list(dict.fromkeys(row["method"] or row["dataset"] for row in rows))
    metrics = list(dict.fromkeys(row["metric"] for row in rows))
    cells = {(row["method"] or row["dataset"], row["metric"]):
             " / ".join(_whole(row[c]) if counts else row[c] for c in cell.split("+"))
             for row in rows}
    lines = ["| | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    lines += [f"| {m} | " + " | ".join(cells.get((m, k), "") for k in metrics) + " |"
              for m in methods]
    return "\n".join(lines) + "\n"


def _smi(query: str) -> list[list[str]]:
    """Rows of `nvidia-smi --query-...=... --format=csv,noheader,nounits`; [] without one."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=SMI_S).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.strip()]


def gpu_memory_gib() -> float | None:
    """The first GPU's memory in GiB (nvidia-smi: no CUDA context in this process); None without."""
    rows = _smi("--query-gpu=memory.total")
    try:
        return float(rows[0][0]) / 1024 if rows else None
    except ValueError:
        return None


def card_jobs(threads: int, gib_per_step: float) -> tuple[int, str]:
    """How many steps to run at once on this machine, and why: one per `threads` CPU cores,
    and on a GPU at most one per `gib_per_step` GiB of its memory."""
    cores = len(os.sched_getaffinity(0))
    jobs, why = max(1, cores // threads), f"{cores} cores / {threads} threads a step"
    total = gpu_memory_gib()
    if total is not None:
        by_memory = max(1, int(total // gib_per_step))
        why += f", {total:.0f} GiB of GPU memory / {gib_per_step:g} GiB a step"
        jobs = min(jobs, by_memory)
    return jobs, why


class GpuWatch:
    """What nvidia-smi shows at each progress line: the card's memory in use and how busy it is,
    and the memory of each running step (by its process id); the peaks go into the summary, to
    size --jobs and --gib-per-step on the next call. Silent without nvidia-smi."""

    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self.peak_gib = 0.0
        self.busy: list[float] = []
        self.step_gib: dict[str, float] = {}

    def __call__(self) -> str:
        card = _smi("--query-gpu=utilization.gpu,memory.used,memory.total")
        if not card:
            return ""
        try:
            busy, used, total = (float(cell) for cell in card[0][:3])
        except ValueError:
            return ""
        self.busy.append(busy)
        self.peak_gib = max(self.peak_gib, used / 1024)
        by_pid = {job.pid: job.name for job in self.jobs if job.status == "running"}
        for row in _smi("--query-compute-apps=pid,used_memory"):
            try:
                name, gib = by_pid.get(int(row[0])), float(row[1]) / 1024
            except (ValueError, IndexError):
                continue
            if name:
                self.step_gib[name] = max(self.step_gib.get(name, 0.0), gib)
        return f"GPU {used / 1024:.1f}/{total / 1024:.0f} GiB, {busy:.0f}% busy"

    def line(self) -> str:
        """The summary's line: peak memory and mean utilisation over the progress lines."""
        if not self.busy:
            return ""
        return (f"- GPU (nvidia-smi at each progress line): peak {self.peak_gib:.1f} GiB in use, "
                f"{sum(self.busy) / len(self.busy):.0f}% busy on average over "
                f"{len(self.busy)} samples\n")


def machine() -> str:
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() \
        or platform.machine()
    return f"{device}; torch {torch.__version__}; python {platform.python_version()}"


def _status(job: Job, did: dict[str, tuple[int, float]]) -> str:
    """A step's status in the summary; a kept one names the call that did it, where recorded."""
    if not job.kept:
        return job.status
    return f"kept (call {did[job.name][0]})" if job.name in did else "kept"


def summary(params: dict[str, Any], jobs: list[Job], results: Path, seed: int,
            npz: Path | None, elapsed: float, schedule: str = "",
            watch: GpuWatch | None = None, calls: list[dict[str, Any]] | None = None) -> str:
    """summary.md: what ran where and how it was scheduled, how long each step took (and its
    GPU memory, where nvidia-smi saw it; a kept step: the seconds of the call that did it,
    `record_call`), and the tables."""
    experiment = params["experiments"][EXPERIMENT]
    dataset = experiment["dataset"]
    training = params["training"][dataset]
    out = results / "paper" / TIER
    text = io.StringIO()
    text.write(f"# CIFAR-10 proxy, seed {seed}\n\n- machine: {machine()}\n"
               f"- data: {npz or params['datasets'][dataset].get('root', 'data/raw')} "
               f"(subset {params['datasets'][dataset].get('subset')}"
               + (f"; md5 {npz_md5(npz.resolve())}" if npz else "") + ")\n"
               f"- model {experiment['model']}, {training['epochs']} epochs{_longer(params)}, "
               f"{training['precision']}, channels_last {training['channels_last']}, "
               f"deterministic {training['deterministic']}, {_compiled(params)}\n"
               + (f"- schedule: {schedule}\n" if schedule else "")
               + (watch.line() if watch else "")
               + f"- wall time {elapsed:.0f} s\n\n## Steps\n\n")
    did = step_calls(calls or [])
    if any(job.kept for job in jobs):
        text.write("kept: done by an earlier call on the same results; its outputs were there, "
                   "so it did not run again (its seconds: those of the call that did it, "
                   + ("; ".join(f"call {c['call']} {c['wall_s']:.0f} s" for c in calls or [])
                      or "not recorded") + ").\n\n")
    seen = watch.step_gib if watch else {}
    text.write("| step | status | seconds |" + (" GPU GiB (peak seen) |" if seen else "")
               + "\n|---|---|---|" + ("---|" if seen else "") + "\n")
    text.writelines(f"| {job.name} | {_status(job, did)} | "
                    f"{did[job.name][1] if job.kept and job.name in did else job.seconds:.0f} |"
                    + (f" {seen[job.name]:.1f} |" if job.name in seen else " |" if seen else "")
                    + "\n" for job in jobs)
    for name, path, cell in (
            ("Table 2, accuracy (%)", out / "Tab-RQ1-CIFAR10.csv", "mean"),
            ("Ours / the paper's CIFAR-10 WRN-28-10 (Table 2)",
             out / "Tab-RQ1-CIFAR10-vs-paper.csv", "ours+paper"),
            ("Tab-datasets", out / "Tab-datasets.csv", "mean")):
        text.write(f"\n## {name}\n\n{wide(path, cell, counts=name == 'Tab-datasets')}")
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


def _compiled(params: dict[str, Any]) -> str:
    """'eager', or which methods torch.compile and in what mode ('compiled: mt, standard
    (reduce-overhead)'), per training.<dataset> and its per_method."""
    experiment = params["experiments"][EXPERIMENT]
    modes: dict[str, list[str]] = {}
    for method in experiment["methods"]:
        schedule = training_for(params, experiment["dataset"], method)
        if schedule["compile"]:
            modes.setdefault(schedule.get("compile_mode", "default"), []).append(method)
    return "compiled: " + "; ".join(f"{', '.join(ms)} ({mode})" for mode, ms in modes.items()) \
        if modes else "eager"


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
            results / "pseudo" / dataset, results / "logs" / "proxy"]
    proxy = [path for path in sorted((results / "proxy").glob("*"))  # not an earlier call's
             if not (path.is_dir() and path.name.startswith("seed"))]  # staged seed (publish)
    logs = list((results / "models" / dataset).glob("*/*/*/train_log.csv"))
    with atomic_path(target) as tmp, tarfile.open(tmp, "w:gz") as tar:
        for path in [p for p in keep if p.exists()] + proxy + logs:
            tar.add(path, arcname=str(Path("results") / path.relative_to(results)),
                    filter=_results_entry)


def _results_entry(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """An entry of results.tar.gz, or None for what it leaves out: checkpoints and splits, and
    hidden files (a step killed at the deadline leaves its temporary file and its lock behind)."""
    if info.name.endswith((".pt", ".npz")) or Path(info.name).name.startswith("."):
        return None
    return info


def seed_files(params: dict[str, Any], results: Path, seed: int) -> list[Path]:
    """The seed's small files that add up across runs, where results/ has them: every run's
    metrics and extra metrics (per-image flags, manifests) and train_log.csv, and each labeler's
    pseudo-label report; those that exist."""
    experiment = params["experiments"][EXPERIMENT]
    dataset, model, root = experiment["dataset"], experiment["model"], str(results)
    files = []
    for method in experiment["methods"]:
        run = paper.Run(dataset, model, method, seed)
        files += [Path(run.metrics(root)), Path(run.extra(root)), Path(run.train_log(root))]
        if method in labelers(params):
            files += [Path(paths.fill(paths.PSEUDO_ACCURACY, root, dataset=dataset, model=model,
                                      labeler=method, seed=seed))]
    return [path for path in files if path.is_file()]


def labelers(params: dict[str, Any]) -> list[str]:
    """The methods whose pseudo-labels another method trains on."""
    experiment = params["experiments"][EXPERIMENT]
    return [m for m in dict.fromkeys(method_for(params, m, experiment["dataset"]).get("labeler")
                                     for m in experiment["methods"]) if m]


CALLS = "calls.json"  # under results/proxy/: every call's wall time and the steps it ran
PROGRESS = Path("proxy") / "progress.log"  # under results/: every call's progress lines (OUT's
# progress.log has this call's where OUT starts empty, as on the lent machine)


def record_call(results: Path, jobs: list[Job], elapsed: float) -> list[dict[str, Any]]:
    """Add this call to results/proxy/calls.json (it stays on the warm machine between calls)
    and return every call so far: its number, wall seconds, and each step it ran (not kept) with
    its status and seconds. A seed finished by a second call so keeps the first call's times."""
    path = results / "proxy" / CALLS
    calls = json.loads(path.read_text()) if path.is_file() else []
    calls.append({"call": len(calls) + 1, "wall_s": round(elapsed, 1),
                  "steps": {job.name: {"status": job.status, "seconds": round(job.seconds, 1)}
                            for job in jobs if job.status != "skipped" and not job.kept}})
    write_json(path, calls)
    return calls


def step_calls(calls: list[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """step -> (the call that did it, its seconds there): the last call in which it was done."""
    done: dict[str, tuple[int, float]] = {}
    for call in calls:
        for name, step in call["steps"].items():
            if step["status"] == "done":
                done[name] = (call["call"], step["seconds"])
    return done


def run_record(jobs: list[Job], seed: int, elapsed: float, schedule: dict[str, Any],
               watch: GpuWatch, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """run.json: the machine, the schedule, every step's status and seconds (and GPU memory where
    nvidia-smi saw it), and the calls (`record_call`): each step's seconds are those of the call
    that did it, and `one_call` says whether one call did every step. A step kept from a call
    that left no record (stopped, by `timeout` say, before it wrote calls.json) has no call: it
    was done by another call than the recorded ones, so the seed's steps took more than one."""
    did = step_calls(calls)
    complete = all(job.status == "done" for job in jobs)
    by = {did[job.name][0] for job in jobs if job.name in did}
    unrecorded = [job.name for job in jobs if job.name not in did]
    return {"seed": seed, "machine": machine(), "wall_s": round(elapsed, 1), **schedule,
            "complete": complete, "one_call": complete and len(by) == 1 and not unrecorded,
            "calls": [{"call": c["call"], "wall_s": c["wall_s"]} for c in calls],
            "gpu_peak_gib": round(watch.peak_gib, 2) if watch.busy else None,
            "steps": [{"name": job.name, "status": job.status, "kept": job.kept,
                       "seconds": did.get(job.name, (None, round(job.seconds, 1)))[1],
                       "call": did.get(job.name, (None,))[0], "priority": job.priority,
                       **({"gpu_gib": round(watch.step_gib[job.name], 2)}
                          if job.name in watch.step_gib else {})} for job in jobs]}


# What the lent machine returns from OUT (.library/device/README.md, "Limits"): at most 8 files,
# each at most 16 MiB and named in letters, digits, '.', '_' and '-', no more than two folders
# down. So the seed's folder travels as one tarball, and the checkpoint as one file beside it.
OUT_FILES_MAX, OUT_FILE_BYTES_MAX = 8, 16 * 2**20
RETURNED_CHECKPOINT = "wscat"  # one robust model's best.pt comes back for profiling off the card


def publish(params_file: Path, results: Path, seed: int, out: Path, record: dict[str, Any],
            files: list[Path]) -> Path:
    """OUT/seed{seed}.tar.gz, holding seed{seed}/: `files` at their places under results/ (so
    the project's path patterns find them with the folder as the root), the params file,
    summary.md, progress.log (every call's: PROGRESS) and run.json; no checkpoints, no .npz.
    Unpack it into benchmarks/results/cifar10-proxy/ and commit the folder;
    benchmarks/proxy_table.py renders Table 2 from such folders. The folder is built under
    results/proxy/ first (a tarball, not a folder, leaves the lent machine whole: see
    OUT_FILES_MAX)."""
    staging = results / "proxy" / f"seed{seed}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)  # a run cut before its first result still returns its record
    for path in files:
        copy = staging / path.relative_to(results)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
    shutil.copyfile(params_file, staging / "params.yaml")
    if (out / "summary.md").is_file():
        shutil.copyfile(out / "summary.md", staging / "summary.md")
    if (results / PROGRESS).is_file():
        shutil.copyfile(results / PROGRESS, staging / "progress.log")
    write_json(staging / "run.json", record)
    target = out / f"seed{seed}.tar.gz"
    with atomic_path(target) as tmp, tarfile.open(tmp, "w:gz") as tar:
        tar.add(staging, arcname=f"seed{seed}", filter=_readable)
    return target


def _readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tar entry anyone can read once unpacked (atomic writes leave 0600 files), owned by no
    one in particular."""
    info.mode = 0o755 if info.isdir() else 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def return_checkpoint(params: dict[str, Any], results: Path, seed: int, out: Path) -> Path | None:
    """OUT/<method>-seed{seed}-best.pt: one robust model's checkpoint (RETURNED_CHECKPOINT), so
    that AutoAttack can be profiled on a real proxy model without training it again; None where
    the run did not make it or it exceeds what the machine returns."""
    experiment = params["experiments"][EXPERIMENT]
    source = Path(paper.Run(experiment["dataset"], experiment["model"], RETURNED_CHECKPOINT,
                            seed).checkpoint(str(results)))
    if not source.is_file() or source.stat().st_size > OUT_FILE_BYTES_MAX:
        return None
    target = out / f"{RETURNED_CHECKPOINT}-seed{seed}-best.pt"
    with atomic_path(target) as tmp:  # a call cut mid-copy returns no truncated checkpoint
        shutil.copyfile(source, tmp)
    return target


@functools.cache
def npz_md5(npz: Path) -> str:
    """The md5 of the file."""
    with open(npz, "rb") as handle:
        return hashlib.file_digest(handle, "md5").hexdigest()


def check_images(npz: Path, done: dict[int, Path], repository: bool) -> None:
    """Refuse (ValueError, one line) an npz of other images than a committed seed's: the md5 its
    run.json records or, for a seed run before it was recorded, PROXY_NPZ_MD5 where the seeds are
    the repository's. The path alone (which the params compare) does not tell a replaced file."""
    from proxy_table import PROXY_NPZ_MD5, recorded_images

    md5, recorded = npz_md5(npz.resolve()), recorded_images(done)
    for seed in done:
        expected = recorded.get(seed) or (PROXY_NPZ_MD5 if repository else None)
        if expected is not None and md5 != expected:
            raise ValueError(f"--npz {npz}: md5 {md5}, but committed seed {seed} ran on images "
                             f"of md5 {expected}: this seed would not join its table; copy "
                             "../shared/datasets/cifar10-proxy.npz there again (DEVELOPERS.md)")


def check_npz(npz: Path) -> None:
    """Refuse (ValueError, one line) an --npz that is no npz of the proxy's arrays, before a
    device call is spent on it: a zip whose names hold x_train and y_train (read from its
    directory; nothing is loaded)."""
    import zipfile

    try:
        with zipfile.ZipFile(npz) as archive:
            names = {Path(name).stem for name in archive.namelist()}
    except (zipfile.BadZipFile, OSError) as error:
        raise ValueError(f"--npz {npz}: not an .npz file ({type(error).__name__}); carry "
                         "data/proxy/cifar10-proxy.npz, a copy of "
                         "../shared/datasets/cifar10-proxy.npz (DEVELOPERS.md)") from None
    missing = [name for name in ("x_train", "y_train") if name not in names]
    if missing:
        raise ValueError(f"--npz {npz}: an .npz without {', '.join(missing)}; carry "
                         "data/proxy/cifar10-proxy.npz, a copy of "
                         "../shared/datasets/cifar10-proxy.npz (DEVELOPERS.md)")


def seeds_dir_of(args: argparse.Namespace) -> Path | None:
    """The committed seeds this run must match: --seeds-dir, or by default the repository's
    with the repository's params.yaml (a test's own params have no committed seeds)."""
    from proxy_table import SEEDS_DIR

    if args.seeds_dir is not None:
        return args.seeds_dir
    return SEEDS_DIR if args.params.resolve() == (ROOT / "params.yaml").resolve() else None


def checked_params(args: argparse.Namespace) -> dict[str, Any]:
    """The run's params, validated in memory, after the arguments are checked; refused (a
    ValueError, one line) where a committed seed was run with params that differ in what the
    steps read, as its table would refuse this seed after the run (proxy_table.read_seeds)."""
    from proxy_table import path_note, seed_difference, seed_dirs

    from wscat.config import ConfigError, read_yaml, validate_params

    if not args.params.is_file():
        raise ValueError(f"--params {args.params}: no such file; pass the repository's "
                         "params.yaml (the default)")
    if args.npz is not None and not args.npz.is_file():
        raise ValueError(f"--npz {args.npz}: no such file; carry data/proxy to the device "
                         "(DEVELOPERS.md, 'The CIFAR-10 proxy on a lent GPU')")
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out}: a file, not a folder; pass a folder ($OUT)")
    if args.seed < 0:
        raise ValueError(f"--seed {args.seed}: give a whole number of at least 0")
    if args.seeds_dir is not None and not args.seeds_dir.is_dir():
        raise ValueError(f"--seeds-dir {args.seeds_dir}: not a folder; pass the folder that "
                         "holds the committed seed{s}/ folders")
    for flag, value in (("--deadline", args.deadline), ("--epochs", args.epochs)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} {value:g}: give a positive number")
    if args.npz is not None:
        check_npz(args.npz)
    try:  # the file as given first (a bad line named by its own line number), then the run's
        base = read_yaml(args.params)
        validate_params(base if isinstance(base, dict) else {}, args.params)
        if EXPERIMENT not in base["experiments"]:
            raise ConfigError(f"{args.params}: no experiment '{EXPERIMENT}'; pass the "
                              "repository's params.yaml (the default)")
        raw = proxy_params(base, seed=args.seed, npz=args.npz.resolve() if args.npz else None,
                           epochs=args.epochs)
        params = validate_params(yaml.safe_load(yaml.safe_dump(raw)))
    except ConfigError as error:
        raise ValueError(f"--params {args.params}: {error}") from None
    committed = seeds_dir_of(args)
    if committed is None or not any(committed.glob("seed*/params.yaml")):
        return raw  # no committed seed yet: nothing to match
    done = seed_dirs(committed)
    tier = base["experiments"][EXPERIMENT].get("seeds") or []
    if args.seeds_dir is None and args.seed not in tier:  # the table expects these (--expect)
        raise ValueError(f"--seed {args.seed}: not one of the tier's seeds "
                         f"({', '.join(map(str, tier))}: {args.params}'s experiments."
                         f"{EXPERIMENT}.seeds), so benchmarks/proxy_table.py would refuse its "
                         "folder; run one of them, or pass --seeds-dir for another table")
    if args.seed in done:  # its call would be spent on a seed the table already holds
        raise ValueError(f"--seed {args.seed}: seed {args.seed} is committed already "
                         f"({done[args.seed]}); run a seed that {committed} lacks, or pass "
                         "--seeds-dir for another table")
    for seed, folder in done.items():
        theirs = load_params(folder / "params.yaml")
        key = seed_difference(theirs, params)
        if key is not None:
            raise ValueError(f"these params differ from committed seed {seed}'s "
                             f"({folder / 'params.yaml'}) in {key}{path_note(key, theirs)}: "
                             "this seed would not join its table (benchmarks/proxy_table.py); "
                             "run from a checkout whose params give the same, or pass "
                             "--seeds-dir for another table")
    if args.npz is not None:
        check_images(args.npz, done, repository=args.seeds_dir is None)
    return raw


def main() -> int:
    from wscat.cli import Parser, seed_value  # usage errors: one line, exit 2

    parser = Parser(prog="cifar10_proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--npz", type=Path, default=None,
                        help="the proxy's images as one npz (offline source; default: the archive)")
    parser.add_argument("--seed", type=seed_value, required=True,
                        help="the seed to run: one that --seeds-dir does not hold yet (the "
                             "paper's are 1, 2, 3)")
    parser.add_argument("--epochs", type=int, default=None, help="override training epochs")
    parser.add_argument("--jobs", type=int, default=None,
                        help="steps at once (they share the GPU); default: sized to the machine, "
                             "one per --threads cores and --gib-per-step GiB of GPU memory")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per step")
    parser.add_argument("--gib-per-step", type=float, default=6.0,
                        help="GPU memory a step may need, for the default --jobs (summary.md "
                             "shows what each step used)")
    parser.add_argument("--priority", action=argparse.BooleanOptionalAction, default=True,
                        help="start the labeler chains first, Mean Teacher -> WSCAT before "
                             "Standard -> RST (--no-priority: list order)")
    parser.add_argument("--labeler-beside", type=int, default=2,
                        help="at most this many other steps beside the Mean Teacher labeler's "
                             "training and pseudo-labelling (0: alone; --jobs or more: no cap)")
    parser.add_argument("--mps", choices=("auto", "on", "off"), default="auto",
                        help="run the steps as clients of NVIDIA's Multi-Process Service, so "
                             "their kernels share the card at once (benchmarks/mps.py); auto: "
                             "where it starts and a probe passes, else without")
    parser.add_argument("--evaluations", choices=("auto", "beside", "after"), default="auto",
                        help="whether evaluations may run beside trainings or start only after "
                             "every training ended; auto: beside under MPS, after without")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "proxy-out")))
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds after the script starts (the MPS probe included) when "
                             "running steps are killed and the summary written")
    parser.add_argument("--seeds-dir", type=Path, default=None,
                        help="the committed seeds whose table this seed joins; its params must "
                             "match theirs in what the steps read (proxy_table.seed_difference), "
                             "or nothing runs (default: benchmarks/results/cifar10-proxy/ with "
                             "the repository's params.yaml, none with another --params)")
    parser.add_argument("--check", action="store_true",
                        help="only check the arguments and the params against --seeds-dir, "
                             "then exit (0: the run may go ahead); run it before a device call")
    args = parser.parse_args()
    started = time.monotonic()  # --deadline counts from here, the MPS probe included
    for flag, value, least in (("--jobs", args.jobs, 1), ("--threads", args.threads, 1),
                               ("--labeler-beside", args.labeler_beside, 0)):
        if value is not None and value < least:
            print(f"cifar10_proxy: error: {flag} {value}: give a whole number of at least "
                  f"{least}", file=sys.stderr)
            return 2
    if not args.gib_per_step > 0:
        print(f"cifar10_proxy: error: --gib-per-step {args.gib_per_step:g}: give a positive "
              "number of GiB", file=sys.stderr)
        return 2
    try:
        params = checked_params(args)
    except (ValueError, OSError) as error:
        print(f"cifar10_proxy: error: {error}", file=sys.stderr)
        return 2
    if args.check:  # before --results is looked at: the device's is not this machine's
        print(f"cifar10_proxy: seed {args.seed} may run: its params match the committed seeds' "
              f"({seeds_dir_of(args) or 'none compared'})")
        return 0
    if args.results.exists() and not args.results.is_dir():
        print(f"cifar10_proxy: error: --results {args.results}: a file, not a folder; pass a "
              "folder (default results/)", file=sys.stderr)
        return 2
    params_file = args.results / "proxy" / "params.yaml"
    text = yaml.safe_dump(params, sort_keys=False)
    if params_file.is_file() and params_file.read_text() != text:
        print(f"cifar10_proxy: error: {args.results} was made with other params than these "
              f"({params_file}); its steps would be kept though stale. Delete it (or pass "
              "another --results) to start over.", file=sys.stderr)
        return 2
    code_file, code = params_file.with_name("code.txt"), code_digest() + "\n"
    if code_file.is_file() and code_file.read_text() != code:  # a finished step is kept as it is
        print(f"cifar10_proxy: error: {args.results} was made by other wscat code ({code_file}: "
              f"{code_file.read_text().strip()}, this is {code.strip()}); its finished steps "
              "would be kept though made by it. Delete it (or pass another --results) to start "
              "over.", file=sys.stderr)
        return 2
    say = echo(args.out / "progress.log", args.results / PROGRESS)
    write_text(params_file, text)
    write_text(code_file, code)
    params = load_params(params_file)  # validated, as every step reads it
    say(f"CIFAR-10 proxy, seed {args.seed}, on {machine()}; params {params_file}")
    jobs_why = card_jobs(args.threads, args.gib_per_step) if args.jobs is None else (
        args.jobs, "--jobs")
    mps_folder = Path(tempfile.gettempdir()) / f"wscat-mps-{os.getpid()}"  # short: a socket path
    try:
        mps, mps_note = mps_service.start_as(args.mps, mps_folder)
    except mps_service.NotRunning as error:
        say(f"MPS: {error.note}")
        print(f"cifar10_proxy: error: {error}", file=sys.stderr)
        return 2
    say(f"MPS: {mps_note}")
    after = args.evaluations == "after" or (args.evaluations == "auto" and mps is None)
    schedule = {"npz_md5": npz_md5(args.npz.resolve()) if args.npz else None,
                "code_digest": code.strip(),  # the device's git may name another commit
                "jobs": jobs_why[0], "jobs_from": jobs_why[1], "threads": args.threads,
                "priority": args.priority, "labeler_beside": args.labeler_beside,
                "mps": mps is not None, "evaluations": "after" if after else "beside"}
    described = (f"{jobs_why[0]} steps at once ({jobs_why[1]}), {args.threads} threads each; "
                 + ("labeler chains first" if args.priority else "list order")
                 + ("" if args.labeler_beside >= jobs_why[0] - 1
                    else f"; the Mean Teacher labeler with at most {args.labeler_beside} beside")
                 + ("; MPS" if mps else "")
                 + ("; evaluations after every training" if after
                    else "; evaluations beside the trainings, each extra part beside its core "
                         "part (its seconds include its wait for the core file; its log says "
                         "how long)"))
    say(f"schedule: {described}")
    jobs = build_jobs(params, params_file, args.seed, args.results, args.threads,
                      priority=args.priority, labeler_beside=args.labeler_beside,
                      evaluations_after_training=after)
    watch = GpuWatch(jobs)
    env = {**(mps.env if mps else os.environ), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]), "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    dataset = params["experiments"][EXPERIMENT]["dataset"]
    epochs = {method: training_for(params, dataset, method)["epochs"]
              for method in params["experiments"][EXPERIMENT]["methods"]}
    try:
        run_jobs(jobs, parallel=jobs_why[0], say=say, deadline_s=args.deadline, since=started,
                 status=lambda job: epoch_note(job, epochs.get(job.name.removeprefix("train "))),
                 env=env, note=watch)
    finally:
        if mps is not None:
            say("MPS: stopped" if mps.stop() else "MPS: the daemon did not answer 'quit'")
        for log in sorted((mps_folder / "log").glob("*.log")):  # the daemon's and server's own
            (args.results / "logs" / "proxy").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, args.results / "logs" / "proxy" / f"mps-{log.name}")
    elapsed = time.monotonic() - t0
    calls = record_call(args.results, jobs, elapsed)
    write_text(args.out / "summary.md", summary(params, jobs, args.results, args.seed, args.npz,
                                                elapsed, described, watch, calls))
    bundle(args.results, dataset, args.out / "results.tar.gz")
    done, kept = sum(job.status == "done" for job in jobs), sum(job.kept for job in jobs)
    say(f"{done} of {len(jobs)} steps done in {elapsed:.0f} s"
        + (f" ({kept} kept from an earlier call)" if kept else "") + f"; {args.out}/summary.md")
    tarball = publish(params_file, args.results, args.seed, args.out,
                      run_record(jobs, args.seed, elapsed, schedule, watch, calls),
                      seed_files(params, args.results, args.seed))
    return_checkpoint(params, args.results, args.seed, args.out)
    for path in args.out.iterdir():  # atomic writes leave 0600 files; let any reader fetch them
        if path.is_file():
            path.chmod(0o644)
    if done == len(jobs):
        print(f"unpack {tarball} into benchmarks/results/{EXPERIMENT}/ and commit "
              f"seed{args.seed}/", flush=True)
        return 0
    print(f"seed {args.seed} is not complete ({done} of {len(jobs)} steps done): do not commit "
          f"{tarball.name}; the same command again on the same machine finishes it",
          file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
