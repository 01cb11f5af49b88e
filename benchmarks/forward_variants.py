"""How fast a trained model's forward and input-gradient passes could be made, and at what cost in
bits: the levers issue 26 names for the model's own share of AutoAttack (docs/evaluation.md,
"Where AutoAttack's time goes").

Variants of one model, timed in interleaved rounds on the same images in one process:

- `eager`: the model as `wscat evaluate` runs it (eval mode, frozen weights);
- `inference-mode`: the forward under `torch.inference_mode()` instead of `torch.no_grad()`;
- `folded-bn`: each BatchNorm folded into the convolution before it (one conv with a bias);
- `channels-last`, `folded-bn+channels-last`: the same in NHWC memory format;
- `folded-bn+compiled` (with `--compile`): `torch.compile` of the folded model.

Each row: milliseconds of a forward pass (no gradient) and of a forward plus input-gradient pass
(the cross-entropy's gradient, what APGD and FAB ask for), best of the rounds; and the largest
logit difference from `eager` and whether the logits are the same bits.

    make demo
    .venv/bin/python benchmarks/forward_variants.py --results results --method wscat --seed 1

writes benchmarks/results/forward-variants-{tag}.md and .json with the CPU named.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))


def fold_batch_norm(model: nn.Module) -> nn.Module:
    """A copy of `model` (eval mode) with every BatchNorm2d that directly follows a Conv2d inside
    an nn.Sequential folded into that convolution: W' = W·γ/√(σ²+ε), b' = β + (b − μ)·γ/√(σ²+ε).
    The same function in exact arithmetic; in float32 a different rounding."""
    folded = copy.deepcopy(model).eval()
    for sequential in [m for m in folded.modules() if isinstance(m, nn.Sequential)]:
        names = list(sequential._modules)
        for first, second in zip(names, names[1:]):
            conv, bn = sequential._modules[first], sequential._modules[second]
            if not (isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)):
                continue
            assert bn.running_mean is not None and bn.running_var is not None
            scale = torch.rsqrt(bn.running_var + bn.eps)
            if bn.weight is not None:
                scale = scale * bn.weight
            bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
            shift = (bias - bn.running_mean) * scale
            if bn.bias is not None:
                shift = shift + bn.bias
            fused = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size,
                              stride=conv.stride, padding=conv.padding, dilation=conv.dilation,
                              groups=conv.groups, bias=True, padding_mode=conv.padding_mode)
            with torch.no_grad():
                fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
                fused.bias.copy_(shift)
            sequential._modules[first] = fused
            sequential._modules[second] = nn.Identity()
    for parameter in folded.parameters():
        parameter.requires_grad_(False)
    return folded


def variants(model: nn.Module, compile_too: bool) -> dict[str, tuple[nn.Module, bool, bool]]:
    """Name -> (module, channels-last input, forward under inference_mode)."""
    folded = fold_batch_norm(model)
    out = {"eager": (model, False, False), "inference-mode": (model, False, True),
           "folded-bn": (folded, False, False),
           "channels-last": (copy.deepcopy(model).to(memory_format=torch.channels_last), True,
                             False),
           "folded-bn+channels-last": (copy.deepcopy(folded).to(memory_format=torch.channels_last),
                                       True, False)}
    if compile_too:
        out["folded-bn+compiled"] = (torch.compile(folded), False, False)
    return out


def _mean_ms(fn: Callable[[], Any], repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - started) / repeats * 1e3


def measure(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, rounds: int, repeats: int,
            compile_too: bool) -> dict[str, dict[str, Any]]:
    """Per variant: best forward and forward+gradient milliseconds over interleaved rounds, and
    the logits' largest difference from eager."""
    from wscat.models import LogitsOnly

    table = variants(model, compile_too)
    calls: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    results: dict[str, dict[str, Any]] = {}
    with torch.no_grad():
        reference = LogitsOnly(model)(x)
    for name, (module, channels_last, inference) in table.items():
        logits = LogitsOnly(module)
        xi = x.contiguous(memory_format=torch.channels_last) if channels_last else x
        mode = torch.inference_mode if inference else torch.no_grad

        def forward(logits: nn.Module = logits, xi: torch.Tensor = xi, mode: Any = mode) -> Any:
            with mode():
                return logits(xi)

        def gradient(logits: nn.Module = logits, xi: torch.Tensor = xi) -> Any:
            point = xi.clone().requires_grad_(True)
            loss = nn.functional.cross_entropy(logits(point), y)
            return torch.autograd.grad(loss, point)[0]

        warm = time.perf_counter()
        out = forward()
        gradient()
        diff = float((out.float() - reference).abs().max())
        results[name] = {"forward_ms": float("inf"), "gradient_ms": float("inf"),
                         "max_logit_diff": diff, "identical": bool(torch.equal(out, reference)),
                         "same_argmax": int((out.argmax(1) == reference.argmax(1)).sum()),
                         "first_call_s": time.perf_counter() - warm}
        calls[name] = (forward, gradient)
    for _ in range(rounds):
        for name, (forward, gradient) in calls.items():
            row = results[name]
            row["forward_ms"] = min(row["forward_ms"], _mean_ms(forward, repeats))
            row["gradient_ms"] = min(row["gradient_ms"], _mean_ms(gradient, repeats))
    return results


