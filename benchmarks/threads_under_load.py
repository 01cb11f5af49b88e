"""What torch's CPU threads cost on a busy machine: the demo's CNN (width 24, 8x8 digits-sized
inputs, eval mode) doing what every attack does, a forward pass and the input gradient, at one
thread and at several, alone and beside busy processes, in one run, alternating.

    .venv/bin/python benchmarks/threads_under_load.py [--threads 1 2] [--busy 2] \\
        [--batches 8 243] [--passes 300] [--repeats 5] \\
        [--out benchmarks/results/threads-under-load-cpu.md]

Each timing is a fresh process (its own thread pool); the busy processes are plain Python loops,
one per core by default, as a second pytest worker or another job would be. Medians and the
slowest of the repeats (the stalls come at random), with the CPU named. Why: `make test` runs
two workers on two cores, and a torch parallel region waits for every one of its threads, so a
thread the kernel has put aside stalls the pass (tests/conftest.py; docs/tests.md).
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from demo_profile import _cpu_model  # noqa: E402 - a sibling script

PASSES = """
import sys, time, torch
from wscat.models import build_model
threads, batch, passes = (int(a) for a in sys.argv[1:4])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.37,), width=24).eval()
x = torch.rand(batch, 1, 8, 8, requires_grad=True)
started = time.perf_counter()
for _ in range(passes):
    torch.autograd.grad(model(x)[1].sum(), x)
print(time.perf_counter() - started)
"""
BUSY = "while True: pass"


def passes_seconds(threads: int, batch: int, passes: int) -> float:
    """Seconds of `passes` forward + input-gradient passes in a fresh process."""
    out = subprocess.run([sys.executable, "-c", PASSES, str(threads), str(batch), str(passes)],
                         cwd=ROOT, check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def measure(threads: list[int], batches: list[int], busy: int, passes: int, repeats: int
            ) -> dict[tuple[int, int, int], list[float]]:
    """{(busy processes, batch, threads): seconds of each repeat}; conditions alternate."""
    times: dict[tuple[int, int, int], list[float]] = {}
    for _ in range(repeats):
        for load in (0, busy):
            hogs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(load)]
            try:
                for batch in batches:
                    for n in threads:
                        times.setdefault((load, batch, n), []).append(
                            passes_seconds(n, batch, passes))
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
    return times


def _spread(seconds: list[float]) -> str:
    """'median (min-max)' of the repeats."""
    return f"{statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"


def render(times: dict[tuple[int, int, int], list[float]], args: argparse.Namespace) -> str:
    """The page: a row per batch and thread count, alone and beside the busy processes."""
    import torch

    base = args.threads[0]
    lines = [f"# torch threads on a busy CPU: {args.passes} forward + input-gradient passes of "
             "the demo's CNN",
             "",
             f"`.venv/bin/python benchmarks/threads_under_load.py --threads "
             f"{' '.join(map(str, args.threads))} --busy {args.busy} --batches "
             f"{' '.join(map(str, args.batches))} --passes {args.passes} --repeats {args.repeats}`",
             "",
             f"Machine: {_cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}; "
             f"{datetime.date.today()}; load average at the end {os.getloadavg()[0]:.2f}. "
             f"Seconds of {args.repeats} repeats (each a fresh process; the slow ones come at "
             f"random, so the slowest is shown too); 'beside' = beside {args.busy} busy Python "
             "loops.",
             "",
             "| batch | threads | alone s: median (min-max) | beside s: median (min-max) | "
             "beside / alone (medians) | slowest beside / slowest beside at "
             f"{base} thread{'s' if base > 1 else ''} |",
             "|---:|---:|---:|---:|---:|---:|"]
    for batch in args.batches:
        worst = max(times[(args.busy, batch, base)])
        for n in args.threads:
            alone, beside = times[(0, batch, n)], times[(args.busy, batch, n)]
            lines.append(f"| {batch} | {n} | {_spread(alone)} | {_spread(beside)} | "
                         f"{statistics.median(beside) / statistics.median(alone):.1f} | "
                         f"{max(beside) / worst:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    cores = os.cpu_count() or 1
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, cores}))
    parser.add_argument("--busy", type=int, default=cores, help="busy processes beside")
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 243],
                        help="images a pass (243: Square's images on the demo's WSCAT model)")
    parser.add_argument("--passes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if min(args.threads + args.batches + [args.passes, args.repeats]) < 1 or args.busy < 0:
        parser.error("threads, batches, passes and repeats must be 1 or more, busy 0 or more")
    text = render(measure(args.threads, args.batches, args.busy, args.passes, args.repeats), args)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
