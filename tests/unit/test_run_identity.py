"""A checkpoint or split of another run is refused where it is read, as `wscat evaluate` refuses
it: pseudo-label with a labeler of another seed or method, validate with a checkpoint of another
method or seed, and train (pseudo-label, validate, evaluate) on a split made with other split
params. One line, exit 2, nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.data.split import Split, load_split_of, save_split
from wscat.workflow import split_params


def _main(*argv: object) -> int:
    """`wscat argv` in-process."""
    return cli.main([str(a) for a in argv])


def refused(capsys: pytest.CaptureFixture[str], *argv: object) -> str:
    """`wscat argv` in-process: exit 2 and one line, no traceback; the line."""
    capsys.readouterr()
    code = _main(*argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """params.yaml (labelled 100), its splits of seeds 1 and 2, Standard trained on each
    (run_s1/, run_s2/), and params50.yaml: the same params with `labelled: 50`."""
    folder = tmp_path_factory.mktemp("identity")
    params = write_params(folder / "params.yaml", tiny_params(epochs=1))
    fewer = tiny_params(epochs=1)
    fewer["datasets"]["digits"]["labelled"] = 50
    write_params(folder / "params50.yaml", fewer)
    for seed in (1, 2):
        split = folder / f"s{seed}.npz"
        assert _main("split", "--params", params, "--dataset", "digits", "--seed", seed,
                     "--out", split) == 0
        assert _main("train", "--params", params, "--dataset", "digits", "--model", "cnn",
                     "--method", "standard", "--seed", seed, "--split", split,
                     "--out-dir", folder / f"run_s{seed}", "--device", "cpu") == 0
    return folder


def _pseudo(work: Path, labeler: str, checkpoint: str, params: str = "params.yaml",
            out: Path | None = None) -> list[object]:
    """pseudo-label's arguments on s1.npz, writing p.npz and p.json to `out` (default `work`)."""
    out = out or work
    return ["pseudo-label", "--params", work / params, "--dataset", "digits", "--model", "cnn",
            "--seed", 1, "--split", work / "s1.npz", "--labeler", labeler, "--checkpoint",
            work / checkpoint, "--out", out / "p.npz", "--metrics", out / "p.json",
            "--device", "cpu"]


def _validate(work: Path, method: str, checkpoint: str, params: str = "params.yaml",
              out: Path | None = None) -> list[object]:
    """validate's arguments on s1.npz, writing v.json to `out` (default `work`)."""
    return ["validate", "--params", work / params, "--dataset", "digits", "--model", "cnn",
            "--seed", 1, "--split", work / "s1.npz", "--method", method, "--checkpoint",
            work / checkpoint, "--out", (out or work) / "v.json", "--device", "cpu"]


@pytest.mark.parametrize("step, who, checkpoint, holds, drop", [
    ("pseudo-label", "standard", "run_s2/best.pt",
     "holds standard seed 2 on digits, not standard seed 1", "--seed"),
    ("pseudo-label", "mt", "run_s1/best.pt",
     "holds standard seed 1 on digits, not mt seed 1 on digits", "--labeler"),
    ("validate", "trades", "run_s1/best.pt",
     "holds standard seed 1 on digits, not trades seed 1 on digits", "--method"),
    ("validate", "standard", "run_s2/best.pt",
     "holds standard seed 2 on digits, not standard seed 1", "--seed"),
])
def test_a_checkpoint_of_another_seed_or_method_is_refused(work, capsys, step, who, checkpoint,
                                                          holds, drop):
    """pseudo-label's labeler (`who`: --labeler) and validate's method (--method); the line
    names the option that differs, which the checkpoint's own record would fill."""
    line = refused(capsys, *(_pseudo if step == "pseudo-label" else _validate)(work, who,
                                                                               checkpoint))
    assert f"{work / checkpoint} {holds}" in line, line
    assert line.endswith(f"; drop {drop} (the checkpoint records it), or pass the best.pt of "
                         f"{who} seed 1 on digits"), line
    assert not any((work / name).exists() for name in ("p.npz", "p.json", "v.json"))


