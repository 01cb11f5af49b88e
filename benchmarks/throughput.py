"""Training throughput per method and model: images/s of a whole step (the trainer's own
`train_step`: attack, update, EMA), of its attack (the inner maximisation) and of the update;
forward passes a step; peak memory; on a GPU, the share of the GPU's peak FLOP/s.

    # CPU, the speed bar of the authors' release (WRN-16-4, batch 64, PGD-10, 2 threads):
    .venv/bin/python benchmarks/throughput.py --models wrn-16-4 --methods trades rst wscat --batch 64
    # GPU node, the paper's model with the speed switches on:
    .venv/bin/python benchmarks/throughput.py --device cuda --models wrn-28-10 --batch 128 \\
        --precision bf16 --channels-last --methods trades rst wscat

Each (model, method) runs in a fresh process with an empty compile cache, so peak memory and
compile time are its own. Inputs are random
CIFAR-shaped batches (content does not change the cost). Results go to
benchmarks/results/{tag}.json and .md, each with the command line that wrote it; docs/speed.md
quotes the Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wscat.training.speed import CompileMode  # noqa: E402

# Dense peak of the tensor cores (bf16; TF32 is half of it), by device-name fragment, the first
# fragment the name holds: the PCIe and NVL cards before the SXM ones they share a name with.
# No V100 (no bf16 or TF32 tensor cores: its share is "n/a").
PEAK_BF16_FLOPS = {"H100 PCIe": 756e12, "H100 NVL": 835e12, "H200 NVL": 835e12,
                   "H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12,
                   "RTX 4090": 165e12, "A40": 150e12}


def machine(device: str, threads: int) -> str:
    """The hardware (wscat.provenance.machine, as Tab-ap-time names it) and the torch version."""
    from wscat.provenance import machine as hardware

    torch.set_num_threads(threads)
    return f"{hardware(torch.device(device))}, torch {torch.__version__}"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cifar_parts(params: dict[str, Any], model_key: str, method_params: dict[str, Any],
                device: torch.device, *, lr: float) -> tuple[Any, Any, Any, Any]:
    """Seed 0's start on CIFAR-shaped input: the classifier, the method, the trainer's SGD
    (Nesterov, weight decay 5e-4) at `lr`, and the EMA."""
    from wscat.methods import build_method
    from wscat.models import build_model
    from wscat.optim import SGD  # the trainer's optimizer
    from wscat.training.ema import make_ema

    torch.manual_seed(0)
    model = build_model(**params["models"][model_key], in_channels=3, num_classes=10,
                        mean=(0.4914, 0.4822, 0.4465), std=(0.2023, 0.1994, 0.2010)).to(device)
    method = build_method(method_params, feature_dim=model.feature_dim, num_classes=10,
                          image_shape=(3, 32, 32)).to(device)
    optimizer = SGD(list(model.parameters()) + list(method.trainable_parameters()),
                    lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    return model, method, optimizer, make_ema(model)


def _step(model_key: str, method_key: str, args: argparse.Namespace
          ) -> tuple[Callable[[], None], torch.nn.Module, torch.device]:
    """One training step of (model, method) on a random CIFAR-shaped batch, as a closure; the
    classifier it trains; the device."""
    from wscat.config import load_params, method_for
    from wscat.methods import Batch, StepContext
    from wscat.training.speed import configure_backend, prepare_model, uses_cuda_graphs
    from wscat.training.trainer import train_step

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    configure_backend(device, deterministic=args.deterministic)
    params = load_params(ROOT / "params.yaml")
    method_params = method_for(params, method_key, "cifar10")
    model, method, optimizer, ema = cifar_parts(params, model_key, method_params, device,
                                                lr=0.01)
    step_model = prepare_model(model, channels_last=args.channels_last, compile=args.compile,
                               mode=args.compile_mode)
    generator = torch.Generator(device=device).manual_seed(0)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    x = torch.rand(args.batch, 3, 32, 32, generator=generator, device=device).contiguous(
        memory_format=fmt)
    labels = torch.randint(0, 10, (args.batch,), generator=generator, device=device)
    if method_params["data"] == "semi":
        labels[args.batch // 10:] = -1
    ctx = StepContext(eps=8 / 255, step_size=2 / 255, steps=args.attack_steps, generator=generator,
                      ema_model=ema, progress=5.0, augment=lambda t: t)
    batch = Batch(x, x, labels)
    model.train()

    graphs = uses_cuda_graphs(args.compile, args.compile_mode)

    def step() -> None:
        train_step(method, step_model, model, optimizer, ema, batch, ctx,
                   precision=args.precision, ema_decay=0.995, cuda_graphs=graphs)

    return step, model, device


def _warm_up(model: torch.nn.Module, step: Callable[[], None], warmup: int,
             device: torch.device) -> tuple[int, float]:
    """The classifier's forward passes a step (one step run eagerly, a hook counting), then the
    `warmup` steps and their seconds: torch.compile's tracing and code generation and CUDA
    graphs' recording happen there, the cost a short training run must earn back. The hook is
    gone before anything compiles, so the timed steps never recompile for its removal."""
    forwards: list[int] = []
    hook = model.register_forward_hook(lambda *_: forwards.append(1))
    with torch.compiler.set_stance("force_eager"):
        step()
    hook.remove()
    _sync(device)
    started = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(device)
    return len(forwards), time.perf_counter() - started


def _seconds_per_step(step: Callable[[], None], iters: int, device: torch.device) -> float:
    _sync(device)
    started = time.perf_counter()
    for _ in range(iters):
        step()
    _sync(device)
    return (time.perf_counter() - started) / iters


def _attack_seconds_per_step(step: Callable[[], None], iters: int, device: torch.device) -> float:
    """The attack's share: time each call of the PGD engine inside the methods (synchronised)."""
    import wscat.methods as methods_pkg

    attack_seconds = [0.0]
    patched = []
    for name in dir(methods_pkg):
        module = getattr(methods_pkg, name)
        if hasattr(module, "pgd") and callable(getattr(module, "pgd")) and hasattr(module, "__file__"):
            original = module.pgd

            def timed(*a: Any, _original: Any = original, **k: Any) -> torch.Tensor:
                _sync(device)
                t0 = time.perf_counter()
                out = _original(*a, **k)
                _sync(device)
                attack_seconds[0] += time.perf_counter() - t0
                return out

            module.pgd = timed
            patched.append((module, original))
    try:
        for _ in range(iters):
            step()
    finally:  # a step that raises leaves the methods' own attack in place
        for module, original in patched:
            module.pgd = original
    return attack_seconds[0] / iters


