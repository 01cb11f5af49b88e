"""The official standard AutoAttack two ways, side by side in one run, per attack: the library as
the pipeline called it before (`library`: pyautoattack's own AutoAttack, weights requiring
gradients, glibc's default malloc) and as `wscat evaluate` calls it now (`wscat`: frozen weights,
`FastSquareAttack`, freed memory kept; `wscat.attacks.autoattack`). Each run is a fresh process
(so the malloc setting of one cannot leak into the other); the two alternate model by model.
Both must give the same robust flags, bit for bit; the page says whether they did.

    make demo   # the 15 demo models
    .venv/bin/python benchmarks/autoattack_speed.py --results results --methods wscat --seeds 1 \
        --tag cpu          # the issue's model: WSCAT seed 1, all 359 test images, one thread

writes benchmarks/results/autoattack-speed-{tag}.md and .json with the CPU named. Seconds are
wall-clock and CPU (user + system) of the attack's `perturb` calls; on a busy machine read the
CPU column. `--profile FILE` writes a cProfile of the wscat run instead (CPU-time timer).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the workers import wscat where it is not installed (a lent GPU)
sys.path.insert(0, str(ROOT / "benchmarks"))  # model_passes, forward_variants beside this file

from model_passes import cpu_seconds as _cpu_seconds  # noqa: E402
ATTACKS = ("apgd-ce", "apgd-t", "fab-t", "square")
PATHS = ("library", "wscat")


def _machine(device: str, threads: int) -> str:
    """The GPU's name, or the CPU's model and threads (`wscat.provenance.machine`)."""
    import torch

    from wscat.provenance import machine

    torch.set_num_threads(threads)
    return machine(torch.device(device))


def _synchronise() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _load(results: Path, params_path: Path, dataset: str, model: str, method: str, seed: int,
          device: str = "cpu"):
    """The model and its evaluated test images, exactly as `wscat evaluate` takes them."""
    import torch
    import yaml

    from wscat.config import RunConfig
    from wscat.data import load_dataset
    from wscat.data.split import load_split_of
    from wscat.inference import load_model
    from wscat.steps.evaluate import _evaluated_test_set

    params = yaml.safe_load(params_path.read_text())
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    split = load_split_of(results / f"splits/{dataset}/seed{seed}.npz", dataset, seed)
    checkpoint = results / f"models/{dataset}/{model}/{method}/seed{seed}/best.pt"
    net, _ = load_model(checkpoint, torch.device(device), model=model, spec=run.model_spec)
    source = load_dataset(dataset, run.data)
    x, y = source.take(_evaluated_test_set(split, source.labels, run.evaluation),
                       torch.device(device))
    return net, x, y, run


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One AutoAttack standard run on one model along `args.worker`'s path; its timings and flags."""
    import torch

    torch.set_num_threads(args.threads)
    if args.worker == "wscat":
        from wscat.memory import keep_freed_memory

        keep_freed_memory()
    from pyautoattack import AutoAttack

    from wscat.attacks import autoattack
    from wscat.attacks.mode import eval_mode_enforced, frozen_parameters
    from wscat.models import LogitsOnly

    net, x, y, run = _load(args.results, args.params, args.dataset, args.model, args.method,
                           args.seed, args.device)
    if args.device.startswith("cuda"):
        from wscat.training.speed import configure_backend

        configure_backend(torch.device(args.device), deterministic=run.training["deterministic"])
    aa, eps = run.evaluation["autoattack"], run.data["eps"]
    batch = run.evaluation["batch_size"]
    if args.worker == "library" and args.library_batch:
        batch = args.library_batch
    if args.worker == "wscat" and args.forward == "folded-bn":
        from forward_variants import fold_batch_norm

        net = fold_batch_norm(net)
    logits = LogitsOnly(net).eval()
    recorder = None
    if args.worker == "wscat" and args.model_passes:
        from model_passes import PassRecorder

        logits = recorder = PassRecorder(logits).eval()
    if args.worker == "wscat":
        with torch.no_grad():
            n_classes = int(logits(x[:1]).shape[1])
        adversary = autoattack.build(logits, variant="standard", eps=eps, seed=aa["seed"],
                                     n_classes=n_classes, device=x.device)
        frozen = frozen_parameters(net)
    else:
        adversary = AutoAttack(logits, eps=eps, norm="Linf", version="standard", seed=aa["seed"],
                               device=x.device)
        frozen = nullcontext()
    spent: dict[str, dict[str, float]] = {}
    for name, attack in zip(ATTACKS, (adversary.apgd, adversary.apgd_targeted, adversary.fab,
                                      adversary.square)):
        def timed(*a: Any, _perturb: Any = attack.perturb, _name: str = name, **k: Any) -> Any:
            _synchronise()
            if recorder is not None:
                recorder.current = _name
            wall, cpu = time.perf_counter(), _cpu_seconds()
            out = _perturb(*a, **k)
            _synchronise()
            if recorder is not None:
                recorder.current = None
            entry = spent.setdefault(_name, {"wall_s": 0.0, "cpu_s": 0.0, "points": 0})
            entry["wall_s"] += time.perf_counter() - wall
            entry["cpu_s"] += _cpu_seconds() - cpu
            entry["points"] += len(a[0])
            return out
        attack.perturb = timed
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    wall, cpu = time.perf_counter(), _cpu_seconds()
    with eval_mode_enforced(net), frozen:
        x_adv, _ = adversary.run_standard_evaluation(x, y, batch_size=batch)
    total = {"wall_s": time.perf_counter() - wall, "cpu_s": _cpu_seconds() - cpu}
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    passes = None
    if recorder is not None:
        from model_passes import replay, tally

        calls = [call for call in recorder.calls if call["attack"] in ATTACKS]
        with eval_mode_enforced(net), frozen_parameters(net):
            passes = {"count": tally(calls),
                      "alone": replay(recorder.inner, x, calls, _synchronise)}
    with torch.no_grad():
        robust = (logits(x_adv).argmax(1) == y).tolist()
    return {"path": args.worker, "attacks": spent, "total": total, "n_examples": len(x),
            **({"model_passes": passes} if passes else {}),
            "batch_size": batch, "forward": args.forward if args.worker == "wscat" else "eager",
            "robust": "".join("1" if r else "0" for r in robust),
            "x_adv_sha": __import__("hashlib").sha256(x_adv.cpu().numpy().tobytes()).hexdigest()}


