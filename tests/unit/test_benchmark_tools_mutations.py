"""Mutation tests for benchmarks/mps.py (NVIDIA's Multi-Process Service for one GPU call),
benchmarks/throughput.py (images/s per method) and benchmarks/graph_step_check.py (CUDA graphs
against eager and compiled steps): each test kills hand-made mutants that went through the unit
tests importing them, with expectations from the modules' docstrings, DEVELOPERS.md ("--mps
auto|on|off"; the daemon's 5 s to quit), NVIDIA's data sheets and first principles, never from the
function under test. There is no GPU here: nvidia-cuda-mps-control is a shell script (as in
test_mps), the probe a Python one-liner, the GPU's name and the timings stand-ins.

What is checked, and from which fact:
- mps: a failure is reported, never waited on: a control program that does not answer `quit`
  within STOP_S is given up on (stop() is False), one that answers with an error is not a stop;
  a daemon start or a probe past its time limit stops the daemon again and says why, and every
  call start makes has a time limit; the probe passes only when it exits 0 (a probe killed by a
  signal after naming a server is a failure); the note of a failure is one line (a daemon's or a
  probe's multi-line stderr is joined), keeps the end of the probe's stderr (a traceback's error
  line), and the daemon's stderr where it wrote both streams; the control program is found on
  PATH first, else in the driver's folder, else not at all.
- start_as (`--mps auto|on|off`): off, or a device that is not CUDA, starts nothing and says
  which; auto where MPS does not start goes on without it (no error), on raises NotRunning with
  the reason in `note`; the daemon's folders are the ones given.
- throughput: the share of the GPU's peak is achieved FLOP/s over the data sheet's dense bf16
  peak (H100 989 TFLOP/s, A100 312), half of it for fp32 (TF32), None on a CPU, on an unknown
  card, or without a FLOP count; a row's images/s are the batch over each part's seconds (the
  update's the step's less the attack's), peak memory in MiB from ru_maxrss in KiB, the compile
  mode only where compiled, --step-only's columns None and their measurements not run; seconds a
  step are the timed span over the steps, the attack's the PGD calls' seconds over the steps with
  every method module's pgd restored after; the step passes the attack steps and precision
  asked for; the Markdown: a share in percent, n/a for what was not measured, a WSCAT step's cost
  against TRADES's from seconds a step, no line for a model without both; main: a row's JSON is
  the last line of its stdout, a failed row is named by the last line of its stderr, listed
  under the table and in the JSON, exit 1; the default tag (gpu on CUDA), a compile mode implies
  --compile and is named in the title.
- graph_step_check: a gap is the largest absolute difference over every element (0 for no
  tensors; states with different keys refused), each quantity compared with its own state
  (weights, the EMA's weights, its batch-norm statistics: floating buffers only); the graphs'
  gap worse than rounding's in any one quantity fails, an infinite gap or one in the rounding
  pair fails as non-finite; cells to three significant digits; a semi-supervised batch keeps
  the first 29 of 128 labelled (at least one); each variant resets dynamo, compiles in its own
  mode (none eager) and trains with the method's own teacher decay for the dataset asked
  (cifar10-proxy's, past the ramp-up) as progress advances; main refuses --steps 0 and unknown
  methods or models in one line, asks for deterministic kernels, and writes the report after
  each method.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tests.unit.test_mps import CLIENT, FAKE

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import graph_step_check  # noqa: E402
import mps  # noqa: E402
import throughput  # noqa: E402

from wscat.config import load_params, method_for  # noqa: E402


# ---------------------------------------------------------------- mps


def _script(folder: Path, body: str) -> str:
    """An executable shell script named as the control program, in `folder`."""
    path = folder / mps.CONTROL
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _env(folder: Path) -> dict[str, str]:
    (folder / "pipe").mkdir(parents=True, exist_ok=True)
    (folder / "log").mkdir(parents=True, exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}


def test_a_daemon_that_does_not_answer_quit_is_given_up_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop comes after a run's deadline: a silent daemon must not hold the run past it."""
    monkeypatch.setattr(mps, "STOP_S", 0.5)
    silent = mps.Mps(_script(tmp_path / "bin", "exec sleep 30\n"), _env(tmp_path))
    started = time.monotonic()
    assert silent.stop() is False
    assert time.monotonic() - started < 5


