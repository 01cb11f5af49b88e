"""The GPU speed switches of `training.<dataset>` in params.yaml, each one small function.

precision: bf16 autocast for the attack steps and the update (fp32 weights, optimiser and EMA);
channels_last: NHWC memory format for convolutions; compile: torch.compile of the classifier;
deterministic: torch.use_deterministic_algorithms and no cuDNN autotuning (cuDNN autotuning is on
only when determinism is not asked for, since the autotuner may pick different kernels per run).
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn

Precision = Literal["fp32", "bf16"]


def configure_backend(device: torch.device, *, deterministic: bool) -> None:
    """Deterministic kernels (bit-for-bit reruns on the same node) or cuDNN autotuning (speed)."""
    if device.type == "cuda":
        # cuBLAS needs a fixed workspace to be deterministic; it reads this at its first call.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = not deterministic
        torch.backends.cudnn.deterministic = deterministic
        # TF32 matmuls are deterministic but lower precision; keep them for speed in both modes.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    # warn_only: an op without a deterministic kernel (say, inside a third-party attack) writes a
    # warning to the job's log instead of killing a days-long run; our own steps avoid such ops.
    # torch.use_deterministic_algorithms(deterministic, warn_only=True) is this flag plus
    # inductor's copy of it, and importing inductor costs ~1.3 s of every job's start-up; a run
    # that compiles sets inductor's copy in `prepare_model`.
    torch._C._set_deterministic_algorithms(deterministic, warn_only=True)


@contextlib.contextmanager
def backend_held() -> Iterator[None]:
    """torch's process-wide numeric switches, as the block found them, after it: cuDNN autotuning
    and determinism, TF32 for matmuls and convolutions, the deterministic-algorithms flag and
    inductor's copy of it. `configure_backend` sets them for a whole process (a Snakemake job); an
    API call holds its setting to itself this way, so the next call computes as a fresh process
    would (pseudo-labels after a labeler trained in the same session, say)."""
    cudnn = torch.backends.cudnn
    switches = (cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32,
                torch.get_float32_matmul_precision())
    algorithms = (torch.are_deterministic_algorithms_enabled(),
                  torch.is_deterministic_algorithms_warn_only_enabled())
    inductor = sys.modules.get("torch._inductor.config")
    inductor_flag = None if inductor is None else inductor.deterministic
    try:
        yield
    finally:
        cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = switches[:3]
        torch.set_float32_matmul_precision(switches[3])
        torch._C._set_deterministic_algorithms(algorithms[0], warn_only=algorithms[1])
        inductor = sys.modules.get("torch._inductor.config")
        if inductor is not None:  # loaded inside the block: prepare_model's rule, the flag's copy
            inductor.deterministic = algorithms[0] if inductor_flag is None else inductor_flag


def tf32_flags(device: torch.device) -> dict[str, bool] | None:
    """Whether fp32 matmuls and cuDNN convolutions may run in TF32 on `device`, as torch.backends
    holds them now (after `configure_backend`: both on); None off CUDA, where TF32 does not apply.
    `precision: fp32` on a CUDA device is fp32 storage with these TF32 products."""
    if device.type != "cuda":
        return None
    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn": bool(torch.backends.cudnn.allow_tf32)}


@contextlib.contextmanager
def autocast(device: torch.device, precision: Precision) -> Iterator[None]:
    """bf16 autocast around forward passes (attack steps and update); fp32 does nothing."""
    if precision == "fp32":
        yield
    elif precision == "bf16":
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            yield
    else:
        raise ValueError(f"precision must be fp32 or bf16, got {precision!r}")


def memory_format(channels_last: bool) -> torch.memory_format:
    return torch.channels_last if channels_last else torch.contiguous_format


CompileMode = Literal["default", "reduce-overhead", "max-autotune-no-cudagraphs"]


def uses_cuda_graphs(compile: bool, mode: str = "default") -> bool:
    """Whether the step model replays CUDA graphs (torch.compile's reduce-overhead mode)."""
    return compile and mode == "reduce-overhead"


def begin_graph_step() -> None:
    """Tell CUDA graphs a training step begins, and that nothing else does until the next call.

    Left to itself, torch starts a new graph "generation" at any compiled call made after a
    backward, and a new generation may overwrite the previous one's outputs
    (torch.compiler.cudagraph_mark_step_begin). Inside one step of an adversarial method the
    attack runs a backward per PGD step, while the natural forward's outputs and saved tensors
    must live until the update (WSCAT's C(x), Eq. 8-9). Marking each step keeps one step one
    generation."""
    torch.compiler.cudagraph_mark_step_begin()


def prepare_model(model: nn.Module, *, channels_last: bool, compile: bool,
                  mode: CompileMode = "default") -> nn.Module:
    """The module the training step calls: `model` in the chosen memory format, maybe compiled.

    `mode` is torch.compile's (params.yaml's `compile: true` is "default"; "reduce-overhead" adds
    CUDA graphs, measured by benchmarks/throughput.py --compile-mode before any config uses it).
    The returned module shares parameters with `model`; checkpoints and the EMA use `model`
    itself, so a compiled run saves the same state dict keys as an eager one.
    """
    model.to(memory_format=memory_format(channels_last))
    if compile:
        import torch._inductor.config as inductor

        inductor.deterministic = torch.are_deterministic_algorithms_enabled()
        return torch.compile(model, mode=mode)  # type: ignore[return-value]
    return model
