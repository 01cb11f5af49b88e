"""Mutation tests for the files that keep results from being lost or silently wrong: wscat/io.py
(atomic writes, check_writable, guard_outputs, output_lock), wscat/checkpoint.py,
wscat/attacks/shards.py (resumable AutoAttack) and wscat/training/run_folder.py. Each test kills
hand-made mutants that went through the unit tests importing the module, with expectations from
the modules' docstrings, docs/pipeline.md ("Resume", "What a step guarantees on bad input") and
docs/evaluation.md (AutoAttack's shards), never from the function under test. The attack itself
is stood in for where a shard's key or count is checked. Of 132 mutants (io 52, checkpoint 33,
shards 25, run_folder 22) the importing unit tests killed 67 (17 were not run against the
slowest files: 16 of checkpoint against test_bad_input_categories, test_leakage, test_training,
test_puat, test_validation_steps and test_cpu_threads; one of io against the first); these
tests kill the other 59 but 6 equivalent ones (a best epoch is -1 or from 1 on, never 0;
n_examples is at least 1; a slice end past the tensor is clamped; the variant's settings
already differ in the key; a state never holds 'format'; a probe into a file fails with the
same ENOTDIR line).

What is checked, and from which fact:
- io, atomic writes: the file gets 0666 less the umask (atomic_path's docstring: 0644 under 022,
  0640 under 027), its temporary file is hidden beside it (so the rename stays on one file
  system) in folders made for it, and nothing else is left; write_json is indent 2, sorted keys,
  one trailing newline; a disk with less than MIN_FREE_BYTES (1 MiB) free is full, one whose
  space cannot be read is not.
- io, check_writable: every path is checked, those after a None too; missing folders several
  levels deep pass and none is made, nor a probe left; a file in place of a folder is ENOTDIR
  (for folders=True, the folder's own place); a file path that is a folder is EISDIR, and so is
  a path typed with a trailing separator (`typed`, which Path drops); a folder that takes no new
  file, and one under 1 MiB free (ENOSPC), are refused.
- io, guard_outputs: an output folder that is an input, or holds one at any depth; two outputs
  that are one file (`..`), a file output inside an output folder; a hard link to an input; an
  output that does not exist yet is no input.
- io, output_lock (docs/pipeline.md, "One writer per output"): the lock is `.NAME.wscat-lock`
  beside the output; while held it names this process (pid, command) and refuses even a shared
  flock; once released the output is locked afresh, not as nested; a left-over lock file is
  taken over whatever it holds (a longer record is cut off; a JSON list, text, nothing), the
  note only for a record with a pid, 'belongs to another process' only for a live pid (pid 0 is
  none, a pid kill() may not signal is one); new nested folders made for the lock go with it; a
  lock file unlinked by a finishing holder before the flock is opened again.
- checkpoint: non-finite tensors named by dotted path, complex ones included, a bare tensor as
  '<tensor>'; save_checkpoint names the first and counts the others ('and 2 more'), the previous
  file kept; a failed torch.save is ENOSPC naming the path only on a full disk, else re-raised;
  a folder is said to be one; non-finite weights, and a checkpoint without a meta dict, are
  refused when read; checkpoint_meta runs no code from the file and needs a meta dict; a .pt
  of Python objects is said to hold them, never to be deleted; a cut-short archive is
  'truncated' (of another kind: 'a damaged zip archive of other files'), a 0-byte file 'empty'
  (a 1-byte one not); check_finished
  names the run folder (resume/'s parent), Snakemake only for results/models/; an older
  checkpoint's model_spec is {'architecture': name}, another name refused; check_run refuses
  another seed; retrain_hint; load_weights refuses a missing tensor (strict) and a non-dict in
  one line.
- shards (its docstring, docs/evaluation.md): a finished shard is resumed under the same key
  and attacked again when eps, seed, batch size, the settings, a pixel (by less than a uint8
  level), a label, a buffer of the model, pyautoattack's or torch's version changes (only the
  shard whose images changed); the device type is in the key; the two variants keep their own
  shard files in one folder; a damaged shard file is attacked again; the accuracies count every
  shard over all examples (clean, cumulative `after`, robust, each warning once).
- run_folder: best_at_hand needs no checkpoint before the first validation (best epoch -1) and
  needs one from epoch 1 on; drop_empty_curves never removes a folder the training did not make
  (made_here False), nor one that holds files.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from wscat import checkpoint, io
from wscat.checkpoint import CheckpointError
from wscat.errors import OutputError
from wscat.training import run_folder


# --- io.py: atomic writes ------------------------------------------------------------------------

def test_an_atomic_file_gets_an_ordinary_files_mode(tmp_path: Path) -> None:
    """atomic_path's docstring: 0666 less the umask (0644 under 022), not mkstemp's 0600."""
    old = os.umask(0o022)
    try:
        io.write_text(tmp_path / "out.txt", "x")
        os.umask(0o027)
        io.write_text(tmp_path / "other.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "other.txt").stat().st_mode) == 0o640


def test_the_temporary_file_is_a_hidden_one_beside_the_target(tmp_path: Path) -> None:
    """'a temporary path beside `path`' (same folder, so the rename is atomic), hidden; made in
    a folder that did not exist; gone once renamed."""
    target = tmp_path / "new" / "deeper" / "out.json"
    with io.atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".out.json.")
        tmp.write_text("done")
    assert target.read_text() == "done" and os.listdir(target.parent) == ["out.json"]


def test_write_json_is_sorted_indented_and_ends_in_a_newline(tmp_path: Path) -> None:
    """write_json's docstring: pretty-printed (indent 2) with sorted keys, one trailing newline."""
    io.write_json(tmp_path / "a.json", {"b": 1, "a": [2]})
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'


