"""The precision a metrics file records: `precision: fp32` ran with TF32 matmuls and convolutions
on a CUDA device (`configure_backend` turns them on, for speed); the manifest says so beside it."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.helpers.tiny import tiny_params
from wscat.config import RunConfig, validate_params
from wscat.evaluation import SuiteResult
from wscat.steps.evaluate import _manifest


def manifest(device: torch.device) -> dict:
    run = RunConfig.from_params(validate_params(tiny_params()), dataset="digits", model="cnn",
                                method="standard", seed=1)
    suite = SuiteResult(accuracy={}, attacks={}, checks={}, autoattack_warnings={}, per_image={})
    return _manifest(suite, run, n_examples=40, test_set_size=360, official_test=False,
                     checkpoint=Path("best.pt"), epoch=1, device=device)


def test_a_cpu_evaluation_records_no_tf32() -> None:
    """TF32 is a CUDA mode: on a CPU the manifest records none (null), beside fp32."""
    recorded = manifest(torch.device("cpu"))
    assert recorded["precision"] == "fp32" and recorded["tf32"] is None
    assert list(recorded).index("tf32") == list(recorded).index("precision") + 1


@pytest.fixture
def tf32_restored() -> Iterator[None]:
    """torch's global TF32 flags as they were before the test (monkeypatch cannot undo them)."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@pytest.mark.parametrize("matmul, cudnn", [(True, True), (False, True), (True, False)])
def test_a_cuda_evaluation_records_the_tf32_flags_in_force(tf32_restored, matmul, cudnn) -> None:
    """The flags read back from torch.backends when the manifest is written (after
    configure_backend), not what the code meant to set."""
    from wscat.training.speed import tf32_flags

    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
    assert tf32_flags(torch.device("cuda")) == {"matmul": matmul, "cudnn": cudnn}
    assert manifest(torch.device("cuda", 0))["tf32"] == {"matmul": matmul, "cudnn": cudnn}
    assert tf32_flags(torch.device("cpu")) is None
