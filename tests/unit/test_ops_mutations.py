"""Mutation tests for the operations modules (`ops`): wscat/device.py, rebuild.py, provenance.py,
memory.py, progress.py, interrupted.py, errors.py, strict_yaml.py, schema_messages.py and paths.py.
Each test kills hand-made mutants that went through the unit tests importing them, with
expectations from the modules' docstrings, docs/api.md ("The device", "Errors"), docs/pipeline.md
(the results layout), docs/paper-tables.md, glibc's malloc.h and YAML 1.1, never from the function
under test. CUDA is stood in for by torch.cuda's own answers (is_available, device_count,
get_device_name), glibc by a recording mallopt, Snakemake's workflow by rules that say what they
make.

What is checked, and from which fact:
- device: `auto` (and None) is CUDA where torch finds it and the CPU where not; cuda and cuda:N
  are taken up to the last device, and one past it is refused naming how many there are (cuda:0
  to cuda:1 of 2); mps, meta and a number are "not a device wscat runs on"; a refusal names where
  the name came from (--device, or $WSCAT_DEVICE with "set WSCAT_DEVICE=cpu (or unset it)"); the
  default is $WSCAT_DEVICE marked as such (an empty one refused, not taken for auto), else auto;
  threads=1 is set too; 10,000,000 parameters is paper-size ("10M parameters or more"),
  9,999,999 not; the parameter count leaves out buffers (batch-norm statistics); an automatic
  CUDA choice's log line says so.
- rebuild: the token is the table's (a longer list of inputs keeps it); the line names the first
  missing input; without Snakemake's record the token stays the one the table was built with,
  and the line comes once per process.
- provenance: versions names Python, wscat, torch, torchvision, pyautoattack, numpy,
  scikit-learn (each its own version; "absent" when not installed) and the git revision; the
  machine is /proc/cpuinfo's "model name" and torch's threads ("1 thread", "2 threads"), or the
  GPU's name.
- memory: mallopt's M_MMAP_THRESHOLD (-3) is raised to 32 MiB and M_TRIM_THRESHOLD (-1) to at
  least that, once per process; a refused setting, no libc or no mallopt is False.
- progress: minutes rounded (100 s: about 2 min), "under a minute", hours from 60 min with two
  digits of minutes ("2 h 05 min"); the pace is the mean of the parts after the first (which
  holds the warm-up) once there are others;
  nothing left or nothing timed says no time; "4/10 epochs, about 1 min left".
- interrupted: each kind of file made from a run (metrics, extras, validation, curves PDF, a
  labeler's pseudo-labels) makes it named, with the first of them and "(and N more)"; a run with
  best.pt or nothing made from it is not; runs in folder order; the targets as given.
- errors: WSCAT_DEBUG off for "", "0", "false", "no" (spaces around too); a first line is the first
  with text; what np.load raises on an empty, truncated, text or folder .npz or a missing key is
  anticipated (NPZ_ERRORS); a folder or a FIFO is no file; each npz problem and OSError (errno by
  errno, the caller's path first) in one line; an OutputError and a bare FileNotFoundError in their
  own words; exit 143 after SIGTERM, 130 after Ctrl-C, 2 for anticipated failures (EOFError and
  BadZipFile included), 1 for unexpected ones; a Snakemake target no rule makes (after `--`, or a
  table_/robustness_/paper_ name before it that no rule has) is one line and exit 1, while a rule's name, an
  existing file or a file option such as `--configfile table_mine.yaml` passes.
- strict_yaml: a duplicate names its dotted path, both lines, and values of up to 40
  characters; keys YAML reads as one value (1 and 0x1) are one key, and so are two keys whose
  value is the same alias; a duplicate in an anchored mapping is named where it is written, not
  where an alias repeats it; a mapping that holds itself loads, and an unhashable key is
  SafeLoader's own error.
- schema_messages: number hints for 1.e5 (1.0e+5) and 09 (not octal: 9.0, or 9 for an integer);
  what to write for a number read as text, with the integer or number the field wants (also
  through anyOf) and "without quotes" only where the text is the number; empty values, enums,
  consts, bounds (>, >=, <, <=, joined by "and"), booleans ("true or false"), titled patterns and
  local $refs (their own keys first) in words; a description added when one line of up to 100
  characters; a pattern's fix offered only when it fits the pattern; unevaluated properties
  called additional ones.
- paths: a run's split, model folder, checkpoints, train log, DVCLive folder, metrics and extras
  (in that order), validation, curves and pseudo-labels where docs/pipeline.md puts them, moved
  whole under another root (paths outside results/ stay); an experiment's tables and summary, a
  tier's -vs-paper companion, index and analysis files, a job's log and benchmark; a field read
  back between a prefix and a suffix (seed12-extra); only a checkpoint in a run's resume/ is
  unfinished.
"""
from __future__ import annotations

import errno
import os
import platform
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import sklearn
import torch
import yaml
from torch import nn

import wscat
from wscat import device as device_module, errors, interrupted, memory, paths, provenance, rebuild
from wscat.device import (FromEnvironment, check_training_device, device_line, parameter_count,
                          pick_device)
from wscat.errors import (OutputError, Terminated, debug_requested, describe, exit_code,
                          first_line, npz_problem, os_error_line, require_file,
                          stop_on_unknown_target, unknown_target_line)
