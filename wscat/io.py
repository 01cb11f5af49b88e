"""Atomic file output: every step writes to a temporary name in the target folder, then renames.
Before the work, `check_writable` makes sure the outputs can be written at all, `guard_outputs`
that no output is one of the inputs, and `output_lock` that no other process writes them
(wscat.file_kinds: that an input is not another kind of wscat file than its option expects)."""
from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from wscat.errors import OutputError, first_line, os_error_line

# A step refuses to start when its output's file system has less free space than this.
MIN_FREE_BYTES = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    The file gets the mode an ordinary open() would give (0666 less the umask: 0644 under the
    usual 022), not mkstemp's private 0600. An OSError about the temporary file names `path`,
    the file asked for: the temporary name is none of the user's business.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise OutputError(error.errno, f"cannot write {path}: "
                          f"{os_error_line(error, path.parent)}") from error
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    try:
        try:
            yield Path(tmp)
        except OSError as error:
            _name_target(error, tmp, path)
            raise
        try:
            os.replace(tmp, path)
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EPERM):
                _name_target(error, tmp, path)
                raise
            # The folder took the temporary file: the file itself refuses to be replaced.
            raise OutputError(error.errno, f"cannot replace {path} ({error.strerror}), though its "
                              "folder takes new files: the file may be immutable or append-only "
                              "(lsattr; chattr -i as root) or another user's in a sticky folder "
                              "such as /tmp; make it replaceable, or write another path (it is "
                              "unchanged)") from error
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _name_target(error: OSError, tmp: str, path: Path) -> None:
    """Make `error` name `path` where it names the temporary file `tmp`."""
    def is_tmp(name: object) -> bool:
        return isinstance(name, (str, os.PathLike)) and os.fspath(name) == tmp

    if is_tmp(error.filename):
        error.filename, error.filename2 = str(path), None
    elif is_tmp(error.filename2):
        error.filename2 = str(path)


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> None:
    """Call `write(tmp_path)` and move the result onto `path`."""
    with atomic_path(path) as tmp:
        write(tmp)


def write_text(path: str | Path, text: str) -> None:
    """Write text atomically."""
    atomic_write(path, lambda tmp: tmp.write_text(text))


def write_texts(texts: Mapping[str | Path, str]) -> None:
    """write_text for files that belong together (a table's .tex, .csv and .md): each is written
    to its temporary file before any is renamed into place, so a write that fails (a full disk,
    Ctrl-C) leaves every one of them as it was, never some new beside others old. One file named
    twice (`a.csv` and `./a.csv`) is a ValueError: which text would win is no choice to leave."""
    named = [os.path.abspath(path) for path in texts]
    if len(set(named)) < len(named):
        raise ValueError(f"write_texts: one file named twice among {', '.join(map(str, texts))}")
    with ExitStack() as stack:
        for path, text in texts.items():
            stack.enter_context(atomic_path(path)).write_text(text)


def json_text(data: Any) -> str:
    """What write_json writes: pretty-printed with sorted keys, one trailing newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON atomically, pretty-printed with sorted keys (diff-friendly, deterministic)."""
    write_text(path, json_text(data))