def _free_space(monkeypatch: pytest.MonkeyPatch, free_bytes: int) -> None:
    """os.statvfs as a file system with `free_bytes` free to users (blocks of 4096 bytes)."""
    real = os.statvfs

    def statvfs(path: Any) -> Any:
        found = real(path)
        return types.SimpleNamespace(f_bavail=free_bytes // 4096, f_frsize=4096,
                                     f_bsize=found.f_bsize)

    monkeypatch.setattr(io.os, "statvfs", statvfs)


@pytest.mark.parametrize(("free", "full"), [(0, True), ((1 << 20) - 4096, True),
                                            (1 << 20, False), (1 << 30, False)])
def test_a_disk_under_one_mib_free_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            free: int, full: bool) -> None:
    """MIN_FREE_BYTES is 1 MiB: less is full (disk_full true, check_writable refuses with
    ENOSPC), 1 MiB or more is not."""
    _free_space(monkeypatch, free)
    assert io.disk_full(tmp_path / "x") is full
    if full:
        with pytest.raises(OutputError) as error:
            io.check_writable(tmp_path / "out.json")
        assert error.value.errno == errno.ENOSPC
    else:
        io.check_writable(tmp_path / "out.json")


def test_disk_full_is_false_when_the_space_cannot_be_read(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """disk_full answers whether there is (almost) no space: unknown is not full."""
    def refuse(path: Any) -> Any:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(io.os, "statvfs", refuse)
    assert io.disk_full(tmp_path) is False


# --- io.py: check_writable ---------------------------------------------------------------------

def test_check_writable_checks_every_path_after_a_none(tmp_path: Path) -> None:
    """'every path': a None (an output not asked for) is skipped, the ones after it checked."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError) as error:
        io.check_writable(None, tmp_path / "file" / "out.json")
    assert error.value.errno == errno.ENOTDIR


def test_check_writable_takes_a_folder_that_can_be_made_deep_and_leaves_nothing(
        tmp_path: Path) -> None:
    """Folders that 'can be made' (several levels missing) pass, none is made and no probe is
    left; an output folder that exists passes with folders=True; a file path that is a folder is
    refused."""
    io.check_writable(tmp_path / "a" / "b" / "c" / "out.json")
    io.check_writable(tmp_path / "a" / "b" / "c", folders=True)
    (tmp_path / "run").mkdir()
    io.check_writable(tmp_path / "run", folders=True)
    assert sorted(os.listdir(tmp_path)) == ["run"] and os.listdir(tmp_path / "run") == []
    with pytest.raises(OutputError) as error:
        io.check_writable(tmp_path / "run")
    assert error.value.errno == errno.EISDIR


def test_check_writable_checks_the_folder_that_would_hold_an_output_folder(tmp_path: Path) -> None:
    """folders=True: the path is the folder; a file there, or in place of a folder above it, is
    refused (ENOTDIR, 'is a file, not a folder'); without it a file path's own folder is what is
    checked: an existing output file is fine (it is replaced), a file in place of its folder is
    not."""
    taken = tmp_path / "taken"
    taken.write_text("x")
    for path, folders in ((taken, True), (taken / "run", True), (taken / "out.json", False)):
        with pytest.raises(OutputError) as error:
            io.check_writable(path, folders=folders)
        assert error.value.errno == errno.ENOTDIR
        assert f"{taken} is a file, not a folder" in str(error.value), str(error.value)
    io.check_writable(taken)


def test_check_writable_refuses_a_folder_that_takes_no_new_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'takes a new file': the probe file's creation fails (a read-only folder; as root chmod
    would not stop it, so mkstemp is refused instead) and the line says so."""
    def refuse(prefix: str = "", suffix: str = "", dir: Any = None) -> Any:  # noqa: A002
        raise PermissionError(errno.EACCES, "Permission denied", str(dir))

    monkeypatch.setattr(io.tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError) as error:
        io.check_writable(tmp_path / "out.json")
    assert error.value.errno == errno.EACCES


def test_a_typed_trailing_separator_counts_though_path_dropped_it(tmp_path: Path) -> None:
    """`typed`: the command line keeps the text typed on a Path (`.typed`); Path('new/') prints
    without the '/', and the typed text is what says it is a folder."""
    typed_path = type("TypedPath", (type(tmp_path),), {})(tmp_path / "new")
    typed_path.typed = f"{tmp_path}/new/"
    assert io.typed(typed_path) == f"{tmp_path}/new/" and io.ends_in_separator(typed_path)
    with pytest.raises(OutputError) as error:
        io.check_writable(typed_path)
    assert error.value.errno == errno.EISDIR


# --- io.py: guard_outputs ----------------------------------------------------------------------

def test_an_output_folder_that_is_an_input_or_holds_one_deep_is_refused(tmp_path: Path) -> None:
    """guard_outputs' docstring: 'an output folder that holds an input or is one'; held at any
    depth, not only directly; a sibling folder is fine."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "in.npz").write_bytes(b"x")
    with pytest.raises(OutputError, match="is the input"):
        io.guard_outputs({"--split": data}, {}, {"--out-dir": data})
    with pytest.raises(OutputError, match="holds the input"):
        io.guard_outputs({"--split": data / "sub" / "in.npz"}, {}, {"--out-dir": data})
    io.guard_outputs({"--split": data / "sub" / "in.npz"}, {}, {"--out-dir": tmp_path / "run"})


def test_two_outputs_that_are_one_file_or_a_file_inside_the_output_folder(tmp_path: Path) -> None:
    """'two outputs that are the same file' (spelled twice, one with `..`), and a file output
    inside an output folder, are refused; two different outputs are not."""
    out = tmp_path / "out.json"
    with pytest.raises(OutputError, match="are the same output"):
        io.guard_outputs({}, {"--out": out, "--csv": tmp_path / "x" / ".." / "out.json"})
    with pytest.raises(OutputError, match="are the same output"):
        io.guard_outputs({}, {"--out": tmp_path / "run" / "a" / "log.csv"},
                         {"--out-dir": tmp_path / "run"})
    io.guard_outputs({}, {"--out": out, "--csv": tmp_path / "out.csv"})


def test_a_hard_link_to_an_input_is_the_input(tmp_path: Path) -> None:
    """'hard links included': another name, the same inode."""
    source = tmp_path / "in.json"
    source.write_text("{}")
    os.link(source, tmp_path / "alias.json")
    with pytest.raises(OutputError, match="is the input"):
        io.guard_outputs({"--metrics": [source]}, {"--out": tmp_path / "alias.json"})


def test_an_output_that_does_not_exist_yet_is_not_an_input(tmp_path: Path) -> None:
    """samefile fails on a path that does not exist: that is no match (nothing to destroy)."""
    source = tmp_path / "in.json"
    source.write_text("{}")
    io.guard_outputs({"--metrics": source}, {"--out": tmp_path / "new.json"})


# --- io.py: output_lock ------------------------------------------------------------------------

def test_the_lock_file_is_hidden_beside_the_output(tmp_path: Path) -> None:
    """docs/pipeline.md: 'a hidden `.NAME.wscat-lock` beside it'."""
    assert io.lock_path(tmp_path / "out.json") == tmp_path / ".out.json.wscat-lock"


def test_a_held_lock_names_its_holder_and_is_exclusive(tmp_path: Path) -> None:
    """While the block runs the lock file already holds this process's record (another process
    reads it to name the writer), and no other open file of it gets even a shared flock."""
    target = tmp_path / "out.json"
    with io.output_lock(target, "wscat test"):
        record = json.loads(io.lock_path(target).read_text())
        assert (record["pid"], record["command"]) == (os.getpid(), "wscat test")
        with open(io.lock_path(target)) as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)


def test_a_released_lock_is_taken_again_not_nested(tmp_path: Path) -> None:
    """Nesting is within one block: once it ends the output is free, and a later lock while
    another process holds it is refused (EBUSY) naming that process from its record, which stays
    as it was; not let through as nested."""
    target = tmp_path / "out.json"
    with io.output_lock(target):
        pass
    lock = io.lock_path(target)
    record = json.dumps({"pid": 4242, "started": "then", "command": "wscat other"}) + "\n"
    with open(lock, "a+") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write(record)
        other.flush()
        with pytest.raises(OutputError) as error:
            with io.output_lock(target):
                pass
        assert lock.read_text() == record
    assert error.value.errno == errno.EBUSY
    assert "(pid 4242, started then: wscat other)" in str(error.value), str(error.value)


@pytest.mark.parametrize("left", [
    json.dumps({"pid": 2**22 + 12345, "started": "long ago", "command": "x" * 300}) + "\n",
    "[1, 2]\n", "not json at all\n", ""])
def test_a_left_over_lock_file_is_taken_over_whatever_it_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], left: str) -> None:
    """A dead holder's record (longer than ours), a JSON list, text that is not JSON, nothing:
    each lock file is taken over; the file then holds exactly our record (the old one cut off);
    the note names a pid only where the record had one."""
    target = tmp_path / "out.json"
    io.lock_path(target).write_text(left)
    with io.output_lock(target, "wscat now"):
        record = json.loads(io.lock_path(target).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "wscat now"
    err = capsys.readouterr().err
    assert ("taking over the stale lock" in err) is left.startswith("{"), err
    assert not io.lock_path(target).exists()


@pytest.mark.parametrize(("pid", "kill", "said"), [(0, None, False), (4242, "denied", True)])
def test_a_stale_pid_is_alive_only_if_it_can_be_signalled(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        pid: int, kill: str | None, said: bool) -> None:
    """The note adds '(that pid now belongs to another process)' only for a live pid: pid 0 is
    no process (kill(0, 0) would signal our own group); a pid kill() may not signal
    (PermissionError: another user's) is alive."""
    if kill == "denied":
        def denied(pid: int, signal: int) -> None:
            raise PermissionError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(io.os, "kill", denied)
    target = tmp_path / "out.json"
    io.lock_path(target).write_text(json.dumps({"pid": pid, "started": "then"}))
    with io.output_lock(target):
        pass
    err = capsys.readouterr().err
    assert "taking over the stale lock" in err
    assert ("belongs to another process" in err) is said, err


def test_a_lock_in_new_nested_folders_makes_them_and_removes_them(tmp_path: Path) -> None:
    """The lock of a/b/out.json makes a/ then b/, and both go with the lock when empty."""
    target = tmp_path / "a" / "b" / "out.json"
    with io.output_lock(target):
        assert io.lock_path(target).is_file()
    assert os.listdir(tmp_path) == []


def test_a_lock_file_removed_before_its_flock_is_opened_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """_acquire retries 'when a finishing holder unlinked it meanwhile': here the file goes just
    before the first flock; the lock held is then the file at the lock's path."""
    target = tmp_path / "out.json"
    real, calls = fcntl.flock, []

    def flock(fd: int, operation: int) -> None:
        if not calls:
            io.lock_path(target).unlink()  # the previous holder finishing
        calls.append(operation)
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    with io.output_lock(target):
        assert json.loads(io.lock_path(target).read_text())["pid"] == os.getpid()
    assert len(calls) >= 2 and not io.lock_path(target).exists()


def test_an_error_naming_the_temporary_file_second_names_the_target(tmp_path: Path) -> None:
    """atomic_path: 'An OSError about the temporary file names `path`', also as its second file
    (a copy or link onto the temporary name failing)."""
    target = tmp_path / "out.json"

    def write(tmp: Path) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link", "/elsewhere/source", None,
                      str(tmp))  # (errno, strerror, filename, winerror, filename2)

    with pytest.raises(OSError) as error:
        io.atomic_write(target, write)
    assert (error.value.filename, error.value.filename2) == ("/elsewhere/source", str(target))
    assert os.listdir(tmp_path) == []


