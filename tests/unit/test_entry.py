"""The installed `wscat` command starts in wscat.entry, which guards the import of wscat.cli (and
torch): a Ctrl-C in the first tenth of a second printed a 23-34 line traceback from the
generated script's `from wscat.cli import console`; it is one line and exit 130, as
`python -m wscat` has it."""
from __future__ import annotations

import builtins
import tomllib
from pathlib import Path
from typing import Any

import pytest

from wscat import entry
from wscat.errors import INTERRUPTED

ROOT = Path(__file__).resolve().parents[2]


def test_the_command_starts_in_the_guarded_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"wscat": "wscat.entry:console"}
    assert entry.INTERRUPTED == INTERRUPTED


def test_ctrl_c_while_wscat_cli_loads_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    real = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "wscat.cli":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert entry.console() == INTERRUPTED
    err = capsys.readouterr().err
    assert err == "wscat: error: interrupted while starting; nothing was written\n", err


def test_otherwise_it_is_wscat_cli_console(monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat import cli

    monkeypatch.setattr(cli, "console", lambda: 7)
    assert entry.console() == 7
