"""Mutation tests for wscat/data/augmentation.py, sampler.py, capacity.py and training_data.py (the
parts of the data path test_data_mutations leaves unguarded): each test kills hand-made mutants
that went through the unit tests importing them, with expectations from the modules' docstrings,
the release's facts (docs/official-code.md, the paper's official-code notes: crop with padding 4,
flip, CIFAR-100's rotation of 15 degrees; fresh permutations of the labelled set, unlabelled
draws with replacement), scikit-learn's digits counts and first principles, never from the
function under test.

What is checked, and from which fact:
- augment: a rotation of up to `rotation` degrees is a rotation (a blob at distance r from the
  centre stays at r), drawn per sample in both directions, never beyond the bound, and fills what
  comes from outside the image with 0 (torchvision's RandomRotation, the release's transform);
  the crop pads with zeros (its docstring) at a padding of 1 too (digits' setting), shifts every
  channel of an image alike and reaches each of the 3 x 3 offsets; every draw comes from the
  generator given (the global RNG does not change a batch: determinism, DESIGN 6).
- sampler: the labelled positions walk through fresh permutations, one after another (not one
  permutation repeated, not the identity); with no unlabelled pool the whole batch is labelled
  whatever share was asked; the draws come from the generator given.
- capacity: digits' pool is what its stratified test fraction leaves (1,797 less round(0.2 x
  each class's count) = 1,438), not a train size of its own.
- training_data: the label budget around the pseudo-labels. A pseudo-label file is refused when it
  names another labeler or another labeler training, and passes when it names none (files written
  before either was recorded); one label per unlabelled image, integers, each below the number of
  classes; an empty file for an empty pool loads. A run's tensors carry the dataset's classes,
  mean and std; a pseudo-label method without its file is one line. DMAT's generated images: an
  npz of float images is refused, and so are labels of another length or shape, not integers, or
  negative; a missing file names the params entry, images are N x H x W x C (non-square too),
  uint8 datasets keep the uint8 values; added to a pseudo-labelled (or label-free) pool they come
  after it with their own labels in the same order (the pool's pseudo-labels or -1 untouched: no
  true label), and only a labelled-only run fixes the labelled share of a batch (batch -
  int(fraction x batch))."""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from wscat.data import augment
from wscat.data.capacity import split_problem
from wscat.data.sampler import sample_batch_indices
from wscat.data.sources.base import ImageDataset
from wscat.data.split import Split, make_split
from wscat.data.training_data import (add_generated, load_generated, load_pseudo_labels,
                                      training_data)

C = 4  # classes of the synthetic dataset


# --- augment -------------------------------------------------------------------------------------

