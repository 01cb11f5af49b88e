"""A valid file given to the wrong option, a run folder that holds another run, an output path
that names a folder, a device that is not one: one line that says what the file or folder is and
what to pass instead, exit 2, nothing written, and no advice to delete a valid input."""
from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli, io
from wscat.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, save_tensors
from wscat.config import RunConfig
from wscat.data.sources import DatasetUnavailable
from wscat.data.sources.npz import Npz
from wscat.data.split import Split, save_split
from wscat.device import FromEnvironment, pick_device
from wscat.errors import OutputError, describe
from wscat.file_kinds import check_input_kind, file_kind
from wscat.io import check_writable
from wscat.training import train
from wscat.training.run_folder import check_run_folder
from wscat.workflow import training_fingerprint

RUN = {"dataset": "digits", "model": "cnn", "method": "wscat", "seed": 1}


def _meta(**changes: object) -> dict:
    return {**RUN, "training_fingerprint": "a" * 16, "fingerprint": "b" * 16, **changes}


def _checkpoint(path: Path, **changes: object) -> Path:
    """A small wscat checkpoint of RUN (or of `changes`)."""
    save_checkpoint(path, {"ema": {"w": torch.zeros(3)}, "epoch": 1, "meta": _meta(**changes)})
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """One valid file of every kind wscat writes (and reads)."""
    folder = tmp_path_factory.mktemp("kinds")
    split = folder / "seed1.npz"
    save_split(Split("digits", 1, np.arange(10), np.arange(10, 30), np.arange(30, 35),
                     np.arange(35, 50)), split)
    pseudo = folder / "pseudo.npz"
    np.savez(pseudo, indices=np.arange(10, 30), pseudo_labels=np.arange(20) % 10)
    dataset = folder / "toy.npz"
    np.savez(dataset, x_train=np.zeros((2, 4, 4, 1), np.uint8), y_train=np.arange(2))
    other = folder / "other.npz"
    np.savez(other, a=np.arange(3), b=np.arange(2))
    metrics = folder / "metrics.json"
    metrics.write_text(json.dumps({**RUN, "accuracy": {"Natural": 50.0}, "manifest": {}}))
    report = folder / "pseudo.json"
    report.write_text(json.dumps({"labeler": "mt", "per_class_accuracy": {}, "accuracy": 1.0}))
    params = write_params(folder / "params.yaml", tiny_params(epochs=1))
    checkpoint = _checkpoint(folder / "best.pt")
    state_dict = folder / "exported.pt"
    save_tensors(state_dict, {"w": torch.zeros(3)})
    whole = checkpoint.read_bytes()
    cut = folder / "cut.pt"
    cut.write_bytes(whole[: len(whole) // 2])
    cut_split = folder / "cut.npz"
    cut_split.write_bytes(split.read_bytes()[: split.stat().st_size // 2])
    return {"split": split, "pseudo-labels": pseudo, "dataset": dataset, "npz": other,
            "metrics": metrics, "pseudo-report": report, "params": params,
            "checkpoint": checkpoint, "state-dict": state_dict, "cut": cut,
            "cut-split": cut_split}


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "folder" for p in sorted(folder.rglob("*"))}


def refused(argv: list[str], capsys, *phrases: str) -> str:
    """`wscat argv` in-process: exit 2 and one line holding `phrases`."""
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


# --- what kind of file it is ------------------------------------------------------------------

@pytest.mark.parametrize("name, kind", [
    ("split", "split"), ("pseudo-labels", "pseudo-labels"), ("dataset", "dataset"),
    ("npz", "npz"), ("metrics", "metrics"), ("pseudo-report", "pseudo-report"),
    ("params", "params"), ("checkpoint", "checkpoint"), ("state-dict", "checkpoint")])
def test_every_kind_of_wscat_file_is_recognised(files, name, kind):
    found = file_kind(files[name])
    assert (found.kind, found.damaged) == (kind, False)


def test_a_cut_archive_is_recognised_as_damaged(files):
    assert file_kind(files["cut"])[:2] == ("checkpoint", True)
    assert file_kind(files["cut-split"])[:2] == ("split", True)


@pytest.mark.parametrize("given, expected, option, phrases", [
    ("split", "checkpoint", "--checkpoint",
     ["is a wscat split", "not a checkpoint",
      "pass --checkpoint results/models/digits/cnn/wscat/seed1/best.pt"]),
    ("split", "pseudo-labels", "--pseudo",
     ["is a wscat split", "not a pseudo-label file",
      "pass --pseudo results/pseudo/digits/cnn/mt/seed1.npz"]),
    ("checkpoint", "split", "--split",
     ["is a PyTorch checkpoint", "not a split", "pass --split results/splits/digits/seed1.npz"]),
    ("pseudo-labels", "split", "--split", ["is a wscat pseudo-label file", "not a split"]),
    ("metrics", "checkpoint", "--checkpoint", ["is a wscat metrics file", "not a checkpoint"]),
    ("params", "checkpoint", "--checkpoint", ["is a params file", "not a checkpoint"]),
    ("pseudo-report", "metrics", "--core", ["is a pseudo-label report", "not a metrics file"]),
    ("npz", "split", "--split", ["an .npz of other arrays (a, b)", "not a split"]),
])
def test_a_file_of_another_kind_says_what_it_is_and_what_to_pass(files, given, expected,
                                                                 option, phrases):
    with pytest.raises(ValueError) as error:
        check_input_kind(files[given], expected, option, {**RUN, "labeler": "mt"})
    line = str(error.value)
    assert line.startswith(f"{files[given]} is ") and "\n" not in line
    assert all(phrase in line for phrase in phrases), line
    assert "delete" not in line


@pytest.mark.parametrize("given, expected", [
    ("split", "split"), ("checkpoint", "checkpoint"), ("cut", "checkpoint"),
    ("cut-split", "pseudo-labels"), ("metrics", "metrics"), ("params", "params")])
def test_the_right_kind_a_damaged_file_and_an_unknown_one_go_to_their_loader(files, given,
                                                                             expected, tmp_path):
    check_input_kind(files[given], expected, "--x")
    (tmp_path / "notes.txt").write_text("hello")
    check_input_kind(tmp_path / "notes.txt", expected, "--x")
    check_input_kind(tmp_path / "missing.npz", expected, "--x")


@pytest.mark.parametrize("given, phrases, deletes", [
    ("split", ["is a wscat split", "not a checkpoint", "pass a run's best.pt"], False),
    ("metrics", ["is a wscat metrics file", "not a checkpoint"], False),
    ("state-dict", ["not a wscat-checkpoint-v1 file", "pass a run's best.pt"], False),
    ("cut", ["cannot be read", "truncated PyTorch archive"], True),
])
def test_a_checkpoint_that_does_not_load_is_advised_to_be_deleted_only_when_damaged(
        files, given, phrases, deletes):
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(files[given])
    line = str(error.value)
    assert all(phrase in line for phrase in phrases), line
    assert ("delete it" in line) == deletes, line
    assert "inline_container" not in line and "RuntimeError" not in line


@pytest.fixture
def work(files, tmp_path, monkeypatch) -> Path:
    """A work folder with params.yaml, a split (s.npz) and a finished wscat run (run/)."""
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path / "params.yaml", tiny_params(epochs=1))
    (tmp_path / "s.npz").write_bytes(files["split"].read_bytes())
    run = tmp_path / "run"
    _checkpoint(run / "best.pt")
    _checkpoint(run / "last.pt")
    (run / "train_log.csv").write_text("epoch,loss\n1,2.0\n")
    (run / "dvclive").mkdir()
    (run / "dvclive" / "metrics.json").write_text('{"loss": 2.0}\n')
    return tmp_path


def test_the_command_line_names_the_kind_of_a_wrong_file(work, capsys):
    before = digests(work)
    refused(["evaluate", "--dataset", "digits", "--model", "cnn", "--method", "standard",
             "--seed", 1, "--split", "s.npz", "--checkpoint", "s.npz", "--out", "m.json"], capsys,
            "s.npz is a wscat split", "pass --checkpoint results/models/digits/cnn/standard/"
            "seed1/best.pt")
    line = refused(["train", "--dataset", "digits", "--model", "cnn", "--method", "rst",
                    "--seed", 1, "--split", "s.npz", "--pseudo", "s.npz", "--out-dir", "new"],
                   capsys, "s.npz is a wscat split", "not a pseudo-label file", "pass --pseudo "
                   "results/pseudo/digits/cnn/")
    assert "delete" not in line and "KeyError" not in line
    assert digests(work) == before


# --- a run folder holds one run ---------------------------------------------------------------

def test_a_folder_of_another_run_is_refused_before_anything_in_it_changes(work, capsys):
    """The new user's case: trades trained into WSCAT's finished run folder."""
    before = digests(work)
    line = refused(["train", "--dataset", "digits", "--model", "cnn", "--method", "trades",
                    "--seed", 1, "--split", "s.npz", "--out-dir", "run", "--threads", 1], capsys,
                   "--out-dir run holds a finished run of wscat seed 1 on digits/cnn",
                   "not of trades seed 1", "another --out-dir", "delete run")
    assert "interrupted" not in line
    assert digests(work) == before and not (work / "run" / "resume").exists()


@pytest.mark.parametrize("where, changes, phrase", [
    ("best.pt", {"method": "trades"}, "a finished run of trades seed 1"),
    ("last.pt", {"seed": 2}, "a finished run of wscat seed 2"),
    ("best.pt", {"model": "wrn-16-4"}, "on digits/wrn-16-4"),
    ("resume/last.pt", {"dataset": "cifar10"}, "an unfinished (resume/) run of wscat seed 1 on "
                                               "cifar10"),
])
def test_check_run_folder_refuses_another_run(tmp_path, where, changes, phrase):
    _checkpoint(tmp_path / where, **changes)
    with pytest.raises(ValueError) as error:
        check_run_folder(tmp_path, **RUN)
    assert phrase in str(error.value) and "pass an empty or another --out-dir" in str(error.value)


def test_check_run_folder_lets_the_same_run_train_again_or_resume(tmp_path):
    """Today's behaviour: a finished run of the same run is trained again (after a params edit
    too, as Snakemake does); a resume state
    of the same run resumes, or (other params) starts afresh: the trainer decides."""
    _checkpoint(tmp_path / "best.pt", training_fingerprint="c" * 16)  # other params: retrained
    _checkpoint(tmp_path / "last.pt", training_fingerprint=None)  # an older checkpoint
    _checkpoint(tmp_path / "resume" / "last.pt", training_fingerprint="c" * 16)
    check_run_folder(tmp_path, **RUN)
    check_run_folder(tmp_path / "empty", **RUN)


def test_an_unreadable_checkpoint_in_the_folder_is_refused(tmp_path, files):
    (tmp_path / "best.pt").write_bytes(files["cut"].read_bytes())
    with pytest.raises(ValueError, match="holds best.pt, which cannot be read"):
        check_run_folder(tmp_path, **RUN)


def test_the_trainer_itself_refuses_before_touching_dvclive(work):
    """Python callers of wscat.training.train (the API) get the same check, first."""
    params = tiny_params(epochs=1)
    run = RunConfig.from_params(params, dataset="digits", model="cnn", method="trades", seed=1)
    before = digests(work)
    with pytest.raises(ValueError, match="holds a finished run of wscat seed 1"):
        train(run, None, work / "run", meta={"training_fingerprint": "a" * 16})
    assert digests(work) == before


@pytest.mark.slow
def test_the_same_run_trains_again_into_its_finished_folder(work, capsys):
    """A finished run of the same method, seed and params: trained again (as before), the same
    bits; another method then is refused and changes nothing."""
    args = ["train", "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed",
            "1", "--split", "s.npz", "--out-dir", "mine", "--threads", "1"]
    cli.main(["split", "--dataset", "digits", "--seed", "1", "--out", "real.npz"])
    args[args.index("s.npz")] = "real.npz"
    assert cli.main(args) == 0
    first = load_checkpoint(work / "mine" / "best.pt")["ema"]
    assert cli.main(args) == 0  # trained again, not refused
    state = load_checkpoint(work / "mine" / "best.pt")
    assert state["meta"]["training_fingerprint"] == training_fingerprint(
        tiny_params(epochs=1), "digits", "cnn", "standard")
    assert all(torch.equal(first[key], state["ema"][key]) for key in first)
    before = digests(work / "mine")
    refused([*args[:6], "trades", *args[7:]], capsys, "holds a finished run of standard seed 1")
    assert digests(work / "mine") == before


# --- an output path that ends in a separator --------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["split", "--dataset", "digits", "--seed", "1", "--out", "new/"],
    ["evaluate", "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1",
     "--split", "s.npz", "--checkpoint", "run/best.pt", "--out", "new/"],
    ["pseudo-label", "--dataset", "digits", "--model", "cnn", "--labeler", "standard", "--seed",
     "1", "--split", "s.npz", "--checkpoint", "run/best.pt", "--out", "p.npz", "--metrics",
     "new/"],
])
def test_an_output_path_ending_in_a_separator_is_refused_as_a_folder(work, capsys, argv):
    before = digests(work)
    refused(argv, capsys, "cannot write new/", "is a folder; pass a file path")
    assert digests(work) == before and not (work / "new").exists()


