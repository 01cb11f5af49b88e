"""The GPU speed switches change nothing they should not: each against the plain fp32 step.

Run here on the CPU (the same code paths; a GPU run repeats them in benchmarks/)."""
from __future__ import annotations

import copy

import pytest
import torch

from wscat.methods import Batch, StepContext, build_method
from wscat.models import build_model
from wscat.training.ema import make_ema
from wscat.data import to_unit
from wscat.training.speed import configure_backend, prepare_model
from wscat.training.trainer import train_step

WSCAT = {"objective": "wscat", "data": "pseudo", "labeler": "mt", "selection": "cw", "lam": 5.0,
         "beta": 0.05, "temperature": 0.07, "anchors": "both", "label_smoothing": 0.1,
         "projection_dim": 16}
TRADES = {"objective": "trades", "data": "labelled", "selection": "cw", "lam": 6.0}


def _steps(method_params: dict, *, precision: str = "fp32", channels_last: bool = False,
           compile: bool = False, steps: int = 2, attack_steps: int = 0
           ) -> tuple[dict, dict, list[torch.Tensor]]:
    """`steps` training steps from a fixed start; returns model and EMA state and the losses.

    The attack is a signed-gradient ascent: a rounding-level change flips the sign of near-zero
    gradient entries, so whole runs are compared with attack_steps=0 (the update, the EMA and
    the loss, with x' at its start) and the attack on its own in a separate test."""
    torch.manual_seed(0)
    model = build_model("wideresnet", depth=10, width=1, in_channels=3, num_classes=10,
                        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    method = build_method(method_params, feature_dim=model.feature_dim, num_classes=10,
                          image_shape=(3, 16, 16))
    optimizer = torch.optim.SGD(list(model.parameters()) + list(method.trainable_parameters()),
                                lr=0.05, momentum=0.9)
    ema = make_ema(model)
    step_model = prepare_model(model, channels_last=channels_last, compile=compile)
    data = torch.Generator().manual_seed(1)
    x = torch.rand(16, 3, 16, 16, generator=data)
    labels = torch.randint(0, 10, (16,), generator=data)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    losses = []
    for step in range(steps):
        ctx = StepContext(eps=8 / 255, step_size=2 / 255, steps=attack_steps,
                          generator=torch.Generator().manual_seed(step), ema_model=ema,
                          progress=float(step), augment=lambda t: t)
        xb = x.contiguous(memory_format=fmt)
        loss, _ = train_step(method, step_model, model, optimizer, ema, Batch(xb, xb, labels), ctx,
                             precision=precision, ema_decay=0.5)
        losses.append(loss)
    return copy.deepcopy(model.state_dict()), copy.deepcopy(ema.state_dict()), losses


def _max_gap(a: dict, b: dict) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


@pytest.mark.parametrize("method_params", [TRADES, WSCAT], ids=["trades", "wscat"])
def test_channels_last_changes_no_result(method_params: dict) -> None:
    plain, plain_ema, plain_losses = _steps(method_params)
    nhwc, nhwc_ema, nhwc_losses = _steps(method_params, channels_last=True)
    assert plain.keys() == nhwc.keys()  # same checkpoint keys
    assert _max_gap(plain, nhwc) < 1e-5 and _max_gap(plain_ema, nhwc_ema) < 1e-5
    assert torch.allclose(torch.stack(plain_losses), torch.stack(nhwc_losses), atol=1e-5)


def test_bf16_autocast_keeps_fp32_weights_and_close_losses() -> None:
    plain, plain_ema, plain_losses = _steps(WSCAT)
    half, half_ema, half_losses = _steps(WSCAT, precision="bf16")
    # Weights, optimiser and EMA stay fp32: only the forward passes run in bf16.
    assert all(v.dtype == plain[k].dtype for k, v in half.items())
    assert all(v.dtype == torch.float32 for k, v in half_ema.items() if v.is_floating_point())
    assert torch.allclose(torch.stack(half_losses), torch.stack(plain_losses), rtol=0.05)
    # The bf16 run moves the weights like the fp32 run does (relative to the update's size).
    start, _, _ = _steps(WSCAT, steps=0)
    update = _max_gap(plain, start)
    assert update > 0 and _max_gap(plain, half) < 0.25 * update


def test_bf16_leaves_fp32_runs_untouched() -> None:
    """The switch is off by default: two fp32 runs agree bit for bit (nothing leaks from autocast)."""
    first, _, first_losses = _steps(TRADES)
    _steps(TRADES, precision="bf16")
    second, _, second_losses = _steps(TRADES)
    assert _max_gap(first, second) == 0.0
    assert torch.equal(torch.stack(first_losses), torch.stack(second_losses))


@pytest.mark.slow
def test_compile_gives_the_eager_result_and_eager_checkpoint_keys() -> None:
    eager, eager_ema, eager_losses = _steps(TRADES, steps=1)
    compiled, compiled_ema, compiled_losses = _steps(TRADES, compile=True, steps=1)
    assert eager.keys() == compiled.keys()  # no "_orig_mod." prefixes in checkpoints
    assert eager_ema.keys() == compiled_ema.keys()
    assert _max_gap(eager, compiled) < 1e-4 and _max_gap(eager_ema, compiled_ema) < 1e-4
    assert torch.allclose(eager_losses[0], compiled_losses[0], atol=1e-4)


def test_the_compile_mode_reaches_torch_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(torch, "compile", lambda model, mode: seen.append(mode) or model)
    model = torch.nn.Linear(2, 2)
    assert prepare_model(model, channels_last=False, compile=False) is model and seen == []
    prepare_model(model, channels_last=False, compile=True)
    prepare_model(model, channels_last=False, compile=True, mode="reduce-overhead")
    assert seen == ["default", "reduce-overhead"]


def test_channels_last_attack_finds_the_same_adversarial_examples() -> None:
    from wscat.attacks import ce_objective, pgd

    torch.manual_seed(0)
    model = build_model("wideresnet", depth=10, width=1, in_channels=3, num_classes=10,
                        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)).eval()
    x, y = torch.rand(16, 3, 16, 16), torch.randint(0, 10, (16,))
    found = []
    for fmt in (torch.contiguous_format, torch.channels_last):
        model.to(memory_format=fmt)
        found.append(pgd(ce_objective(model, y), x.contiguous(memory_format=fmt), eps=8 / 255,
                         step_size=2 / 255, steps=5, generator=torch.Generator().manual_seed(0)))
    agree = float((found[0] - found[1]).abs().lt(1e-6).float().mean())
    assert agree > 0.99, agree  # only near-zero gradient entries may flip sign


