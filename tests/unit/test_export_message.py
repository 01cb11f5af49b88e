"""`wscat export`'s closing line names both files it wrote where they are: the state dict lies
beside the entry (docs/api.md, "Sharing a model"), so a `--out` in another folder must not be
printed as a bare file name that reads as one in the current folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from wscat import cli


def test_the_state_dict_is_named_beside_the_entry(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import wscat.export

    entry = {"name": "m", "clean_acc": "90.00", "autoattack_acc": "60.00", "eps": "0.15",
             "state_dict": "entry.pt"}
    monkeypatch.setattr(wscat.export, "export_model", lambda *args, **kwargs: entry)
    monkeypatch.chdir(tmp_path)
    out = Path("shared") / "entry.json"
    assert cli.main(["export", "--checkpoint", "c.pt", "--metrics", "m.json",
                     "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith(f"-> {out}, {Path('shared') / 'entry.pt'}"), line
