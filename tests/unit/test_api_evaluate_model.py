"""api.evaluate_model: a model from elsewhere under the core attack suite. On a wscat run's own
test set it gives the numbers `evaluate_checkpoint` (the workflow's evaluate) gives its checkpoint,
bit for bit, whether the model comes as a wscat network, an exported entry or a plain images ->
logits module; bad input is one ValueError line, and nothing is written."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from tests.helpers.api_runs import exported_run
from tests.helpers.tiny import tiny_params
from tests.unit.test_api_refusals import files, refused
from wscat import api
from wscat.config import evaluation_for, validate_params
from wscat.evaluation import stratified_order

# Tiny params attack with PGD-5: every call warns of it (asserted in one test below).
pytestmark = pytest.mark.filterwarnings("ignore:on digits, PGD-5 and CW-5 move:UserWarning")


class Plain(nn.Module):
    """What RobustBench hands out: [0,1] images -> logits, no features."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[1]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """One TRADES run of 1 epoch on tiny params, evaluated (core) and exported."""
    work = tmp_path_factory.mktemp("evaluate-model")
    params, run, result, entry = exported_run(work, "trades")
    net, _ = api.load_model(run.checkpoint)
    return {"params": params, "result": result, "entry": entry, "net": net, "runs": work / "runs",
            "test": api.test_set(run.split, params=params)}


def test_a_run_s_own_model_gives_its_checkpoint_s_numbers_whatever_its_form(made) -> None:
    test, expected = made["test"], made["result"].accuracy
    assert set(expected) == {"Natural", "FGSM", "PGD", "CW", "AA", "Mean"}
    for model in (made["net"], api.load_exported(made["entry"]), Plain(made["net"]).eval()):
        got = api.evaluate_model(model, test.images, test.labels, dataset="digits",
                                 params=made["params"], seed=1)
        assert got.accuracy == expected, type(model).__name__
    assert got.attacks["PGD"] == made["result"].manifest["attacks"]["PGD"]
    assert got.eps == made["result"].manifest["eps"] == got.attacks["PGD"]["eps"]
    # The images attacked: the workflow's, the first n_examples of the stratified order.
    evaluation = evaluation_for(validate_params(tiny_params(epochs=1)), "digits")
    order = stratified_order(test.labels, evaluation["subset_seed"])[: evaluation["n_examples"]]
    assert torch.equal(got.indices, order) and len(order) == 40


def test_the_caller_s_torch_state_is_left_as_it_was_and_short_attacks_are_warned_of(made) -> None:
    """Inside torch.no_grad() the attacks still get their gradients; AutoAttack seeds torch's
    random generator, which is the caller's again after; tiny params' PGD-5 is warned of, as
    `wscat evaluate` warns; a model whose first convolution is not its input layer is taken."""
    test, expected = made["test"], made["result"].accuracy
    model = LaterConv(made["net"]).eval()  # its initialisation draws from the generator
    torch.manual_seed(123)
    with torch.no_grad(), pytest.warns(UserWarning, match="on digits, PGD-5 and CW-5 move"):
        got = api.evaluate_model(model, test.images, test.labels, dataset="digits",
                                 params=made["params"], seed=1)
    after = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(3))
    assert got.accuracy == expected


class LaterConv(Plain):
    """A convolution registered before the network it wraps, never applied to the images."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__(net)
        self.head = nn.Conv2d(7, 7, 1)


def test_numpy_images_and_labels_are_the_tensors_they_hold(made) -> None:
    """uint8 numpy images (0..255) and int32 labels: the numbers of the same tensors."""
    test, net = made["test"], made["net"]
    pixels = np.rint(test.images.numpy() * 255).astype(np.uint8)
    as_tensor = api.evaluate_model(net, torch.from_numpy(pixels), test.labels, dataset="digits",
                                   params=made["params"], seed=2)
    as_numpy = api.evaluate_model(net, pixels, test.labels.numpy().astype(">i4"),  # big-endian
                                  dataset="digits", params=made["params"], seed=2)
    assert as_numpy.accuracy == as_tensor.accuracy
    big_endian = api.evaluate_model(net, test.images.numpy().astype(">f4"), test.labels,
                                    dataset="digits", params=made["params"], seed=2)
    floats = api.evaluate_model(net, test.images, test.labels, dataset="digits",
                                params=made["params"], seed=2)
    assert big_endian.accuracy == floats.accuracy


class Wide(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :3].unsqueeze(1)  # N x 1 x 3: no N x K logits


class Five(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :5]  # 5 classes where digits has 10


def with_npz(params_file: Path) -> dict:
    """The params with an npz dataset `mine` (digits' settings): its image size is its file's,
    not known beforehand, so no size check stands before the model's first forward pass."""
    params = yaml.safe_load(Path(params_file).read_text())
    params["datasets"]["mine"] = {**params["datasets"]["digits"], "source": "npz",
                                  "path": "data/mine.npz"}
    return params