from wscat.progress import left_at_pace, progress, time_left
from wscat.rebuild import rebuild_token
from wscat.schema_messages import number_hint, schema_message
from wscat.strict_yaml import DuplicateKeyError, StrictLoader


# --- rebuild ------------------------------------------------------------------------------------

@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str], Path]:
    """A built table (one output) with three metrics files, in a fresh Snakemake process."""
    monkeypatch.setattr(rebuild, "_bumped", {})
    out = tmp_path / "table.tex"
    out.write_text("table")
    inputs = [tmp_path / f"seed{s}.json" for s in (1, 2, 3)]
    for path in inputs:
        path.write_text("{}")
    return [str(out)], [str(p) for p in inputs], tmp_path / "state"


def test_the_token_belongs_to_the_table_not_to_its_list_of_inputs(
        table: tuple[list[str], list[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The token lives under the table's name: one more seed in the experiment (another input
    list) keeps the token, so the table's params do not change and nothing re-runs twice."""
    outputs, inputs, state = table
    Path(inputs[0]).unlink()
    assert rebuild_token(outputs, inputs[:2], state) == "rebuild 1"
    Path(inputs[0]).write_text("{}")  # rebuilt
    monkeypatch.setattr(rebuild, "_bumped", {})  # the next Snakemake process
    assert rebuild_token(outputs, inputs, state) == "rebuild 1"


def test_a_dry_run_shows_the_re_run_but_records_nothing(
        table: tuple[list[str], list[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`snakemake -n` with an input missing: the new token (the table would re-run), no state
    written; the input put back before the real run, nothing re-runs; left missing, the real
    run takes the same token the dry run showed."""
    outputs, inputs, state = table
    Path(inputs[0]).unlink()
    assert rebuild_token(outputs, inputs, state, write=False) == "rebuild 1"
    assert not state.exists()
    monkeypatch.setattr(rebuild, "_bumped", {})
    assert rebuild_token(outputs, inputs, state) == "rebuild 1"  # the real run, still missing
    assert (state / os.listdir(state)[0]).read_text() == "1\n"
    Path(inputs[0]).write_text("{}")
    monkeypatch.setattr(rebuild, "_bumped", {})
    assert rebuild_token(outputs, inputs, state, write=False) == "rebuild 1"


def test_the_line_names_the_first_missing_input(table: tuple[list[str], list[str], Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    outputs, inputs, state = table
    Path(inputs[0]).unlink()
    Path(inputs[2]).unlink()
    rebuild_token(outputs, inputs, state)
    err = capsys.readouterr().err
    assert err.startswith(f"wscat: {inputs[0]} and 1 more of its inputs are missing"), err


def test_without_a_record_the_last_token_is_kept_and_said_once(
        table: tuple[list[str], list[str], Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A table rebuilt once ("rebuild 1" recorded), then restored by `dvc checkout` with an
    input missing: Snakemake compares no params, so the token stays the one the table was built
    with (not a new one, not none), and the process says so once however often it asks."""
    outputs, inputs, state = table
    Path(inputs[1]).unlink()
    assert rebuild_token(outputs, inputs, state) == "rebuild 1"
    monkeypatch.setattr(rebuild, "_bumped", {})
    capsys.readouterr()
    no_record = lambda path: False  # noqa: E731
    assert rebuild_token(outputs, inputs, state, recorded=no_record) == "rebuild 1"
    assert rebuild_token(outputs, inputs, state, recorded=no_record) == "rebuild 1"
    assert capsys.readouterr().err.count("\n") == 1
    assert (state / os.listdir(state)[0]).read_text() == "1\n"


# --- provenance ---------------------------------------------------------------------------------

def test_versions_name_each_package_by_its_own_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest's versions: Python, wscat, the five packages (each its own version, as the
    package itself says it), and the git revision."""
    import torchvision  # here, not at the top: its import (torch._dynamo's) costs every
    # worker's collection ~1.3 s

    monkeypatch.setattr(provenance, "git_revision", lambda: "abc1234+modified")
    found = provenance.versions()
    local = lambda version: version.split("+")[0]  # noqa: E731  (a build tag may be left off)
    assert set(found) == {"python", "wscat", "torch", "torchvision", "pyautoattack", "numpy",
                          "scikit-learn", "git"}
    assert (found["python"], found["wscat"], found["git"]) == (
        platform.python_version(), wscat.__version__, "abc1234+modified")
    assert local(found["torch"]) == local(torch.__version__)
    assert local(found["torchvision"]) == local(torchvision.__version__)
    assert (found["numpy"], found["scikit-learn"]) == (np.__version__, sklearn.__version__)
    assert found["pyautoattack"] == metadata.distribution("pyautoattack").version


def test_a_package_that_is_not_installed_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata.version

    def version(name: str) -> str:
        if name == "pyautoattack":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(provenance.metadata, "version", version)
    monkeypatch.setattr(provenance, "git_revision", lambda: "abc1234")
    found = provenance.versions()
    assert found["pyautoattack"] == "absent" and found["numpy"] == np.__version__


def _cpu_model() -> str:
    """The CPU's model as /proc/cpuinfo's "model name" line says it (read here by hand)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


@pytest.mark.parametrize("threads, said", [(1, "1 thread"), (2, "2 threads")])
def test_the_machine_is_the_cpu_model_and_its_threads(threads: int, said: str) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert provenance.machine(torch.device("cpu")) == f"{_cpu_model()} ({said})"
    finally:
        torch.set_num_threads(before)


def test_a_gpu_machine_is_the_gpus_name(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "get_device_name",
                        lambda device: asked.append(device) or "NVIDIA H200")
    assert provenance.machine(torch.device("cuda:1")) == "NVIDIA H200"
    assert asked == [torch.device("cuda:1")]


# --- device -------------------------------------------------------------------------------------

@pytest.fixture
def cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with two CUDA devices, as torch.cuda reports them (torch.device("cuda:1") needs
    no GPU to be made)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.parametrize("name", ["auto", None])
def test_auto_is_cuda_where_there_is_one(name: str | None, cuda: None) -> None:
    assert pick_device(name) == torch.device("cuda")


@pytest.mark.parametrize("name", ["auto", None])
def test_auto_is_the_cpu_where_there_is_no_cuda(name: str | None, no_cuda: None) -> None:
    assert pick_device(name) == torch.device("cpu")


@pytest.mark.parametrize("threads", [0, -2])
def test_threads_below_one_are_refused_not_ignored(threads: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """torch keeps its own thread count where 0 is passed through as "not given": refused."""
    set_to: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    with pytest.raises(ValueError) as error:
        pick_device("cpu", threads)
    assert str(error.value) == f"threads {threads}: give a whole number of at least 1"
    assert set_to == []
    assert pick_device("cpu", 3) == torch.device("cpu") and set_to == [3]


def test_a_cuda_device_this_machine_has_is_taken(cuda: None) -> None:
    assert pick_device("cuda") == torch.device("cuda")
    assert pick_device("cuda:1") == torch.device("cuda", 1)


def test_a_cuda_index_past_the_last_device_is_refused_in_one_line(cuda: None) -> None:
    """Two devices are cuda:0 and cuda:1: cuda:2 is the first one refused."""
    with pytest.raises(ValueError) as error:
        pick_device("cuda:2")
    assert str(error.value) == ("--device cuda:2: this machine has 2 CUDA device(s), cuda:0 to "
                                "cuda:1")


@pytest.mark.parametrize("name", ["mps", "meta", 1.5])
def test_a_device_wscat_does_not_run_on_is_refused(name: object) -> None:
    """cpu, cuda, cuda:N or auto: Apple's mps, torch's meta device and a number are none."""
    with pytest.raises(ValueError, match=r"not a device wscat runs on; give cpu, cuda, cuda:N "
                                         r"or auto$"):
        pick_device(name)  # type: ignore[arg-type]


def test_a_refusal_names_where_the_device_came_from(no_cuda: None) -> None:
    with pytest.raises(ValueError) as given:
        pick_device("cuda")
    assert str(given.value) == "--device cuda: no CUDA device here; use --device cpu"
    with pytest.raises(ValueError) as inherited:
        pick_device(FromEnvironment("cuda"))
    assert str(inherited.value) == ("WSCAT_DEVICE=cuda: no CUDA device here; set WSCAT_DEVICE=cpu "
                                    "(or unset it)")
    with pytest.raises(ValueError) as argument:  # the API's: it has no --device flag
        pick_device("cuda", flag="device=")
    assert str(argument.value) == "device='cuda': no CUDA device here; pass device='cpu'"


def test_the_api_names_its_device_argument_not_the_flag(no_cuda: None) -> None:
    """api.load_model(..., device="gpu") said "--device gpu", a flag the API does not have."""
    from wscat import api
    from wscat.models import build_model

    model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,),
                        width=4).eval()
    with pytest.raises(ValueError) as caught:
        api.predict(model, torch.rand(2, 1, 8, 8), device="gpu")
    assert str(caught.value) == ("device='gpu': not a device wscat runs on; give cpu, cuda, "
                                 "cuda:N or auto")


def test_the_default_device_is_the_environments_marked_as_such_else_auto(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WSCAT_DEVICE", raising=False)
    assert device_module.device_default() == "auto"
    monkeypatch.setenv("WSCAT_DEVICE", "cuda:1")
    default = device_module.device_default()
    assert isinstance(default, FromEnvironment) and default == "cuda:1"
    for empty in ("", " "):  # `export WSCAT_DEVICE=` is unset, as ${WSCAT_DEVICE:-auto} has it
        monkeypatch.setenv("WSCAT_DEVICE", empty)
        default = device_module.device_default()
        assert default == "auto" and not isinstance(default, FromEnvironment)


def test_threads_are_set_for_torch_one_included() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert pick_device("cpu", threads=1) == torch.device("cpu")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_ten_million_parameters_is_paper_size() -> None:
    """docs/api.md: "a paper-size model, one of 10M parameters or more"."""
    with pytest.raises(ValueError, match=r"10\.0M parameters \(paper-size: >= 10M\)"):
        check_training_device(torch.device("cpu"), model="big", parameters=10_000_000,
                              cpu_named=False)
    check_training_device(torch.device("cpu"), model="big", parameters=9_999_999, cpu_named=False)


def test_the_parameter_count_leaves_out_buffers() -> None:
    """Linear(3, 2): 6 weights + 2 biases; BatchNorm1d(2): 2 weights + 2 biases (its running
    mean, variance and batch count are buffers)."""
    assert parameter_count(nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))) == 12


def test_the_device_line_of_an_automatic_cuda_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance, "machine", lambda device: "NVIDIA H200")
    assert device_line(torch.device("cuda", 0), automatic=True) == (
        "device: cuda:0, NVIDIA H200 (--device auto: a CUDA device)")
    assert device_line(torch.device("cuda", 0)) == "device: cuda:0, NVIDIA H200"


# --- memory -------------------------------------------------------------------------------------

# glibc's malloc.h: M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3; its largest mmap threshold on a
# 64-bit system is 4 MiB * sizeof(long) = 32 MiB.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, MIB = -1, -3, 1024 * 1024


class FakeLibc:
    """libc whose mallopt records each (parameter, value) and answers from `answers`."""

    def __init__(self, answers: dict[int, int] | None = None) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answers = answers or {}

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.answers.get(parameter, 1)


def _libc(monkeypatch: pytest.MonkeyPatch, libc: Any) -> None:
    monkeypatch.setattr(memory, "_done", False)

    def cdll(name: str) -> Any:
        if isinstance(libc, BaseException):
            raise libc
        return libc

    monkeypatch.setattr(memory.ctypes, "CDLL", cdll)


def test_freed_blocks_up_to_32_mib_are_kept_and_the_heap_top_not_trimmed_below_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    _libc(monkeypatch, libc)
    assert memory.keep_freed_memory() is True
    settings = dict(libc.calls)
    assert set(settings) == {M_MMAP_THRESHOLD, M_TRIM_THRESHOLD}
    assert settings[M_MMAP_THRESHOLD] == 32 * MIB
    assert settings[M_TRIM_THRESHOLD] >= settings[M_MMAP_THRESHOLD]
    assert memory.keep_freed_memory() is True and len(libc.calls) == 2  # once per process


@pytest.mark.parametrize("refused", [M_MMAP_THRESHOLD, M_TRIM_THRESHOLD])
def test_a_setting_glibc_refuses_is_not_taken(monkeypatch: pytest.MonkeyPatch,
                                              refused: int) -> None:
    _libc(monkeypatch, FakeLibc({refused: 0}))
    assert memory.keep_freed_memory() is False


@pytest.mark.parametrize("libc", [OSError("no libc"), object()])
def test_a_process_without_glibcs_mallopt_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch,
                                                          libc: Any) -> None:
    _libc(monkeypatch, libc)
    assert memory.keep_freed_memory() is False


