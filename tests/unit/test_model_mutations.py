"""Hand-worked expectations for wscat/models, wscat/inference.py and wscat/analysis.py that the
mutation run of these modules found unchecked (every expected value is computed here from the
documented facts, never by calling the function under test).

Facts used:
- WideResNet (Zagoruyko & Komodakis 2016; docs/official-code.md "Models"; wideresnet.py's
  docstring): WRN-d-k has n = (d - 4) / 6 pre-activation blocks per stage, a 16-channel 3x3 stem,
  stage widths 16k, 32k, 64k with strides 1, 2, 2 (the stride on the block's first conv),
  BN-ReLU-conv3x3-BN-ReLU-conv3x3, a 1x1 projection of the activated input only where the shape
  changes (the raw input otherwise), then BN, ReLU, global average pooling and a linear
  classifier; ReLU (not LeakyReLU), no dropout.
- ResNet (He et al. 2016; resnet.py's docstring): 3x3 stride-1 stem, stages of 64, 128, 256, 512
  planes with strides 1, 2, 2, 2; basic blocks conv-BN-ReLU-conv-BN + shortcut, then ReLU;
  bottleneck conv1x1-BN-ReLU-conv3x3(stride)-BN-ReLU-conv1x1(4x)-BN + shortcut, then ReLU;
  blocks per stage 18: 2-2-2-2, 34: 3-4-6-3, 101: 3-4-23-3, 152: 3-8-36-3; bottlenecks only from
  depth 50.
- The standard initialisation (init_weights' docstring): Kaiming normal, fan_out, ReLU gain, for
  convs (std sqrt(2 / (c_out k^2))); BN weight 1, bias 0; linear bias 0.
- BatchNorm momentum: docs/official-code.md says wscat keeps PyTorch's 0.1 (eps PyTorch's 1e-5).
- The cnn (cnn.py's docstring): three conv3x3(no bias)-BN-ReLU blocks of width w, 2w, 4w, the
  second with stride 2, global average pooling, linear.
- Normalisation lives inside the model, (x - mean) / std per channel (official-code-notes
  "Data"); it is metadata, not a weight (load_model builds the model from the checkpoint's
  mean/std and loads its weights strictly).
- Projection head: Linear(feature_dim, 256) (official-code-notes "l_con").
- inference.predict: argmax of the logits of un-augmented images scaled to [0,1], in batches of
  512, without autograd; load_model returns the EMA weights in eval mode; epochs_completed and
  which_of as their docstrings.
- analysis: cos(f(x), f(x')) on the embeddings f, embeddings in batches, HM of natural and PGD
  accuracy, the training attack's threat model, RLFAT's AE = RBS(TRADES' AE), t-SNE perplexity
  min(30, (n - 1) / 3).
- PUAT's GAN (gan.py's docstring): nearest up-sampling, 2x2 mean down-sampling, images in [0,1],
  the attacker's shift bounded by latent_eps per coordinate, D reads 2x - 1.
"""
from __future__ import annotations

import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from wscat.models import build_model, model_options
from wscat.models.cnn import SmallCNN
from wscat.models.heads import ProjectionHead
from wscat.models.normalize import Normalize
from wscat.models.pooling import GlobalAvgPool
from wscat.models.resnet import BasicBlock, Bottleneck
from wscat.models.wideresnet import PreActBlock

CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


