"""Mutation tests for wscat's interface modules (file_kinds, own_method, export, api_checks): each
test kills hand-made mutants that went through the unit tests importing the module, with
expectations from the modules' docstrings, docs/api.md ("Sharing a model", "Bad input"),
docs/methods.md ("Your own method"), RobustBench's model-info fields and the file formats wscat
writes (the zip local header, train_log.csv's header, paths' patterns), never from the function
under test. Everything is built in a temporary folder: no training, no dataset, well under 5 s.

What is checked, and from which fact:
- file_kinds: a cut zip whose header names no entry is no kind (`FileKind(None)`: "not
  recognised"); an intact .npz holding only some of a split's arrays is "npz" (only a damaged one
  counts for its kind by some arrays); a training log is told by its header's first column being
  exactly `epoch` (write_log's csv header) and never a file with a NUL byte; JSON is JSON after
  leading whitespace; YAML is parsed only with `parse_yaml` and by its suffix whatever its case;
  each JSON kind needs all of its keys (params: datasets and methods; export: state_dict and
  wscat; pseudo-report: labeler and per_class_accuracy; validation: set == "validation"; metrics:
  accuracy and manifest); an .npz of other arrays is described by its first six names;
  `other_kind` is None for a file of no kind; a run's curves are found under a bare resume/ and
  beside a resume/ folder (a mark too), named as the path was given (relative stays relative);
  `.JSON` is a .json name and an API argument reads `out=PATH`; `recorded_run` skips an array
  that is no scalar, and a metrics file without `part` is part all; parts core and all share a
  file; `other_run` looks only at a file of its kind, ignores a field the run leaves None, says
  the part only when the parts differ and names a split's run "digits seed 2" (its docstring's
  example); a hint's unknown seed is N, another unknown field its name in capitals; a params YAML
  is not judged by its JSON kinds (the params loader judges it); an .npz holding some of the
  expected arrays passes to its loader; a refusal without an option says "pass PATH"; `is_npy`
  checks the whole magic string.
- own_method: FILE.py:Class is the whole objective, Class a Python identifier; the pipeline's keys
  (docs/methods.md's list) are never knobs; a module beside the method comes before one in the
  folder you run in; `from pkg import mod`, `import a.b` and the imports of an imported module
  count; wscat's own modules never do, even from a checkout in the working folder; the digest is
  SHA-256 over "PATH\0CONTENT\0" per file (worked with hashlib), so a renamed file is another
  method; `digest_or_none` is "" for a file that cannot be opened (a name too long); an edited
  file loads as its new class in its own module, both kept in sys.modules; a file that does not
  import leaves no module behind and names its line, a syntax error its line; the base class
  imported, a plain class, an abstract one, a function and a missing name are each refused in
  their own words, the methods listed being the file's own; an error without a message is
  "(no message)" at the deepest line of the file; what a loss may return (docs/methods.md:
  a pair; a one-element loss; a dict of scalar statistics named with letters, digits and _, none
  of the log's own, `score` included).
- export: RobustBench's architecture names (WideResNet-28-10, ResNet-50, basic blocks, other
  architectures in capitals with their options); eps n/255 only when it is one, else six
  significant digits; the entry's fields from the checkpoint and metrics (Linf, the accuracies
  with two decimals, additional_data False, one forward pass, the state dict's name and hashlib's
  sha256 of it, the name's seedN, the footnote's AutoAttack count and default version, the wscat
  block's format, seed, spec, [0, 1] input range, best and its epochs, accuracies), both files
  mode 0644; the loaded model is the network in eval mode (same logits); a JSON that is no entry
  and a changed state dict are not loaded; metrics of another run, without Natural, without an
  accuracy dict or without weights_sha256 are refused in their own words with nothing written,
  and so are an --out that is no .json, an --out inside a run's curves and a state dict that
  another entry names.
- api_checks: `short` keeps 60 characters and cuts a longer repr to 57 and "..."; a name that is
  not a str is said so; a seed is any int in 0..2^32-1 (docs/api.md), a numpy integer taken as
  an int; threads are ints in 1..THREADS_MAX, not bools; an .npz with some of a split's arrays
  and a cut file of another kind ("(cut short)"); an output that is an input is one line without
  errno; `images_for`'s refusals (a numpy array of ints, no batch with its hints, the grayscale
  hint only for one channel, channel-last, NaN, values below 0 or above 1) and float64 images in
  the model's dtype; `check_output`'s refusals (a run's curves, another kind, another run, a JSON
  output not named .json); `check_run_of` refuses a checkpoint naming no run, a last.pt where the
  params evaluate best.pt and another training; `runs_of` puts the labelers first (the
  pseudo-labeler, the generated images' labeler); `check_pseudo_labels` reads
  OUT_DIR/pseudo-LABELER-seedN.npz; `check_training` refuses an out_dir that is a file or lies
  under one, and generated images that are not there.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers.tiny import ROOT
from wscat import api_checks, export, own_method
from wscat.checkpoint import CheckpointError, save_checkpoint
from wscat.config import ConfigError
from wscat.device import THREADS_MAX
from wscat.models import build_model
from wscat.steps.evaluate import weights_digest
from wscat.file_kinds import (FileKind, check_input_kind, check_json_output, described,
                              file_kind, is_npy, other_kind, other_run, recorded_run,
                              run_of_curves)

RUN = {"dataset": "digits", "model": "cnn", "method": "wscat", "seed": 1}


def _json(path: Path, data: object, prefix: str = "") -> Path:
    path.write_text(prefix + json.dumps(data))
    return path


# --- file_kinds ---------------------------------------------------------------------------------

def test_a_cut_zip_that_names_no_entry_is_no_kind(tmp_path: Path) -> None:
    """A zip's local header (PK\\3\\4, the name's length at bytes 26-27, the name from byte 30)
    with a name of length 0: no entry is known, so no kind (FileKind(None): not recognised)."""
    (tmp_path / "cut.npz").write_bytes(b"PK\x03\x04" + bytes(40))
    assert file_kind(tmp_path / "cut.npz").kind is None


def test_an_intact_npz_with_some_split_arrays_is_other_arrays(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", dataset=np.array("digits"), extra=np.arange(2))
    assert file_kind(tmp_path / "a.npz") == FileKind("npz", False, ("dataset", "extra"))


def test_a_training_log_is_told_by_its_epoch_column(tmp_path: Path) -> None:
    (tmp_path / "log.csv").write_bytes(b"epoch,lr,loss\n1,0.1,2.0\n")
    (tmp_path / "epochs.csv").write_bytes(b"epochs,loss\n3,2.0\n")
    (tmp_path / "nul.csv").write_bytes(b"epoch,lr\n1,\0\0\n")
    assert file_kind(tmp_path / "log.csv").kind == "training log"
    assert file_kind(tmp_path / "epochs.csv").kind is None
    assert file_kind(tmp_path / "nul.csv").kind is None


def test_json_after_leading_whitespace_is_read(tmp_path: Path) -> None:
    path = _json(tmp_path / "m.json", {**RUN, "accuracy": {"Natural": 50.0}, "manifest": {}},
                 prefix="\n  ")
    assert file_kind(path).kind == "metrics"


def test_yaml_is_parsed_only_when_asked_and_by_any_case_of_suffix(tmp_path: Path) -> None:
    text = "datasets: {digits: {}}\nmethods: {standard: {}}\n"
    (tmp_path / "p.yaml").write_text(text)
    (tmp_path / "P.YAML").write_text(text)
    assert file_kind(tmp_path / "p.yaml").kind == "params"
    assert file_kind(tmp_path / "P.YAML").kind == "params"
    assert file_kind(tmp_path / "p.yaml", parse_yaml=False).kind is None


@pytest.mark.parametrize("data", [
    {"datasets": {}}, {"methods": {}},                       # params: both keys
    {"state_dict": "e.pt"},                                  # export: state_dict and wscat
    {"labeler": "mt", "seed": 1},                            # pseudo-report: with per-class
    {"set": "test", "accuracy": 1},                          # validation: set == validation
    {"accuracy": {"Natural": 50.0}},                         # metrics: with a manifest
])
def test_a_json_kind_needs_all_its_keys(tmp_path: Path, data: dict) -> None:
    assert file_kind(_json(tmp_path / "x.json", data)).kind is None


def test_an_npz_of_other_arrays_is_described_by_its_first_six_names(tmp_path: Path) -> None:
    np.savez(tmp_path / "o.npz", **{name: np.arange(1) for name in "gfedcba"})
    assert described(file_kind(tmp_path / "o.npz")) == "an .npz of other arrays (a, b, c, d, e, f)"


def test_other_kind_is_none_for_a_file_of_no_kind(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert other_kind(tmp_path / "notes.txt", "metrics") is None


def test_curves_under_a_bare_resume_folder_are_a_runs(tmp_path: Path) -> None:
    """A `dvclive` folder counts when the folder above it is a run's resume/ (run_of_curves)."""
    (tmp_path / "run/resume/dvclive").mkdir(parents=True)
    assert run_of_curves(tmp_path / "run/resume/dvclive/m.json") == tmp_path / "run/resume"