# --- progress -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, said", [
    (29, "under a minute left"), (30, "about 1 min left"), (60, "about 1 min left"),
    (89, "about 1 min left"), (90, "about 2 min left"), (100, "about 2 min left"),
    (150, "about 3 min left"),
    (59 * 60, "about 59 min left"), (3600, "about 1 h 00 min left"),
    (125 * 60, "about 2 h 05 min left"), (12 * 3600 + 30 * 60, "about 12 h 30 min left")])
def test_time_left_in_minutes_and_hours(seconds: float, said: str) -> None:
    """Rounded to the minute, a half minute up (100 s is 1.67 min: about 2; 150 s about 3), hours
    from 60 minutes on, the minutes of an hour in two digits."""
    assert time_left(seconds) == said


def test_the_pace_leaves_out_the_first_part_once_there_are_others() -> None:
    """Parts of 100 s (warm-up), 10 s and 50 s: a pace of 30 s; 4 parts to go are 120 s."""
    assert left_at_pace(3, 7, [100.0, 10.0, 50.0]) == ", about 2 min left"
    assert left_at_pace(1, 3, [90.0]) == ", about 3 min left"  # one part timed: its own pace


def test_nothing_left_or_nothing_timed_says_no_time() -> None:
    assert left_at_pace(5, 5, [10.0]) == "" and left_at_pace(2, 5, []) == ""


