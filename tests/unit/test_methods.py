"""Methods' losses on tiny fixed models against slow loop-only computations; RBS; forward budgets;
the default paths of TRADES and WSCAT kept bit-identical to their earlier form."""
import copy
import math

import pytest
import torch
from torch import nn

from tests.unit.test_losses import slow_nt_xent, slow_supcon_both_views
from wscat.attacks import frozen_batchnorm_stats, pgd
from wscat.config import load_schema
from wscat.losses import cross_entropy, dynamic_contrastive_loss, kl_divergence
from wscat.methods import OBJECTIVES, Batch, StepContext, build_method, knobs
from wscat.methods.rlfat import Rlfat, random_block_shuffle
from wscat.methods.trades import Trades, trades_attack
from wscat.methods.wscat import Wscat, positive_labels
from wscat.report.names import DISPLAY_NAMES, is_adversarial
from wscat.models import build_model

# --- helpers -------------------------------------------------------------------------------------


class FixedLinear(nn.Module):
    """(features, logits) = (x flattened, W x + b), fixed weights: a test can follow it by hand."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        idx = torch.arange(num_classes * in_features, dtype=torch.float32)
        self.weight = nn.Parameter(torch.sin(idx).reshape(num_classes, in_features))
        self.bias = nn.Parameter(torch.linspace(-0.5, 0.5, num_classes))
        self.feature_dim = in_features

    def forward(self, x):
        features = x.flatten(1)
        return features, features @ self.weight.T + self.bias


def _ctx(eps=0.1, steps=10, seed=0, model=None):
    return StepContext(eps=eps, step_size=eps / 4, steps=steps,
                       generator=torch.Generator().manual_seed(seed), ema_model=model,
                       progress=0.0, augment=lambda t: t)


def _slow_logits(model, x):
    w, b = model.weight.tolist(), model.bias.tolist()
    return [[sum(wc[j] * xi[j] for j in range(len(xi))) + bc for wc, bc in zip(w, b)]
            for xi in x.flatten(1).tolist()]


def _slow_log_softmax(row):
    log_z = math.log(sum(math.exp(v) for v in row))
    return [v - log_z for v in row]


def _cnn():
    torch.manual_seed(0)
    return build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,))


def _count_forwards(method, steps=10):
    model = _cnn()
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
    method.loss(model, Batch(x, x, y), _ctx(steps=steps, model=model))
    return len(calls)


# --- RBS -----------------------------------------------------------------------------------------


def _strips(order):
    """Maximal runs of consecutive increasing indices: the strips a line permutation moved."""
    return 1 + sum(1 for a, b in zip(order, order[1:]) if b != a + 1)


@pytest.mark.parametrize("shape,k", [((5, 3, 8, 8), 2), ((7, 2, 7, 5), 3), ((4, 1, 6, 6), 6)])
def test_rbs_permutes_row_strips_then_column_strips(shape, k):
    n, c, h, w = shape
    x = torch.arange(n * c * h * w, dtype=torch.float64).reshape(shape)
    out = random_block_shuffle(x, k, torch.Generator().manual_seed(3))
    for b in range(n):
        rows = [int(v) // w for v in (out[b, 0, :, 0] - x[b, 0, 0, 0]).tolist()]
        cols = [int(v) % w for v in (out[b, 0, 0, :] - x[b, 0, 0, 0]).tolist()]
        assert sorted(rows) == list(range(h)) and sorted(cols) == list(range(w))
        # The same block move in every channel: out[b, ch] = x[b, ch][rows][:, cols].
        assert torch.equal(out[b], x[b][:, rows][:, :, cols])
        # At most k strips each way, kept whole and in order: the k x k blocks are moved, not cut,
        # so the blocks of the output are the blocks of the input (the same multiset).
        assert _strips(rows) <= k and _strips(cols) <= k
        assert torch.equal(out[b].flatten().sort().values, x[b].flatten().sort().values)


def test_rbs_is_drawn_per_sample_deterministic_and_identity_for_one_block():
    x = torch.rand(32, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    a = random_block_shuffle(x, 2, torch.Generator().manual_seed(1))
    b = random_block_shuffle(x, 2, torch.Generator().manual_seed(1))
    c = random_block_shuffle(x, 2, torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    moved = [not torch.equal(a[i], x[i]) for i in range(32)]
    assert any(moved) and not all(moved)  # k = 2: a sample stays as it is with probability 1/4
    assert torch.equal(random_block_shuffle(x, 1, torch.Generator().manual_seed(1)), x)
    with pytest.raises(ValueError):
        random_block_shuffle(x, 9, torch.Generator())


def test_rbs_reaches_every_arrangement_of_two_by_two_blocks():
    # k = 2 with random cuts: each axis either keeps or swaps its two strips: 4 arrangements.
    x = torch.arange(16.0).reshape(1, 1, 4, 4).expand(400, 1, 4, 4)
    out = random_block_shuffle(x, 2, torch.Generator().manual_seed(0))
    row_swapped = out[:, 0, 0, 0] >= 4 * 1  # first output row is not source row 0
    col_swapped = (out[:, 0, 0, 0] % 4) != 0
    seen = {(bool(r), bool(c)) for r, c in zip(row_swapped, col_swapped)}
    assert seen == {(False, False), (False, True), (True, False), (True, True)}


# --- RLFAT ---------------------------------------------------------------------------------------


def test_rlfat_terms_on_a_fixed_linear_model_by_hand():
    model = FixedLinear(16, 3)
    x = torch.rand(4, 1, 4, 4, generator=torch.Generator().manual_seed(5))
    labels = torch.tensor([0, 2, -1, 1])
    lam, alpha = 6.0, 1.0
    # eps = 0: x' = x and the attack draws nothing, so RBS(x') is the first draw of the generator.
    loss, stats = Rlfat(lam=lam, alpha=alpha, blocks=2).loss(model, Batch(x, x, labels),
                                                            _ctx(eps=0.0, seed=7))
    shuffled = random_block_shuffle(x, 2, torch.Generator().manual_seed(7))
    natural, adversarial = _slow_logits(model, x), _slow_logits(model, x)
    rbs = _slow_logits(model, shuffled)
    ce = [-_slow_log_softmax(row)[y] for row, y in zip(natural, labels.tolist()) if y >= 0]
    ce = sum(ce) / len(ce)
    kl = 0.0
    for nat, shuf in zip(natural, rbs):
        log_p, log_q = _slow_log_softmax(nat), _slow_log_softmax(shuf)
        kl += sum(math.exp(a) * (a - b) for a, b in zip(log_p, log_q))
    kl /= len(natural)
    rlft = sum(sum((a - b) ** 2 for a, b in zip(s, o)) for s, o in zip(rbs, adversarial)) / 4
    assert rlft > 0 and kl > 0
    assert float(stats["ce"]) == pytest.approx(ce, rel=1e-5)
    assert float(stats["kl"]) == pytest.approx(kl, rel=1e-4)
    assert float(stats["rlft"]) == pytest.approx(rlft, rel=1e-5)
    assert loss.item() == pytest.approx(ce + lam * kl + alpha * rlft, rel=1e-5)


def test_rlfat_with_an_attack_is_deterministic_and_trains_every_term():
    model = FixedLinear(16, 3)
    x = torch.rand(4, 1, 4, 4, generator=torch.Generator().manual_seed(5))
    batch = Batch(x, x, torch.tensor([0, 2, 1, 1]))
    method = Rlfat(lam=6.0, alpha=1.0, blocks=2)
    loss, stats = method.loss(model, batch, _ctx(eps=0.2, seed=1))
    again, _ = method.loss(model, batch, _ctx(eps=0.2, seed=1))
    assert torch.equal(loss, again)
    assert loss.item() == pytest.approx(float(stats["ce"] + 6.0 * stats["kl"] + stats["rlft"]))
    loss.backward()
    assert model.weight.grad is not None and torch.isfinite(model.weight.grad).all()


def test_rlfat_forward_budget():
    # 1 clean (attack target) + 10 attack steps + natural + adversarial + shuffled = 14.
    assert _count_forwards(Rlfat(lam=6.0, alpha=1.0, blocks=2)) == 14


# --- TRADES / DMAT -------------------------------------------------------------------------------


def _trades_before(model, batch, ctx, lam):
    """TRADES' loss as it stood before the DMAT knobs: the default path must not move."""
    model.eval()
    with torch.no_grad():
        target = model(batch.x)[1]
    x_adv = pgd(lambda x: kl_divergence(target, model(x)[1]), batch.x, eps=ctx.eps,
                step_size=ctx.step_size, steps=ctx.steps, random_start="normal",
                generator=ctx.generator)
    model.train()
    _, logits_natural = model(batch.x)
    _, logits_adversarial = model(x_adv)
    return (cross_entropy(logits_natural, batch.labels)
            + lam * kl_divergence(logits_natural, logits_adversarial))