def _polar(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Distance from the image centre and angle (degrees) of each image's centre of mass."""
    s = images.shape[-1]
    grid = torch.arange(s, dtype=torch.float32) - (s - 1) / 2
    mass = images.sum((1, 2))
    cy = (images * grid[:, None]).sum((1, 2)) / mass
    cx = (images * grid[None, :]).sum((1, 2)) / mass
    return (cx ** 2 + cy ** 2).sqrt(), torch.rad2deg(torch.atan2(cy, cx))


def test_rotation_turns_each_image_by_its_own_angle_within_the_bound() -> None:
    """A blob 10 pixels right of the centre of a 33 x 33 image stays 10 pixels from it (a rotation
    about the centre keeps distances), at an angle in [-15, 15] degrees drawn per image (both
    directions, near both ends: 200 uniform draws all within 10 degrees of 0 on one side has a
    chance of (5/6)^200). Pixels brought in from outside are 0: a constant channel loses its
    corners once the turn is more than a few degrees (a corner 16 x sqrt(2) from the centre)."""
    s, r, n = 33, 10.0, 200
    grid = torch.arange(s, dtype=torch.float32) - (s - 1) / 2
    blob = torch.exp(-(grid[:, None] ** 2 + (grid[None, :] - r) ** 2) / (2 * 1.5 ** 2))
    x = torch.stack([blob, torch.ones(s, s)])[None].repeat(n, 1, 1, 1)
    y = augment(x, crop_padding=0, flip=False, rotation=15.0,
                generator=torch.Generator().manual_seed(0))
    distance, angle = _polar(y[:, 0])
    assert torch.allclose(distance, torch.full((n,), r), atol=0.05)
    assert float(angle.abs().max()) <= 15.2
    assert float(angle.min()) < -10 and float(angle.max()) > 10
    assert len(set(angle.round(decimals=2).tolist())) > n * 0.9  # one angle per image
    turned = angle.abs() > 5
    assert int(turned.sum()) > 0
    assert bool((y[turned, 1].amin((1, 2)) == 0).all())


def _edges(mask: torch.Tensor) -> tuple[int, int, int, int]:
    """Zero rows at the top and bottom, zero columns at the left and right of a 0/1 mask."""
    rows, cols = mask.any(1), mask.any(0)
    first_r, first_c = int(rows.float().argmax()), int(cols.float().argmax())
    last_r = len(rows) - 1 - int(rows.flip(0).float().argmax())
    last_c = len(cols) - 1 - int(cols.flip(0).float().argmax())
    return first_r, len(rows) - 1 - last_r, first_c, len(cols) - 1 - last_c


def test_a_crop_of_padding_one_shifts_every_channel_alike_into_zeros() -> None:
    """Digits' crop_padding 1: an image shifted by (dy, dx) in {-1, 0, 1}^2 has |dy| zero rows on
    one side and |dx| zero columns on one side (zero padding, the docstring), the rest the image;
    each channel (here the constants 1/4, 2/4, 3/4) is shifted with the same offset; all nine
    offsets occur in 300 images."""
    n, h, w = 300, 6, 5
    x = torch.stack([torch.full((h, w), (c + 1) / 4) for c in range(3)])[None].repeat(n, 1, 1, 1)
    y = augment(x, crop_padding=1, flip=False, rotation=0.0,
                generator=torch.Generator().manual_seed(0))
    seen = set()
    for image in y:
        mask = image[0] > 0
        for c in range(3):
            assert torch.equal(image[c], (c + 1) / 4 * mask.float())
        top, bottom, left, right = _edges(mask)
        assert min(top, bottom) == 0 and max(top, bottom) <= 1
        assert min(left, right) == 0 and max(left, right) <= 1
        assert int(mask.sum()) == (h - top - bottom) * (w - left - right)
        seen.add((bottom - top, right - left))
    assert seen == {(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)}


def _under_global_seed(global_seed: int, draw: Callable[[], Any]) -> Any:
    """`draw()` with the global RNG seeded `global_seed`, the global RNG restored after."""
    with torch.random.fork_rng():
        torch.manual_seed(global_seed)
        return draw()


@pytest.mark.parametrize("knobs", [dict(crop_padding=2, flip=False, rotation=0.0),
                                   dict(crop_padding=0, flip=True, rotation=0.0),
                                   dict(crop_padding=0, flip=False, rotation=15.0),
                                   dict(crop_padding=2, flip=True, rotation=15.0)],
                         ids=["crop", "flip", "rotation", "all"])
def test_augmentation_draws_from_its_generator_only(knobs: dict[str, Any]) -> None:
    """The same generator seed gives the same batch whatever the global RNG holds; another seed
    gives another batch."""
    x = torch.rand(64, 3, 8, 8, generator=torch.Generator().manual_seed(9))

    def view(seed: int) -> Callable[[], torch.Tensor]:
        return lambda: augment(x, **knobs, generator=torch.Generator().manual_seed(seed))

    first = _under_global_seed(100, view(1))
    assert torch.equal(first, _under_global_seed(200, view(1)))
    assert not torch.equal(first, _under_global_seed(100, view(2)))


# --- sampler -------------------------------------------------------------------------------------

def test_labelled_positions_walk_fresh_permutations() -> None:
    """10 labelled images, 5 a batch, 8 batches: four passes over the labelled set, each a
    permutation of 0..9, drawn afresh (four equal ones, or the identity, would be a chance of
    1/10!^3 and 1/10!)."""
    batches = sample_batch_indices(10, 7, iterations=8, batch_size=12, n_labelled_per_batch=5,
                                   generator=torch.Generator().manual_seed(0))
    walk = torch.cat([li for li, _ in batches]).view(4, 10)
    assert all(sorted(p.tolist()) == list(range(10)) for p in walk)
    assert len({tuple(p.tolist()) for p in walk}) > 1
    assert walk[0].tolist() != list(range(10))


def test_without_unlabelled_data_a_batch_is_labelled_whatever_share_was_asked() -> None:
    batches = sample_batch_indices(50, 0, iterations=3, batch_size=16, n_labelled_per_batch=4,
                                   generator=torch.Generator().manual_seed(0))
    assert all(len(li) == 16 and len(ui) == 0 for li, ui in batches)


def test_batch_draws_come_from_the_generator_given() -> None:
    def draw() -> list[tuple[list[int], list[int]]]:
        batches = sample_batch_indices(30, 40, iterations=4, batch_size=10,
                                       n_labelled_per_batch=3,
                                       generator=torch.Generator().manual_seed(5))
        return [(li.tolist(), ui.tolist()) for li, ui in batches]

    assert _under_global_seed(1, draw) == _under_global_seed(2, draw)


# --- capacity ------------------------------------------------------------------------------------

def test_digits_pool_is_what_the_test_fraction_leaves() -> None:
    """scikit-learn's digits (178, 182, 177, 183, 181, 182, 181, 179, 174, 180 of 0-9) with
    test_fraction 0.2 hold out 36+36+35+37+36+36+36+36+35+36 = 359, leaving 1,438 to train on."""
    cfg = {"source": "digits", "test_fraction": 0.2, "val_fraction": 0.2, "val_max": 2000}
    assert split_problem("digits", {**cfg, "labelled": 1440}) == (
        "dataset 'digits': labelled = 1440 but only 1438 training samples exist; lower "
        "datasets.digits.labelled in the params file")


# --- training_data: the pseudo-label file --------------------------------------------------------

def _labels(n: int = 400) -> np.ndarray:
    return np.random.default_rng(5).permutation(np.repeat(np.arange(C), n // C))


@pytest.fixture(scope="module")
def split() -> Split:
    return make_split("x", _labels(), num_classes=C, seed=3, test_fraction=None, labelled=40,
                      val_fraction=0.2, val_max=1000, train_size=320)


def _pseudo_file(path: Path, indices: np.ndarray, labels: np.ndarray, **extra: Any) -> Path:
    np.savez(path, indices=indices, pseudo_labels=labels, **extra)
    return path


def test_a_pseudo_label_file_of_another_labeler_or_training_is_refused(split: Split,
                                                                       tmp_path: Path) -> None:
    labels = _labels()[split.unlabelled]
    made = _pseudo_file(tmp_path / "made.npz", split.unlabelled, labels, labeler="standard",
                        labeler_training="abc")
    with pytest.raises(ValueError, match="holds the pseudo-labels of 'standard'.*'mt'"):
        load_pseudo_labels(made, split, C, labeler="mt")
    with pytest.raises(ValueError, match=r"trained with other params .*training abc.* give xyz"):
        load_pseudo_labels(made, split, C, labeler="standard", labeler_training="xyz")
    assert np.array_equal(load_pseudo_labels(made, split, C, labeler="standard",
                                             labeler_training="abc"), labels)
    # a file written before the labeler and its training were recorded names neither: it passes
    old = _pseudo_file(tmp_path / "old.npz", split.unlabelled, labels)
    assert np.array_equal(load_pseudo_labels(old, split, C, labeler="mt",
                                             labeler_training="xyz"), labels)


@pytest.mark.parametrize("name, change", [
    ("one short", lambda y: y[:-1]),
    ("a column", lambda y: y[:, None]),
    ("floats", lambda y: y.astype(np.float64) + 0.4),
    ("a class too many", lambda y: np.where(np.arange(len(y)) == 3, C, y)),
    ("negative", lambda y: np.where(np.arange(len(y)) == 3, -1, y)),
])
def test_pseudo_labels_are_one_class_index_per_unlabelled_image(split: Split, tmp_path: Path,
                                                                name: str, change: Any) -> None:
    path = _pseudo_file(tmp_path / "p.npz", split.unlabelled, change(_labels()[split.unlabelled]))
    with pytest.raises(ValueError, match="one class index per unlabelled image|pseudo-labels go "
                                         f"up to {C} but 'x' has {C} classes") as error:
        load_pseudo_labels(path, split, C)
    assert "\n" not in str(error.value)


def test_an_empty_pool_loads_an_empty_pseudo_label_file(tmp_path: Path) -> None:
    """A fully labelled split (tab-sup) has no unlabelled image: its file holds no label, and
    that is one label per unlabelled image."""
    split = make_split("x", _labels(), num_classes=C, seed=1, test_fraction=None, labelled=None,
                       val_fraction=0.2, val_max=1000, train_size=320)
    assert len(split.unlabelled) == 0
    path = _pseudo_file(tmp_path / "e.npz", split.unlabelled, np.zeros(0, np.int64))
    assert load_pseudo_labels(path, split, C).shape == (0,)


# --- training_data: a run's tensors --------------------------------------------------------------

def _source(n: int = 400, h: int = 2, w: int = 2, dtype: torch.dtype = torch.float32
            ) -> ImageDataset:
    """Image i filled with i / n (uint8: i % 256): which image reaches a tensor can be read."""
    values = torch.arange(n, dtype=torch.float32) / n
    if dtype == torch.uint8:
        values = torch.arange(n) % 256
    images = values.to(dtype)[:, None, None, None].expand(n, 1, h, w).clone()
    return ImageDataset(name="x", images=images, labels=torch.as_tensor(_labels(n)),
                        num_classes=C + 1, mean=(0.25,), std=(0.75,))


def test_a_run_carries_the_datasets_classes_mean_and_std(split: Split) -> None:
    """The dataset's own class count (here one class more than its labels use), mean and std."""
    data = training_data(_source(), split, "semi", None)
    assert (data.num_classes, data.mean, data.std) == (C + 1, (0.25,), (0.75,))


def test_a_pseudo_label_run_without_its_file_is_one_line(split: Split) -> None:
    with pytest.raises(ValueError, match=r"^this method trains on pseudo-labels: pass --pseudo "
                                         r"FILE$"):
        training_data(_source(), split, "pseudo", None)


# --- training_data: DMAT's generated images ------------------------------------------------------

@pytest.mark.parametrize("content, words", [
    ({"images": np.zeros((2, 2, 3, 1), np.float32)}, "must be uint8 N x 2 x 3 x 1, got float32"),
    ({"images": np.zeros((2, 3, 2, 1), np.uint8)}, "must be uint8 N x 2 x 3 x 1, got uint8"),
    ({"images": np.zeros((3, 2, 3, 1), np.uint8), "labels": np.array([0, 1])}, "one label in"),
    ({"images": np.zeros((2, 2, 3, 1), np.uint8), "labels": np.array([0, -1])}, "one label in"),
    # a column of labels would have failed the first training step (a 2-D unlabelled_y beside
    # the 1-D labelled_y), and float labels were truncated (2.7 to class 2)
    ({"images": np.zeros((2, 2, 3, 1), np.uint8), "labels": np.array([[0], [1]])}, "one label in"),
    ({"images": np.zeros((2, 2, 3, 1), np.uint8), "labels": np.array([0.0, 2.7])}, "one label in"),
], ids=["float", "transposed", "two-labels-for-three", "negative", "column", "float-labels"])
def test_bad_generated_files_are_refused(tmp_path: Path, content: dict[str, np.ndarray],
                                         words: str) -> None:
    np.savez(tmp_path / "g.npz", **content)
    with pytest.raises(ValueError, match=words):
        load_generated(tmp_path / "g.npz", _source(h=2, w=3))


def test_a_missing_generated_file_names_the_params_entry(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"methods\.<name>\.generated"):
        load_generated(tmp_path / "none.npz", _source())


def test_generated_images_are_n_h_w_c_and_keep_a_uint8_datasets_values(tmp_path: Path) -> None:
    """Images 2 x 3 (H x W), one channel: read as N x 1 x 2 x 3; a uint8 dataset keeps 0..255."""
    images = np.arange(4 * 6, dtype=np.uint8).reshape(4, 2, 3, 1)
    np.savez(tmp_path / "g.npz", images=images)
    x, labels = load_generated(tmp_path / "g.npz", _source(h=2, w=3, dtype=torch.uint8))
    assert labels is None and x.dtype == torch.uint8
    assert x.shape == (4, 1, 2, 3)
    assert x[1, 0].tolist() == [[6, 7, 8], [9, 10, 11]]


def _run(fraction: float, kind: str, batch: int = 10) -> Any:
    """The two fields add_generated reads of a RunConfig."""
    return SimpleNamespace(method_params={"generated_fraction": fraction, "data": kind},
                           training={"batch_size": batch})


@pytest.mark.parametrize("kind", ["pseudo", "semi"])
def test_generated_images_follow_the_pool_with_their_own_labels(split: Split, kind: str) -> None:
    """The pool's images keep their labels (pseudo-labels, or -1: never the true ones); the
    generated images come after them, each with its own label, in order; the labelled share of
    a batch stays the training params' (None) unless the run is labelled-only."""
    source = _source()
    truth = _labels()
    pseudo = (truth[split.unlabelled] + 1) % C
    data = training_data(source, split, kind, pseudo if kind == "pseudo" else None)
    images = torch.full((3, 1, 2, 2), 7.0)
    images[1], images[2] = 8.0, 9.0
    generated_y = torch.tensor([2, 0, 3])
    mixed = add_generated(data, _run(0.35, kind), images, generated_y)
    n = len(split.unlabelled)
    assert torch.equal(mixed.unlabelled_x[:n], source.images[torch.as_tensor(split.unlabelled)])
    assert mixed.unlabelled_x[n:, 0, 0, 0].tolist() == [7.0, 8.0, 9.0]
    pool_y = pseudo.tolist() if kind == "pseudo" else [-1] * n
    assert mixed.unlabelled_y.tolist() == pool_y + [2, 0, 3]
    assert mixed.labelled_per_batch is None
    assert torch.equal(mixed.labelled_x, data.labelled_x)
    assert torch.equal(mixed.labelled_y, data.labelled_y)


def test_a_labelled_only_run_keeps_batch_less_int_of_the_generated_share(split: Split) -> None:
    """0.35 of a batch of 10 is 3.5 generated images: int() makes it 3, so 7 real ones."""
    data = training_data(_source(), split, "labelled", None)
    mixed = add_generated(data, _run(0.35, "labelled"), torch.zeros(2, 1, 2, 2),
                          torch.tensor([1, 2]))
    assert mixed.labelled_per_batch == 10 - math.floor(3.5)


def test_importing_every_submodule_first_leaves_the_packages_names_its_functions() -> None:
    """No submodule of wscat.data shares a name with what the package exports: importing the
    submodule `wscat.data.augment` (as the file was once called) bound the package's `augment`
    to the module, and every later training called a module ("'module' object is not
    callable"). Checked in a fresh interpreter, whatever this one imported before."""
    import subprocess
    import sys

    code = ("import pkgutil, importlib, types, wscat.data as d\n"
            "for m in pkgutil.iter_modules(d.__path__):\n"
            "    importlib.import_module('wscat.data.' + m.name)\n"
            "bad = [n for n in d.__all__ if isinstance(getattr(d, n), types.ModuleType)]\n"
            "print(bad)\n"
            "import wscat.training.trainer as t\n"
            "print(callable(t.augment) and not isinstance(t.augment, types.ModuleType))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "True"]
