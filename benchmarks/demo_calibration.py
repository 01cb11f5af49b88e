"""How the demo's digits settings were chosen: on validation data only, never on the test set.

    .venv/bin/python benchmarks/demo_calibration.py --stage eps        # the threat model
    .venv/bin/python benchmarks/demo_calibration.py --stage settings   # model, labels, budget

Each seed's split is made with `wscat split`'s code; then a class-stratified 300 images of its
unlabelled pool are held out as the calibration set (they are neither trained on nor the test
set) and stand in for the test set: every number below is measured on them. The rest of the
chain is the project's own: Standard and Mean Teacher labelers, pseudo-labels, TRADES, RST,
WSCAT, TRADES with every label, and `wscat evaluate --part core` (Natural, FGSM, PGD-20, CW-20,
standard AutoAttack, harmonic Mean).

Writes benchmarks/results/demo-calibration-{stage}.csv (one row per setting, seed and method,
with training and evaluation CPU seconds).

    .venv/bin/python benchmarks/demo_calibration.py --render docs/demo-calibration.md

renders every benchmarks/results/demo-calibration-*.csv as that Markdown page.
"""
from __future__ import annotations

import argparse
import copy
import csv
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wscat.config import load_params, validate_params
from wscat.data import load_dataset, load_split, save_split
from wscat.steps import evaluate as evaluate_step, pseudo as pseudo_step
from wscat.steps import split as split_step, train as train_step

HELD_OUT = 300
RESULTS = Path(__file__).with_name("results")
# (name, model width, labelled, epochs, training PGD steps); training step = 2.5 eps / steps.
SETTINGS = {
    "eps": [("eps", 32, 100, 40, 5)],
    "settings": [
        ("w32-l100-e40-pgd5", 32, 100, 40, 5),
        ("w32-l100-e40-pgd10", 32, 100, 40, 10),
        ("w32-l100-e60-pgd5", 32, 100, 60, 5),
        ("w32-l150-e40-pgd5", 32, 150, 40, 5),
        ("w16-l100-e40-pgd5", 16, 100, 40, 5),
        ("w48-l100-e40-pgd5", 48, 100, 40, 5),
    ],
}
METHODS = {"eps": ["standard", "trades"],
           "settings": ["standard", "mt", "trades", "rst", "wscat", "trades-full"]}


def calibration_split(split_path: Path, out: Path, *, full: bool = False) -> Path:
    """The run's split with HELD_OUT stratified unlabelled images as its test set; `full` labels
    every remaining training image (TRADES with every label)."""
    split = load_split(split_path)
    labels = np.asarray(load_dataset("digits", {"source": "digits"}).labels.numpy())
    rng = np.random.default_rng(1000 + split.seed)
    pool = split.unlabelled
    per_class = HELD_OUT // 10
    held = np.sort(np.concatenate([rng.permutation(pool[labels[pool] == c])[:per_class]
                                   for c in range(10)]))
    rest = np.setdiff1d(pool, held)
    if full:
        cal = replace(split, labelled=np.union1d(split.labelled, rest),
                      unlabelled=np.empty(0, dtype=np.int64), test=held)
    else:
        cal = replace(split, unlabelled=rest, test=held)
    save_split(cal, out)
    return out


def with_setting(base: dict[str, Any], *, width: int, labelled: int, epochs: int, steps: int,
                 eps: float) -> dict[str, Any]:
    params = copy.deepcopy(base)
    params["models"]["calibration"] = {"architecture": "cnn", "width": width}
    params["datasets"]["digits"].update(labelled=labelled, eps=eps, train_steps=steps,
                                        train_step_size=2.5 * eps / steps,
                                        eval_step_size=eps / 8)
    params["training"]["digits"]["epochs"] = epochs
    # Evaluate every calibration image with every attack (the core suite needs no subset).
    params["evaluation"].setdefault("per_dataset", {})["digits"] = {"batch_size": 512}
    return validate_params(params)