def test_a_resume_folder_marks_a_run(tmp_path: Path) -> None:
    """RUN_MARKS: best.pt, last.pt, train_log.csv or resume/ (a folder) beside dvclive/."""
    (tmp_path / "run/resume").mkdir(parents=True)
    (tmp_path / "run/dvclive").mkdir()
    assert run_of_curves(tmp_path / "run/dvclive/m.json") == tmp_path / "run"


def test_the_run_of_curves_is_named_as_the_path_was_given(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run/dvclive").mkdir(parents=True)
    (tmp_path / "run/train_log.csv").write_text("epoch,loss\n")
    monkeypatch.chdir(tmp_path)
    assert run_of_curves("run/dvclive/plots/m.json") == Path("run")


def test_json_output_takes_any_case_and_an_api_argument_reads_as_one(tmp_path: Path) -> None:
    check_json_output(tmp_path / "m.JSON", "--out", "the metrics")
    with pytest.raises(ValueError) as error:
        check_json_output("c.png", "out=", "the metrics")
    assert str(error.value).startswith("out=c.png must name a .json file (the metrics is JSON)")


def test_recorded_run_skips_an_array_that_is_no_scalar(tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", indices=np.arange(3), pseudo_labels=np.arange(3),
             labeler=np.array("mt"), seed=np.array([1, 2, 3]))
    assert recorded_run(tmp_path / "p.npz", "pseudo-labels") == {"labeler": "mt"}


def test_a_metrics_file_without_part_is_part_all(tmp_path: Path) -> None:
    path = _json(tmp_path / "m.json", {**RUN, "accuracy": {}, "manifest": {}})
    assert recorded_run(path, "metrics") == {**RUN, "part": "all"}


def _metrics(tmp_path: Path, **changes: object) -> Path:
    return _json(tmp_path / "m.json", {**RUN, "accuracy": {"Natural": 50.0}, "manifest": {},
                                       **changes})


def test_parts_core_and_all_share_a_file(tmp_path: Path) -> None:
    assert other_run(_metrics(tmp_path, part="core"), "metrics", {**RUN, "part": "all"}) is None


def test_other_run_looks_only_at_a_file_of_its_kind(tmp_path: Path) -> None:
    path = _json(tmp_path / "v.json", {**RUN, "method": "trades", "set": "validation",
                                       "manifest": {}})
    assert other_run(path, "metrics", RUN) is None


def test_a_field_the_run_leaves_none_is_not_compared(tmp_path: Path) -> None:
    assert other_run(_metrics(tmp_path), "metrics", {**RUN, "seed": None}) is None


def test_the_part_is_said_only_when_the_parts_differ(tmp_path: Path) -> None:
    line = other_run(_metrics(tmp_path, part="extra"), "metrics", {**RUN, "part": "core"})
    assert line == ("the metrics of wscat seed 1 on digits (cnn), part extra, not of wscat "
                    "seed 1 on digits (cnn), part core")
    line = other_run(_metrics(tmp_path, seed=2), "metrics", RUN)
    assert line == ("the metrics of wscat seed 2 on digits (cnn), not of wscat seed 1 on digits "
                    "(cnn)")


def test_a_splits_run_is_its_dataset_and_seed(tmp_path: Path) -> None:
    """other_run's docstring: "the split of digits seed 2, not of digits seed 1"."""
    np.savez(tmp_path / "s.npz", dataset=np.array("digits"), seed=np.array(2),
             labelled=np.arange(2), unlabelled=np.arange(2), validation=np.arange(2),
             test=np.arange(2))
    assert (other_run(tmp_path / "s.npz", "split", {"dataset": "digits", "seed": 1})
            == "the split of digits seed 2, not of digits seed 1")


def _split(tmp_path: Path) -> Path:
    np.savez(tmp_path / "s.npz", dataset=np.array("digits"), seed=np.array(1),
             labelled=np.arange(2), unlabelled=np.arange(2), validation=np.arange(2),
             test=np.arange(2))
    return tmp_path / "s.npz"


def test_a_hint_without_option_or_seed_says_pass_and_n(tmp_path: Path) -> None:
    """paths.BEST is results/models/{dataset}/{model}/{method}/seed{seed}/best.pt: an unknown
    seed is N, another unknown field its name in capitals."""
    with pytest.raises(ValueError) as error:
        check_input_kind(_split(tmp_path), "checkpoint", "", {"dataset": "digits"})
    assert str(error.value).endswith(
        "not a checkpoint: pass results/models/digits/MODEL/METHOD/seedN/best.pt")


def test_a_params_yaml_is_not_judged_by_its_json_kinds(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("accuracy: {Natural: 50.0}\nmanifest: {}\n")
    check_input_kind(tmp_path / "p.yaml", "params", "--params")


def test_an_npz_with_some_expected_arrays_goes_to_its_loader(tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", indices=np.arange(3), junk=np.arange(3))
    check_input_kind(tmp_path / "p.npz", "pseudo-labels", "--pseudo")


def test_is_npy_checks_the_whole_magic(tmp_path: Path) -> None:
    (tmp_path / "a.npy").write_bytes(b"\x93NUMBER of things")
    np.save(tmp_path / "b.npy", np.arange(3))
    assert (is_npy(tmp_path / "a.npy"), is_npy(tmp_path / "b.npy")) == (False, True)


# --- own_method ---------------------------------------------------------------------------------

@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder to run in (paths in params.yaml are read from it)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


@pytest.mark.parametrize("objective, own", [
    ("examples/mart.py:Mart", True), ("mart.py:_Mart2", True),
    ("mart.py:2Mart", False),         # a class name is a Python identifier
    ("mart.py:Mart-2", False), ("mart.py:Mart.loss", False),   # the whole text is FILE.py:Class
    ("trades", False)])
def test_an_own_objective_is_file_py_colon_identifier(objective: str, own: bool) -> None:
    assert own_method.is_own(objective) is own


def test_the_keys_the_pipeline_reads_are_no_knobs() -> None:
    """docs/methods.md: `data`, `selection`, `labeler`, `per_dataset`, `generated*` (and
    `objective`, `base`) are not passed to the constructor."""
    assert {"objective", "base", "data", "selection", "labeler", "per_dataset", "generated",
            "generated_fraction", "generated_labeler"} <= own_method.PIPELINE_KEYS


def test_a_module_beside_the_method_comes_before_one_in_the_working_folder(here: Path) -> None:
    _write(here, {"sub/m.py": "import helpers\n", "sub/helpers.py": "X = 1\n",
                  "helpers.py": "X = 2\n"})
    assert own_method.code_files("sub/m.py:M") == [Path("sub/m.py"), Path("sub/helpers.py")]


def test_from_a_package_import_a_module_counts_the_module(here: Path) -> None:
    _write(here, {"m.py": "from pkg import util\n", "pkg/util.py": "X = 1\n"})
    assert own_method.code_files("m.py:M") == [Path("m.py"), Path("pkg/util.py")]


def test_import_a_dotted_module_counts_its_file(here: Path) -> None:
    _write(here, {"m.py": "import mylib.terms\n", "mylib/terms.py": "X = 1\n"})
    assert own_method.code_files("m.py:M") == [Path("m.py"), Path("mylib/terms.py")]


def test_the_imports_of_an_imported_module_count_too(here: Path) -> None:
    _write(here, {"m.py": "import first\n", "first.py": "import second\n",
                  "second.py": "X = 1\n"})
    assert own_method.code_files("m.py:M") == [Path("m.py"), Path("first.py"), Path("second.py")]


def test_wscat_itself_is_never_the_methods_code(here: Path) -> None:
    """A wscat/ folder in the folder you run in (a checkout) is the package, whose version the run
    records: not the method's code."""
    _write(here, {"m.py": "from wscat.methods import Method\nimport wscat.losses\n",
                  "wscat/__init__.py": "", "wscat/methods.py": "", "wscat/losses.py": ""})
    assert own_method.code_files("m.py:M") == [Path("m.py")]


def test_the_digest_is_sha256_of_each_path_nul_content_nul(here: Path) -> None:
    """digest: SHA-256 over the code files, each with its path (a renamed file is another
    method's code)."""
    _write(here, {"m.py": "import h\n", "h.py": "X = 1\n", "n.py": "import h\n"})
    expected = hashlib.sha256(b"m.py\0import h\n\0h.py\0X = 1\n\0").hexdigest()
    assert own_method.digest("m.py:M") == expected
    assert own_method.digest("n.py:M") != expected


def test_digest_or_none_is_empty_for_a_file_that_cannot_be_read(here: Path) -> None:
    assert own_method.digest_or_none("missing.py:M") == ""
    assert own_method.digest_or_none("a" * 300 + ".py:M") == ""  # the name is too long to open


METHOD = ("import torch\n"
          "from wscat.methods import Method\n"
          "class Mine(Method):\n"
          "    version = {version}\n"
          "    def loss(self, model, batch, ctx):\n"
          "        return torch.ones((), requires_grad=True), {{}}\n")


def test_an_edited_file_loads_as_its_new_class_in_its_own_module(
        here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load: once a process for each content, its module in sys.modules (where dataclasses and
    pickling look it up). The edit comes within the second and keeps the length, which Python's
    own loader would not notice: it ran the first version's .pyc (with bytecode written, as
    where PYTHONDONTWRITEBYTECODE is unset), and wscat writes no .pyc of your files."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    _write(here, {"m.py": METHOD.format(version=1)})
    first = own_method.load("m.py:Mine")
    _write(here, {"m.py": METHOD.format(version=2)})
    second = own_method.load("m.py:Mine")
    assert (first.version, second.version) == (1, 2)
    assert not (here / "__pycache__").exists() and sys.dont_write_bytecode is False
    assert first.__module__ != second.__module__
    assert sys.modules[first.__module__].Mine is first
    assert sys.modules[second.__module__].Mine is second


def test_a_file_that_does_not_import_leaves_no_module_behind(here: Path) -> None:
    _write(here, {"broken_import.py": "import torch\nraise RuntimeError('no')\n"})
    before = set(sys.modules)
    with pytest.raises(own_method.OwnMethodError) as error:
        own_method.load("broken_import.py:Mine")
    assert str(error.value) == ("broken_import.py does not import: RuntimeError: no "
                                "(broken_import.py line 2)")
    assert not [name for name in set(sys.modules) - before if "broken_import" in name]


def test_a_syntax_error_names_its_line(here: Path) -> None:
    _write(here, {"syntax.py": "import torch\n\ndef f(:\n    pass\n"})
    with pytest.raises(own_method.OwnMethodError) as error:
        own_method.load("syntax.py:Mine")
    assert str(error.value).startswith("syntax.py does not import: SyntaxError: ")
    assert str(error.value).endswith("(syntax.py line 3)")


@pytest.mark.parametrize("text, name, needle", [
    ("from wscat.methods import Method\n", "Method",
     "bad.py:Method is wscat's base class, imported; name your subclass of it (none there)"),
    ("class Plain:\n    pass\n", "Plain",
     "bad.py:Plain is not a subclass of wscat.methods.Method"),
    ("from wscat.methods import Method\nclass Half(Method):\n    pass\n", "Half",
     "bad.py:Half does not define loss(model, batch, ctx) (it is abstract)"),
    ("def helper():\n    pass\n", "helper", "bad.py defines no class helper"),
    ("from wscat.methods import Method\nfrom wscat.methods.standard import Standard\n"
     "class Mine(Standard):\n    pass\n", "Nope",
     "bad.py defines no class Nope; its methods: Mine"),  # not the imported Standard
])
def test_a_name_that_is_no_method_of_the_file_is_refused(here: Path, text: str, name: str,
                                                         needle: str) -> None:
    _write(here, {"bad.py": text})
    with pytest.raises(ValueError) as error:
        own_method.load(f"bad.py:{name}")
    line = str(error.value)
    assert (line == needle if needle.endswith("Mine") else line.startswith(needle)), line
    assert "\n" not in line


RAISES = ("from wscat.methods import Method\n"
          "def fail():\n"
          "    raise ValueError()\n"
          "class Raises(Method):\n"
          "    def __init__(self) -> None:\n"
          "        super().__init__()\n"
          "        fail()\n"
          "    def loss(self, model, batch, ctx):\n"
          "        return None\n")


def test_an_error_without_message_names_the_deepest_line_of_the_file(here: Path) -> None:
    _write(here, {"raises.py": RAISES})
    cls = own_method.load("raises.py:Raises")
    with pytest.raises(own_method.OwnMethodError) as error:
        own_method.build("raises.py:Raises", cls, {})
    assert str(error.value) == ("raises.py:Raises: its constructor raised ValueError: (no message) "
                                "(raises.py line 3)")


RETURNS = ("import torch\n"
           "from wscat.methods import Method\n"
           "class Returns(Method):\n"
           "    def __init__(self, kind: str = 'ok') -> None:\n"
           "        super().__init__()\n"
           "        self.kind = kind\n"
           "    def loss(self, model, batch, ctx):\n"
           "        one = torch.ones((), requires_grad=True) * 2\n"
           "        stat = one.detach()\n"
           "        return {\n"
           "            'ok': (one, {'bce': stat}),\n"
           "            'one-element': (torch.ones(1, requires_grad=True) * 2, {}),\n"
           "            'triple': (one, {}, {}),\n"
           "            'list': (one, [('bce', stat)]),\n"
           "            'suffix': (one, {'bce!': stat}),\n"
           "            'score': (one, {'score': stat}),\n"
           "            'vector': (one, {'bce': torch.ones(3)}),\n"
           "        }[self.kind]\n")


@pytest.mark.parametrize("kind, needle", [
    ("ok", None),
    ("one-element", None),  # one element: backward() takes it as a scalar loss
    ("triple", "a pair (loss, {name: tensor})"),
    ("list", "its second item a dict of statistics"),
    ("suffix", "statistic names of letters, digits and _ ('bce!'"),
    ("score", "statistic names other than the trainer's own ('score'"),
    ("vector", "each statistic a scalar tensor ('bce' is not"),
])
def test_what_a_loss_may_return(here: Path, kind: str, needle: str | None) -> None:
    """docs/methods.md, "What it may return": the loss (a scalar tensor with a gradient) and a
    dict of scalar statistics named with letters, digits and _, none of epoch, lr, loss,
    seconds, score, val_*."""
    _write(here, {"returns.py": RETURNS})
    method = own_method.build("returns.py:Returns", own_method.load("returns.py:Returns"),
                              {"kind": kind})
    if needle is None:
        method.loss(None, None, None)
        return
    with pytest.raises(own_method.OwnMethodError) as error:
        method.loss(None, None, None)
    assert str(error.value).startswith(
        f"returns.py:Returns: its loss must return {needle}"), str(error.value)


# --- api_checks ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_short_keeps_sixty_characters_and_cuts_longer_to_sixty() -> None:
    assert api_checks.short("x" * 58) == "'" + "x" * 58 + "'"            # a repr of 60
    assert api_checks.short("x" * 59) == "'" + "x" * 56 + "..."          # 61: 57 and ...


def test_a_name_that_is_not_a_str_is_said_so(params: dict) -> None:
    with pytest.raises(ConfigError) as error:
        api_checks.check_names(params, method=3)
    assert str(error.value).startswith("method=3 is not a name; pass one of the params' methods: "
                                       "standard, trades")


@pytest.mark.parametrize("seed", [0, 2**32 - 1])
def test_a_seed_is_any_int_from_0_to_2_to_the_32_minus_1(seed: int) -> None:
    """docs/api.md: `seed` is an int in 0..2^32−1."""
    assert api_checks.checked_seed(seed) == seed


def test_a_numpy_integer_seed_is_taken_as_its_int() -> None:
    assert type(api_checks.checked_seed(np.int64(3))) is int


@pytest.mark.parametrize("threads, ok", [(0, False), (1, True), (THREADS_MAX, True),
                                         (True, False), (np.True_, False)])
def test_threads_are_an_int_from_1_to_threads_max(threads: object, ok: bool) -> None:
    if ok:
        assert api_checks.checked_threads(threads) == threads
    else:
        with pytest.raises(ValueError, match="threads="):
            api_checks.checked_threads(threads)


def test_an_npz_with_some_of_a_splits_arrays_is_its_loaders(tmp_path: Path) -> None:
    np.savez(tmp_path / "s.npz", labelled=np.arange(2), junk=np.arange(2))
    assert api_checks.input_file(tmp_path / "s.npz", "split") == tmp_path / "s.npz"


def test_a_cut_file_of_another_kind_is_said_to_be_cut_short(tmp_path: Path) -> None:
    whole = _split(tmp_path).read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ValueError) as error:
        api_checks.input_file(tmp_path / "cut.npz", "checkpoint")
    assert str(error.value).startswith(f"{tmp_path / 'cut.npz'} is a wscat split (`wscat split`) "
                                       "(cut short), not a checkpoint; pass checkpoint= ")


def test_an_output_that_is_an_input_is_one_line_without_errno(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    with pytest.raises(ValueError) as error:
        api_checks.guard({"checkpoint=": path}, {"out=": path})
    assert "Errno" not in str(error.value) and str(path) in str(error.value)


class _Gray(torch.nn.Module):
    def __init__(self, channels: int = 1) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, 8, 3)


@pytest.mark.parametrize("images, channels, words", [
    (np.zeros((2, 1, 4, 4), np.int64), 1, "images are a numpy array of int64; pass uint8"),
    (torch.zeros(4, 4), 1, "images are 4 x 4; pass a batch, N x 1 x H x W; one image: "
                           "images[None]; N grayscale images: images[:, None]"),
    (torch.zeros(3, 4, 4), 3, "images are 3 x 4 x 4; pass a batch, N x 3 x H x W; one image: "
                              "images[None]"),
    (torch.zeros(2, 4, 4, 3), 3, "channel-last (N x H x W x C)"),
    (torch.full((1, 1, 4, 4), float("nan")), 1, "NaN or infinite"),
    (torch.full((1, 1, 4, 4), -0.5), 1, "values from -0.5 to -0.5, outside [0, 1]"),
    (torch.full((1, 1, 4, 4), 200.0), 1, "values from 200 to 200, outside [0, 1]"),
])
def test_images_predict_would_misread_are_refused(images: object, channels: int,
                                                  words: str) -> None:
    with pytest.raises(ValueError) as error:
        api_checks.images_for(_Gray(channels), images)
    assert words in str(error.value) and "\n" not in str(error.value)
    if channels == 3 and isinstance(images, torch.Tensor) and images.ndim == 3:
        assert str(error.value).endswith("images[None]")  # no grayscale hint for 3 channels


def test_float64_images_take_the_models_dtype() -> None:
    images = api_checks.images_for(_Gray(), np.full((1, 1, 4, 4), 0.5))
    assert images.dtype == torch.float32


def test_json_output_of_the_api_must_be_named_json(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^out=.*c\.png must name a \.json file \(the metrics"):
        api_checks.check_output(tmp_path / "c.png", "metrics", "out", "evaluate_checkpoint")


def test_another_kind_or_run_at_an_output_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds a wscat split"):
        api_checks.check_output(_split(tmp_path), "metrics", "out", "evaluate_checkpoint")
    with pytest.raises(ValueError, match="holds the metrics of wscat seed 2"):
        api_checks.check_output(_metrics(tmp_path, seed=2), "metrics", "out",
                                "evaluate_checkpoint", RUN)


def test_an_output_in_a_runs_curves_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run/dvclive").mkdir(parents=True)
    (tmp_path / "run/best.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="is inside the training curves of"):
        api_checks.check_output(tmp_path / "run/dvclive/m.json", "metrics", "out",
                                "evaluate_checkpoint")


def test_a_checkpoint_naming_no_run_is_refused(params: dict, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="its metadata names no dataset, model and method"):
        api_checks.check_run_of(tmp_path / "best.pt", {"model": "cnn", "method": "standard"},
                                params)


def test_the_labelers_train_first(params: dict) -> None:
    """runs_of: its labelers first, then itself (wscat's pseudo-labels are mt's; dmat's
    generated images, when it has some, are labelled by its generated_labeler)."""
    assert api_checks.runs_of(params, "wscat", "digits") == ["mt", "wscat"]
    with_images = {**params, "methods": {**params["methods"], "dmat": {
        **params["methods"]["dmat"], "generated": "g.npz", "generated_labeler": "standard"}}}
    assert api_checks.runs_of(with_images, "dmat", "digits") == ["standard", "dmat"]


def test_pseudo_labels_of_another_model_in_out_dir_are_refused(tmp_path: Path) -> None:
    """train_method writes OUT_DIR/pseudo-LABELER-seedN.npz."""
    np.savez(tmp_path / "pseudo-mt-seed1.npz", indices=np.arange(2), pseudo_labels=np.arange(2),
             labeler=np.array("mt"), seed=np.array(1), dataset=np.array("digits"),
             model=np.array("cnn-wide"))
    with pytest.raises(ValueError, match="pseudo-mt-seed1.npz holds the pseudo-labels of mt"):
        api_checks.check_pseudo_labels(tmp_path, "mt", dataset="digits", model="cnn", seed=1)


def _training(params: dict, out_dir: Path, method: str = "standard") -> None:
    api_checks.check_training(params, method, dataset="digits", model="cnn", seed=1,
                              out_dir=out_dir, device=torch.device("cpu"), device_named=True)


def test_an_out_dir_that_is_a_file_or_under_one_is_refused(params: dict, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        _training(params, tmp_path / "f")
    with pytest.raises(OSError):
        _training(params, tmp_path / "f" / "runs")


def test_generated_images_that_are_not_there_are_refused(params: dict, tmp_path: Path) -> None:
    with_images = {**params, "methods": {**params["methods"], "dmat": {
        **params["methods"]["dmat"], "generated": str(tmp_path / "g.npz")}}}
    with pytest.raises(api_checks.InputNotFound, match="generated-data file not found"):
        _training(with_images, tmp_path / "runs", "dmat")


# --- export -------------------------------------------------------------------------------------

SPEC = {"architecture": "cnn", "width": 4}
ACCURACY = {"Natural": 87.2, "AA": 50.0, "PGD": 61.25}


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, torch.nn.Module]:
    """run/best.pt (a width-4 CNN on 1 x 8 x 8 images, 3 classes, trained 3 epochs: best.pt
    records them) and m.json, its metrics as `wscat evaluate` writes them: the run's fields,
    accuracies, and a manifest with eps, n_examples, AutoAttack's own count and the weights'
    digest. Returns the folder (the working folder) and the network."""
    torch.manual_seed(0)
    net = build_model(**SPEC, in_channels=1, num_classes=3, mean=(0.5,), std=(0.25,)).eval()
    (tmp_path / "run").mkdir()
    meta = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1,
            "model_spec": SPEC, "in_channels": 1, "num_classes": 3, "mean": [0.5],
            "std": [0.25], "training_fingerprint": "a" * 16, "fingerprint": "b" * 16}
    save_checkpoint(tmp_path / "run/best.pt", {"ema": net.state_dict(), "epoch": 3,
                                               "meta": meta})
    _json(tmp_path / "m.json", {
        "dataset": "digits", "model": "cnn", "method": "standard", "seed": 1,
        "accuracy": ACCURACY,
        "manifest": {"eps": 0.15, "n_examples": 100, "attacks": {"AA": {"n_examples": 40}},
                     "training": {"weights_sha256": weights_digest(net)}}})
    monkeypatch.chdir(tmp_path)
    return tmp_path, net


@pytest.mark.parametrize("spec, name", [
    ({"architecture": "wideresnet", "depth": 28, "width": 10}, "WideResNet-28-10"),
    ({"architecture": "resnet", "depth": 50}, "ResNet-50"),
    ({"architecture": "resnet", "depth": 18, "block": "basic"}, "ResNet-18 (basic blocks)"),
    ({"architecture": "cnn", "width": 32}, "CNN (width 32)"),
    ({"architecture": "cnn"}, "CNN"),
])
def test_architectures_are_named_as_robustbench_names_them(spec: dict, name: str) -> None:
    assert export.architecture_name(spec) == name


@pytest.mark.parametrize("eps, text", [(8 / 255, "8/255"), (4 / 255, "4/255"), (0.15, "0.15"),
                                       (8 / 255 + 1e-6, "0.0313735")])
def test_eps_is_n_over_255_only_when_it_is_one(eps: float, text: str) -> None:
    """8/255 as RobustBench writes it; other budgets as decimals (8/255 + 1e-6 =
    0.031373549..., six significant digits)."""
    assert export.eps_text(eps) == text


def test_an_entry_holds_the_checkpoints_and_the_metrics_fields(shipped) -> None:
    folder, _ = shipped
    entry = export.export_model("run/best.pt", "m.json", "e.json")
    on_disk = json.loads((folder / "e.json").read_text())
    assert on_disk == entry
    weights = (folder / "e.pt").read_bytes()
    assert {key: entry[key] for key in ("dataset", "threat_model", "eps", "architecture",
                                        "clean_acc", "autoattack_acc", "additional_data",
                                        "number_forward_passes", "state_dict",
                                        "state_dict_sha256")} == {
        "dataset": "digits", "threat_model": "Linf", "eps": "0.15", "architecture": "CNN (width 4)",
        "clean_acc": "87.20", "autoattack_acc": "50.00", "additional_data": False,
        "number_forward_passes": 1, "state_dict": "e.pt",
        "state_dict_sha256": hashlib.sha256(weights).hexdigest()}
    assert "seed1" in entry["name"] and "standard" in entry["name"]  # paths.RUN's seed{seed}
    assert entry["footnote"].endswith("seed 1; AutoAttack standard on 40 test images, the other "
                                      "attacks on 100.")
    block = entry["wscat"]
    assert (block["format"], block["method"], block["seed"], block["model_spec"],
            block["input_range"], block["checkpoint"], block["checkpoint_epoch"],
            block["accuracy"]) == ("wscat-robustbench-entry-v1", "standard", 1, SPEC,
                                   [0.0, 1.0], "best", 3, ACCURACY)
    for name in ("e.json", "e.pt"):  # files to share: readable by others
        assert (folder / name).stat().st_mode & 0o777 == 0o644


def test_the_exported_model_is_the_network_in_eval_mode(shipped) -> None:
    folder, net = shipped
    export.export_model("run/best.pt", "m.json", "shared/e.json")
    model = export.load_exported(folder / "shared/e.json")
    images = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    assert not model.training and not model.model.training
    assert torch.equal(model(images), net(images)[1])


def test_a_json_that_is_no_entry_or_a_changed_state_dict_is_not_loaded(shipped) -> None:
    folder, _ = shipped
    with pytest.raises(ValueError, match="is not a wscat-robustbench-entry-v1 entry"):
        export.load_exported(_json(folder / "x.json", {"state_dict": "e.pt", "wscat": {}}))
    export.export_model("run/best.pt", "m.json", "e.json")
    with open(folder / "e.pt", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ValueError, match="does not match the sha256 recorded in"):
        export.load_exported(folder / "e.json")


def _edit(folder: Path, change) -> None:
    data = json.loads((folder / "m.json").read_text())
    change(data)
    _json(folder / "m.json", data)


@pytest.mark.parametrize("change, words", [
    (lambda d: d.__setitem__("seed", 2), "m.json is the evaluation of digits/cnn/standard/2, not "
                                         "of the checkpoint's run digits/cnn/standard/1; pass "
                                         "that run's metrics (--metrics "
                                         "results/metrics/digits/cnn/standard/seed1.json)"),
    (lambda d: d["accuracy"].pop("Natural"), "m.json has no 'Natural' accuracy"),
    (lambda d: d.__setitem__("accuracy", [87.2, 50.0]), "m.json holds no accuracies"),
    (lambda d: d["manifest"].pop("training"), "m.json does not record which weights it measured"),
])
def test_metrics_that_are_not_this_checkpoints_measure_are_refused(shipped, change,
                                                                   words: str) -> None:
    folder, _ = shipped
    _edit(folder, change)
    with pytest.raises(ValueError) as error:
        export.export_model("run/best.pt", "m.json", "e.json")
    assert str(error.value).startswith(words), str(error.value)
    assert not (folder / "e.json").exists() and not (folder / "e.pt").exists()


def test_out_must_be_a_json_name(shipped) -> None:
    folder, _ = shipped
    with pytest.raises(ValueError, match="--out must name a .json file"):
        export.export_model("run/best.pt", "m.json", "e.txt")
    assert sorted(p.name for p in folder.iterdir()) == ["m.json", "run"]


def test_an_out_in_a_runs_curves_is_refused(shipped) -> None:
    folder, _ = shipped
    (folder / "run/dvclive").mkdir()
    with pytest.raises(ValueError, match="is inside the training curves of run"):
        export.export_model("run/best.pt", "m.json", "run/dvclive/e.json")
    assert list((folder / "run/dvclive").iterdir()) == []


def test_a_state_dict_another_entry_names_is_not_replaced(shipped) -> None:
    """Only the entry's own state dict (named in it, matching its sha256) is replaced: an entry
    copied to e.json with a.pt's copy as e.pt still names a.pt."""
    folder, _ = shipped
    export.export_model("run/best.pt", "m.json", "a.json")
    (folder / "e.json").write_bytes((folder / "a.json").read_bytes())
    (folder / "e.pt").write_bytes((folder / "a.pt").read_bytes())
    with pytest.raises(OSError, match="e.pt exists and is not the state dict of an earlier"):
        export.export_model("run/best.pt", "m.json", "e.json")


def test_an_unfinished_trainings_checkpoint_is_refused(shipped) -> None:
    folder, _ = shipped
    (folder / "run/resume").mkdir()
    (folder / "run/resume/best.pt").write_bytes((folder / "run/best.pt").read_bytes())
    with pytest.raises(CheckpointError, match="the checkpoint of an unfinished training"):
        export.export_model("run/resume/best.pt", "m.json", "e.json")


def _run_meta(params: dict, **changes: object) -> dict:
    return {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1,
            "model_spec": params["models"]["cnn"], **changes}


def test_a_last_pt_is_refused_where_the_params_evaluate_best(params: dict, tmp_path: Path) -> None:
    """check_run_of: not the checkpoint the params evaluate (evaluation.checkpoint: best in
    params.yaml)."""
    with pytest.raises(ValueError, match=r"is a run's last\.pt, but these params evaluate its "
                                         r"best\.pt"):
        api_checks.check_run_of(tmp_path / "last.pt", _run_meta(params, which="last"), params)


def test_a_checkpoint_of_another_training_is_refused(params: dict, tmp_path: Path) -> None:
    """check_run_of: trained with other params (its training fingerprint, 16 hex digits, is not
    the one these params give); one that records none is not checked."""
    api_checks.check_run_of(tmp_path / "best.pt", _run_meta(params), params)
    with pytest.raises(ValueError, match="was trained with other params than these"):
        api_checks.check_run_of(tmp_path / "best.pt",
                                _run_meta(params, training_fingerprint="0" * 16), params)
