"""One error path for `wscat`: an anticipated failure becomes one line saying what is wrong and
what to do; anything else is an unexpected error whose traceback `--debug` (or WSCAT_DEBUG=1)
shows."""
from __future__ import annotations

import errno
import os
import zipfile

DEBUG_ENV = "WSCAT_DEBUG"

# Exit codes: 2 bad input (as argparse), 1 unexpected, 130 interrupted (as a shell's SIGINT).
BAD_INPUT, UNEXPECTED, INTERRUPTED = 2, 1, 130


# What np.load raises on a truncated, foreign or malformed .npz (and a missing key in it).
NPZ_ERRORS = (KeyError, ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile)


class OutputError(OSError):
    """An output location that cannot be written (read-only, full, not permitted)."""


def debug_requested(flag: bool = False) -> bool:
    """Whether to let an unexpected error raise with its traceback."""
    return flag or os.environ.get(DEBUG_ENV, "").strip() not in ("", "0", "false", "no")


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message (its type's name when it has none)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def os_error_line(error: OSError, path: object | None = None) -> str:
    """An OSError as one line: where, what, and how to fix it."""
    where = path or error.filename or "the output location"
    if isinstance(error, OutputError):
        return error.strerror or first_line(error)
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied on {where}; make it writable (or readable) for this user, " \
               "or choose another location"
    if error.errno == errno.EROFS:
        return f"{where} is on a read-only file system; choose a writable output location"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the device of {where}; free some space and rerun " \
               "(training resumes from its last checkpoint)"
    if error.errno == errno.EISDIR:
        return f"{where} is a folder, not a file; pass a file path"
    if error.errno == errno.ENOTDIR:
        return f"a part of {where} is a file, not a folder; choose another location"
    if isinstance(error, FileNotFoundError) and not error.filename:
        return first_line(error)
    reason = error.strerror or first_line(error)
    return f"{reason}: {where}"


def describe(error: BaseException) -> str | None:
    """One line for an anticipated failure; None for an unexpected one."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted; finished outputs are complete and nothing half-written was kept, " \
               "so rerun the same command to continue"
    if isinstance(error, OSError):
        return os_error_line(error)
    if isinstance(error, (ValueError, zipfile.BadZipFile, EOFError)):
        return first_line(error)
    return None


def exit_code(error: BaseException) -> int:
    """The exit status a failure ends with."""
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    return BAD_INPUT if describe(error) is not None else UNEXPECTED
