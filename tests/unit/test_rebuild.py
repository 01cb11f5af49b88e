"""wscat.rebuild: the table rules' `rebuild` param (the workflow side: tests/workflow/
test_workflow.py, a deleted metrics file rebuilt with its table)."""
from __future__ import annotations

from pathlib import Path

import pytest

from wscat import rebuild
from wscat.rebuild import NOT_RECORDED, rebuild_token


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str], Path]:
    monkeypatch.setattr(rebuild, "_bumped", {})  # a fresh Snakemake process
    table, metrics = tmp_path / "table.tex", [tmp_path / f"seed{s}.json" for s in (1, 2)]
    for path in metrics:
        path.write_text("{}")
    return [str(table)], [str(m) for m in metrics], tmp_path / "state"


def test_a_table_that_never_lost_an_input_records_nothing(files) -> None:
    outputs, inputs, state = files
    assert rebuild_token(outputs, inputs, state) is NOT_RECORDED  # not built yet
    Path(outputs[0]).write_text("table")
    assert rebuild_token(outputs, inputs, state) is NOT_RECORDED
    assert str(NOT_RECORDED) == "" and not state.exists()


def test_a_missing_input_changes_the_token_once_then_it_stays(files, monkeypatch, capsys) -> None:
    outputs, inputs, state = files
    Path(outputs[0]).write_text("table")
    Path(inputs[1]).unlink()
    first = rebuild_token(outputs, inputs, state)
    assert first == "rebuild 1"
    assert rebuild_token(outputs, inputs, state) == first  # the same process asks again
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and f"wscat: {inputs[1]} is missing" in line
    # An input never built (a method or seed just added) is no failure: the line says both.
    assert "(not built yet: a method or seed added; or removed by a failed or interrupted job)" \
        in line
    monkeypatch.setattr(rebuild, "_bumped", {})  # the next run, with the input rebuilt
    Path(inputs[1]).write_text("{}")
    assert rebuild_token(outputs, inputs, state) == first
    monkeypatch.setattr(rebuild, "_bumped", {})  # lost again later: a new token
    Path(inputs[0]).unlink()
    Path(inputs[1]).unlink()
    assert rebuild_token(outputs, inputs, state) == "rebuild 2"
    assert "and 1 more of its inputs are missing" in capsys.readouterr().err


def test_tables_have_their_own_tokens(files) -> None:
    outputs, inputs, state = files
    Path(outputs[0]).write_text("table")
    other = [outputs[0] + ".other"]
    Path(other[0]).write_text("table")
    Path(inputs[0]).unlink()
    assert rebuild_token(outputs, inputs, state) == "rebuild 1"
    assert rebuild_token(other, inputs[1:], state) is NOT_RECORDED


def test_without_snakemakes_record_the_line_says_to_ask_for_the_file(files, capsys) -> None:
    """No record (a table from `dvc checkout`): Snakemake compares no params, so no token could
    re-run it; the line names the command that does."""
    outputs, inputs, state = files
    Path(outputs[0]).write_text("table")
    Path(inputs[0]).unlink()
    assert rebuild_token(outputs, inputs, state, recorded=lambda path: False) is NOT_RECORDED
    line = capsys.readouterr().err
    assert f"ask for the missing file by name (snakemake -- {inputs[0]})" in line
    assert line.count("\n") == 1 and not state.exists()


def test_without_a_record_several_missing_inputs_are_built_by_forcing_the_table(files,
                                                                                capsys) -> None:
    """A fresh clone of a commit with the tables: every input missing, no record. Asking for one
    file by name would build one; forcing the table builds them all."""
    outputs, inputs, state = files
    Path(outputs[0]).write_text("table")
    for name in inputs:
        Path(name).unlink()
    assert rebuild_token(outputs, inputs, state, recorded=lambda path: False) is NOT_RECORDED
    line = capsys.readouterr().err
    assert f"(snakemake --forcerun {outputs[0]} -- {outputs[0]})" in line, line
    assert f"{len(inputs) - 1} more of its inputs" in line and line.count("\n") == 1
