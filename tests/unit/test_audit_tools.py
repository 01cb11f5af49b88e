"""benchmarks/apart_floor.py (the simulation that chose paired.APART_POINTS) and
benchmarks/choice_overlap.py (where a choice's validation images lie in other seeds' splits)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import apart_floor  # noqa: E402
import choice_overlap  # noqa: E402


def _found(rates: dict[int, dict[float, float]]) -> dict[int, dict[str, dict[float, float]]]:
    """Every normal shape at the given rates (size -> floor -> %), the collapses at 50%."""
    return {size: {shape: (dict(by_floor) if shape in apart_floor.NORMAL
                           else dict.fromkeys(apart_floor.FLOORS, 50.0))
                   for shape in apart_floor.SHAPES} for size, by_floor in rates.items()}


def test_the_rule_takes_the_smallest_floor_that_keeps_every_size_near_the_smallest_one() -> None:
    floors = apart_floor.FLOORS  # 0, 3, 4, 5, 6
    small = dict(zip(floors, [0.5, 0.5, 0.5, 0.0, 0.0]))
    # floor 3 lets the large set trip 1.6 points above 0.5; floor 4 keeps it within one
    large = dict(zip(floors, [33.0, 2.1, 1.5, 0.0, 0.0]))
    assert apart_floor.choose(_found({359: small, 10000: large})) == 4.0
    assert apart_floor.choose(_found({359: small, 10000: {**large, 4.0: 1.6}})) == 5.0
    assert apart_floor.choose(_found({359: small})) == 0.0  # one size: no floor needed
    assert apart_floor.choose(_found({359: small, 10000: dict.fromkeys(floors, 9.0)})) is None


def test_the_floor_page_runs_paired_apart_and_names_the_floor_in_use(tmp_path: Path) -> None:
    out = tmp_path / "floor.md"
    before = apart_floor.paired_null.N_IMAGES
    assert apart_floor.main(["--images", "40", "60", "--repeats", "8", "--out", str(out)]) == 0
    # the simulation's size is put back: the rest of a pytest worker still sees the demo's size
    assert apart_floor.paired_null.N_IMAGES == before == 359
    text = out.read_text()
    assert "**40 test images**" in text and "**60 test images**" in text
    rows = [line for line in text.splitlines() if line.startswith("| normal, sd 3 each |")]
    assert len(rows) == 2 and all(len(row.split("|")) == len(apart_floor.FLOORS) + 3
                                  for row in rows)
    assert f"`paired.APART_POINTS` is {apart_floor.APART_POINTS:g}" in text
    # more floor never flags more rows: each row's rates fall from left to right
    for line in text.splitlines():
        if line.startswith("| ") and "%" not in line and "seed effects" not in line:
            rates = [float(cell) for cell in line.strip("| \n").split(" | ")[1:]]
            assert rates == sorted(rates, reverse=True), line


def test_a_choices_images_are_counted_in_each_part_of_every_seed_s_split(tmp_path: Path) -> None:
    """Digits: the 60 validation images of seeds 1-3 all lie in each seed's training pool (none
    in the test part), seed 1's 20 in seed 1's own validation part; the counts are the splits'."""
    out = tmp_path / "overlap.md"
    assert choice_overlap.main(["--dataset", "digits", "--chosen-on", "1", "2", "3",
                                "--seeds", "1", "10", "--out", str(out)]) == 0
    rows = {int(cells[0]): [int(c) for c in cells[1:]] for cells in (
        line.strip("| \n").split(" | ") for line in out.read_text().splitlines()
        if line.startswith("| ") and line[2].isdigit())}
    assert set(rows) == {1, 10} and all(sum(counts) == 60 for counts in rows.values())
    assert rows[1][1] == 20 and rows[1][3] == 0 and rows[10][3] == 0
    from wscat.config import load_params

    made = choice_overlap.splits(load_params(ROOT / "params.yaml"), "digits", [1, 2, 3, 10])
    chosen = np.concatenate([made[s].validation for s in (1, 2, 3)])
    assert rows[10][2] == int(np.isin(chosen, made[10].unlabelled).sum()) > 0


def test_the_proxy_needs_its_npz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert choice_overlap.main(["--chosen-on", "1", "--seeds", "2",
                                "--out", str(tmp_path / "o.md")]) == 2
    assert "needs --npz" in capsys.readouterr().err and not (tmp_path / "o.md").exists()
