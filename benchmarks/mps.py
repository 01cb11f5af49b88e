"""NVIDIA's Multi-Process Service for the steps of one GPU call: start it, check it, stop it.

Without MPS the processes that share a card take turns on it (each CUDA context gets the whole
card for a time slice), so a step that launches many small kernels and waits for each result
(AutoAttack: FAB-T, Square) waits a turn behind every training's queue: on the H100, Mean
Teacher's core evaluation took 431 s beside four trainings against ~57 s for a more robust model
alone (benchmarks/results/cifar10-proxy-h100-seed1-partial-2.md). Under MPS the processes' kernels
share the card at once. It changes no setting of the card (clocks, compute mode, MIG stay as they
are) and no result (each process runs the same kernels); `stop` ends the daemon before the call
returns. A step started with `Mps.env` is an MPS client; where MPS cannot start, or a probe
process fails under it, the daemon is stopped and the steps share the card as before.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"
DRIVER_BIN = Path("/usr/local/nvidia/bin")  # where the lent machines' driver tools may live
CONTROL_S = 20.0  # how long a control command may take to answer
STOP_S = 5.0  # how long 'quit' may take: the stop comes after a run's deadline
# The probe client: a small CUDA computation, then, with its context still open, the servers the
# daemon runs (the one serving it, where it is an MPS client), printed as 'mps-servers PID...'.
SERVERS = ("import os, subprocess; print('mps-servers', subprocess.run("
           "[os.environ['WSCAT_MPS_CONTROL']], input='get_server_list\\n', capture_output=True, "
           "text=True, timeout=20).stdout.strip(), flush=True)")
PROBE = ("import torch; x = torch.arange(4096, device='cuda', dtype=torch.float32); "
         "assert float((x * 2).sum()) == 4096 * 4095; torch.cuda.synchronize(); " + SERVERS)


@dataclass
class Mps:
    """A running MPS daemon: the environment its clients need, and the control program."""

    control: str
    env: dict[str, str]

    def servers(self) -> list[str]:
        """The PIDs of the MPS servers the daemon runs (one once a client has connected)."""
        out = _control(self.control, self.env, "get_server_list\n")
        return out.split() if out is not None else []

    def stop(self) -> bool:
        """Ask the daemon to quit (it ends its servers); whether it answered within STOP_S (a
        run stops it after its deadline, with little time left to save its results)."""
        return _control(self.control, self.env, "quit\n", timeout_s=STOP_S) is not None


def _control(control: str, env: dict[str, str], command: str,
             timeout_s: float = CONTROL_S) -> str | None:
    """One command to the daemon on its stdin; its answer, or None where it did not answer
    within `timeout_s`."""
    try:
        done = subprocess.run([control], input=command, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _one_line(output: str) -> str:
    """A program's output as one line: the note is one line of a run's progress log, and a
    probe's traceback or a daemon's error spans several."""
    return " ".join(output.split())


def find_control() -> str | None:
    """The MPS control program on PATH or in the driver's folder, or None."""
    found = shutil.which(CONTROL)
    if found is None and (DRIVER_BIN / CONTROL).is_file():
        found = str(DRIVER_BIN / CONTROL)
    return found


def start(folder: Path, *, probe: list[str] | None = None,
          control: str | None = None) -> tuple[Mps | None, str]:
    """Start the daemon with its pipe and log folders under `folder`, then run `probe` (default:
    PROBE, in this Python) as its client: (the daemon, what happened), or (None, why not) with
    the daemon stopped again. The probe passes when it exits 0 and names a server it saw while
    it ran (its 'mps-servers' line): a client that could not reach the daemon runs without MPS
    (the driver falls back silently), and no server would serve it."""
    control = control or find_control()
    if control is None:
        return None, f"no {CONTROL} on this machine; the steps take turns on the card"
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"),
           "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
    for name in ("pipe", "log"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    try:
        daemon = subprocess.run([control, "-d"], env=env, capture_output=True, text=True,
                                timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"{CONTROL} -d did not start ({error}); the steps take turns on the card"
    if daemon.returncode != 0:
        return None, (f"{CONTROL} -d exited {daemon.returncode} "
                      f"({_one_line(daemon.stderr or daemon.stdout)[:200]}); the steps take turns "
                      "on the card")
    mps = Mps(control, env)
    servers: list[str] = []
    try:
        checked = subprocess.run(probe or [sys.executable, "-c", PROBE],
                                 env={**env, "WSCAT_MPS_CONTROL": control}, capture_output=True,
                                 text=True, timeout=120)
        failed = (f"exit {checked.returncode}: {_one_line(checked.stderr or '')[-300:]}"
                  if checked.returncode != 0 else "")
        for line in checked.stdout.splitlines():
            if line.startswith("mps-servers"):
                servers = line.split()[1:]
    except (OSError, subprocess.TimeoutExpired) as error:
        failed = str(error)
    if not failed and not servers:
        failed = "no MPS server ran the probe"
    if failed:
        mps.stop()
        return None, f"MPS started but a CUDA probe failed under it ({failed}); stopped it, the " \
                     "steps take turns on the card"
    return mps, f"MPS on (server {servers[0]}; pipe {folder / 'pipe'}): the steps share the card"


class NotRunning(RuntimeError):
    """`--mps on`, but MPS did not start; `note` says why."""

    def __init__(self, note: str) -> None:
        super().__init__("--mps on, but MPS is not running; run with --mps auto or off")
        self.note = note


def start_as(mode: str, folder: Path, *, device: str = "cuda") -> tuple[Mps | None, str]:
    """A script's `--mps auto|on|off`: off (or a device that is not CUDA) starts nothing; auto
    starts MPS where it can (`start`), else goes on without; on raises NotRunning where it
    cannot."""
    if mode == "off" or not device.startswith("cuda"):
        where = f"--mps {mode}" + ("" if device.startswith("cuda") else f", --device {device}")
        return None, f"off ({where}): the steps take turns on the card"
    service, note = start(folder)
    if mode == "on" and service is None:
        raise NotRunning(note)
    return service, note