def _randomise_batchnorm(model: nn.Module, seed: int = 1) -> nn.Module:
    """Give every BN affine weights and running statistics far from the identity, eval mode."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_(torch.rand(c, generator=g) - 0.5)
                m.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
    return model.eval()


def _bn(x: torch.Tensor, m: nn.BatchNorm2d) -> torch.Tensor:
    """Eval-mode batch norm written out: (x - mu) / sqrt(var + eps) * gamma + beta."""
    shape = (1, -1, 1, 1)
    return ((x - m.running_mean.view(shape)) / torch.sqrt(m.running_var.view(shape) + 1e-5)
            * m.weight.view(shape) + m.bias.view(shape))


def _conv(x: torch.Tensor, conv: nn.Conv2d, stride: int) -> torch.Tensor:
    """A bias-free conv with 'same' padding for 3x3, none for 1x1, at the documented stride."""
    k = conv.weight.shape[-1]
    return F.conv2d(x, conv.weight, None, stride=stride, padding=k // 2)


def _normalised(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    return (x - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)


# --------------------------------------------------------------------------- WideResNet


def _preact_reference(block: PreActBlock, x: torch.Tensor, stride: int, change: bool
                      ) -> torch.Tensor:
    a = torch.relu(_bn(x, block.bn1))
    h = _conv(torch.relu(_bn(_conv(a, block.conv1, stride), block.bn2)), block.conv2, 1)
    return h + (_conv(a, block.shortcut, stride) if change else x)


@torch.no_grad()
def test_wideresnet_forward_is_the_documented_preactivation_network() -> None:
    """WRN-16-1 (two blocks a stage, so identity shortcuts in every stage and the stage-1 first
    block 16 -> 16 without projection) against a forward written from the architecture."""
    torch.manual_seed(0)
    model = _randomise_batchnorm(build_model("wideresnet", in_channels=3, num_classes=5,
                                             mean=CIFAR10_MEAN, std=CIFAR10_STD, depth=16,
                                             width=1))
    x = torch.rand(2, 3, 12, 12)
    layers = list(model.features)
    h = _conv(_normalised(x, CIFAR10_MEAN, CIFAR10_STD), layers[0], 1)
    widths, blocks = (16, 16, 32, 64), layers[1:7]
    for stage in range(3):
        for i in range(2):
            stride = (1, 2, 2)[stage] if i == 0 else 1
            change = (i == 0 and widths[stage] != widths[stage + 1]) or stride != 1
            h = _preact_reference(blocks[2 * stage + i], h, stride, change)
    assert h.shape == (2, 64, 3, 3)
    z = torch.relu(_bn(h, layers[7])).mean((2, 3))
    features, logits = model(x)
    torch.testing.assert_close(features, z, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(logits, z @ model.classifier.weight.T + model.classifier.bias,
                               rtol=1e-4, atol=1e-5)
    assert (features >= 0).all()  # ReLU before the pooling


def test_wideresnet_spatial_sizes_and_shortcuts() -> None:
    """Strides 1, 2, 2 on the stage's first block; projections exactly where the shape changes."""
    model = build_model("wideresnet", in_channels=3, num_classes=10, mean=CIFAR10_MEAN,
                        std=CIFAR10_STD, depth=16, width=2).eval()
    blocks = [m for m in model.modules() if isinstance(m, PreActBlock)]
    assert len(blocks) == 6
    sizes: list[tuple[int, ...]] = []
    hooks = [b.register_forward_hook(lambda _m, _i, out: sizes.append(tuple(out.shape[1:])))
             for b in blocks]
    with torch.no_grad():
        model(torch.rand(1, 3, 16, 16))
    for hook in hooks:
        hook.remove()
    assert sizes == [(32, 16, 16), (32, 16, 16), (64, 8, 8), (64, 8, 8), (128, 4, 4),
                     (128, 4, 4)]
    assert [b.conv1.stride for b in blocks] == [(1, 1), (1, 1), (2, 2), (1, 1), (2, 2), (1, 1)]
    assert all(b.conv2.stride == (1, 1) for b in blocks)
    assert [isinstance(b.shortcut, nn.Conv2d) for b in blocks] == [True, False] * 3


def test_wideresnet_has_relu_no_dropout_and_pytorch_batchnorm() -> None:
    model = build_model("wideresnet", in_channels=3, num_classes=10, mean=CIFAR10_MEAN,
                        std=CIFAR10_STD, depth=10, width=1)
    kinds = {type(m) for m in model.modules()}
    assert nn.ReLU in kinds and not kinds & {nn.LeakyReLU, nn.Dropout, nn.Dropout2d}
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(norms) == 2 * 3 + 1
    assert all(m.momentum == 0.1 and m.eps == 1e-5 for m in norms)
    model.train()
    x = torch.rand(4, 3, 8, 8)
    with torch.no_grad():  # train mode: batch statistics, but nothing random (no dropout)
        assert torch.equal(model(x)[1], model(x)[1])


def _kaiming_fan_out_std(conv: nn.Conv2d) -> float:
    c_out, _, k, _ = conv.weight.shape
    return math.sqrt(2.0 / (c_out * k * k))


@pytest.mark.parametrize(("architecture", "options"), [
    ("wideresnet", {"depth": 10, "width": 4}), ("resnet", {"depth": 18})])