def test_deterministic_switch_sets_and_clears_torch_determinism() -> None:
    before = torch.are_deterministic_algorithms_enabled()
    try:
        configure_backend(torch.device("cpu"), deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        configure_backend(torch.device("cpu"), deterministic=False)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before)


def test_uint8_images_become_the_same_unit_floats() -> None:
    raw = torch.arange(256, dtype=torch.uint8).view(1, 1, 16, 16).repeat(2, 3, 1, 1)
    unit = to_unit(raw)
    assert unit.dtype == torch.float32 and float(unit.max()) == 1.0 and float(unit.min()) == 0.0
    assert torch.equal(unit, raw.float() / 255.0)
    assert to_unit(raw, channels_last=True).is_contiguous(memory_format=torch.channels_last)
    floats = torch.rand(2, 3, 4, 4)
    assert to_unit(floats) is floats or torch.equal(to_unit(floats), floats)


class _StaticOutputs(torch.nn.Module):
    """The classifier as CUDA graphs (compile_mode reduce-overhead) may return it when a call
    starts a new graph generation: its no-grad outputs live in memory that the next call
    overwrites (here, buffers every call writes into; a call that needs grad returns its own
    outputs, which this emulation does not cover: `begin_graph_step` keeps a whole training step
    in one generation for those)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.buffers_ = model, None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = self.model(x)
        if self.buffers_ is None:
            self.buffers_ = tuple(torch.empty_like(t) for t in outputs)
        for buffer, t in zip(self.buffers_, outputs):
            buffer.copy_(t.detach())
        return outputs if torch.is_grad_enabled() and x.requires_grad else self.buffers_


def test_the_trades_attack_target_survives_the_forwards_after_it() -> None:
    """TRADES (and RST) attack towards C(x) from a no-grad forward, then run the classifier again
    at every attack step: under CUDA graphs C(x) must be a copy, or the target drifts."""
    from wscat.methods.trades import trades_attack

    torch.manual_seed(0)
    model = build_model("wideresnet", depth=10, width=1, in_channels=3, num_classes=10,
                        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    x = torch.rand(8, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    found = []
    for classifier in (model, _StaticOutputs(model)):
        ctx = StepContext(eps=8 / 255, step_size=2 / 255, steps=3,
                          generator=torch.Generator().manual_seed(0), ema_model=None,
                          progress=0.0, augment=lambda t: t)
        found.append(trades_attack(classifier, x, ctx))
    assert torch.equal(found[0], found[1])


def test_a_cuda_graph_step_is_marked_once_and_an_eager_one_never(monkeypatch) -> None:
    from wscat.training.speed import begin_graph_step, uses_cuda_graphs

    begin_graph_step()  # torch's own marker runs on a CPU too (it counts, records nothing)
    marks: list[int] = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    torch.manual_seed(0)
    model = build_model("wideresnet", depth=10, width=1, in_channels=3, num_classes=10,
                        mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    method = build_method(TRADES, feature_dim=model.feature_dim, num_classes=10,
                          image_shape=(3, 16, 16))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    ema = make_ema(model)
    x, labels = torch.rand(4, 3, 16, 16), torch.randint(0, 10, (4,))
    ctx = StepContext(eps=8 / 255, step_size=2 / 255, steps=1, generator=torch.Generator(),
                      ema_model=ema, progress=0.0, augment=lambda t: t)
    for graphs in (True, True, False):
        train_step(method, model, model, optimizer, ema, Batch(x, x, labels), ctx,
                   precision="fp32", ema_decay=0.5, cuda_graphs=graphs)
    assert len(marks) == 2
    assert uses_cuda_graphs(True, "reduce-overhead") and not uses_cuda_graphs(True, "default")
    assert not uses_cuda_graphs(False, "reduce-overhead")
