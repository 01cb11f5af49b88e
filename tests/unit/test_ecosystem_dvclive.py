"""Per-epoch training metrics through DVCLive: the same numbers as train_log.csv, and a killed and
resumed run leaves exactly the log of a run that never stopped."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.tiny import digits_split, tiny_params
from wscat.config import RunConfig
from wscat.data.training_data import training_data
from wscat.training import train
from wscat.training import trainer as trainer_module


@pytest.fixture(scope="module")
def trades_run():
    params = tiny_params(epochs=2)
    source, split = digits_split()
    run = RunConfig.from_params(params, dataset="digits", model="cnn", method="trades", seed=1)
    return run, lambda: training_data(source, split, "labelled", None)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory, trades_run) -> Path:
    """A run that was never interrupted."""
    run, data = trades_run
    out_dir = tmp_path_factory.mktemp("straight")
    train(run, data(), out_dir)
    return out_dir


def curves(run_dir: Path) -> dict[str, list[dict[str, str]]]:
    """{metric: rows} of a DVCLive folder's metric files."""
    found = {}
    for path in sorted((run_dir / "dvclive" / "plots" / "metrics").glob("*.tsv")):
        with open(path, newline="") as handle:
            found[path.stem] = list(csv.DictReader(handle, delimiter="\t"))
    return found


def test_dvclive_logs_every_epoch_of_the_training_log(straight: Path) -> None:
    with open(straight / "train_log.csv", newline="") as handle:
        history = list(csv.DictReader(handle))
    logged = curves(straight)
    assert set(logged) == set(history[0]) - {"epoch", "seconds"}  # loss terms, lr, validation
    for metric, rows in logged.items():
        assert list(rows[0]) == ["step", metric]  # no wall-clock column: identical runs, identical files
        assert [(row["step"], float(row[metric])) for row in rows] == [
            (row["epoch"], float(row[metric])) for row in history if row[metric]]
    summary = json.loads((straight / "dvclive" / "metrics.json").read_text())
    assert summary["step"] == len(history) and summary["loss"] == float(history[-1]["loss"])
    assert not (straight / "dvclive" / "dvc.yaml").exists()  # dvc.yaml is generated, not DVCLive's


def test_a_resumed_run_continues_its_dvclive_log_exactly(
        tmp_path: Path, trades_run, straight: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after DVCLive logged epoch 2 but before epoch 2's checkpoint was written: the
    resumed run retrains epoch 2 and must not log it twice."""
    run, data = trades_run

    real_save = trainer_module.save_checkpoint
    epochs_saved = []

    def die_before_second_epoch_checkpoint(path: Path, state: dict) -> None:
        if path.name == "last.pt":
            if len(epochs_saved) == 1:
                raise KeyboardInterrupt("killed while checkpointing epoch 2")
            epochs_saved.append(state["epoch"])
        real_save(path, state)

    monkeypatch.setattr(trainer_module, "save_checkpoint", die_before_second_epoch_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        train(run, data(), tmp_path / "killed")
    assert [row["step"] for row in curves(tmp_path / "killed")["loss"]] == ["1", "2"]
    monkeypatch.setattr(trainer_module, "save_checkpoint", real_save)
    train(run, data(), tmp_path / "killed")
    assert curves(tmp_path / "killed") == curves(straight)
    summaries = [json.loads((path / "dvclive" / "metrics.json").read_text())
                 for path in (straight, tmp_path / "killed")]
    assert summaries[0] == summaries[1]


def test_curves_deleted_while_it_trains_are_whole_when_it_ends(
        tmp_path: Path, trades_run, straight: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second `snakemake` that runs this training's job beside it (the run trained by hand
    with `wscat train`, or by a first snakemake) deletes the job's outputs, dvclive/ among them,
    before its own `wscat train` is refused the run folder's lock, and again as it removes the
    failed job's outputs; the training that holds the lock goes on. Its curves once kept only
    the epochs logged after the deletion (a 40-epoch run: epochs 10-40, train_log.csv all 40);
    they are rebuilt from the history when the run ends: the files of a run never disturbed."""
    run, data = trades_run
    out = tmp_path / "run"
    real_log = trainer_module.log_epoch

    def log_then_deleted(live, row) -> None:
        real_log(live, row)
        if row["epoch"] == 1:  # Snakemake's rm of the job's directory() output
            shutil.rmtree(out / "dvclive")

    monkeypatch.setattr(trainer_module, "log_epoch", log_then_deleted)
    train(run, data(), out)

    def files(run_dir: Path) -> dict[str, bytes]:
        return {path.relative_to(run_dir).as_posix(): path.read_bytes()
                for path in sorted((run_dir / "dvclive").rglob("*")) if path.is_file()}

    assert files(out) == files(straight) and len(files(straight)) > 3
    assert not (out / "resume").exists()
