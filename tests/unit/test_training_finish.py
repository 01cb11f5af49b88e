"""The end of a training and a training into a finished run's folder: killed at any point of
the finish, a rerun resumes (and finishes) or finds the run finished; retrained by hand and
killed, the folder keeps the old run's files, its curves (dvclive/) included, until the new run
ends. The human-readable log line rounds the learning rate; the log files keep it exact."""
from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
from pathlib import Path

import pytest
import torch

from tests.helpers.killed import killed_after_first_epoch
from tests.helpers.tiny import digits_split, tiny_params
from wscat.checkpoint import load_checkpoint
from wscat.config import RunConfig
from wscat.data.training_data import training_data
from wscat.training import train
from wscat.training import run_folder
from wscat.training import trainer as trainer_module

OUTPUTS = ("best.pt", "last.pt", "train_log.csv")


@pytest.fixture(scope="module")
def source_split():
    return digits_split()


def _run(epochs: int) -> RunConfig:
    return RunConfig.from_params(tiny_params(epochs=epochs), dataset="digits", model="cnn",
                                 method="standard", seed=1)


def _data(source_split):
    source, split = source_split
    return training_data(source, split, "labelled", None)


def _files(folder: Path) -> dict[str, bytes]:
    """{relative path: bytes} of every file under `folder`."""
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def _finished(folder: Path) -> dict[str, bytes]:
    """The finished outputs: best.pt, last.pt, train_log.csv and dvclive/'s files."""
    return {name: data for name, data in _files(folder).items()
            if name in OUTPUTS or name.startswith("dvclive/")}


def _killed_at_finish(monkeypatch: pytest.MonkeyPatch, training) -> None:
    """Run `training` up to the finish, then stop it (resume/ complete, nothing copied out)."""
    def die(*args, **kwargs):
        raise KeyboardInterrupt("killed as it finishes")

    monkeypatch.setattr(run_folder, "finish", die)
    with pytest.raises(KeyboardInterrupt):
        training()
    monkeypatch.undo()


@contextlib.contextmanager
def _kill_at(monkeypatch: pytest.MonkeyPatch, n: int):
    """Stop the finish at its `n`-th file operation (write, copy, rename, delete); yields the
    list of operations seen."""
    seen: list[str] = []
    real_finish = run_folder.finish
    armed = []

    def counted(name, real):
        def call(*args, **kwargs):
            if armed:
                seen.append(name)
                if len(seen) == n:
                    raise KeyboardInterrupt(f"killed at {name}")
            return real(*args, **kwargs)
        return call

    def finish(*args, **kwargs):
        armed.append(True)
        return real_finish(*args, **kwargs)

    for module, name in ((os, "replace"), (os, "rename"), (os, "unlink"), (os, "rmdir"),
                         (shutil, "copyfile"), (run_folder, "write_log")):
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    monkeypatch.setattr(run_folder, "finish", finish)
    try:
        yield seen
    finally:
        monkeypatch.undo()


def _assert_resumable_or_finished(folder: Path, reference: dict[str, bytes]) -> str:
    """'resumable' (resume/last.pt with the best epoch's checkpoint) or 'finished' (no
    resume/last.pt, every output the reference's); fails on anything else."""
    if (folder / "resume" / "last.pt").is_file():
        state = load_checkpoint(folder / "resume" / "last.pt")
        assert state["best"]["epoch"] < 1 or (folder / "resume" / "best.pt").is_file()
        return "resumable"
    assert _finished(folder) == reference
    return "finished"


@pytest.mark.parametrize("retrained", [False, True], ids=["new folder", "finished folder"])
def test_a_kill_anywhere_in_the_finish_leaves_a_run_that_resumes_or_is_finished(
        tmp_path, source_split, monkeypatch, capsys, retrained):
    """Each file operation of the finish in turn is where the run is killed; the folder is then
    resumable, and a rerun finishes it, or finished: either way the same outputs as a finish
    never killed. With `retrained`, the folder held a finished 2-epoch run first."""
    run, data = _run(3), _data(source_split)
    base = tmp_path / "base"
    if retrained:
        train(_run(2), _data(source_split), base)
    _killed_at_finish(monkeypatch, lambda: train(run, data, base))
    reference_dir = tmp_path / "reference"
    shutil.copytree(base, reference_dir)
    train(run, _data(source_split), reference_dir)
    reference = _finished(reference_dir)
    assert not (reference_dir / "resume").exists() and len(reference) > 3
    states, n = [], 0
    while True:
        n += 1
        folder = tmp_path / f"killed{n}"
        shutil.copytree(base, folder)
        with _kill_at(monkeypatch, n) as seen:
            try:
                train(run, _data(source_split), folder)
            except KeyboardInterrupt:
                pass
        if len(seen) < n:  # the finish ran to its end: every point was tried
            break
        states.append(_assert_resumable_or_finished(folder, reference))
        if states[-1] == "resumable":
            capsys.readouterr()
            train(run, _data(source_split), folder)
            assert "resuming standard seed 1 from epoch 3" in capsys.readouterr().err
            assert _finished(folder) == reference
        assert not (folder / "resume" / "last.pt").exists()
    assert "resumable" in states and "finished" in states and n > 6


