"""Bad input to wscat.api is one ValueError line saying what to do, raised before anything is
written: an unknown name, a seed that is no int in range, a wscat file given to the wrong argument
(named for what it is; only a damaged file gets "delete it"), images in another layout or scale
than predict takes, a missing exported entry."""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.helpers.api_runs import exported_run
from tests.helpers.tiny import tiny_params, write_params
from wscat import api
from wscat.config import SEED_MAX


def refused(call: Callable[[], object], *words: str, error: type = ValueError) -> str:
    """The one-line message of `error` that `call` raises, checked to hold every one of `words`."""
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


def files(folder: Path) -> set[str]:
    """Every file and folder under `folder`, relative to it."""
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """One Standard run of 1 epoch on tiny params, evaluated and exported; a pseudo-label file
    (its two arrays: what the kind check reads); the paths of each."""
    work = tmp_path_factory.mktemp("api-refusals")
    params, run, result, entry = exported_run(work, "standard")
    pseudo = work / "runs" / "pseudo-mt-seed1.npz"
    np.savez(pseudo, indices=np.arange(3), pseudo_labels=np.zeros(3, dtype=np.int64))
    return {"params": params, "runs": work / "runs", "split": run.split,
            "checkpoint": run.checkpoint, "metrics": result.path, "entry": entry,
            "weights": entry.with_suffix(".pt"), "pseudo": pseudo}


@pytest.fixture
def untouched(made):
    """The module's run folder is the same after the test as before it."""
    before = files(made["runs"])
    yield made
    assert files(made["runs"]) == before


@pytest.fixture
def tiny(tmp_path) -> Path:
    return write_params(tmp_path / "params.yaml", tiny_params(epochs=1))


# --- 1 and 3: names, checked before the split is made -------------------------------------------

@pytest.mark.parametrize("names, words", [
    ({"method": "trade"}, ["unknown method 'trade'", "standard", "trades", "wscat"]),
    ({"model": "cnnn"}, ["unknown model 'cnnn'", "cnn", "wrn-16-4"]),
    ({"dataset": "digitz"}, ["unknown dataset 'digitz'", "digits"]),
    ({"method": None}, ["method=None is not a name", "trades"]),
])
def test_an_unknown_name_lists_the_known_ones_and_writes_nothing(tmp_path, tiny, names, words):
    arguments = {"method": "trades", "dataset": "digits", "model": "cnn", **names}
    method = arguments.pop("method")
    refused(lambda: api.train_method(method, out_dir=tmp_path / "runs", seed=1, params=tiny,
                                     **arguments), *words, "pass one of")
    assert not (tmp_path / "runs").exists()


def test_the_other_calls_refuse_an_unknown_name_too(tiny):
    refused(lambda: api.build_model("cnnn", params=tiny), "unknown model 'cnnn'")
    refused(lambda: api.build_model("cnn", dataset="digitz", params=tiny),
            "unknown dataset 'digitz'")
    refused(lambda: api.load_dataset(["digits"], params=tiny), "is not a name", "digits")
    refused(lambda: api.train_method("trades", out_dir="runs", params=[1]),
            "params= takes the path of a params.yaml or its loaded dict")


# --- 2: the seed -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed, words", [
    ("1", ["seed='1' is not an int"]),
    (1.0, ["seed=1.0 is not an int"]),
    (True, ["seed=True is not an int"]),
    (None, ["seed=None is not an int"]),
    (-3, ["seed=-3 is outside"]),
    (SEED_MAX + 1, [f"seed={SEED_MAX + 1} is outside"]),
])
def test_a_seed_must_be_an_int_in_range_and_nothing_is_written(tmp_path, tiny, seed, words):
    refused(lambda: api.train_method("trades", out_dir=tmp_path / "runs", seed=seed,
                                     params=tiny), *words, f"0..{SEED_MAX}")
    assert not (tmp_path / "runs").exists()


