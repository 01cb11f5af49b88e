"""TRADES' random start, clipped or not: how much stronger the training attack of TRADES, RST and
RLFAT is with wscat's start than with their published code's.

Zhang et al.'s TRADES code (and Carmon et al.'s RST code, built on it) starts the KL-PGD attack
at x + 0.001 N(0, I) and clips to [0, 1] only after each step; wscat's `pgd` clips the start too
(docs/methods.md). Where a pixel is 0 or 1, the clip drops half its noise, and the KL's gradient at
x' = x is zero, so the start sets the first step's direction. This script runs both attacks
from the same noise on the same models and images and reports the KL(C(x) || C(x')) each reaches
(TRADES' inner objective, eval-mode BatchNorm as in their code), paired over start seeds. The
clipped variant is checked to be wscat's `trades_attack` bit for bit first.

    .venv/bin/python benchmarks/trades_start.py --out benchmarks/results/trades-start-digits.md
    .venv/bin/python benchmarks/trades_start.py --npz data/proxy/cifar10-proxy.npz \\
        --out benchmarks/results/trades-start-cifar10-proxy.md

Models: wscat's small CNN (width 8), three initialisations, each after 40 CE steps on the images
(a model early in training, where the attack's direction matters most); 20 start seeds each. One
thread: ~10 s on digits, ~2 min on 256 CIFAR-10 images (a 2-core AMD EPYC).
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from demo_profile import _cpu_model  # noqa: E402 - a sibling script

from wscat.losses import kl_divergence  # noqa: E402
from wscat.methods.base import StepContext  # noqa: E402
from wscat.methods.trades import trades_attack  # noqa: E402
from wscat.models.cnn import SmallCNN  # noqa: E402


def published_attack(model: torch.nn.Module, x: torch.Tensor, *, eps: float, step_size: float,
                     steps: int, seed: int, clip_start: bool) -> torch.Tensor:
    """TRADES' `trades_loss` attack as their code writes it (eval mode, KL to C(x) fixed); with
    `clip_start` the start is clipped to [0, 1] as wscat's is."""
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        target = model(x)[1]
    x_adv = x + 0.001 * torch.randn(x.shape, generator=generator)
    if clip_start:
        x_adv = x_adv.clamp(0.0, 1.0)
    for _ in range(steps):
        x_adv.requires_grad_(True)
        (grad,) = torch.autograd.grad(kl_divergence(target, model(x_adv)[1]), x_adv)
        x_adv = x_adv.detach() + step_size * grad.sign()
        x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0.0, 1.0)
    return x_adv.detach()


def reached(model: torch.nn.Module, x: torch.Tensor, x_adv: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float(kl_divergence(model(x)[1], model(x_adv)[1]))


def images(npz: Path | None, n: int) -> tuple[str, torch.Tensor, torch.Tensor, float, float, int]:
    """(name, images in [0, 1], labels, eps, step size, steps): the embedded digits at the demo's
    threat model, or the first n training images of an npz at CIFAR-10's (8/255, 2/255, PGD-10)."""
    if npz is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = torch.tensor(digits.images[:n] / 16.0, dtype=torch.float32).unsqueeze(1)
        return "digits (first %d images)" % n, x, torch.tensor(digits.target[:n]), 0.15, 0.075, 5
    with np.load(npz) as data:
        raw, labels = data["x_train"][:n], data["y_train"][:n]
    x = torch.tensor(raw, dtype=torch.float32).permute(0, 3, 1, 2) / 255.0
    return f"{npz.name} (first {n} training images)", x, torch.tensor(labels).long(), \
        8 / 255, 2 / 255, 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--npz", type=Path, default=None,
                        help="images (x_train N x H x W x C uint8, y_train) instead of digits")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    name, x, y, eps, step, steps = images(args.npz, args.images)
    channels = x.shape[1]
    mean = tuple(float(v) for v in x.mean(dim=(0, 2, 3)))
    std = tuple(float(v) for v in x.std(dim=(0, 2, 3)))
    saturated = float(((x == 0) | (x == 1)).float().mean())
    rows = []
    for m in range(args.models):
        torch.manual_seed(m)
        model = SmallCNN(channels, 10, mean, std, width=8)
        optimiser = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(40):
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(model(x)[1], y).backward()
            optimiser.step()
        ctx = StepContext(eps=eps, step_size=step, steps=steps,
                          generator=torch.Generator().manual_seed(0), ema_model=model,
                          progress=0.0, augment=lambda batch: batch)
        ours = trades_attack(model, x, ctx)
        check = published_attack(model, x, eps=eps, step_size=step, steps=steps, seed=0,
                                 clip_start=True)
        if not torch.equal(ours, check):
            raise SystemExit("trades_start: the clipped variant is not wscat's trades_attack; "
                             "this script's copy of the attack is out of date")
        clipped, published = [], []
        for seed in range(args.seeds):
            for clip, found in ((True, clipped), (False, published)):
                found.append(reached(model, x, published_attack(
                    model, x, eps=eps, step_size=step, steps=steps, seed=seed, clip_start=clip)))
        gaps = [a - b for a, b in zip(clipped, published)]
        rows.append((m, statistics.mean(clipped), statistics.mean(published), statistics.mean(gaps),
                     statistics.stdev(gaps) / len(gaps) ** 0.5))
    lines = [f"# TRADES' start, clipped (wscat) or not (their code): {name}", "",
             f"{datetime.date.today()}, {_cpu_model()} (1 thread); eps {eps:.4g}, step "
             f"{step:.4g}, PGD-{steps}; {saturated:.1%} of the pixels are 0 or 1; "
             f"{args.models} models x {args.seeds} start seeds; the clipped variant equals "
             "wscat's `trades_attack` bit for bit.", "",
             "| model | KL reached, clipped start (wscat) | KL reached, their code's start | "
             "difference (paired) | its standard error |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {m} | {a:.4f} | {b:.4f} | {d:+.4f} ({d / b:+.0%}) | {s:.4f} |"
              for m, a, b, d, s in rows]
    text = "\n".join([*lines, ""])
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
