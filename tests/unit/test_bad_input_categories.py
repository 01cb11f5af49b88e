"""Bad input by category, not by case (issue 22): each test walks what it covers (every
subcommand of `wscat.cli.COMMANDS`, every argument, every numeric knob of params.yaml, every
tensor of a checkpoint, every part of a split), so a new step, argument or knob is covered
without a new line. Each refusal: one line, exit 2 through the anticipated path, nothing written,
every input byte for byte as it was. tests/workflow/test_bad_input.py keeps the single cases."""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from tests.helpers.tiny import ROOT, tiny_params, write_params
from wscat import cli
from wscat.checkpoint import (FORMAT, CheckpointError, load_checkpoint, save_checkpoint,
                              save_tensors)
from wscat.config import ConfigError, validate_params
from wscat.data.sources import DatasetUnavailable, ImageDataset, check_dataset
from wscat.data.split import NON_EMPTY, Split, load_split, make_split, save_split
from wscat.errors import unknown_target_line
from wscat.io import guard_outputs, lock_path, output_lock
from wscat.models import build_model

UNEXPECTED = ": error: unexpected "


# --- what the parser says about every subcommand ----------------------------------------------

def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _is_path(action: argparse.Action) -> bool:
    return action.type is Path or action.dest in ("results", "out_dir")


def _value(action: argparse.Action, paths: dict[str, str]) -> list[str]:
    """A value that parses for a required argument (the guard runs before it is used)."""
    if action.dest in paths:
        return [paths[action.dest]]
    if _is_path(action):
        return [f"other-{action.dest}"]
    if action.choices:
        return [str(next(iter(action.choices)))]
    return ["1"] if action.type in (cli.seed_value, cli.threads_value, int) else ["x"]


def argv(step: str, paths: dict[str, str]) -> list[str]:
    """`step` with every required argument, the run's names and split (which evaluate,
    validate and pseudo-label may leave to the checkpoint) and every argument in `paths` (dest
    -> value)."""
    words = [step]
    for action in subparsers()[step]._actions:
        if isinstance(action, argparse._HelpAction) or not (
                action.required or action.dest in paths
                or action.dest in (*cli.RUN_NAMES, "labeler", "split")):
            continue
        if not action.option_strings:  # a positional (table's metrics files)
            words += _value(action, paths)
        else:
            words += [action.option_strings[0], *_value(action, paths)]
    return words


def roles(step: str) -> tuple[list[str], list[str]]:
    """(input dests, output dests) of a subcommand's path arguments."""
    inputs, outputs = [], []
    for action in subparsers()[step]._actions:
        dest = action.dest
        if dest == "out_dir" or dest in cli.OUTPUT_ARGS or (dest == "metrics"
                                                            and step == "pseudo-label"):
            outputs.append(dest)
        elif dest in cli.INPUT_ARGS:
            inputs.append(dest)
    return inputs, outputs


def test_every_path_argument_is_an_input_or_an_output():
    """A new argument that names a file must be classified (cli.INPUT_ARGS or OUTPUT_ARGS), so
    that the output = input guard and the lock cover it."""
    for step, parser in subparsers().items():
        for action in parser._actions:
            if _is_path(action):
                assert action.dest in (*cli.INPUT_ARGS, *cli.OUTPUT_ARGS, "out_dir"), (
                    f"wscat {step} {action.option_strings or action.dest}: add it to "
                    "wscat.cli.INPUT_ARGS or OUTPUT_ARGS")


