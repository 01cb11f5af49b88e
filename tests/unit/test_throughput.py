"""benchmarks/throughput.py's warm-up: forward passes counted on an eager step, and no hook left
behind for the compiled steps it times (removing one would recompile inside the timing)."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import throughput  # noqa: E402


def test_the_warm_up_counts_forwards_eagerly_and_leaves_nothing_to_recompile() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = torch.nn.Linear(4, 2)
    compiled = torch.compile(model)
    x = torch.rand(3, 4)
    steps: list[int] = []

    def step() -> None:
        steps.append(1)
        compiled(x).sum().backward()
        compiled(x + 1).sum().backward()

    per_step, seconds = throughput._warm_up(model, step, 2, torch.device("cpu"))
    assert per_step == 2 and seconds >= 0.0 and len(steps) == 3  # one eager step, two warm-up
    assert not model._forward_hooks
    graphs = counters["stats"]["unique_graphs"]
    assert graphs >= 1
    step()  # a timed step: what the warm-up compiled still holds
    assert counters["stats"]["unique_graphs"] == graphs


def test_a_row_past_its_timeout_is_listed_as_failed_and_the_result_still_written(tmp_path) -> None:
    import json
    import subprocess

    tag = tmp_path / "rows"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks/throughput.py"), "--models",
                             "wrn-16-4", "--methods", "mt", "standard", "--row-timeout", "0.01",
                             "--tag", str(tag)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    written = json.loads(tag.with_suffix(".json").read_text())
    assert written["rows"] == [] and written["failed"] == [
        "wrn-16-4 mt failed: timed out after 0.01 s",
        "wrn-16-4 standard failed: timed out after 0.01 s"]


def test_each_row_compiles_cold_in_a_cache_of_its_own(monkeypatch) -> None:
    """A row after another of the same model must not load their shared graphs from inductor's
    cache: its warm-up seconds decide the compile choice (benchmarks/compile_choice.py)."""
    import os
    import subprocess

    caches: list[tuple[str, str]] = []

    def fake_run(argv, **kwargs):
        env = kwargs["env"]
        cache = env["TORCHINDUCTOR_CACHE_DIR"]
        assert os.path.isdir(cache) and not os.listdir(cache)  # there and empty while it runs
        caches.append((cache, env["TRITON_CACHE_DIR"]))
        assert argv[-3:] == ["--one", "wrn-16-4", argv[-1]]
        return subprocess.CompletedProcess(argv, 0, "{}", "")

    monkeypatch.setattr(throughput.subprocess, "run", fake_run)
    for method in ("mt", "wscat"):
        throughput.run_row("wrn-16-4", method, ["--device", "cuda"], None)
    (first, first_triton), (second, second_triton) = caches
    assert first != second and first_triton.startswith(first) and second_triton.startswith(second)
    assert not os.path.exists(first) and not os.path.exists(second)  # removed after the row
