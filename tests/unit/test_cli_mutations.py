"""Mutation tests for wscat/cli.py (the `wscat` command) and wscat/api.py's own wiring: each test
kills hand-made mutants that went through the unit tests importing them, with expectations from
the modules' docstrings, their `--help` texts and docs/api.md, never from the function under test.
No step does its work here: each step's `run` is stood in for by a recorder, so what is checked is
what the command line hands it, what it refuses before it, and how a failure ends.

What is checked, and from which fact:
- the argument types (cli's seed_value, seconds_value, threads_value docstrings): a seed is an
  integer in 0..2^32-1, both ends included; `--core-wait` is finite and 0 or more; `--threads` is
  1..THREADS_MAX; each bad value is argparse's one line, exit 2, naming what to give.
- the defaults `--help` states: --params params.yaml, --threads torch's (None), --device
  $WSCAT_DEVICE or auto, evaluate's --part all and --core-wait 0, curves' --title empty, export's
  --name from the run (None), the paper steps' --results results.
- the Parser (its docstring): an unknown argument is named by the step it was given to; a
  missing required option comes with the given options the step does not know (`--sed=1` named
  as --sed, a known `--dataset=digits` not named); exit 2, one line. A dataset, method or
  labeler the params lack is one line naming the params file (cli._check_names).
- each subcommand hands its step the arguments under their own names (seed, out, pseudo,
  labeler checkpoint, labeler, core, core wait, part, md, paired tex, name, results, title,
  paper cells, add-dataset's --out); `--device auto` is not a named device (its log line says
  "--device auto"), `--params` is the file read.
- the outputs each step says it writes (OUTPUT_ARGS, DERIVED_OUTPUTS: export's NAME.pt,
  paper-figure's .csv; pseudo-label's --metrics) are never one of its inputs; the inputs
  (INPUT_ARGS) are never folders where a file belongs (--split, --pseudo, --labeler-checkpoint,
  --core, --train-log, --table-csv, add-dataset's npz, named "the npz"), and --results is a
  folder; train's --out-dir never holds an input and may be typed with a trailing '/', a file
  output may not (TypedPath); add-dataset's --out may be its --params (the in-place edit); the
  JSON outputs (table --summary, pseudo-label --metrics) must be named .json; an evaluate --out
  that holds another run's metrics (seed, part) or another kind of file is refused and left as it
  was, the same run's is rewritten (check_output_kinds, docs/api.md "Errors"); export replaces
  an earlier entry of its own; no step writes into a run's dvclive/ folder; a split given as
  pseudo-label's --checkpoint is named, with the labeler's checkpoint to pass (wscat.paths.BEST).
- how a failure ends (cli's module docstring, wscat.errors' exit codes): bad input one line, exit
  2; an unexpected error one line naming its first line, exit 1, its traceback with --debug or
  WSCAT_DEBUG=1; --debug keeps an anticipated error's one line; Ctrl-C 130 (also while the
  arguments are parsed), SIGTERM 143, which raises Terminated only while the step runs; the
  outputs are locked while the step runs.
- api (docs/api.md, api.py's docstrings): train_method trains a pseudo-label method's labeler
  first into out_dir/<labeler>/, labels into out_dir/pseudo-<labeler>-seed<seed>.npz (+ .json),
  and returns best.pt, last.pt, train_log.csv, dvclive/, split-seed<seed>.npz, the step's best
  epoch and score; DMAT's generated images are labelled by its generated_labeler's run (its
  best.pt); `threads` holds for the call only; the documented defaults (part="core",
  device="auto") and files (metrics.json, the extras' metrics-extra.json); `load_params` of a
  folder says so; params
  given as a dict are validated as a file's are; `test_set` is the split's `test` part (a split
  written by hand) and refuses one that does not fit the dataset; evaluate_checkpoint (loading
  and attacks stood in for) refuses a checkpoint of a method the params lack before any split,
  makes the split of the checkpoint's seed beside it, keeps a split it did not make when the
  evaluation refuses, and never writes its out= over its checkpoint=; export_model's out= is a
  .json and its name= a str, handed on as given.
"""
from __future__ import annotations

import inspect
import json
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.config import SEED_MAX
from wscat.device import THREADS_MAX
from wscat.errors import Terminated
from wscat.io import lock_path

Calls = list[tuple[tuple[Any, ...], dict[str, Any]]]

