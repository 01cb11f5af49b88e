"""A params file refused in one line that names the file actually read and what to do: text that
is not UTF-8, a binary file (a checkpoint, an .npz) passed as --params, and schema errors of a
file not called params.yaml, pointing at a schema file that exists from any folder."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers.tiny import ROOT
from wscat import cli
from wscat.config import SCHEMA_PATH, ConfigError, load_params, validate_params

REAL = (ROOT / "params.yaml").read_text()


def refusal(folder: Path, name: str, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> str:
    """`wscat list-experiments --params NAME` run in `folder`: exit 2, one line, no traceback."""
    monkeypatch.chdir(folder)
    capsys.readouterr()
    code = cli.main(["list-experiments", "--params", name])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and "codec" not in err, err
    return err


def test_latin1_params_names_the_file_and_the_byte(tmp_path: Path, capsys, monkeypatch) -> None:
    """A Latin-1 byte: the file, where the byte is, and to save it as UTF-8."""
    (tmp_path / "p.yaml").write_bytes(b"# caf\xe9\n" + REAL.encode())
    with pytest.raises(ConfigError, match=re.escape(
            "p.yaml is not a UTF-8 text file: byte 0xe9 on line 1, column 6; save it as UTF-8")):
        load_params(tmp_path / "p.yaml")
    assert "p.yaml is not a UTF-8 text file" in refusal(tmp_path, "p.yaml", capsys, monkeypatch)


def test_checkpoint_as_params_says_it_is_a_checkpoint(tmp_path: Path, capsys,
                                                      monkeypatch) -> None:
    """`--params run/best.pt`: named a checkpoint, with the file to pass instead."""
    (tmp_path / "run").mkdir()
    torch.save({"model": {"w": torch.zeros(2)}}, tmp_path / "run" / "best.pt")
    line = refusal(tmp_path, "run/best.pt", capsys, monkeypatch)
    assert "run/best.pt is a PyTorch checkpoint (.pt), not a params file: pass params.yaml" \
        in line, line


def test_npz_as_params_says_it_is_not_a_params_file(tmp_path: Path, capsys,
                                                     monkeypatch) -> None:
    """`--params s.npz` (arrays): refused as not a params file, not a decode error."""
    np.savez(tmp_path / "s.npz", x=np.arange(300))
    line = refusal(tmp_path, "s.npz", capsys, monkeypatch)
    assert "s.npz is an .npz of other arrays (x), not a params file: pass params.yaml" in line, line


def test_unknown_binary_file_is_called_binary(tmp_path: Path) -> None:
    """A binary file of no wscat kind: called binary, with the file to pass."""
    (tmp_path / "blob.yaml").write_bytes(b"a: 1\n\0\xff\xfe")
    with pytest.raises(ConfigError, match=r"blob.yaml is a binary file, not YAML text; pass the "
                                          r"params \.yaml file$"):
        load_params(tmp_path / "blob.yaml")


def test_a_pipe_as_params_is_there_but_no_file(tmp_path: Path) -> None:
    """A FIFO given as the params: not "not found" (it is there), and never read (it would
    wait for a writer for ever)."""
    import os

    os.mkfifo(tmp_path / "fifo.yaml")
    with pytest.raises(ConfigError, match=r"fifo.yaml is not a regular file \(a pipe or a "
                                          r"device\); pass the file itself$"):
        load_params(tmp_path / "fifo.yaml")
    with pytest.raises(ConfigError, match=r"^params file not found: \S*none.yaml"):
        load_params(tmp_path / "none.yaml")


@pytest.mark.parametrize("inside", [True, False])
def test_schema_error_names_the_file_read_and_an_existing_schema(
        tmp_path: Path, capsys, monkeypatch, inside: bool) -> None:
    """`--params p1.yaml` with an unknown key: "in p1.yaml", and the schema pointer opens from the
    folder the command ran in (the checkout's root, or anywhere else)."""
    params = yaml.safe_load(REAL)
    params["zzz"] = 1
    (tmp_path / "p1.yaml").write_text(yaml.safe_dump(params))
    folder, name = (ROOT, str(tmp_path / "p1.yaml")) if inside else (tmp_path, "p1.yaml")
    line = refusal(folder, name, capsys, monkeypatch)
    assert f"unknown key in {name} at <top level>" in line and "params.yaml" not in line, line
    pointer = re.search(r"\(see (\S+)\)$", line.strip())
    assert pointer is not None and (folder / pointer[1]).resolve() == SCHEMA_PATH, line


def test_number_and_reference_errors_name_the_file_read(tmp_path: Path) -> None:
    """NaN, and a cross-reference the schema cannot check, in p2.yaml: "in p2.yaml"."""
    params = yaml.safe_load(REAL)
    params["training"]["digits"]["lr"] = float("nan")
    (tmp_path / "p2.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"bad value in \S*p2.yaml at training.digits.lr: nan"):
        load_params(tmp_path / "p2.yaml")
    params = yaml.safe_load(REAL)
    experiment = next(iter(params["experiments"].values()))
    del params["training"][experiment["dataset"]]
    (tmp_path / "p2.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"under training: in \S*p2.yaml; add one"):
        load_params(tmp_path / "p2.yaml")


def test_params_given_as_a_mapping_still_say_params_yaml() -> None:
    """validate_params on a dict (wscat.api, the benchmarks): the old wording, params.yaml."""
    params = yaml.safe_load(REAL)
    params["zzz"] = 1
    with pytest.raises(ConfigError, match="unknown key in params.yaml at <top level>"):
        validate_params(params)


def _refused(params: dict) -> str:
    with pytest.raises(ConfigError) as error:
        validate_params(params)
    line = str(error.value)
    assert "\n" not in line and "^" not in line, line  # one line, no regular expression
    return line


@pytest.mark.parametrize("edit, expected", [
    (lambda p: p["methods"].update(MART=p["methods"].pop("trades")),
     "bad name in params.yaml at methods: 'MART' is not a method name (a lowercase letter, then "
     "lowercase letters, digits, '.' or '-'): write mart"),
    (lambda p: p["datasets"].update({"my digits": p["datasets"].pop("digits")}),
     "bad name in params.yaml at datasets: 'my digits' is not a name (a lowercase letter"),
    (lambda p: p["experiments"]["digits"]["methods"].append("Wscat"),
     "at experiments.digits.methods.5: 'Wscat' is not a method name (a lowercase letter, then "
     "lowercase letters, digits, '.' or '-'): write wscat"),
    (lambda p: p["methods"]["trades"].update(objective="trade"),
     "at methods.trades.objective: 'trade' is not valid: give one of 'standard', 'trades', "
     "'rlfat', 'wscat', 'mean_teacher', 'puat' or FILE.py:Class (your own method's file and "
     "class: examples/mart.py:Mart)"),
])
def test_a_name_its_pattern_refuses_is_said_in_words(edit, expected: str) -> None:
    """A name or objective the schema refuses by a pattern: what it must look like, in words
    (the pattern's title), and the lowercase spelling where that is one."""
    params = yaml.safe_load(REAL)
    edit(params)
    assert expected in _refused(params)


@pytest.mark.parametrize("section, wrong, right, kind", [
    (("methods", "wscat"), "betta", "beta", "bad value"),  # unevaluatedProperties: objectives
    (("methods", "trades"), "lamda", "lam", "bad value"),
    (("training", "digits"), "epoch", "epochs", "unknown key"),  # additionalProperties
    (("evaluation",), "pgd_step", "pgd_steps", "unknown key"),
    (("datasets", "digits"), "labeled", "labelled", "unknown key"),
])
def test_a_misspelt_key_gets_the_key_it_is_close_to(section: tuple[str, ...], wrong: str,
                                                    right: str, kind: str) -> None:
    """A key the schema does not take, close to one it does (also one a branch of the method's
    objective brings): the line names it, as the SLURM pre-flight does for the profile's keys."""
    params = yaml.safe_load(REAL)
    node = params
    for key in section:
        node = node[key]
    node[wrong] = node.pop(right)
    line = _refused(params)
    assert f"{kind} in params.yaml at {'.'.join(section)}: Additional properties are not " \
           f"allowed ('{wrong}' was unexpected); did you mean {right}?" in line, line


def test_a_key_close_to_none_gets_no_guess() -> None:
    params = yaml.safe_load(REAL)
    params["evaluation"]["zzz"] = 1
    line = _refused(params)
    assert "('zzz' was unexpected)" in line and "did you mean" not in line, line


def test_a_bad_objective_is_named_before_the_knobs_it_would_need() -> None:
    """A new method whose objective is neither built in nor FILE.py:Class: the objective is what
    to fix (not the `data` and `selection` that every method needs beside it)."""
    params = yaml.safe_load(REAL)
    params["methods"]["mart"] = {"objective": "examples/mart.py"}
    line = _refused(params)
    assert "at methods.mart.objective: 'examples/mart.py' is not valid" in line, line
    params["methods"]["mart"] = {"objective": "examples/mart.py:Mart"}
    assert "at methods.mart: 'data' is a required property" in _refused(params)


@pytest.mark.parametrize("dotted, expected", [
    ("training.digits.epochs", "at training.digits.epochs: null (an empty value) is not an "
                               "integer >= 1: give one"),
    ("datasets.digits.eps", "at datasets.digits.eps: null (an empty value) is not a number >= 0 "
                            "and <= 1: give one"),
    ("training.digits.precision", "at training.digits.precision: null (an empty value) is not "
                                  "one of 'fp32', 'bf16': give one"),
    ("methods.trades.objective", "at methods.trades.objective: null (an empty value) is not "
                                 "valid: give one of 'standard'"),
])
def test_a_value_left_empty_is_called_empty(tmp_path: Path, dotted: str, expected: str) -> None:
    """`epochs:` with nothing after it: YAML reads null, and the line said "None is not of type
    'integer'" (Python's word, and no advice)."""
    key = dotted.rsplit(".", 1)[1]
    params = yaml.safe_load(REAL)
    *parents, _ = dotted.split(".")
    entry = params
    for name in parents:
        entry = entry[name]
    entry[key] = "__empty__"
    text = yaml.safe_dump(params, sort_keys=False).replace(f"{key}: __empty__", f"{key}:")
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(ConfigError) as error:
        load_params(tmp_path / "p.yaml")
    line = str(error.value)
    assert expected in line and "None" not in line and "\n" not in line, line



def test_a_key_a_pattern_takes_is_not_the_one_guessed_at() -> None:
    """Only the unexpected key is matched against the known ones: a key that a patternProperties
    pattern takes is not (`beta_` is close to `beta`, but the pattern allows it)."""
    import jsonschema

    from wscat.schema_messages import close_key

    schema = {"type": "object", "properties": {"beta": {}, "epochs": {}},
              "patternProperties": {"^beta_": {}}, "additionalProperties": False}
    error = next(jsonschema.Draft202012Validator(schema).iter_errors({"beta_": 1, "epoch": 2}))
    assert close_key(error, schema) == "; did you mean epochs?"