def digests(folder: Path) -> dict[str, str]:
    """Every file (and link) under `folder` with its content's digest: what may not change."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_file():
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[key] = "folder"
    return found


def refused(command: list[str], phrase: str, folder: Path, capsys) -> str:
    """Run `wscat command` in-process: exit 2, one line holding `phrase`, not the catch-all, no
    traceback, and every file under `folder` as it was."""
    before = digests(folder)
    capsys.readouterr()
    code = cli.main(command)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert UNEXPECTED not in lines[0], lines[0]
    assert not any(unsafe in lines[0] for unsafe in ("allow_pickle", "weights_only")), lines[0]
    assert phrase in lines[0], lines[0]
    assert digests(folder) == before, "a refused command changed or left files"
    return lines[0]


@pytest.fixture
def inputs(tmp_path, monkeypatch) -> Path:
    """A folder with a file for every input argument (content that must survive)."""
    monkeypatch.chdir(tmp_path)
    for dest in cli.INPUT_ARGS + cli.OUTPUT_ARGS:
        (tmp_path / f"{dest}.bin").write_bytes(f"the precious {dest}\n".encode())
    (tmp_path / "results").mkdir()
    return tmp_path


# --- an input is never an output: every step x every (output, input) x every spelling --------

SPELLINGS = {
    "same": lambda name: name,
    "relative": lambda name: f"sub/../{name}",  # `sub` does not even exist
    "symlink": lambda name: f"link-to-{name}",
}


def _pairs() -> list[tuple[str, str, str, str]]:
    cases = []
    for step in subparsers():
        ins, outs = roles(step)
        for out in outs:
            for source in ins:
                if (step, out, source) == ("add-dataset", "out", "params"):
                    continue  # the in-place edit, named (test_add_dataset.py: out equal to params)
                for spelling in SPELLINGS:
                    cases.append((step, out, source, spelling))
    return cases


@pytest.mark.parametrize("step, out, source, spelling", _pairs(),
                         ids=lambda value: str(value))
def test_an_output_that_is_an_input_is_refused(inputs, capsys, step, out, source, spelling):
    name = f"{source}.bin" if source != "results" else "results"
    derived = (cli.DERIVED_OUTPUTS.get(step) if out == "out"
               else cli.FLAG_DERIVED_OUTPUTS.get((step, out)))
    if derived is not None:  # --out (table's --paired-figure) names what it writes, without
        # their extensions
        name = str(derived(Path(source))[-1])
        if source == "results":
            (inputs / name).mkdir()
        else:
            (inputs / name).write_text(f"the precious {name}")
    target = SPELLINGS[spelling](name)
    if derived is not None:
        target = str(Path(target).with_suffix(""))
    if spelling == "symlink":
        (inputs / SPELLINGS[spelling](name)).symlink_to(name)
    paths = {source: name, out: target}
    line = refused(argv(step, paths), "is the input", inputs, capsys)
    # named as the usage line names it: a flag, or a positional argument (table's metrics)
    assert f" {cli.input_name(step, '--' + source.replace('_', '-'))} " in line, line


@pytest.mark.parametrize("step, source", [(step, source) for step in subparsers()
                                          for source in roles(step)[0]
                                          if f"--{source}" not in cli.FOLDER_INPUTS])
def test_a_folder_where_a_file_belongs_is_said_so(inputs, capsys, step, source):
    (inputs / "a-folder").mkdir()
    refused(argv(step, {source: "a-folder"}), "a-folder is a folder, not a file", inputs, capsys)


@pytest.mark.parametrize("step, source", [(step, source) for step in subparsers()
                                          for source in roles(step)[0]
                                          if f"--{source}" in cli.FOLDER_INPUTS])
def test_a_file_where_a_folder_belongs_is_said_so(inputs, capsys, step, source):
    """`--results m.json` said `[Errno 20] Not a directory`."""
    (inputs / "m.json").write_text("{}")
    refused(argv(step, {source: "m.json"}), "m.json is a file, not a folder", inputs, capsys)


def test_every_step_that_writes_is_covered():
    """The list above is not empty for any step with an output and an input: a new step joins
    by its arguments alone."""
    covered = {case[0] for case in _pairs()}
    for step in subparsers():
        ins, outs = roles(step)
        assert bool(ins and outs) == (step in covered)
    assert {"split", "train", "pseudo-label", "evaluate", "table", "export"} <= covered


@pytest.mark.parametrize("step", [s for s in subparsers() if roles(s)[1]])
def test_an_output_folder_holding_an_input_or_two_same_outputs(inputs, capsys, step):
    """An output folder that holds an input (train's --out-dir), or two outputs that are one
    file (pseudo-label's --out and --metrics, table's files)."""
    ins, outs = roles(step)
    if "out_dir" in outs and ins:
        (inputs / "run").mkdir()
        (inputs / "run" / "in.bin").write_text("precious")
        refused(argv(step, {"out_dir": "run", ins[-1]: "run/in.bin"}), "holds the input",
                inputs, capsys)
    files = [o for o in outs if o != "out_dir"]
    if len(files) > 1:
        refused(argv(step, {files[0]: "out/x.bin", files[1]: "out/./x.bin"}),
                "are the same output", inputs, capsys)


def test_guard_outputs_sees_hard_links(tmp_path):
    (tmp_path / "a.pt").write_text("weights")
    os.link(tmp_path / "a.pt", tmp_path / "b.pt")
    with pytest.raises(OSError, match="is the input --checkpoint"):
        guard_outputs({"--checkpoint": tmp_path / "a.pt"}, {"--out": tmp_path / "b.pt"})
    guard_outputs({"--checkpoint": tmp_path / "a.pt"}, {"--out": tmp_path / "c.pt"})


# --- one writer per output: every step that writes x a live holder, and a dead one -----------

@contextlib.contextmanager
def held_elsewhere(target: Path):
    """The lock of `target` as another process holds it: flock on its own open file, with that
    process's record (this process's output_lock would nest instead)."""
    lock = lock_path(target)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write(json.dumps({"pid": 4242, "started": "2026-11-26 20:00:00 UTC",
                                 "command": "wscat the-first-one"}))
        handle.flush()
        yield


@pytest.mark.parametrize("step", [s for s in subparsers() if roles(s)[1]])
def test_an_output_being_written_is_refused_naming_the_writer(inputs, capsys, step):
    ins, outs = roles(step)
    paths = {out: f"out/{out}" for out in outs}
    files, folders = cli.step_outputs(cli.build_parser().parse_args(argv(step, paths)))
    target = inputs / sorted({*files.values(), *folders.values()})[-1]
    with held_elsewhere(target):
        line = refused(argv(step, paths), "being written by another wscat process", inputs, capsys)
    assert "pid 4242, started 2026-11-26 20:00:00 UTC: wscat the-first-one" in line, line


def test_the_lock_nests_within_a_process_and_goes_with_its_folder(tmp_path):
    target = tmp_path / "new" / "deeper" / "m.json"
    with output_lock(target):
        with output_lock(target):  # the command line's lock, then the step's own
            assert lock_path(target).exists()
        assert lock_path(target).exists()
    assert not lock_path(target).exists() and not (tmp_path / "new").exists()


HOLDER = """
import sys, time
from wscat.io import output_lock
with output_lock(sys.argv[1], "wscat holder"):
    print("locked", flush=True)
    time.sleep(300)