def run_setting(params: dict[str, Any], methods: list[str], seed: int, tmp: Path
                ) -> list[dict[str, Any]]:
    """Train and evaluate `methods` on one seed's calibration split; one row per method."""
    cpu = torch.device("cpu")
    split = tmp / "split.npz"
    split_step.run(params, "digits", seed, split)
    cal = calibration_split(split, tmp / "cal.npz")
    full = calibration_split(split, tmp / "cal-full.npz", full=True)
    rows, pseudo = [], {}
    for method in methods:
        name, split_path = (("trades", full) if method == "trades-full" else (method, cal))
        knobs = params["methods"][name]
        labeler = knobs.get("labeler")
        started = time.process_time()
        train_step.run(params, dataset="digits", model="calibration", method=name, seed=seed,
                       split_path=split_path, pseudo_path=pseudo.get(labeler),
                       out_dir=tmp / method, device=cpu)
        trained = time.process_time() - started
        if method in ("standard", "mt"):
            pseudo[method] = tmp / f"pseudo-{method}.npz"
            pseudo_step.run(params, dataset="digits", seed=seed, split_path=cal,
                            checkpoint=tmp / method / "best.pt", out=pseudo[method],
                            metrics=tmp / f"pseudo-{method}.json", labeler=method,
                            device=cpu)
        started = time.process_time()
        result = evaluate_step.run(params, dataset="digits", model="calibration", method=name,
                                   seed=seed, split_path=split_path,
                                   checkpoint=tmp / method / "best.pt",
                                   out=tmp / f"{method}.json", device=cpu, part="core")
        rows.append({"method": method, "train_s": round(trained, 1),
                     "eval_s": round(time.process_time() - started, 1),
                     **{k: round(v, 2) for k, v in result["accuracy"].items()}})
        print(rows[-1], flush=True)
    return rows


PAGE_HEAD = """# How the demo's digits settings were chosen

Produced by `benchmarks/demo_calibration.py` (its docstring says how); the numbers are from
`benchmarks/results/demo-calibration-*.csv`. Every number here is measured on **300 held-out
training images** (class-stratified, taken out of each seed's unlabelled pool, never trained on),
never on the test set. Accuracies in %, Mean = harmonic mean of Natural, FGSM, PGD-20, CW-20 and
the official standard AutoAttack, as in the tables. CPU seconds are one thread, summed over
training (or evaluation) of a run, on a 2-core machine shared with other work (upper bounds).

What the settings must do (issue: the demo must show what the paper is about): at the demo's
number of labels, supervised TRADES is limited by its labels (TRADES with every label is clearly
better), and RST and WSCAT beat TRADES by at least 8 points of Mean, within a `make demo` of at
most 10 minutes on 2 CPU cores.
"""


SUMMARY_HEAD = """## Over seeds: the issue's test on validation data

Seeds 2 and 3 of the chosen setting and of the runner-up were added after the demo's test table
existed, with this rule written down before they ran: keep w16 if, over 3 seeds, RST and WSCAT
each beat TRADES by at least 8 points of Mean and by more than 3 times the larger seed standard
deviation; otherwise switch to w32 if it passes and fits a 10-minute `make demo`; otherwise keep
w16 and say so. Mean ± sample standard deviation over seeds, on the 300 held-out images:
"""


def _mean_std(values: list[float]) -> tuple[float, float]:
    array = np.asarray(values)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def summary(rows: list[dict[str, str]]) -> list[str]:
    """Per setting with several seeds: Mean over seeds, the gaps to TRADES and the issue's test."""
    lines = [SUMMARY_HEAD, "| setting | seeds | TRADES | RST | WSCAT | TRADES, every label | "
             "RST − TRADES | WSCAT − TRADES | 3 × larger std | passes |",
             "|---|---|---|---|---|---|---:|---:|---:|---|"]
    for setting in dict.fromkeys(r["setting"] for r in rows):
        mine = [r for r in rows if r["setting"] == setting]
        seeds = sorted({int(r["seed"]) for r in mine})
        if len(seeds) < 2:
            continue
        stats = {m: _mean_std([float(r["Mean"]) for r in mine if r["method"] == m])
                 for m in ("trades", "rst", "wscat", "trades-full")}
        gaps = {m: stats[m][0] - stats["trades"][0] for m in ("rst", "wscat")}
        bound = 3 * max(s for _, s in (stats["trades"], stats["rst"], stats["wscat"]))
        passes = all(gap >= 8 and gap > bound for gap in gaps.values())
        lines.append(f"| {setting} | {' '.join(map(str, seeds))} | "
                     + " | ".join(f"{mean:.2f} ± {std:.2f}" for mean, std in stats.values())
                     + f" | {gaps['rst']:+.2f} | {gaps['wscat']:+.2f} | {bound:.2f} | "
                     f"{'yes' if passes else 'no'} |")
    if len(lines) == 3:
        return []
    verdict = ("No setting passes over seeds, so the demo keeps w16 (the rule's last branch); "
               "the test table is not rerun." if not any(l.endswith("yes |") for l in lines[3:])
               else "A setting passes over seeds (see the table).")
    return lines + ["", verdict, ""]


