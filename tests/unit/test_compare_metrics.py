"""benchmarks/compare_metrics.py: two results folders' per-image flags, model by model; bad input
(nothing compared, a file on one side only, flags cut short, a broken file) is one line, exit 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compare_metrics  # noqa: E402

FLAGS = {"PGD": "10110100", "CW": "11110000"}
MODEL = "metrics/digits/cnn/wscat/seed1.json"


def _write(results: Path, flags: dict | None = None, rel: str = MODEL, **data: object) -> Path:
    """One core metrics file (plus an extras file, which is not compared) under `results`."""
    path = results / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = FLAGS if flags is None else flags
    accuracy = {k: 100.0 * v.count("1") / len(v) for k, v in flags.items()}
    path.write_text(json.dumps({"accuracy": accuracy,
                                "per_image": {"order": "stratified", "correct": flags}, **data}))
    path.with_name(path.stem + "-extra.json").write_text("{}")
    return path


def _run(capsys, monkeypatch, *args: object) -> tuple[int, str, str]:
    """main() on the command line `args`: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["compare_metrics.py", *map(str, args)])
    try:
        compare_metrics.main()
        code = 0
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys, monkeypatch, *args: object) -> str:
    """The one line of a refusal; nothing on stdout."""
    code, out, err = _run(capsys, monkeypatch, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_same_and_differing_flags(tmp_path, capsys, monkeypatch):
    _write(tmp_path / "a")
    _write(tmp_path / "b")
    _write(tmp_path / "c", {"PGD": "00110100", "CW": "11110000"})
    assert _run(capsys, monkeypatch, tmp_path / "a", tmp_path / "b") == (
        0, "cnn/wscat seed1: flags differing {'PGD': 0, 'CW': 0}; accuracies moved {}\n"
           "total per-image flags differing: 0\n", "")
    code, out, _ = _run(capsys, monkeypatch, tmp_path / "a", tmp_path / "c")
    assert code == 1  # as diff: a script can check "no flag changed" by the status alone
    assert out == ("cnn/wscat seed1: flags differing {'PGD': 1, 'CW': 0}; accuracies moved "
                   "{'PGD': -12.5}\ntotal per-image flags differing: 1\n")


def test_each_line_names_the_model_and_a_list_of_flags_equals_its_string(tmp_path, capsys,
                                                                          monkeypatch):
    """Two models of one method are told apart; flags stored as a list (true/false or 1/0) on one
    side and as `wscat evaluate`'s string on the other are the same flags."""
    for results in (tmp_path / "a", tmp_path / "b"):
        _write(results)
        _write(results, rel="metrics/digits/lenet/wscat/seed1.json")
    listed = {"PGD": [True, False, True, True, False, True, False, False],
              "CW": [1, 1, 1, 1, 0, 0, 0, 1]}  # CW's last flag differs from "11110000"
    _write(tmp_path / "b", {k: "".join(str(int(x)) for x in v) for k, v in listed.items()})
    path = tmp_path / "b" / MODEL
    data = json.loads(path.read_text())
    data["per_image"]["correct"] = listed
    path.write_text(json.dumps(data))
    code, out, _ = _run(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert (code, out.splitlines()) == (1, [
        "cnn/wscat seed1: flags differing {'PGD': 0, 'CW': 1}; accuracies moved {'CW': 12.5}",
        "lenet/wscat seed1: flags differing {'PGD': 0, 'CW': 0}; accuracies moved {}",
        "total per-image flags differing: 1"])


@pytest.mark.parametrize("flags", [{"PGD": "1011x100", "CW": "11110000"},
                                   {"PGD": [1, 0, 2, 1, 0, 1, 0, 0], "CW": "11110000"},
                                   {"PGD": [1, 0, None, 1, 0, 1, 0, 0], "CW": "11110000"}])
def test_a_flag_other_than_0_and_1_is_refused(tmp_path, capsys, monkeypatch, flags):
    _write(tmp_path / "a")
    path = _write(tmp_path / "b")
    data = json.loads(path.read_text())
    data["per_image"]["correct"] = flags
    path.write_text(json.dumps(data))
    assert "per_image.correct PGD holds a flag other than 0 and 1" in _refused(
        capsys, monkeypatch, tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("where", ["missing", "dataset", "root"])
def test_nothing_compared_is_refused(tmp_path, capsys, monkeypatch, where):
    _write(tmp_path / "a" / "results")
    _write(tmp_path / "b" / "results")
    args = {"missing": (tmp_path / "nope", tmp_path / "nope2"),
            "dataset": (tmp_path / "a/results", tmp_path / "b/results", "--dataset", "digit"),
            "root": (tmp_path / "a", tmp_path / "b")}[where]
    assert "no metrics file" in _refused(capsys, monkeypatch, *args)


@pytest.mark.parametrize("empty", ["a", "b"])
def test_file_on_one_side_is_refused(tmp_path, capsys, monkeypatch, empty):
    (tmp_path / empty).mkdir()
    _write(tmp_path / ({"a": "b", "b": "a"}[empty]))
    err = _refused(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert f"has no counterpart {tmp_path / empty / MODEL}" in err


def test_flags_cut_short_are_refused(tmp_path, capsys, monkeypatch):
    _write(tmp_path / "a")
    new = _write(tmp_path / "b", {"PGD": "101", "CW": "11110000"})
    err = _refused(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert f"{new}: 3 per-image flags of PGD" in err and "has 8" in err


def test_other_attacks_are_refused(tmp_path, capsys, monkeypatch):
    _write(tmp_path / "a")
    _write(tmp_path / "b", {"PGD": "10110100"})
    assert "attacks ['PGD']" in _refused(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("text, says", [('{"accuracy":', "not readable JSON"),
                                        ('{"accuracy": {}}', "no per_image.correct"),
                                        ('[1, 2]', "no per_image.correct"),
                                        ('{"accuracy": {"PGD": 1}, "per_image": '
                                         '{"correct": {"PGD": 1}}}', "per_image.correct is not attack"),
                                        # NaN, infinity and true were compared as numbers (exit 0)
                                        *[(f'{{"accuracy": {{"PGD": {value}}}, "per_image": '
                                           '{"correct": {"PGD": "1"}}}',
                                           f"accuracy PGD is {value}, not a finite percentage")
                                          for value in ('"x"', "NaN", "Infinity", "true", "140")]])
def test_broken_file_is_refused(tmp_path, capsys, monkeypatch, text, says):
    for side in "ab":  # a good pair first: nothing of it printed either
        _write(tmp_path / side, rel="metrics/digits/cnn/pgd-at/seed1.json")
    _write(tmp_path / "a")
    _write(tmp_path / "b").write_text(text)
    err = _refused(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert f"{tmp_path / 'b' / MODEL}: {says}" in err


def test_script_exits_2(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/compare_metrics.py"),
                           str(tmp_path / "x"), str(tmp_path / "y")], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("compare_metrics: error: no metrics file")