def test_a_seed_given_as_text_beside_its_split_is_refused_as_text(tmp_path, tiny, made):
    """It used to read the split and say it was "the split of digits seed 1, not of digits seed
    1"."""
    out_dir = tmp_path / "runs"
    out_dir.mkdir()
    shutil.copy(made["split"], out_dir / "split-seed1.npz")
    refused(lambda: api.train_method("trades", out_dir=out_dir, seed="1", params=tiny),
            "seed='1' is not an int")
    assert files(out_dir) == {"split-seed1.npz"}


def test_a_refused_training_writes_no_split(tmp_path, tiny, made, monkeypatch):
    """What the training itself would refuse is checked before the split is made: an out_dir
    that is a file, a run folder of another run (of the method or of its labeler), a paper-size
    model on a CPU that "auto" chose."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    refused(lambda: api.train_method("standard", out_dir=a_file, params=tiny),
            "is a file, not a folder")
    out_dir = tmp_path / "runs"
    (out_dir / "mt").mkdir(parents=True)
    shutil.copy(made["checkpoint"], out_dir / "mt" / "best.pt")  # Standard's, not MT's
    for method in ("mt", "wscat"):  # WSCAT's labeler is MT
        refused(lambda: api.train_method(method, out_dir=out_dir, seed=1, params=tiny,
                                         device="cpu"), "holds a finished run of standard")
    assert files(out_dir) == {"mt", "mt/best.pt"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    refused(lambda: api.train_method("standard", model="wrn-28-10", out_dir=tmp_path / "big",
                                     params=tiny, device="auto"), "paper-size", "device='cpu'")
    assert not (tmp_path / "big").exists()


# --- 4: a file given to the wrong argument is named for what it is -----------------------------

WRONG = [  # (the call, the file given, what it is, the argument named)
    ("test_set", "checkpoint", "a PyTorch checkpoint", "split="),
    ("test_set", "metrics", "a wscat metrics file", "split="),
    ("test_set", "pseudo", "a wscat pseudo-label file", "split="),
    ("load_model", "split", "a wscat split", "checkpoint="),
    ("evaluate", "metrics", "a wscat metrics file", "checkpoint="),
    ("evaluate split", "checkpoint", "a PyTorch checkpoint", "split="),
    ("evaluate core", "split", "a wscat split", "core="),
    ("export", "entry", "an exported model entry", "checkpoint="),
    ("export metrics", "checkpoint", "a PyTorch checkpoint", "metrics="),
    ("export metrics", "entry", "an exported model entry", "metrics="),
    ("load_exported", "checkpoint", "a PyTorch checkpoint", "entry="),
    ("load_exported", "weights", "a PyTorch checkpoint", "entry="),
    ("load_exported", "metrics", "a wscat metrics file", "entry="),
]


def _call(name: str, path: Path, made: dict[str, Path], out: Path) -> Callable[[], object]:
    params = made["params"]
    return {
        "test_set": lambda: api.test_set(path, params=params),
        "load_model": lambda: api.load_model(path),
        "evaluate": lambda: api.evaluate_checkpoint(path, params=params, out=out),
        "evaluate split": lambda: api.evaluate_checkpoint(made["checkpoint"], split=path,
                                                          params=params, out=out),
        "evaluate core": lambda: api.evaluate_checkpoint(made["checkpoint"], part="extra",
                                                         core=path, params=params, out=out),
        "export": lambda: api.export_model(path, made["metrics"], out.with_suffix(".json")),
        "export metrics": lambda: api.export_model(made["checkpoint"], path,
                                                   out.with_suffix(".json")),
        "load_exported": lambda: api.load_exported(path),
    }[name]


@pytest.mark.parametrize("call, given, what, argument", WRONG)
def test_a_wscat_file_given_to_the_wrong_argument_is_named_for_what_it_is(
        untouched, tmp_path, call, given, what, argument):
    made = untouched
    message = refused(_call(call, made[given], made, tmp_path / "out.json"),
                      str(made[given]), f"is {what}", f"pass {argument}")
    assert "delete" not in message  # a trained checkpoint is not a damaged split
    assert files(tmp_path) == set()


def test_only_a_damaged_file_of_the_expected_kind_gets_delete_it(made, tmp_path):
    cut = tmp_path / "split-seed1.npz"
    cut.write_bytes(made["split"].read_bytes()[:300])
    refused(lambda: api.test_set(cut, params=made["params"]), str(cut), "delete it")
    cut_checkpoint = tmp_path / "best.pt"
    cut_checkpoint.write_bytes(made["checkpoint"].read_bytes()[:300])
    message = refused(lambda: api.test_set(cut_checkpoint, params=made["params"]),
                      "is a PyTorch checkpoint (.pt) (cut short), not a split", "pass split=")
    assert "delete" not in message


def test_a_file_of_no_wscat_kind_is_not_called_a_damaged_one(made, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a split\n")
    message = refused(lambda: api.test_set(notes, params=made["params"]),
                      "is not a split", "pass split=")
    assert "delete" not in message
    notes.write_text("{}")
    refused(lambda: api.export_model(made["checkpoint"], notes, tmp_path / "e.json"),
            "is not a metrics file", "pass metrics=")
    assert files(tmp_path) == {"notes.txt"}


@pytest.mark.parametrize("call", ["test_set", "load_model", "evaluate", "load_exported"])
def test_a_missing_file_or_a_folder_is_one_line(made, tmp_path, call):
    missing = tmp_path / "missing.file"
    refused(_call(call, missing, made, tmp_path / "out.json"), str(missing), "not found",
            "pass", error=api.InputNotFound)  # a FileNotFoundError and a ValueError
    assert issubclass(api.InputNotFound, FileNotFoundError)
    assert issubclass(api.InputNotFound, ValueError)
    refused(_call(call, tmp_path, made, tmp_path / "out.json"), "is a folder, not a file")
    assert files(tmp_path) == set()


def test_a_refused_evaluation_leaves_no_split_beside_the_checkpoint(made, tmp_path):
    """The split of the checkpoint's seed is made beside it: never when an argument is refused,
    and removed again when the evaluation itself refuses (a core file of another seed)."""
    checkpoint = tmp_path / "best.pt"
    shutil.copy(made["checkpoint"], checkpoint)
    params = made["params"]
    refused(lambda: api.evaluate_checkpoint(checkpoint, params=params, part="everything"),
            "unknown part 'everything'", "core, all, extra")
    refused(lambda: api.evaluate_checkpoint(checkpoint, params=params, core=made["metrics"]),
            "core= is read by part='extra' only", "drop it")
    refused(lambda: api.evaluate_checkpoint(checkpoint, params=params, part="extra"),
            "core=", "not found", "part='core'", error=api.InputNotFound)
    refused(lambda: api.evaluate_checkpoint(checkpoint, params=params, out=made["split"]),
            "holds a wscat split", "choose another out=")
    other = json.loads(made["metrics"].read_text())
    (tmp_path / "metrics.json").write_text(json.dumps({**other, "seed": 2}))
    refused(lambda: api.evaluate_checkpoint(checkpoint, params=params, part="extra",
                                            device="cpu"), "seed 2")
    assert files(tmp_path) == {"best.pt", "metrics.json"}


# --- 5: predict ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_and_images(made) -> tuple[torch.nn.Module, torch.Tensor]:
    net, _ = api.load_model(made["checkpoint"])
    return net, api.test_set(made["split"], params=made["params"]).images[:64]


def test_predict_takes_a_numpy_array_as_the_tensor_it_holds(model_and_images, made):
    net, images = model_and_images
    expected = api.predict(net, images)
    assert torch.equal(api.predict(net, images.numpy()), expected)
    assert torch.equal(api.predict(net, images.numpy().astype(np.float64)), expected)
    assert torch.equal(api.predict(api.load_exported(made["entry"]), images.numpy()), expected)
    assert api.predict(net, images[:0]).shape == (0,)


@pytest.mark.parametrize("change, words", [
    (lambda x: list(x), ["torch.Tensor or a numpy array", "torch.stack"]),
    (lambda x: x.permute(0, 2, 3, 1), ["channel-last", "permute(0, 3, 1, 2)"]),
    (lambda x: x.numpy().transpose(0, 2, 3, 1), ["channel-last", ".transpose(0, 3, 1, 2)"]),
    (lambda x: x.expand(-1, 3, -1, -1), ["3 channels where the model takes 1"]),
    (lambda x: x * 255, ["outside [0, 1]", "divide by 255", "uint8"]),
    (lambda x: x - 0.5, ["outside [0, 1]"]),
    (lambda x: x * float("nan"), ["NaN"]),
    (lambda x: x[0], ["pass a batch", "images[None]"]),
    (lambda x: (x * 255).long(), ["torch.int64", "uint8"]),
])
def test_predict_refuses_images_it_would_misread(model_and_images, change, words):
    net, images = model_and_images
    refused(lambda: api.predict(net, change(images)), *words)


def test_predict_refuses_what_is_not_a_model(model_and_images, made):
    _, images = model_and_images
    refused(lambda: api.predict(api.load_model(made["checkpoint"]), images),
            "(model, metadata) pair", "net, meta = api.load_model")
    refused(lambda: api.predict(str(made["checkpoint"]), images), "torch nn.Module")


def test_predict_refuses_a_model_in_train_mode_and_leaves_it_as_it_was(model_and_images, made):
    """Train mode would predict from batch statistics and overwrite the running ones."""
    net, _ = api.load_model(made["checkpoint"])
    _, images = model_and_images
    before = {k: v.clone() for k, v in net.state_dict().items()}
    expected = api.predict(net, images)
    net.train()
    refused(lambda: api.predict(net, images), "train mode", "model.eval()")
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert torch.equal(api.predict(net.eval(), images), expected)


class _Foreign(torch.nn.Module):
    """Another library's model on 8 x 8 digits: `form` picks what its forward returns."""

    def __init__(self, form: str) -> None:
        super().__init__()
        self.form, self.fc = form, torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> Any:
        logits = self.fc(x.flatten(1))
        return {"pair": (logits, torch.zeros_like(logits)), "flat": logits.flatten(),
                "dict": {"logits": logits}, "plain": logits}[self.form]


