"""The CPU threads a training and an evaluation computed with (wscat.training.threads): recorded in
the checkpoint's meta, said and recorded when a training resumes at another count, never part of
the training fingerprint (older runs stay valid)."""
from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch

from tests.helpers.killed import killed_after_first_epoch
from tests.helpers.tiny import digits_split, tiny_params
from tests.unit.test_run_identity import _main, _pseudo, _validate, work  # noqa: F401
from wscat.checkpoint import load_checkpoint, save_checkpoint
from wscat.config import RunConfig
from wscat.data.training_data import training_data
from wscat.training import train
from wscat.training.threads import manifest_entry, resumed_record, training_record


@pytest.fixture(scope="module")
def setting():
    params = tiny_params(epochs=2)
    source, split = digits_split()
    run = RunConfig.from_params(params, dataset="digits", model="cnn", method="standard", seed=1)
    return run, training_data(source, split, "labelled", None)


@contextlib.contextmanager
def cpu_threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resumed(run, data, out, threads: int) -> str:
    """Resume the killed training in `out` on `threads` CPU threads; what it printed."""
    said = io.StringIO()
    with cpu_threads(threads), contextlib.redirect_stderr(said):
        train(run, data, out)
    return said.getvalue()


def test_a_training_records_its_cpu_threads_outside_its_fingerprint(tmp_path, setting,
                                                                     monkeypatch) -> None:
    run, data = setting
    out = tmp_path / "run"
    killed_after_first_epoch(monkeypatch, lambda: train(run, data, out))
    first = load_checkpoint(out / "resume" / "last.pt")["meta"]
    assert first["cpu_threads"] == {"from epoch 1": 1}
    said = resumed(run, data, out, threads=2)
    # the same fingerprint at 2 threads: the run resumed (it did not start afresh), and said so
    assert "resuming standard seed 1 from epoch 1" in said and "other params" not in said
    changed = [line for line in said.splitlines() if "CPU thread" in line]
    assert changed == ["standard seed 1 resumes on 2 CPU threads, but its epochs so far computed "
                       "on 1 CPU thread: its result will not equal a run on one thread count bit "
                       "for bit (recorded as meta.cpu_threads in its checkpoints and in its "
                       "metrics' manifest)"]
    for name in ("best.pt", "last.pt"):
        meta = load_checkpoint(out / name)["meta"]
        assert meta["cpu_threads"] == {"from epoch 1": 1, "from epoch 2": 2}, name
        assert meta["fingerprint"] == first["fingerprint"]


def test_a_resume_at_the_same_count_says_nothing_and_an_unrecorded_one_is_read_as_before(
        tmp_path, setting, monkeypatch) -> None:
    run, data = setting
    same, older = tmp_path / "same", tmp_path / "older"
    for out in (same, older):
        killed_after_first_epoch(monkeypatch, lambda: train(run, data, out))
    said = resumed(run, data, same, threads=1)
    assert "resuming standard seed 1" in said and "CPU thread" not in said
    assert load_checkpoint(same / "last.pt")["meta"]["cpu_threads"] == {"from epoch 1": 1}
    # a checkpoint of before the record: resumed, nothing said, the record starts where it resumed
    state = load_checkpoint(older / "resume" / "last.pt")
    del state["meta"]["cpu_threads"]
    save_checkpoint(older / "resume" / "last.pt", {k: v for k, v in state.items() if k != "format"})
    said = resumed(run, data, older, threads=2)
    assert "resuming standard seed 1 from epoch 1" in said and "CPU thread" not in said
    assert load_checkpoint(older / "last.pt")["meta"]["cpu_threads"] == {"from epoch 2": 2}


def test_only_a_cpu_device_records_threads() -> None:
    with cpu_threads(3):
        assert training_record("cpu") == {"cpu_threads": {"from epoch 1": 3}}
        assert training_record(torch.device("cuda")) == {}
        assert resumed_record(None, 2, "cuda", "x") == ({}, None)
        # a CPU stretch then a CUDA one: recorded as such, no line (not a thread-count change)
        assert resumed_record({"from epoch 1": 3}, 2, "cuda", "x") == (
            {"cpu_threads": {"from epoch 1": 3, "from epoch 3": None}}, None)
        assert manifest_entry({}, "cpu") == {"cpu_threads": {"evaluation": 3}}
        assert manifest_entry({}, "cuda") == {}
        assert manifest_entry({"cpu_threads": {"from epoch 1": 1}}, "cuda:0") == {
            "cpu_threads": {"training": {"from epoch 1": 1}}}


def test_pseudo_labels_and_validation_record_their_cpu_threads(work, tmp_path) -> None:
    """The two other steps that run a model on a CPU: the pseudo-label report and the validation
    file say the training's record and their own count (`wscat --threads`)."""
    training = load_checkpoint(work / "run_s1" / "best.pt")["meta"]["cpu_threads"]
    with cpu_threads(1):  # the command sets torch's count for this process; put it back after
        assert _main(*_pseudo(work, "standard", "run_s1/best.pt", out=tmp_path),
                     "--threads", "2") == 0
    report = json.loads((tmp_path / "p.json").read_text())["manifest"]
    assert report["cpu_threads"] == {"training": training, "pseudo_labelling": 2}
    assert _main(*_validate(work, "standard", "run_s1/best.pt", out=tmp_path)) == 0
    validation = json.loads((tmp_path / "v.json").read_text())["manifest"]
    assert validation["cpu_threads"] == {"training": training, "validation": 1}