def render(results: dict[str, dict[str, Any]], machine: str, n: int, command: str) -> str:
    base = results["eager"]
    lines = ["# A trained model's forward and input-gradient passes, variant by variant", "",
             f"- Machine: {machine}; {datetime.now(timezone.utc):%Y-%m-%d}",
             f"- Command: `{command}`",
             f"- {n} images a pass. Milliseconds: best of interleaved rounds. `gradient`: forward "
             "plus the cross-entropy's input gradient. Logit difference: largest absolute "
             "difference from `eager` on these images.", "",
             "| variant | forward ms | / eager | gradient ms | / eager | max logit diff | "
             "same bits | same argmax | first call s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for name, row in results.items():
        lines.append(f"| {name} | {row['forward_ms']:.3f} | "
                     f"{row['forward_ms'] / base['forward_ms']:.2f} | {row['gradient_ms']:.3f} | "
                     f"{row['gradient_ms'] / base['gradient_ms']:.2f} | "
                     f"{row['max_logit_diff']:.2e} | {'yes' if row['identical'] else 'no'} | "
                     f"{row['same_argmax']}/{n} | {row['first_call_s']:.2f} |")
    return "\n".join(lines + [""])


def main() -> None:
    from autoattack_speed import _load, add_run_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--method", default="wscat")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=243,
                        help="images a pass (243: the points Square runs on for the issue's model)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--compile", action="store_true", help="also time a compiled folded model")
    parser.add_argument("--tag", default="cpu")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()

    from wscat.memory import keep_freed_memory
    from wscat.provenance import machine

    torch.set_num_threads(args.threads)
    keep_freed_memory()
    net, x, y, _ = _load(args.results, args.params, args.dataset, args.model, args.method,
                         args.seed)
    net.eval()
    for parameter in net.parameters():
        parameter.requires_grad_(False)
    x, y = x[:args.n], y[:args.n]
    results = measure(net, x, y, rounds=args.rounds, repeats=args.repeats,
                      compile_too=args.compile)
    command = "python benchmarks/forward_variants.py " + " ".join(sys.argv[1:])
    name = machine(torch.device("cpu"))
    page = render(results, name, len(x), command)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"forward-variants-{args.tag}.md").write_text(page)
    (args.out_dir / f"forward-variants-{args.tag}.json").write_text(
        json.dumps({"machine": name, "n": len(x), "results": results}, indent=1))
    print(page)


if __name__ == "__main__":
    main()