class _Argmax(torch.nn.Module):
    """A model with no parameters or buffers: the largest of the first ten pixels."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :10]


@pytest.mark.parametrize("form, words", [
    # (logits, aux): taken as (features, logits), so predict returned aux's argmax (all 0)
    ("pair", ["returns a tuple of 2", "logits alone"]),
    ("flat", ["N x K logits", "torch.float32 tensor of shape (10,)"]),
    ("dict", ["N x K logits", "a dict"]),
])
def test_predict_refuses_another_model_whose_logits_it_would_misread(model_and_images, form,
                                                                    words):
    _, images = model_and_images
    refused(lambda: api.predict(_Foreign(form).eval(), images), *words)


def test_predict_reads_another_model_s_logits_and_one_without_parameters(model_and_images):
    """A plain logits model is predicted as its argmax; one without parameters (next() of its
    parameters was a StopIteration) on the CPU; one that fails on the images is one line."""
    _, images = model_and_images
    foreign = _Foreign("plain").eval()
    expected = foreign(images.float() / 255 if images.dtype == torch.uint8 else images).argmax(1)
    assert torch.equal(api.predict(foreign, images), expected)
    unit = images.float() / 255 if images.dtype == torch.uint8 else images
    assert torch.equal(api.predict(_Argmax().eval(), images), unit.flatten(1)[:, :10].argmax(1))
    refused(lambda: api.predict(torch.nn.Linear(3, 2).eval(), images),
            "model= fails on one of the images", "size and layout it takes")


# --- 6: an exported entry that is not there -------------------------------------------------------

def test_a_missing_exported_entry_or_its_state_dict_is_one_line(made, tmp_path):
    refused(lambda: api.load_exported(tmp_path / "missing.json"),
            str(tmp_path / "missing.json"), "not found", "export_model", error=FileNotFoundError)
    entry = tmp_path / made["entry"].name
    shutil.copy(made["entry"], entry)  # without its NAME.pt
    refused(lambda: api.load_exported(entry), str(entry.with_suffix(".pt")),
            "keep NAME.pt beside NAME.json", error=api.InputNotFound)


@pytest.mark.parametrize("edit, words", [
    # each was a traceback: AttributeError, KeyError, KeyError, a 17-line load_state_dict error
    (lambda e: e.update(wscat="x"), ["is not a wscat-robustbench-entry-v1 entry", "NAME.json an export"]),
    (lambda e: e.pop("state_dict_sha256"), ["lacks state_dict_sha256", "export the model again"]),
    (lambda e: e["wscat"].pop("model_spec"), ["lacks wscat.model_spec", "or edited"]),
    (lambda e: e["wscat"]["model_spec"].update(width=e["wscat"]["model_spec"]["width"] + 8),
     ["its wscat block does not build the network", "export the model again"]),
])
def test_a_damaged_or_edited_exported_entry_is_one_line(made, tmp_path, edit, words):
    entry = tmp_path / made["entry"].name
    shutil.copy(made["weights"], entry.with_suffix(".pt"))
    data = json.loads(made["entry"].read_text())
    edit(data)
    entry.write_text(json.dumps(data))
    refused(lambda: api.load_exported(entry), str(entry), *words)


def test_a_state_dict_of_another_export_says_to_keep_the_pair_together(made, tmp_path):
    entry = tmp_path / made["entry"].name
    shutil.copy(made["entry"], entry)
    weights = torch.load(made["weights"], weights_only=True)
    torch.save({k: v + 1 if v.is_floating_point() else v for k, v in weights.items()},
               entry.with_suffix(".pt"))
    refused(lambda: api.load_exported(entry), "does not match the sha256",
            "keep NAME.json and NAME.pt of one export together")


def test_export_to_its_own_input_is_a_value_error_naming_the_arguments(made, tmp_path, untouched):
    """An input as out= was an OSError naming --out and --metrics, flags the API lacks."""
    line = refused(lambda: api.export_model(made["checkpoint"], made["metrics"], made["metrics"]),
                   "out=", "metrics=")
    assert "--" not in line, line


def test_a_split_of_a_dataset_the_params_lack_says_which_params(made, tmp_path):
    """test_set named no dataset, but was told "unknown dataset"."""
    split = np.load(made["split"])
    other = tmp_path / "other-split.npz"
    np.savez(other, **{**{k: split[k] for k in split.files}, "dataset": np.array("elsewhere")})
    refused(lambda: api.test_set(other, params=made["params"]),
            "is a split of dataset 'elsewhere', which params= does not configure",
            "pass params= the ones the split was made with")


# --- 7: an output of another run is never written over ------------------------------------------

def test_metrics_of_another_run_or_part_are_refused_and_left_as_they_were(made, tmp_path):
    """evaluate_checkpoint(out=) rewrites the metrics of its own run only, as `wscat evaluate`."""
    own = json.loads(made["metrics"].read_text())
    for change, words in [({"method": "trades"}, "holds the metrics of trades seed 1 on digits "
                           "(cnn), not of standard seed 1 on digits (cnn)"),
                          ({"seed": 2}, "of standard seed 2 on digits (cnn), not of standard "
                           "seed 1"),
                          ({"part": "extra"}, "part extra, not of standard seed 1 on digits "
                           "(cnn), part core")]:
        other = tmp_path / "other.json"
        other.write_text(json.dumps({**own, **change}))
        before = other.read_bytes()
        refused(lambda: api.evaluate_checkpoint(made["checkpoint"], params=made["params"],
                                                out=other, device="cpu"),
                f"out={other} ", words, "pass another out=, or delete that file")
        assert other.read_bytes() == before
    assert files(tmp_path) == {"other.json"}


def test_pseudo_labels_of_another_model_are_refused_before_any_training(tmp_path, tiny):
    """train_method("rst") writes its labeler's pseudo-labels to out_dir/pseudo-standard-seed1.npz:
    one another model's labeler made stays as it was, and nothing is trained."""
    pseudo = tmp_path / "runs" / "pseudo-standard-seed1.npz"
    pseudo.parent.mkdir()
    np.savez(pseudo, indices=np.arange(3), pseudo_labels=np.zeros(3, dtype=np.int64),
             labeler=np.array("standard"), dataset=np.array("digits"), seed=np.array(1),
             model=np.array("wrn-16-4"))
    before = pseudo.read_bytes()
    refused(lambda: api.train_method("rst", out_dir=tmp_path / "runs", params=tiny,
                                     device="cpu"),
            f"{pseudo} holds the pseudo-labels of standard seed 1 on digits (wrn-16-4), not of "
            "standard seed 1 on digits (cnn)", "pass another out_dir=")
    assert pseudo.read_bytes() == before and files(tmp_path / "runs") == {pseudo.name}


