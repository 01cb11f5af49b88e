"""The paper's models: shapes, parameter counts, normalisation inside, memory formats, errors."""
from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from wscat.models import LogitsOnly, build_model

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2471, 0.2435, 0.2616)
STAGES = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3),
          152: (3, 8, 36, 3)}


def build(architecture: str, mean=MEAN, std=STD, **options) -> nn.Module:
    torch.manual_seed(0)
    return build_model(architecture, in_channels=3, num_classes=10, mean=mean, std=std, **options)


def count(architecture: str, **options) -> int:
    with torch.device("meta"):  # no storage and no init work: counting 58M parameters is instant
        model = build(architecture, **options)
    return sum(p.numel() for p in model.parameters())


def wideresnet_count(depth: int, width: int, classes: int = 10) -> int:
    """Counted from the paper's description: 3x3 convs without bias, 1x1 projections, BN (2c)."""
    n, widths = (depth - 4) // 6, (16, 16 * width, 32 * width, 64 * width)
    total = 9 * 3 * 16
    for stage, (c_in, c) in enumerate(zip(widths[:-1], widths[1:])):
        for i in range(n):
            a = c_in if i == 0 else c
            projection = i == 0 and (stage > 0 or a != c)
            total += 2 * a + 9 * a * c + 2 * c + 9 * c * c + (a * c if projection else 0)
    return total + 2 * widths[-1] + widths[-1] * classes + classes


def resnet_count(depth: int, bottleneck: bool, classes: int = 10) -> int:
    expansion = 4 if bottleneck else 1
    total, a = 9 * 3 * 64 + 2 * 64, 64
    for stage, (p, blocks) in enumerate(zip((64, 128, 256, 512), STAGES[depth])):
        for i in range(blocks):
            out = expansion * p
            if bottleneck:
                total += a * p + 2 * p + 9 * p * p + 2 * p + p * out + 2 * out
            else:
                total += 9 * a * p + 2 * p + 9 * p * p + 2 * p
            if i == 0 and (stage > 0 or a != out):
                total += a * out + 2 * out
            a = out
    return total + a * classes + classes


# Published counts for 10 classes (WRN-28-10 as in TRADES/RobustBench; CIFAR ResNets).
PUBLISHED = {"wrn-28-10": 36_479_194, "wrn-34-10": 46_160_474, "resnet-18": 11_173_962,
             "resnet-34": 21_282_122, "resnet-50": 23_520_842, "resnet-152": 58_156_618}


def test_formulas_reproduce_published_counts() -> None:
    assert wideresnet_count(28, 10) == PUBLISHED["wrn-28-10"]
    assert wideresnet_count(34, 10) == PUBLISHED["wrn-34-10"]
    for depth in (18, 34):
        assert resnet_count(depth, bottleneck=False) == PUBLISHED[f"resnet-{depth}"]
    for depth in (50, 152):
        assert resnet_count(depth, bottleneck=True) == PUBLISHED[f"resnet-{depth}"]


@pytest.mark.parametrize(("architecture", "options", "expected"), [
    ("wideresnet", {"depth": 28, "width": 10}, wideresnet_count(28, 10)),
    ("wideresnet", {"depth": 34, "width": 10}, wideresnet_count(34, 10)),
    ("wideresnet", {"depth": 16, "width": 4}, wideresnet_count(16, 4)),
    ("wideresnet", {}, wideresnet_count(28, 10)),
    ("resnet", {"depth": 18}, resnet_count(18, bottleneck=False)),
    ("resnet", {"depth": 50}, resnet_count(50, bottleneck=True)),
    ("resnet", {"depth": 50, "block": "bottleneck"}, resnet_count(50, bottleneck=True)),
    ("resnet", {"depth": 50, "block": "basic"}, PUBLISHED["resnet-34"]),  # the release's "ResNet50"
    ("resnet", {"depth": 152}, resnet_count(152, bottleneck=True)),
    ("resnet", {"depth": 152, "block": "basic"}, resnet_count(152, bottleneck=False)),
])
def test_parameter_counts(architecture: str, options: dict, expected: int) -> None:
    assert count(architecture, **options) == expected


@pytest.mark.parametrize(("architecture", "options", "feature_dim"), [
    ("wideresnet", {"depth": 16, "width": 4}, 256),
    ("resnet", {"depth": 18}, 512),
    ("resnet", {"depth": 50}, 2048),
    ("resnet", {"depth": 50, "block": "basic"}, 512),
])
def test_output_shapes(architecture: str, options: dict, feature_dim: int) -> None:
    model = build(architecture, **options).eval()
    assert model.feature_dim == feature_dim
    with torch.no_grad():
        features, logits = model(torch.rand(2, 3, 32, 32))
    assert features.shape == (2, feature_dim) and logits.shape == (2, 10)
    assert torch.equal(logits, model.classifier(features))


def test_default_wideresnet_is_wrn_28_10() -> None:
    with torch.device("meta"):
        assert build("wideresnet").feature_dim == 640


