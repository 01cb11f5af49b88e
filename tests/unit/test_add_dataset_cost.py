"""benchmarks/add_dataset_cost.py's dataset: digits as a researcher would store their own images
(uint8 0..255, its own test part), so that add-dataset takes its defaults as for any npz."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

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
