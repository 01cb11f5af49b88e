"""Bad input gets one clear line, exit code 2 and no output; identical reruns give identical metrics.
`wscat --version`, a help text for every option, and the device every step names."""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.states import flat_state
from tests.helpers.tiny import ROOT, tiny_params, write_params
from wscat.checkpoint import load_checkpoint

WSCAT = [sys.executable, "-m", "wscat"]


def wscat(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*WSCAT, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def _one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def workdir(tmp_path):
    write_params(tmp_path / "params.yaml", tiny_params())
    return tmp_path


def _edit(workdir, change):
    params = tiny_params()
    change(params)
    write_params(workdir / "params.yaml", params)


@pytest.mark.parametrize("change, needle", [
    (lambda p: p["training"]["digits"].update(epochz=3), "epochz"),
    (lambda p: p["training"]["digits"].update(epochs="ten"), "training.digits.epochs"),
    (lambda p: p["datasets"]["digits"].update(eps=-0.1), "datasets.digits.eps"),
    (lambda p: p["experiments"]["digits"]["methods"].append("fgsm-at"), "fgsm-at"),
])
def test_bad_params_are_refused_before_anything_is_written(workdir, change, needle):
    _edit(workdir, change)
    result = wscat("split", "--dataset", "digits", "--seed", 1, "--out", "s.npz", cwd=workdir)
    _one_line_error(result, needle)
    assert not (workdir / "s.npz").exists()


def test_list_experiments_names_the_generated_runs_and_their_origin():
    result = wscat("list-experiments", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    beta = next(line for line in lines if line.split()[:1] == ["wscat-beta0.2"])
    assert "wscat with beta: 0.2" in beta and "paper.digits.beta" in beta
    full = next(line for line in lines if line.split()[:1] == ["digits-full"])
    assert "labelled: null" in full and "paper.digits.supervised" in full
    sup = next(line for line in lines if line.split()[:1] == ["wscat-sup"])
    assert "variant of wscat" in sup
    assert any(line.split()[:1] == ["digits-ablation"] for line in lines)


def test_analyse_refuses_a_figure_without_analysis(workdir):
    params = tiny_params()
    params["paper"] = {"t": {"datasets": [{"dataset": "digits", "name": "Digits",
                                           "performance": {"experiment": "digits",
                                                           "label": "Tab-RQ1-digits"}}],
                             "model_names": {"cnn": "CNN"}}}
    write_params(workdir / "params.yaml", params)
    result = wscat("analyse", "--tier", "t", "--figure", "Fig-feature", "--dataset", "digits",
                   "--out", "a.npz", cwd=workdir)
    _one_line_error(result, "no feature: section")
    assert not (workdir / "a.npz").exists()


def test_more_labelled_than_exist(workdir):
    _edit(workdir, lambda p: p["datasets"]["digits"].update(labelled=5000))
    result = wscat("split", "--dataset", "digits", "--seed", 1, "--out", "s.npz", cwd=workdir)
    _one_line_error(result, "labelled = 5000")
    assert not (workdir / "s.npz").exists()


def test_unknown_method_and_dataset(workdir):
    result = wscat("split", "--dataset", "mnist", "--seed", 1, "--out", "s.npz", cwd=workdir)
    _one_line_error(result, "unknown dataset 'mnist'")
    result = wscat("train", "--dataset", "digits", "--model", "cnn", "--method", "madry",
                   "--seed", 1, "--split", "s.npz", "--out-dir", "m", cwd=workdir)
    _one_line_error(result, "unknown method 'madry'")
    assert not (workdir / "m").exists()


def test_version():
    from wscat import __version__

    result = wscat("--version", cwd=ROOT)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"wscat {__version__}\n", "")


def test_the_command_runs_main_then_freezes_the_heap_for_a_quick_exit(monkeypatch):
    """`wscat` and `python -m wscat` are `console` (through wscat.entry, which guards its import
    against Ctrl-C): main's exit status, then gc.freeze, so the interpreter's exit skips its
    last collection (benchmarks/startup.py); `main` itself, which tests and Python callers run
    in their own process, freezes nothing."""
    import runpy
    from importlib.metadata import entry_points

    from wscat import cli

    calls = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 2)
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    assert cli.console() == 2 and calls == ["main", "freeze"]
    (script,) = entry_points(group="console_scripts", name="wscat")
    assert script.value == "wscat.entry:console"
    calls.clear()
    with pytest.raises(SystemExit) as done:
        runpy.run_module("wscat", run_name="__main__")
    assert done.value.code == 2 and calls == ["main", "freeze"]


