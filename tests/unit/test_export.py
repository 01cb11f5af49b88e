"""`wscat export` on a tiny real run (split, train, `wscat evaluate`): the entry ships only numbers
measured on its own weights, never a NaN or impossible accuracy, and never overwrites an input or
a file that is not an earlier export of its own; a refusal is one line, exit 2, nothing written."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.checkpoint import load_checkpoint, save_checkpoint
from wscat.export import export_model, load_exported

EXPORT = ["export", "--checkpoint", "run/best.pt", "--metrics", "m.json", "--out"]


@pytest.fixture(scope="module")
def ready(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with params.yaml, s.npz, run/best.pt, run/last.pt and m.json (best.pt's core
    metrics, as `wscat evaluate` writes them)."""
    work = tmp_path_factory.mktemp("export")
    write_params(work / "params.yaml", tiny_params(epochs=2))
    here = os.getcwd()
    os.chdir(work)
    try:
        run = ["--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1"]
        assert cli.main(["split", "--dataset", "digits", "--seed", "1", "--out", "s.npz"]) == 0
        assert cli.main(["train", *run, "--split", "s.npz", "--out-dir", "run",
                         "--threads", "1"]) == 0
        assert cli.main(["evaluate", *run, "--split", "s.npz", "--checkpoint", "run/best.pt",
                         "--out", "m.json", "--part", "core", "--device", "cpu"]) == 0
    finally:
        os.chdir(here)
    return work