def test_a_resume_folder_that_lost_its_best_checkpoint_finishes(tmp_path, source_split,
                                                                  capsys):
    """An older wscat killed while removing resume/ could leave resume/last.pt alone beside the
    finished files: the rerun takes best.pt back (it is that epoch's) and finishes, instead of
    failing on resume/best.pt on every rerun."""
    run = _run(2)
    train(run, _data(source_split), tmp_path / "run")
    finished = _finished(tmp_path / "run")
    (tmp_path / "run" / "resume").mkdir()
    shutil.copyfile(tmp_path / "run" / "last.pt", tmp_path / "run" / "resume" / "last.pt")
    capsys.readouterr()
    train(run, _data(source_split), tmp_path / "run")
    assert "resuming standard seed 1 from epoch 2" in capsys.readouterr().err
    assert _finished(tmp_path / "run") == finished
    assert not (tmp_path / "run" / "resume").exists()


def test_a_resume_folder_without_its_best_checkpoint_anywhere_trains_afresh(
        tmp_path, source_split, capsys):
    """resume/last.pt alone and no best.pt of its run (Snakemake deleted the outputs): not
    resumable, so the run trains afresh, saying why, and ends as a straight run."""
    run = _run(2)
    train(run, _data(source_split), tmp_path / "straight")
    (tmp_path / "run" / "resume").mkdir(parents=True)
    shutil.copyfile(tmp_path / "straight" / "last.pt", tmp_path / "run" / "resume" / "last.pt")
    capsys.readouterr()
    train(run, _data(source_split), tmp_path / "run")
    err = capsys.readouterr().err
    assert "ignoring resume/last.pt: resume/best.pt, the checkpoint of its best epoch (2), is " \
           "missing; training standard seed 1 afresh" in err
    again, straight = (load_checkpoint(tmp_path / name / "last.pt") for name in ("run", "straight"))
    assert all(torch.equal(again["model"][k], straight["model"][k]) for k in straight["model"])


def test_a_run_killed_while_retraining_a_finished_folder_keeps_the_old_runs_files(
        tmp_path, source_split, monkeypatch):
    """Trained again by hand with other params (3 epochs, not 2) into a finished run's folder
    and killed after an epoch: best.pt, last.pt, train_log.csv and dvclive/ are all still the
    old run's; resumed to its end, all are the new run's, curves as a straight run's."""
    folder, straight = tmp_path / "run", tmp_path / "straight"
    train(_run(2), _data(source_split), folder)
    old = _finished(folder)
    killed_after_first_epoch(monkeypatch, lambda: train(_run(3), _data(source_split), folder))
    assert _finished(folder) == old
    train(_run(3), _data(source_split), folder)
    train(_run(3), _data(source_split), straight)
    new, expected = _finished(folder), _finished(straight)
    assert {k: v for k, v in new.items() if k.startswith("dvclive/")} == {
        k: v for k, v in expected.items() if k.startswith("dvclive/")}
    with open(folder / "train_log.csv", newline="") as handle:
        assert [row["epoch"] for row in csv.DictReader(handle)] == ["1", "2", "3"]
    assert not (folder / "resume").exists()


def test_a_retraining_stopped_before_its_first_epoch_leaves_the_finished_folder_as_it_was(
        tmp_path, source_split, monkeypatch):
    """Stopped in its first epoch (Ctrl-C), a training into a finished folder used to have
    wiped the old run's curves already; now nothing of the folder changes."""
    folder = tmp_path / "run"
    train(_run(2), _data(source_split), folder)
    before = _files(folder)

    def stop(*args, **kwargs):
        raise KeyboardInterrupt("stopped in the first epoch")

    monkeypatch.setattr(trainer_module, "train_step", stop)
    with pytest.raises(KeyboardInterrupt):
        train(_run(3), _data(source_split), folder)
    assert _files(folder) == before and not (folder / "resume").exists()


def test_the_log_line_rounds_the_learning_rate_and_the_log_keeps_it_exact(
        tmp_path, source_split, capsys):
    class Bar:
        disable = True

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        trainer_module._show(Bar(), {"epoch": 2, "lr": 0.07728822550972524, "loss": 1.483811},
                             3, [1.0, 1.0])
    assert err.getvalue().startswith("epoch=2 lr=0.07729 loss=1.483811 | 2/3 epochs")
    train(_run(2), _data(source_split), tmp_path / "run")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch=")]
    with open(tmp_path / "run" / "train_log.csv", newline="") as handle:
        logged = [row["lr"] for row in csv.DictReader(handle)]
    history = load_checkpoint(tmp_path / "run" / "last.pt")["history"]
    assert logged == [repr(row["lr"]) for row in history]  # exact
    assert [line.split()[1] for line in lines] == [f"lr={float(lr):.4g}" for lr in logged]
