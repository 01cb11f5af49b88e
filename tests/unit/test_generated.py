"""DMAT's generated data: an npz of images (with or without labels) fills a fixed share of
every batch; unlabelled generated images are labelled by the configured labeler's checkpoint (in
the train step: the data layer knows no model)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.tiny import tiny_params
from wscat.config import RunConfig
from wscat.data import load_dataset, load_split
from wscat.data.training_data import add_generated, load_generated, training_data
from wscat.inference import load_model
from wscat.steps import split as split_step, train as train_step


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("generated")
    params = tiny_params(epochs=1)
    split_step.run(params, "digits", 1, tmp / "split.npz")
    source = load_dataset("digits", params["datasets"]["digits"])
    split = load_split(tmp / "split.npz")
    images = (source.images[:50, 0].numpy() * 255).round().astype(np.uint8)[..., None]
    return params, source, split, tmp, images, source.labels[:50].numpy()


def _run(params, generated):
    params["methods"]["dmat"]["generated"] = str(generated)
    return RunConfig.from_params(params, dataset="digits", model="cnn", method="dmat", seed=1)


def test_labelled_generated_images_fill_seventy_percent_of_each_batch(digits):
    params, source, split, tmp, images, labels = digits
    np.savez(tmp / "gen.npz", images=images, labels=labels)
    data = training_data(source, split, "labelled", None)
    x_g, y_g = load_generated(tmp / "gen.npz", source)
    mixed = add_generated(data, _run(params, tmp / "gen.npz"), x_g, y_g)
    assert len(mixed.unlabelled_x) == 50 and torch.equal(mixed.unlabelled_y, torch.as_tensor(labels))
    assert torch.allclose(mixed.unlabelled_x, torch.as_tensor(images).permute(0, 3, 1, 2) / 255.0)
    assert mixed.labelled_per_batch == 128 - int(0.7 * 128)  # 39 real + 89 generated
    assert torch.equal(mixed.labelled_x, data.labelled_x)


def test_unlabelled_generated_images_take_the_labelers_predictions(digits):
    params, source, split, tmp, images, _ = digits
    np.savez(tmp / "gen-unlabelled.npz", images=images)
    train_step.run(params, dataset="digits", model="cnn", method="standard", seed=1,
                   split_path=tmp / "split.npz", pseudo_path=None, out_dir=tmp / "standard",
                   device=torch.device("cpu"))
    data = training_data(source, split, "labelled", None)
    # The labeler's checkpoint must be the labeler's run: here Standard, not the default mt.
    with pytest.raises(ValueError, match="holds standard seed 1 on digits, not mt seed 1"):
        train_step.with_generated(data, _run(params, tmp / "gen-unlabelled.npz"), source,
                                  tmp / "standard/best.pt", torch.device("cpu"), params)
    params = {**params, "methods": {**params["methods"], "dmat": {
        **params["methods"]["dmat"], "generated_labeler": "standard"}}}
    run = _run(params, tmp / "gen-unlabelled.npz")
    with pytest.raises(ValueError, match="generated_labeler"):
        train_step.with_generated(data, run, source, None, torch.device("cpu"), params)
    mixed = train_step.with_generated(data, run, source, tmp / "standard/best.pt",
                                      torch.device("cpu"), params)
    model, _ = load_model(tmp / "standard/best.pt", torch.device("cpu"))
    with torch.no_grad():
        expected = model(mixed.unlabelled_x)[1].argmax(1)
    assert torch.equal(mixed.unlabelled_y, expected)


@pytest.mark.parametrize(("content", "words"), [
    ({"pictures": np.zeros((2, 8, 8, 1), np.uint8)}, "must hold `images`"),
    ({"images": np.zeros((2, 8, 8, 3), np.uint8)}, "uint8 N x 8 x 8 x 1"),
    ({"images": np.zeros((2, 8, 8, 1), np.uint8), "labels": np.array([0, 10])}, "0..9"),
    ({"images": np.zeros((0, 8, 8, 1), np.uint8), "labels": np.zeros(0, np.int64)},
     "holds no images"),
], ids=["no-images", "wrong-shape", "bad-label", "empty"])
def test_bad_generated_files_are_one_line_errors(digits, content, words):
    params, source, split, tmp, _, _ = digits
    np.savez(tmp / "bad.npz", **content)
    with pytest.raises(ValueError, match=words) as error:
        load_generated(tmp / "bad.npz", source)
    assert "\n" not in str(error.value)


def test_a_generated_file_that_is_no_npz_or_holds_objects_is_one_line(tmp_path):
    """An .npy under the npz's name, and an npz whose images are Python objects (ragged): said
    as what they are, not numpy's TypeError or its advice to allow pickles."""
    from wscat.data import load_dataset
    from wscat.data.training_data import load_generated

    source = load_dataset("digits")
    np.save(tmp_path / "x.npy", np.zeros((2, 8, 8, 1), np.uint8))
    (tmp_path / "x.npy").rename(tmp_path / "npy.npz")
    with pytest.raises(ValueError, match=r"npy\.npz is not a usable generated-data file \(it is a "
                                         r"single \.npy array \(np\.save\)"):
        load_generated(tmp_path / "npy.npz", source)
    ragged = np.empty(2, dtype=object)
    ragged[:] = [np.zeros((8, 8, 1), np.uint8), np.zeros((4, 8, 1), np.uint8)]
    np.savez(tmp_path / "obj.npz", images=ragged)
    with pytest.raises(ValueError, match=r"an array in it holds Python objects \(dtype=object\)"):
        load_generated(tmp_path / "obj.npz", source)