def test_a_checkpoint_of_other_training_params_is_refused(work, capsys, tmp_path):
    """pseudo-label and validate read a checkpoint trained with other params than the ones
    given (here 2 epochs against its 1) as evaluate does: refused, naming the retraining."""
    write_params(tmp_path / "two.yaml", tiny_params(epochs=2))  # the same split params
    for argv in (_pseudo(work, "standard", "run_s1/best.pt", str(tmp_path / "two.yaml"),
                         out=tmp_path),
                 _validate(work, "standard", "run_s1/best.pt", str(tmp_path / "two.yaml"),
                           out=tmp_path)):
        line = refused(capsys, *argv)
        assert "was trained with other params than these" in line, line
        # Not Snakemake's file (results/models/...): a hint that works without it.
        assert line.endswith("pass the params it was trained with (--params; params= in "
                             "wscat.api), or retrain it with these (`wscat train` or "
                             "wscat.api.train_method, the same params)"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two.yaml"]


def test_the_retrain_hint_names_snakemake_only_for_its_own_checkpoints() -> None:
    from wscat.checkpoint import retrain_hint

    assert retrain_hint("results/models/digits/cnn/trades/seed1/best.pt") == (
        "retrain it: snakemake --forcerun results/models/digits/cnn/trades/seed1/best.pt -- "
        "<your target>")
    assert "wscat train" in retrain_hint("/tmp/mine/best.pt")


def test_pseudo_labels_of_a_labeler_trained_with_other_params_are_refused(work, capsys,
                                                                          tmp_path):
    """Labels made under params.yaml (Standard, one epoch) and RST trained under params that
    give its labeler two: the labels are not the ones these params make, so refused before any
    training, naming both trainings."""
    assert _main(*_pseudo(work, "standard", "run_s1/best.pt", out=tmp_path)) == 0
    assert str(np.load(tmp_path / "p.npz")["labeler_training"])  # recorded
    write_params(tmp_path / "two.yaml", tiny_params(epochs=2))
    train = ["train", "--dataset", "digits", "--model", "cnn", "--method", "rst", "--seed", 1,
             "--split", work / "s1.npz", "--pseudo", tmp_path / "p.npz", "--device", "cpu"]
    line = refused(capsys, *train, "--params", tmp_path / "two.yaml", "--out-dir",
                   tmp_path / "rst2")
    assert "holds the pseudo-labels of a standard trained with other params than these" in line
    assert "label again with a standard trained with these params" in line, line
    assert not (tmp_path / "rst2").exists()


def test_the_run_s_own_checkpoint_still_labels_and_validates(work, tmp_path):
    assert _main(*_pseudo(work, "standard", "run_s1/best.pt", out=tmp_path)) == 0
    assert _main(*_validate(work, "standard", "run_s1/best.pt", out=tmp_path)) == 0
    assert str(np.load(tmp_path / "p.npz")["labeler"]) == "standard"


def test_a_split_of_other_split_params_is_refused_by_train_pseudo_label_and_validate(
        work, capsys):
    stale = "datasets.digits.labelled: 100 there, 50 in the params"
    line = refused(capsys, "train", "--params", work / "params50.yaml", "--dataset", "digits",
                   "--model", "cnn", "--method", "standard", "--seed", 1, "--split",
                   work / "s1.npz", "--out-dir", work / "run50", "--device", "cpu")
    assert stale in line and "`wscat split --dataset digits --seed 1" in line, line
    assert not (work / "run50").exists()
    assert stale in refused(capsys, *_pseudo(work, "standard", "run_s1/best.pt", "params50.yaml"))
    assert stale in refused(capsys, *_validate(work, "standard", "run_s1/best.pt",
                                               "params50.yaml"))
    assert stale in refused(capsys, "evaluate", "--params", work / "params50.yaml", "--dataset",
                            "digits", "--model", "cnn", "--method", "standard", "--seed", 1,
                            "--split", work / "s1.npz", "--checkpoint", work / "run_s1/best.pt",
                            "--out", work / "m.json", "--part", "core", "--device", "cpu")
    assert not any((work / name).exists() for name in ("p.npz", "v.json", "m.json"))


def _toy_split(path: Path, made_with: str | None = None) -> Path:
    """A small split of digits seed 1 at `path`; with `made_with` recorded, else as before."""
    split = Split("digits", 1, np.arange(10), np.arange(10, 30), np.arange(30, 35),
                  np.arange(35, 50))
    if made_with is None:
        save_split(split, path)
    else:
        save_split(split, path, made_with=made_with)
    return path


def test_a_split_records_its_params_and_one_without_the_record_still_loads(tmp_path):
    now = split_params(tiny_params(), "digits")
    assert load_split_of(_toy_split(tmp_path / "a.npz", now), "digits", 1, made_with=now).seed == 1
    assert load_split_of(_toy_split(tmp_path / "old.npz"), "digits", 1, made_with=now).seed == 1
    fewer = tiny_params()
    fewer["datasets"]["digits"]["val_max"] = 7
    with pytest.raises(ValueError, match="val_max: 2000 there, 7 in the params"):
        load_split_of(tmp_path / "a.npz", "digits", 1, made_with=split_params(fewer, "digits"))


@pytest.mark.parametrize("given, says", [
    ("mine/s2.npz", "mine/s2.npz is the split of digits seed 1, not of digits seed 2; pass "
     "results/splits/digits/seed2.npz (`wscat split --dataset digits --seed 2 --out "
     "results/splits/digits/seed2.npz`)"),
    ("results/splits/digits/seed2.npz", "results/splits/digits/seed2.npz is the split of digits "
     "seed 1, not of digits seed 2; move it to results/splits/digits/seed1.npz, then make this "
     "one: `wscat split --dataset digits --seed 2 --out results/splits/digits/seed2.npz`"),
])
def test_a_split_of_another_seed_says_which_to_pass(tmp_path, monkeypatch, given, says):
    """Seed 1's split read as seed 2's: the workflow's split of seed 2 and the command that
    makes it; where the file lies in that place, to move it to its own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / given).parent.mkdir(parents=True)
    _toy_split(tmp_path / given)
    with pytest.raises(ValueError) as error:
        load_split_of(given, "digits", 2)
    assert str(error.value) == says


def test_an_npz_that_is_no_split_is_not_called_damaged(tmp_path):
    """An .npz of other arrays is someone's file: pass the seed's split, not "delete it"; a
    split cut short is damaged: delete it and rerun."""
    from wscat.data.split import load_split

    np.savez(tmp_path / "other.npz", a=np.arange(3))
    with pytest.raises(ValueError) as error:
        load_split(tmp_path / "other.npz")
    assert str(error.value) == (f"{tmp_path / 'other.npz'} is not a wscat split (no `dataset` "
                                "array); pass the seed's split "
                                "(results/splits/DATASET/seedSEED.npz, `wscat split` makes it)")
    whole = _toy_split(tmp_path / "s.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match="delete it and rerun `wscat split`$"):
        load_split(tmp_path / "cut.npz")


def test_an_argument_the_step_would_not_read_is_refused(work, capsys, tmp_path):
    """--pseudo for a method without pseudo-labels and --core outside --part extra were
    silently ignored: now one line each."""
    assert _main(*_pseudo(work, "standard", "run_s1/best.pt", out=tmp_path)) == 0
    line = refused(capsys, "train", "--params", work / "params.yaml", "--dataset", "digits",
                   "--model", "cnn", "--method", "standard", "--seed", 1, "--split",
                   work / "s1.npz", "--pseudo", tmp_path / "p.npz", "--out-dir", work / "run_p",
                   "--device", "cpu")
    assert "trains on no pseudo-labels" in line and "drop --pseudo" in line, line
    assert not (work / "run_p").exists()
    core = tmp_path / "core.json"
    core.write_text(json.dumps({"dataset": "digits", "method": "standard", "seed": 1,
                                "part": "core", "accuracy": {"Natural": 90.0}}))
    line = refused(capsys, "evaluate", "--params", work / "params.yaml", "--dataset", "digits",
                   "--model", "cnn", "--method", "standard", "--seed", 1, "--split",
                   work / "s1.npz", "--checkpoint", work / "run_s1/best.pt", "--out",
                   work / "m.json", "--part", "core", "--core", core, "--device", "cpu")
    assert "--core is read by --part extra only" in line, line
    assert not (work / "m.json").exists()


def test_sigterm_ends_a_training_as_ctrl_c_does(work, tmp_path):
    """SIGTERM (`timeout`, a SLURM time limit) used to end `wscat train` with status 143, no
    word, and its lock file left behind: now the Ctrl-C path, one line and nothing left over
    but the resumable run."""
    import signal
    import subprocess
    import sys

    write_params(tmp_path / "long.yaml", tiny_params(epochs=500))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "wscat", "train", "--params", str(tmp_path / "long.yaml"),
         "--dataset", "digits", "--model", "cnn", "--method", "standard", "--seed", "1",
         "--split", str(work / "s1.npz"), "--out-dir", str(out), "--device", "cpu",
         "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**__import__("os").environ, "PYTHONUNBUFFERED": "1"})
    try:
        for line in proc.stderr:  # the second epoch's line: training is under way
            if line.startswith("epoch=2 "):
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 143, err
    assert lines[-1].startswith("wscat train: error: terminated (SIGTERM") and \
        "rerun the same command" in lines[-1], err
    assert "Traceback" not in err
    left = [p.name for p in tmp_path.rglob("*") if "lock" in p.name or p.name.endswith(".tmp")]
    assert left == [], left


def test_training_a_finished_run_again_says_so_before_it_starts(work, capsys, tmp_path):
    """Not silent: the run's folder holds it finished, so the line says it starts again and what
    it will replace (Snakemake removes a job's outputs first, so only a hand-run sees it)."""
    import shutil

    shutil.copytree(work / "run_s1", tmp_path / "run")
    capsys.readouterr()
    assert _main("train", "--params", work / "params.yaml", "--dataset", "digits", "--model",
                 "cnn", "--method", "standard", "--seed", 1, "--split", work / "s1.npz",
                 "--out-dir", tmp_path / "run", "--device", "cpu") == 0
    err = capsys.readouterr().err
    assert (f"{tmp_path / 'run'} holds this run, finished: it trains again from the start; "
            "best.pt, last.pt, train_log.csv and dvclive/ there are replaced when it ends"
            ) in err, err
    capsys.readouterr()
    assert _main("train", "--params", work / "params.yaml", "--dataset", "digits", "--model",
                 "cnn", "--method", "standard", "--seed", 2, "--split", work / "s2.npz",
                 "--out-dir", tmp_path / "new", "--device", "cpu") == 0
    assert "holds this run" not in capsys.readouterr().err  # a new folder: nothing to say
