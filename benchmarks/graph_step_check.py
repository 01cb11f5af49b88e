"""Do CUDA graphs change a training step? The same steps eager, compiled, and compiled as graphs.

    # on a lent GPU (~1 minute a method; the proxy's model and batch):
    python3 benchmarks/graph_step_check.py --device cuda --methods mt --steps 30 --out $OUT

Each method trains `--steps` steps three times from one start on the same batches, through the
trainer's own `train_step` (the method's loss, SGD, the EMA/teacher update): eager; compiled
(`torch.compile` mode "default"); compiled with CUDA graphs (mode "reduce-overhead", what the
CIFAR-10 proxy trains with: benchmarks/results/compile-choice-cifar10-proxy.md). Graphs replay the
kernels inductor generated, so the last two should agree to the bit, or at most by what eager and
compiled differ by (rounding). A gap between them well beyond that would be something the
graphs do: an input read from a stale buffer, an output overwritten before it was read
(`wscat.training.speed.begin_graph_step`). The report gives, per pair, the largest difference
of the losses along the way, of the weights, of the EMA's weights and of its batch-norm
statistics at the end, and says which pair is which. On a CPU no CUDA graph is recorded: the
report then labels the second pair as two compiled modes and says, first, that it checks tracing
and code paths only.

Random CIFAR-shaped batches (`--batch`, the proxy's 128; Mean Teacher's with the proxy's 29
labelled images, the rest unlabelled) at a progress past Mean Teacher's ramp-up, so its
consistency term and late teacher decay are what is checked. No data file, no label of anyone's.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

VARIANTS = ("eager", "default", "reduce-overhead")
PAIRS = (("eager", "default", "rounding: eager against compiled"),
         ("default", "reduce-overhead", "graphs: compiled against compiled with CUDA graphs"))
# Without CUDA, mode "reduce-overhead" records no graph: the second pair's label and a first
# paragraph say so, so a CPU run's report is not read as a check of graphs.
NO_GRAPHS_MEANING = "compiled modes: compiled against compiled as reduce-overhead, no graph"
NO_GRAPHS_NOTE = "\n".join((  # a Markdown paragraph, lines of at most 98 characters
    'On a CPU, mode "reduce-overhead" records no CUDA graph: the second row of each table '
    "compares two",
    "compiled modes, not graphs. This page checks tracing and the code paths only "
    "(the graphed step's",
    "included); the graph check proper needs a lent GPU."))
QUANTITIES = ("loss", "weights", "ema_weights", "ema_statistics")  # a gap of each, per pair
LABELLED = 29  # of 128: the proxy's labelled share of a semi-supervised batch


@dataclass
class Trace:
    """One variant's run: the loss of every step, and the states at the end."""
    losses: list[float]
    model: dict[str, torch.Tensor]
    ema_weights: dict[str, torch.Tensor]
    ema_statistics: dict[str, torch.Tensor]
    seconds: float


def _batches(steps: int, batch: int, data: str, device: torch.device
             ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`steps` random batches in [0, 1] with labels; a semi-supervised method's carry -1 (no
    label) after the first LABELLED of every 128."""
    generator = torch.Generator(device=device).manual_seed(0)
    out = []
    for _ in range(steps):
        x = torch.rand(batch, 3, 32, 32, generator=generator, device=device)
        labels = torch.randint(0, 10, (batch,), generator=generator, device=device)
        if data == "semi":
            labels[max(1, batch * LABELLED // 128):] = -1
        out.append((x, labels))
    return out


def run_variant(method_key: str, variant: str, args: argparse.Namespace,
                params: dict[str, Any]) -> Trace:
    """`args.steps` steps of `method_key` from seed 0's start, eager or compiled as `variant`."""
    from throughput import cifar_parts
    from wscat.config import method_for
    from wscat.methods import Batch, StepContext
    from wscat.training.speed import prepare_model, uses_cuda_graphs
    from wscat.training.trainer import train_step

    import torch._dynamo

    torch._dynamo.reset()  # each variant traces and compiles afresh
    device = torch.device(args.device)
    method_params = method_for(params, method_key, args.dataset)
    model, method, optimizer, ema = cifar_parts(params, args.model, method_params, device,
                                                lr=0.05)
    compiled = variant != "eager"
    mode = variant if compiled else "default"
    step_model = prepare_model(model, channels_last=args.channels_last, compile=compiled,
                               mode=mode)  # type: ignore[arg-type]
    graphs = uses_cuda_graphs(compiled, mode)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    generator = torch.Generator(device=device).manual_seed(1)
    model.train()
    method.train()
    losses = []
    started = time.perf_counter()
    for step, (x, labels) in enumerate(_batches(args.steps, args.batch, method_params["data"],
                                                device)):
        x = x.contiguous(memory_format=fmt)
        progress = args.progress + step / 111
        ctx = StepContext(eps=8 / 255, step_size=2 / 255, steps=args.attack_steps,
                          generator=generator, ema_model=ema, progress=progress,
                          augment=lambda t: t)
        decay = method.ema_decay(progress)
        loss, _ = train_step(method, step_model, model, optimizer, ema, Batch(x, x, labels), ctx,
                             precision=args.precision, ema_decay=0.98 if decay is None else decay,
                             cuda_graphs=graphs)
        losses.append(float(loss))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    ema_state = {k: v.detach().clone() for k, v in ema.state_dict().items()}
    weights = {name for name, _ in ema.named_parameters()}
    return Trace(losses, {k: v.detach().clone() for k, v in model.state_dict().items()},
                 {k: v for k, v in ema_state.items() if k in weights},
                 {k: v for k, v in ema_state.items()
                  if k not in weights and v.is_floating_point()}, seconds)