def test_initialisation_is_kaiming_fan_out_relu(architecture: str, options: dict) -> None:
    torch.manual_seed(0)
    model = build_model(architecture, in_channels=3, num_classes=10, mean=CIFAR10_MEAN,
                        std=CIFAR10_STD, **options)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    # the largest 3x3 conv with c_in != c_out (fan_in and fan_out differ by 2x)
    conv = max((c for c in convs if c.in_channels != c.out_channels and c.kernel_size == (3, 3)),
               key=lambda c: c.weight.numel())
    std = conv.weight.std().item()
    assert abs(std / _kaiming_fan_out_std(conv) - 1) < 0.03
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            assert torch.equal(m.weight, torch.ones_like(m.weight))
            assert torch.equal(m.bias, torch.zeros_like(m.bias))
    assert torch.equal(model.classifier.bias, torch.zeros(10))


def test_wideresnet_width_must_be_a_true_integer() -> None:
    with pytest.raises(ValueError, match="width must be a positive integer; got True"):
        build_model("wideresnet", in_channels=3, num_classes=10, mean=CIFAR10_MEAN,
                    std=CIFAR10_STD, depth=10, width=True)


# --------------------------------------------------------------------------- ResNet


@torch.no_grad()
def test_basic_block_is_conv_bn_relu_conv_bn_plus_shortcut_then_relu() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 4, 6, 6)
    projected = _randomise_batchnorm(BasicBlock(4, 8, 2))
    proj = projected.shortcut
    h = _bn(_conv(torch.relu(_bn(_conv(x, projected.conv1, 2), projected.bn1)),
                  projected.conv2, 1), projected.bn2)
    expected = torch.relu(h + _bn(_conv(x, proj[0], 2), proj[1]))
    torch.testing.assert_close(projected(x), expected, rtol=1e-4, atol=1e-5)
    same = _randomise_batchnorm(BasicBlock(4, 4, 1))
    h = _bn(_conv(torch.relu(_bn(_conv(x, same.conv1, 1), same.bn1)), same.conv2, 1), same.bn2)
    torch.testing.assert_close(same(x.clone()), torch.relu(h + x), rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_bottleneck_has_its_stride_on_the_3x3_conv() -> None:
    torch.manual_seed(0)
    block = _randomise_batchnorm(Bottleneck(8, 4, 2))
    x = torch.randn(2, 8, 6, 6)
    h = torch.relu(_bn(_conv(x, block.conv1, 1), block.bn1))
    h = torch.relu(_bn(_conv(h, block.conv2, 2), block.bn2))
    h = _bn(_conv(h, block.conv3, 1), block.bn3)
    expected = torch.relu(h + _bn(_conv(x, block.shortcut[0], 2), block.shortcut[1]))
    assert expected.shape == (2, 16, 3, 3)
    torch.testing.assert_close(block(x), expected, rtol=1e-4, atol=1e-5)


def test_resnet_stem_and_stage_strides() -> None:
    """Stride-1 stem followed by ReLU (no max-pooling); stages at strides 1, 2, 2, 2."""
    torch.manual_seed(0)
    model = _randomise_batchnorm(build_model("resnet", in_channels=3, num_classes=10,
                                             mean=CIFAR10_MEAN, std=CIFAR10_STD, depth=18))
    blocks = [m for m in model.modules() if isinstance(m, BasicBlock)]
    seen: list[tuple[tuple[int, ...], bool]] = []
    hooks = [b.register_forward_hook(
        lambda _m, inputs, out: seen.append((tuple(out.shape[1:]), bool((inputs[0] >= 0).all()))))
        for b in blocks]
    with torch.no_grad():
        model(torch.rand(1, 3, 16, 16))
    for hook in hooks:
        hook.remove()
    assert [s for s, _ in seen] == [(64, 16, 16)] * 2 + [(128, 8, 8)] * 2 + [(256, 4, 4)] * 2 \
        + [(512, 2, 2)] * 2
    assert all(nonnegative for _, nonnegative in seen)  # each block reads a ReLU's output


@pytest.mark.parametrize(("depth", "kind", "count"), [
    (18, BasicBlock, 8), (34, BasicBlock, 16), (101, Bottleneck, 33), (152, Bottleneck, 50)])
def test_resnet_block_counts(depth: int, kind: type[nn.Module], count: int) -> None:
    """Blocks per stage as He et al.: 2-2-2-2, 3-4-6-3, 3-4-23-3, 3-8-36-3."""
    with torch.device("meta"):
        model = build_model("resnet", in_channels=3, num_classes=10, mean=CIFAR10_MEAN,
                            std=CIFAR10_STD, depth=depth)
    assert sum(isinstance(m, kind) for m in model.modules()) == count


def test_resnet_34_has_no_bottleneck() -> None:
    with pytest.raises(ValueError, match="ResNet-34 is built from basic blocks"), \
            torch.device("meta"):
        build_model("resnet", in_channels=3, num_classes=10, mean=CIFAR10_MEAN, std=CIFAR10_STD,
                    depth=34, block="bottleneck")


# --------------------------------------------------------------------------- cnn


def test_cnn_parameter_count_strides_and_forward() -> None:
    """Convs without bias: 9*1*w + 9*w*2w + 9*2w*4w, three BNs 2(w + 2w + 4w), linear 4w*K + K."""
    torch.manual_seed(0)
    w, k = 3, 5
    model = _randomise_batchnorm(SmallCNN(1, k, (0.3,), (0.4,), width=w))
    assert sum(p.numel() for p in model.parameters()) == \
        9 * w + 18 * w * w + 72 * w * w + 14 * w + 4 * w * k + k
    x = torch.rand(2, 1, 8, 8)
    h = (x - 0.3) / 0.4
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for conv, norm, stride in zip(convs, norms, (1, 2, 1)):
        h = torch.relu(_bn(_conv(h, conv, stride), norm))
    assert h.shape == (2, 4 * w, 4, 4)
    with torch.no_grad():
        features, logits = model(x)
    torch.testing.assert_close(features, h.mean((2, 3)), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(logits, features @ model.classifier.weight.T
                               + model.classifier.bias)


# --------------------------------------------------------------------------- small modules


def test_normalize_pooling_and_head_by_hand() -> None:
    norm = Normalize((0.5, 0.25), (2.0, 4.0))
    x = torch.tensor([[[[1.5]], [[2.25]]]])
    assert torch.equal(norm(x), torch.tensor([[[[0.5]], [[0.5]]]]))
    assert list(norm.state_dict()) == []  # metadata, not weights
    assert not any(k.startswith("normalize") for k in
                   SmallCNN(1, 2, (0.1,), (0.2,), width=1).state_dict())
    pooled = GlobalAvgPool()(torch.tensor([[[[1.0, 2.0], [3.0, 6.0]], [[-1.0, 1.0], [0.0, 4.0]]]]))
    assert torch.equal(pooled, torch.tensor([[3.0, 1.0]]))
    head = ProjectionHead(3)
    assert (head.linear.in_features, head.linear.out_features) == (3, 256)
    with torch.no_grad():
        head.linear.weight.zero_()
        head.linear.weight[0] = torch.tensor([1.0, 2.0, 3.0])
        head.linear.bias.fill_(0.5)
    out = head(torch.tensor([[1.0, 1.0, 1.0]]))
    assert out[0, 0].item() == 6.5 and out[0, 1].item() == 0.5


def test_model_options_are_the_architectures_own() -> None:
    assert model_options("wideresnet") == {"depth": 28, "width": 10}
    assert model_options("resnet") == {"depth": 18, "block": None}
    assert model_options("cnn") == {"width": 16}


# --------------------------------------------------------------------------- inference


class _Probe(nn.Module):
    """(features, logits) with logits = [sum of pixels, 2 - sum of pixels, const 1]; records the
    batch sizes it sees, whether autograd was on and the input dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(()))
        self.calls: list[tuple[int, bool, torch.dtype]] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls.append((len(x), torch.is_grad_enabled(), x.dtype))
        s = x.flatten(1).sum(1) + self.dummy
        features = -10 * torch.ones(len(x), 3)  # argmax 0 always: logits_of must take [1]
        features[:, 2] = 100
        return features, torch.stack([s, 2 - s, torch.ones_like(s)], 1)


def test_predict_batches_of_512_without_grad_on_unit_images() -> None:
    from wscat.inference import predict

    values = torch.arange(1030) % 3
    images = torch.zeros(1030, 1, 1, 2, dtype=torch.uint8)
    images[values == 1, 0, 0, 0] = 204  # sum 0.8: logits [0.8, 1.2, 1] -> 1
    images[values == 2] = 255  # sum 2.0: logits [2, 0, 1] -> 0
    images[values == 0, 0, 0, 0] = 51  # sum 0.2: logits [0.2, 1.8, 1] -> 1
    model = _Probe().eval()
    labels = predict(model, images)
    assert [(n, grad) for n, grad, _ in model.calls] == [(512, False), (512, False), (6, False)]
    assert all(dtype == torch.float32 for _, _, dtype in model.calls)
    expected = torch.where(values == 2, 0, 1)
    assert torch.equal(labels, expected)


class _NanFirst(_Probe):
    """_Probe whose logits are NaN for an all-zero image."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features, logits = super().forward(x)
        blank = x.flatten(1).sum(1) == 0
        return features, torch.where(blank[:, None], torch.full_like(logits, float("nan")), logits)


def test_predict_counts_nonfinite_logits_over_every_batch() -> None:
    """One NaN image in the first of three batches: predict refuses 1 of 1030 (every batch's
    count summed, not the last one's); refuse_nonfinite raises from a count of 1 on."""
    from wscat.inference import NonFiniteOutputs, predict, refuse_nonfinite

    images = torch.full((1030, 1, 1, 2), 100, dtype=torch.uint8)
    images[3] = 0
    with pytest.raises(NonFiniteOutputs, match="NaN or inf on 1 of 1030 images"):
        predict(_NanFirst().eval(), images)
    refuse_nonfinite(0, 10)
    with pytest.raises(NonFiniteOutputs, match="on 1 of 10 images under PGD"):
        refuse_nonfinite(torch.tensor(1), 10, "PGD")


def test_logits_of_and_nonfinite_rows_by_hand() -> None:
    from wscat.inference import logits_of, nonfinite_rows

    features, logits = torch.zeros(2, 3), torch.ones(2, 4)
    assert logits_of((features, logits)) is logits and logits_of(features) is features
    nan, inf = float("nan"), float("inf")
    rows = torch.tensor([[1.0, nan], [1.0, 2.0], [inf, -inf], [0.0, -inf]])
    assert int(nonfinite_rows(rows)) == 3


def test_epochs_and_which_by_hand() -> None:
    from wscat.inference import check_which, epochs_completed, which_of

    last = {"epoch": 4, "optimizer": {}}  # last.pt: 0-based index of its last epoch
    assert which_of(last) == "last" and epochs_completed(last) == 5
    assert which_of({"epoch": 7}) == "best" and epochs_completed({"epoch": 7}) == 7
    assert epochs_completed({"best": {"epoch": 3}}) == 3
    assert epochs_completed({}) is None
    check_which(Path("a.pt"), "best", "best")
    with pytest.raises(ValueError, match="run's last.pt, but these params evaluate its best.pt"):
        check_which(Path("a.pt"), "last", "best")


def test_load_model_takes_the_ema_weights_in_eval_mode(tmp_path: Path) -> None:
    from wscat.checkpoint import save_checkpoint
    from wscat.inference import load_model

    torch.manual_seed(0)
    ema, raw = SmallCNN(1, 3, (0.5,), (0.5,), width=2), SmallCNN(1, 3, (0.5,), (0.5,), width=2)
    meta = {"model": "cnn", "model_spec": {"architecture": "cnn", "width": 2}, "in_channels": 1,
            "num_classes": 3, "mean": [0.5], "std": [0.5]}
    path = tmp_path / "best.pt"
    save_checkpoint(path, {"meta": meta, "epoch": 2, "ema": ema.state_dict(),
                           "model": raw.state_dict()})
    net, info = load_model(path, torch.device("cpu"))
    assert not any(m.training for m in net.modules())
    assert all(torch.equal(v, ema.state_dict()[k]) for k, v in net.state_dict().items())
    assert info["epoch"] == 2 and info["which"] == "best"


def test_load_model_refuses_unfinished_and_other_models(tmp_path: Path) -> None:
    """load_model's docstring: a checkpoint of an unfinished training (a run's resume/) is
    refused, and with `model` and `spec` one of another model."""
    from wscat.checkpoint import CheckpointError, save_checkpoint
    from wscat.inference import load_model

    weights = SmallCNN(1, 3, (0.5,), (0.5,), width=2).state_dict()
    meta = {"model": "cnn", "model_spec": {"architecture": "cnn", "width": 2}, "in_channels": 1,
            "num_classes": 3, "mean": [0.5], "std": [0.5]}
    (tmp_path / "resume").mkdir()
    for path in (tmp_path / "best.pt", tmp_path / "resume" / "best.pt"):
        save_checkpoint(path, {"meta": meta, "epoch": 1, "ema": weights})
    with pytest.raises(CheckpointError, match="unfinished training"):
        load_model(tmp_path / "resume" / "best.pt", torch.device("cpu"))
    with pytest.raises(CheckpointError, match="holds model 'cnn'"):
        load_model(tmp_path / "best.pt", torch.device("cpu"), model="wrn",
                   spec={"architecture": "wideresnet", "depth": 10, "width": 1})
    load_model(tmp_path / "best.pt", torch.device("cpu"), model="cnn",
               spec={"architecture": "cnn", "width": 2})


# --------------------------------------------------------------------------- analysis


class _Line(nn.Module):
    """One pixel v: features [v, 1 - v], logits [v, 0.5] (class 0 iff v > 0.5)."""

    def __init__(self) -> None:
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v = x.flatten(1)[:, 0] + self.dummy
        half = torch.full_like(v, 0.5)
        return torch.stack([v, 1 - v], 1), torch.stack([v, half], 1)


def test_cosine_similarity_and_features_by_hand() -> None:
    from wscat.analysis import cosine_similarity, features

    model = _Line().eval()
    x = torch.tensor([1.0, 0.5]).view(2, 1, 1, 1)      # f = [1, 0], [0.5, 0.5]
    x_adv = torch.tensor([0.5, 0.0]).view(2, 1, 1, 1)  # f = [0.5, 0.5], [0, 1]
    cos = cosine_similarity(model, x, x_adv)
    np.testing.assert_allclose(cos, [1 / math.sqrt(2), 1 / math.sqrt(2)], rtol=1e-6)
    x5 = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0]).view(5, 1, 1, 1)
    got = features(model, x5, batch_size=2)
    expected = np.array([[0.0, 1.0], [0.25, 0.75], [0.5, 0.5], [0.75, 0.25], [1.0, 0.0]])
    np.testing.assert_array_equal(got, expected.astype(np.float32))


