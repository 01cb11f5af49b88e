"""The label budget, checked from first principles where mutation testing found the data path
unguarded: the fully supervised split, the batch composition (a fixed labelled share, unlabelled
draws with replacement over the whole pool), the epoch length, which images and labels reach
training, the pseudo-labels' alignment with the unlabelled images, and random augmentation.

Each test states what the paper's setting demands (set sizes, disjointness, per-class counts,
label arrays), not what the code happens to return."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from wscat.data import augment, make_split
from wscat.data.sampler import iterations_per_epoch, labelled_per_batch, sample_batch_indices
from wscat.data.sources.base import ImageDataset
from wscat.data.split import Split
from wscat.data.training_data import load_pseudo_labels, training_data

C = 4  # classes of the synthetic dataset


def _labels(n: int = 400) -> np.ndarray:
    """Shuffled labels, 100 a class (first 320 the official training set, 80 a test set)."""
    return np.random.default_rng(5).permutation(np.repeat(np.arange(C), n // C))


def _indexed_source(labels: np.ndarray) -> ImageDataset:
    """Image i is filled with the value i: which images reach a tensor can be read back."""
    n = len(labels)
    images = torch.arange(n, dtype=torch.float32)[:, None, None, None].expand(n, 1, 2, 2).clone()
    return ImageDataset(name="indexed", images=images, labels=torch.as_tensor(labels),
                        num_classes=C, mean=(0.5,), std=(0.5,))


def _ids(x: torch.Tensor) -> list[int]:
    return x[:, 0, 0, 0].long().tolist()


# --- the fully supervised split (labelled=None: the supplementary's tab-sup) -----------------

def _full(seed: int) -> Split:
    return make_split("x", _labels(), num_classes=C, seed=seed, test_fraction=None,
                      labelled=None, val_fraction=0.2, val_max=1000, train_size=320)


def test_fully_labelled_split_holds_validation_out_of_training():
    labels = _labels()
    split = _full(1)
    pool = np.arange(320)
    assert np.array_equal(split.test, np.arange(320, 400))
    assert len(split.unlabelled) == 0
    # validation: min(int(0.2 * 320), 1000) // 4 = 16 a class, out of the pool
    assert np.bincount(labels[split.validation], minlength=C).tolist() == [16] * C
    assert np.isin(split.validation, pool).all()
    # labelled: the rest of the pool, and nothing of validation or test
    assert len(np.intersect1d(split.labelled, split.validation)) == 0
    assert np.array_equal(np.sort(np.concatenate([split.labelled, split.validation])), pool)
    assert np.bincount(labels[split.labelled], minlength=C).tolist() == [
        int((labels[:320] == c).sum()) - 16 for c in range(C)]


def test_fully_labelled_validation_depends_on_the_seed_only():
    a, b = _full(1), _full(2)
    assert np.array_equal(a.validation, _full(1).validation)
    assert not np.array_equal(a.validation, b.validation)
    assert np.array_equal(a.test, b.test)


# --- batch composition -------------------------------------------------------------------------

def test_a_fixed_labelled_share_is_kept_exactly():
    assert labelled_per_batch(240, 1138, 128, 30) == 30
    assert labelled_per_batch(240, 1138, 128, 128) == 128
    with pytest.raises(ValueError):
        labelled_per_batch(240, 1138, 128, 129)
    batches = sample_batch_indices(240, 1138, iterations=5, batch_size=128,
                                   n_labelled_per_batch=labelled_per_batch(240, 1138, 128, 30),
                                   generator=torch.Generator().manual_seed(0))
    assert all(len(li) == 30 and len(ui) == 98 for li, ui in batches)


def test_without_unlabelled_data_every_batch_is_labelled():
    assert labelled_per_batch(240, 0, 64, None) == 64
    assert labelled_per_batch(240, 0, 64, 20) == 64  # nothing else to fill the batch with
    batches = sample_batch_indices(240, 0, iterations=3, batch_size=64, n_labelled_per_batch=64,
                                   generator=torch.Generator().manual_seed(0))
    assert all(len(li) == 64 and len(ui) == 0 for li, ui in batches)


def test_unlabelled_positions_are_drawn_with_replacement_over_the_whole_pool():
    n_u_pool, iterations, n_u = 50, 100, 40
    batches = sample_batch_indices(10, n_u_pool, iterations=iterations, batch_size=50,
                                   n_labelled_per_batch=10,
                                   generator=torch.Generator().manual_seed(0))
    drawn = torch.stack([ui for _, ui in batches])
    assert drawn.shape == (iterations, n_u)
    assert int(drawn.min()) >= 0 and int(drawn.max()) < n_u_pool
    counts = torch.bincount(drawn.flatten(), minlength=n_u_pool)
    assert bool((counts > 0).all())  # every unlabelled image, the last included, can be drawn
    # With replacement, 40 draws out of 50 repeat an image in almost every batch (the chance
    # of none is 50!/10!/50**40 < 1e-8), and the counts over the epoch are far from even
    # (a walk through permutations would give every image 80 draws, give or take 1).
    repeats = sum(len(torch.unique(ui)) < n_u for ui in drawn)
    assert repeats >= iterations - 1
    assert int(counts.max() - counts.min()) > 5


def test_an_unlabelled_pool_smaller_than_a_batch_still_fills_it():
    batches = sample_batch_indices(20, 3, iterations=4, batch_size=32, n_labelled_per_batch=2,
                                   generator=torch.Generator().manual_seed(1))
    assert all(len(ui) == 30 and set(ui.tolist()) <= {0, 1, 2} for _, ui in batches)


@pytest.mark.parametrize("n, batch, steps", [(1000, 128, 8), (1024, 128, 8), (1025, 128, 9),
                                             (1, 128, 1), (0, 128, 1), (127, 128, 1),
                                             (129, 128, 2)])
def test_an_epoch_is_ceil_of_the_pool_over_the_batch(n, batch, steps):
    assert iterations_per_epoch(n, batch) == steps


# --- which images and labels reach training ------------------------------------------------------

@pytest.fixture(scope="module")
def budget():
    labels = _labels()
    split = make_split("x", labels, num_classes=C, seed=3, test_fraction=None, labelled=40,
                       val_fraction=0.2, val_max=1000, train_size=320)
    return labels, split, _indexed_source(labels)


def test_the_budget_split_has_the_sizes_it_promises(budget):
    labels, split, _ = budget
    # 40 labelled = 10 a class, 8 of them (0.2 * 40) for validation: 2 a class; 32 train
    assert np.bincount(labels[split.labelled], minlength=C).tolist() == [8] * C
    assert np.bincount(labels[split.validation], minlength=C).tolist() == [2] * C
    parts = [split.labelled, split.unlabelled, split.validation, split.test]
    assert [len(p) for p in parts] == [32, 280, 8, 80]
    assert len(np.unique(np.concatenate(parts))) == 400



def test_the_budget_split_is_drawn_per_seed(budget):
    labels, split, _ = budget
    kwargs = dict(num_classes=C, test_fraction=None, labelled=40, val_fraction=0.2,
                  val_max=1000, train_size=320)
    again = make_split("x", labels, seed=3, **kwargs)
    other = make_split("x", labels, seed=4, **kwargs)
    assert np.array_equal(again.labelled, split.labelled)
    assert np.array_equal(again.validation, split.validation)
    assert not np.array_equal(other.labelled, split.labelled)
    assert np.array_equal(other.test, split.test)


def test_a_share_of_the_unlabelled_pool_comes_from_the_unlabelled_pool_only(budget):
    labels, split, _ = budget
    half = make_split("x", labels, num_classes=C, seed=3, test_fraction=None, labelled=40,
                      val_fraction=0.2, val_max=1000, train_size=320, unlabelled_fraction=0.5)
    assert np.array_equal(half.labelled, split.labelled)
    assert np.array_equal(half.validation, split.validation)
    assert len(half.unlabelled) == 140 and np.isin(half.unlabelled, split.unlabelled).all()


def test_the_labelled_share_of_a_batch_is_the_share_in_the_pool():
    assert labelled_per_batch(32, 280, 64, None) == 7  # round(64 * 32 / 312) = round(6.56)
    assert labelled_per_batch(100, 100, 64, None) == 32
    assert labelled_per_batch(1, 10_000, 64, None) == 1  # at least one labelled sample

@pytest.mark.parametrize("kind", ["labelled", "semi", "pseudo"])
def test_training_tensors_hold_exactly_their_parts(budget, kind):
    labels, split, source = budget
    pseudo = (labels[split.unlabelled] + 1) % C  # every pseudo-label differs from the truth
    data = training_data(source, split, kind, pseudo if kind == "pseudo" else None)
    assert _ids(data.labelled_x) == split.labelled.tolist()
    assert data.labelled_y.tolist() == labels[split.labelled].tolist()
    assert _ids(data.validation_x) == split.validation.tolist()
    assert data.validation_y.tolist() == labels[split.validation].tolist()
    seen = set(_ids(data.labelled_x)) | set(_ids(data.unlabelled_x))
    assert not seen & set(split.validation.tolist()) and not seen & set(split.test.tolist())
    assert data.n_train == 32 + 280  # the pool outside validation, for every kind
    if kind == "labelled":
        assert len(data.unlabelled_x) == 0 and len(data.unlabelled_y) == 0
        return
    assert _ids(data.unlabelled_x) == split.unlabelled.tolist()
    if kind == "semi":  # no label at all, never the true one
        assert data.unlabelled_y.tolist() == [-1] * 280
    else:  # the pseudo-label of each image, in the split's order
        assert data.unlabelled_y.tolist() == pseudo.tolist()


def test_pseudo_labels_of_other_images_are_refused(budget, tmp_path):
    labels, split, _ = budget
    good = tmp_path / "good.npz"
    np.savez(good, indices=split.unlabelled, pseudo_labels=labels[split.unlabelled] % C)
    assert np.array_equal(load_pseudo_labels(good, split, C), labels[split.unlabelled])
    for name, indices in (("rolled", np.roll(split.unlabelled, 1)),
                          ("labelled", np.sort(np.concatenate([split.unlabelled[:-32],
                                                               split.labelled])))):
        path = tmp_path / f"{name}.npz"
        np.savez(path, indices=indices, pseudo_labels=labels[indices])
        with pytest.raises(ValueError, match="another split"):
            load_pseudo_labels(path, split, C)


# --- the pseudo-label step: one label per unlabelled image, its own ------------------------------

class _Oracle(torch.nn.Module):
    """A 'labeler' that names each image by a fixed function of its pixels: which image each
    pseudo-label came from can be checked."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @staticmethod
    def name(x: torch.Tensor, num_classes: int) -> torch.Tensor:
        flat = (x.flatten(1) * 16).round().long()
        return (flat * torch.arange(1, flat.shape[1] + 1)).sum(1) % num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(self.name(x, self.num_classes),
                                           self.num_classes).float()