"""


def test_a_killed_writers_lock_is_taken_over(tmp_path, capsys):
    """A live writer in another process blocks; once it is killed (SIGKILL: no cleanup) its lock
    file stays, is recognised as stale and taken over."""
    target = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OSError, match=f"pid {holder.pid}, started .*wscat holder"):
            with output_lock(target):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert lock_path(target).exists()  # killed: its lock file is left behind
    capsys.readouterr()
    with output_lock(target, "wscat second"):
        assert json.loads(lock_path(target).read_text())["pid"] == os.getpid()
    assert f"stale lock of {target}" in capsys.readouterr().err
    assert not lock_path(target).exists()


def test_a_stale_lock_file_from_a_dead_pid(tmp_path, capsys):
    target = tmp_path / "m.json"
    lock_path(target).write_text(json.dumps({"pid": 2**22 + 12345, "started": "yesterday"}))
    with output_lock(target):
        pass
    assert "yesterday" in capsys.readouterr().err
    assert not lock_path(target).exists()


# --- finite or refused: every numeric knob of params.yaml ------------------------------------

def numeric_knobs(value, where=()) -> list[tuple[tuple, object]]:
    """(path, value) of every number in a params mapping."""
    if isinstance(value, dict):
        return [k for key, item in value.items() for k in numeric_knobs(item, (*where, key))]
    if isinstance(value, list):
        return [k for i, item in enumerate(value) for k in numeric_knobs(item, (*where, i))]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [(where, value)]
    return []


REAL = yaml.safe_load((ROOT / "params.yaml").read_text())
KNOBS = numeric_knobs(REAL)


def _set(params: dict, where: tuple, value: object) -> dict:
    params = json.loads(json.dumps(params))
    node = params
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return params


def test_params_yaml_has_numeric_knobs_and_is_valid():
    assert len(KNOBS) > 100
    validate_params(json.loads(json.dumps(REAL)))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=str)
def test_every_numeric_knob_refuses_non_finite(bad):
    """Every number in params.yaml, replaced by NaN, inf or -inf: refused, the knob named."""
    for where, _ in KNOBS:
        dotted = ".".join(map(str, where))
        with pytest.raises(ConfigError, match=f"at {dotted}: {bad} is not a finite number"):
            validate_params(_set(REAL, where, bad))


def test_every_integer_knob_refuses_what_the_code_cannot_represent():
    for where, value in KNOBS:
        if isinstance(value, int):
            dotted = ".".join(map(str, where))
            with pytest.raises(ConfigError, match=f"at {dotted}: {2**40} is beyond"):
                validate_params(_set(REAL, where, 2**40))


@pytest.mark.parametrize("literal", [".nan", ".inf", "-.inf", "1.0e+400", "-1.0e+999"])
def test_non_finite_in_the_file_through_the_cli(tmp_path, monkeypatch, capsys, literal):
    """As YAML spells them (1.0e+400 is too large for a float: it reads as inf)."""
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path / "params.yaml", tiny_params())
    from tests.helpers import bad_input

    bad_input.raw_setting("datasets.digits.eps", literal)(tmp_path)
    refused(["split", "--dataset", "digits", "--seed", "1", "--out", "s.npz"],
            "datasets.digits.eps", tmp_path, capsys)


# --- the command line: every seed and threads flag, every required argument -----------------

def _flagged(flag: str) -> list[str]:
    return [s for s, p in subparsers().items() if any(flag in a.option_strings for a in p._actions)]


@pytest.mark.parametrize("step", _flagged("--seed"))
@pytest.mark.parametrize("seed", ["-1", str(2**32), "1.5", "one"])
def test_seeds_outside_0_to_2_32(inputs, capsys, step, seed):
    words = argv(step, {})
    words[words.index("--seed") + 1] = seed
    refused(words, "argument --seed", inputs, capsys)


@pytest.mark.parametrize("step", _flagged("--threads"))
@pytest.mark.parametrize("threads", ["0", "-1", "two", "100000"])  # 100000: torch segfaulted
def test_threads_outside_1_to_the_most(inputs, capsys, step, threads):
    refused(argv(step, {}) + ["--threads", threads], "argument --threads", inputs, capsys)


def test_seed_bounds_are_inclusive():
    assert cli.seed_value("0") == 0 and cli.seed_value(str(2**32 - 1)) == 2**32 - 1
    assert cli.threads_value("1") == 1
    assert cli.threads_value(str(cli.THREADS_MAX)) == cli.THREADS_MAX


def _required() -> list[tuple[str, str]]:
    return [(step, action.dest) for step, parser in subparsers().items()
            for action in parser._actions if action.required and action.option_strings]


@pytest.mark.parametrize("step, dest", _required())
def test_a_missing_argument_is_one_line(inputs, capsys, step, dest):
    words = argv(step, {})
    action = next(a for a in subparsers()[step]._actions if a.dest == dest)
    at = words.index(action.option_strings[0])
    del words[at:at + 2]
    line = refused(words, "the following arguments are required", inputs, capsys)
    assert action.option_strings[0] in line and "usage:" not in line


def test_a_closed_pipe_on_stdout_is_a_quiet_exit_0():
    """`wscat list-experiments | head -1`: the reader has gone before the output comes."""
    process = subprocess.Popen([sys.executable, "-m", "wscat", "list-experiments"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # the reader goes before wscat has written anything
    err = process.stderr.read()
    assert process.wait(timeout=120) == 0, err
    assert err == "", err


# --- checkpoints: every floating tensor x NaN / inf ------------------------------------------

@pytest.fixture(scope="module")
def state() -> dict:
    """The model, its EMA and a method's own parts (nested, as Mean Teacher's teacher and an
    optimiser's per-parameter state are)."""
    model = build_model("cnn", width=4, in_channels=1, num_classes=10, mean=(0.5,), std=(0.5,))
    return {"ema": model.state_dict(), "model": model.state_dict(),
            "method": {"teacher": model.state_dict(), "moments": [torch.zeros(3), torch.ones(2)]},
            "epoch": 1, "best": {"score": float("-inf"), "epoch": -1}, "meta": {"model": "cnn"}}