def test_features_default_batches_of_512() -> None:
    from wscat.analysis import features

    model = _Probe().eval()
    assert features(model, torch.zeros(513, 1, 1, 1)).shape == (513, 3)
    assert [(n, grad) for n, grad, _ in model.calls] == [(512, False), (1, False)]


def test_validation_accuracies_by_hand() -> None:
    """PGD (eps 0.1, 10 steps of 0.025, any random start) drives every v to max(v - 0.1, 0):
    v = 0.8 stays class 0, v = 0.58 falls to 0.48, v = 0.2 is wrong already. Natural 2/3,
    PGD 1/3, HM 2 * (200/3) * (100/3) / 100 = 400/9."""
    from wscat.analysis import validation_accuracies

    x = torch.tensor([0.8] * 10 + [0.58] * 10 + [0.2] * 10).view(30, 1, 1, 1)
    y = torch.zeros(30, dtype=torch.long)
    got = validation_accuracies(_Line().eval(), x, y, eps=0.1, step_size=0.025, steps=10,
                                batch_size=7, seed=0)
    assert got == {"Natural": 66.6667, "PGD": 33.3333, "HM": 44.4444}


def test_validation_pgd_draws_its_start_from_the_seed() -> None:
    """One PGD step of size 0 leaves the random start: at v = 0.5 (a tie, class 0) a sample stays
    correct iff its start moved up, so the PGD accuracy is the seed's draw; same seed, same
    number, and these two seeds draw differently."""
    from wscat.analysis import validation_accuracies

    x, y = torch.full((200, 1, 1, 1), 0.5), torch.zeros(200, dtype=torch.long)

    def pgd_accuracy(seed: int) -> float:
        return validation_accuracies(_Line().eval(), x, y, eps=0.1, step_size=0.0, steps=1,
                                     batch_size=64, seed=seed)["PGD"]

    first = pgd_accuracy(1)
    assert 30 < first < 70 and pgd_accuracy(1) == first
    assert pgd_accuracy(2) != first