def test_every_option_of_every_step_has_a_help_text():
    from wscat.cli import build_parser

    parser = build_parser()
    steps = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"wscat {name} {'/'.join(action.option_strings) or action.dest}"
               for name, step in steps.choices.items() for action in step._actions
               if not action.help]
    assert missing == []
    assert all(action.help for action in parser._actions if action.option_strings)


def test_a_paper_size_model_on_an_automatic_cpu_stops_with_one_line(workdir):
    """No GPU, no --device: WRN-28-10 (36.5M parameters) would train for days; --device cpu
    (tests/unit/test_device.py) lets it."""
    assert wscat("split", "--dataset", "digits", "--seed", 1, "--out", "s.npz",
                 cwd=workdir).returncode == 0
    result = subprocess.run([*WSCAT, "train", "--dataset", "digits", "--model", "wrn-28-10",
                             "--method", "standard", "--seed", "1", "--split", "s.npz",
                             "--out-dir", "m"], cwd=workdir, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    _one_line_error(result, "'wrn-28-10' has 36.5M parameters (paper-size", "--device cpu")
    first = result.stdout.splitlines()[0]
    assert first.startswith("device: cpu, ") and first.endswith("(--device auto: no CUDA device here)")
    assert not (workdir / "m").exists()


def test_the_device_flag_defaults_to_wscat_device(monkeypatch):
    """The workflow's rules give no --device: WSCAT_DEVICE=cpu is how a CPU-only cluster trains
    the paper's models."""
    from wscat.cli import build_parser

    args = ["train", "--dataset", "d", "--model", "m", "--method", "x", "--seed", "1",
            "--split", "s", "--out-dir", "o"]
    monkeypatch.delenv("WSCAT_DEVICE", raising=False)
    assert build_parser().parse_args(args).device == "auto"
    monkeypatch.setenv("WSCAT_DEVICE", "cpu")
    assert build_parser().parse_args(args).device == "cpu"


@pytest.mark.slow
def test_missing_and_truncated_checkpoints(workdir):
    assert wscat("split", "--dataset", "digits", "--seed", 1, "--out", "s.npz",
                 cwd=workdir).returncode == 0
    args = ["evaluate", "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", 1,
            "--split", "s.npz", "--out", "m.json"]
    _one_line_error(wscat(*args, "--checkpoint", "nope.pt", cwd=workdir), "checkpoint not found")
    assert wscat("train", "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", 1,
                 "--split", "s.npz", "--out-dir", "run", cwd=workdir).returncode == 0
    whole = (workdir / "run" / "best.pt").read_bytes()
    (workdir / "cut.pt").write_bytes(whole[: len(whole) // 2])
    _one_line_error(wscat(*args, "--checkpoint", "cut.pt", cwd=workdir), "cut.pt", "truncated")
    assert not (workdir / "m.json").exists()


@pytest.mark.slow
def test_same_params_and_seed_give_identical_metrics(workdir):
    assert wscat("split", "--dataset", "digits", "--seed", 1, "--out", "s.npz",
                 cwd=workdir).returncode == 0
    outputs = []
    for run in ("a", "b"):
        train = wscat("train", "--dataset", "digits", "--model", "cnn", "--method", "wscat-sup",
                      "--seed", 1, "--split", "s.npz", "--out-dir", run, "--threads", 1, cwd=workdir)
        assert train.returncode == 0, train.stderr
        assert train.stdout.startswith("device: "), train.stdout  # the job log names its device
        result = wscat("evaluate", "--dataset", "digits", "--model", "cnn", "--method", "wscat-sup",
                       "--seed", 1, "--split", "s.npz", "--checkpoint", f"{run}/best.pt",
                       "--out", f"{run}.json", "--threads", 1, cwd=workdir)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("device: "), result.stdout
        metrics = json.loads((workdir / f"{run}.json").read_text())
        metrics["manifest"]["checkpoint"]["path"] = "<run>/best.pt"
        outputs.append(metrics)
    assert outputs[0] == outputs[1]
    assert (workdir / "a" / "best.pt").read_bytes() != b""
    # The checkpoints too: every tensor bit for bit, every other value but the epochs' seconds.
    for name in ("best.pt", "last.pt"):
        a, b = ([item for item in flat_state(load_checkpoint(workdir / run / name), name)
                 if not item[0].endswith(".seconds")] for run in ("a", "b"))
        assert any(key.startswith(f"{name}.ema.") for key, _ in a) and a == b, name
    assert set(outputs[0]["accuracy"]) == {"Natural", "FGSM", "PGD", "CW", "AA", "AA-paper", "NRF",
                                           "Mean"}