def test_check_writable_refuses_a_typed_folder_path(tmp_path):
    with pytest.raises(OutputError, match="is a folder"):
        check_writable(f"{tmp_path}/new/")
    check_writable(f"{tmp_path}/new/", folders=True)
    check_writable(tmp_path / "new")


# --- the device -------------------------------------------------------------------------------

def test_a_device_that_is_not_one_lists_the_options():
    with pytest.raises(ValueError) as error:
        pick_device("tpu")
    assert str(error.value) == ("--device tpu: not a device wscat runs on; give cpu, cuda, "
                                "cuda:N or auto")


def test_a_device_from_wscat_device_is_named_so(work, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("WSCAT_DEVICE", "cuda")
    args = ["evaluate", "--dataset", "digits", "--model", "cnn", "--method", "wscat", "--seed",
            "1", "--split", "s.npz", "--checkpoint", "run/best.pt", "--out", "m.json"]
    assert isinstance(cli.build_parser().parse_args(args).device, FromEnvironment)
    line = refused(args, capsys, "WSCAT_DEVICE=cuda: no CUDA device here",
                   "set WSCAT_DEVICE=cpu")
    assert "--device" not in line
    refused([*args, "--device", "cuda"], capsys, "--device cuda: no CUDA device here")
    assert not (work / "m.json").exists()


# --- a single .npy array under an .npz name ---------------------------------------------------

@pytest.fixture
def npy(tmp_path) -> Path:
    """`np.save` of one array, renamed to .npz: np.load returns the array, not an archive."""
    np.save(tmp_path / "arr.npy", np.zeros((4, 8, 8, 1), np.uint8))
    return (tmp_path / "arr.npy").rename(tmp_path / "arr.npz")


def test_an_npy_under_an_npz_name_is_recognised(npy):
    assert file_kind(npy).kind == "npy"


@pytest.mark.parametrize("expected, option, phrases", [
    ("dataset", "", ["is a single .npy array (np.save), not an .npz archive",
                     "np.savez(FILE, x_train=x, y_train=y)"]),
    ("split", "--split", ["is a single .npy array (np.save), not a split",
                          "pass --split results/splits/digits/seed1.npz"]),
    ("pseudo-labels", "--pseudo", ["is a single .npy array (np.save), not a pseudo-label file",
                                   "pass --pseudo results/pseudo/digits/cnn/mt/seed1.npz"]),
    ("checkpoint", "--checkpoint", ["not a checkpoint"]),
    ("params", "--params", ["not a params file"]),
])
def test_an_npy_given_for_an_npz_says_what_it_is(npy, expected, option, phrases):
    """Every input that opens an .npz (or another kind) refuses an .npy in one line, instead
    of np.load's "'numpy.ndarray' object does not support the context manager protocol"."""
    with pytest.raises(ValueError) as error:
        check_input_kind(npy, expected, option, {**RUN, "labeler": "mt"})
    line = str(error.value)
    assert line.startswith(f"{npy} is ") and "\n" not in line, line
    assert all(phrase in line for phrase in phrases), line
    assert "delete" not in line and "context manager" not in line, line


def test_the_dataset_reader_refuses_an_npy_in_one_line(npy):
    """datasets.NAME.path read by `wscat split` (no command-line kind check on that path)."""
    with pytest.raises(DatasetUnavailable) as error:
        Npz().read("mine", {"path": str(npy)})
    line = str(error.value)
    assert "is a single .npy array (np.save), not an .npz archive" in line, line
    assert "np.savez(" in line and "TypeError" not in line, line


# --- an atomic write names the file asked for, never its temporary name ----------------------

def test_a_file_that_cannot_be_replaced_is_named(tmp_path, monkeypatch):
    """`chattr +i` on the file (its folder takes new files): the rename onto it fails."""
    target = tmp_path / "params.yaml"
    target.write_text("old\n")

    def refuse(source, destination):
        raise PermissionError(errno.EPERM, "Operation not permitted", source, destination)

    monkeypatch.setattr(io.os, "replace", refuse)
    with pytest.raises(OSError) as error:
        io.write_text(target, "new\n")
    monkeypatch.undo()
    line = describe(error.value)
    assert f"cannot replace {target}" in line and ".tmp" not in line, line
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["params.yaml"]


@pytest.mark.parametrize("where", ["mkstemp", "body"])
def test_other_failures_of_an_atomic_write_name_the_file_too(tmp_path, monkeypatch, where):
    """A folder that takes no new file (mkstemp), a write of the temporary file that fails
    (a full disk): the line names out.json or its folder, not .out.json.XXXX.tmp."""
    target = tmp_path / "out.json"
    if where == "mkstemp":
        def refuse(prefix, suffix, dir):  # noqa: A002 - mkstemp's own keyword
            raise PermissionError(errno.EACCES, "Permission denied", f"{dir}/{prefix}x{suffix}")

        monkeypatch.setattr(io.tempfile, "mkstemp", refuse)
        phrase = f"cannot write {target}: permission denied on {tmp_path}"
    else:
        def write(tmp):
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp))
        phrase = f"no space left on the device of {target}"
    with pytest.raises(OSError) as error:
        if where == "mkstemp":
            io.write_text(target, "{}")
        else:
            io.atomic_write(target, write)
    line = describe(error.value)
    assert phrase in line and ".tmp" not in line, line
    assert list(tmp_path.iterdir()) == []