def test_validation_draws_as_the_trainer_from_a_cpu_generator_whatever_the_device(
        monkeypatch) -> None:
    """`wscat validate` on a GPU drew its PGD start from a CUDA generator, the trainer's
    validation (the train log's val_pgd) from a CPU one: the same checkpoint, other numbers. The
    images here are on `meta`, which no generator lives on."""
    import wscat.analysis as analysis

    seen = []

    def accuracy(model, x, y, *, generator=None, **_):
        seen.append(None if generator is None else (generator.device.type,
                                                    generator.initial_seed()))
        return 50.0

    monkeypatch.setattr(analysis, "accuracy", accuracy)
    x, y = torch.zeros(4, 1, 1, 1, device="meta"), torch.zeros(4, dtype=torch.long, device="meta")
    analysis.validation_accuracies(_Line().eval(), x, y, eps=0.1, step_size=0.02, steps=2,
                                   batch_size=2, seed=7)
    assert seen == [None, ("cpu", 7)]


def test_validation_refuses_nonfinite_clean_logits_first() -> None:
    from wscat.analysis import validation_accuracies
    from wscat.inference import NonFiniteOutputs

    class Broken(_Line):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features, logits = super().forward(x)
            return features, logits * float("nan")

    x, y = torch.full((4, 1, 1, 1), 0.7), torch.zeros(4, dtype=torch.long)
    with pytest.raises(NonFiniteOutputs) as caught:
        validation_accuracies(Broken().eval(), x, y, eps=0.1, step_size=0.025, steps=2,
                              batch_size=4, seed=0, finite=True)
    assert caught.value.attack == "Natural" and "under" not in str(caught.value)