def test_progress_is_done_of_total_and_the_time_left() -> None:
    """docs example: 4 of 10 epochs done at 10 s each: 6 to go, 60 s."""
    assert progress(4, 10, "epochs", [10.0, 10.0]) == "4/10 epochs, about 1 min left"
    assert progress(10, 10, "epochs", [10.0]) == "10/10 epochs"


# --- interrupted --------------------------------------------------------------------------------

def _touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")


def test_each_interrupted_training_is_named_with_the_first_file_made_from_it(
        tmp_path: Path) -> None:
    """Every kind of file made from a run's checkpoints stands in for it (metrics, extras,
    validation, the curves' PDF, a labeler's pseudo-labels); a run with best.pt or with nothing
    made from it is not named; runs in the order of their folders; the targets as given."""
    models = "results/models/digits/cnn"
    for run in ("dmat/seed2", "mt/seed1", "standard/seed1", "trades/seed1", "wscat/seed12",
                "mart/seed1"):
        _touch(tmp_path, f"{models}/{run}/resume/last.pt")
    _touch(tmp_path, "results/metrics/digits/cnn/dmat/seed2-extra.json",
           "results/curves/digits/cnn/dmat/seed2.pdf",
           "results/pseudo/digits/cnn/mt/seed1.npz",
           f"{models}/trades/seed1/best.pt", "results/metrics/digits/cnn/trades/seed1.json",
           "results/validation/digits/cnn/wscat/seed12.json",
           "results/curves/digits/cnn/wscat/seed12.pdf",
           "results/curves/digits/cnn/mart/seed1.pdf")
    lines = interrupted.warnings(tmp_path, ["results/tables/a.tex", "results/tables/b.tex"])
    expected = [("dmat/seed2", "results/metrics/digits/cnn/dmat/seed2-extra.json (and 1 more)"),
                ("mart/seed1", "results/curves/digits/cnn/mart/seed1.pdf"),
                ("mt/seed1", "results/pseudo/digits/cnn/mt/seed1.npz"),
                ("wscat/seed12", "results/validation/digits/cnn/wscat/seed12.json (and 1 more)")]
    assert len(lines) == len(expected), lines
    for line, (run, made) in zip(lines, expected):
        assert line.startswith(f"warning: {models}/{run} holds an interrupted training "), line
        assert f" while {made}, made from its previous training" in line, line
        assert line.endswith(f"snakemake --forcerun {models}/{run}/best.pt -- "
                             "results/tables/a.tex results/tables/b.tex"), line
    assert interrupted.warnings(tmp_path)[0].endswith(" -- <your target>")


