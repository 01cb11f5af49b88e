"""params.yaml as a user writes it: a key given twice, a number YAML 1.1 reads as text (1e-4), a
value none of a oneOf's branches takes. Each is refused in one line that says what to write,
through every entry point: wscat.config.load_params (the steps, wscat.api), `python -m wscat`
(exit 2) and `snakemake -n` (the workflow's parse-time check)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN
from tests.helpers.tiny import ROOT
from tests.workflow.test_workflow import copy_workflow, real_params
from wscat import api, cli
from wscat.config import ConfigError, load_params, stop_on_bad_yaml, validate_params
from wscat.schema_messages import number_hint
from wscat.strict_yaml import DuplicateKeyError, StrictLoader

REAL = (ROOT / "params.yaml").read_text()
SPLIT = ["split", "--dataset", "digits", "--seed", "1", "--out", "out/s.npz"]


def _line_of(text: str, pattern: str, after: int = 0) -> int:
    """The 1-based number of the first line at or after line `after` that matches `pattern`."""
    lines = text.splitlines()
    return next(i + 1 for i in range(after, len(lines)) if re.search(pattern, lines[i]))


def duplicated_epochs() -> tuple[str, int, int]:
    """The real params.yaml with `epochs: 2` added to training.digits after batch_size (the
    user's report): (text, line of the first epochs, line of the second)."""
    start = _line_of(REAL, r"^training:")
    first = _line_of(REAL, r"^    epochs: 40", start)
    batch = _line_of(REAL, r"^    batch_size:", first)
    lines = REAL.splitlines(keepends=True)
    lines.insert(batch, "    epochs: 2\n")
    return "".join(lines), first, batch + 1


def replaced(pattern: str, literal: str, after: str = "") -> str:
    """The real params.yaml with the first line matching `pattern` (after the first line matching
    `after`) given `literal` as its value."""
    number = _line_of(REAL, pattern, _line_of(REAL, after) if after else 0)
    lines = REAL.splitlines(keepends=True)
    key = lines[number - 1].split(":")[0]
    lines[number - 1] = f"{key}: {literal}\n"
    return "".join(lines)


def run_cli(tmp_path: Path, text: str, capsys, monkeypatch) -> str:
    """`wscat split --params bad.yaml` in-process: exit 2, one line, nothing written."""
    (tmp_path / "bad.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = cli.main([*SPLIT, "--params", "bad.yaml"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err and "unexpected" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"], "the step wrote files"
    return lines[0]


# --- 1. a key given twice -----------------------------------------------------------------

def test_strict_loader_reads_the_real_params_as_safe_load_does():
    assert yaml.load(REAL, Loader=StrictLoader) == yaml.safe_load(REAL)


@pytest.mark.parametrize("text, where, lines", [
    ("a: 1\nb: 2\na: 3\n", "a", (1, 3)),
    ("x:\n  y:\n    - {k: 1, k: 2}\n", "x.y.0.k", (3, 3)),
    ("x:\n  y: 1\nz:\n  w: 2\n  w: 2\n", "z.w", (4, 5)),
])
def test_a_key_given_twice_is_refused_with_its_path_and_lines(text, where, lines):
    with pytest.raises(DuplicateKeyError) as error:
        yaml.load(text, Loader=StrictLoader)
    assert f"duplicate key {where}: given on line {lines[0]}" in str(error.value)
    assert f"and on line {lines[1]}" in str(error.value) and "keep one" in str(error.value)


def test_a_merge_key_may_still_be_overridden():
    text = "base: &base {x: 1, y: 2}\nother:\n  <<: *base\n  x: 3\n"
    assert yaml.load(text, Loader=StrictLoader)["other"] == {"x": 3, "y": 2}


def test_load_params_refuses_a_duplicated_key(tmp_path):
    text, first, second = duplicated_epochs()
    assert yaml.safe_load(text)["training"]["digits"]["epochs"] == 2  # what YAML alone does
    (tmp_path / "params.yaml").write_text(text)
    for load in (load_params, api.load_params):
        with pytest.raises(ConfigError) as error:
            load(tmp_path / "params.yaml")
        message = str(error.value)
        assert "duplicate key training.digits.epochs" in message, message
        assert f"line {first} (40) and on line {second} (2); keep one" in message, message
        assert "\n" not in message


def test_cli_refuses_a_duplicated_key_in_one_line(tmp_path, capsys, monkeypatch):
    text, first, second = duplicated_epochs()
    line = run_cli(tmp_path, text, capsys, monkeypatch)
    assert "duplicate key training.digits.epochs" in line and f"line {second}" in line, line


def test_snakefile_check_stops_on_a_duplicated_key(tmp_path, capsys):
    (tmp_path / "params.yaml").write_text(duplicated_epochs()[0])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        stop_on_bad_yaml(tmp_path / "params.yaml")
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(err) == 1, err
    assert "duplicate key training.digits.epochs" in err[0], err


def test_snakefile_check_names_a_missing_params_file_unless_configfile_gives_one(
        tmp_path, capsys, monkeypatch):
    """Snakemake run outside the repository root (no params.yaml there): one line saying where
    to run it, exit 2, not Snakemake's two-line WorkflowError; with `--configfile` Snakemake loads
    that file alone, and the Python API (no command line) is left to Snakemake."""
    from types import SimpleNamespace

    import wscat.slurm_preflight as preflight

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight, "cli_args", lambda: SimpleNamespace(configfile=None))
    with pytest.raises(SystemExit) as stopped:
        stop_on_bad_yaml("params.yaml")
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"wscat: no params.yaml in {tmp_path}: run snakemake from the "
                             "repository root"), err
    monkeypatch.setattr(preflight, "cli_args",
                        lambda: SimpleNamespace(configfile=[tmp_path / "mine.yaml"]))
    stop_on_bad_yaml("params.yaml")
    monkeypatch.setattr(preflight, "cli_args", lambda: None)
    stop_on_bad_yaml("params.yaml")
    assert capsys.readouterr().err == ""