# --- checkpoint.py -----------------------------------------------------------------------------

def test_non_finite_tensors_are_named_by_their_path_complex_ones_too() -> None:
    """nonfinite: 'floating-point tensors' (complex ones hold floats too) named by their dotted
    path; a bare tensor as '<tensor>'; integer tensors are never non-finite."""
    nan = float("nan")
    state = {"model": {"fc": {"w": torch.tensor([1.0, nan])}}, "z": torch.tensor([complex(nan, 0)]),
             "steps": torch.tensor([1, 2])}
    assert checkpoint.nonfinite(state) == ["model.fc.w", "z"]
    assert checkpoint.nonfinite(torch.tensor([float("inf")])) == ["<tensor>"]
    assert checkpoint.nonfinite(torch.tensor([0.0, 1.0])) == []


@pytest.mark.parametrize(("bad", "tail"), [(["a"], "a holds NaN or infinite values; "),
                                           (["a", "b", "c"], "a holds NaN or infinite values "
                                                             "(and 2 more); ")])
def test_a_non_finite_state_is_never_written_naming_the_first_and_how_many_more(
        tmp_path: Path, bad: list[str], tail: str) -> None:
    """save_checkpoint refuses, naming the first non-finite tensor and counting the others; the
    previous file at the path is kept."""
    path = tmp_path / "best.pt"
    path.write_bytes(b"previous")
    state = {name: torch.tensor([float("nan")]) for name in bad}
    with pytest.raises(CheckpointError) as error:
        checkpoint.save_checkpoint(path, {"meta": {}, **state})
    assert f"refusing to write {path}: {tail}" in str(error.value)
    assert path.read_bytes() == b"previous"


