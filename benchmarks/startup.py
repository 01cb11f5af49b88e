"""The fixed cost every `snakemake` run and every `wscat` job pays before its work: reading and
validating params.yaml, and the dry run's check of every dataset's split. Times a baseline
checkout (a git revision) and this working tree side by side, alternating, in one run.

    .venv/bin/python benchmarks/startup.py --base b9ae94c [--repeats 7] \\
        [--out benchmarks/results/startup-cpu.md]

Each timing is a fresh process with this venv's Python and Snakemake on the repository's own
params.yaml: importing torch and counting a WRN-28-10's parameters on the meta device (what
`wscat train` does first), `load_params` (what each job does next), `check_splits` (what each
`snakemake -n` adds), `wscat list-experiments`, a small `wscat pseudo-label` job start to exit
(on a one-epoch digits CNN each checkout trains first), `snakemake -n` of the demo's table, and a
`wscat table` job on two runs' metrics files (written with each tree's own fingerprints).
Medians, with the CPU named; a quiet machine gives the steadier numbers (the load average is in
the output).
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from demo_profile import _cpu_model  # noqa: E402 - a sibling script
LOAD = "from wscat.config import load_params; load_params('params.yaml')"
SPLITS = ("from wscat.config import load_params; from wscat.data.capacity import check_splits; "
          "p = load_params('params.yaml'); import time; t = time.perf_counter(); check_splits(p); "
          "print(time.perf_counter() - t)")
META = ("import torch; from wscat.models import build_model\n"
        "with torch.device('meta'):\n"
        "    build_model('wideresnet', depth=28, width=10, in_channels=3, num_classes=10, "
        "mean=(0.5,) * 3, std=(0.25,) * 3)")
TREE = ("Snakefile", "params.yaml", "workflow", "wscat", "profiles")  # what a run reads
COMMANDS = {
    "torch + WRN-28-10 on meta (process)": [sys.executable, "-c", META],
    "load_params (process)": [sys.executable, "-c", LOAD],
    "check_splits (in process)": [sys.executable, "-c", SPLITS],
    "wscat list-experiments": [sys.executable, "-m", "wscat", "list-experiments"],
    "wscat pseudo-label (a job: torch, a checkpoint, 1,338 images)": [
        sys.executable, "-m", "wscat", "pseudo-label", "--params", "tiny.yaml", "--dataset",
        "digits", "--model", "cnn", "--labeler", "standard", "--seed", "1", "--threads", "1",
        "--device", "cpu", "--split", "tiny/split.npz", "--checkpoint", "tiny/run/best.pt",
        "--out", "tiny/pseudo.npz", "--metrics", "tiny/pseudo.json"],
    "snakemake -n (demo table)": [str(BIN / "snakemake"), "-n", "--cores", "2", "--",
                                  "results/tables/digits.tex"],
    "wscat table (a job: two runs' metrics files)": [
        sys.executable, "-m", "wscat", "table", "--params", "tiny.yaml", "--experiment", "mini",
        "--tex", "tiny/t.tex", "--csv", "tiny/t.csv", "--summary", "tiny/s.json",
        "tiny/trades.json", "tiny/wscat.json"],
}
# Two runs' metrics files as `wscat evaluate` writes them (the fingerprints of the tree's own
# code), so the table row reads no training or evaluation.
METRICS = """
import json
from wscat.config import load_params
from wscat.workflow import evaluation_fingerprint, training_fingerprint
params = load_params("tiny.yaml")
for method in ("trades", "wscat"):
    accuracy = {"Natural": 90.0, "FGSM": 60.0, "PGD": 50.0, "CW": 50.0, "AA": 40.0, "Mean": 55.0}
    manifest = {"checkpoint": {"path": f"results/models/digits/cnn/{method}/seed1/best.pt"},
                "training": {"fingerprint": training_fingerprint(params, "digits", "cnn", method)},
                "evaluation_settings": evaluation_fingerprint(params, "digits")}
    with open(f"tiny/{method}.json", "w") as handle:
        json.dump({"dataset": "digits", "model": "cnn", "method": method, "seed": 1,
                   "accuracy": accuracy, "manifest": manifest}, handle)