def _flops_per_step(step: Callable[[], None]) -> int | None:
    try:
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            step()
        return counter.get_total_flops()
    except Exception:  # noqa: BLE001 - FLOP counting is informative only
        return None


def _peak_flops_share(flops: int | None, step_seconds: float, device: torch.device,
                      precision: str) -> float | None:
    """Achieved FLOP/s over the GPU's dense peak (TF32 is half the bf16 peak); None on a CPU."""
    if device.type != "cuda" or not flops:
        return None
    name = torch.cuda.get_device_name(0)
    peak_flops = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
    if not peak_flops:
        return None
    peak_flops = peak_flops if precision == "bf16" else peak_flops / 2
    return flops / step_seconds / peak_flops


def measure(model_key: str, method_key: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time `iters` training steps of one (model, method) after `warmup` steps."""
    step, model, device = _step(model_key, method_key, args)
    per_step, warmup_seconds = _warm_up(model, step, args.warmup, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step_seconds = _seconds_per_step(step, args.iters, device)
    attack = 0.0 if args.step_only else _attack_seconds_per_step(step, args.iters, device)
    flops = None if args.step_only else _flops_per_step(step)
    peak = (torch.cuda.max_memory_allocated(device) if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    share = _peak_flops_share(flops, step_seconds, device, args.precision)
    return {"model": model_key, "method": method_key, "batch": args.batch,
            "attack_steps": args.attack_steps, "precision": args.precision,
            "channels_last": args.channels_last, "compile": args.compile,
            "compile_mode": args.compile_mode if args.compile else None,
            "deterministic": args.deterministic, "forwards_per_step": per_step,
            "warmup_steps": args.warmup, "warmup_seconds": warmup_seconds,
            "step_images_per_s": args.batch / step_seconds,
            "attack_images_per_s": args.batch / attack if attack > 0 else None,
            "update_images_per_s": (None if args.step_only
                                    else args.batch / max(step_seconds - attack, 1e-9)),
            "seconds_per_step": step_seconds, "peak_memory_mb": peak / 2**20,
            "flops_per_step": flops, "peak_flops_share": share}


def markdown(rows: list[dict[str, Any]], title: str) -> str:
    lines = [f"**{title}**", "",
             "| model | method | batch | precision | step img/s | attack img/s | update img/s "
             "| fwd/step | peak MiB | GPU FLOP/s share | warm-up s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = f"{100 * r['peak_flops_share']:.1f}%" if r["peak_flops_share"] else "n/a"
        attack = f"{r['attack_images_per_s']:.1f}" if r["attack_images_per_s"] else "n/a"
        update = f"{r['update_images_per_s']:.1f}" if r["update_images_per_s"] else "n/a"
        lines.append(f"| {r['model']} | {r['method']} | {r['batch']} | {r['precision']} | "
                     f"{r['step_images_per_s']:.1f} | {attack} | {update} | "
                     f"{r['forwards_per_step']} | {r['peak_memory_mb']:.0f} | {share} | "
                     f"{r['warmup_seconds']:.1f} |")
    by_model: dict[str, dict[str, float]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["method"]] = r["seconds_per_step"]
    for model, times in by_model.items():
        if "wscat" in times and "trades" in times:
            extra = 100 * (times["wscat"] / times["trades"] - 1)
            lines.append(f"\n{model}: a WSCAT step costs {extra:+.1f}% against a TRADES step.")
    return "\n".join(lines) + "\n"


def run_row(model: str, method: str, argv: list[str], timeout: float | None
            ) -> subprocess.CompletedProcess:
    """One (model, method) row in a fresh process with an empty compile cache of its own
    (inductor's and Triton's): a row run after another of the same model would otherwise load the
    graphs they share (the natural forward and its backward) from the cache, and its warm-up
    seconds would leave out the cold compile that a seed's training on a fresh machine pays."""
    with tempfile.TemporaryDirectory(prefix="throughput-cache-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache,
               "TRITON_CACHE_DIR": os.path.join(cache, "triton")}
        return subprocess.run([sys.executable, __file__, *argv, "--one", model, method],
                              capture_output=True, text=True, timeout=timeout, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["wrn-16-4"], help="keys of params.yaml models")
    parser.add_argument("--methods", nargs="+", default=["trades", "rst", "wscat"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--attack-steps", type=int, default=10)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--compile-mode", default="default",
                        choices=get_args(CompileMode),
                        help="torch.compile's mode (reduce-overhead: CUDA graphs; warm up >= 3 "
                             "steps); implies --compile")
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--step-only", action="store_true",
                        help="time the whole step only: no attack/update split, no FLOP count "
                             "(a quicker call; those columns read n/a)")
    parser.add_argument("--row-timeout", type=float, default=None,
                        help="seconds one (model, method) row may take, warm-up and compilation "
                             "included; a row past it is listed as failed and the rest go on")
    parser.add_argument("--tag", default=None, help="results file name (default: from the device)")
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.compile = args.compile or args.compile_mode != "default"
    if args.one:
        print(json.dumps(measure(*args.one, args)))
        return 0
    rows, failed = [], []
    passthrough = [a for a in sys.argv[1:]]
    for model in args.models:
        for method in args.methods:
            try:
                result = run_row(model, method, passthrough, args.row_timeout)
            except subprocess.TimeoutExpired:
                failed.append(f"{model} {method} failed: timed out after {args.row_timeout:g} s")
                print(f"throughput: {failed[-1]}", file=sys.stderr, flush=True)
                continue
            if result.returncode != 0:  # say it, go on: one failing mode must not hide the rest
                failed.append(f"{model} {method} failed: "
                              f"{(result.stderr.strip().splitlines() or ['?'])[-1]}")
                print(f"throughput: {failed[-1]}", file=sys.stderr, flush=True)
                continue
            row = json.loads(result.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{model:10s} {method:10s} {row['step_images_per_s']:8.1f} img/s "
                  f"(attack {row['attack_images_per_s'] or 0:.1f}, update "
                  f"{row['update_images_per_s'] or 0:.1f}) fwd/step {row['forwards_per_step']}, "
                  f"warm-up {row['warmup_seconds']:.1f} s",
                  flush=True)
    compiled = "" if not args.compile else (
        ", compiled" if args.compile_mode == "default" else f", compiled ({args.compile_mode})")
    title = f"{machine(args.device, args.threads)}; PGD-{args.attack_steps}, {args.precision}" + (
        ", channels_last" if args.channels_last else "") + compiled + (
        ", deterministic" if args.deterministic else "")
    tag = args.tag or ("gpu" if args.device.startswith("cuda") else "cpu")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/throughput.py " + shlex.join(sys.argv[1:])
    page = (f"Command: `{command}`\n\n" + markdown(rows, title)
            + "".join(f"\n- {line}" for line in failed) + "\n" * bool(failed))
    (out / f"{tag}.json").write_text(json.dumps({"machine": title, "command": command,
                                                 "rows": rows, "failed": failed},
                                                indent=1) + "\n")
    (out / f"{tag}.md").write_text(page)
    print(page)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
