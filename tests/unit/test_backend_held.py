"""torch's process-wide numeric switches (TF32, cuDNN autotuning and determinism, deterministic
kernels) in the Python API: `configure_backend` sets them for a Snakemake job's whole process; an
API call sets what its step needs and hands the caller's switches back (speed.backend_held), so
pseudo-labels made after a labeler trained in the same session, and `evaluate_model`'s attacks,
compute as the workflow's fresh processes do (an audit found both in whatever mode the previous
call had left, on a GPU: TF32 and deterministic kernels on or off by the call's history)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.helpers.tiny import tiny_params
from wscat import api
from wscat.training.speed import backend_held, configure_backend

pytestmark = pytest.mark.filterwarnings("ignore:on digits, PGD-5 and CW-5 move:UserWarning")


def _switches() -> tuple:
    cudnn = torch.backends.cudnn
    return (cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32,
            torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled())


@pytest.fixture
def callers_switches(monkeypatch):
    """A caller's switches, none of them what configure_backend sets; the test process's own
    switches back after the test."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # configure_backend's setdefault
    before = _switches()
    cudnn = torch.backends.cudnn
    cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = True, False, False
    torch.set_float32_matmul_precision("highest")
    torch._C._set_deterministic_algorithms(False)
    yield _switches()
    cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = before[:3]
    torch.set_float32_matmul_precision(before[3])
    torch._C._set_deterministic_algorithms(before[4], warn_only=before[5])


def test_the_block_hands_back_every_switch_a_cuda_configuration_set(callers_switches) -> None:
    with backend_held():
        configure_backend(torch.device("cuda"), deterministic=True)  # flags only: no CUDA call
        inside = _switches()
    assert inside == (False, True, True, "high", True, True)
    assert _switches() == callers_switches
    with pytest.raises(RuntimeError, match="raised inside"), backend_held():
        configure_backend(torch.device("cuda"), deterministic=False)
        raise RuntimeError("raised inside")
    assert _switches() == callers_switches


class Recording(nn.Module):
    """A model that records, at each forward, whether deterministic kernels were asked for."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net, self.seen = net, set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add(torch.are_deterministic_algorithms_enabled())
        return self.net(x)[1]


def test_evaluate_model_attacks_as_wscat_evaluate_and_hands_the_switches_back(
        callers_switches) -> None:
    params = tiny_params(epochs=1)
    assert params["training"]["digits"]["deterministic"] is True  # what `wscat evaluate` sets
    model = Recording(api.build_model("cnn", params=params)).eval()
    digits = api.load_dataset("digits", params=params)
    api.evaluate_model(model, digits.images[:60], digits.labels[:60], dataset="digits",
                       params=params, seed=1)
    assert model.seen == {True}
    assert _switches() == callers_switches


def test_pseudo_labels_after_a_labeler_trained_in_the_session_see_the_caller_s_switches(
        tmp_path, monkeypatch, callers_switches) -> None:
    """`wscat pseudo-label` runs in a fresh process (torch's defaults); through the API it ran
    right after the labeler's training had set the training's switches, and kept them."""
    seen = []
    labels = api.pseudo.run

    def recorded(*args, **kwargs):
        seen.append(_switches())
        return labels(*args, **kwargs)

    monkeypatch.setattr(api.pseudo, "run", recorded)
    api.train_method("rst", out_dir=tmp_path / "runs", params=tiny_params(epochs=1),
                     device="cpu", threads=1)
    assert seen == [callers_switches]
    assert _switches() == callers_switches
