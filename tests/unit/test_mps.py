"""benchmarks/mps.py on a stand-in for nvidia-cuda-mps-control (a shell script that keeps its
state in the pipe folder, as the daemon keeps its pipes there): it starts, checks with a probe
client, reports the server, stops; and every way it can fail leaves no daemon and says why."""
from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import mps  # noqa: E402

FAKE = """#!/bin/sh
pipe="$CUDA_MPS_PIPE_DIRECTORY"
if [ "$1" = "-d" ]; then
  [ -n "$FAKE_DAEMON_FAILS" ] && { echo "cannot start" >&2; exit 1; }
  echo running > "$pipe/daemon"; exit 0
fi
[ -f "$pipe/daemon" ] || exit 1
read command
case "$command" in
  get_server_list) [ -f "$pipe/server" ] && cat "$pipe/server"; exit 0 ;;
  quit) rm -f "$pipe/daemon" "$pipe/server"; echo quit >> "$CUDA_MPS_LOG_DIRECTORY/quits";
        exit 0 ;;
esac
exit 1
"""
SERVER = ("import os; open(os.path.join(os.environ['CUDA_MPS_PIPE_DIRECTORY'], 'server'), 'w')"
          ".write('4242'); ")  # a client's first CUDA call makes the daemon start a server
CLIENT = SERVER + mps.SERVERS  # the real probe, its CUDA computation left out


@pytest.fixture
def control(tmp_path: Path) -> str:
    path = tmp_path / "bin" / mps.CONTROL
    path.parent.mkdir()
    path.write_text(FAKE)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def quits(folder: Path) -> int:
    log = folder / "log" / "quits"
    return len(log.read_text().split()) if log.is_file() else 0


def test_it_starts_checks_the_probe_and_stops(tmp_path: Path, control: str) -> None:
    folder = tmp_path / "mps"
    service, note = mps.start(folder, probe=[sys.executable, "-c", CLIENT], control=control)
    assert service is not None, note
    assert note.startswith("MPS on (server 4242;")
    assert service.env["CUDA_MPS_PIPE_DIRECTORY"] == str(folder / "pipe")
    assert service.env["CUDA_MPS_LOG_DIRECTORY"] == str(folder / "log")
    assert service.servers() == ["4242"]
    assert service.stop() and quits(folder) == 1
    assert service.servers() == []  # the daemon is gone: nothing answers


@pytest.mark.parametrize("probe, why", [
    ("raise SystemExit(3)", "a CUDA probe failed under it (exit 3"),
    (mps.SERVERS, "a CUDA probe failed under it (no MPS server ran the probe)"),
])
def test_a_failed_probe_stops_the_daemon_again(tmp_path: Path, control: str, probe: str,
                                               why: str) -> None:
    folder = tmp_path / "mps"
    service, note = mps.start(folder, probe=[sys.executable, "-c", probe], control=control)
    assert service is None and why in note and "take turns on the card" in note
    assert quits(folder) == 1 and not (folder / "pipe" / "daemon").exists()


def test_a_daemon_that_does_not_start_or_is_not_there(tmp_path: Path, control: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DAEMON_FAILS", "1")
    service, note = mps.start(tmp_path / "mps", probe=[sys.executable, "-c", CLIENT],
                              control=control)
    assert service is None and "-d exited 1 (cannot start)" in note
    monkeypatch.setattr(mps, "find_control", lambda: None)
    service, note = mps.start(tmp_path / "other")
    assert service is None and note.startswith(f"no {mps.CONTROL} on this machine")



def test_stop_waits_a_short_time_and_other_commands_the_usual(
        tmp_path: Path, control: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop comes after a run's deadline, with ~20 s left before the run is killed and its
    results lost: 'quit' gets 5 s to answer, not the 20 s of the other control commands."""
    folder = tmp_path / "mps"
    service, note = mps.start(folder, probe=[sys.executable, "-c", CLIENT], control=control)
    assert service is not None, note
    timeouts: dict[str, float] = {}
    run = subprocess.run

    def recorded(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        timeouts[kwargs["input"].strip()] = kwargs["timeout"]
        return run(argv, **kwargs)

    monkeypatch.setattr(mps.subprocess, "run", recorded)
    assert service.servers() == ["4242"] and service.stop() and quits(folder) == 1
    assert timeouts == {"get_server_list": 20, "quit": 5}