def _largest(gaps: list[float]) -> float:
    """The largest of `gaps` (0 for none), NaN where any is NaN: Python's `max` would drop a NaN
    that is not first, and a run that diverged would pass for one that agrees."""
    if any(math.isnan(gap) for gap in gaps):
        return math.nan
    return max(gaps, default=0.0)


def _gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest absolute difference over every tensor of two states (NaN where any is)."""
    if a.keys() != b.keys():
        raise ValueError(f"states differ in their keys: {sorted(a.keys() ^ b.keys())[:3]}")
    return _largest([float((a[k].float() - b[k].float()).abs().max()) for k in a])


def compare(traces: dict[str, Trace]) -> list[dict[str, Any]]:
    """Per pair of PAIRS: the largest difference of the losses, weights, EMA weights and EMA
    batch-norm statistics."""
    rows = []
    for first, second, meaning in PAIRS:
        a, b = traces[first], traces[second]
        rows.append({
            "pair": f"{first} / {second}", "meaning": meaning,
            "loss": _largest([abs(x - y) for x, y in zip(a.losses, b.losses, strict=True)]),
            "weights": _gap(a.model, b.model), "ema_weights": _gap(a.ema_weights, b.ema_weights),
            "ema_statistics": _gap(a.ema_statistics, b.ema_statistics)})
    return rows


def _non_finite(row: dict[str, Any]) -> list[str]:
    """The quantities of one pair's row whose gap is NaN or infinite."""
    return [k for k in QUANTITIES if not math.isfinite(row[k])]


def verdict(rows: list[dict[str, Any]]) -> str:
    """Whether the graphs' gap stays within the rounding gap, on every quantity; a gap that is
    not finite (NaN or infinite: a run diverged) in either pair fails, whatever the other."""
    broken = [f"{', '.join(_non_finite(row))} ({row['pair']})" for row in rows
              if _non_finite(row)]
    if broken:
        return ("NON-FINITE gaps (NaN or infinite) in " + "; ".join(broken) +
                ": a run diverged, which no rounding explains")
    rounding, graphs = rows
    worse = [k for k in QUANTITIES if graphs[k] > rounding[k]]
    if not worse:
        return ("graphs change nothing beyond rounding: every gap between compiled and graphed "
                "is within the gap between eager and compiled")
    return ("GRAPHS DIFFER beyond rounding in " + ", ".join(worse) +
            ": compiled and graphed should replay the same kernels")


def _cell(gap: float) -> str:
    """A gap for the report's table: three significant digits, or 'non-finite' (NaN, inf)."""
    return f"{gap:.3g}" if math.isfinite(gap) else "non-finite"


def report(method_key: str, traces: dict[str, Trace], args: argparse.Namespace,
           machine: str, graphs: bool = True) -> str:
    """One method's section of the report: the table of gaps per pair, the seconds, the verdict.
    Without `graphs` (no CUDA device) the second pair is labelled as two compiled modes."""
    rows = compare(traces)
    if not graphs:
        rows[1]["meaning"] = NO_GRAPHS_MEANING
    lines = [f"## {method_key}: {args.steps} steps, {args.model}, batch {args.batch}, "
             f"{args.precision}, progress {args.progress} ({machine})", "",
             "| pair | what the gap is | loss | weights | EMA weights "
             "| EMA batch-norm statistics |",
             "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        cells = " | ".join(_cell(row[k]) for k in QUANTITIES)
        lines.append(f"| {row['pair']} | {row['meaning']} | {cells} |")
    seconds = ", ".join(f"{v} {t.seconds:.1f} s" for v, t in traces.items())
    lines += ["", f"Seconds (compilation included): {seconds}.", "",
              f"**{verdict(rows)}.**", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--methods", nargs="+", default=["mt"])
    parser.add_argument("--model", default="wrn-16-4", help="a params.yaml `models` key")
    parser.add_argument("--dataset", default="cifar10-proxy",
                        help="whose per-dataset method knobs to use")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--attack-steps", type=int, default=10)
    parser.add_argument("--progress", type=float, default=40.0,
                        help="training progress in epochs at the first step (past the ramp-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None,
                        help="a folder for graph-step-check.md (written after each method)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1")

    from wscat.config import load_params
    from wscat.provenance import machine as hardware
    from wscat.training.speed import configure_backend

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    configure_backend(device, deterministic=True)
    params = load_params(ROOT / "params.yaml")
    unknown = [m for m in args.methods if m not in params["methods"]]
    if unknown or args.model not in params["models"]:
        parser.error(f"not in params.yaml: {', '.join(unknown) or args.model}")
    machine = f"{hardware(device)}, torch {torch.__version__}"
    given = " ".join(sys.argv[1:] if argv is None else argv)
    graphs = device.type == "cuda"
    text = ["# CUDA graphs against eager and compiled training steps", "",
            *([] if graphs else [NO_GRAPHS_NOTE, ""]),
            f"`python3 benchmarks/graph_step_check.py {given}`", ""]
    for method_key in args.methods:
        traces = {variant: run_variant(method_key, variant, args, params) for variant in VARIANTS}
        text.append(report(method_key, traces, args, machine, graphs))
        print(text[-1], flush=True)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "graph-step-check.md").write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
