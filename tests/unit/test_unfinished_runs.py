"""A training killed midway leaves its checkpoints in `<run>/resume/` (best.pt and last.pt, the
trainer copies them out only after its last epoch): they are not the run's result. `evaluate`,
`pseudo-label`, `validate`, `export` and the API once took `--checkpoint <run>/resume/best.pt`,
exit 0, so epoch 1 of 2 became a metrics file (a table row) and a RobustBench entry. Each now
refuses it in one line naming the command that finishes the run, and writes nothing.

`wscat validate` reads the checkpoint the params evaluate too (evaluation.checkpoint), as
`wscat evaluate` does: a run's last.pt under `checkpoint: best` is refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.tiny import tiny_params, write_params
from tests.unit.test_run_identity import _main, refused
from wscat import api
from wscat.training import trainer


def _kill_after_first_epoch(argv: list[object]) -> None:
    """`wscat train argv`, stopped (Ctrl-C) once it has saved resume/last.pt: a killed run."""
    real_save = trainer.save_checkpoint

    def save_then_die(path: Path, state: dict) -> None:
        real_save(path, state)
        if path.name == "last.pt":
            raise KeyboardInterrupt("killed after epoch 1")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "save_checkpoint", save_then_die)
        assert _main(*argv) == 130


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """params.yaml (2 epochs), its split s1.npz, Standard seed 1 trained (run/) with its core
    metrics (run.json), and the same training killed after epoch 1 (killed/resume/)."""
    folder = tmp_path_factory.mktemp("unfinished")
    params = write_params(folder / "params.yaml", tiny_params(epochs=2))
    assert _main("split", "--params", params, "--dataset", "digits", "--seed", 1,
                 "--out", folder / "s1.npz") == 0
    train = ["train", "--params", params, "--dataset", "digits", "--model", "cnn", "--method",
             "standard", "--seed", 1, "--split", folder / "s1.npz", "--device", "cpu"]
    assert _main(*train, "--out-dir", folder / "run") == 0
    _kill_after_first_epoch([*train, "--out-dir", folder / "killed"])
    assert sorted(p.name for p in (folder / "killed/resume").iterdir()) == ["best.pt", "last.pt"]
    assert _main(*_evaluate(folder, "run/best.pt", folder / "run.json")) == 0
    return folder


def _evaluate(work: Path, checkpoint: str, out: Path) -> list[object]:
    return ["evaluate", "--params", work / "params.yaml", "--dataset", "digits", "--model",
            "cnn", "--method", "standard", "--seed", 1, "--split", work / "s1.npz",
            "--checkpoint", work / checkpoint, "--out", out, "--part", "core", "--device", "cpu"]


def _pseudo(work: Path, checkpoint: str, out: Path) -> list[object]:
    return ["pseudo-label", "--params", work / "params.yaml", "--dataset", "digits", "--model",
            "cnn", "--labeler", "standard", "--seed", 1, "--split", work / "s1.npz",
            "--checkpoint", work / checkpoint, "--out", out / "p.npz", "--metrics",
            out / "p.json", "--device", "cpu"]


def _validate(work: Path, checkpoint: str, out: Path, params: Path | None = None
              ) -> list[object]:
    return ["validate", "--params", params or work / "params.yaml", "--dataset", "digits",
            "--model", "cnn", "--method", "standard", "--seed", 1, "--split", work / "s1.npz",
            "--checkpoint", work / checkpoint, "--out", out / "v.json", "--device", "cpu"]


def _export(work: Path, checkpoint: str, out: Path) -> list[object]:
    return ["export", "--checkpoint", work / checkpoint, "--metrics", work / "run.json",
            "--out", out / "entry.json"]


def _finish_line(work: Path, name: str) -> str:
    return (f"{work / 'killed/resume' / name} is the checkpoint of an unfinished training (a "
            "run's resume/, kept for a resume), not its result; finish the run first: rerun the "
            f"same `wscat train ... --out-dir {work / 'killed'}` (it resumes where the training "
            f"stopped), then pass {work / 'killed' / name}")


@pytest.mark.parametrize("step", [_evaluate, _pseudo, _validate, _export])
@pytest.mark.parametrize("name", ["best.pt", "last.pt"])
def test_a_killed_training_s_checkpoint_is_refused(runs, capsys, tmp_path, step, name) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = out / "m.json" if step is _evaluate else out
    line = refused(capsys, *step(runs, f"killed/resume/{name}", target))
    assert line.endswith(_finish_line(runs, name)), line
    assert list(out.iterdir()) == []


def test_the_finished_run_s_checkpoint_still_passes(runs, tmp_path) -> None:
    assert _main(*_pseudo(runs, "run/best.pt", tmp_path)) == 0
    assert _main(*_validate(runs, "run/best.pt", tmp_path)) == 0
    assert _main(*_export(runs, "run/best.pt", tmp_path)) == 0


def test_the_api_refuses_a_killed_training_s_checkpoint(runs, tmp_path) -> None:
    checkpoint = runs / "killed/resume/best.pt"
    params = api.load_params(runs / "params.yaml")
    for call in (lambda: api.load_model(checkpoint),
                 lambda: api.evaluate_checkpoint(checkpoint, params=params,
                                                 out=tmp_path / "m.json", device="cpu"),
                 lambda: api.export_model(checkpoint, runs / "run.json", tmp_path / "e.json")):
        with pytest.raises(ValueError) as refusal:
            call()
        assert str(refusal.value) == _finish_line(runs, "best.pt")
    assert list(tmp_path.iterdir()) == []
    assert not (runs / "killed/resume/split-seed1.npz").exists()  # no split made beside it


def test_a_workflow_run_is_finished_through_snakemake() -> None:
    from wscat.checkpoint import CheckpointError, check_finished

    path = "results/models/digits/cnn/wscat/seed1/resume/best.pt"
    with pytest.raises(CheckpointError) as refusal:
        check_finished(path)
    assert ("finish the run first: rerun snakemake -- results/models/digits/cnn/wscat/seed1/"
            "best.pt (it resumes where the training stopped), then pass "
            "results/models/digits/cnn/wscat/seed1/best.pt") in str(refusal.value)
    check_finished("results/models/digits/cnn/wscat/seed1/best.pt")  # finished: no refusal


def test_validate_refuses_last_pt_where_the_params_evaluate_best_pt(runs, capsys,
                                                                    tmp_path) -> None:
    line = refused(capsys, *_validate(runs, "run/last.pt", tmp_path))
    assert line.endswith(f"{runs / 'run/last.pt'} is a run's last.pt, but these params validate "
                         "its best.pt (evaluation.checkpoint: best); pass its best.pt, or set "
                         "evaluation.checkpoint: last in the params"), line
    assert list(tmp_path.iterdir()) == []
    last = tiny_params(epochs=2)
    last["evaluation"]["checkpoint"] = "last"  # the workflow then passes last.pt: validated
    params = write_params(tmp_path / "last.yaml", last)
    assert _main(*_validate(runs, "run/last.pt", tmp_path, params)) == 0
    assert "best.pt" in refused(capsys, *_validate(runs, "run/best.pt", tmp_path, params))