def test_last_pt_is_evaluated_only_where_the_params_evaluate_last(made, tmp_path):
    """The metrics record which checkpoint they measured from the params (evaluation.checkpoint):
    a run's last.pt under `checkpoint: best` is refused, not recorded as best."""
    last = made["runs"] / "standard" / "last.pt"
    refused(lambda: api.evaluate_checkpoint(last, params=made["params"], out=tmp_path / "m.json",
                                            device="cpu"),
            f"{last} is a run's last.pt, but these params evaluate its best.pt "
            "(evaluation.checkpoint: best); pass its best.pt, or set evaluation.checkpoint: last")
    assert files(tmp_path) == set()


@pytest.mark.parametrize("threads, words", [
    (True, ["threads=True is not an int"]),
    ("2", ["threads='2' is not an int"]),
    (1.0, ["threads=1.0 is not an int"]),
    (0, ["threads=0 is outside 1..1024"]),
    (5000, ["threads=5000 is outside 1..1024"]),
])
def test_threads_must_be_an_int_in_range_and_nothing_is_written(tmp_path, tiny, made, threads,
                                                                 words):
    refused(lambda: api.train_method("trades", out_dir=tmp_path / "runs", params=tiny,
                                     threads=threads), *words)
    assert not (tmp_path / "runs").exists()
    refused(lambda: api.evaluate_checkpoint(made["checkpoint"], params=made["params"],
                                            out=tmp_path / "m.json", threads=threads), *words)
    assert not (tmp_path / "m.json").exists()


def test_threads_hold_for_the_call_only_and_are_recorded(tmp_path, made) -> None:
    """threads=2 computes the call on two CPU threads (the checkpoint and the metrics record it)
    and gives torch its count back after; the workflow's numbers come from threads=1."""
    before = torch.get_num_threads()
    run = api.train_method("standard", out_dir=tmp_path / "runs", params=made["params"],
                           device="cpu", threads=before + 1)
    assert torch.get_num_threads() == before
    meta = api.load_model(run.checkpoint)[1]
    assert meta["cpu_threads"] == {"from epoch 1": before + 1}
    result = api.evaluate_checkpoint(run.checkpoint, params=made["params"], device="cpu",
                                     threads=before + 1)
    assert torch.get_num_threads() == before
    assert result.manifest["cpu_threads"] == {"training": {"from epoch 1": before + 1},
                                              "evaluation": before + 1}