def _run_worker(args: argparse.Namespace, path: str, method: str, seed: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", path, "--results", str(args.results),
               "--params", str(args.params), "--dataset", args.dataset, "--model", args.model,
               "--method", method, "--seed", str(seed), "--threads", str(args.threads),
               "--device", args.device, "--library-batch", str(args.library_batch or 0),
               "--forward", args.forward, *(["--model-passes"] if args.model_passes else [])]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"{path} run of {method} seed {seed} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(runs: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    """The Markdown page: per model and attack, the two paths' seconds and whether flags agree."""
    where = "GPU" if args.device.startswith("cuda") else "CPU"
    lines = [f"# AutoAttack (standard) on the {where}: the library's path against wscat's",
             "",
             f"- Machine: {_machine(args.device, args.threads)}; "
             f"{datetime.now(timezone.utc):%Y-%m-%d}",
             f"- Command: `{command}`",
             "- `library`: pyautoattack's AutoAttack as the pipeline called it before "
             "(weights requiring gradients, glibc's default malloc); `wscat`: "
             "`wscat.attacks.autoattack` now (frozen weights, FastSquareAttack, freed memory "
             "kept). Each run is its own process; the two alternate.",
             "- Seconds of each attack's `perturb` calls: wall-clock, and CPU (user + system) in "
             "brackets. `points`: the examples the attack ran on (AutoAttack attacks only the "
             "points still robust).",
             ""]
    if args.forward != "eager":
        lines[-1:-1] = [f"- wscat's path ran the model with the `{args.forward}` forward "
                        "(benchmarks/forward_variants.py): another rounding of the same "
                        "function, so flags may differ; the page counts them."]
    passes = all("model_passes" in run["wscat"] for run in runs)
    if passes:
        lines[-1:-1] = [
            "- `model passes alone`: every pass wscat's run asked of the model (its batch size; "
            "a forward, or a forward and the input's gradient), recorded during the run and "
            "replayed alone on the same model and images afterwards "
            "(`benchmarks/model_passes.py`): the seconds no change outside the model's kernels "
            "can remove. `passes`: forward / gradient passes."]
    header = ["model", "attack", "points", "library s", "wscat s", "wscat / library (CPU)"]
    header += ["model passes alone s", "passes"] if passes else []
    lines += [_row(header), _row(["---"] * 2 + ["---:"] * (len(header) - 2))]
    floor = {"wall_s": 0.0, "cpu_s": 0.0}
    totals = {p: {"wall_s": 0.0, "cpu_s": 0.0} for p in PATHS}
    identical, compared, moved = True, 0, 0  # compared/moved: runs in another layout or forward
    for run in runs:
        lib, new = run["library"], run["wscat"]
        name = f"{run['method']} seed {run['seed']}"
        for attack in ATTACKS:
            a, b = lib["attacks"].get(attack), new["attacks"].get(attack)
            if a is None and b is None:
                continue
            a = a or {"wall_s": 0.0, "cpu_s": 0.0, "points": 0}
            b = b or {"wall_s": 0.0, "cpu_s": 0.0, "points": 0}
            ratio = f"{b['cpu_s'] / a['cpu_s']:.2f}" if a["cpu_s"] > 0 else "-"
            cells = [name, attack, str(a["points"]), f"{a['wall_s']:.1f} ({a['cpu_s']:.1f})",
                     f"{b['wall_s']:.1f} ({b['cpu_s']:.1f})", ratio]
            if passes:
                alone = new["model_passes"]["alone"].get(attack, {"wall_s": 0.0, "cpu_s": 0.0})
                count = new["model_passes"]["count"].get(attack, {"forward": 0, "gradient": 0})
                floor = {k: floor[k] + alone[k] for k in floor}
                cells += [f"{alone['wall_s']:.1f} ({alone['cpu_s']:.1f})",
                          f"{count['forward']:,} / {count['gradient']:,}"]
            lines.append(_row(cells))
        for path, result in (("library", lib), ("wscat", new)):
            for key in ("wall_s", "cpu_s"):
                totals[path][key] += result["total"][key]
        same = lib["robust"] == new["robust"] and lib["x_adv_sha"] == new["x_adv_sha"]
        layouts = (lib.get("batch_size"), new.get("batch_size"))
        forward = new.get("forward", "eager")
        elsewhere = layouts[0] != layouts[1] or forward != "eager"
        identical &= same or elsewhere
        whole = [name, "**whole AutoAttack**", str(lib["n_examples"]),
                 f"{lib['total']['wall_s']:.1f} ({lib['total']['cpu_s']:.1f})",
                 f"{new['total']['wall_s']:.1f} ({new['total']['cpu_s']:.1f})",
                 f"{new['total']['cpu_s'] / lib['total']['cpu_s']:.2f}"]
        if passes:
            alone = new["model_passes"]["alone"].values()
            whole += [f"{sum(a['wall_s'] for a in alone):.1f} "
                      f"({sum(a['cpu_s'] for a in alone):.1f})", ""]
        lines.append(_row(whole))
        if elsewhere:
            changed = sum(a != b for a, b in zip(lib["robust"], new["robust"]))
            compared, moved = compared + 1, moved + changed
            how = (f"batches of {layouts[0]} against {layouts[1]}" if layouts[0] != layouts[1]
                   else f"wscat's forward {forward}")
            verdict = f"{how}: {changed} flags differ ({new['robust'].count('1')} robust)"
        else:
            verdict = "identical" if same else "**DIFFER**"
        lines.append(_row([name, "robust flags, adversarial images",
                           f"{lib['robust'].count('1')} robust", "", "", verdict]
                          + ["", ""] * passes))
    lib, new = totals["library"], totals["wscat"]
    lines += ["", f"All models: library {lib['wall_s']:.1f} s ({lib['cpu_s']:.1f} s CPU), wscat "
              f"{new['wall_s']:.1f} s ({new['cpu_s']:.1f} s CPU): "
              f"{100 * new['cpu_s'] / max(lib['cpu_s'], 1e-9):.0f}% of the library's CPU time, "
              f"{100 * new['wall_s'] / max(lib['wall_s'], 1e-9):.0f}% of its wall time."]
    if compared < len(runs):
        lines[-1] += (f" Robust flags and adversarial images "
                      f"{'identical' if identical else 'NOT identical'} on every model run in "
                      "the same batches and forward.")
    if compared:
        lines[-1] += (f" On the {compared} model(s) run in another batch layout or forward, "
                      f"{moved} robust flag(s) differ.")
    if passes:
        lines[-1] += (f" The model's own passes, replayed alone, took {floor['cpu_s']:.1f} s of "
                      f"CPU: {100 * floor['cpu_s'] / max(lib['cpu_s'], 1e-9):.0f}% of the "
                      "library's time, against the issue's target of 40%.")
    lines.append("")
    return "\n".join(lines)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a trained model and its test images are: results folder, params, dataset, model."""
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--model", default="cnn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--methods", nargs="+", default=["wscat"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (a GPU node)")
    parser.add_argument("--library-batch", type=int, default=0,
                        help="the library path's batch (default: the params' evaluation batch, "
                             "as wscat's). The proxy's old layout was 500 (two shards of 500); "
                             "another layout gives images other random starts, so flags may "
                             "differ: the page says so")
    parser.add_argument("--forward", choices=("eager", "folded-bn"), default="eager",
                        help="wscat's path only: folded-bn folds each batch norm into its "
                             "convolution (benchmarks/forward_variants.py), another rounding, so "
                             "the page counts the flags that differ")
    parser.add_argument("--tag", default="cpu")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--worker", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=Path, help="cProfile the wscat run to this file")
    parser.add_argument("--model-passes", action="store_true",
                        help="also record every pass wscat's run asks of the model and replay "
                             "them alone afterwards (benchmarks/model_passes.py): the model's own "
                             "seconds, a floor for any change outside its kernels")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if args.profile:
        args.profile.parent.mkdir(parents=True, exist_ok=True)  # before the minute of attacks
        args.worker, args.method, args.seed = "wscat", args.methods[0], args.seeds[0]
        worker(args)
        print(f"profile written to {args.profile}")
        return
    command = "python benchmarks/autoattack_speed.py " + " ".join(sys.argv[1:])
    runs = []
    for number, (method, seed) in enumerate((m, s) for m in args.methods for s in args.seeds):
        order = PATHS if number % 2 == 0 else PATHS[::-1]
        run: dict[str, Any] = {"method": method, "seed": seed}
        for path in order:
            run[path] = _run_worker(args, path, method, seed)
            print(f"{method} seed {seed} {path}: {run[path]['total']['wall_s']:.1f} s "
                  f"({run[path]['total']['cpu_s']:.1f} s CPU)", file=sys.stderr, flush=True)
        runs.append(run)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    page = render(runs, args, command)
    (args.out_dir / f"autoattack-speed-{args.tag}.md").write_text(page)
    (args.out_dir / f"autoattack-speed-{args.tag}.json").write_text(
        json.dumps({"machine": _machine(args.device, args.threads), "runs": runs}, indent=1))
    print(page)


if __name__ == "__main__":
    main()