def read_json_object(path: str | Path, what: str, remedy: str) -> dict[str, Any]:
    """A JSON file that must hold an object, or a one-line ValueError: "{path}: not a readable
    JSON file (why); {remedy}" or "{path}: a JSON list, not {what}; {remedy}". A missing file
    stays a FileNotFoundError, for the caller to say what makes it."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable JSON file ({first_line(error)}); "
                         f"{remedy}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON {type(data).__name__}, not {what}; {remedy}")
    return data


def disk_full(path: str | Path) -> bool:
    """Whether the file system holding `path` has (almost) no space left."""
    try:
        free = os.statvfs(_existing_ancestor(Path(path)))
    except OSError:
        return False
    return free.f_bavail * free.f_frsize < MIN_FREE_BYTES


def _existing_ancestor(folder: Path) -> Path:
    folder = folder.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def typed(path: str | Path) -> str:
    """A path as it was typed: a string itself, or the command line's text of a path argument
    (`typed`, kept by wscat.cli), which Path drops a trailing separator from."""
    return path if isinstance(path, str) else getattr(path, "typed", None) or str(path)


def ends_in_separator(path: str | Path) -> bool:
    """Whether `path`, as typed, ends in a path separator: it names a folder, not a file."""
    return typed(path).endswith(tuple(sep for sep in (os.sep, os.altsep) if sep))


def check_writable(*paths: str | Path | None, folders: bool = False) -> None:
    """Raise OutputError unless every path's folder exists or can be made, takes a new file and
    has some free space. Nothing is left behind. `folders`: the paths are output folders; a file
    path that ends in a separator (`--out new/`) is refused as a folder."""
    for path in paths:
        if path is None:
            continue
        if not folders and ends_in_separator(path):
            raise OutputError(errno.EISDIR, f"cannot write {typed(path)}: it ends in "
                              f"'{os.sep}', so it is a folder; pass a file path")
        path = Path(path)
        wanted = path if folders else path.parent
        where = _existing_ancestor(wanted)
        if not where.is_dir():
            raise OutputError(errno.ENOTDIR, f"cannot write {path}: {where} is a file, not a "
                              "folder; choose another location")
        if not folders and path.is_dir():
            raise OutputError(errno.EISDIR, f"cannot write {path}: it is a folder; pass a file path")
        try:
            fd, probe = tempfile.mkstemp(prefix=".wscat-probe.", dir=where)
            os.close(fd)
            os.unlink(probe)
            free = os.statvfs(where)
        except OSError as error:
            raise OutputError(error.errno, f"cannot write {path}: "
                              f"{os_error_line(error, where)}") from error
        if free.f_bavail * free.f_frsize < MIN_FREE_BYTES:
            raise OutputError(errno.ENOSPC, f"cannot write {path}: "
                              f"{os_error_line(OSError(errno.ENOSPC, 'full'), where)}")


# --- an input is never an output --------------------------------------------------------------

PathLike = str | Path


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name the same file: equal once symlinks and `..` are resolved, or the
    same inode (a hard link)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` lies inside `folder` (both resolved)."""
    return folder.resolve() in path.resolve().parents


def guard_outputs(inputs: Mapping[str, PathLike | Iterable[PathLike] | None],
                  outputs: Mapping[str, PathLike | None],
                  folders: Mapping[str, PathLike | None] | None = None) -> None:
    """Refuse, before any work, an output that is one of the inputs.

    `inputs`, `outputs` and `folders` (output folders) map what names a path (a flag such as
    `--checkpoint`, or "the dataset archive") to it. Refused with one line (exit 2): an output
    file that resolves to an input (symlinks, relative paths and hard links included), two
    outputs that are the same file, and an output folder that holds an input or is one."""
    named_inputs = [(name, Path(p)) for name, value in inputs.items()
                    for p in ([] if value is None else [value] if isinstance(value, (str, Path))
                              else value)]
    named_outputs = [(name, Path(p)) for name, p in outputs.items() if p is not None]
    named_folders = [(name, Path(p)) for name, p in (folders or {}).items() if p is not None]
    for out_name, out in named_outputs + named_folders:
        for in_name, source in named_inputs:
            if _same(out, source):
                raise OutputError(errno.EEXIST, f"{out_name} {out} is the input {in_name} "
                                  f"{source}: writing it would destroy what this step reads; "
                                  "choose another output path (nothing was written)")
    for out_name, folder in named_folders:
        for in_name, source in named_inputs:
            if _inside(source, folder):
                raise OutputError(errno.EEXIST, f"{out_name} {folder} holds the input {in_name} "
                                  f"{source}, which this step may overwrite; choose another "
                                  "output folder (nothing was written)")
    seen: list[tuple[str, Path]] = []
    for out_name, out in named_outputs + named_folders:
        for other_name, other in seen:
            if _same(out, other) or (out_name, out) in named_folders and _inside(other, out):
                raise OutputError(errno.EEXIST, f"{out_name} {out} and {other_name} {other} are "
                                  "the same output; give each its own path (nothing was written)")
        seen.append((out_name, out))


# --- one writer per output --------------------------------------------------------------------

LOCK_SUFFIX = ".wscat-lock"
_HELD: dict[str, int] = {}  # the lock files this process holds, and how deeply nested


def lock_path(path: PathLike) -> Path:
    """The lock file of an output file or folder: a hidden file beside it."""
    path = Path(path).absolute()
    return path.parent / f".{path.name}{LOCK_SUFFIX}"


def being_written(path: PathLike) -> bool:
    """Whether a live process holds the output lock of `path` now (its lock file, which goes
    when the writer ends, names this machine and a pid that runs on it, started when the holder
    did: a pid reused by a later process is not the holder): a write in progress, such as a
    training, not one cut short. A lock of another machine (a SLURM job on another node) says
    nothing here: False. Reads the lock file only; takes no lock."""
    return writer_of(path) is not None