class Linear(nn.Module):
    """Takes 8 x 8 images only: flattened into a linear layer of 64 inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))


class Swapped(Plain):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features, logits = self.net(x)
        return logits, -logits  # (logits, aux): read as (features, logits) it attacks -logits


class Detached(Plain):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.detach())[1]  # a non-differentiable preprocessing step


@pytest.mark.parametrize("change, words", [
    (lambda m: {"labels": m["test"].labels.float()}, ["labels are torch.float32", "integers"]),
    (lambda m: {"labels": m["test"].labels[:-1]}, ["for 359 images", "one class index"]),
    (lambda m: {"labels": m["test"].labels + 5}, ["the model has 10 classes, 0..9"]),
    (lambda m: {"labels": list(m["test"].labels)}, ["labels= takes a torch.Tensor", "not list"]),
    (lambda m: {"images": m["test"].images[:0], "labels": m["test"].labels[:0]},
     ["images hold no image"]),
    (lambda m: {"model": Wide().eval()}, ["N x K logits", "shape (1, 1, 3)"]),
    (lambda m: {"model": m["net"].train()}, ["train mode", "model.eval()"]),
    (lambda m: {"dataset": "digitz"}, ["unknown dataset 'digitz'", "digits"]),
    (lambda m: {"dataset": "cifar10"}, ["images are 1 x 8 x 8", "'cifar10' holds 3 x 32 x 32",
                                        "pass dataset="]),
    (lambda m: {"model": Five().eval()}, ["the model has 5 classes, dataset 'digits' 10"]),
    (lambda m: {"seed": True}, ["seed=True is not an int"]),
    (lambda m: {"model": Swapped(m["net"]).eval()}, ["returns a tuple of 2", "logits alone"]),
    (lambda m: {"model": Detached(m["net"]).eval()}, ["no gradient reaches the images"]),
    (lambda m: {"model": copy.deepcopy(m["net"]).double()}, ["torch.float64 parameters",
                                                             "model.float()"]),
    (lambda m: {"model": Linear().eval(), "images": m["test"].images[:, :, :4, :4],
                "dataset": "mine", "params": with_npz(m["params"])},
     ["model= fails on one of the images", "mat1 and mat2"]),
], ids=["float-labels", "labels-short", "labels-range", "labels-list", "no-images",
        "not-logits", "train-mode", "unknown-dataset", "other-dataset", "other-classes",
        "bool-seed", "tuple-of-another-model", "no-gradient", "float64-model",
        "model-fails-on-the-images"])
def test_bad_input_is_one_line_and_nothing_is_written(made, change, words) -> None:
    before = files(made["runs"])
    call = {"model": made["net"], "images": made["test"].images, "labels": made["test"].labels,
            "dataset": "digits", "params": made["params"], **change(made)}
    try:
        refused(lambda: api.evaluate_model(call.pop("model"), call.pop("images"),
                                           call.pop("labels"), **call), *words)
    finally:
        made["net"].eval()
    assert files(made["runs"]) == before
    assert not list(Path.cwd().glob("*.shards"))


def test_inside_inference_mode_it_is_one_line(made) -> None:
    with torch.inference_mode():
        refused(lambda: api.evaluate_model(made["net"], made["test"].images, made["test"].labels,
                                           dataset="digits", params=made["params"]),
                "outside torch.inference_mode()")


def test_per_image_flags_are_the_metrics_file_s_and_a_killed_call_resumes(made, tmp_path,
                                                                          monkeypatch) -> None:
    """`correct` holds the metrics file's per-image flags; with resume_dir a second call reuses
    every finished AutoAttack shard (AutoAttack itself never runs) and gives the same numbers."""
    from wscat.attacks import shards
    from wscat.io import read_json_object

    test, expected = made["test"], made["result"].accuracy
    folder = tmp_path / "aa" / "shards"
    first = api.evaluate_model(made["net"], test.images, test.labels, dataset="digits",
                               params=made["params"], seed=1, resume_dir=folder)
    assert first.accuracy == expected
    metrics = read_json_object(made["result"].path, "metrics", "")
    assert {name: "".join("1" if f else "0" for f in flags.tolist())
            for name, flags in first.correct.items()} == metrics["per_image"]["correct"]
    # Tiny params run AutoAttack on the first 8 of the 40 images: the flags are those 8 images'.
    assert {len(flags) for flags in first.correct.values()} == {8}
    assert round(100.0 * first.correct["AA"].float().mean().item(), 4) == expected["AA"]
    written = sorted(p.name for p in folder.iterdir())
    assert written and all(n.startswith("aa-standard-") for n in written)

    def killed(*args, **kwargs):
        raise AssertionError("AutoAttack ran again")

    monkeypatch.setattr(shards.autoattack, "run_shard", killed)
    again = api.evaluate_model(made["net"], test.images, test.labels, dataset="digits",
                               params=made["params"], seed=1, resume_dir=str(folder))
    assert again.accuracy == expected
    assert all(torch.equal(again.correct[k], first.correct[k]) for k in first.correct)
    # Another model's shards are not its: it attacks them itself (and here is stopped).
    other = copy.deepcopy(made["net"])
    with torch.no_grad():
        next(other.parameters()).add_(1e-3)
    with pytest.raises(AssertionError, match="AutoAttack ran again"):
        api.evaluate_model(other, test.images, test.labels, dataset="digits",
                           params=made["params"], seed=1, resume_dir=folder)


def test_a_resume_dir_under_a_file_is_one_line_before_any_attack(made, tmp_path) -> None:
    (tmp_path / "taken").write_text("mine")
    with pytest.raises(OSError, match=r"taken is a file, not a folder") as raised:
        api.evaluate_model(made["net"], made["test"].images, made["test"].labels,
                           dataset="digits", params=made["params"], resume_dir=tmp_path / "taken")
    assert "\n" not in str(raised.value)
    assert (tmp_path / "taken").read_text() == "mine"
    refused(lambda: api.evaluate_model(made["net"], made["test"].images, made["test"].labels,
                                       dataset="digits", params=made["params"], resume_dir=3),
            "resume_dir= takes a path")
