"""A training's DVCLive files (<run>/dvclive/: metrics.json, plots/metrics/*.tsv) are its
curves, a result as its train_log.csv is: `wscat table --csv run/dvclive/plots/metrics/loss.tsv`,
`evaluate --out run/dvclive/metrics.json` and the like once overwrote them, exit 0. Any output
inside a run's dvclive/ is now refused before any work, one line, the file left byte for byte.
And an output that gets JSON must be named .json (`pseudo-label --metrics c.png` wrote JSON
into a .png), as `wscat export --out` requires already."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_unfinished_runs import _main, refused, runs  # noqa: F401
from wscat import api


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _common(runs: Path) -> list[object]:  # noqa: F811
    return ["--params", runs / "params.yaml", "--dataset", "digits", "--model", "cnn",
            "--seed", 1, "--split", runs / "s1.npz", "--checkpoint", runs / "run/best.pt",
            "--device", "cpu"]


def _argv(runs: Path, step: str, option: str, path: Path, tmp: Path) -> list[object]:  # noqa: F811
    """`step`'s arguments with `option` given `path`, its other outputs in `tmp`."""
    outputs = {
        "evaluate": {"--out": tmp / "m.json"},
        "pseudo-label": {"--out": tmp / "p.npz", "--metrics": tmp / "p.json"},
        "validate": {"--out": tmp / "v.json"},
        "table": {"--tex": tmp / "t.tex", "--csv": tmp / "t.csv", "--summary": tmp / "t.json"},
        "export": {"--out": tmp / "e.json"},
    }[step]
    outputs[option] = path
    given = [item for pair in outputs.items() for item in pair]
    if step == "table":
        return ["table", "--params", runs / "params.yaml", "--experiment", "digits", *given,
                runs / "run.json"]
    if step == "export":
        return ["export", "--checkpoint", runs / "run/best.pt", "--metrics", runs / "run.json",
                *given]
    who = ["--labeler", "standard"] if step == "pseudo-label" else ["--method", "standard"]
    return [step, *_common(runs), *who, *given, *(["--part", "core"] if step == "evaluate"
                                                  else [])]


CURVES = [("table", "--csv", "plots/metrics/loss.tsv"), ("table", "--summary", "metrics.json"),
          ("table", "--tex", "plots/metrics/new.tex"), ("evaluate", "--out", "metrics.json"),
          ("pseudo-label", "--metrics", "plots/metrics/lr.tsv"),
          ("pseudo-label", "--out", "pseudo.npz"), ("validate", "--out", "v.json"),
          ("export", "--out", "entry.json")]


@pytest.mark.parametrize("step, option, name", CURVES)
def test_an_output_inside_a_run_s_dvclive_is_refused(runs, capsys, tmp_path,  # noqa: F811
                                                     step, option, name) -> None:
    curves = runs / "run/dvclive"
    before = _snapshot(curves)
    line = refused(capsys, *_argv(runs, step, option, curves / name, tmp_path))
    assert line.endswith(f"{option} {curves / name} is inside the training curves of "
                         f"{runs / 'run'} (its dvclive/, `wscat train`'s DVCLive files), which "
                         f"`wscat {step}` would overwrite; choose a path outside it (nothing was "
                         "written)"), line
    assert _snapshot(curves) == before
    assert list(tmp_path.iterdir()) == []


def test_a_retraining_s_curves_in_resume_are_refused_too(runs, capsys,  # noqa: F811
                                                         tmp_path) -> None:
    """A retraining keeps its new curves in resume/dvclive/ until it ends, from its first epoch
    on (before resume/ holds any checkpoint)."""
    curves = tmp_path / "run/resume/dvclive"
    curves.mkdir(parents=True)
    line = refused(capsys, *_argv(runs, "validate", "--out", curves / "v.json", tmp_path))
    assert f"is inside the training curves of {tmp_path / 'run/resume'}" in line, line
    assert list(curves.iterdir()) == []


def test_a_folder_named_dvclive_outside_a_run_takes_outputs(runs, tmp_path) -> None:  # noqa: F811
    mine = tmp_path / "dvclive"
    mine.mkdir()
    assert _main(*_argv(runs, "validate", "--out", mine / "v.json", tmp_path)) == 0


def test_the_api_refuses_an_output_inside_a_run_s_dvclive(runs, tmp_path) -> None:  # noqa: F811
    curves = runs / "run/dvclive"
    before = _snapshot(curves)
    params = api.load_params(runs / "params.yaml")
    with pytest.raises(ValueError, match="is inside the training curves of"):
        api.evaluate_checkpoint(runs / "run/best.pt", params=params, out=curves / "metrics.json",
                                device="cpu")
    with pytest.raises(ValueError, match="is inside the training curves of"):
        api.export_model(runs / "run/best.pt", runs / "run.json", curves / "entry.json")
    assert _snapshot(curves) == before


@pytest.mark.parametrize("step, option, what", [
    ("pseudo-label", "--metrics", "the pseudo-label report"), ("evaluate", "--out", "the metrics"),
    ("validate", "--out", "the validation scores"), ("table", "--summary", "the table's summary")])
def test_json_outputs_must_be_named_json(runs, capsys, tmp_path, step, option,  # noqa: F811
                                        what) -> None:
    image = tmp_path / "c.png"
    line = refused(capsys, *_argv(runs, step, option, image, tmp_path))
    assert line.endswith(f"{option} {image} must name a .json file ({what} is JSON); pass c.json "
                         "or another .json path (nothing was written)"), line
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_metrics_named_other_than_json(runs, tmp_path) -> None:  # noqa: F811
    params = api.load_params(runs / "params.yaml")
    with pytest.raises(ValueError, match=r"^out=.*c\.png must name a \.json file"):
        api.evaluate_checkpoint(runs / "run/best.pt", params=params, out=tmp_path / "c.png",
                                device="cpu")
    assert list(tmp_path.iterdir()) == []
