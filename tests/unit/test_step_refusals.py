"""Inputs a step used to trust or ignore, now refused before any work with one line, exit 2 and
nothing written: a core metrics file with an impossible number (`evaluate --part extra`), a split
with no unlabelled images (`pseudo-label`) and a `--labeler-checkpoint` that a method would not
read (`train`). The gradient-masking checks fail, not pass, on a number that is not finite."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.helpers import bad_input as bad
from tests.workflow.test_bad_input import (  # noqa: F401  (ready, work: fixtures)
    EVALUATE, PSEUDO, RST, TRAIN, one_line_error, ready, work)
from wscat import cli
from wscat.attacks import masking

NAN = float("nan")


@pytest.fixture(scope="module")
def core(ready: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The core metrics of `ready`'s checkpoint (`wscat evaluate --part core`), as a dict."""
    folder = tmp_path_factory.mktemp("core")
    here = os.getcwd()
    os.chdir(ready)
    try:
        out = folder / "core.json"
        assert cli.main(EVALUATE.format(model="cnn", checkpoint="run/best.pt")
                        .replace("out/m.json", str(out)).split()
                        + ["--part", "core", "--threads", "1"]) == 0
    finally:
        os.chdir(here)
    return json.loads(out.read_text())


def _set(*keys: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value
    return change


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        for key in keys[:-1]:
            data = data[key]
        data.pop(keys[-1])
    return change


EXTRA = (EVALUATE.format(model="cnn", checkpoint="run/best.pt")
         + " --part extra --core core.json")
AA = ("manifest", "attacks", "AA")
CORE_CASES = [  # (id, change to the core file, phrase)
    ("clean-nan", _set(*AA, "clean_accuracy", value=NAN), "manifest.attacks.AA.clean_accuracy"),
    ("clean-null", _set(*AA, "clean_accuracy", value=None), "manifest.attacks.AA.clean_accuracy"),
    ("clean-text", _set(*AA, "clean_accuracy", value="37.5"), "manifest.attacks.AA.clean_accuracy"),
    ("natural-250", _set("accuracy", "Natural", value=250.0), "accuracy.Natural"),
    ("natural-nan", _set("accuracy", "Natural", value=NAN), "accuracy.Natural"),
    ("pgd-inf", _set("accuracy", "PGD", value=float("inf")), "accuracy.PGD"),
    ("fgsm-bool", _set("accuracy", "FGSM", value=True), "accuracy.FGSM"),
    ("pgd-missing", _drop("accuracy", "PGD"), "accuracy.PGD"),
    ("square-nan", _set(*AA, "robust_accuracy_after", "square", value=NAN),
     "manifest.attacks.AA.robust_accuracy_after.square"),
    ("square-missing", _drop(*AA, "robust_accuracy_after", "square"),
     "manifest.attacks.AA.robust_accuracy_after"),
    ("after-null", _set(*AA, "robust_accuracy_after", value=None),
     "manifest.attacks.AA.robust_accuracy_after"),
    ("warnings-not-lists", _set("autoattack_warnings", value={"AA": 5}), "autoattack_warnings"),
]


@pytest.mark.parametrize("change, phrase", [case[1:] for case in CORE_CASES],
                         ids=[case[0] for case in CORE_CASES])
def test_extra_part_refuses_an_impossible_number_in_its_core_file(work, capsys, core,
                                                                   change, phrase):
    """A NaN clean accuracy used to pass the eps-0 check and be written as NaN; null ended in
    "unexpected TypeError" with the AutoAttack shards left behind; 250% was copied through."""
    data = copy.deepcopy(core)
    change(data)
    (work / "core.json").write_text(json.dumps(data))
    command = EXTRA
    line = one_line_error(command.split(), phrase, work, capsys)
    assert "core.json" in line and "--part core" in line, line


def test_extra_part_still_reads_a_good_core_file(work, capsys, core):
    (work / "core.json").write_text(json.dumps(core))
    command = EXTRA
    assert cli.main(command.split()) == 0, capsys.readouterr().err
    extra = json.loads((work / "out" / "m.json").read_text())
    assert extra["checks"]["eps_zero_equals_natural"]["at_eps_zero"]["AA"] == \
        core["manifest"]["attacks"]["AA"]["clean_accuracy"]
    assert not (work / "out" / "m.json.shards").exists()


def test_masking_checks_fail_on_a_number_that_is_not_finite():
    """abs(nan - x) > 1e-3 is False: a NaN used to read as equal to anything."""
    for natural, at_zero in ((80.0, NAN), (NAN, 80.0), (80.0, float("inf"))):
        check = masking.eps_zero_is_natural({"PGD": 90.0, "AA": natural},
                                            {"PGD": 90.0, "AA": at_zero})
        assert not check["passed"] and "AA" in check["detail"], check
    assert masking.eps_zero_is_natural({"AA": 80.0}, {"AA": 80.0})["passed"]
    rising = masking.falls_monotonically([5, 10], [60.0, NAN], tolerance=1.0, what="steps")
    assert not rising["passed"] and "nan" in rising["detail"], rising
    assert not masking.falls_monotonically([5, 10], [NAN, 50.0], tolerance=1.0,
                                           what="steps")["passed"]
    assert not masking.square_not_better({"apgd-ce": 50.0, "square": NAN})["passed"]
    hidden = {"apgd-ce": 50.0, "apgd-t": NAN, "square": 50.0}  # min() skips a NaN after 50
    assert not masking.square_not_better(hidden)["passed"]
    assert not masking.iterative_not_weaker(NAN, 50.0, tolerance=1.0)["passed"]


def test_pseudo_label_refuses_a_split_without_unlabelled_images(work, capsys):
    """A fully labelled split (`labelled: null`) used to end in "torch.cat(): expected a
    non-empty list of Tensors"."""
    bad.setting("datasets.digits.labelled", None)(work)
    assert cli.main(["split", "--dataset", "digits", "--seed", "1", "--out", "all.npz"]) == 0
    assert cli.main(TRAIN.format(split="all.npz").replace("out/run", "all").split()) == 0
    command = PSEUDO.format(model="cnn", checkpoint="all/best.pt").replace("s.npz", "all.npz")
    line = one_line_error(command.split(), "no unlabelled images", work, capsys)
    assert "datasets.digits.labelled" in line and "split again" in line, line


@pytest.mark.parametrize("command", [
    TRAIN.format(split="s.npz"),
    RST.format(pseudo="p.npz"),
    TRAIN.format(split="s.npz").replace("standard", "dmat"),  # methods.dmat.generated: null
], ids=["standard", "rst", "dmat-without-generated"])
def test_train_refuses_a_labeler_checkpoint_it_would_not_read(work, capsys, command):
    """`--labeler-checkpoint` labels a method's generated images; elsewhere it was ignored."""
    line = one_line_error((command + " --labeler-checkpoint run/best.pt").split(),
                          "drop --labeler-checkpoint", work, capsys)
    assert "generated" in line, line
    assert not (work / "out").exists()


def test_table_of_an_experiment_without_one_says_which_tables_its_runs_fill(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`table: false` (digits-table2): not "no metrics file for method(s) ...", but that it has
    no table and which paper tables to build instead; nothing written."""
    from tests.helpers.tiny import ROOT

    capsys.readouterr()
    code = cli.main(["table", "--params", str(ROOT / "params.yaml"), "--experiment",
                     "digits-table2", "--tex", str(tmp_path / "t.tex"), "--csv",
                     str(tmp_path / "t.csv"), "--summary", str(tmp_path / "t.json"),
                     str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert ("experiment 'digits-table2' has no table of its own (`table: false`): its runs fill "
            "the paper tier's tables (results/paper/digits/Tab-RQ1-digits.tex): build those") in err
    assert not list(tmp_path.iterdir())


def test_messages_name_the_params_file_in_use_and_fill_in_the_dataset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --params other.yaml, an unknown name is said to be missing from other.yaml (not
    params.yaml), and a label budget too big names datasets.digits.labelled (not <name>)."""
    import numpy as np

    from tests.helpers.tiny import tiny_params, write_params
    from wscat.data.split import make_split

    params = write_params(tmp_path / "other.yaml", tiny_params())
    capsys.readouterr()
    assert cli.main(["split", "--params", str(params), "--dataset", "digit", "--seed", "1",
                     "--out", str(tmp_path / "s.npz")]) == 2
    err = capsys.readouterr().err
    assert f"unknown dataset 'digit'; configured in {params}: digits" in err, err
    with pytest.raises(ValueError, match=r"lower datasets\.digits\.labelled in the params file$"):
        make_split("digits", np.repeat(np.arange(2), 10), num_classes=2, seed=1,
                   test_fraction=0.2, labelled=20, val_fraction=0.2, val_max=10)