SPLIT = ["split", "--dataset", "digits", "--seed", "1", "--out", "s.npz"]
RUN = ["--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "3"]
TRAIN = ["train", *RUN, "--split", "s.npz", "--out-dir", "run", "--device", "cpu"]
EVALUATE = ["evaluate", *RUN, "--split", "s.npz", "--checkpoint", "c.pt", "--out", "m.json",
            "--device", "cpu"]
PSEUDO = ["pseudo-label", "--dataset", "digits", "--model", "cnn", "--labeler", "standard",
          "--seed", "2", "--split", "s.npz", "--checkpoint", "c.pt", "--out", "p.npz",
          "--metrics", "r.json", "--device", "cpu"]
TABLE = ["table", "--experiment", "digits", "--tex", "t.tex", "--csv", "t.csv", "--summary",
         "t.json"]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty work folder with a tiny params.yaml, no debug and no device from the
    environment."""
    write_params(tmp_path / "params.yaml", tiny_params(epochs=1))
    monkeypatch.chdir(tmp_path)
    for name in ("WSCAT_DEBUG", "WSCAT_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def record(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str = "run",
           result: Any = None, raises: BaseException | None = None) -> Calls:
    """Stand in for `owner.name`: record its arguments, then return `result` or raise."""
    calls: Calls = []

    def fake(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        if raises is not None:
            raise raises
        return result

    monkeypatch.setattr(owner, name, fake)
    return calls


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], phrase: str,
            code: int = 2) -> str:
    """`wscat argv` ends with one line on stderr holding `phrase`, and exit `code`."""
    capsys.readouterr()
    got = cli.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert got == code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert phrase in lines[0], lines[0]
    return lines[0]


def stop_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step's work raises: a refusal must come from the command line, before it."""
    import wscat.export
    from wscat.steps import (add_dataset, analyse, evaluate, paper, pseudo, split, table, train,
                             validate)

    for module in (add_dataset, analyse, evaluate, pseudo, split, table, train, validate):
        record(monkeypatch, module, raises=RuntimeError("the step ran"))
    for name in ("run_table", "run_compare", "run_figure", "run_index", "run_curves"):
        record(monkeypatch, paper, name, raises=RuntimeError("the step ran"))
    record(monkeypatch, wscat.export, "export_model", raises=RuntimeError("the step ran"))


def parsed(argv: list[str]) -> Any:
    return cli.build_parser().parse_args(argv)


# --- argument types -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", ["0", str(SEED_MAX)])
def test_a_seed_at_either_end_of_its_range_is_taken(seed: str) -> None:
    assert parsed(["split", "--dataset", "d", "--seed", seed, "--out", "s.npz"]).seed == int(seed)


@pytest.mark.parametrize("seed, phrase", [("-1", "-1 is outside 0..4294967295"),
                                          (str(SEED_MAX + 1), "is outside 0..4294967295"),
                                          ("x", "'x' is not an integer; give a seed in"),
                                          ("1.5", "'1.5' is not an integer")])
def test_a_bad_seed_is_one_line_naming_the_range(folder: Path, capsys: pytest.CaptureFixture[str],
                                                 seed: str, phrase: str) -> None:
    line = refused(["split", "--dataset", "digits", "--seed", seed, "--out", "s.npz"], capsys,
                   phrase)
    assert line.startswith("wscat split: error: argument --seed:"), line


@pytest.mark.parametrize("value, phrase", [("inf", "give a finite number, 0 or more"),
                                           ("nan", "give a finite number, 0 or more"),
                                           ("-1", "give a finite number, 0 or more"),
                                           ("soon", "'soon' is not a number")])
def test_core_wait_is_finite_and_not_negative(folder: Path, capsys: pytest.CaptureFixture[str],
                                              value: str, phrase: str) -> None:
    refused([*EVALUATE, "--core-wait", value], capsys, phrase)


def test_core_wait_of_zero_seconds_is_taken() -> None:
    assert parsed([*EVALUATE, "--core-wait", "0"]).core_wait == 0.0


@pytest.mark.parametrize("threads", ["1", str(THREADS_MAX)])
def test_threads_from_one_to_the_maximum_are_taken(threads: str) -> None:
    assert parsed([*TRAIN, "--threads", threads]).threads == int(threads)


@pytest.mark.parametrize("threads, phrase", [("0", "0 threads; give 1 or more"),
                                             (str(THREADS_MAX + 1), f"give at most {THREADS_MAX}"),
                                             ("two", "'two' is not an integer")])
def test_bad_threads_are_one_line(folder: Path, capsys: pytest.CaptureFixture[str], threads: str,
                                  phrase: str) -> None:
    refused([*TRAIN, "--threads", threads], capsys, phrase)


@pytest.mark.parametrize("argv", [["curves", "--train-log", "log.csv", "--out", ""],
                                  ["split", "--dataset", "digits", "--seed", "1", "--out", " "],
                                  ["export", "--checkpoint", "", "--metrics", "m.json", "--out",
                                   "m"]])
def test_an_empty_path_is_one_line_naming_its_flag(folder: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   argv: list[str]) -> None:
    """Path("") is the current folder: `--out ""` once said "PosixPath('.') has an empty name"."""
    flag = argv[argv.index("") - 1] if "" in argv else "--out"
    line = refused(argv, capsys, "an empty path; give a file or folder name")
    assert line.startswith(f"wscat {argv[0]}: error: argument {flag}:"), line


# --- defaults, as --help states them --------------------------------------------------------------

def test_the_defaults_are_the_ones_help_states(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WSCAT_DEVICE", raising=False)
    train = parsed(TRAIN[:-2])
    assert (train.params, train.threads, train.device) == (Path("params.yaml"), None, "auto")
    evaluate = parsed(EVALUATE)
    assert (evaluate.part, evaluate.core, evaluate.core_wait) == ("all", None, 0.0)
    assert parsed(["curves", "--train-log", "l.csv", "--out", "c"]).title == ""
    assert parsed(["export", "--checkpoint", "c.pt", "--metrics", "m.json",
                   "--out", "e.json"]).name is None
    assert parsed(["paper-index", "--tier", "digits", "--out", "i.md"]).results == "results"


def test_the_device_defaults_to_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WSCAT_DEVICE", "cpu")
    assert parsed(TRAIN[:-2]).device == "cpu"


# --- the Parser's one-line errors ---------------------------------------------------------------

def test_an_unknown_argument_is_named_by_its_step(folder: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    line = refused([*SPLIT, "--bogus", "1"], capsys, "unrecognized arguments: --bogus 1")
    assert line.startswith("wscat split: error:"), line


def test_a_missing_option_names_the_misspelt_one_only(folder: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["split", "--dataset=digits", "--sed=1", "--out", "s.npz"], capsys,
                   "--sed is not an option of `wscat split` (misspelt?)")
    assert "the following arguments are required: --seed" in line, line
    assert "--dataset" not in line.split(";")[1], line


@pytest.mark.parametrize("argv, phrase", [
    (["split", "--dataset", "digit", "--seed", "1", "--out", "s.npz"], "unknown dataset 'digit'"),
    ([a if a != "standard" else "trade" for a in TRAIN], "unknown method 'trade'"),
    ([a if a != "standard" else "mtt" for a in PSEUDO], "unknown labeler 'mtt'")])
def test_a_name_the_params_lack_is_one_line_naming_the_file(
        folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str], phrase: str) -> None:
    stop_steps(monkeypatch)
    refused(argv, capsys, f"{phrase}; configured in params.yaml:")


# --- each subcommand hands its step its own arguments -----------------------------------------------

def test_split_gets_its_seed_and_out(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import split

    calls = record(monkeypatch, split)
    assert cli.main(["split", "--dataset", "digits", "--seed", "7", "--out", "o.npz"]) == 0
    (params, dataset, seed, out), _ = calls[0]
    assert (dataset, seed, Path(out)) == ("digits", 7, Path("o.npz"))
    assert "digits" in params["datasets"]


def test_params_is_the_file_given(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import split

    (folder / "params.yaml").rename(folder / "mine.yaml")
    calls = record(monkeypatch, split)
    assert cli.main([*SPLIT, "--params", "mine.yaml"]) == 0
    assert "digits" in calls[0][0][0]["datasets"]


def test_train_gets_its_seed_pseudo_labels_and_labeler_checkpoint(
        folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import train

    calls = record(monkeypatch, train, result={"best_epoch": 4})
    argv = [*TRAIN[:-2], "--pseudo", "p.npz", "--labeler-checkpoint", "l.pt", "--device", "auto"]
    assert cli.main(argv) == 0
    got = calls[0][1]
    assert (got["seed"], got["pseudo_path"], got["labeler_checkpoint"], got["out_dir"]) == (
        3, Path("p.npz"), Path("l.pt"), Path("run"))
    assert got["device_named"] is False  # auto is no device asked for by name
    out = capsys.readouterr().out
    assert "(--device auto:" in out.splitlines()[0], out
    assert "trained standard seed 3: best epoch 4" in out


def test_a_named_device_is_named(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import train

    calls = record(monkeypatch, train, result={"best_epoch": 1})
    assert cli.main(TRAIN) == 0
    assert calls[0][1]["device_named"] is True
    assert "--device auto" not in capsys.readouterr().out


def test_pseudo_label_gets_its_outputs_labeler_and_seed(folder: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import pseudo

    calls = record(monkeypatch, pseudo, result={"accuracy": 90.0})
    assert cli.main(PSEUDO) == 0
    got = calls[0][1]
    assert (got["out"], got["metrics"], got["checkpoint"], got["split_path"]) == (
        Path("p.npz"), Path("r.json"), Path("c.pt"), Path("s.npz"))
    assert (got["labeler"], got["seed"], got["model"]) == ("standard", 2, "cnn")


def test_evaluate_gets_its_part_core_and_wait(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import evaluate

    calls = record(monkeypatch, evaluate, result={"accuracy": {"Natural": 50.0}})
    assert cli.main([*EVALUATE, "--part", "extra", "--core", "core.json",
                     "--core-wait", "2.5"]) == 0
    got = calls[0][1]
    assert (got["part"], got["core_path"], got["core_wait"], got["seed"], got["out"]) == (
        "extra", Path("core.json"), 2.5, 3, Path("m.json"))


def test_table_gets_its_markdown_and_paired_files(folder: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import table

    calls = record(monkeypatch, table)
    assert cli.main([*TABLE, "--md", "t.md", "--paired-csv", "p.csv", "--paired-tex", "p.tex",
                     "a.json", "b.json"]) == 0
    got = calls[0][1]
    assert (got["md"], got["paired_csv"], got["paired_tex"], got["summary"]) == (
        Path("t.md"), Path("p.csv"), Path("p.tex"), Path("t.json"))
    assert got["metrics"] == [Path("a.json"), Path("b.json")]


def test_export_gets_its_name(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import wscat.export

    entry = {"name": "mine", "clean_acc": 1, "autoattack_acc": 1, "eps": 0.3,
             "state_dict": "e.pt"}
    calls = record(monkeypatch, wscat.export, "export_model", result=entry)
    assert cli.main(["export", "--checkpoint", "c.pt", "--metrics", "m.json", "--out", "e.json",
                     "--name", "mine"]) == 0
    assert calls[0][1]["name"] == "mine"


@pytest.mark.parametrize("argv, name", [
    (["paper-table", "--tier", "digits", "--label", "Tab", "--tex", "t.tex", "--csv", "t.csv"],
     "run_table"),
    (["paper-figure", "--tier", "digits", "--figure", "Fig-x", "--out", "f"], "run_figure"),
    (["paper-index", "--tier", "digits", "--out", "i.md"], "run_index")])
def test_the_paper_steps_read_the_results_folder_given(
        folder: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], name: str) -> None:
    from wscat.steps import paper

    (folder / "mine").mkdir()  # a folder, as --results must be
    calls = record(monkeypatch, paper, name)
    assert cli.main([*argv, "--results", "mine"]) == 0
    assert str(calls[0][1]["results"]) == "mine"


def test_analyse_reads_the_results_folder_given(folder: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import analyse

    (folder / "mine").mkdir()
    calls = record(monkeypatch, analyse)
    assert cli.main(["analyse", "--tier", "digits", "--figure", "Fig-similarity", "--dataset",
                     "digits", "--out", "a.npz", "--results", "mine", "--device", "cpu"]) == 0
    assert str(calls[0][1]["root"]) == "mine"


def test_validate_gets_its_seed(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import validate

    calls = record(monkeypatch, validate)
    assert cli.main(["validate", *RUN, "--split", "s.npz", "--checkpoint", "c.pt", "--out",
                     "v.json", "--device", "cpu"]) == 0
    assert (calls[0][1]["seed"], calls[0][1]["out"]) == (3, Path("v.json"))


def test_curves_get_their_title(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import paper

    calls = record(monkeypatch, paper, "run_curves")
    assert cli.main(["curves", "--train-log", "l.csv", "--title", "mine", "--out", "c"]) == 0
    assert calls[0][1]["title"] == "mine"


def test_paper_compare_gets_its_paper_cells(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import paper

    calls = record(monkeypatch, paper, "run_compare")
    assert cli.main(["paper-compare", "--label", "Tab", "--table-csv", "t.csv", "--paper-cells",
                     "CIFAR10", "WRN-28-10", "--tex", "c.tex", "--csv", "c.csv"]) == 0
    assert calls[0][1]["paper_cells"] == ("CIFAR10", "WRN-28-10")


def test_add_dataset_writes_its_out_which_may_be_its_params(folder: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import add_dataset

    calls = record(monkeypatch, add_dataset)
    record(monkeypatch, add_dataset, "report", result="added")
    assert cli.main(["add-dataset", "mine", "x.npz", "--out", "new.yaml"]) == 0
    assert calls[0][1]["out"] == Path("new.yaml")
    assert cli.main(["add-dataset", "mine", "x.npz", "--out", "params.yaml"]) == 0  # in place
    assert calls[1][1]["out"] == Path("params.yaml")


# --- outputs and inputs ---------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--summary", "--md", "--tex", "--paired-tex", "--paired-csv"])
def test_no_table_output_is_one_of_its_metrics(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str],
                                               flag: str) -> None:
    from wscat.steps import table

    calls = record(monkeypatch, table)
    (folder / "a.json").write_text("{}")
    argv = [*TABLE, "a.json"]
    if flag in argv:
        argv[argv.index(flag) + 1] = "a.json"
    else:
        argv[-1:-1] = [flag, "a.json"]
    if flag == "--summary":
        argv[-1:] = ["b.json", "a.json"]
    refused(argv, capsys, f"{flag} a.json is the input metrics a.json")
    assert not calls and (folder / "a.json").read_text() == "{}"


def test_pseudo_label_metrics_is_an_output(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import pseudo

    calls = record(monkeypatch, pseudo, result={"accuracy": 1.0})
    argv = [a if a != "s.npz" else "r.json" for a in PSEUDO]
    refused(argv, capsys, "--metrics r.json is the input --split r.json")
    assert not calls


def test_export_writes_its_state_dict_beside_the_entry(folder: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import wscat.export

    calls = record(monkeypatch, wscat.export, "export_model")
    refused(["export", "--checkpoint", "e.pt", "--metrics", "m.json", "--out", "e.json"], capsys,
            "--out (e.pt) e.pt is the input --checkpoint e.pt")
    refused(["export", "--checkpoint", "c.pt", "--metrics", "m.json", "--out", "m.json"], capsys,
            "--out m.json is the input --metrics m.json")
    assert not calls


def test_paper_figure_writes_its_csv(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import paper

    calls = record(monkeypatch, paper, "run_figure")
    (folder / "params.yaml").rename(folder / "f.csv")
    refused(["paper-figure", "--tier", "digits", "--figure", "Fig-x", "--out", "f",
             "--params", "f.csv"], capsys, "--out (f.csv) f.csv is the input --params f.csv")
    assert not calls


def test_train_out_dir_never_holds_its_split(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import train

    calls = record(monkeypatch, train, result={"best_epoch": 1})
    argv = [a if a != "s.npz" else "run/s.npz" for a in TRAIN]
    refused(argv, capsys, "--out-dir run holds the input --split run/s.npz")
    assert not calls


def test_a_trailing_separator_is_a_folder_for_out_dir_only(
        folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import split, train

    calls = record(monkeypatch, train, result={"best_epoch": 1})
    assert cli.main([a if a != "run" else "run/" for a in TRAIN]) == 0
    assert len(calls) == 1
    split_calls = record(monkeypatch, split)
    refused(["split", "--dataset", "digits", "--seed", "1", "--out", "new/"], capsys,
            "cannot write new/: it ends in '/', so it is a folder; pass a file path")
    assert not split_calls


METRICS = {"accuracy": {"Natural": 50.0}, "manifest": {}, "method": "standard", "seed": 3,
           "dataset": "digits", "model": "cnn", "part": "core"}


@pytest.mark.parametrize("held, phrase", [
    ({}, None),  # the same run's metrics: a rerun rewrites them
    ({"seed": 4}, "holds the metrics of standard seed 4 on digits (cnn), not of standard seed 3"),
    ({"part": "extra"}, "part extra, not of standard seed 3 on digits (cnn), part core"),
    ({"set": "validation", "accuracy": None}, "holds a validation-scores file")],
    ids=["same-run", "other-seed", "other-part", "other-kind"])
def test_evaluate_rewrites_only_its_own_run_s_metrics(folder: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str],
                                                      held: dict[str, Any],
                                                      phrase: str | None) -> None:
    from wscat.steps import evaluate

    calls = record(monkeypatch, evaluate, result={"accuracy": {"Natural": 50.0}})
    (folder / "m.json").write_text(json.dumps({**METRICS, **held}))
    before = (folder / "m.json").read_bytes()
    if phrase is None:
        assert cli.main([*EVALUATE, "--part", "core"]) == 0 and len(calls) == 1
        return
    refused([*EVALUATE, "--part", "core"], capsys, phrase)
    assert not calls and (folder / "m.json").read_bytes() == before


def test_a_split_given_as_the_labeler_s_checkpoint_names_the_checkpoint_to_pass(
        folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stop_steps(monkeypatch)
    indices = np.arange(4)
    with open(folder / "c.pt", "wb") as handle:  # np.savez would add .npz to a path's name
        np.savez(handle, dataset="digits", seed=2, labelled=indices, unlabelled=indices,
                 validation=indices, test=indices)
    refused(PSEUDO, capsys, "c.pt is a wscat split (`wscat split`), not a checkpoint: pass "
                            "--checkpoint results/models/digits/cnn/standard/seed2/best.pt")


def test_export_may_replace_an_earlier_entry(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import wscat.export

    entry = {"name": "mine", "clean_acc": 1, "autoattack_acc": 1, "eps": 0.3,
             "state_dict": "e.pt"}
    calls = record(monkeypatch, wscat.export, "export_model", result=entry)
    (folder / "e.json").write_text(json.dumps({"state_dict": "e.pt", "wscat": {}}))
    assert cli.main(["export", "--checkpoint", "c.pt", "--metrics", "m.json", "--out",
                     "e.json"]) == 0
    assert len(calls) == 1


def test_no_step_writes_into_a_run_s_curves(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    stop_steps(monkeypatch)
    (folder / "run" / "dvclive").mkdir(parents=True)
    (folder / "run" / "best.pt").write_bytes(b"")
    refused(["split", "--dataset", "digits", "--seed", "1", "--out", "run/dvclive/s.npz"],
            capsys, "which `wscat split` would overwrite")


@pytest.mark.parametrize("argv, phrase", [
    ([*TRAIN[:-2], "--split", "box", "--device", "cpu"], "--split box is a folder"),
    ([*TRAIN, "--pseudo", "box"], "--pseudo box is a folder"),
    ([*TRAIN, "--labeler-checkpoint", "box"], "--labeler-checkpoint box is a folder"),
    ([*EVALUATE, "--part", "extra", "--core", "box"], "--core box is a folder"),
    (["curves", "--train-log", "box", "--out", "c"], "--train-log box is a folder"),
    (["paper-compare", "--label", "T", "--table-csv", "box", "--tex", "c.tex", "--csv", "c.csv"],
     "--table-csv box is a folder"),
    (["add-dataset", "mine", "box"], "the npz box is a folder, not a file; pass the file itself"),
])
def test_a_folder_given_as_an_input_file_is_refused(folder: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    argv: list[str], phrase: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    stop_steps(monkeypatch)
    (folder / "box").mkdir()
    refused(argv, capsys, phrase)


def test_results_is_a_folder(folder: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    stop_steps(monkeypatch)
    (folder / "res").write_text("not a folder")
    refused(["paper-index", "--tier", "digits", "--out", "i.md", "--results", "res"], capsys,
            "--results res is a file, not a folder")


@pytest.mark.parametrize("argv, phrase", [
    ([*TABLE[:-1], "t.txt", "a.json"], "--summary t.txt"),
    ([a if a != "r.json" else "r.txt" for a in PSEUDO], "--metrics r.txt")])
def test_a_json_output_is_named_json(folder: Path, capsys: pytest.CaptureFixture[str],
                                     argv: list[str], phrase: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    stop_steps(monkeypatch)
    refused(argv, capsys, f"{phrase} must name a .json file")


# --- how a failure ends ------------------------------------------------------------------------------

@pytest.mark.parametrize("error, code, phrase", [
    (ValueError("bad split\nsecond line"), 2, "wscat split: error: bad split"),
    (OSError(28, "No space left on device"), 2, "no space left"),
    (RuntimeError("boom\nsecond line"), 1, "wscat split: error: unexpected RuntimeError: boom (a bug"),
    (KeyboardInterrupt(), 130, "interrupted;"),
    (Terminated(), 143, "terminated (SIGTERM"),
])
def test_each_failure_is_one_line_with_its_exit_code(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str],
                                                     error: BaseException, code: int,
                                                     phrase: str) -> None:
    from wscat.steps import split

    record(monkeypatch, split, raises=error)
    line = refused(SPLIT, capsys, phrase, code=code)
    assert "second line" not in line


@pytest.mark.parametrize("debug", ["flag", "environment"])
def test_debug_shows_an_unexpected_error_s_traceback(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                     debug: str) -> None:
    from wscat.steps import split

    record(monkeypatch, split, raises=RuntimeError("boom"))
    if debug == "environment":
        monkeypatch.setenv("WSCAT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli.main((["--debug"] if debug == "flag" else []) + SPLIT)


def test_debug_keeps_an_anticipated_error_one_line(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.steps import split

    record(monkeypatch, split, raises=ValueError("bad split"))
    refused(["--debug", *SPLIT], capsys, "wscat split: error: bad split")


def test_your_method_s_error_is_one_line_without_debug(folder: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from wscat.own_method import OwnMethodError
    from wscat.steps import split

    record(monkeypatch, split, raises=OwnMethodError("your loss raised"))
    refused(SPLIT, capsys, "your loss raised")
    with pytest.raises(OwnMethodError):
        cli.main(["--debug", *SPLIT])


def test_ctrl_c_while_parsing_is_130(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    class Interrupted:
        def parse_args(self, argv: Any) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", Interrupted)
    refused(SPLIT, capsys, "interrupted while starting; nothing was written", code=130)


def test_sigterm_raises_terminated_while_the_step_runs_only(folder: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat.steps import split

    seen: list[Any] = []
    before = signal.getsignal(signal.SIGTERM)

    def step(params: Any, dataset: str, seed: int, out: Path) -> None:
        seen.append(signal.getsignal(signal.SIGTERM))
        seen.append(lock_path(out).exists())

    monkeypatch.setattr(split, "run", step)
    assert cli.main(SPLIT) == 0
    handler, locked = seen
    with pytest.raises(Terminated):
        handler(signal.SIGTERM, None)
    assert locked, "the output is not locked while the step writes it"
    assert signal.getsignal(signal.SIGTERM) is before
    assert not lock_path(Path("s.npz")).exists()


# --- api: train_method's wiring --------------------------------------------------------------------

def test_train_method_trains_the_labeler_first_and_returns_the_run_s_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from wscat import api
    from wscat.steps import pseudo, split, train

    params = tiny_params(epochs=1)
    labeler = params["methods"]["wscat"]["labeler"]
    splits = record(monkeypatch, split)
    labels = record(monkeypatch, pseudo)
    threads: list[int] = []

    def step(*args: Any, **kwargs: Any) -> dict[str, Any]:
        threads.append(torch.get_num_threads())
        runs.append(kwargs)
        return {"best_epoch": 3 + len(runs), "best_score": 0.25 * len(runs)}

    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(train, "run", step)
    before = torch.get_num_threads()
    wanted = before + 1  # neither torch's count nor 1
    out = tmp_path / "runs"
    result = api.train_method("wscat", out_dir=out, seed=5, params=params, device="cpu",
                              threads=wanted)
    assert torch.get_num_threads() == before and threads == [wanted, wanted]
    assert Path(splits[0][0][3]) == out / "split-seed5.npz"
    assert [r["method"] for r in runs] == [labeler, "wscat"]
    assert runs[0]["out_dir"] == out / labeler and runs[1]["out_dir"] == out / "wscat"
    pseudo_labels = out / f"pseudo-{labeler}-seed5.npz"
    got = labels[0][1]
    assert (got["out"], got["metrics"], got["labeler"], got["seed"]) == (
        pseudo_labels, out / f"pseudo-{labeler}-seed5.json", labeler, 5)
    assert got["checkpoint"] == out / labeler / "best.pt"
    assert runs[1]["pseudo_path"] == pseudo_labels and runs[1]["seed"] == 5
    assert runs[0]["pseudo_path"] is None
    assert result == api.TrainResult(
        checkpoint=out / "wscat" / "best.pt", last=out / "wscat" / "last.pt",
        log=out / "wscat" / "train_log.csv", curves=out / "wscat" / "dvclive",
        split=out / "split-seed5.npz", best_epoch=5, best_score=0.5)


def test_the_api_s_documented_defaults() -> None:
    from wscat import api

    evaluate = inspect.signature(api.evaluate_checkpoint).parameters
    assert evaluate["part"].default == "core" and evaluate["device"].default == "auto"
    assert inspect.signature(api.train_method).parameters["device"].default == "auto"
    assert api.PARTS["extra"] == "metrics-extra.json" and api.PARTS["core"] == "metrics.json"
    assert api.PARTS["all"] == "metrics.json"


def test_load_params_of_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    from wscat import api
    from wscat.config import ConfigError

    with pytest.raises(ConfigError, match="is a folder, not a params file; give the path of the "
                                          "params.yaml in it"):
        api.load_params(tmp_path)


def _hand_split(path: Path, test: list[int]) -> Path:
    """A split file as `wscat split` writes it (wscat.data.split.load_split's arrays), by hand."""
    np.savez(path, dataset="digits", seed=1, labelled=np.arange(0, 10),
             unlabelled=np.arange(10, 20), validation=np.arange(20, 30), test=np.array(test))
    return path


def test_test_set_is_the_split_s_test_part(tmp_path: Path) -> None:
    from wscat import api
    from wscat.data import load_dataset

    params = tiny_params(epochs=1)
    got = api.test_set(_hand_split(tmp_path / "s.npz", list(range(30, 40))), params=params)
    assert got.indices.tolist() == list(range(30, 40))
    assert got.labels.tolist() == load_dataset("digits").labels[30:40].tolist()
    assert got.images.shape[0] == 10 and float(got.images.max()) <= 1.0


def test_test_set_refuses_a_split_larger_than_the_dataset(tmp_path: Path) -> None:
    from wscat import api

    with pytest.raises(ValueError):
        api.test_set(_hand_split(tmp_path / "s.npz", [30, 10**6]), params=tiny_params(epochs=1))


def test_params_given_as_a_dict_are_validated() -> None:
    from wscat import api
    from wscat.config import ConfigError

    params = tiny_params(epochs=1)
    del params["training"]
    with pytest.raises(ConfigError):
        api.load_dataset("digits", params=params)


def test_train_method_labels_generated_images_with_the_labeler_s_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat import api
    from wscat.steps import split, train

    params = tiny_params(epochs=1)
    generated = tmp_path / "generated.npz"
    generated.write_bytes(b"")  # train_method checks it is there; the training would read it
    params["methods"]["dmat"]["generated"] = str(generated)
    labeler = params["methods"]["dmat"]["generated_labeler"]
    record(monkeypatch, split)
    runs = record(monkeypatch, train, result={"best_epoch": 1, "best_score": 0.0})
    out = tmp_path / "runs"
    api.train_method("dmat", out_dir=out, params=params, device="cpu")
    assert [kwargs["method"] for _, kwargs in runs] == [labeler, "dmat"]
    assert runs[0][1]["labeler_checkpoint"] is None
    assert runs[1][1]["labeler_checkpoint"] == out / labeler / "best.pt"


# --- api: evaluate_checkpoint's wiring (the checkpoint's loading and the attacks stood in for) ------

@pytest.fixture
def stood_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A checkpoint file whose loading returns seed 4's metadata, and recorders of the split
    step and the evaluation."""
    import wscat.api
    from wscat import inference
    from wscat.steps import evaluate, split

    meta = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 4}
    monkeypatch.setattr(inference, "load_model", lambda path, device: (None, dict(meta)))
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"")
    return {"checkpoint": checkpoint, "meta": meta, "split": record(monkeypatch, split),
            "evaluate": record(monkeypatch, evaluate,
                               result={"accuracy": {"Natural": 1.0}, "manifest": {}}),
            "api": wscat.api, "monkeypatch": monkeypatch}


def test_evaluate_checkpoint_refuses_a_checkpoint_of_a_method_the_params_lack(
        stood_in: dict[str, Any]) -> None:
    from wscat.config import ConfigError

    stood_in["meta"]["method"] = "nomethod"
    with pytest.raises(ConfigError, match="is a run of method 'nomethod'"):
        stood_in["api"].evaluate_checkpoint(stood_in["checkpoint"], params=tiny_params(1),
                                            device="cpu")
    assert not stood_in["split"] and not stood_in["evaluate"]


def test_evaluate_checkpoint_makes_the_split_of_the_checkpoint_s_seed(
        stood_in: dict[str, Any]) -> None:
    api = stood_in["api"]
    stood_in["monkeypatch"].setattr(api, "check_run_of", lambda *args: None)
    checkpoint = stood_in["checkpoint"]
    result = api.evaluate_checkpoint(checkpoint, params=tiny_params(1), device="cpu")
    (_, dataset, seed, path), _ = stood_in["split"][0]
    assert (dataset, seed, Path(path)) == ("digits", 4, checkpoint.parent / "split-seed4.npz")
    got = stood_in["evaluate"][0][1]
    assert (got["seed"], got["split_path"], got["part"], got["out"]) == (
        4, checkpoint.parent / "split-seed4.npz", "core", checkpoint.parent / "metrics.json")
    assert result.path == checkpoint.parent / "metrics.json"


def test_evaluate_checkpoint_keeps_a_split_it_did_not_make(stood_in: dict[str, Any]) -> None:
    api = stood_in["api"]
    monkeypatch = stood_in["monkeypatch"]
    monkeypatch.setattr(api, "check_run_of", lambda *args: None)
    from wscat.steps import evaluate

    record(monkeypatch, evaluate, raises=ValueError("the evaluation refuses"))
    there = stood_in["checkpoint"].parent / "split-seed4.npz"
    there.write_bytes(b"made earlier")
    with pytest.raises(ValueError, match="the evaluation refuses"):
        api.evaluate_checkpoint(stood_in["checkpoint"], params=tiny_params(1), device="cpu")
    assert there.read_bytes() == b"made earlier"


def test_evaluate_checkpoint_never_writes_over_its_checkpoint(stood_in: dict[str, Any]) -> None:
    api = stood_in["api"]
    stood_in["monkeypatch"].setattr(api, "check_run_of", lambda *args: None)
    checkpoint = stood_in["checkpoint"].with_suffix(".json")  # a file of no wscat kind
    stood_in["checkpoint"].rename(checkpoint)
    with pytest.raises(ValueError, match="is the input checkpoint="):
        api.evaluate_checkpoint(checkpoint, params=tiny_params(1), out=checkpoint, device="cpu")
    assert not stood_in["evaluate"]


def test_export_model_takes_a_json_out_and_a_str_name(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from wscat import api

    calls = record(monkeypatch, api, "_export_model", result={})
    checkpoint, metrics = tmp_path / "best.pt", tmp_path / "m.json"
    checkpoint.write_bytes(b"")
    metrics.write_text(json.dumps({"accuracy": {"Natural": 1.0}, "manifest": {}}))
    with pytest.raises(ValueError, match="must name a .json file"):
        api.export_model(checkpoint, metrics, tmp_path / "e.pt")
    with pytest.raises(ValueError, match="name=5 is not a str"):
        api.export_model(checkpoint, metrics, tmp_path / "e.json", name=5)  # type: ignore[arg-type]
    assert not calls
    api.export_model(checkpoint, metrics, tmp_path / "e.json", name="mine")
    assert calls[0][1]["name"] == "mine" and calls[0][0][2] == tmp_path / "e.json"