def test_trades_default_path_is_bit_identical():
    model_a = _cnn()
    model_b = copy.deepcopy(model_a)
    x, y = torch.rand(8, 1, 8, 8), torch.randint(0, 10, (8,))
    method = build_method({"objective": "trades", "lam": 6.0}, feature_dim=model_a.feature_dim,
                          num_classes=10, image_shape=(1, 8, 8))
    got, _ = method.loss(model_a, Batch(x, x, y), _ctx(steps=3))
    expected = _trades_before(model_b, Batch(x, x, y), _ctx(steps=3), 6.0)
    assert torch.equal(got, expected)
    assert all(torch.equal(a, b) for a, b in zip(model_a.state_dict().values(),
                                                 model_b.state_dict().values()))


def test_trades_label_smoothing_on_a_fixed_linear_model():
    model = FixedLinear(16, 3)
    x = torch.rand(3, 1, 4, 4, generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([2, -1, 0])
    method = Trades(lam=6.0, label_smoothing=0.1)
    loss, stats = method.loss(model, Batch(x, x, labels), _ctx(eps=0.0))  # x' = x: KL = 0
    expected = 0.0
    for row, y in zip(_slow_logits(model, x), labels.tolist()):
        if y >= 0:
            log_p = _slow_log_softmax(row)
            expected += -(0.9 * log_p[y] + 0.1 / 3 * sum(log_p))
    expected /= 2
    assert float(stats["ce"]) == pytest.approx(expected, rel=1e-5)
    assert float(stats["kl"]) == pytest.approx(0.0, abs=1e-6)
    plain, _ = Trades(lam=6.0).loss(model, Batch(x, x, labels), _ctx(eps=0.0))
    assert plain.item() != pytest.approx(loss.item())


def test_dmat_attack_uses_batch_statistics_and_leaves_running_ones():
    model = _cnn()
    x = torch.rand(8, 1, 8, 8)
    before = copy.deepcopy(model.state_dict())
    x_batch = trades_attack(model, x, _ctx(steps=3), random_start="uniform", batchnorm="batch")
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    x_eval = trades_attack(model, x, _ctx(steps=3), random_start="uniform", batchnorm="eval")
    assert not torch.equal(x_batch, x_eval)
    assert float((x_batch - x).abs().max()) <= 0.1 + 1e-6
    with pytest.raises(ValueError):
        trades_attack(model, x, _ctx(), batchnorm="train")


def test_dmat_configuration_builds_and_keeps_the_trades_budget():
    params = {"objective": "trades", "lam": 5.0, "label_smoothing": 0.1,
              "random_start": "uniform", "attack_batchnorm": "batch"}
    method = build_method(params, feature_dim=32, num_classes=10, image_shape=(1, 8, 8))
    assert (method.label_smoothing, method.random_start, method.attack_batchnorm) == (
        0.1, "uniform", "batch")
    assert _count_forwards(method) == 13


# --- WSCAT variants ------------------------------------------------------------------------------


def _wscat(positives=None, feature_dim=16, anchors="both"):
    params = {"objective": "wscat", "lam": 5.0, "beta": 0.05, "temperature": 0.5,
              "anchors": anchors, "label_smoothing": 0.1, "projection_dim": 4}
    if positives is not None:
        params["positives"] = positives
    torch.manual_seed(0)
    return build_method(params, feature_dim=feature_dim, num_classes=3, image_shape=(1, 4, 4))


def _wscat_before(method, model, batch, ctx):
    """WSCAT's loss as it stood before the `positives` knob: the default path must not move."""
    model.train()
    features, logits_natural = model(batch.x)
    z = method.head_natural(features)
    predicted = logits_natural.argmax(1).detach()
    target, z_target = logits_natural.detach(), z.detach()

    def l_con(z_, z_adv, labels):
        return dynamic_contrastive_loss(z_, z_adv, labels, temperature=method.temperature,
                                        anchors=method.anchors)

    def inner(x):
        features_adv, logits_adv = model(x)
        return (kl_divergence(target, logits_adv)
                + method.beta * l_con(z_target, method.head_adversarial(features_adv), predicted))

    with frozen_batchnorm_stats(model):
        x_adv = pgd(inner, batch.x, eps=ctx.eps, step_size=ctx.step_size, steps=ctx.steps,
                    random_start="uniform", generator=ctx.generator)
    features_adv, logits_adversarial = model(x_adv)
    ce = cross_entropy(logits_natural, batch.labels, method.label_smoothing)
    kl = kl_divergence(logits_natural, logits_adversarial)
    con = l_con(z, method.head_adversarial(features_adv), predicted)
    return ce + method.lam * (kl + method.beta * con)


def test_wscat_default_path_is_bit_identical():
    model_a = _cnn()
    model_b = copy.deepcopy(model_a)
    method = _wscat(feature_dim=model_a.feature_dim)
    assert method.positives == "predicted"
    x, y = torch.rand(8, 1, 8, 8), torch.randint(0, 10, (8,))
    got, _ = method.loss(model_a, Batch(x, x, y), _ctx(steps=3))
    expected = _wscat_before(method, model_b, Batch(x, x, y), _ctx(steps=3))
    assert torch.equal(got, expected)


def test_positive_labels_of_each_variant():
    logits = torch.tensor([[0.0, 2.0], [3.0, 1.0], [0.0, 1.0], [5.0, 0.0]])
    labels = torch.tensor([0, -1, 1, -1])
    assert positive_labels("predicted", logits, labels).tolist() == [1, 0, 1, 0]
    fixed = positive_labels("labels", logits, labels).tolist()
    assert fixed[0] == 0 and fixed[2] == 1
    assert fixed[1] < 0 and fixed[3] < 0 and fixed[1] != fixed[3]
    own = positive_labels("self", logits, labels).tolist()
    assert len(set(own)) == 4 and all(v < 0 for v in own)
    with pytest.raises(ValueError):
        _wscat("pseudo")


@pytest.mark.parametrize("positives", ["labels", "self"])
def test_wscat_variant_l_con_against_slow_loops(positives):
    # eps = 0: x' = x, so z = head_natural(x), z' = head_adversarial(x) on the fixed linear model.
    model = FixedLinear(16, 3)
    method = _wscat(positives)
    x = torch.rand(6, 1, 4, 4, generator=torch.Generator().manual_seed(4))
    labels = torch.tensor([0, 2, -1, 0, 2, -1])  # -1: an unlabelled sample (data: semi)
    _, stats = method.loss(model, Batch(x, x, labels), _ctx(eps=0.0))
    z = method.head_natural(x.flatten(1)).detach().double()
    z_adv = method.head_adversarial(x.flatten(1)).detach().double()
    if positives == "self":
        expected = slow_nt_xent(z, z_adv, 0.5)
    else:
        expected = slow_supcon_both_views(z, z_adv, labels, 0.5)
    assert float(stats["l_con"]) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("positives", ["labels", "self"])
def test_wscat_variants_keep_the_forward_budget(positives):
    assert _count_forwards(_wscat(positives, feature_dim=_cnn().feature_dim)) == 12


# --- registry ------------------------------------------------------------------------------------


def test_registry_knows_the_new_methods():
    method = build_method({"objective": "rlfat", "lam": 6.0, "alpha": 1.0, "blocks": 2},
                          feature_dim=32, num_classes=10, image_shape=(1, 8, 8))
    assert isinstance(method, Rlfat) and (method.lam, method.alpha, method.blocks) == (6.0, 1.0, 2)
    with pytest.raises(ValueError):
        build_method({"objective": "rlfat", "lam": 6.0, "alpha": 1.0, "blocks": 9},
                     feature_dim=32, num_classes=10, image_shape=(1, 8, 8))
    assert isinstance(_wscat("self"), Wscat)
    assert is_adversarial({"objective": "rlfat"})
    for key, name in {"rlfat": "RLFAT", "dmat": "DMAT", "puat": "PUAT",
                      "wscat-fixed": "WSCAT-fixed", "wscat-self": "WSCAT-self",
                      "wscat-std": "WSCAT-std"}.items():
        assert DISPLAY_NAMES[key] == name


def _schema_required(objective: str) -> set[str]:
    """The knobs params.schema.yaml requires of an objective, beyond what every method has."""
    rules = load_schema()["$defs"]["builtin_rules"]
    required = set()
    for rule in rules["allOf"]:
        if rule["if"]["properties"].get("objective", {}).get("const") == objective:
            required |= set(rule.get("then", {}).get("required", []))
    return required - {"objective", "data", "selection", "labeler"}


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_constructors_take_the_knobs_the_schema_defines(objective):
    """One knob list: a constructor's required arguments are the schema's required knobs of its
    objective, and every argument is a knob the schema defines."""
    properties = load_schema()["$defs"]["method"]["properties"]
    taken = knobs(objective)
    assert {name for name, required in taken.items() if required} == _schema_required(objective)
    assert set(taken) <= set(properties)


def test_the_analysis_attacks_in_batches_as_training_does():
    """Fig-similarity's AEs come batch by batch (Eq. 7's l_con sums over the current batch,
    Sec. 4.1.3): each batch's AE is the one made on that batch alone, the generator drawn in
    order; WSCAT's differs from one made on all the images at once (l_con couples them)."""
    from wscat.analysis import adversarial_examples

    model = _cnn().eval()
    heads = _wscat(feature_dim=model.feature_dim).eval()
    x = torch.rand(10, 1, 8, 8)
    batched = adversarial_examples("wscat", model, x, _ctx(seed=3), heads=heads, batch_size=4)
    ctx = _ctx(seed=3)
    alone = torch.cat([adversarial_examples("wscat", model, x[i:i + 4], ctx, heads=heads)
                       for i in (0, 4, 8)])
    assert torch.equal(batched, alone)
    whole = adversarial_examples("wscat", model, x, _ctx(seed=3), heads=heads)
    assert not torch.equal(batched, whole)


def test_the_analysis_makes_wscats_ae_with_wscat_attack():
    """Fig-similarity's WSCAT AE (eval mode, positives predicted) is Eq. 8 as the analysis
    computed it before `Wscat.attack` was its one home."""
    from wscat.analysis import adversarial_examples

    model = _cnn().eval()
    heads = _wscat(feature_dim=model.feature_dim).eval()
    x = torch.rand(8, 1, 8, 8)
    got = adversarial_examples("wscat", model, x, _ctx(seed=3), heads=heads)
    with torch.no_grad():
        features, logits = model(x)
        z = heads.head_natural(features)
    classes = logits.argmax(1)

    def inner(x_):
        features_adv, logits_adv = model(x_)
        return (kl_divergence(logits, logits_adv)
                + heads.beta * heads.l_con(z, heads.head_adversarial(features_adv), classes))

    ctx = _ctx(seed=3)
    expected = pgd(inner, x, eps=ctx.eps, step_size=ctx.step_size, steps=ctx.steps,
                   random_start="uniform", generator=ctx.generator)
    assert torch.equal(got, expected)
