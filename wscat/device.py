"""The torch device a step runs on, as `--device` and the API name it, the line every step's log
starts with, and the refusal to train a paper-size model on a CPU that nobody asked for."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: the command line reads DEVICE_ENV before it
    import torch

# "Paper-size" is a parameter count: the paper's models (WRN-28-10 36.5M, WRN-34-10 46.2M,
# ResNet-50 23.5M, ResNet-152 58.2M; the release's basic-block ResNets 21.3M and 57.9M) are all
# above it, the CPU-sized ones (the demo's CNN 0.05M, the benchmark's WRN-16-4 2.7M) far below.
PAPER_SIZE_PARAMETERS = 10_000_000
# The `--device` of every step when the flag is not given (the workflow's rules give none): e.g.
# WSCAT_DEVICE=cpu to train the paper's models on a CPU-only cluster.
DEVICE_ENV = "WSCAT_DEVICE"
# CPU threads (--threads, the API's threads=): torch's thread pool crashes the process (SIGSEGV)
# far above this.
THREADS_MAX = 1024


CHOICES = "cpu, cuda, cuda:N or auto"  # what --device takes, as its help says


class FromEnvironment(str):
    """A device name that came from $WSCAT_DEVICE, not from --device: a refusal names it so."""


def device_default() -> str:
    """--device's default: $WSCAT_DEVICE (marked as such) where set and not empty (as a
    shell's ${WSCAT_DEVICE:-auto}), else auto."""
    value = os.environ.get(DEVICE_ENV, "").strip()
    return FromEnvironment(value) if value else "auto"


def _source(name: object, flag: str) -> tuple[str, str]:
    """(how a refusal names the value, how it says to give cpu instead), for the command line's
    `--device` or the API's `device=` (`flag`)."""
    if isinstance(name, FromEnvironment):
        return f"{DEVICE_ENV}={name}", f"set {DEVICE_ENV}=cpu (or unset it)"
    if flag == "device=":
        return f"device={str(name)!r}", "pass device='cpu'"
    return f"--device {name}", "use --device cpu"


def pick_device(name: str | torch.device | None = "auto", threads: int | None = None, *,
                flag: str = "--device") -> torch.device:
    """`name` (cpu, cuda, cuda:N; auto or None: CUDA where there is one) as a torch device, with
    `threads` CPU threads for torch if given. A device this machine lacks, or a name that is none
    of these, is refused in one line naming where it came from (`flag`: --device, or the API's
    device=; or $WSCAT_DEVICE)."""
    import torch

    if threads is not None and threads < 1:  # the CLI refuses it first; a caller of its own
        raise ValueError(f"threads {threads}: give a whole number of at least 1")
    if threads:
        torch.set_num_threads(threads)
    given, use_cpu = _source("auto" if name is None else name, flag)
    if name is None or name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        granted = gpu_granted()
        if granted:  # a GPU job whose CUDA is broken would run on the CPU for hours unseen
            why = ("this torch is a CPU-only build" if torch.version.cuda is None
                   else "its driver or the card is not usable from here")
            # the workflow's jobs (SLURM's GPU jobs) take no --device: name their way too
            jobs = (f" ({DEVICE_ENV}=cpu for the workflow's jobs)"
                    if flag == "--device" and not isinstance(name, FromEnvironment) else "")
            raise ValueError(f"{given}: {granted} gives this process a GPU, but torch finds no "
                             f"CUDA device ({why}); mend the node's CUDA, or {use_cpu}{jobs} to "
                             "run on the CPU")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"{given}: not a device wscat runs on; give {CHOICES}")
    if device.type == "cpu":  # cpu:0 is the CPU too; torch.load cannot map to an indexed CPU
        return torch.device("cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{given}: no CUDA device here; {use_cpu}")
    if device.type == "cuda" and device.index is not None \
            and device.index >= torch.cuda.device_count():
        raise ValueError(f"{given}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                         f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return device


# The variables through which a scheduler or a user hands a process its GPUs, and the values
# that hand none (SLURM's NoDevFiles where a job asked for no GPU; -1, by convention).
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
NO_GPU = ("", "-1", "NoDevFiles")
# A count of GPUs granted: SLURM sets it even where gres.conf names a GPU File= that is no
# device, which leaves the three above unset (slurm-wlm 22.05, seen on the test cluster).
GPU_COUNTS = ("SLURM_GPUS_ON_NODE",)


def gpu_granted() -> str | None:
    """`NAME=value` of the first of GPU_VARIABLES that names a GPU for this process, or of
    GPU_COUNTS that counts one or more, else None."""
    for variable in GPU_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value not in NO_GPU:
            return f"{variable}={value}"
    for variable in GPU_COUNTS:
        value = os.environ.get(variable, "").strip()
        if value.isdigit() and int(value) > 0:
            return f"{variable}={value}"
    return None


def named(name: str | torch.device | None) -> bool:
    """Whether `name` asks for a device by name (cpu, cuda:0, a torch.device) rather than
    leaving the choice to wscat (auto, None)."""
    return name is not None and name != "auto"


def device_line(device: torch.device, *, automatic: bool = False) -> str:
    """`device: cpu, Intel(R) Xeon(R) ... (2 threads)`: the first line of a step's log; an
    automatic choice (`--device auto`) says so."""
    from wscat.provenance import machine

    line = f"device: {device}, {machine(device)}"
    if automatic:
        line += " (--device auto: " + ("a CUDA device" if device.type == "cuda"
                                        else "no CUDA device here") + ")"
    return line


def parameter_count(model: torch.nn.Module) -> int:
    """The number of trained parameters (buffers such as batch-norm statistics excluded)."""
    return sum(p.numel() for p in model.parameters())


def check_training_device(device: torch.device, *, model: str, parameters: int,
                          cpu_named: bool) -> None:
    """Refuse to train a paper-size model (>= PAPER_SIZE_PARAMETERS) on a CPU unless the CPU was
    asked for by name: on a CPU such a run takes days, and should not start by accident."""
    if device.type != "cpu" or cpu_named or parameters < PAPER_SIZE_PARAMETERS:
        return
    raise ValueError(
        f"model '{model}' has {parameters / 1e6:.1f}M parameters (paper-size: "
        f">= {PAPER_SIZE_PARAMETERS // 1_000_000}M) and no GPU was found, so training would run "
        f"for days on the CPU; run on a GPU, choose a smaller --model (cnn, wrn-16-4), or pass "
        f"--device cpu to train on the CPU anyway ({DEVICE_ENV}=cpu for the workflow's jobs, "
        f"device='cpu' in Python)")
