"""The device: every step's log names it, and a paper-size model (10M parameters or more) trains on
a CPU only when the CPU is asked for by name."""
from __future__ import annotations

import pytest
import torch
import yaml

from tests.helpers.tiny import ROOT, tiny_params
from wscat.config import RunConfig
from wscat.data import load_dataset
from wscat.device import PAPER_SIZE_PARAMETERS, check_training_device, device_line, named
from wscat.steps import split as split_step, train as train_step

PAPER_MODELS = {"wrn-28-10", "wrn-34-10", "resnet-50", "resnet-152", "resnet-50-release",
                "resnet-152-release"}


def _parameters(params: dict, model: str) -> int:
    run = RunConfig.from_params(params, dataset="digits", model=model, method="standard", seed=1)
    return train_step.model_parameters(run, load_dataset("digits", params["datasets"]["digits"]))


def test_paper_size_is_the_papers_models():
    """By parameter count: the paper's models are over the line, the CPU-sized ones under it."""
    params = tiny_params()
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())["models"]
    assert set(params["models"]) == set(shipped)
    sizes = {model: _parameters(params, model) for model in params["models"]}
    assert {m for m, n in sizes.items() if n >= PAPER_SIZE_PARAMETERS} == PAPER_MODELS
    assert sizes["wrn-28-10"] > 36_000_000 and sizes["wrn-16-4"] < 3_000_000


@pytest.mark.parametrize(("device", "cpu_named", "refused"), [
    ("cpu", False, True), ("cpu", True, False), ("cuda", False, False), ("cuda:1", True, False)])
def test_a_paper_size_model_on_a_cpu_needs_the_cpu_by_name(device, cpu_named, refused):
    check = lambda n: check_training_device(torch.device(device), model="wrn-28-10",  # noqa: E731
                                            parameters=n, cpu_named=cpu_named)
    check(PAPER_SIZE_PARAMETERS - 1)  # a smaller model: always
    if refused:
        with pytest.raises(ValueError, match="paper-size") as error:
            check(36_479_194)
        assert "--device cpu" in str(error.value) and "\n" not in str(error.value)
    else:
        check(36_479_194)


def test_named_and_the_device_line():
    assert not named("auto") and not named(None)
    assert named("cpu") and named("cuda:0") and named(torch.device("cpu"))
    line = device_line(torch.device("cpu"), automatic=True)
    assert line.startswith("device: cpu, ") and "thread" in line
    assert line.endswith("(--device auto: no CUDA device here)")
    assert "auto" not in device_line(torch.device("cpu"))


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("device")
    params = tiny_params(epochs=1)
    split_step.run(params, "digits", 1, tmp / "split.npz")
    return params, tmp / "split.npz"


def _train(params, split_path, out_dir, device_named: bool) -> dict:
    return train_step.run(params, dataset="digits", model="wrn-28-10", method="standard", seed=1,
                          split_path=split_path, pseudo_path=None, out_dir=out_dir,
                          device=torch.device("cpu"), device_named=device_named)


def test_the_train_step_refuses_before_anything_is_written(split, tmp_path, monkeypatch):
    params, split_path = split
    started = []
    monkeypatch.setattr(train_step, "train", lambda *args, **kwargs: started.append(1))
    with pytest.raises(ValueError, match="wrn-28-10' has 36.5M parameters"):
        _train(params, split_path, tmp_path / "run", device_named=False)
    assert not started and not (tmp_path / "run").exists()


def test_the_cpu_by_name_goes_on_to_train(split, tmp_path, monkeypatch):
    """--device cpu: past the check, into the trainer (replaced here: a WRN-28-10 epoch on a CPU
    is minutes)."""
    params, split_path = split
    started = []

    def trainer(run, data, out_dir, *, device, meta):
        started.append((run.model, device.type))
        return {"best_epoch": 1, "best_score": 0.0}

    monkeypatch.setattr(train_step, "train", trainer)
    assert _train(params, split_path, tmp_path / "run", device_named=True)["best_epoch"] == 1
    assert started == [("wrn-28-10", "cpu")]


def test_an_indexed_cpu_is_the_cpu_and_loads_checkpoints(tmp_path):
    """--device cpu:0 (or WSCAT_DEVICE=cpu:0) names the CPU: torch.load cannot map onto an
    indexed CPU, which once made a good checkpoint read as "damaged; delete it and retrain"."""
    from wscat.checkpoint import load_checkpoint, save_checkpoint
    from wscat.device import pick_device

    device = pick_device("cpu:0")
    assert device == torch.device("cpu") and device.index is None
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"weights": torch.nn.Linear(2, 2).state_dict(), "meta": {"seed": 1}})
    assert set(load_checkpoint(path, map_location=device)) >= {"weights"}


@pytest.mark.parametrize(("variable", "value", "refused"), [
    ("CUDA_VISIBLE_DEVICES", "0", True), ("CUDA_VISIBLE_DEVICES", "GPU-3f2a", True),
    ("SLURM_JOB_GPUS", "2", True), ("SLURM_STEP_GPUS", "0,1", True),
    ("CUDA_VISIBLE_DEVICES", "", False), ("CUDA_VISIBLE_DEVICES", "-1", False),
    ("SLURM_JOB_GPUS", "NoDevFiles", False), ("SLURM_GPUS_ON_NODE", "1", True),
    ("SLURM_GPUS_ON_NODE", "0", False), ("SLURM_GPUS_ON_NODE", "", False)])
def test_auto_on_a_job_given_a_gpu_that_cuda_cannot_see_stops_in_one_line(
        monkeypatch, variable, value, refused):
    """An audit found that a SLURM GPU job with a broken CUDA would train WRN-16-4 on the CPU for
    hours under `--device auto`, its log's first line the only sign. A GPU handed to the process and no CUDA
    is refused; no GPU handed, auto is the CPU; a device by name is the caller's choice."""
    from wscat.device import FromEnvironment, GPU_COUNTS, GPU_VARIABLES, pick_device

    for other in (*GPU_VARIABLES, *GPU_COUNTS):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(variable, value)
    if not refused:
        assert pick_device("auto") == torch.device("cpu")
        return
    with pytest.raises(ValueError) as caught:
        pick_device("auto")
    assert str(caught.value).startswith(f"--device auto: {variable}={value} gives this process "
                                        "a GPU, but torch finds no CUDA device (")
    assert str(caught.value).endswith("or use --device cpu (WSCAT_DEVICE=cpu for the workflow's "
                                      "jobs) to run on the CPU")
    with pytest.raises(ValueError, match=r"^device='auto': .* or pass device='cpu' to run"):
        pick_device("auto", flag="device=")
    with pytest.raises(ValueError, match=r"^WSCAT_DEVICE=auto: .* set WSCAT_DEVICE=cpu"):
        pick_device(FromEnvironment("auto"))
    assert pick_device("cpu") == torch.device("cpu")
