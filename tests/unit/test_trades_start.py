"""benchmarks/trades_start.py: TRADES' attack with its start clipped (wscat's) or not (their
code's), from the same noise: the clipped copy is wscat's trades_attack bit for bit, the two part
only where the start's noise left [0, 1], and the page names both and the pixels at 0 or 1."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import trades_start  # noqa: E402 - a benchmark script

from wscat.models.cnn import SmallCNN  # noqa: E402


def test_the_starts_differ_only_where_the_noise_left_the_unit_interval() -> None:
    torch.manual_seed(0)
    model = SmallCNN(1, 10, (0.5,), (0.3,), width=4)
    x = torch.rand(6, 1, 8, 8)
    x[:, :, :4] = 0.0  # saturated rows: the clip drops the negative half of their noise
    kwargs = {"eps": 0.1, "step_size": 0.05, "steps": 0, "seed": 3}
    clipped = trades_start.published_attack(model, x, clip_start=True, **kwargs)
    published = trades_start.published_attack(model, x, clip_start=False, **kwargs)
    noise = 0.001 * torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
    assert torch.equal(published, x + noise)  # their start, unclipped
    assert torch.equal(clipped, (x + noise).clamp(0, 1))
    assert bool((published < 0).any()) and not bool((clipped < 0).any())


def test_the_page_compares_both_on_digits(tmp_path: Path) -> None:
    out = tmp_path / "page.md"
    assert trades_start.main(["--images", "32", "--models", "1", "--seeds", "2",
                              "--out", str(out)]) == 0
    text = out.read_text()
    assert "digits (first 32 images)" in text and "bit for bit" in text
    assert "% of the pixels are 0 or 1" in text
    row = [line for line in text.splitlines() if line.startswith("| 0 |")]
    assert len(row) == 1 and len(row[0].split("|")) == 7
