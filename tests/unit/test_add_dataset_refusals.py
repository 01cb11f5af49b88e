"""Own npz files that `wscat add-dataset` (and `wscat split`, through the same npz reader) must
refuse in one line with exit 2, writing nothing: images on a 0..max scale far below 0..255, labels
that are no class index (uint64 beyond int64, or too large for any class to have training images),
test labels of a class the training labels lack, arrays of Python objects and a single .npy
array; and what add-dataset itself refuses: a name of the form the paper section generates, an
--out that is no YAML file, a params file that cannot be replaced. Good files still pass."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.workflow.test_bad_input import one_line_error as bad_input_line
from wscat import cli
from wscat.config import ConfigError, load_params
from wscat.sweeps import full_dataset, unlabelled_dataset

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


# --- 4. an npz that np.load cannot open as one: Python objects, a single .npy array ------------

def ragged(content: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`content` with x_train saved as images of two sizes: np.array(..., dtype=object)."""
    x = content["x_train"]
    images = np.empty(2, dtype=object)
    images[0], images[1] = x, np.zeros((3, 10, 10, 1), np.uint8)
    return {**content, "x_train": images}


@pytest.mark.parametrize("command", [add, split_setup], ids=["add-dataset", "split"])
def test_an_object_array_is_named_not_called_a_foreign_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command) -> None:
    """np.savez of images of different sizes holds a pickle: before, "it is not an .npz file (not
    a zip archive of arrays)", which it is."""
    work, npz = work_with(tmp_path, **ragged(arrays()))
    line = one_line_error(command(work, npz), "its x_train holds Python objects", work, capsys)
    assert "images of different sizes" in line and "uint8" in line, line
    assert "N x H x W x C" in line and "np.savez(" in line, line
    assert "not an .npz file" not in line and "zip archive" not in line, line


def test_object_labels_are_named_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content = arrays()
    content["y_train"] = content["y_train"].astype(object)
    work, npz = work_with(tmp_path, **content)
    line = one_line_error(add(work, npz), "its y_train holds Python objects", work, capsys)
    assert "save the labels as integers" in line, line


def npy_named_npz(work: Path) -> Path:
    """An `np.save` file renamed data.npz (replacing work_with's)."""
    np.save(work / "data.npy", arrays()["x_train"])
    return (work / "data.npy").replace(work / "data.npz")


@pytest.mark.parametrize("command", [add, split_setup], ids=["add-dataset", "split"])
def test_a_single_npy_array_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     command) -> None:
    """Before: "TypeError: 'numpy.ndarray' object does not support the context manager
    protocol"."""
    work, npz = work_with(tmp_path, **arrays())
    npy_named_npz(work)
    line = one_line_error(command(work, npz), "is a single .npy array (np.save), not an .npz "
                          "archive", work, capsys)
    assert "np.savez(FILE, x_train=x, y_train=y)" in line, line
    assert "TypeError" not in line and "context manager" not in line, line


# --- 4b. arrays in another form than the npz's: the line says how to store them --------------

def _float_images(c):
    return {**c, "x_train": c["x_train"] / 255.0, "x_test": c["x_test"] / 255.0}


def _named_labels(c):
    names = np.array([f"class{k}" for k in range(10)])
    return {**c, "y_train": names[c["y_train"]], "y_test": names[c["y_test"]]}


@pytest.mark.parametrize("change, phrase, fix", [
    (_float_images, "x_train is float64, expected uint8", "(x * 255).round().astype(np.uint8)"),
    (lambda c: {**c, "x_train": c["x_train"].astype(np.int64)}, "x_train is int64",
     "x.round().astype(np.uint8)"),
    (_named_labels, "y_train is <U6 (400,), expected 400 integer labels",
     "np.unique(y_train, return_inverse=True)"),
    (lambda c: {**c, "y_train": np.eye(10, dtype=np.int64)[c["y_train"]]},
     "y_train is int64 (400, 10)", "y_train.argmax(axis=1)"),
], ids=["float-images-in-0-1", "int64-images", "string-labels", "one-hot-labels"])
def test_arrays_in_another_form_get_the_conversion(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  change, phrase: str, fix: str) -> None:
    """Before, the line said what was wrong but not what to store instead (`x_train is float64,
    expected uint8`), unlike its neighbours (images in [0, 1] cast to uint8, a 0..16 scale)."""
    work, npz = work_with(tmp_path, **change(arrays()))
    line = one_line_error(add(work, npz), phrase, work, capsys)
    assert fix in line, line