def test_attack_context_and_the_trades_and_rlfat_examples() -> None:
    from wscat.analysis import adversarial_examples, attack_context
    from wscat.methods.rlfat import random_block_shuffle
    from wscat.methods.trades import trades_attack

    ctx = attack_context({"eps": 0.3, "train_step_size": 0.07, "train_steps": 3},
                         torch.Generator().manual_seed(0))
    assert (ctx.eps, ctx.step_size, ctx.steps) == (0.3, 0.07, 3)
    torch.manual_seed(0)
    model = SmallCNN(1, 3, (0.5,), (0.5,), width=2).eval()
    x = torch.rand(4, 1, 8, 8)
    trades = adversarial_examples("trades", model, x, attack_context(
        {"eps": 0.3, "train_step_size": 0.07, "train_steps": 3}, torch.Generator().manual_seed(5)),
        heads=None)
    assert not any(m.training for m in model.modules())  # left in eval mode
    rlfat = adversarial_examples("rlfat", model, x, attack_context(
        {"eps": 0.3, "train_step_size": 0.07, "train_steps": 3}, torch.Generator().manual_seed(5)),
        heads=None)
    assert not any(m.training for m in model.modules())
    generator = torch.Generator().manual_seed(5)
    ctx = attack_context({"eps": 0.3, "train_step_size": 0.07, "train_steps": 3}, generator)
    reference = trades_attack(model, x, ctx)
    model.eval()
    assert torch.equal(trades, reference)
    assert torch.equal(rlfat, random_block_shuffle(reference, 2, generator))
    assert not torch.equal(rlfat, trades)