def render(page: Path) -> None:
    """docs/demo-calibration.md from the CSVs: per stage, one row per setting (and eps)."""
    lines = [PAGE_HEAD]
    for path in sorted(RESULTS.glob("demo-calibration-*.csv")):
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        if not rows:
            continue
        stage = path.stem.removeprefix("demo-calibration-")
        methods = list(dict.fromkeys(r["method"] for r in rows))
        lines += [f"## Stage `{stage}` (`{path.name}`)", "",
                  "Mean per method (Natural / AA in brackets); CPU seconds of training + "
                  "evaluation per run:", "",
                  "| setting | width | labelled | epochs | train PGD steps | eps | seed | "
                  + " | ".join(methods) + " |",
                  "|---|---:|---:|---:|---:|---:|---:|" + "---|" * len(methods)]
        keys = list(dict.fromkeys((r["setting"], r["eps"], r["seed"]) for r in rows))
        for setting, eps, seed in keys:
            group = {r["method"]: r for r in rows
                     if (r["setting"], r["eps"], r["seed"]) == (setting, eps, seed)}
            first = next(iter(group.values()))
            cells = [f"**{g['Mean']}** ({g['Natural']} / {g['AA']}); "
                     f"{float(g['train_s']):.0f}+{float(g['eval_s']):.0f} s"
                     if (g := group.get(m)) else "–" for m in methods]
            lines.append(f"| {setting} | {first['width']} | {first['labelled']} | "
                         f"{first['epochs']} | {first['train_steps']} | {eps} | {seed} | "
                         + " | ".join(cells) + " |")
        lines.append("")
        if stage == "settings":
            lines += summary(rows)
    page.write_text("\n".join(lines))
    print(f"wrote {page}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=sorted(SETTINGS))
    parser.add_argument("--render", type=Path, default=None, help="write the Markdown page")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.15, 0.2])
    parser.add_argument("--only", nargs="*", default=None, help="setting names to run")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--out", type=Path, default=None,
                        help="CSV (default: benchmarks/results/demo-calibration-STAGE.csv)")
    args = parser.parse_args()
    if args.render:
        render(args.render)
        return
    if not args.stage:
        parser.error("pass --stage eps|settings, or --render PAGE")
    torch.set_num_threads(1)
    base = load_params(args.params)
    eps_values = args.eps if args.stage == "eps" else [base["datasets"]["digits"]["eps"]]
    out = args.out or RESULTS / f"demo-calibration-{args.stage}.csv"
    rows: list[dict[str, Any]] = []
    for name, width, labelled, epochs, steps in SETTINGS[args.stage]:
        if args.only and name not in args.only:
            continue
        for eps in eps_values:
            params = with_setting(base, width=width, labelled=labelled, epochs=epochs,
                                  steps=steps, eps=eps)
            for seed in args.seeds:
                with tempfile.TemporaryDirectory() as tmp:
                    for row in run_setting(params, METHODS[args.stage], seed, Path(tmp)):
                        rows.append({"setting": name, "width": width, "labelled": labelled,
                                     "epochs": epochs, "train_steps": steps, "eps": eps,
                                     "seed": seed, **row})
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\n{len(rows)} rows -> {out} ({platform.processor() or 'CPU'}, 1 thread)")
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