@pytest.mark.parametrize(("architecture", "options"), [
    ("wideresnet", {"depth": 10, "width": 2}), ("resnet", {"depth": 18})])
def test_normalisation_is_inside_the_model(architecture: str, options: dict) -> None:
    model = build(architecture, **options).eval()
    bare = build(architecture, mean=(0.0,) * 3, std=(1.0,) * 3, **options).eval()
    bare.load_state_dict(model.state_dict())
    x = torch.rand(2, 3, 32, 32)
    normalised = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    with torch.no_grad():
        torch.testing.assert_close(model(x)[1], bare(normalised)[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("architecture", "options"), [
    ("wideresnet", {"depth": 16, "width": 4}), ("resnet", {"depth": 18})])
def test_channels_last_matches_contiguous(architecture: str, options: dict) -> None:
    model = build(architecture, **options).eval()
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        logits = model(x)[1]
        model = model.to(memory_format=torch.channels_last)
        logits_cl = model(x.contiguous(memory_format=torch.channels_last))[1]
    torch.testing.assert_close(logits_cl, logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("architecture", "options"), [
    ("wideresnet", {"depth": 10, "width": 1}), ("wideresnet", {"depth": 10, "width": 2}),
    ("resnet", {"depth": 18})])
def test_in_place_relu_keeps_gradients(architecture: str, options: dict) -> None:
    """Input gradients (what PGD uses) equal those of the same net with out-of-place ReLUs."""
    model = build(architecture, **options)
    reference = copy.deepcopy(model)
    for module in reference.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = False
    x = torch.rand(2, 3, 32, 32)
    grads = []
    for net in (model, reference):
        x_adv = x.clone().requires_grad_(True)
        grads.append(torch.autograd.grad(net(x_adv)[1].sum(), x_adv)[0])
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1])


def test_eval_mode_is_deterministic() -> None:
    model = build("wideresnet", depth=10, width=2).eval()
    state = copy.deepcopy(model.state_dict())
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        first, second = model(x), model(x)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert torch.equal(build("wideresnet", depth=10, width=2).eval()(x)[1].detach(), first[1])


def test_cnn_call_is_unchanged() -> None:
    model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,)).eval()
    features, logits = model(torch.rand(2, 1, 8, 8))
    assert features.shape == (2, model.feature_dim) and logits.shape == (2, 10)
    assert build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,),
                       width=8).feature_dim == 32
    assert torch.equal(LogitsOnly(model)(torch.zeros(2, 1, 8, 8)), model(torch.zeros(2, 1, 8, 8))[1])


@pytest.mark.parametrize(("architecture", "options", "message"), [
    ("vgg", {}, r"unknown architecture 'vgg'; valid architectures: cnn, resnet, wideresnet"),
    ("wideresnet", {"depth": 27}, r"6n\+4 .* got 27"),
    ("wideresnet", {"depth": 4}, r"6n\+4"),
    ("wideresnet", {"width": 0}, r"width must be a positive integer; got 0"),
    ("wideresnet", {"dropout": 0.3}, r"unknown option\(s\) dropout for 'wideresnet'; "
                                     r"valid options: depth, width"),
    ("resnet", {"depth": 20}, r"depth must be one of 18, 34, 50, 101, 152; got 20"),
    ("resnet", {"depth": 50, "block": "preact"}, r"block must be one of basic, bottleneck"),
    ("resnet", {"depth": 18, "block": "bottleneck"}, r"ResNet-18 is built from basic blocks"),
    ("resnet", {"width": 2}, r"valid options: depth, block"),
    ("cnn", {"depth": 3}, r"valid options: width"),
])
def test_bad_architecture_or_option_is_a_clear_error(architecture: str, options: dict,
                                                     message: str) -> None:
    with pytest.raises(ValueError, match=message), torch.device("meta"):
        build(architecture, **options)


def test_a_parameter_count_on_the_meta_device_stays_cheap():
    """`wscat train` counts a WRN's or ResNet's parameters on torch's meta device before building
    it: a fresh interpreter does so without loading torch._dynamo (drawing the Kaiming init on
    meta tensors loads it: ~2 s of every CIFAR training's start), and counts what a CPU build has."""
    script = textwrap.dedent("""
        import sys
        import torch
        from wscat.models import build_model
        from wscat.device import parameter_count
        for spec in ({"architecture": "wideresnet", "depth": 10, "width": 2},
                     {"architecture": "resnet", "depth": 18}):
            with torch.device("meta"):
                meta = build_model(**spec, in_channels=3, num_classes=10, mean=(0.5,) * 3,
                                   std=(0.25,) * 3)
            cpu = build_model(**spec, in_channels=3, num_classes=10, mean=(0.5,) * 3,
                              std=(0.25,) * 3)
            print(parameter_count(meta) == parameter_count(cpu) > 0)
        print("torch._dynamo" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["True", "True", "False"]