# --- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, wanted", [
    ("", False), ("0", False), ("false", False), ("no", False), (" 0 ", False), ("  ", False),
    ("1", True), ("yes", True)])
def test_debug_is_asked_for_by_a_value_that_is_not_off(monkeypatch: pytest.MonkeyPatch,
                                                       value: str, wanted: bool) -> None:
    monkeypatch.setenv("WSCAT_DEBUG", value)
    assert debug_requested() is wanted
    assert debug_requested(True) is True


def test_the_first_line_is_the_first_one_with_text() -> None:
    assert first_line(ValueError("\n   \n  the line  \nmore")) == "the line"
    assert first_line(ValueError("")) == "ValueError"


def test_npz_problems_each_in_one_line(tmp_path: Path) -> None:
    pickled = ValueError("Object arrays cannot be loaded when allow_pickle=False")
    npy, archive, text = tmp_path / "a.npy", tmp_path / "a.npz", tmp_path / "a.txt"
    np.save(npy, np.zeros(2))
    with zipfile.ZipFile(archive, "w") as file:
        file.writestr("x.npy", b"")
    text.write_text("x")
    said = npz_problem(KeyError("x"), npy)
    assert said.startswith("it is ") and said.endswith(", not an .npz archive of named arrays")
    assert "dtype=object" in npz_problem(pickled, archive)
    assert npz_problem(pickled, text) == npz_problem(pickled) == (
        "it is not an .npz file (not a zip archive of arrays)")
    assert npz_problem(IsADirectoryError(errno.EISDIR, "Is a directory")) == (
        "it is a folder, not a file")
    assert npz_problem(ValueError("cannot\n   reshape  array")) == (
        "ValueError: cannot reshape array")


def test_what_np_load_raises_on_a_bad_npz_is_anticipated(tmp_path: Path) -> None:
    """An empty file, a truncated archive, text, a folder and a missing key."""
    np.savez(tmp_path / "good.npz", labels=np.zeros(3))
    whole = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "cut.npz").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "text.npz").write_text("hello")
    raised = []
    for load in (lambda: np.load(tmp_path / "empty.npz"), lambda: np.load(tmp_path / "cut.npz"),
                 lambda: np.load(tmp_path / "text.npz"), lambda: np.load(tmp_path),
                 lambda: np.load(tmp_path / "good.npz")["split"]):
        with pytest.raises(errors.NPZ_ERRORS) as error:
            load()
        raised.append(type(error.value))
    assert len(set(raised)) == 5  # five kinds of failure, each anticipated


def test_require_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a folder, not a file; pass the file itself"):
        require_file(tmp_path, "missing")
    with pytest.raises(FileNotFoundError) as error:
        require_file(tmp_path / "nothing.npz", "no split at nothing.npz")
    assert str(error.value) == "no split at nothing.npz"
    os.mkfifo(tmp_path / "pipe.npz")  # there, but no file: np.load would wait on it for ever
    with pytest.raises(ValueError, match="pipe.npz is not a regular file .a pipe or a device.; "
                       "pass the file itself$"):  # not "missing": it is there
        require_file(tmp_path / "pipe.npz", "no split at pipe.npz")


@pytest.mark.parametrize("code, said", [
    (errno.EACCES, "permission denied on /out/x"), (errno.EPERM, "permission denied on /out/x"),
    (errno.EROFS, "/out/x is on a read-only file system"),
    (errno.ENOSPC, "no space left on the device of /out/x"),
    (errno.EDQUOT, "no space left on the device of /out/x"),
    (errno.EISDIR, "/out/x is a folder, not a file"),
    (errno.ENOTDIR, "a part of /out/x is a file, not a folder"),
    (errno.ENOENT, "No such file or directory: /out/x"),
    (errno.ENAMETOOLONG, "File name too long: /out/x")])
def test_each_os_error_is_one_line_saying_where(code: int, said: str) -> None:
    line = os_error_line(OSError(code, os.strerror(code), "/out/x"))
    assert line.startswith(said) and "\n" not in line, line
    assert os_error_line(OSError(code, os.strerror(code), "/elsewhere"), "/out/x") == line