def writer_of(path: PathLike) -> str | None:
    """The live process that holds the output lock of `path` now (`being_written`), described
    (pid, start, command); None where none does."""
    import socket

    try:
        with open(lock_path(path), encoding="utf-8") as handle:
            holder = _holder(handle)
    except OSError:
        return None
    pid = holder.get("pid")
    if holder.get("host", socket.gethostname()) != socket.gethostname() or not _pid_alive(pid):
        return None
    recorded, now = holder.get("pid_start"), _process_start(pid)
    return _describe_holder(holder) if recorded is None or now is None or recorded == now \
        else None


def outputs_being_written(outputs: Iterable[PathLike]) -> list[tuple[str, str]]:
    """(path, its writer) for each of `outputs`, or the folder it lies in (a training's run
    folder, `train --out-dir`), whose output lock a live process holds now (`writer_of`): what
    a Snakemake run must not start on. Snakemake deletes a job's outputs before the job runs and
    again when it fails, as its `wscat` step, refused the lock, does: a training or evaluation
    running by hand (or in another snakemake) would lose its files, finished ones included."""
    busy: dict[str, str] = {}
    for output in outputs:
        for path in (Path(output), Path(output).parent):
            name = str(path)
            if name not in busy:
                writer = writer_of(path)
                if writer is not None:
                    busy[name] = writer
    return list(busy.items())


def _process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat's 22nd field), or
    None where /proc does not say (not Linux, no such process): with the pid, it names one
    process, as a pid alone does not once the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _holder(handle: Any) -> dict[str, Any]:
    """What a lock file says about the process that holds (or held) it."""
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe_holder(holder: dict[str, Any]) -> str:
    return f"pid {holder.get('pid', '?')}, started {holder.get('started', '?')}" + (
        f": {holder['command']}" if holder.get("command") else "")


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _made_folders(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; the ones made, innermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for part in reversed(missing):
        part.mkdir(exist_ok=True)
    return missing


@contextmanager
def output_lock(path: PathLike, command: str = "") -> Iterator[Path]:
    """Hold an exclusive lock on the output file or folder `path` while the block runs.

    The lock is `flock` on a hidden file beside `path` that names its holder (pid, host, start
    time, command). A second writer gets one line naming the first and changes nothing. A lock whose
    holder died (killed, power cut) is free again for the kernel: it is taken over, with a note.
    The lock file, and any folder made for it that stayed empty, go when the block ends. Within
    one process the lock nests (the command line locks a step's outputs, the step its own)."""
    lock = lock_path(path)
    key = str(lock.parent.resolve() / lock.name)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield Path(path)
        finally:
            _HELD[key] -= 1
        return
    made = _made_folders(lock.parent)
    try:
        handle = _acquire(lock, path, command)
        _HELD[key] = 1
        try:
            yield Path(path)
        finally:
            del _HELD[key]
            try:
                if _same_inode(handle, lock):
                    lock.unlink()
            finally:
                handle.close()  # releases the flock
    finally:
        for folder in made:  # innermost first; a folder that holds outputs stays
            try:
                folder.rmdir()
            except OSError:
                break


def _same_inode(handle: Any, lock: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(lock).st_ino
    except OSError:
        return False


def _acquire(lock: Path, path: PathLike, command: str) -> Any:
    """Open and flock `lock` (retrying when a finishing holder unlinked it meanwhile); record us."""
    import fcntl
    import socket
    import time

    for _ in range(5):
        handle = open(lock, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(handle)
            handle.close()
            raise OutputError(errno.EBUSY, f"{path} is being written by another wscat process "
                              f"({_describe_holder(holder)}); wait for it to finish or choose "
                              f"another output (lock: {lock})") from None
        except OSError:  # a file system without flock: go on unlocked
            return handle
        if not _same_inode(handle, lock):  # its holder finished and removed it: start over
            handle.close()
            continue
        stale = _holder(handle)
        if stale.get("pid") not in (None, os.getpid()):
            alive = " (that pid now belongs to another process)" if _pid_alive(stale["pid"]) else ""
            print(f"note: taking over the stale lock of {path} left by a process that ended "
                  f"({_describe_holder(stale)}){alive}", file=sys.stderr)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "pid_start": _process_start(os.getpid()),
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                                 "command": command}) + "\n")
        handle.flush()
        return handle
    raise OutputError(errno.EBUSY, f"{path}: its lock {lock} keeps changing hands; another "
                      "wscat process is writing it: wait for it to finish")