def test_tsne_settings_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """2-D, PCA initialisation, the seed, float64 and perplexity min(30, (n - 1) / 3), read off a
    stand-in for scikit-learn's TSNE (no fit: fast and exact)."""
    from wscat.analysis import tsne

    seen: list[dict] = []

    class FakeTSNE:
        def __init__(self, **kwargs: object) -> None:
            seen.append(kwargs)

        def fit_transform(self, data: np.ndarray) -> np.ndarray:
            seen.append({"dtype": data.dtype})
            return data[:, :2]

    monkeypatch.setitem(sys.modules, "sklearn.manifold", types.SimpleNamespace(TSNE=FakeTSNE))
    points = np.arange(21, dtype=np.float32).reshape(7, 3)
    np.testing.assert_array_equal(tsne(points, seed=4), points[:, :2])
    tsne(np.zeros((100, 3), dtype=np.float32), seed=0)
    assert seen == [{"n_components": 2, "init": "pca", "random_state": 4, "perplexity": 2.0},
                    {"dtype": np.float64},
                    {"n_components": 2, "init": "pca", "random_state": 0, "perplexity": 30.0},
                    {"dtype": np.float64}]


# --------------------------------------------------------------------------- PUAT's GAN


def test_gan_resampling_bounds_and_ranges_by_hand() -> None:
    from wscat.models.gan import (Attacker, Discriminator, Generator, _downsample, _upsample,
                                  halvings)

    assert [halvings(s) for s in (4, 8, 16, 32, 28)] == [0, 1, 2, 3, 2]
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    assert torch.equal(_upsample(x), torch.tensor(
        [[[[1.0, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]]))
    big = torch.tensor([[[[1.0, 3, 0, 0], [5, 7, 0, 8], [1, 1, 2, 2], [1, 1, 2, 2]]]])
    assert torch.equal(_downsample(big), torch.tensor([[[[4.0, 2.0], [1.0, 2.0]]]]))
    torch.manual_seed(0)
    attacker = Attacker(4, 3, latent_eps=0.2, hidden=8)
    with torch.no_grad():
        for p in attacker.parameters():
            p.mul_(50)
        z, y = torch.randn(16, 4), torch.arange(16) % 3
        shift = attacker(z, y) - z
    assert shift.abs().max() <= 0.2 + 1e-6 and shift.abs().max() > 0.15
    generator = Generator((1, 8, 8), 3, latent_dim=4, width=4)
    normed: list[torch.Tensor] = []
    generator.out_norm.register_forward_hook(lambda _m, _i, out: normed.append(out))
    with torch.no_grad():
        images = generator(torch.randn(64, 4) * 3, torch.arange(64) % 3)
        # the output layer: BN, ReLU, conv, tanh, then (t + 1) / 2
        expected = (torch.tanh(generator.out_conv(torch.relu(normed[0]))) + 1) / 2
    torch.testing.assert_close(images, expected)
    assert images.shape == (64, 1, 8, 8) and images.min() >= 0 and images.max() <= 1
    assert (images < 0.5).any() and (images > 0.5).any()
    d = Discriminator((1, 8, 8), 3, width=4).eval()
    xs = torch.rand(3, 1, 8, 8)
    with torch.no_grad():
        phi = torch.relu(d.blocks(2 * xs - 1)).sum((2, 3))
        torch.testing.assert_close(d.scores(xs), d.linear(phi) + phi @ d.embedding.weight)


def test_conditional_batchnorm_and_down_blocks_by_hand() -> None:
    """CBN: affine-free BN (batch statistics in training), then a per-class scale (init 1) and
    shift (init 0). SNGAN's down blocks: the first has no activation before its first conv and
    pools before its shortcut conv; the others activate first and pool after the shortcut."""
    from wscat.models.gan import ConditionalBatchNorm2d, _DownBlock

    torch.manual_seed(0)
    x, y = torch.randn(4, 2, 3, 3), torch.tensor([0, 1, 2, 1])
    mean = x.mean((0, 2, 3), keepdim=True)
    var = x.var((0, 2, 3), unbiased=False, keepdim=True)
    plain = (x - mean) / torch.sqrt(var + 1e-5)
    cbn = ConditionalBatchNorm2d(2, 3)
    torch.testing.assert_close(cbn(x, y), plain, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        cbn.scale.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
        cbn.shift.copy_(torch.tensor([[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]))
    expected = plain * cbn.scale[y][:, :, None, None] + cbn.shift[y][:, :, None, None]
    torch.testing.assert_close(cbn(x, y), expected, rtol=1e-5, atol=1e-5)

    def pool(t: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(t, 2)

    z = torch.randn(2, 2, 4, 4)
    with torch.no_grad():
        first = _DownBlock(2, 3, first=True).eval()
        expected = pool(first.conv2(torch.relu(first.conv1(z)))) + first.shortcut(pool(z))
        torch.testing.assert_close(first(z), expected, rtol=1e-5, atol=1e-5)
        later = _DownBlock(2, 3, first=False).eval()
        expected = pool(later.conv2(torch.relu(later.conv1(torch.relu(z))))) \
            + pool(later.shortcut(z))
        torch.testing.assert_close(later(z), expected, rtol=1e-5, atol=1e-5)
