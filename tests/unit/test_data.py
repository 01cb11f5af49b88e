"""Splits: sizes, class balance, disjointness, determinism, clear errors; augmentation shapes."""
import numpy as np
import pytest
import torch

from wscat.data import augment, load_dataset, load_split, make_split, save_split
from wscat.data.sampler import labelled_per_batch, sample_batch_indices


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def _split(digits, seed=1, labelled=300):
    return make_split("digits", digits.labels.numpy(), num_classes=10, seed=seed,
                      test_fraction=0.2, labelled=labelled, val_fraction=0.2, val_max=2000)


def test_digits_images_in_unit_range(digits):
    assert digits.images.shape == (1797, 1, 8, 8) and digits.train_size is None
    assert float(digits.images.min()) == 0.0 and float(digits.images.max()) == 1.0


def test_split_sizes_balance_and_disjointness(digits):
    split = _split(digits)
    labels = digits.labels.numpy()
    parts = [split.labelled, split.unlabelled, split.validation, split.test]
    assert sum(len(p) for p in parts) == 1797
    assert len(np.unique(np.concatenate(parts))) == 1797
    assert len(split.validation) == 60 and len(split.labelled) == 240
    assert np.bincount(labels[split.labelled], minlength=10).tolist() == [24] * 10
    assert np.bincount(labels[split.validation], minlength=10).tolist() == [6] * 10


def test_test_split_is_fixed_and_run_split_depends_on_seed(digits):
    a, b = _split(digits, seed=1), _split(digits, seed=2)
    assert np.array_equal(a.test, b.test)
    assert not np.array_equal(a.labelled, b.labelled)
    assert np.array_equal(a.labelled, _split(digits, seed=1).labelled)


def test_split_round_trip(tmp_path, digits):
    split = _split(digits)
    save_split(split, tmp_path / "s.npz")
    loaded = load_split(tmp_path / "s.npz")
    assert loaded.seed == 1 and loaded.dataset == "digits"
    assert np.array_equal(loaded.unlabelled, split.unlabelled)


def test_more_labelled_than_exist_is_refused(digits):
    with pytest.raises(ValueError, match="only"):
        _split(digits, labelled=5000)
    with pytest.raises(ValueError, match="class"):
        _split(digits, labelled=1400)  # 140 a class: some classes have fewer in the pool


def test_batches_keep_the_labelled_share():
    assert labelled_per_batch(240, 1138, 128, None) == 22
    assert labelled_per_batch(240, 0, 128, None) == 128
    batches = sample_batch_indices(240, 1138, iterations=11, batch_size=128, n_labelled_per_batch=22,
                                   generator=torch.Generator().manual_seed(0))
    assert len(batches) == 11
    assert all(len(l) == 22 and len(u) == 106 for l, u in batches)
    firsts = torch.cat([l for l, _ in batches])[:240]
    assert sorted(firsts.tolist()) == list(range(240))  # labelled walks a permutation


def test_augment_shifts_without_changing_shape():
    x = torch.rand(16, 1, 8, 8)
    g = torch.Generator().manual_seed(0)
    y = augment(x, crop_padding=1, flip=True, rotation=15.0, generator=g)
    assert y.shape == x.shape and float(y.min()) >= 0.0
    same = augment(x, crop_padding=0, flip=False, rotation=0.0, generator=g)
    assert torch.equal(same, x)


def test_every_unlabelled_share_trains_the_same_number_of_steps(digits):
    """Fig-unlabel varies the data, not the optimizer steps: an epoch is the whole training pool
    (outside validation) for every share of the unlabelled data, and for labelled-only methods."""
    from wscat.data.training_data import training_data

    sizes = set()
    for fraction in (0.1, 0.3, 1.0):
        split = make_split("digits", digits.labels.numpy(), num_classes=10, seed=1,
                           test_fraction=0.2, labelled=300, val_fraction=0.2, val_max=2000,
                           unlabelled_fraction=fraction)
        for kind in ("labelled", "semi"):
            sizes.add(training_data(digits, split, kind, None).n_train)
        if fraction == 1.0:  # as before the change: labelled + unlabelled
            assert sizes == {len(split.labelled) + len(split.unlabelled)}
    assert len(sizes) == 1


def _reference_split(labels, *, num_classes, seed, test_fraction, labelled, val_fraction, val_max,
                     train_size, unlabelled_fraction):
    """make_split as written before its per-class grouping and set differences were sped up
    (a mask per class, np.setdiff1d without assume_unique): the arrays it must still give."""
    def per_class(pool, k, rng):
        return np.sort(np.concatenate([rng.permutation(pool[labels[pool] == c])[:k]
                                       for c in range(num_classes)]))
    everything = np.arange(len(labels))
    if train_size is not None:
        pool, test = everything[:train_size], everything[train_size:]
    else:
        rng0 = np.random.default_rng(0)
        test = np.sort(np.concatenate([
            rng0.permutation(everything[labels == c])[: int(round(test_fraction * (labels == c).sum()))]
            for c in range(num_classes)]))
        pool = np.setdiff1d(everything, test)
    rng = np.random.default_rng(seed)
    labelled_idx = per_class(pool, labelled // num_classes, rng)
    validation = per_class(labelled_idx, min(int(val_fraction * labelled), val_max) // num_classes,
                           rng)
    unlabelled = np.setdiff1d(pool, labelled_idx)
    if unlabelled_fraction < 1:
        unlabelled = np.sort(rng.permutation(unlabelled)[:round(unlabelled_fraction * len(unlabelled))])
    return np.setdiff1d(labelled_idx, validation), unlabelled, validation, test


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_split_is_the_one_the_per_class_masks_gave(seed):
    """Same indices as the plain per-class loop, on shuffled labels of 13 classes, with the
    official and the stratified test split, the whole and a reduced unlabelled pool: every split
    file and every table built on one stays as it was."""
    rng = np.random.default_rng(100 + seed)
    labels = rng.integers(0, 13, size=2600)
    for train_size, test_fraction in ((2000, None), (None, 0.25)):
        for fraction in (1.0, 0.4):
            kwargs = dict(num_classes=13, seed=seed, test_fraction=test_fraction, labelled=260,
                          val_fraction=0.2, val_max=1000, train_size=train_size,
                          unlabelled_fraction=fraction)
            split = make_split("x", labels, **kwargs)
            reference = _reference_split(labels, **kwargs)
            for name, got, want in zip(("labelled", "unlabelled", "validation", "test"),
                                       (split.labelled, split.unlabelled, split.validation,
                                        split.test), reference):
                assert np.array_equal(got, want) and got.dtype == want.dtype, (name, train_size,
                                                                               fraction)
