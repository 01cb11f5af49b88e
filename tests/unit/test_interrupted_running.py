"""wscat.interrupted warns of a training cut short (resume/last.pt, no best.pt, its old metrics
still standing), not of one that is running now: while `make demo` retrains a run, a second
`snakemake -n` (or `--list-target-rules`) in another terminal must not call it interrupted and
advise a `--forcerun` of it. A running `wscat train` holds its run folder's output lock
(wscat.io.output_lock), which names its pid."""
from __future__ import annotations

from pathlib import Path

from wscat import interrupted
from wscat.io import being_written, output_lock

RUN = "results/models/digits/cnn/wscat/seed1"


def cut_short(root: Path) -> Path:
    """A run folder with resume/last.pt, no best.pt, and the metrics of its previous training."""
    run = root / RUN
    (run / "resume").mkdir(parents=True)
    (run / "resume/last.pt").write_bytes(b"")
    metrics = root / "results/metrics/digits/cnn/wscat/seed1.json"
    metrics.parent.mkdir(parents=True)
    metrics.write_text("{}")
    return run


def test_a_training_cut_short_is_warned_of(tmp_path: Path) -> None:
    cut_short(tmp_path)
    assert not being_written(tmp_path / RUN)
    (line,) = interrupted.warnings(tmp_path)
    assert line.startswith(f"warning: {RUN} holds an interrupted training"), line


def test_a_training_running_now_is_not(tmp_path: Path) -> None:
    run = cut_short(tmp_path)
    with output_lock(run, "wscat train ..."):
        assert being_written(run)
        assert interrupted.warnings(tmp_path) == []
    assert not being_written(run)
    assert len(interrupted.warnings(tmp_path)) == 1


def test_a_stale_lock_of_a_process_that_ended_is_no_training(tmp_path: Path) -> None:
    run = cut_short(tmp_path)
    lock = run.parent / f".{run.name}.wscat-lock"
    lock.write_text('{"pid": 999999999, "started": "then", "command": "wscat train"}\n')
    assert not being_written(run)
    assert len(interrupted.warnings(tmp_path)) == 1


def test_a_lock_of_another_machine_says_nothing_here(tmp_path: Path) -> None:
    """A SLURM job's lock on a shared file system names its node: a pid alive on this machine
    (here our own) is another process, so the lock shows no training running here."""
    import os
    import socket

    run = cut_short(tmp_path)
    lock = run.parent / f".{run.name}.wscat-lock"
    lock.write_text(f'{{"pid": {os.getpid()}, "host": "{socket.gethostname()}-other", '
                    '"started": "then", "command": "wscat train"}\n')
    assert not being_written(run)
    assert len(interrupted.warnings(tmp_path)) == 1
    lock.write_text(f'{{"pid": {os.getpid()}, "host": "{socket.gethostname()}"}}\n')
    assert being_written(run)


def test_the_command_it_names_keeps_the_workflow_profile(tmp_path: Path) -> None:
    """Cut short on a SLURM cluster: the command that continues it names the profile it ran
    with, or the training would run on the login node."""
    cut_short(tmp_path)
    (line,) = interrupted.warnings(tmp_path, ["results/tables/digits.tex"], "my-profile")
    assert line.endswith(f"e.g. snakemake --workflow-profile my-profile --forcerun {RUN}/best.pt "
                         "-- results/tables/digits.tex"), line
    for none in (None, "none"):
        (line,) = interrupted.warnings(tmp_path, ["t.tex"], none)
        assert line.endswith(f"e.g. snakemake --forcerun {RUN}/best.pt -- t.tex"), line


def test_a_stale_lock_whose_pid_was_reused_is_no_training(tmp_path: Path) -> None:
    """The holder died and its pid now runs another process of this machine (here our own): the
    lock's recorded start of the holder differs from that process's, so the training is named
    cut short, not running."""
    import json
    import os

    from wscat.io import _process_start

    run = cut_short(tmp_path)
    with output_lock(run, "wscat train ..."):
        lock = run.parent / f".{run.name}.wscat-lock"
        holder = json.loads(lock.read_text())
    assert holder["pid"] == os.getpid() and holder["pid_start"] == _process_start(os.getpid())
    assert isinstance(holder["pid_start"], int)
    lock.write_text(json.dumps(holder) + "\n")  # left behind by a holder that died
    assert being_written(run)  # the same pid and start: the holder is alive
    lock.write_text(json.dumps({**holder, "pid_start": holder["pid_start"] - 1}) + "\n")
    assert not being_written(run)
    (line,) = interrupted.warnings(tmp_path)
    assert line.startswith(f"warning: {RUN} holds an interrupted training"), line


def test_results_of_another_training_than_the_params_give_are_not_warned_of(
        tmp_path: Path) -> None:
    """Cut short during a retrain that an edit of params.yaml started (newcomer audit): its
    standing results record the training before the edit, so Snakemake reruns them and the
    training with them, and a plain rerun continues it; no warning, no `--forcerun` advice.
    Results of the training the params give now still get the warning, naming the default
    target (a bare `snakemake`: the demo's table), and so does a record that cannot be read."""
    import json

    import numpy as np

    from tests.helpers.tiny import tiny_params
    from wscat.config import validate_params
    from wscat.workflow import training_fingerprint

    params = validate_params(tiny_params())
    cut_short(tmp_path)
    metrics = tmp_path / "results/metrics/digits/cnn/wscat/seed1.json"
    now = training_fingerprint(params, "digits", "cnn", "wscat")
    for recorded, warned in ((now, True), ("0123456789abcdef", False)):
        metrics.write_text(json.dumps({"manifest": {"training": {"fingerprint": recorded}}}))
        lines = interrupted.warnings(tmp_path, params=params)
        assert len(lines) == warned, (recorded, lines)
    metrics.write_text("{not json")
    (line,) = interrupted.warnings(tmp_path, params=params)
    assert line.endswith("-- results/tables/digits.tex"), line
    # A labeler's pseudo-labels record its training as `labeler_training`.
    metrics.unlink()
    labeler = tmp_path / "results/models/digits/cnn/mt/seed1"
    (labeler / "resume").mkdir(parents=True)
    (labeler / "resume/last.pt").write_bytes(b"")
    pseudo = tmp_path / "results/pseudo/digits/cnn/mt/seed1.npz"
    pseudo.parent.mkdir(parents=True)
    for recorded, warned in ((training_fingerprint(params, "digits", "cnn", "mt"), True),
                             ("0123456789abcdef", False)):
        np.savez(pseudo, labeler_training=np.array(recorded))
        assert len(interrupted.warnings(tmp_path, params=params)) == warned, recorded