def test_python_m_wscat_exits_2_with_one_line(tmp_path):
    (tmp_path / "bad.yaml").write_text(duplicated_epochs()[0])
    result = subprocess.run([sys.executable, "-m", "wscat", *SPLIT, "--params", "bad.yaml"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "duplicate key training.digits.epochs" in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


@pytest.mark.slow  # 3-5 s: Snakemake starts and parses the workflow
@pytest.mark.parametrize("configfile", [None, "mine.yaml"])
def test_dry_run_stops_on_a_duplicated_key(tmp_path, env, configfile):
    """Snakemake's own loader keeps the last value: params.yaml (before `configfile:`) and a
    --configfile (when the workflow validates it) are re-read with the strict loader."""
    folder = copy_workflow(tmp_path / "wf", real_params())
    name = configfile or "params.yaml"
    (folder / name).write_text(duplicated_epochs()[0])
    extra = ["--configfile", configfile] if configfile else []
    result = subprocess.run([str(BIN / "snakemake"), "-n", *extra], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "duplicate key training.digits.epochs" in lines[-1], result.stderr
    assert len(lines) == 1 or configfile, result.stderr  # (Snakemake's own note on --configfile)
    assert "Building DAG" not in result.stdout + result.stderr


# --- 2. a number YAML reads as text ---------------------------------------------------------

@pytest.mark.parametrize("text, integer, written", [
    ("1e-4", False, "1.0e-4"), ("1e9", False, "1.0e+9"), ("1E-4", False, "1.0e-4"),
    ("-2.5e3", False, "-2.5e+3"), (".5e2", False, "0.5e+2"), ("1e2", True, "100"),
    ("1e9", True, "1000000000"),
])
def test_number_hint_is_what_yaml_reads_as_that_number(text, integer, written):
    assert yaml.safe_load(text) == text  # the trap: YAML 1.1 reads it as a string
    assert number_hint(text, integer) == written
    assert yaml.safe_load(written) == float(text)
    assert isinstance(yaml.safe_load(written), int if integer else float)


@pytest.mark.parametrize("text", ["abc", "1e", "e5", "1.2.3", "0x10", ""])
def test_number_hint_leaves_text_alone(text):
    assert number_hint(text) is None


@pytest.mark.parametrize("key, literal, message", [
    ("weight_decay", "1e-4", "training.digits.weight_decay: '1e-4' is read as text by YAML: "
                             "write 1.0e-4"),
    ("lr", "1e9", "training.digits.lr: '1e9' is read as text by YAML: write 1.0e+9"),
    ("epochs", "1e2", "training.digits.epochs: '1e2' is read as text by YAML: write 100"),
    ("lr", '"0.5"', "training.digits.lr: '0.5' is read as text by YAML: write 0.5 without quotes"),
])
def test_scientific_notation_says_what_to_write(tmp_path, capsys, monkeypatch, key, literal,
                                                message):
    text = replaced(rf"^    {key}:", literal, after=r"^training:")
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_params(tmp_path / "params.yaml")
    (tmp_path / "cli").mkdir()
    line = run_cli(tmp_path / "cli", text, capsys, monkeypatch)
    assert message in line and "is not of type" not in line, line


def test_text_that_is_no_number_keeps_the_type_message():
    params = yaml.safe_load(REAL)
    params["training"]["digits"]["lr"] = "fast"
    with pytest.raises(ConfigError, match="'fast' is not of type 'number'"):
        validate_params(params)


# --- 3. a value none of a oneOf's branches takes --------------------------------------------

@pytest.mark.parametrize("path, value, where", [
    (("evaluation", "n_examples"), 0, "evaluation.n_examples: 0"),
    (("evaluation", "n_examples"), "all", "evaluation.n_examples: 'all'"),
    (("datasets", "digits", "labelled"), -3, "datasets.digits.labelled: -3"),
])
def test_one_of_says_which_values_are_valid(path, value, where):
    params = yaml.safe_load(REAL)
    section = params
    for key in path[:-1]:
        section = section[key]
    section[path[-1]] = value
    with pytest.raises(ConfigError) as error:
        validate_params(params)
    message = str(error.value)
    assert f"{where} is not valid: give null or an integer >= 1" in message, message
    assert "under any of the given schemas" not in message and "\n" not in message


def test_cli_n_examples_0_says_which_values_are_valid(tmp_path, capsys, monkeypatch):
    text = replaced(r"^  n_examples:", "0", after=r"^evaluation:")
    line = run_cli(tmp_path, text, capsys, monkeypatch)
    assert "evaluation.n_examples: 0 is not valid: give null or an integer >= 1" in line, line
    assert "null: every image" in line, line


def test_a_method_passes_the_schema_check_only_on_its_own_settings():
    """wscat.config skips methods whose settings passed already in the process; a setting no
    JSON text tells apart from a valid one (a date that prints like a valid string, a number as a
    key) is checked every time, and refused in one line, not by a traceback."""
    params = yaml.safe_load(REAL)
    text = "datetime.date(2020, 1, 1)"
    params["methods"]["dmat"]["generated"] = text  # a string: valid, and now known as valid
    validate_params(params)
    params["methods"]["dmat"]["generated"] = yaml.safe_load("2020-01-01")
    with pytest.raises(ConfigError, match=r"methods\.dmat\.generated: .* give null or a string"):
        validate_params(params)
    params = yaml.safe_load(REAL)
    params["methods"]["trades"]["per_dataset"] = {"digits": {1: 2}}
    with pytest.raises(ConfigError, match=r"per_dataset\.digits: 1 is not one of \['base'"):
        validate_params(params)


def test_every_comment_survives_repeated_dvc_sweeps(tmp_path: Path) -> None:
    """`dvc exp run -S` rewrites params.yaml with DVC's own writer (dvc.utils.hydra), which turns
    every list into a block list and replaces a list whole: a comment placed after a list then
    belongs to its last item and the next sweep drops it (14 lines did, the paper tier's header
    among them). params.yaml keeps its comments inside entries: three sweeps of a value and one
    of a list keep every line, and the values read back as set."""
    from dvc.utils.hydra import apply_overrides

    path = tmp_path / "params.yaml"
    path.write_text(REAL)
    for override in ["methods.wscat.beta=0.1"] * 3 + ["experiments.digits.seeds=[1,2]"]:
        apply_overrides(path, [override])
    comments = [line.strip() for line in REAL.splitlines() if line.strip().startswith("#")]
    kept = {line.strip() for line in path.read_text().splitlines()}
    assert [line for line in comments if line not in kept] == []
    swept = yaml.safe_load(path.read_text())
    assert swept["methods"]["wscat"]["beta"] == 0.1
    assert swept["experiments"]["digits"]["seeds"] == [1, 2]