def _floating(state: Any, top: bool = True) -> list[tuple]:
    """The key path of every floating-point tensor under `state`'s model, EMA and method parts."""
    if isinstance(state, torch.Tensor):
        return [()] if state.is_floating_point() else []
    items = state.items() if isinstance(state, dict) else (
        enumerate(state) if isinstance(state, list) else [])
    return [(key, *rest) for key, value in items if not top or key in ("model", "ema", "method")
            for rest in _floating(value, top=False)]


def _with_bad(state: Any, path: tuple, bad: float) -> Any:
    """A copy of `state` whose tensor at `path` holds `bad` in its first entry."""
    if not path:
        tensor = state.clone()
        tensor.view(-1)[0] = bad
        return tensor
    head, rest = path[0], path[1:]
    if isinstance(state, list):
        return [_with_bad(v, rest, bad) if i == head else v for i, v in enumerate(state)]
    return {**state, head: _with_bad(state[head], rest, bad)}


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=str)
def test_a_checkpoint_with_any_non_finite_tensor_is_refused(tmp_path, state, bad):
    paths = _floating(state)
    assert {p[0] for p in paths} == {"model", "ema", "method"} and ("method", "moments", 1) in paths
    for where in paths:
        broken = _with_bad(state, where, bad)
        name = ".".join(str(part) for part in where)
        path = tmp_path / "bad.pt"
        save_tensors(path, {"format": FORMAT, **broken})
        with pytest.raises(CheckpointError, match=f"{re.escape(name)} holds NaN or infinite"):
            load_checkpoint(path)
        with pytest.raises(CheckpointError, match="refusing to write"):
            save_checkpoint(tmp_path / "never.pt", broken)
        assert not (tmp_path / "never.pt").exists()
    save_checkpoint(tmp_path / "good.pt", state)  # a -inf score in `best` is not a weight
    assert load_checkpoint(tmp_path / "good.pt")["epoch"] == 1