def test_the_pseudo_label_step_labels_each_unlabelled_image_in_order(tmp_path, monkeypatch):
    from tests.helpers.tiny import tiny_params
    from wscat.data import load_dataset, load_split
    from wscat.steps import pseudo as pseudo_step, split as split_step

    params = tiny_params(epochs=1)
    split_step.run(params, "digits", 1, tmp_path / "split.npz")
    split = load_split(tmp_path / "split.npz")
    source = load_dataset("digits", params["datasets"]["digits"])
    checkpoint = tmp_path / "labeler.pt"
    checkpoint.write_bytes(b"stand-in")
    monkeypatch.setattr(pseudo_step, "check_input_kind", lambda *a, **k: None)
    monkeypatch.setattr(pseudo_step, "check_run", lambda *a, **k: None)
    monkeypatch.setattr(pseudo_step, "load_model",
                        lambda *a, **k: (_Oracle(source.num_classes).eval(), {"epoch": 1}))
    report = pseudo_step.run(params, dataset="digits", seed=1, split_path=tmp_path / "split.npz",
                             checkpoint=checkpoint, out=tmp_path / "p.npz",
                             metrics=tmp_path / "p.json", labeler="standard",
                             device=torch.device("cpu"))
    images = source.images[torch.as_tensor(split.unlabelled)]
    expected = _Oracle.name(images, source.num_classes).numpy()
    truth = source.labels[torch.as_tensor(split.unlabelled)].numpy()
    with np.load(tmp_path / "p.npz") as saved:
        assert np.array_equal(saved["indices"], split.unlabelled)
        assert np.array_equal(saved["pseudo_labels"], expected)
    assert report["n"] == len(split.unlabelled)
    assert report["accuracy"] == pytest.approx(100.0 * float((expected == truth).mean()), abs=1e-3)
    assert np.array_equal(load_pseudo_labels(tmp_path / "p.npz", split, source.num_classes),
                          expected)