@pytest.mark.parametrize("full", [True, False])
def test_a_failed_torch_save_is_a_full_disk_only_when_the_disk_is_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: bool) -> None:
    """save_tensors: torch's zip writer reports a failed write as RuntimeError; on a full disk
    that is OSError ENOSPC naming the path, otherwise the RuntimeError itself (a bug, not the
    disk); the previous file stays either way."""
    path = tmp_path / "last.pt"
    path.write_bytes(b"previous")

    def failing_save(obj: Any, where: Any) -> None:
        raise RuntimeError("PytorchStreamWriter failed writing file data/0")

    monkeypatch.setattr(checkpoint.torch, "save", failing_save)
    monkeypatch.setattr(checkpoint, "disk_full", lambda where: full)
    with pytest.raises(OSError if full else RuntimeError) as error:
        checkpoint.save_tensors(path, {"w": torch.zeros(1)})
    if full:
        assert error.value.errno == errno.ENOSPC and error.value.filename == str(path)
    assert path.read_bytes() == b"previous" and os.listdir(tmp_path) == ["last.pt"]


def test_files_written_together_change_together_or_not_at_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_texts: the second file's write fails (a full disk): the first is not replaced
    either, and no temporary file is left; on success both hold the new text."""
    first, second = tmp_path / "t.tex", tmp_path / "t.csv"
    first.write_text("old tex")
    real = Path.write_text

    def full_disk(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        if self.name.startswith(".t.csv."):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError) as error:
        io.write_texts({first: "new tex", second: "new csv"})
    assert error.value.filename == str(second)  # the file asked for, not the temporary one
    assert first.read_text() == "old tex" and sorted(os.listdir(tmp_path)) == ["t.tex"]
    monkeypatch.undo()
    io.write_texts({first: "new tex", second: "new csv"})
    assert (first.read_text(), second.read_text()) == ("new tex", "new csv")
    assert sorted(os.listdir(tmp_path)) == ["t.csv", "t.tex"]


def test_one_file_named_twice_is_no_pair_to_write(tmp_path: Path) -> None:
    """`a.csv` and `./a.csv` are one file: refused before anything is written."""
    with pytest.raises(ValueError, match="one file named twice"):
        io.write_texts({str(tmp_path / "a.csv"): "first", tmp_path / "." / "a.csv": "second"})
    assert os.listdir(tmp_path) == []


def test_a_checkpoint_write_that_fills_the_disk_names_the_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.save into a handle on a full device (/dev/full) fails as an OSError that names no
    file: the error names the checkpoint asked for, and the previous file stays."""
    import builtins

    path = tmp_path / "last.pt"
    path.write_bytes(b"previous")
    monkeypatch.setattr(checkpoint, "open", lambda where, mode: builtins.open("/dev/full", mode),
                        raising=False)
    with pytest.raises(OSError) as error:
        checkpoint.save_tensors(path, {"w": torch.zeros(4096)})
    assert error.value.errno == errno.ENOSPC and error.value.filename == str(path)
    assert path.read_bytes() == b"previous" and os.listdir(tmp_path) == ["last.pt"]