def test_a_daemon_that_answers_with_an_error_has_not_stopped(tmp_path: Path) -> None:
    """The FAKE exits 1 where no daemon runs: neither a stop nor a list of servers."""
    gone = mps.Mps(_script(tmp_path / "bin", FAKE.split("\n", 1)[1]), _env(tmp_path))
    assert gone.stop() is False
    assert gone.servers() == []


def test_the_control_program_is_found_on_path_then_in_the_driver_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    driver = tmp_path / "driver"
    driver.mkdir()
    monkeypatch.setattr(mps, "DRIVER_BIN", driver)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert mps.find_control() is None
    assert mps.start(tmp_path / "mps") == (
        None, f"no {mps.CONTROL} on this machine; the steps take turns on the card")
    in_driver = _script(driver, "exit 0\n")
    assert mps.find_control() == in_driver
    on_path = _script(tmp_path / "path", "exit 0\n")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert mps.find_control() == on_path


def test_every_call_start_makes_has_a_time_limit_and_uses_the_control_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    control = _script(tmp_path / "bin", FAKE.split("\n", 1)[1])
    limits: list[Any] = []
    run = subprocess.run

    def recorded(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        limits.append(kwargs.get("timeout"))
        return run(argv, **kwargs)

    monkeypatch.setattr(mps.subprocess, "run", recorded)
    monkeypatch.setattr(mps, "find_control", lambda: "/not/the/one/given")
    service, note = mps.start(tmp_path / "mps", probe=[sys.executable, "-c", CLIENT],
                              control=control)
    assert service is not None and service.control == control, note
    assert service.stop()
    assert len(limits) >= 3 and all(isinstance(t, (int, float)) and t > 0 for t in limits)


@pytest.mark.parametrize("which", ["-d", "probe"])
def test_a_start_or_probe_past_its_time_is_a_one_line_refusal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    control = _script(tmp_path / "bin", FAKE.split("\n", 1)[1])
    folder = tmp_path / "mps"
    run = subprocess.run

    def slow(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        if argv[-1] == "-d" if which == "-d" else argv[0] == sys.executable:
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        return run(argv, **kwargs)

    monkeypatch.setattr(mps.subprocess, "run", slow)
    service, note = mps.start(folder, probe=[sys.executable, "-c", CLIENT], control=control)
    assert service is None and "\n" not in note and note.endswith("take turns on the card")
    if which == "-d":
        assert "-d did not start" in note
    else:
        assert "a CUDA probe failed under it" in note
        assert not (folder / "pipe" / "daemon").exists()  # the daemon was stopped again
        assert (folder / "log" / "quits").read_text().split() == ["quit"]


def test_a_probe_killed_after_naming_a_server_has_failed(tmp_path: Path) -> None:
    """It passes only when it exits 0: a client killed by a signal did not finish its check."""
    control = _script(tmp_path / "bin", FAKE.split("\n", 1)[1])
    probe = CLIENT + f"; import os; os.kill(os.getpid(), {int(signal.SIGKILL)})"
    folder = tmp_path / "mps"
    service, note = mps.start(folder, probe=[sys.executable, "-c", probe], control=control)
    assert service is None and "a CUDA probe failed under it (exit -9" in note
    assert not (folder / "pipe" / "daemon").exists()


def test_a_failed_probe_is_one_line_that_keeps_the_traceback_s_error(tmp_path: Path) -> None:
    """A Python probe fails with a traceback, its error on the last line, after ~300 characters of
    frames: the note keeps that end, on the one line the progress log gives it."""
    control = _script(tmp_path / "bin", FAKE.split("\n", 1)[1])
    probe = ("import sys; sys.stderr.write('Traceback (most recent call last):\\n' + "
             "'  File \"<string>\", line 1, in <module>\\n' * 20 + "
             "'RuntimeError: CUDA error: all CUDA-capable devices are busy\\n'); sys.exit(1)")
    service, note = mps.start(tmp_path / "mps", probe=[sys.executable, "-c", probe],
                              control=control)
    assert service is None and "\n" not in note
    assert "RuntimeError: CUDA error: all CUDA-capable devices are busy" in note
    assert "(exit 1: " in note


def test_a_daemon_that_does_not_start_says_why_on_one_line(tmp_path: Path) -> None:
    control = _script(tmp_path / "bin",
                      'echo "starting daemon"\necho "cannot open pipe" >&2\n'
                      'echo "permission denied" >&2\nexit 1\n')
    service, note = mps.start(tmp_path / "mps", probe=[sys.executable, "-c", CLIENT],
                              control=control)
    assert service is None and "-d exited 1 (" in note and "\n" not in note
    assert "cannot open pipe" in note and "permission denied" in note
    assert "starting daemon" not in note  # stderr says why, where both streams were written


def _fake_start(calls: list[Path], service: Any) -> Any:
    def start(folder: Path, **_: Any) -> tuple[Any, str]:
        calls.append(folder)
        return service, "why" if service is None else "on"
    return start


@pytest.mark.parametrize("mode, device, note", [
    ("off", "cuda", "off (--mps off)"), ("auto", "cpu", "off (--mps auto, --device cpu)"),
    ("on", "cpu", "off (--mps on, --device cpu)")])
def test_off_or_a_device_that_is_not_cuda_starts_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, device: str,
        note: str) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(mps, "start", _fake_start(calls, None))
    service, said = mps.start_as(mode, tmp_path, device=device)
    assert service is None and said.startswith(note) and calls == []


def test_auto_goes_on_without_mps_and_on_refuses(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(mps, "start", _fake_start(calls, None))
    assert mps.start_as("auto", tmp_path / "a", device="cuda:0") == (None, "why")
    with pytest.raises(mps.NotRunning) as refused:
        mps.start_as("on", tmp_path / "b")
    assert refused.value.note == "why" and "\n" not in str(refused.value)
    assert "--mps auto or off" in str(refused.value)
    assert calls == [tmp_path / "a", tmp_path / "b"]
    running = object()
    monkeypatch.setattr(mps, "start", _fake_start(calls, running))
    assert mps.start_as("on", tmp_path / "c") == (running, "on")
    assert calls[-1] == tmp_path / "c"


# ---------------------------------------------------------------- throughput


def _cuda_named(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(throughput.torch.cuda, "get_device_name", lambda *_: name)


def test_the_peak_share_is_over_the_data_sheet_s_dense_peak(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's data sheets: H100 SXM 989 TFLOP/s dense bf16, PCIe 756, NVL 835, A100 312; TF32
    half of bf16."""
    cuda = torch.device("cuda")
    _cuda_named(monkeypatch, "NVIDIA H100 80GB HBM3")
    share = throughput._peak_flops_share
    assert share(2e12, 0.01, cuda, "bf16") == pytest.approx(2e14 / 989e12)
    assert share(2e12, 0.01, cuda, "fp32") == pytest.approx(2e14 / 494.5e12)
    _cuda_named(monkeypatch, "NVIDIA A100-SXM4-40GB")
    assert share(1e12, 0.02, cuda, "bf16") == pytest.approx(5e13 / 312e12)
    assert share(None, 0.02, cuda, "bf16") is None  # no FLOP count
    _cuda_named(monkeypatch, "NVIDIA H100 PCIe")  # not the SXM card's peak
    assert share(1e12, 0.02, cuda, "bf16") == pytest.approx(5e13 / 756e12)
    _cuda_named(monkeypatch, "NVIDIA H100 NVL")
    assert share(1e12, 0.02, cuda, "bf16") == pytest.approx(5e13 / 835e12)
    for name in ("Some Card", "Tesla V100-SXM2-16GB"):  # a V100 has no bf16 or TF32 cores
        _cuda_named(monkeypatch, name)
        assert share(1e12, 0.02, cuda, "bf16") is None
    assert share(1e12, 0.02, torch.device("cpu"), "bf16") is None


def _args(**changes: Any) -> argparse.Namespace:
    args = dict(batch=64, attack_steps=10, precision="fp32", channels_last=False, compile=False,
                compile_mode="default", deterministic=False, warmup=2, iters=5, step_only=False,
                threads=torch.get_num_threads(), device="cpu")
    return argparse.Namespace(**{**args, **changes})


def _measured(monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace) -> dict[str, Any]:
    """measure() with 0.5 s a step of which the attack 0.2 s, 3 forwards, a 7.5 s warm-up, 1000
    FLOPs and 2048 KiB of peak resident memory."""
    def not_run(*_: Any) -> Any:
        raise AssertionError("measured under --step-only")

    monkeypatch.setattr(throughput, "_step", lambda *_: (lambda: None, torch.nn.Linear(1, 1),
                                                         torch.device("cpu")))
    monkeypatch.setattr(throughput, "_warm_up", lambda *_: (3, 7.5))
    monkeypatch.setattr(throughput, "_seconds_per_step", lambda *_: 0.5)
    monkeypatch.setattr(throughput, "_attack_seconds_per_step",
                        not_run if args.step_only else lambda *_: 0.2)
    monkeypatch.setattr(throughput, "_flops_per_step",
                        not_run if args.step_only else lambda _: 1000)
    monkeypatch.setattr(throughput, "resource", SimpleNamespace(
        RUSAGE_SELF=0, getrusage=lambda _: SimpleNamespace(ru_maxrss=2048)))
    return throughput.measure("wrn-16-4", "trades", args)


def test_a_row_is_the_batch_over_each_part_s_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _measured(monkeypatch, _args())
    assert row["step_images_per_s"] == pytest.approx(64 / 0.5)
    assert row["attack_images_per_s"] == pytest.approx(64 / 0.2)
    assert row["update_images_per_s"] == pytest.approx(64 / 0.3)
    assert row["seconds_per_step"] == 0.5 and row["peak_memory_mb"] == pytest.approx(2.0)
    assert (row["forwards_per_step"], row["warmup_seconds"], row["warmup_steps"]) == (3, 7.5, 2)
    assert row["flops_per_step"] == 1000 and row["peak_flops_share"] is None  # a CPU
    assert row["compile"] is False and row["compile_mode"] is None
    compiled = _measured(monkeypatch, _args(compile=True, compile_mode="reduce-overhead"))
    assert compiled["compile_mode"] == "reduce-overhead"


def test_step_only_measures_the_step_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _measured(monkeypatch, _args(step_only=True))
    assert row["step_images_per_s"] == pytest.approx(64 / 0.5)
    assert row["attack_images_per_s"] is None and row["update_images_per_s"] is None
    assert row["flops_per_step"] is None


class _Clock:
    """time.perf_counter stood in for: a clock the steps advance."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


def test_seconds_a_step_and_the_attack_s_share(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(throughput, "time", clock)
    trades = importlib.import_module("wscat.methods.trades")

    def pgd(*_: Any, **__: Any) -> str:
        clock.now += 0.1
        return "adversarial"

    monkeypatch.setattr(trades, "pgd", pgd)
    results: list[str] = []

    def step() -> None:
        clock.now += 0.15
        results.append(trades.pgd())

    cpu = torch.device("cpu")
    assert throughput._seconds_per_step(step, 4, cpu) == pytest.approx(0.25)
    assert throughput._attack_seconds_per_step(step, 2, cpu) == pytest.approx(0.1)
    assert trades.pgd is pgd and set(results) == {"adversarial"}

    def failing() -> None:
        trades.pgd()
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        throughput._attack_seconds_per_step(failing, 2, cpu)
    assert trades.pgd is pgd  # restored though the step raised


def test_the_step_trains_with_the_attack_steps_and_precision_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import wscat.training.speed as speed
    import wscat.training.trainer as trainer

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(trainer, "train_step", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(speed, "configure_backend", lambda device, deterministic: None)
    step, _, _ = throughput._step("cnn", "mt", _args(batch=20, attack_steps=3, precision="bf16"))
    step()
    (args, kwargs), = calls
    batch, ctx = args[5], args[6]
    assert ctx.steps == 3 and kwargs["precision"] == "bf16" and kwargs["cuda_graphs"] is False
    assert batch.x.shape == (20, 3, 32, 32)
    assert (batch.labels == -1).any() and (batch.labels >= 0).any()  # semi: both kinds


def _row(method: str, seconds: float, **changes: Any) -> dict[str, Any]:
    row = {"model": "wrn-16-4", "method": method, "batch": 64, "precision": "fp32",
           "step_images_per_s": 64 / seconds, "attack_images_per_s": None,
           "update_images_per_s": None, "forwards_per_step": 3, "peak_memory_mb": 100.0,
           "peak_flops_share": None, "warmup_seconds": 1.0, "seconds_per_step": seconds}
    return {**row, **changes}


def test_the_markdown_gives_percent_n_a_and_wscat_against_trades() -> None:
    rows = [_row("trades", 0.2, peak_flops_share=0.123), _row("wscat", 0.3),
            _row("wscat", 0.4, model="cnn")]
    page = throughput.markdown(rows, "title")
    assert "| 12.3% |" in page and "| n/a | n/a |" in page
    assert "wrn-16-4: a WSCAT step costs +50.0% against a TRADES step." in page
    assert "cnn:" not in page


def test_main_keeps_going_past_a_failed_row_and_says_which(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    def run_row(model: str, method: str, argv: list[str], timeout: float | None
                ) -> subprocess.CompletedProcess:
        if method == "rst":
            return subprocess.CompletedProcess([], 1, "", "Traceback (most recent call last):\n"
                                               "  File x\nRuntimeError: out of memory\n")
        return subprocess.CompletedProcess(
            [], 0, "a warning on stdout\n" + json.dumps(_row(method, 0.5)) + "\n", "")

    monkeypatch.setattr(throughput, "run_row", run_row)
    monkeypatch.setattr(throughput, "machine", lambda device, threads: "a machine")
    monkeypatch.setattr(throughput, "ROOT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["throughput.py", "--device", "cuda", "--methods", "trades",
                                      "rst", "--compile-mode", "reduce-overhead"])
    assert throughput.main() == 1
    written = json.loads((tmp_path / "benchmarks/results/gpu.json").read_text())
    assert written["failed"] == ["wrn-16-4 rst failed: RuntimeError: out of memory"]
    assert [r["method"] for r in written["rows"]] == ["trades"]
    assert written["machine"] == "a machine; PGD-10, fp32, compiled (reduce-overhead)"
    page = (tmp_path / "benchmarks/results/gpu.md").read_text()
    assert "\n- wrn-16-4 rst failed: RuntimeError: out of memory\n" in page


# ---------------------------------------------------------------- graph_step_check


def _trace(loss: float, model: list[float], ema: list[float],
           statistics: dict[str, list[float]]) -> graph_step_check.Trace:
    return graph_step_check.Trace(
        [0.5, loss], {"w": torch.tensor(model)}, {"w": torch.tensor(ema)},
        {k: torch.tensor(v) for k, v in statistics.items()}, 0.0)


def test_each_quantity_is_its_own_state_s_largest_element_gap() -> None:
    stats = {"running_mean": [0.0, 0.0, 0.0, 0.0]}
    traces = {"eager": _trace(1.0, [0.0, 0.0, 0.0, 0.0], [0.0] * 4, stats),
              "default": _trace(1.0, [0.0, 0.0, 0.0, 0.4], [0.0, 0.2, 0.0, 0.0],
                                {"running_mean": [0.0, 0.0, -0.05, 0.0]}),
              "reduce-overhead": _trace(1.0, [0.0, 0.0, 0.0, 0.4], [0.0, 0.2, 0.0, 0.0],
                                        {"running_mean": [0.0, 0.0, -0.05, 0.3]})}
    rounding, graphs = graph_step_check.compare(traces)
    assert rounding["weights"] == pytest.approx(0.4)
    assert rounding["ema_weights"] == pytest.approx(0.2)
    assert rounding["ema_statistics"] == pytest.approx(0.05)
    assert graphs["ema_statistics"] == pytest.approx(0.3)
    assert graph_step_check.verdict([rounding, graphs]) == (
        "GRAPHS DIFFER beyond rounding in ema_statistics: compiled and graphed should replay the "
        "same kernels")


def test_a_model_without_batch_norm_and_states_that_do_not_match() -> None:
    traces = {v: _trace(1.0, [0.0], [0.0], {}) for v in graph_step_check.VARIANTS}
    rows = graph_step_check.compare(traces)
    assert rows[1]["ema_statistics"] == 0.0
    assert graph_step_check.verdict(rows).startswith("graphs change nothing beyond rounding")
    with pytest.raises(ValueError, match="differ in their keys"):
        graph_step_check._gap({"w": torch.zeros(1)}, {"w": torch.zeros(1), "b": torch.zeros(1)})


@pytest.mark.parametrize("variant, pair", [("reduce-overhead", "default / reduce-overhead"),
                                           ("eager", "eager / default")])
def test_an_infinite_gap_in_either_pair_fails(variant: str, pair: str) -> None:
    traces = {v: _trace(1.0, [0.0], [0.0], {}) for v in graph_step_check.VARIANTS}
    traces[variant] = _trace(1.0, [float("inf")], [0.0], {})
    text = graph_step_check.verdict(graph_step_check.compare(traces))
    assert text.startswith("NON-FINITE") and f"weights ({pair})" in text


def test_a_cell_has_three_significant_digits() -> None:
    assert graph_step_check._cell(0.0123456) == "0.0123"
    assert graph_step_check._cell(float("inf")) == "non-finite"


def test_a_semi_supervised_batch_keeps_29_of_128_labelled_and_never_none() -> None:
    cpu = torch.device("cpu")
    (_, labels), = graph_step_check._batches(1, 128, "semi", cpu)
    assert (labels[:29] >= 0).all() and (labels[29:] == -1).all()
    (_, labels), = graph_step_check._batches(1, 4, "semi", cpu)  # 4 * 29 / 128 < 1
    assert labels[0] >= 0 and (labels[1:] == -1).all()
    (_, labels), = graph_step_check._batches(1, 8, "labelled", cpu)
    assert (labels >= 0).all()


def test_each_variant_compiles_afresh_in_its_mode_with_the_method_s_decay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._dynamo

    import wscat.training.trainer as trainer
    from wscat.models import build_model

    modes: list[str] = []
    resets: list[int] = []
    steps: list[tuple[float, float, bool]] = []
    train_step = trainer.train_step

    def recorded(*a: Any, **k: Any) -> Any:
        """The step as asked, run without graphs (marking a graph step imports inductor: ~5 s)."""
        steps.append((a[6].progress, k["ema_decay"], k["cuda_graphs"]))
        return train_step(*a, **{**k, "cuda_graphs": False})

    monkeypatch.setattr(torch, "compile", lambda model, mode: modes.append(mode) or model)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    monkeypatch.setattr(trainer, "train_step", recorded)
    params = load_params(ROOT / "params.yaml")
    args = argparse.Namespace(device="cpu", dataset="cifar10-proxy", model="cnn",
                              channels_last=False, steps=2, batch=4, progress=40.0,
                              attack_steps=1, precision="fp32")
    traces = [graph_step_check.run_variant("mt", v, args, params)
              for v in graph_step_check.VARIANTS]
    assert modes == ["default", "reduce-overhead"] and len(resets) == 3
    late = method_for(params, "mt", "cifar10-proxy")
    assert late["rampup_epochs"] < 40.0  # past the ramp-up: the late decay
    assert [d for _, d, _ in steps] == [late["teacher_decay_late"]] * 6
    assert [g for _, _, g in steps] == [False] * 4 + [True] * 2  # graphs: reduce-overhead's
    progress = [p for p, _, _ in steps[:2]]
    assert progress[0] == 40.0 and progress[1] > progress[0]
    model = build_model(**params["models"]["cnn"], in_channels=3, num_classes=10,
                        mean=(0.5,) * 3, std=(0.5,) * 3)
    weights = {name for name, _ in model.named_parameters()}
    statistics = {f"{name}.{kind}" for name, part in model.named_modules()
                  if isinstance(part, torch.nn.modules.batchnorm._BatchNorm)
                  for kind in ("running_mean", "running_var")}
    assert statistics  # the small CNN has batch norm
    for trace in traces:
        assert set(trace.ema_weights) == weights and set(trace.ema_statistics) == statistics
        assert len(trace.losses) == 2


def _main_with(monkeypatch: pytest.MonkeyPatch, argv: list[str],
               variant: Any = None) -> list[bool]:
    """graph_step_check.main with the backend's global flags left alone (recorded)."""
    import wscat.training.speed as speed

    asked: list[bool] = []
    monkeypatch.setattr(speed, "configure_backend",
                        lambda device, deterministic: asked.append(deterministic))
    if variant is not None:
        monkeypatch.setattr(graph_step_check, "run_variant", variant)
    graph_step_check.main([*argv, "--threads", str(torch.get_num_threads())])
    return asked


@pytest.mark.parametrize("argv, why", [
    (["--steps", "0"], "--steps and --batch must be at least 1"),
    (["--methods", "mt", "nope"], "not in params.yaml: nope"),
    (["--model", "nope"], "not in params.yaml: nope")])
def test_main_refuses_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str], argv: list[str],
                                  why: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        _main_with(monkeypatch, argv, variant=lambda *_: pytest.fail("ran a variant"))
    assert stopped.value.code == 2 and capsys.readouterr().err.strip().endswith(why)


def test_main_writes_each_method_s_section_as_it_ends(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """One step is enough; a method that fails after another leaves the first's section."""
    def variant(method_key: str, name: str, args: argparse.Namespace,
                params: dict[str, Any]) -> graph_step_check.Trace:
        if method_key == "standard":
            raise RuntimeError("out of memory")
        assert args.steps == 1
        return _trace(1.0, [0.0], [0.0], {})

    with pytest.raises(RuntimeError):
        _main_with(monkeypatch, ["--steps", "1", "--methods", "mt", "standard", "--out",
                                 str(tmp_path)], variant)
    text = (tmp_path / "graph-step-check.md").read_text()
    assert "## mt: 1 steps" in text and "graphs change nothing beyond rounding" in text
    asked = _main_with(monkeypatch, ["--steps", "1"], variant)
    assert asked == [True]