# --- augmentation: drawn per sample ------------------------------------------------------------

def test_flip_is_drawn_per_sample():
    x = torch.zeros(400, 1, 4, 4)
    x[:, :, :, 0] = 1.0  # left column lit: flipped images have it on the right
    y = augment(x, crop_padding=0, flip=True, rotation=0.0,
                generator=torch.Generator().manual_seed(0))
    flipped = int((y[:, 0, 0, 3] == 1.0).sum())
    kept = int((y[:, 0, 0, 0] == 1.0).sum())
    assert flipped + kept == 400 and 140 < flipped < 260  # about half, as a fair coin gives


def test_crop_offsets_cover_the_whole_padding():
    p, n = 2, 500
    x = torch.zeros(n, 1, 8, 8)
    x[:, :, 3, 3] = 1.0  # one lit pixel: where it lands tells the offset
    y = augment(x, crop_padding=p, flip=False, rotation=0.0,
                generator=torch.Generator().manual_seed(0))
    shifts = set()
    for img in y[:, 0]:
        where = torch.nonzero(img == 1.0)
        assert len(where) == 1  # 3 pixels from the edge: no shift of at most 2 crops it out
        shifts.add((int(where[0, 0]) - 3, int(where[0, 1]) - 3))
    offsets = list(range(-p, p + 1))
    assert shifts == {(dy, dx) for dy in offsets for dx in offsets}
