"""benchmarks/demo_calibration.py: the fixed calibration set and the `seeds` stage's rule."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from wscat.config import load_params
from wscat.data import load_dataset, load_split

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import demo_calibration as cal  # noqa: E402


def test_one_calibration_set_for_every_seed_that_no_seed_labels(tmp_path: Path) -> None:
    params = load_params(ROOT / "params.yaml")
    held = cal.held_out_images(params, [1, 2, 3], tmp_path)
    labels = load_dataset("digits", {"source": "digits"}).labels.numpy()
    assert len(held) == cal.HELD_OUT and len(set(held.tolist())) == cal.HELD_OUT
    assert np.bincount(labels[held], minlength=10).tolist() == [cal.HELD_OUT // 10] * 10
    for seed in (1, 2, 3):
        split = load_split(tmp_path / f"split-{seed}.npz")
        assert np.isin(held, split.unlabelled).all()
        out = cal.calibration_split(tmp_path / f"split-{seed}.npz", tmp_path / f"cal{seed}.npz",
                                    held=held)
        cal_split = load_split(out)
        assert np.array_equal(cal_split.test, held)
        assert not np.isin(held, cal_split.unlabelled).any()
        assert not np.isin(held, cal_split.labelled).any()
    again = cal.held_out_images(params, [1, 2, 3], tmp_path / "again")
    assert np.array_equal(held, again)
    # Stage `replicate`'s set: drawn the same way, from what the first left.
    second = cal.held_out_images(params, [1, 2, 3], tmp_path / "second", round_=2)
    assert len(set(second.tolist())) == cal.HELD_OUT and not np.isin(second, held).any()
    assert np.bincount(labels[second], minlength=10).tolist() == [cal.HELD_OUT // 10] * 10
    for seed in (1, 2, 3):
        assert np.isin(second, load_split(tmp_path / f"split-{seed}.npz").unlabelled).all()


def _rows(setting: str, width: int, means: dict[str, list[float]], seconds: float
          ) -> list[dict[str, str]]:
    return [{"setting": setting, "width": str(width), "seed": str(seed), "method": method,
             "train_s": str(seconds), "eval_s": "0", "Mean": str(values[seed - 1])}
            for method, values in means.items() for seed in (1, 2, 3)]


def test_the_rule_takes_the_passing_setting_that_fits_with_the_largest_margin() -> None:
    base = {"standard": [0, 0, 0], "mt": [0, 0, 0], "trades-full": [75, 76, 77]}
    rows = (_rows("w16", 16, {**base, "trades": [60, 61, 62], "rst": [66, 67, 68],
                              "wscat": [66, 67, 68]}, 10)
            + _rows("w24", 24, {**base, "trades": [60, 61, 62], "rst": [70, 71, 72],
                                "wscat": [71, 72, 73]}, 16)
            + _rows("w32", 32, {**base, "trades": [60, 61, 62], "rst": [75, 76, 77],
                                "wscat": [75, 76, 77]}, 40))
    lines = cal.seeds_summary(rows)
    table = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| w")}
    assert "| no |" in table["w16"] and "| yes |" in table["w24"] and "| yes |" in table["w32"]
    # w32 passes with the larger margin but does not fit the time budget: w24 is taken, and
    # only without the WSCAT-sup column.
    assert lines[-2] == "The rule picks **w24** (margin +2.00), without the WSCAT-sup column."


def test_the_rule_keeps_width_16_when_nothing_that_fits_passes() -> None:
    base = {"standard": [0, 0, 0], "mt": [0, 0, 0], "trades-full": [75, 76, 77]}
    rows = (_rows("w16", 16, {**base, "trades": [60, 61, 62], "rst": [66, 67, 68],
                              "wscat": [66, 67, 68]}, 10)
            + _rows("w24", 24, {**base, "trades": [60, 61, 62], "rst": [68.8, 68.9, 69.0],
                                "wscat": [75, 76, 77]}, 12))
    assert cal.seeds_summary(rows)[-2] == ("No setting that fits passes: the demo keeps w16 "
                                           "(the rule's last branch).")


def test_the_replicate_stage_decides_on_both_rounds_averaged() -> None:
    base = {"standard": [0, 0, 0], "mt": [0, 0, 0], "trades-full": [75, 76, 77]}
    w16 = {**base, "trades": [60, 61, 62], "rst": [66, 67, 68], "wscat": [66, 67, 68]}
    first = (_rows("w16", 16, w16, 10)
             + _rows("w24", 24, {**base, "trades": [60, 61, 62], "rst": [67.9, 68.9, 69.9],
                                 "wscat": [71, 72, 73]}, 16))
    second = (_rows("w16", 16, w16, 10)
              + _rows("w24", 24, {**base, "trades": [60, 61, 62], "rst": [68.5, 69.5, 70.5],
                                  "wscat": [71, 72, 73]}, 18))
    both = cal.pooled(first, second)
    rst = [float(r["Mean"]) for r in both if r["setting"] == "w24" and r["method"] == "rst"]
    assert rst == [68.2, 69.2, 70.2]
    assert {r["train_s"] for r in both if r["setting"] == "w24"} == {"17.0"}
    lines = cal.replicate_summary(first, second)
    # The second round alone passes at +8.5; both rounds together (+8.2) decide.
    alone = lines[lines.index("This round alone (not the decision):"):]
    assert "| w24 | " in "".join(alone) and "+8.50" in "".join(alone)
    assert lines[-2] == "The rule picks **w24** (margin +0.20), without the WSCAT-sup column."
    assert cal.replicate_summary(first, first)[-2].startswith("No setting that fits passes")


def test_the_rule_without_the_demos_width_16_setting_is_refused_in_one_line() -> None:
    rows = _rows("w24", 24, {"standard": [0, 0, 0], "mt": [0, 0, 0], "trades": [60, 61, 62],
                             "rst": [66, 67, 68], "wscat": [66, 67, 68],
                             "trades-full": [75, 76, 77]}, 10)
    with pytest.raises(ValueError, match="no width-16 setting"):
        cal.rule_table(rows)


@pytest.mark.parametrize("name, text, words", [
    ("demo-calibration-sweep.csv", "setting,method\nw16,trades\n", "not a stage's CSV"),
    ("demo-calibration-seeds.csv", "setting,method\nw16,trades\n", "lacks the column"),
    ("demo-calibration-seeds.csv", "setting,width,labelled,epochs,train_steps,eps,seed,method,"
     "Mean,Natural,AA,train_s,eval_s\nw24,24,100,40,5,0.1,1,trades,60,70,50,1,1\n",
     "no width-16 setting"),
])
def test_render_refuses_a_csv_it_cannot_render_in_one_line_and_writes_no_page(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        name: str, text: str, words: str) -> None:
    """`--render` on a results folder holding a CSV of no stage, one lacking a column, or a
    `seeds` stage without the w16 setting the rule scales on: one line, exit 2, no page."""
    results = tmp_path / "results"
    results.mkdir()
    (results / name).write_text(text)
    monkeypatch.setattr(cal, "RESULTS", results)
    page = tmp_path / "page.md"
    monkeypatch.setattr(sys, "argv", ["demo_calibration.py", "--render", str(page)])
    with pytest.raises(SystemExit) as exit_:
        cal.main()
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and words in error and len(error.strip().splitlines()) == 1
    assert error.startswith("demo_calibration.py: ") and not page.exists()


def test_the_page_names_the_cpu_its_rows_record(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU seconds come with the CPU: the page names every model the rows' `cpu` column holds."""
    results = tmp_path / "results"
    results.mkdir()
    header = ("setting,width,labelled,epochs,train_steps,eps,seed,method,Mean,Natural,AA,"
              "train_s,eval_s")
    row = "eps,32,100,40,5,0.1,1,trades,60,70,50,12,3"
    (results / "demo-calibration-eps.csv").write_text(
        f"{header},cpu\n{row},AMD EPYC 7B13\n{row.replace(',1,', ',2,')},Intel Xeon\n")
    monkeypatch.setattr(cal, "RESULTS", results)
    cal.render(tmp_path / "page.md")
    page = (tmp_path / "page.md").read_text()
    assert "CPU of the rows that record it: AMD EPYC 7B13; Intel Xeon." in page
    assert "**60** (70 / 50); 12+3 s" in page
    (results / "demo-calibration-eps.csv").write_text(f"{header}\n{row}\n")  # an old CSV
    cal.render(tmp_path / "page.md")
    assert "CPU of the rows" not in (tmp_path / "page.md").read_text()