"""


def checkout(root: Path, target: Path, revision: str | None) -> Path:
    """The files a run reads (Snakefile, workflow/, wscat/, profiles/, params.yaml) of `revision`,
    or of the working tree when None, copied to `target`."""
    target.mkdir(parents=True)
    if revision is None:
        for name in TREE:
            if (root / name).is_dir():
                shutil.copytree(root / name, target / name,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(root / name, target / name)
    else:
        archive = subprocess.run(["git", "-C", str(root), "archive", revision, *TREE],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def tiny_job(tree: Path, env: dict[str, str]) -> None:
    """What the pseudo-label row reads, made once in `tree` by its own code: tiny.yaml (the
    repository's params, one digits epoch), a split and a Standard CNN."""
    import yaml

    params = yaml.safe_load((tree / "params.yaml").read_text())
    params["training"]["digits"]["epochs"] = 1
    params["training"]["digits"].pop("per_method", None)
    params["experiments"]["mini"] = {"dataset": "digits", "model": "cnn", "seeds": [1],
                                     "methods": ["trades", "wscat"]}
    (tree / "tiny.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    common = ["--params", "tiny.yaml", "--dataset", "digits", "--seed", "1"]
    for step in (["split", *common, "--out", "tiny/split.npz"],
                 ["train", *common, "--model", "cnn", "--method", "standard", "--threads", "1",
                  "--device", "cpu", "--split", "tiny/split.npz", "--out-dir", "tiny/run"]):
        timed([sys.executable, "-m", "wscat", *step], tree, env)
    timed([sys.executable, "-c", METRICS], tree, env)


def git(*args: str) -> str:
    """The stripped output of `git args` in the repository."""
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of one run of `command` in `cwd`, and its last line of output."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"startup.py: {' '.join(command)} failed in {cwd}:\n{done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return seconds, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the baseline git revision, e.g. HEAD~1")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/startup-cpu.md")
    args = parser.parse_args()
    base, head = git("rev-parse", "--short", args.base), git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--", *TREE)
    new_name = f"working tree ({head}{' + changes' if dirty else ''})"
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {f"{base} (baseline)": checkout(ROOT, Path(tmp) / "base", base),
                 new_name: checkout(ROOT, Path(tmp) / "new", None)}
        cache = Path(tmp) / "xdg-cache"
        envs = {name: {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(cache),
                       "DVC_NO_ANALYTICS": "1", "OMP_NUM_THREADS": "1"}
                for name, tree in trees.items()}
        for name, tree in trees.items():
            envs[name].pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode is written: as in a checkout
            tiny_job(tree, envs[name])
        seconds: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeats):
            for label, command in COMMANDS.items():
                for name, tree in trees.items():  # alternating: drift hits both alike
                    wall, last = timed(command, tree, envs[name])
                    value = float(last) if label.endswith("(in process)") else wall
                    seconds.setdefault((label, name), []).append(value)
    load.append(os.getloadavg()[0])
    names = list(trees)
    median = {key: statistics.median(values) for key, values in seconds.items()}
    rows = [f"| {label} | {median[label, names[0]]:.2f} | {median[label, names[1]]:.2f} | "
            f"{median[label, names[1]] / median[label, names[0]]:.2f} |" for label in COMMANDS]
    text = "\n".join([
        "# Start-up cost of a job and of a Snakemake run",
        "",
        f"`.venv/bin/python benchmarks/startup.py --base {args.base} --repeats {args.repeats}` on "
        f"{datetime.date.today().isoformat()}: the repository's params.yaml, each timing a fresh "
        "process, the two checkouts alternating; medians in seconds (wall, except check_splits: "
        "inside the process).",
        "",
        f"Machine: {_cpu_model()}, {os.cpu_count()} CPUs; load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end.",
        "",
        f"| what | {names[0]} | {names[1]} | ratio |",
        "|---|---:|---:|---:|",
        *rows,
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
