"""Own npz files that `wscat add-dataset` (and `wscat split`, through the same npz reader) must
refuse in one line with exit 2, writing nothing: images on a 0..max scale far below 0..255, labels
that are no class index (uint64 beyond int64, or too large for any class to have training images),
and test labels of a class the training labels lack. Good files still pass as before."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.workflow.test_bad_input import one_line_error as bad_input_line
from wscat import cli

ROOT = Path(__file__).resolve().parents[2]


def one_line_error(command: list[str], phrase: str, work: Path,
                   capsys: pytest.CaptureFixture[str]) -> str:
    """tests/workflow/test_bad_input.py's check (exit 2, one stderr line holding `phrase`, no
    traceback, nothing new or changed in `work`), with warnings as errors: a printed warning
    would be a second line."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return bad_input_line(command, phrase, work, capsys)


def arrays(n_train: int = 400, n_test: int = 100, classes: int = 10,
           top: int = 255) -> dict[str, np.ndarray]:
    """8x8 grey uint8 images with pixels in 0..top and labels cycling through the classes."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, top + 1, (n_train + n_test, 8, 8, 1), dtype=np.uint8)
    y = np.arange(n_train + n_test) % classes
    return {"x_train": x[:n_train], "y_train": y[:n_train], "x_test": x[n_train:],
            "y_test": y[n_train:]}


def work_with(tmp_path: Path, **content: np.ndarray) -> tuple[Path, Path]:
    """tmp_path/work holding params.yaml (the repository's) and data.npz with `content`."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    np.savez(work / "data.npz", **content)
    return work, work / "data.npz"


def add(work: Path, npz: Path) -> list[str]:
    return ["add-dataset", "mine", str(npz), "--params", str(work / "params.yaml")]


def split_setup(work: Path, npz: Path) -> list[str]:
    """params.yaml with a hand-written dataset `mine` read from `npz` (no md5, so the file may
    change), and the `wscat split` command for it."""
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["datasets"]["mine"] = {**params["datasets"]["digits"], "source": "npz",
                                  "path": str(npz), "test_fraction": None}
    params["training"]["mine"] = params["training"]["digits"]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return ["split", "--dataset", "mine", "--seed", "1", "--out", str(work / "out" / "s.npz"),
            "--params", str(work / "params.yaml")]


# --- 1. images on a 0..16 scale (sklearn's digits.images cast to uint8) -----------------------

@pytest.mark.parametrize("top", [16, 32])
def test_images_on_a_small_scale_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             top: int) -> None:
    work, npz = work_with(tmp_path, **arrays(top=top))
    line = one_line_error(add(work, npz), f"0..{top}", work, capsys)
    assert "x_train" in line and "255" in line and "rescale" in line, line


@pytest.mark.parametrize("top", [255, 33], ids=["full-range", "just-above-the-threshold"])
def test_uint8_images_on_the_0_to_255_scale_still_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], top: int) -> None:
    work, npz = work_with(tmp_path, **arrays(top=top))
    assert cli.main(add(work, npz)) == 0, capsys.readouterr().err
    assert yaml.safe_load((work / "params.yaml").read_text())["datasets"]["mine"]["path"]


# --- 2. labels that are no class index ----------------------------------------------------------

def test_uint64_labels_beyond_int64_are_named(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    content = arrays()
    content["y_train"] = content["y_train"].astype(np.uint64) + np.uint64(2 ** 63)
    work, npz = work_with(tmp_path, **content)
    line = one_line_error(add(work, npz), "y_train", work, capsys)
    assert str(2 ** 63 + 9) in line and "0..K-1" in line, line
    assert "negative" not in line, line


def test_uint64_labels_beyond_int64_are_named_by_split(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    content = arrays()
    content["y_train"] = content["y_train"].astype(np.uint64) + np.uint64(2 ** 63)
    work, npz = work_with(tmp_path, **content)
    command = split_setup(work, npz)
    line = one_line_error(command, "y_train", work, capsys)
    assert str(2 ** 63 + 9) in line and "only 0 samples" not in line, line


@pytest.mark.parametrize("key", ["y_train", "y_test"])
def test_a_label_too_large_for_any_class_is_named(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  key: str) -> None:
    """10**12 as a label: before, np.bincount tried to allocate 7 TiB (an unexpected
    MemoryError, exit 1)."""
    content = arrays()
    content[key] = content[key].copy()
    content[key][3] = 10 ** 12
    work, npz = work_with(tmp_path, **content)
    line = one_line_error(add(work, npz), key, work, capsys)
    assert str(10 ** 12) in line and "400" in line, line


# --- 3. a test class the training labels lack ---------------------------------------------------

def test_a_test_only_class_is_named_by_add_dataset(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    content = arrays()
    content["y_test"] = np.arange(100) % 11  # class 10 in y_test only
    work, npz = work_with(tmp_path, **content)
    line = one_line_error(add(work, npz), "y_test", work, capsys)
    assert "class 10" in line, line


def test_a_test_only_class_is_named_by_split(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    content = arrays()
    content["y_test"] = np.arange(100) % 11
    work, npz = work_with(tmp_path, **content)
    command = split_setup(work, npz)
    line = one_line_error(command, "y_test", work, capsys)
    assert "class 10" in line, line


def test_a_name_a_paper_tier_makes_is_refused_with_advice_one_can_follow(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """digits-full is made by the digits tier when params.yaml loads; "remove that entry" named
    an entry the file does not hold. A written entry keeps that advice."""
    work, npz = work_with(tmp_path, **arrays())
    made = ["add-dataset", "digits-full", str(npz), "--params", str(work / "params.yaml")]
    line = one_line_error(made, "datasets.digits-full is made from", work, capsys)
    assert "pick another name" in line and "remove that entry" not in line, line
    written = ["add-dataset", "digits", str(npz), "--params", str(work / "params.yaml")]
    assert "pick another name, or remove that entry first" in one_line_error(
        written, "datasets.digits already exists", work, capsys)
