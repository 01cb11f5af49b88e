"""`wscat evaluate` and `wscat validate` without --dataset, --model, --method or --seed take each
left out from the checkpoint, which records them, and without --split the workflow's split of
that seed (wscat.cli.fill_from_checkpoint): the same file as with everything given; so does
`wscat pseudo-label`, whose --labeler is the method its labeler's checkpoint records. A name
given is kept, and a checkpoint of another run is still refused; a checkpoint that cannot name
its run (missing, a folder, another kind of file), or a workflow split that is not there, is one
line, exit 2, nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli

NAMES = ["--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1"]


def _main(*argv: object) -> int:
    return cli.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """params.yaml, the seed-1 split s1.npz and Standard trained on it (run/best.pt); its
    weights alone (bare.pt, a state dict) and its tensors without metadata (nometa.pt)."""
    import torch

    from wscat.checkpoint import FORMAT

    folder = tmp_path_factory.mktemp("names")
    params = write_params(folder / "params.yaml", tiny_params(epochs=1))
    assert _main("split", "--params", params, "--dataset", "digits", "--seed", 1,
                 "--out", folder / "s1.npz") == 0
    assert _main("train", "--params", params, *NAMES, "--split", folder / "s1.npz",
                 "--out-dir", folder / "run", "--device", "cpu") == 0
    state = torch.load(folder / "run" / "best.pt", weights_only=True)
    torch.save(state["ema"], folder / "bare.pt")
    torch.save({"format": FORMAT, "ema": state["ema"]}, folder / "nometa.pt")
    return folder


def _step(work: Path, step: str, out: Path, *names: str, checkpoint: str = "run/best.pt",
          extra: tuple[str, ...] = ()) -> list[object]:
    return [step, "--params", work / "params.yaml", *names, "--split", work / "s1.npz",
            "--checkpoint", work / checkpoint, "--out", out, "--device", "cpu", *extra]


@pytest.mark.parametrize("step, extra", [("validate", ()), ("evaluate", ("--part", "core"))])
def test_left_out_names_are_the_checkpoints(work: Path, step: str, extra: tuple[str, ...]) -> None:
    named, bare = work / f"{step}-named.json", work / f"{step}-bare.json"
    assert _main(*_step(work, step, named, *NAMES, extra=extra)) == 0
    assert _main(*_step(work, step, bare, extra=extra)) == 0
    given, taken = json.loads(named.read_text()), json.loads(bare.read_text())
    assert (taken["dataset"], taken["model"], taken["method"], taken["seed"]) == \
        ("digits", "cnn", "standard", 1)
    given.pop("manifest"), taken.pop("manifest")  # when and how long it ran
    assert taken == given


def test_pseudo_label_takes_its_labeler_and_names_from_the_labelers_checkpoint(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labeler = ["--dataset", "digits", "--model", "cnn", "--labeler", "standard", "--seed", "1"]
    runs = {}
    for kind, names in (("named", labeler), ("bare", [])):
        out, report = work / f"pl-{kind}.npz", work / f"pl-{kind}.json"
        assert _main("pseudo-label", "--params", work / "params.yaml", *names, "--split",
                     work / "s1.npz", "--checkpoint", work / "run/best.pt", "--out", out,
                     "--metrics", report, "--device", "cpu") == 0
        with np.load(out) as arrays:
            runs[kind] = ({key: arrays[key].tolist() for key in arrays.files},
                          json.loads(report.read_text()))
    assert "pseudo-label accuracy (standard)" in capsys.readouterr().out
    (named, named_report), (bare, bare_report) = runs["named"], runs["bare"]
    assert bare == named and len(bare) > 0
    named_report.pop("manifest", None), bare_report.pop("manifest", None)
    assert bare_report == named_report
    out = work / "pl-other.npz"
    assert _main("pseudo-label", "--params", work / "params.yaml", "--labeler", "mt",
                 "--checkpoint", work / "run/best.pt", "--split", work / "s1.npz", "--out", out,
                 "--metrics", work / "pl-other.json", "--device", "cpu") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "standard" in err and "mt" in err, err
    assert not out.exists()


def test_some_names_given_the_rest_taken(work: Path) -> None:
    out = work / "partly.json"
    assert _main(*_step(work, "validate", out, "--method", "standard", "--seed", "1")) == 0
    assert out.is_file()


def test_a_given_name_of_another_run_is_still_refused(work: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "other.json"
    capsys.readouterr()
    assert _main(*_step(work, "validate", out, "--method", "trades")) == 2
    err = capsys.readouterr().err.strip()
    assert "holds standard seed 1 on digits, not trades seed 1 on digits" in err, err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_evaluate_says_a_name_of_another_run_can_be_left_out(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """evaluate takes a name left out from the checkpoint: the line says to drop the one that
    differs, or to pass the checkpoint of the run it names."""
    out = work / "other-evaluate.json"
    capsys.readouterr()
    assert _main(*_step(work, "evaluate", out, "--method", "trades",
                        extra=("--part", "core"))) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("run/best.pt holds standard seed 1 on digits, not trades seed 1 on "
                        "digits; drop --method (the checkpoint records it), or pass the best.pt "
                        "of trades seed 1 on digits"), err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_check_run_names_the_options_that_differ() -> None:
    """With the step's option for the method, every name that differs (and only those);
    without it (a caller with no such options), the checkpoint to pass alone."""
    from wscat.checkpoint import check_run

    meta = {"dataset": "digits", "method": "standard", "seed": 1}
    check_run("b.pt", meta, dataset="digits", method="standard", seed=1, method_flag="--method")
    with pytest.raises(ValueError) as error:
        check_run("b.pt", meta, dataset="digits", method="mt", seed=2, method_flag="--labeler")
    assert str(error.value) == ("b.pt holds standard seed 1 on digits, not mt seed 2 on digits; "
                                "drop --labeler/--seed (the checkpoint records them), or pass "
                                "the best.pt of mt seed 2 on digits")
    with pytest.raises(ValueError) as error:
        check_run("b.pt", meta, dataset="digits", method="standard", seed=2)
    assert str(error.value) == ("b.pt holds standard seed 1 on digits, not standard seed 2 on "
                                "digits; pass the best.pt of standard seed 2 on digits")


@pytest.mark.parametrize("checkpoint, phrase", [
    ("nowhere.pt", "checkpoint not found"),
    ("run", "is a folder, not a file"),
    ("bare.pt", "bare.pt is a PyTorch file but not a wscat-checkpoint-v1 file (a bare state dict, "
     "e.g. `wscat export`'s, or another program's); pass a run's best.pt "
     "(results/models/DATASET/MODEL/METHOD/seedN/best.pt)"),
    ("nometa.pt", "nometa.pt has no metadata; delete it and retrain"),
    ("s1.npz", "not a checkpoint"),
])
def test_a_checkpoint_that_cannot_name_its_run_is_one_line(
        work: Path, capsys: pytest.CaptureFixture[str], checkpoint: str, phrase: str) -> None:
    out = work / "nothing.json"
    capsys.readouterr()
    assert _main(*_step(work, "evaluate", out, checkpoint=checkpoint)) == 2
    err = capsys.readouterr().err.strip()
    assert phrase in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("step", cli.NAMES_FROM_CHECKPOINT)
def test_help_says_where_a_left_out_name_comes_from(step: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([step, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.count("(default: the --checkpoint's, which records it)") == 4, text
    assert "default: the workflow's, results/splits/DATASET/seedSEED.npz" in text, text


def test_a_left_out_split_is_the_workflows(work: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Run where the workflow's results/ is: results/splits/digits/seed1.npz is the split."""
    monkeypatch.chdir(work)
    bare = ["validate", "--params", "params.yaml", "--checkpoint", "run/best.pt", "--device",
            "cpu", "--out"]
    capsys.readouterr()
    assert _main(*bare, "no-split.json") == 2
    err = capsys.readouterr().err.strip()
    assert "no --split given, and the workflow's split of digits seed 1, " \
        "results/splits/digits/seed1.npz, is not there" in err and len(err.splitlines()) == 1
    assert "wscat split --dataset digits --seed 1 --out results/splits/digits/seed1.npz" in err
    assert not (work / "no-split.json").exists()
    split = work / "results" / "splits" / "digits" / "seed1.npz"
    split.parent.mkdir(parents=True)
    split.write_bytes((work / "s1.npz").read_bytes())
    assert _main(*bare, "found.json") == 0
    assert _main(*_step(work, "validate", work / "given.json", *NAMES)) == 0
    found, given = (json.loads((work / name).read_text()) for name in ("found.json", "given.json"))
    found.pop("manifest"), given.pop("manifest")
    assert found == given