@pytest.fixture
def work(ready: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "work"
    shutil.copytree(ready, folder)
    monkeypatch.chdir(folder)
    return folder


def snapshot(folder: Path) -> dict[str, tuple[int, int] | None]:
    """Every path under `folder`, with a file's size and mtime (a folder's mtime moves with the
    command's lock file, which comes and goes)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            if p.is_file() else None for p in folder.rglob("*")}


def refused(args: list[str], work: Path, capsys: pytest.CaptureFixture, *phrases: str) -> str:
    """Run `wscat export ...`: exit 2, one line holding every phrase, no file new or changed."""
    before = snapshot(work)
    capsys.readouterr()
    code = cli.main(args)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(phrase in lines[0] for phrase in phrases), lines[0]
    assert ".tmp" not in lines[0], lines[0]
    assert snapshot(work) == before, "the refused export wrote or changed files"
    return lines[0]


def edit_metrics(work: Path, change) -> None:
    data = json.loads((work / "m.json").read_text())
    change(data)
    (work / "m.json").write_text(json.dumps(data))


def test_a_good_export_ships_the_evaluated_weights(work: Path) -> None:
    assert cli.main([*EXPORT, "shared/e.json"]) == 0
    entry = json.loads((work / "shared/e.json").read_text())
    measured = json.loads((work / "m.json").read_text())["accuracy"]
    assert entry["autoattack_acc"] == f"{measured['AA']:.2f}"
    assert entry["state_dict"] == "e.pt" and sorted(os.listdir(work / "shared")) == ["e.json",
                                                                                    "e.pt"]
    assert isinstance(load_exported(work / "shared/e.json"), torch.nn.Module)
    assert cli.main([*EXPORT, "shared/e.json"]) == 0  # an earlier export of its own is replaced


def test_metrics_of_other_weights_are_refused(work: Path, capsys) -> None:
    state = load_checkpoint(work / "run/best.pt")
    state["ema"] = {k: v + 1 if v.is_floating_point() else v for k, v in state["ema"].items()}
    save_checkpoint(work / "run/best.pt", {k: v for k, v in state.items() if k != "format"})
    refused([*EXPORT, "e.json"], work, capsys, "m.json", "weights_sha256", "wscat evaluate")


def test_the_same_weights_under_another_epoch_label_export(work: Path) -> None:
    """The entry ships the weights, so the weights' digest decides, not the epoch label (best.pt
    and last.pt of the same weights count their epochs differently)."""
    state = load_checkpoint(work / "run/best.pt")
    save_checkpoint(work / "run/best.pt", {**{k: v for k, v in state.items() if k != "format"},
                                           "epoch": state["epoch"] + 5})
    assert cli.main([*EXPORT, "e.json"]) == 0 and (work / "e.json").is_file()


def test_metrics_that_do_not_name_their_weights_are_refused(work: Path, capsys) -> None:
    edit_metrics(work, lambda data: data["manifest"].pop("training"))
    refused([*EXPORT, "e.json"], work, capsys, "m.json", "weights_sha256", "wscat evaluate")


@pytest.mark.parametrize("key, value", [("AA", float("nan")), ("AA", float("inf")), ("AA", 500),
                                        ("Natural", -1), ("FGSM", "37.5"), ("PGD", None),
                                        ("AA", True)])
def test_an_impossible_accuracy_is_refused(work: Path, capsys, key: str, value: object) -> None:
    edit_metrics(work, lambda data: data["accuracy"].__setitem__(key, value))
    refused([*EXPORT, "e.json"], work, capsys, "m.json", f"'{key}'", "[0, 100]")


def test_a_metrics_file_without_aa_is_refused(work: Path, capsys) -> None:
    edit_metrics(work, lambda data: data["accuracy"].pop("AA"))
    refused([*EXPORT, "e.json"], work, capsys, "m.json", "'AA'")


def test_a_training_checkpoint_beside_the_entry_is_never_replaced(work: Path, capsys) -> None:
    refused([*EXPORT, "run/last.json"], work, capsys, "run/last.pt", "--out")
    assert load_checkpoint(work / "run/last.pt")["meta"]["method"] == "standard"


def test_an_orphan_or_tampered_state_dict_is_not_replaced(work: Path, capsys) -> None:
    (work / "e.pt").write_bytes(b"someone's file")
    refused([*EXPORT, "e.json"], work, capsys, "e.pt", "not the state dict of an earlier export")
    (work / "e.pt").unlink()
    assert cli.main([*EXPORT, "e.json"]) == 0
    (work / "e.pt").write_bytes(b"tampered")
    refused([*EXPORT, "e.json"], work, capsys, "e.pt", "not the state dict of an earlier export")


def test_an_existing_json_that_is_no_export_is_refused_and_no_state_dict_written(
        work: Path, capsys) -> None:
    (work / "e.json").write_text('{"mine": 1}\n')
    refused([*EXPORT, "e.json"], work, capsys, "e.json", "not an earlier `wscat export`")
    assert not (work / "e.pt").exists()


def test_a_folder_at_the_state_dict_path_is_named(work: Path, capsys) -> None:
    (work / "d/e.pt").mkdir(parents=True)
    refused([*EXPORT, "d/e.json"], work, capsys, "d/e.pt", "folder")


def test_the_api_refuses_as_the_command_does(work: Path) -> None:
    with pytest.raises(OSError, match="run/last.pt"):
        export_model("run/best.pt", "m.json", "run/last.json")
    with pytest.raises(OSError, match="is the input --checkpoint"):
        export_model("run/best.pt", "m.json", "run/best.json")
    assert not (work / "run/last.json").exists() and not (work / "run/best.json").exists()


def test_last_pt_counts_its_epochs_as_best_pt_does(work: Path, capsys) -> None:
    """last.pt stores its last epoch 0-based (what a resume continues after); the readers count
    epochs completed: a 2-epoch run's last.pt is evaluated and exported as epoch 2, `which: last`,
    and under `evaluation.checkpoint: best` it is refused rather than recorded as best."""
    assert load_checkpoint(work / "run/last.pt")["epoch"] == 1  # the trainer's meaning, kept
    run = ["--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1",
           "--split", "s.npz", "--checkpoint", "run/last.pt", "--part", "core", "--device", "cpu"]
    refused(["evaluate", *run, "--out", "last.json"], work, capsys,
            "run/last.pt is a run's last.pt, but these params evaluate its best.pt "
            "(evaluation.checkpoint: best); pass its best.pt, or set evaluation.checkpoint: last")
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["evaluation"]["checkpoint"] = "last"
    (work / "last.yaml").write_text(yaml.safe_dump(params))
    assert cli.main(["evaluate", "--params", "last.yaml", *run, "--out", "last.json"]) == 0
    recorded = json.loads((work / "last.json").read_text())["manifest"]["checkpoint"]
    assert (recorded["epoch"], recorded["which"]) == (2, "last")
    assert cli.main(["export", "--checkpoint", "run/last.pt", "--metrics", "last.json", "--out",
                     "last-e.json"]) == 0
    block = json.loads((work / "last-e.json").read_text())["wscat"]
    assert (block["checkpoint_epoch"], block["checkpoint"]) == (2, "last")
    assert cli.main([*EXPORT, "best-e.json"]) == 0
    best = json.loads((work / "best-e.json").read_text())["wscat"]
    assert best["checkpoint"] == "best"
    assert best["checkpoint_epoch"] == load_checkpoint(work / "run/best.pt")["epoch"]


def test_without_metrics_the_runs_own_metrics_file_is_read(work: Path, capsys) -> None:
    """A run's best.pt where the workflow keeps it (results/models/RUN/best.pt): its metrics file
    is results/metrics/RUN.json, so --metrics may be left out; elsewhere, or for last.pt (whose
    weights the metrics did not measure), one line asks for it."""
    run = work / "results/models/digits/cnn/standard/seed1"
    run.mkdir(parents=True)
    shutil.copy2(work / "run/best.pt", run / "best.pt")
    shutil.copy2(work / "run/last.pt", run / "last.pt")
    (work / "results/metrics/digits/cnn/standard").mkdir(parents=True)
    shutil.copy2(work / "m.json", work / "results/metrics/digits/cnn/standard/seed1.json")
    assert cli.main(["export", "--checkpoint", str(run / "best.pt"), "--out", "e.json"]) == 0
    assert cli.main(["export", "--checkpoint", "results/models/digits/cnn/standard/seed1/best.pt",
                     "--out", "e.json"]) == 0
    measured = json.loads((work / "m.json").read_text())["accuracy"]
    assert json.loads((work / "e.json").read_text())["autoattack_acc"] == f"{measured['AA']:.2f}"
    for checkpoint in ("run/best.pt", "results/models/digits/cnn/standard/seed1/last.pt"):
        refused(["export", "--checkpoint", checkpoint, "--out", "f.json"], work, capsys,
                f"--checkpoint {checkpoint} is not a run's best.pt", "pass --metrics")