def test_a_full_disk_promises_no_resume_a_step_may_not_have(tmp_path: Path) -> None:
    """os_error_line does not know the step: `wscat split` resumes nothing, so the line says
    only to free space and rerun."""
    assert os_error_line(OSError(errno.ENOSPC, "No space left on device", "/out/x")) == (
        "no space left on the device of /out/x; free some space and rerun")


def test_a_permission_refused_on_an_input_says_readable_on_an_output_writable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file this user cannot read is an input: make it readable; a file or folder it cannot
    write (os.access stood in for: the tests may run as root, who may do anything)."""
    given = tmp_path / "params.yaml"
    given.write_text("a: 1\n")

    def refused(error_path: Path) -> str:
        return os_error_line(PermissionError(errno.EACCES, "Permission denied", str(error_path)))

    monkeypatch.setattr(errors.os, "access", lambda path, mode: not mode & os.R_OK)
    assert refused(given) == f"permission denied on {given}; make it readable for this user"
    monkeypatch.setattr(errors.os, "access", lambda path, mode: not mode & os.W_OK)
    for where in (given, tmp_path):
        assert refused(where) == (f"permission denied on {where}; make it writable for this "
                                  "user, or choose another location")


def test_an_output_error_and_a_bare_file_not_found_are_their_own_words() -> None:
    assert os_error_line(OutputError(errno.EACCES, "results/ is not yours; choose --out")) == (
        "results/ is not yours; choose --out")
    assert os_error_line(FileNotFoundError("no split at s.npz\n(run split first)")) == (
        "no split at s.npz")


@pytest.mark.parametrize("error, start, code", [
    (Terminated(), "terminated (SIGTERM", 143), (KeyboardInterrupt(), "interrupted;", 130),
    (EOFError("Ran out of input"), "Ran out of input", 2),
    (zipfile.BadZipFile("File is not a zip file"), "File is not a zip file", 2),
    (ValueError("bad\nvalue"), "bad", 2), (OSError(errno.EROFS, "Read-only", "/r"), "/r is", 2)])
def test_an_anticipated_failure_is_one_line_and_its_exit_status(
        error: BaseException, start: str, code: int) -> None:
    """docs/api.md: exit 2; 130 after Ctrl-C (128 + SIGINT's 2), 143 after SIGTERM (128 + 15)."""
    assert describe(error).startswith(start) and exit_code(error) == code


def test_an_unexpected_error_has_no_line_and_exit_1() -> None:
    assert describe(RuntimeError("bug")) is None and exit_code(RuntimeError("bug")) == 1


def test_a_gpu_out_of_memory_is_one_line_with_what_to_change_not_a_bug() -> None:
    """torch's CUDA message runs on (every process's use, the allocator's settings); it was
    called "unexpected OutOfMemoryError ... (a bug: ... report it)"."""
    import torch

    error = torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.80 "
        "GiB of which 1.06 GiB is free. Process 8 has 138.7 GiB memory in use. Of the allocated "
        "memory 130.1 GiB is allocated by PyTorch\nmore")
    line = describe(error)
    assert line.startswith("out of GPU memory (CUDA out of memory. Tried to allocate 2.00 GiB): "
                           "run fewer jobs on the GPU at once (Snakemake: --resources gpu=1")
    assert "training.DATASET.batch_size" in line and "Process 8" not in line
    assert "\n" not in line and exit_code(error) == 2
    assert describe(torch.OutOfMemoryError("odd")).startswith("out of GPU memory (odd): ")
    assert describe(RuntimeError("CUDA out of memory")) is None  # by its type, not its words


class Rule:
    def __init__(self, name: str, makes: str) -> None:
        self.name, self.makes = name, makes

    def is_producer(self, target: str) -> bool:
        return target == self.makes


class Workflow:
    rules = [Rule("table_digits", "results/tables/digits.tex"), Rule("all", "")]


@pytest.mark.parametrize("argv", [
    ["snakemake", "-n", "--", "results/tables/digits.tex"],
    ["snakemake", "table_digits"], ["snakemake", "--configfile", "table_mine.yaml", "-n"],
    ["snakemake", "--", "table_digits", "all"]])
def test_a_target_some_rule_makes_passes(argv: list[str]) -> None:
    assert unknown_target_line(Workflow(), argv) is None


def test_a_target_that_exists_passes(tmp_path: Path) -> None:
    (tmp_path / "mine.tex").write_text("")
    assert unknown_target_line(Workflow(), ["snakemake", "--", str(tmp_path / "mine.tex")]) is None


@pytest.mark.parametrize("argv, start", [
    (["snakemake", "table_nope"], "wscat: no target rule table_nope; "),
    (["snakemake", "--cores", "1", "paper_x"], "wscat: no target rule paper_x; "),
    (["snakemake", "table_nope", "--", "results/tables/digits.tex"],
     "wscat: no target rule table_nope; "),
    (["snakemake", "--", "results/tables/digits.tex", "results/tables/nope.tex"],
     "wscat: no rule makes results/tables/nope.tex; ")])
def test_a_target_no_rule_makes_is_one_line(argv: list[str], start: str) -> None:
    assert unknown_target_line(Workflow(), argv).startswith(start)


def test_an_unknown_target_stops_snakemake_with_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["snakemake", "--", "results/tables/nope.tex"])
    with pytest.raises(SystemExit) as stop:
        stop_on_unknown_target(Workflow())
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    monkeypatch.setattr("sys.argv", ["snakemake", "--", "results/tables/digits.tex"])
    stop_on_unknown_target(Workflow())


