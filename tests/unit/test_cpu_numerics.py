"""benchmarks/cpu_numerics.py: its page and JSON from given digests, the comparison with another
machine's JSON, its refusals, and one real pair of trainings (the same bits twice)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from cpu_numerics import SETTINGS, main  # noqa: E402

TWO = ["default", "oneDNN off"]


def stub(digests: dict[tuple[str, int], str]):
    """A trainer that returns the given digest for (setting, repeat), and records its calls."""
    calls: list[tuple[str, int]] = []

    def train(setting: str, repeat: int) -> tuple[str, float]:
        calls.append((setting, repeat))
        return digests[(setting, repeat)], 1.0 + repeat

    train.calls = calls  # type: ignore[attr-defined]
    return train


def rows(page: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for line in page.splitlines() if line.startswith("| ")
            and not line.startswith("| setting") for cells in [line.strip("| \n").split(" | ")]}


def test_the_page_marks_what_differs_from_the_default_and_between_repeats(tmp_path: Path,
                                                                         capsys) -> None:
    out = tmp_path / "page.md"
    train = stub({("default", 0): "aa", ("default", 1): "aa", ("oneDNN off", 0): "bb",
                  ("oneDNN off", 1): "cc", ("MKL COMPATIBLE", 0): "aa",
                  ("MKL COMPATIBLE", 1): "aa"})
    assert main(["--settings", *TWO, "MKL COMPATIBLE", "--out", str(out)], train) == 0
    page = out.read_text()
    assert page == capsys.readouterr().out
    # The settings alternate, repeat by repeat: a slower hour touches every setting alike.
    assert train.calls == [(s, r) for r in (0, 1) for s in (*TWO, "MKL COMPATIBLE")]
    found = rows(page)
    assert found["default"][2:] == ["aa", "-", "1.0 / 2.0"]
    assert found["oneDNN off"][1:4] == ["off", "differ: bb, cc", "no"]
    assert found["MKL COMPATIBLE"][:4] == ["MKL_CBWR=COMPATIBLE", "on", "aa", "yes"]
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["epochs"] == 3 and record["machine"]["cpu"] in page
    assert record["settings"]["oneDNN off"] == {"env": {}, "onednn": False,
                                                "digests": ["bb", "cc"], "seconds": [1.0, 2.0]}


def test_another_machines_json_is_compared_setting_by_setting(tmp_path: Path, capsys) -> None:
    there = tmp_path / "there.md"
    assert main(["--settings", "default", "--repeats", "1", "--out", str(there)],
                stub({("default", 0): "aa"})) == 0
    capsys.readouterr()
    assert main(["--settings", *TWO, "--repeats", "1", "--compare",
                 str(there.with_suffix(".json"))],
                stub({("default", 0): "aa", ("oneDNN off", 0): "bb"})) == 0
    found = rows(capsys.readouterr().out)
    assert found["default"][-2:] == ["aa", "yes"]
    assert found["oneDNN off"][-2:] == ["not run", "no"]
    # Without the default here, no row claims to differ from it.
    assert main(["--settings", "oneDNN off", "--repeats", "1"],
                stub({("oneDNN off", 0): "bb"})) == 0
    assert rows(capsys.readouterr().out)["oneDNN off"][3] == "-"


@pytest.mark.parametrize(("argv", "says"), [
    (["--epochs", "0"], "must be 1 or more"),
    (["--repeats", "0"], "must be 1 or more"),
    (["--out", "page.txt"], "give a .md file"),
    (["--work", "no-such-folder"], "not a folder"),
    (["--settings", "fast"], "invalid choice"),
])
def test_bad_arguments_are_refused_in_one_line(argv: list[str], says: str, tmp_path: Path,
                                               monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(argv, stub({}))
    assert stopped.value.code == 2
    assert says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "not readable as this script's JSON"),
    ('{"a": 1}', "not this script's JSON"),
    ('{"machine": {}, "settings": {"default": {"digests": []}}, "epochs": 3}',
     "setting 'default' holds no digests"),
    ('{"machine": {}, "settings": {"default": 1}, "epochs": 3}', "holds no digests"),
    ('{"machine": {}, "settings": {}, "epochs": 5}', "trained 5 epochs, these 3; run with "
                                                     "--epochs 5"),
])
def test_a_bad_compare_file_is_refused_before_any_training(text: str, says: str, tmp_path: Path,
                                                           capsys) -> None:
    other, out = tmp_path / "other.json", tmp_path / "page.md"
    other.write_text(text)
    train = stub({})
    assert main(["--compare", str(other), "--out", str(out)], train) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cpu_numerics: error: --compare") and says in err[0]
    assert train.calls == [] and not out.exists()


def test_every_setting_names_only_kernel_variables() -> None:
    """A setting changes kernels, nothing else the run reads (its one thread stays)."""
    from cpu_numerics import KERNEL_VARIABLES

    assert SETTINGS["default"] == ({}, True)
    assert all(set(env) <= set(KERNEL_VARIABLES) for env, _ in SETTINGS.values())


@pytest.mark.slow
def test_two_real_trainings_of_one_setting_give_the_same_weights(tmp_path: Path, capsys) -> None:
    out = tmp_path / "page.md"
    assert main(["--epochs", "1", "--settings", "default", "--work", str(tmp_path),
                 "--out", str(out)]) == 0
    digests = json.loads(out.with_suffix(".json").read_text())["settings"]["default"]["digests"]
    assert len(digests) == 2 and digests[0] == digests[1] and len(digests[0]) == 16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.json", "page.md"]  # work removed


@pytest.mark.parametrize(("switch", "enabled"), [("off", "False"), ("on", "True")])
def test_the_wrapper_switches_onednn_before_wscat_starts(switch: str, enabled: str) -> None:
    """WRAPPER as the trainings run it, `wscat` itself replaced by a print of oneDNN's switch."""
    import subprocess

    from cpu_numerics import WRAPPER

    entry = "from wscat.entry import console\n"
    assert entry in WRAPPER
    probe = WRAPPER.replace(entry, "console = lambda: print(torch.backends.mkldnn.enabled) or 0\n")
    done = subprocess.run([sys.executable, "-c", probe, switch, "train"], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == enabled
