"""benchmarks/add_dataset_cost.py's dataset: digits as a researcher would store their own images
(uint8 0..255, its own test part), so that add-dataset takes its defaults as for any npz."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import add_dataset_cost  # noqa: E402


def test_the_subset_is_uint8_digits_with_a_fifth_held_out(tmp_path: Path) -> None:
    assert add_dataset_cost.write_subset(tmp_path / "a.npz", 875) == (700, 175)
    add_dataset_cost.write_subset(tmp_path / "b.npz", 875)
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        assert sorted(a.files) == ["x_test", "x_train", "y_test", "y_train"]
        assert a["x_train"].shape == (700, 8, 8, 1) and a["x_test"].shape == (175, 8, 8, 1)
        assert a["x_train"].dtype == np.uint8 and a["y_train"].dtype == np.int64
        levels = np.unique(np.concatenate([a["x_train"].ravel(), a["x_test"].ravel()]))
        assert levels[0] == 0 and levels[-1] == 255 and len(levels) == 17  # 16ths, rescaled
        assert set(np.unique(a["y_train"])) == set(range(10))
        assert all((a[key] == b[key]).all() for key in a.files)  # the same draw every time


def test_one_seed_s_targets_are_the_metrics_files_dvc_yaml_lists(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--seed S builds every method's metrics file of that seed, the files dvc.yaml tracks; a seed
    the experiment does not run is refused in one line."""
    from wscat.config import load_params

    params = load_params(ROOT / "params.yaml")
    targets = add_dataset_cost.seed_targets(params, "digits", 2)
    listed = set(re.findall(r"(results/metrics/digits/cnn/[^/]+/seed2\.json):",
                            (ROOT / "dvc.yaml").read_text()))
    assert len(targets) == len(params["experiments"]["digits"]["methods"]) == 5
    assert set(targets) == listed
    with pytest.raises(SystemExit) as stopped:
        add_dataset_cost.seed_targets(params, "digits", 7)
    assert stopped.value.code == 2
    assert capsys.readouterr().err == ("add_dataset_cost: --seed 7 is not one of digits's seeds "
                                       "[1, 2, 3]; pass one of them\n")


def test_a_missing_npz_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks/add_dataset_cost.py"),
                             "--npz", str(tmp_path / "none.npz")], capture_output=True, text=True)
    assert result.returncode == 2 and not result.stdout
    assert result.stderr == (f"add_dataset_cost: --npz {tmp_path / 'none.npz'} is not a file; "
                             "pass your images' .npz\n")
    assert not list(tmp_path.iterdir())


def test_a_page_over_its_own_npz_is_refused_and_the_npz_kept(tmp_path: Path) -> None:
    npz = tmp_path / "mine.npz"
    npz.write_bytes(b"images")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks/add_dataset_cost.py"),
                             "--npz", str(npz), "--out", str(npz)], capture_output=True, text=True)
    assert result.returncode == 2 and not result.stdout
    assert result.stderr == (f"add_dataset_cost: --out {npz} is the --npz it reads; write the "
                             "page elsewhere\n")
    assert npz.read_bytes() == b"images" and sorted(tmp_path.iterdir()) == [npz]
