"""GPU parity checks of the speed switches, for a session that has a GPU (CI has none):

    .venv/bin/python benchmarks/gpu_check.py [--model wrn-16-4] [--methods trades wscat]

1. no host synchronisation inside a training step (torch.cuda.set_sync_debug_mode("error"));
2. deterministic mode: two runs of three steps give bit-identical weights, and no op warns
   that it has no deterministic kernel (deterministic mode warns rather than fails);
3. bf16 autocast: the loss stays within 5% of fp32 and the weights stay fp32;
4. channels_last: the same loss as the contiguous run (attack off, so no sign flips).
Prints one line per check and exits 1 if any fails.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wscat.config import load_params, method_for  # noqa: E402
from wscat.methods import Batch, StepContext, build_method  # noqa: E402
from wscat.models import build_model  # noqa: E402
from wscat.training.ema import make_ema  # noqa: E402
from wscat.optim import SGD  # noqa: E402  (the trainer's optimizer)
from wscat.training.speed import configure_backend, prepare_model  # noqa: E402
from wscat.training.trainer import train_step  # noqa: E402


def run_steps(model_key: str, method_key: str, *, steps: int = 3, precision: str = "fp32",
              channels_last: bool = False, attack_steps: int = 10, sync_check: bool = False
              ) -> tuple[dict[str, torch.Tensor], list[float]]:
    device = torch.device("cuda")
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    torch.manual_seed(0)
    model = build_model(**params["models"][model_key], in_channels=3, num_classes=10,
                        mean=(0.4914, 0.4822, 0.4465), std=(0.2023, 0.1994, 0.2010)).to(device)
    method = build_method(method_for(params, method_key, "cifar10"), feature_dim=model.feature_dim,
                          num_classes=10, image_shape=(3, 32, 32)).to(device)
    optimizer = SGD(list(model.parameters()) + list(method.trainable_parameters()),
                    lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    ema = make_ema(model)
    step_model = prepare_model(model, channels_last=channels_last, compile=False)
    generator = torch.Generator(device=device).manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.rand(128, 3, 32, 32, generator=generator, device=device).contiguous(memory_format=fmt)
    labels = torch.randint(0, 10, (128,), generator=generator, device=device)
    losses = []
    for step in range(steps):
        ctx = StepContext(eps=8 / 255, step_size=2 / 255, steps=attack_steps, generator=generator,
                          ema_model=ema, progress=float(step), augment=lambda t: t)
        if sync_check and step > 0:  # the first step may allocate and autotune
            torch.cuda.set_sync_debug_mode("error")
        try:
            loss, _ = train_step(method, step_model, model, optimizer, ema, Batch(x, x, labels),
                                 ctx, precision=precision, ema_decay=0.995)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        losses.append(loss)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, [float(v) for v in losses]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="wrn-16-4")
    parser.add_argument("--methods", nargs="+", default=["trades", "rlfat", "wscat", "mt"])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device")
        return 1
    failed = 0

    def report(name: str, ok: bool, detail: str = "") -> None:
        nonlocal failed
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)

    for method in args.methods:
        configure_backend(torch.device("cuda"), deterministic=False)
        try:
            run_steps(args.model, method, sync_check=True)
            report(f"{method}: no host sync in a step", True)
        except RuntimeError as error:
            report(f"{method}: no host sync in a step", False, str(error).splitlines()[0])
        configure_backend(torch.device("cuda"), deterministic=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, _ = run_steps(args.model, method)
            second, _ = run_steps(args.model, method)
        same = all(torch.equal(first[k], second[k]) for k in first)
        report(f"{method}: deterministic mode is bit-for-bit", same)
        loose = sorted({str(w.message).splitlines()[0] for w in caught
                        if "deterministic" in str(w.message)})
        report(f"{method}: no op without a deterministic kernel", not loose, "; ".join(loose))
        _, fp32 = run_steps(args.model, method, attack_steps=0)
        half_state, bf16 = run_steps(args.model, method, attack_steps=0, precision="bf16")
        close = all(abs(a - b) <= 0.05 * abs(a) + 1e-3 for a, b in zip(fp32, bf16))
        fp32_weights = all(v.dtype == first[k].dtype for k, v in half_state.items())
        report(f"{method}: bf16 loss within 5% of fp32, fp32 weights", close and fp32_weights,
               f"fp32 {fp32} bf16 {bf16}")
        _, nhwc = run_steps(args.model, method, attack_steps=0, channels_last=True)
        report(f"{method}: channels_last loss equals contiguous",
               all(abs(a - b) <= 1e-3 * abs(a) + 1e-4 for a, b in zip(fp32, nhwc)), f"{nhwc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