def test_the_same_state_saved_twice_is_the_same_bytes(tmp_path: Path) -> None:
    """Same params + seed -> the same files (DVC hashes best.pt): the archive's bytes may not
    carry the random name of the temporary file it was written to, nor the target's own name."""
    state = {"meta": {"epoch": 1}, "model": {"w": torch.arange(6.0).reshape(2, 3)}}
    first, second = tmp_path / "a" / "best.pt", tmp_path / "b" / "last.pt"
    checkpoint.save_checkpoint(first, state)
    checkpoint.save_checkpoint(second, state)
    assert first.read_bytes() == second.read_bytes()
    assert torch.equal(torch.load(second, weights_only=True)["model"]["w"], state["model"]["w"])


def test_a_folder_given_as_checkpoint_is_said_to_be_one(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="is a folder, not a checkpoint file"):
        checkpoint.load_checkpoint(tmp_path)


def test_non_finite_weights_are_refused_when_read(tmp_path: Path) -> None:
    """docs/pipeline.md: 'one with a NaN or infinite tensor is refused when read' (a file that
    torch.save wrote, which save_checkpoint would have refused), naming it."""
    torch.save({"format": checkpoint.FORMAT, "meta": {},
                "ema": {"w": torch.tensor([0.0, float("inf")])}}, tmp_path / "best.pt")
    with pytest.raises(CheckpointError, match="ema.w holds NaN or infinite values"):
        checkpoint.load_checkpoint(tmp_path / "best.pt")


@pytest.mark.parametrize("meta", [None, "cnn", ["cnn"]])
def test_a_checkpoint_without_a_metadata_dict_is_refused(tmp_path: Path, meta: Any) -> None:
    """load_checkpoint: the wscat format but no `meta` dict (missing, or not a dict) is refused
    ('has no metadata'): every step reads the run from it."""
    state: dict[str, Any] = {"format": checkpoint.FORMAT, "ema": {"w": torch.zeros(1)}}
    if meta is not None:
        state["meta"] = meta
    torch.save(state, tmp_path / "best.pt")
    with pytest.raises(CheckpointError, match="has no metadata"):
        checkpoint.load_checkpoint(tmp_path / "best.pt")


def test_the_metadata_read_never_runs_code_and_needs_metadata(tmp_path: Path) -> None:
    """checkpoint_meta reads as load_checkpoint does (weights_only): a pickle that would call
    os.makedirs is refused, the call never made; a wscat-format file without a meta dict is
    refused too."""
    marker = tmp_path / "the-file-ran-code"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.makedirs, (str(marker),))

    torch.save({"format": checkpoint.FORMAT, "meta": {"x": Payload()}}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError):
        checkpoint.checkpoint_meta(tmp_path / "evil.pt")
    assert not marker.exists()
    torch.save({"format": checkpoint.FORMAT, "ema": {}}, tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="bare.pt has no metadata; delete it and retrain$"):
        checkpoint.checkpoint_meta(tmp_path / "bare.pt")
    torch.save({"w": torch.zeros(2)}, tmp_path / "state.pt")  # a bare state dict
    with pytest.raises(CheckpointError, match=r"state.pt is a PyTorch file but not a "
                       r"wscat-checkpoint-v1 file \(a bare state dict.*; pass a run's best.pt"):
        checkpoint.checkpoint_meta(tmp_path / "state.pt")