# --- strict_yaml --------------------------------------------------------------------------------

def _duplicate(text: str) -> str:
    with pytest.raises(DuplicateKeyError) as error:
        yaml.load(text, Loader=StrictLoader)
    return str(error.value)


def test_a_duplicate_names_its_path_both_lines_and_short_values_only() -> None:
    """A scalar value of up to 40 characters is shown beside its line; a longer one, or a
    mapping, is not."""
    forty, longer = "x" * 40, "y" * 41
    assert _duplicate(f"top:\n  k: {forty}\n  k: {longer}\n").startswith(
        f"duplicate key top.k: given on line 2 ({forty}) and on line 3; keep one")
    assert _duplicate("a:\n  x: 1\nb: 2\na:\n  y: 2\n").startswith(
        "duplicate key a: given on line 1 and on line 4; keep one")


def test_keys_that_read_as_the_same_value_are_one_key() -> None:
    """YAML 1.1 reads 1 and 0x1 as the integer 1: the last would win silently."""
    assert _duplicate("1: a\n0x1: b\n").startswith("duplicate key 1: given on line 1 (a) and on "
                                                   "line 2 (b)")


def test_a_key_given_twice_with_one_aliased_value_is_still_twice() -> None:
    assert _duplicate("v: &v 1\nrun: {a: *v, a: *v}\n").startswith("duplicate key run.a: ")


def test_a_duplicate_in_an_anchored_mapping_is_named_where_it_is_written() -> None:
    """The mapping is written under `base`; `run: *b` only names it again."""
    assert _duplicate("base: &b {x: 1, x: 2}\nrun: *b\n").startswith("duplicate key base.x: ")


def test_a_recursive_alias_and_an_unhashable_key_are_yamls_own_business() -> None:
    """SafeLoader reads a mapping that holds itself; a list as a key is its own error."""
    loaded = yaml.load("a: &x {b: *x}\n", Loader=StrictLoader)
    assert loaded["a"]["b"] is loaded["a"]
    with pytest.raises(yaml.constructor.ConstructorError, match="found unhashable key"):
        yaml.load("? [a, b]\n: 1\n", Loader=StrictLoader)


# --- schema_messages ----------------------------------------------------------------------------

def _message(schema: dict[str, Any], instance: Any) -> str:
    """schema_message of the one error `instance` has against `schema` (its own root)."""
    found = list(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    assert len(found) == 1, found
    return schema_message(found[0], schema)


@pytest.mark.parametrize("text, integer, written", [
    ("1.e5", False, "1.0e+5"),  # YAML 1.1: a signed exponent, and a digit after the dot
    ("09", False, "9.0"),  # not octal (digits 0-7), so text in YAML 1.1; nine
    ("09", True, "9")])
def test_number_hints_by_hand(text: str, integer: bool, written: str) -> None:
    assert yaml.safe_load(text) == text  # the trap: read as text
    assert number_hint(text, integer) == written
    assert yaml.safe_load(written) == float(text)


@pytest.mark.parametrize("schema, instance, said", [
    ({"type": "number"}, "1e-4",
     "'1e-4' is read as text by YAML: write 1.0e-4 (YAML 1.1 needs a dot and a signed exponent)"),
    ({"type": "integer"}, "1e3", "'1e3' is read as text by YAML: write 1000"),
    ({"type": "integer"}, "5.0", "'5.0' is read as text by YAML: write 5 without quotes"),
    ({"type": "number"}, " 0.5", "' 0.5' is read as text by YAML: write 0.5 without quotes"),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "1e2",
     "'1e2' is read as text by YAML: write 100"),
    ({"type": ["integer", "number"]}, "1e2",
     "'1e2' is read as text by YAML: write 1.0e+2 (YAML 1.1 needs a dot and a signed exponent)"),
])
def test_a_number_yaml_reads_as_text_says_what_to_write(schema: dict[str, Any], instance: str,
                                                        said: str) -> None:
    assert _message(schema, instance) == said


@pytest.mark.parametrize("schema, instance, said", [
    ({"enum": ["a", "b"]}, None, "null (an empty value) is not one of 'a', 'b': give one"),
    ({"const": "all"}, None, "null (an empty value) is not 'all': give one"),
    ({"oneOf": [{"const": None}, {"type": "integer", "exclusiveMinimum": 0}]}, -1,
     "-1 is not valid: give null or an integer > 0"),
    ({"oneOf": [{"const": "auto"}, {"type": "number", "minimum": 0, "maximum": 1}]}, 2,
     "2 is not valid: give 'auto' or a number >= 0 and <= 1"),
    ({"oneOf": [{"type": "boolean"}, {"type": "integer", "exclusiveMaximum": 3}]}, None,
     "null (an empty value) is not valid: give true or false or an integer < 3"),
    ({"oneOf": [{"enum": [True, False]}, {"type": "string"}]}, 5,
     "5 is not valid: give one of true, false or a string"),
    ({"oneOf": [{"const": None}, {"type": "string", "pattern": "^[a-z]+$",
                                  "title": "a lower-case name"}]}, "Ab",
     "'Ab' is not valid: give null or a lower-case name"),
    ({"$defs": {"n": {"type": "integer", "minimum": 1}},
      "oneOf": [{"$ref": "#/$defs/n", "minimum": 5}, {"const": "all"}]}, 2,
     "2 is not valid: give an integer >= 5 or 'all'"),
])
def test_what_a_schema_takes_in_words(schema: dict[str, Any], instance: Any, said: str) -> None:
    assert _message(schema, instance) == said


