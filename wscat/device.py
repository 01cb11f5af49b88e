"""The torch device a step runs on, as `--device` and the API name it."""
from __future__ import annotations

import torch

from wscat.errors import first_line


def pick_device(name: str | torch.device | None = "auto", threads: int | None = None
                ) -> torch.device:
    """`name` (cpu, cuda, cuda:N; auto or None: CUDA where there is one) as a torch device, with
    `threads` CPU threads for torch if given. A device this machine lacks is refused in one line."""
    if threads:
        torch.set_num_threads(threads)
    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"--device {name}: {first_line(error)}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: no CUDA device here; use --device cpu")
    return device
