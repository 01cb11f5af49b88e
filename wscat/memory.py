"""Keep freed tensor memory in the process.

glibc's malloc serves a block over its mmap threshold (128 KiB to start with) from fresh pages and
returns it to the system when it is freed, and trims the heap's top the same way. A small model's
activations are a few hundred KiB to a few MiB each, so every forward and backward pass on the CPU
page-faults its outputs in again: `benchmarks/autoattack_speed.py` counted ~1,000 minor faults and
~2-3 ms of system time per forward-backward pass of the demo's CNN on 243 images, a seventh of the
pass. Raising both thresholds keeps freed blocks for reuse. It changes where tensors live, never
what is computed, so results stay the same bit for bit; a process that is not on glibc is left as
it is.
"""
from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_MAX = 32 * 1024 * 1024  # glibc's upper bound for the mmap threshold on 64-bit systems
_done = False


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks (up to 32 MiB each) for reuse; True if it took the setting."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    _done = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_MAX))
    return _done