def test_a_cut_short_archive_is_truncated_and_an_empty_file_empty(tmp_path: Path) -> None:
    """_unreadable_line: a PyTorch zip archive cut in half (its end of central directory lost:
    file_kinds' 'damaged') is 'truncated'; a 0-byte file 'is empty'."""
    whole = tmp_path / "whole.pt"
    checkpoint.save_checkpoint(whole, {"meta": {}, "ema": {"w": torch.zeros(1000)}})
    data = whole.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="it is a truncated PyTorch archive"):
        checkpoint.load_checkpoint(tmp_path / "cut.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"\(it is empty\)"):
        checkpoint.load_checkpoint(tmp_path / "empty.pt")
    (tmp_path / "one.pt").write_bytes(b"x")
    with pytest.raises(CheckpointError) as error:
        checkpoint.load_checkpoint(tmp_path / "one.pt")
    assert "empty" not in str(error.value)


class Foreign:
    """A Python object another program pickled into its .pt: harmless, but no tensor."""


def test_a_pt_of_python_objects_is_named_so_and_not_to_be_deleted(tmp_path: Path) -> None:
    """_unreadable_line: a PyTorch archive that the safe load refuses holds Python objects
    beyond tensors: it is said so (someone's valid file), never called damaged nor advised to be
    deleted; checkpoint_meta says the same."""
    torch.save({"format": checkpoint.FORMAT, "meta": {"x": Foreign()}}, tmp_path / "other.pt")
    for read in (checkpoint.load_checkpoint, checkpoint.checkpoint_meta):
        with pytest.raises(CheckpointError) as error:
            read(tmp_path / "other.pt")
        line = str(error.value)
        assert "it holds Python objects beyond tensors" in line and "delete" not in line, line


def test_a_cut_short_archive_of_another_kind_is_a_damaged_archive(tmp_path: Path) -> None:
    """_unreadable_line: another kind of wscat file is named as such only when it is whole; a
    dataset .npz cut short (file_kinds: damaged) is 'a damaged zip archive of other files'."""
    arrays = {"x_train": np.zeros((64, 8, 8, 1), np.uint8), "y_train": np.zeros(64, np.int64)}
    np.savez(tmp_path / "data.npz", **arrays)
    data = (tmp_path / "data.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as error:
        checkpoint.load_checkpoint(tmp_path / "cut.npz")
    assert "(a damaged zip archive of other files)" in str(error.value), str(error.value)


@pytest.mark.parametrize(("path", "rerun"), [
    ("results/models/digits/cnn/trades/seed1/resume/best.pt",
     "snakemake -- results/models/digits/cnn/trades/seed1/best.pt"),
    ("results/mine/resume/last.pt", "the same `wscat train ... --out-dir results/mine`")])
def test_an_unfinished_checkpoint_names_its_run_folder_and_how_to_finish(path: str,
                                                                         rerun: str) -> None:
    """check_finished: the run folder is resume/'s parent; Snakemake's own runs (under
    results/models/) finish through Snakemake, any other folder by the same `wscat train`;
    the line names the finished checkpoint to pass instead."""
    with pytest.raises(CheckpointError) as error:
        checkpoint.check_finished(path)
    line = str(error.value)
    finished = str(Path(path).parent.parent / Path(path).name)
    assert f"rerun {rerun}" in line and line.endswith(f"then pass {finished}"), line
    checkpoint.check_finished(finished)  # a finished run's checkpoint passes


def test_a_model_of_the_same_name_and_another_spec_blames_the_params() -> None:
    """It said "holds model 'cnn' (...), not 'cnn'; pass --model cnn": a contradiction, and a
    flag that would change nothing."""
    meta = {"model": "cnn", "model_spec": {"architecture": "cnn", "width": 24}}
    with pytest.raises(CheckpointError) as error:
        checkpoint.check_model("best.pt", meta, "cnn", {"architecture": "cnn", "width": 16})
    assert str(error.value) == (
        "best.pt holds model 'cnn' (architecture cnn, width 24), but the params give models.cnn "
        "as (architecture cnn, width 16); pass the params it was trained with, or retrain it "
        "with these")


def test_an_older_checkpoints_model_is_its_architecture_name() -> None:
    """model_spec: without a stored spec, the `models:` entry the name gives (architecture);
    check_model goes by that name then, and refuses another one."""
    with pytest.raises(CheckpointError, match="holds model 'wrn-16-4' .*not 'cnn'"):
        checkpoint.check_model("best.pt", {"model": "wrn-16-4"}, "cnn", {"architecture": "cnn"})
    assert checkpoint.model_spec({"model": "cnn"}) == {"architecture": "cnn"}
    assert checkpoint.model_spec({"model": "x", "model_spec": {"architecture": "cnn",
                                                               "width": 8}}) == {
        "architecture": "cnn", "width": 8}


def test_a_checkpoint_of_another_seed_is_another_run() -> None:
    """check_run compares dataset, method and seed; the seed alone differing is refused."""
    meta = {"dataset": "digits", "method": "trades", "seed": 2}
    checkpoint.check_run("best.pt", meta, dataset="digits", method="trades", seed=2)
    with pytest.raises(ValueError, match="holds trades seed 2 on digits, not trades seed 1"):
        checkpoint.check_run("best.pt", meta, dataset="digits", method="trades", seed=1)


def test_only_snakemakes_own_models_are_retrained_through_it() -> None:
    """retrain_hint: results/models/... through Snakemake; another path under results/ is not
    one of its targets."""
    assert "snakemake --forcerun" in checkpoint.retrain_hint("results/models/d/m/x/seed1/best.pt")
    assert "snakemake" not in checkpoint.retrain_hint("results/mine/best.pt")


@pytest.mark.parametrize("weights", ["missing", "not a dict"])
def test_weights_that_do_not_fit_are_one_line(weights: str) -> None:
    """load_weights: a missing tensor (strict loading) and something that is not a state dict at
    all are CheckpointError, not a traceback."""
    module = nn.Linear(2, 2)
    given: Any = {"weight": torch.zeros(2, 2)} if weights == "missing" else [1, 2]
    with pytest.raises(CheckpointError, match="do not fit the model"):
        checkpoint.load_weights(module, given, "best.pt")


# --- attacks/shards.py: a shard is reused only under its own key -------------------------------

class _Net(nn.Module):
    """(features, logits) of a linear classifier on 1x2x2 images behind a batch norm: weights
    and buffers both."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 3)
        with torch.no_grad():
            self.fc.weight.copy_(torch.arange(12.0).reshape(3, 4) / 10)
            self.fc.bias.zero_()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.norm(x.flatten(1))
        return features, self.fc(features)


SHARD = {"variant": "paper", "eps": 0.1, "seed": 0, "batch_size": 4, "shard_size": 3}


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Six images of 1x2x2 pixels in steps of 1/32 (exact in float32), labels 0, 1, 2, 0, 1, 2."""
    return torch.arange(24.0).reshape(6, 1, 2, 2) / 32, torch.tensor([0, 1, 2, 0, 1, 2])


@pytest.fixture
def attacked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The attack stood in for: every shard it runs is recorded (its size) and comes out all
    robust, with one warning that every shard repeats."""
    from wscat.attacks import shards
    from wscat.attacks.autoattack import ShardResult

    ran: list[int] = []

    def run_shard(adversary: Any, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *,
                  eps: float, batch_size: int) -> ShardResult:
        ran.append(len(x))
        return ShardResult(clean=len(x), flipped={}, robust=[True] * len(x),
                           warnings=["the same warning"])

    monkeypatch.setattr(shards.autoattack, "run_shard", run_shard)
    return ran


def _attack(shard_dir: Path, model: nn.Module | None = None,
            data: tuple[torch.Tensor, torch.Tensor] | None = None, **changes: Any) -> Any:
    from wscat.attacks.shards import autoattack_accuracy

    x, y = data or _inputs()
    return autoattack_accuracy((model or _Net()).eval(), x, y, shard_dir=shard_dir,
                               **{**SHARD, **changes})


def _pixel_nudged() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _inputs()
    x[0, 0, 0, 0] += 1 / 1024  # one pixel of the first shard, by less than a uint8 level
    return x, y


def _label_changed() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _inputs()
    y[0] = 1
    return x, y


def _buffer_changed() -> nn.Module:
    model = _Net()
    model.norm.running_mean.fill_(0.5)  # a buffer, not a parameter
    return model


@pytest.mark.parametrize("change", ["eps", "seed", "batch_size", "settings", "pixel", "label",
                                    "buffer", "pyautoattack", "torch"])
def test_a_shard_is_not_reused_when_its_key_changes(
        tmp_path: Path, attacked: list[int], monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """The key (shards' docstring, docs/evaluation.md): the weights (state_dict: buffers too), the
    shard's inputs and labels (every byte), the settings, eps, seed, batch size, the library's and
    torch's versions. Unchanged: both shards resumed; changed: both run again (the weights, the
    versions, eps...) or the first only (a pixel or a label of the first shard)."""
    from wscat.attacks import autoattack

    _attack(tmp_path)
    assert attacked == [3, 3]
    _attack(tmp_path)
    assert attacked == [3, 3]  # the same key: both resumed from disk
    kwargs: dict[str, Any] = {}
    if change in ("eps", "seed", "batch_size"):
        kwargs[change] = {"eps": 0.2, "seed": 1, "batch_size": 5}[change]
    elif change == "pixel":
        kwargs["data"] = _pixel_nudged()
    elif change == "label":
        kwargs["data"] = _label_changed()
    elif change == "buffer":
        kwargs["model"] = _buffer_changed()
    elif change == "settings":  # what the attack objects run with (another library default)
        real = autoattack.settings
        monkeypatch.setattr(autoattack, "settings",
                            lambda adversary: {**real(adversary), "square": {"queries": 1}})
    elif change == "pyautoattack":
        monkeypatch.setattr(autoattack, "library_version", lambda: "0.0.0-other")
    else:
        monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    _attack(tmp_path, **kwargs)
    assert attacked == [3, 3] + ([3] if change in ("pixel", "label") else [3, 3])


def test_each_variant_keeps_its_own_shard_files(tmp_path: Path, attacked: list[int]) -> None:
    """AA and AA-paper of one `--part all` evaluation share its shards folder: the paper
    variant's shards never replace the standard one's, so both resume after a kill."""
    _attack(tmp_path, variant="standard")
    _attack(tmp_path, variant="paper")
    assert attacked == [3, 3, 3, 3]
    _attack(tmp_path, variant="standard")
    _attack(tmp_path, variant="paper")
    assert attacked == [3, 3, 3, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "aa-paper-00000.json", "aa-paper-00001.json", "aa-standard-00000.json",
        "aa-standard-00001.json"]


def test_the_device_type_is_in_the_shard_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same shard on another device type is another shard (docs/evaluation.md): AutoAttack's
    random numbers differ. (The bytes' digest is stood in for: a meta tensor holds none.)"""
    from wscat.attacks import shards

    monkeypatch.setattr(shards, "_digest", lambda *tensors: "same bytes")
    settings = {"variant": "paper", "config": {"order": []}, "eps": 0.1, "seed": 0,
                "batch_size": 4}
    on_cpu = shards._shard_key("w", torch.zeros(2), torch.zeros(2), **settings)
    on_meta = shards._shard_key("w", torch.zeros(2, device="meta"),
                                torch.zeros(2, device="meta"), **settings)
    assert on_cpu != on_meta


def test_the_shard_digest_sees_dtypes_and_shapes_not_only_bytes() -> None:
    """The same bytes as another shape or dtype are another shard's inputs (or weights)."""
    from wscat.attacks import shards

    x = torch.arange(12, dtype=torch.float32)
    digest = shards._digest(x.reshape(3, 4))
    assert shards._digest(x.reshape(3, 4).clone()) == digest
    assert shards._digest(x.reshape(4, 3)) != digest
    assert shards._digest(x.view(torch.int32).reshape(3, 4)) != digest
    assert shards._digest(x.reshape(3, 4), torch.zeros(0)) != digest
    assert shards._digest(x.reshape(3, 4) + 1) != digest


def test_a_damaged_shard_file_is_attacked_again(tmp_path: Path, attacked: list[int]) -> None:
    """A shard file that is not JSON (cut short, overwritten) is no finished shard: it is run
    again, not a traceback."""
    _attack(tmp_path)
    (tmp_path / "aa-paper-00000.json").write_text('{"key": "')
    _attack(tmp_path)
    assert attacked == [3, 3, 3]


def test_a_shard_file_of_another_shape_is_attacked_again(tmp_path: Path,
                                                          attacked: list[int]) -> None:
    """Valid JSON that is not the object a finished shard writes (a list; its key with a field
    missing) is no finished shard either: attacked again, not an AttributeError or KeyError."""
    _attack(tmp_path)
    shard = tmp_path / "aa-paper-00000.json"
    written = json.loads(shard.read_text())
    shard.write_text("[]")
    _attack(tmp_path)
    assert attacked == [3, 3, 3]
    shard.write_text(json.dumps({k: v for k, v in written.items() if k != "robust"}))
    _attack(tmp_path)
    assert attacked == [3, 3, 3, 3]


def test_the_accuracies_count_every_shard_over_all_examples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two shards of 3: clean 3 + 2 of 6 (83.3...%); APGD-CE flips 1 + 0, APGD-T 0 + 1, so 4 then
    3 left (66.7%, 50%); robust flags 2 + 1 of 6 (50%); each warning once, in order."""
    from wscat.attacks import shards
    from wscat.attacks.autoattack import ShardResult

    answers = iter([ShardResult(clean=3, flipped={"apgd-ce": 1}, robust=[True, True, False],
                                warnings=["w1", "w2"]),
                    ShardResult(clean=2, flipped={"apgd-t": 1}, robust=[False, True, False],
                                warnings=["w2"])])
    monkeypatch.setattr(shards.autoattack, "run_shard", lambda *a, **k: next(answers))
    result = _attack(tmp_path)
    assert result.clean == pytest.approx(500 / 6)
    assert result.after["apgd-ce"] == pytest.approx(400 / 6)
    assert result.after["apgd-t"] == pytest.approx(50.0)
    assert result.after["fab-t"] == result.after["square"] == pytest.approx(50.0)
    assert result.accuracy == pytest.approx(50.0)
    assert result.warnings == ["w1", "w2"] and result.n_shards == 2
    assert result.robust == [True, True, False, False, True, False]


# --- training/run_folder.py: what a resume needs, what a stopped run leaves ----------------------

def _resume_state(best_epoch: int) -> dict[str, Any]:
    return {"best": {"score": 50.0, "epoch": best_epoch}, "meta": {"fingerprint": "f"}}


def test_a_best_epoch_needs_its_checkpoint_from_the_first_validation_on(tmp_path: Path) -> None:
    """best_at_hand: epochs count from 1 and a run that has not validated yet has best epoch -1
    (the trainer's start): nothing needed then; best epoch 1 needs a best.pt, and there is none."""
    resume = tmp_path / "resume"
    resume.mkdir()
    assert run_folder.best_at_hand(_resume_state(-1), resume)
    assert not run_folder.best_at_hand(_resume_state(1), resume)


def test_empty_curves_go_but_never_a_folder_this_training_did_not_make(tmp_path: Path) -> None:
    """drop_empty_curves: the empty dvclive/ goes; out_dir, made by the user (made_here False),
    stays although empty; resume/ stays while it holds a checkpoint, and the call does not fail
    on it."""
    out_dir = tmp_path / "run"
    (out_dir / "dvclive").mkdir(parents=True)
    run_folder.drop_empty_curves(out_dir / "dvclive", out_dir, made_here=False)
    assert out_dir.is_dir() and list(out_dir.iterdir()) == []

    (out_dir / "resume" / "dvclive").mkdir(parents=True)
    (out_dir / "resume" / "last.pt").write_bytes(b"kept")
    run_folder.drop_empty_curves(out_dir / "resume" / "dvclive", out_dir, made_here=True)
    assert sorted(p.name for p in (out_dir / "resume").iterdir()) == ["last.pt"]