# --- data: every degeneration x where it is caught ------------------------------------------

def _dataset(**change) -> ImageDataset:
    generator = torch.Generator().manual_seed(0)
    fields = dict(name="toy", images=torch.rand(40, 3, 4, 4, generator=generator),
                  labels=torch.arange(40) % 4, num_classes=4, mean=(0.5,) * 3, std=(0.3,) * 3,
                  train_size=30)
    fields.update(change)
    return ImageDataset(**fields)


def _with_pixel(value: float) -> torch.Tensor:
    images = _dataset().images.clone()
    images[3, 1, 2, 2] = value
    return images


def _constant(channel: int) -> torch.Tensor:
    images = _dataset().images.clone()
    images[:, channel] = 0.25
    return images


DEGENERATE = {
    "nan-pixel": (dict(images=_with_pixel(float("nan"))), "NaN or infinite"),
    "inf-pixel": (dict(images=_with_pixel(float("inf"))), "NaN or infinite"),
    "one-class": (dict(labels=torch.zeros(40, dtype=torch.long)), "1 class(es)"),
    "one-class-in-training": (dict(labels=torch.cat([torch.zeros(30, dtype=torch.long),
                                                     torch.arange(10) % 4])), "1 class(es)"),
    **{f"constant-channel-{c}": (dict(images=_constant(c)), f"channel {c} has the same value")
       for c in range(3)},
    "std-0": (dict(std=(0.3, 0.0, 0.3)), "std above 0"),
    "std-nan": (dict(std=(0.3, float("nan"), 0.3)), "finite values"),
    "mean-inf": (dict(mean=(0.5, 0.5, float("inf"))), "finite values"),
    "stats-per-channel": (dict(std=(0.3,)), "3 finite values"),
    "no-channel-axis": (dict(images=torch.rand(40, 4, 4)), "N x C x H x W"),
}