@pytest.mark.parametrize("description, shown", [
    ("d" * 100, True), ("d" * 101, False), ("two\nlines", False)])
def test_a_short_one_line_description_is_added(description: str, shown: bool) -> None:
    schema = {"oneOf": [{"const": "a"}, {"const": "b"}], "description": description}
    said = _message(schema, "c")
    assert said == "'c' is not valid: give 'a' or 'b'" + (f" ({description})" if shown else "")


@pytest.mark.parametrize("instance, said", [
    (" Digits", "' Digits' is not a lower-case name: write digits"),
    ("Dig its", "'Dig its' is not a lower-case name")])
def test_a_name_its_pattern_refuses_says_the_fix_that_fits_it(instance: str, said: str) -> None:
    schema = {"type": "string", "pattern": "^[a-z]+$", "title": "a lower-case name"}
    assert _message(schema, instance) == said


def test_a_key_no_branch_takes_is_an_additional_property() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False}
    assert _message(schema, {"a": 1, "b": 2}).startswith("Additional properties")


# --- paths --------------------------------------------------------------------------------------

def test_a_runs_files_are_where_docs_pipeline_md_puts_them() -> None:
    run = paths.Run("digits", "cnn", "wscat", 3)
    folder = "results/models/digits/cnn/wscat/seed3"
    assert run.split() == "results/splits/digits/seed3.npz"
    assert run.model_dir() == folder
    assert run.checkpoint() == f"{folder}/best.pt"
    assert run.checkpoint(name="last") == f"{folder}/last.pt"
    assert run.train_log() == f"{folder}/train_log.csv"
    assert paths.fill(paths.DVCLIVE, **vars(run)) == f"{folder}/dvclive"
    assert run.evaluated() == ("results/metrics/digits/cnn/wscat/seed3.json",
                               "results/metrics/digits/cnn/wscat/seed3-extra.json")
    assert run.validation().startswith("results/validation/")
    assert run.curves() == "results/curves/digits/cnn/wscat/seed3"
    assert paths.fill(paths.CURVES_PNG, **vars(run)) == "results/curves/digits/cnn/wscat/seed3.png"
    assert paths.fill(paths.PSEUDO_LABELS, dataset="digits", model="cnn", labeler="mt",
                      seed=1) == "results/pseudo/digits/cnn/mt/seed1.npz"


def test_a_run_moves_under_another_root_whole() -> None:
    run = paths.Run("digits", "cnn", "mt", 1)
    assert run.split("copy") == "copy/splits/digits/seed1.npz"
    assert run.metrics("/w/r") == "/w/r/metrics/digits/cnn/mt/seed1.json"
    assert paths.fill("data/raw/{name}.npz", "copy", name="x") == "data/raw/x.npz"


def test_an_experiments_and_a_tiers_files() -> None:
    """docs/pipeline.md and docs/paper-tables.md; `wscat analyse --help`."""
    fill = paths.fill
    assert [fill(p, experiment="digits") for p in (
        paths.TABLE_TEX, paths.TABLE_CSV, paths.TABLE_MD, paths.PAIRED_TEX, paths.PAIRED_CSV,
        paths.PAIRED_PDF, paths.PAIRED_PNG, paths.SUMMARY)] == [
        "results/tables/digits.tex", "results/tables/digits.csv", "results/tables/digits.md",
        "results/tables/digits-paired.tex", "results/tables/digits-paired.csv",
        "results/tables/digits-paired.pdf", "results/tables/digits-paired.png",
        "results/metrics/digits.json"]
    assert fill(paths.PAPER_COMPARE_TEX, tier="paper", label="Tab-RQ1-CIFAR10") == (
        "results/paper/paper/Tab-RQ1-CIFAR10-vs-paper.tex")
    assert fill(paths.PAPER_INDEX, tier="digits") == "results/paper/digits/index.md"
    assert fill(paths.ANALYSIS, tier="digits", figure="Fig-similarity", dataset="cifar10") == (
        "results/analysis/digits/Fig-similarity/cifar10.npz")
    key = fill(paths.RUN, dataset="cifar10", model="wrn-28-10", method="wscat", seed=1)
    assert paths.log("train", key) == "results/logs/train/cifar10/wrn-28-10/wscat/seed1.log"
    assert paths.benchmark("train", key) == (
        "results/benchmarks/train/cifar10/wrn-28-10/wscat/seed1.tsv")


def test_a_field_is_read_back_between_its_prefix_and_suffix() -> None:
    extra = "results/metrics/digits/cnn/wscat/seed12-extra.json"
    assert paths.field(extra, paths.EXTRA, "seed") == "12"
    assert paths.field(extra, paths.EXTRA, "method") == "wscat"


def test_only_a_checkpoint_in_a_runs_resume_folder_is_unfinished() -> None:
    assert paths.unfinished("results/models/d/m/x/seed1/resume/last.pt")
    assert not paths.unfinished("results/models/d/m/x/seed1/last.pt")
    assert not paths.unfinished("/home/u/resume/results/models/d/m/x/seed1/best.pt")