def test_three_classes_numbered_apart_are_called_three(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Labels {3, 7, 9}: before, "no class 0 ... (K = 10 here) ... renumber the labels", and the
    renumbered file was then refused for its 3 classes."""
    content = arrays()
    for key in ("y_train", "y_test"):
        content[key] = np.array([3, 7, 9])[content[key] % 3]
    work, npz = work_with(tmp_path, **content)
    line = one_line_error(add(work, npz), "3 classes (labels 3, 7, 9)", work, capsys)
    assert "needs at least 4" in line and "renumber" not in line, line


@pytest.mark.parametrize("command", [add, split_setup], ids=["add-dataset", "split"])
def test_a_file_that_is_no_npz_says_what_to_pass(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  command) -> None:
    """Bytes that are no zip archive: before, what was wrong alone."""
    work, npz = work_with(tmp_path, **arrays())
    npz.write_bytes(bytes(range(256)) * 8)
    line = one_line_error(command(work, npz), "is not a usable npz dataset (it is not an .npz "
                          "file (not a zip archive of arrays))", work, capsys)
    assert line.endswith("; pass your .npz of x_train, y_train (and x_test, y_test), as np.savez "
                         "writes it"), line


@pytest.mark.parametrize("command", [add, split_setup], ids=["add-dataset", "split"])
def test_a_truncated_npz_is_called_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             command) -> None:
    """An interrupted copy: before, only `BadZipFile: File is not a zip file`, of a file that
    np.load had just recognised as one by its header."""
    work, npz = work_with(tmp_path, **arrays())
    npz.write_bytes(npz.read_bytes()[:20000])
    line = one_line_error(command(work, npz), "its end is missing or damaged", work, capsys)
    assert "copy or save it again" in line, line


# --- 5. a name of the form the paper section generates -----------------------------------------

@pytest.mark.parametrize("name, form", [
    (unlabelled_dataset("digits", 0.2), "<dataset>-unlabelled<percent>"),
    (unlabelled_dataset("mine", 0.05), "<dataset>-unlabelled<percent>"),
    (full_dataset("mine"), "<dataset>-full"),
])
def test_a_name_of_a_generated_form_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               name: str, form: str) -> None:
    """digits-unlabelled20 (no tier makes that point) and mine-full were added: a tier's sweep
    would take either for its own."""
    work, npz = work_with(tmp_path, **arrays())
    command = ["add-dataset", name, str(npz), "--params", str(work / "params.yaml")]
    line = one_line_error(command, f"'{name}' has the form {form}", work, capsys)
    assert f"pick another name (e.g. '{'_'.join(name.rsplit('-', 1))}'" in line, line


@pytest.mark.parametrize("name", ["mine-fullsize", "digits_unlabelled20", "fully"])
def test_names_only_near_a_generated_form_still_pass(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    name: str) -> None:
    work, npz = work_with(tmp_path, **arrays())
    command = ["add-dataset", name, str(npz), "--params", str(work / "params.yaml")]
    assert cli.main(command) == 0, capsys.readouterr().err
    assert name in yaml.safe_load((work / "params.yaml").read_text())["datasets"]


@pytest.mark.parametrize("name", ["digits-paired", "mine-paired"])
def test_a_name_ending_in_paired_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            name: str) -> None:
    """digits-paired was added, and the `snakemake -- results/tables/digits-paired.tex` it
    printed planned the demo's 40 jobs (digits' paired table); mine-paired's table could not be
    built at all (no experiment 'mine')."""
    work, npz = work_with(tmp_path, **arrays())
    command = ["add-dataset", name, str(npz), "--params", str(work / "params.yaml")]
    line = one_line_error(command, f"'{name}' ends in -paired", work, capsys)
    assert f"pick another name (e.g. '{name[:-len('-paired')]}_paired'" in line, line


def test_an_experiment_ending_in_paired_is_refused_in_the_params(tmp_path: Path) -> None:
    """Written by hand: the same clash, refused as the params load (snakemake -n, every step)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["experiments"]["digits-paired"] = params["experiments"]["digits"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(ConfigError, match="experiments.digits-paired: a name ending in -paired "
                       "has the table results/tables/digits-paired.tex"):
        load_params(tmp_path / "params.yaml")


@pytest.mark.parametrize("name", ["mine_paired", "mine-pairs", "paired"])
def test_names_only_near_paired_still_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          name: str) -> None:
    work, npz = work_with(tmp_path, **arrays())
    command = ["add-dataset", name, str(npz), "--params", str(work / "params.yaml")]
    assert cli.main(command) == 0, capsys.readouterr().err
    assert name in load_params(work / "params.yaml")["experiments"]


# --- 6. --out that is no YAML file -------------------------------------------------------------

@pytest.mark.parametrize("out", ["new.npz", "new", "new.json"])
def test_an_out_that_is_no_yaml_file_is_refused(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                out: str) -> None:
    """`--out new.npz` wrote YAML under an .npz name."""
    work, npz = work_with(tmp_path, **arrays())
    line = one_line_error([*add(work, npz), "--out", str(work / out)],
                          "does not end in .yaml or .yml", work, capsys)
    assert f"--out {work / Path(out).with_suffix('.yaml')}" in line, line


def test_an_out_ending_in_yml_is_written(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    work, npz = work_with(tmp_path, **arrays())
    assert cli.main([*add(work, npz), "--out", str(work / "new.YML")]) == 0, \
        capsys.readouterr().err
    assert "mine" in yaml.safe_load((work / "new.YML").read_text())["datasets"]


# --- 7. a params file that cannot be replaced ---------------------------------------------------

def test_a_params_file_that_cannot_be_replaced_is_named(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`chattr +i params.yaml`: the rename of the new file onto it fails; the line said
    "permission denied on .../.params.yaml.5hsr4fq2.tmp", a file the user never made."""
    from wscat import io

    work, npz = work_with(tmp_path, **arrays())

    def refuse(source: str, destination: str) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted", source, destination)

    monkeypatch.setattr(io.os, "replace", refuse)
    line = one_line_error(add(work, npz), f"cannot replace {work / 'params.yaml'}", work, capsys)
    assert ".tmp" not in line and "immutable" in line, line


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chattr"),
                    reason="chattr +i needs root")
def test_an_immutable_params_file_is_named(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The same with a real immutable file, where root and the file system allow one."""
    work, npz = work_with(tmp_path, **arrays())
    params = work / "params.yaml"
    if subprocess.run(["chattr", "+i", str(params)], capture_output=True).returncode:
        pytest.skip("this file system takes no immutable attribute")
    try:
        line = one_line_error(add(work, npz), f"cannot replace {params}", work, capsys)
    finally:
        subprocess.run(["chattr", "-i", str(params)], check=True)
    assert ".tmp" not in line, line