@pytest.mark.parametrize("change, phrase", DEGENERATE.values(), ids=DEGENERATE.keys())
def test_degenerate_data_is_refused_when_read(change, phrase):
    with pytest.raises(DatasetUnavailable, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        check_dataset(_dataset(**change))


def test_good_data_passes():
    check_dataset(_dataset())


@pytest.mark.parametrize("part", NON_EMPTY)
def test_an_empty_split_part_is_refused_when_read(tmp_path, part):
    parts = {p: np.arange(i * 10, i * 10 + 10) for i, p in enumerate(
        ("labelled", "unlabelled", "validation", "test"))}
    parts[part] = parts[part][:0]
    save_split(Split("digits", 1, **parts), tmp_path / "s.npz")
    with pytest.raises(ValueError, match=f"`{part}` part is empty"):
        load_split(tmp_path / "s.npz")


@pytest.mark.parametrize("labelled, val_fraction, val_max", [
    (100, 0.0, 2000), (100, 0.05, 2000), (100, 0.2, 5), (None, 0.0, 2000), (None, 0.2, 9)])
def test_an_empty_validation_set_is_refused_where_it_is_set(labelled, val_fraction, val_max):
    """(`labelled` None: the fully supervised split.) Every run chooses best.pt on it."""
    with pytest.raises(ValueError, match="0 validation images per class"):
        make_split("digits", np.arange(1000) % 10, num_classes=10, seed=1, test_fraction=0.2,
                   labelled=labelled, val_fraction=val_fraction, val_max=val_max)


def test_list_experiments_refuses_a_split_the_split_step_would(tmp_path, monkeypatch, capsys):
    """`wscat list-experiments` reads a params file as `snakemake -n` does (wscat.data.capacity):
    labelled = 5 for 10 classes is the split step's own one line, exit 2, not a listing."""
    monkeypatch.chdir(tmp_path)
    params = tiny_params()
    params["datasets"]["digits"]["labelled"] = 5
    write_params(tmp_path / "params.yaml", params)
    assert cli.main(["list-experiments"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert not captured.out and len(lines) == 1, captured.err
    assert "labelled = 5 is not a multiple of the 10 classes" in lines[0], lines[0]


# --- a diverging training: loss, then gradients ----------------------------------------------

@pytest.fixture
def split_work(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path / "params.yaml", tiny_params(epochs=3))
    assert cli.main(["split", "--dataset", "digits", "--seed", "1", "--out", "s.npz"]) == 0
    return tmp_path


def _poison(monkeypatch, what: str, epoch: int, step: int) -> None:
    """Make `what` (the loss, or the gradients alone) non-finite at one step (both 1-based)."""
    from wscat.training import trainer

    real, seen = trainer.train_step, {}

    def poisoned(method, step_model, model, optimizer, ema, batch, ctx, **kwargs):
        at = math.floor(ctx.progress) + 1
        seen[at] = seen.get(at, 0) + 1
        call = (method, step_model, model, optimizer, ema, batch, ctx)
        if (at, seen[at]) != (epoch, step):
            return real(*call, **kwargs)
        if what == "loss":
            loss_of = method.loss

            def nan_loss(*args, **kw):
                loss, stats = loss_of(*args, **kw)
                return loss * float("nan"), stats

            method.loss = nan_loss
            try:
                return real(*call, **kwargs)
            finally:
                del method.loss
        handle = next(model.parameters()).register_hook(lambda grad: grad * float("inf"))
        try:
            return real(*call, **kwargs)
        finally:
            handle.remove()

    monkeypatch.setattr(trainer, "train_step", poisoned)


TRAIN = ["train", "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1",
         "--split", "s.npz", "--out-dir", "run", "--threads", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("what", ["loss", "gradients"])
def test_a_diverging_step_stops_the_run_and_keeps_the_last_good_epoch(split_work, capsys,
                                                                      monkeypatch, what):
    _poison(monkeypatch, what, epoch=2, step=3)
    capsys.readouterr()
    assert cli.main(TRAIN) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert UNEXPECTED not in lines[-1] and "Traceback" not in "\n".join(lines)
    assert "diverged at epoch 2, step 3 of" in lines[-1], lines[-1]
    assert f"its {what} became NaN or infinite" in lines[-1]
    assert "resume/last.pt (epoch 1) is kept" in lines[-1]
    assert not (split_work / "run" / "best.pt").exists()  # never a NaN model
    kept = load_checkpoint(split_work / "run" / "resume" / "last.pt")  # finite, else refused
    assert kept["epoch"] == 0  # 0-based: the first epoch


@pytest.mark.slow
def test_divergence_in_the_first_epoch_writes_no_checkpoint(split_work, capsys, monkeypatch):
    _poison(monkeypatch, "loss", epoch=1, step=2)
    assert cli.main(TRAIN) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "epoch 1, step 2 of" in line and "no checkpoint was written" in line
    assert not list((split_work / "run").rglob("*.pt"))
    assert not (split_work / "run" / "dvclive").exists()  # no empty curves left behind
    assert not (split_work / "run").exists()  # nor the empty run folder it made


@pytest.mark.slow
def test_a_loss_not_finite_at_the_first_step_does_not_blame_the_learning_rate(
        split_work, capsys, monkeypatch):
    """Before any update the step size cannot be the cause: the line says so, and what to check
    (the loss on the initial weights), instead of "lower training.digits.lr"."""
    _poison(monkeypatch, "loss", epoch=1, step=1)
    assert cli.main(TRAIN) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "failed at its first step, before any update: its loss was NaN or infinite on the " \
           "initial weights, so the learning rate is not the cause" in line, line
    assert "check methods.standard's knobs and the data" in line and "lower" not in line
    assert not (split_work / "run").exists()


# --- Snakemake: a target no rule makes -------------------------------------------------------

class _Rule:
    def __init__(self, name: str, pattern: str):
        self.name, self.pattern = name, pattern

    def is_producer(self, target: str) -> bool:
        return target.startswith(self.pattern)


class _Workflow:
    rules = [_Rule("table", "results/tables/"), _Rule("demo", "never/"),
             _Rule("table_digits", "never/"), _Rule("paper_digits", "never/")]


@pytest.mark.parametrize("argv_tail, unknown", [
    (["--", "results/tables/digits.tex"], None), (["--", "demo"], None),
    (["--", "results/nope.txt"], "results/nope.txt"),
    (["--", "results/tables/x.tex", "results/nope.txt"], "results/nope.txt"),
    ([], None), (["table_digits"], None), (["--cores", "2", "paper_digits"], None),
    (["table_digitz"], "target rule table_digitz"),
    (["--cores", "2", "paper_digit", "--", "results/tables/x.tex"], "target rule paper_digit")])
def test_unknown_snakemake_target_is_one_line(tmp_path, monkeypatch, argv_tail, unknown):
    monkeypatch.chdir(tmp_path)
    line = unknown_target_line(_Workflow(), ["snakemake", "-n", *argv_tail])
    if unknown is None:
        assert line is None
    elif unknown.startswith("target rule"):
        assert line.startswith(f"wscat: no {unknown};") and "\n" not in line
    else:
        assert line.startswith(f"wscat: no rule makes {unknown};") and "\n" not in line


@pytest.mark.slow
def test_unknown_snakemake_target_in_a_dry_run(tmp_path, env):
    from tests.workflow.test_workflow import copy_workflow, real_params

    folder = copy_workflow(tmp_path / "wf", real_params())
    result = subprocess.run([str(cli_bin() / "snakemake"), "-n", "--", "results/nope.txt"],
                            cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert last.startswith("wscat: no rule makes results/nope.txt"), result.stderr
    assert "MissingRuleException" not in result.stderr


def cli_bin() -> Path:
    return Path(sys.executable).parent



def test_the_finiteness_flags_need_no_host_synchronisation(monkeypatch):
    """What the trainer adds to every step reads nothing back to the host (a CPU stand-in for
    benchmarks/gpu_check.py's sync check): the flags stay on the device until the epoch ends."""
    from wscat.training.trainer import step_is_finite

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.ones(4, 3)).pow(2).mean()
    loss.backward()

    def synchronises(*args, **kwargs):
        raise AssertionError("a host synchronisation inside a training step")

    with monkeypatch.context() as patch:
        for name in ("item", "__bool__", "__float__", "__int__", "tolist", "numpy"):
            patch.setattr(torch.Tensor, name, synchronises)
        flags = step_is_finite(loss.detach(), optimizer)
    assert flags.tolist() == [True, True]
    next(model.parameters()).grad[0, 0] = float("nan")
    assert step_is_finite(loss.detach(), optimizer).tolist() == [True, False]
    assert step_is_finite(loss.detach() * float("inf"), optimizer).tolist() == [False, False]


def test_your_own_methods_loss_not_finite_at_the_first_step_names_its_loss() -> None:
    from types import SimpleNamespace

    from wscat.training import trainer

    run = SimpleNamespace(method="mart", seed=1, dataset="digits", training={"lr": 0.1},
                          method_params={"objective": "examples/mart.py:Mart"})
    flags = torch.tensor([[False, True], [True, True]])
    with pytest.raises(trainer.TrainingDiverged, match=r"check your method's loss "
                       r"\(examples/mart\.py:Mart\) on one batch$"):
        trainer._check_finite(flags, run, epoch=0)
    with pytest.raises(trainer.TrainingDiverged, match=r"lower training\.digits\.lr \(now 0\.1\)"):
        trainer._check_finite(flags, run, epoch=1)  # later: updates were made
