"""Losses against values worked out by hand, or by slow loop-only reference implementations."""
import math

import pytest
import torch

from wscat.losses import (consistency_mse, cross_entropy, dynamic_contrastive_loss,
                          kl_divergence, logit_pairing)

# Three samples, 2-d embeddings. Natural z: e1, e1, e2; adversarial z': e1, e2, e2.
# Labels (predictions): 0, 0, 1. Temperature 1 keeps the arithmetic readable: s = cosine.
Z_NAT = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])  # un-normalised on purpose
Z_ADV = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.5]])
LABELS = torch.tensor([0, 0, 1])
E = math.e


def test_adversarial_anchor_form_by_hand():
    # Anchor z'_0 = e1: sims to naturals (e1, e1, e2) = (1, 1, 0); positives n0, n1.
    # log p(n0) = 1 - log(e + e + 1) = log p(n1).
    l0 = -(1 - math.log(2 * E + 1))
    # Anchor z'_1 = e2: sims (0, 0, 1); positives n0, n1 (label 0): log p = 0 - log(1 + 1 + e).
    l1 = -(0 - math.log(2 + E))
    # Anchor z'_2 = e2: sims (0, 0, 1); positive n2 (label 1): log p = 1 - log(2 + e).
    l2 = -(1 - math.log(2 + E))
    expected = (l0 + l1 + l2) / 3
    got = dynamic_contrastive_loss(Z_NAT, Z_ADV, LABELS, temperature=1.0, anchors="adversarial")
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_both_views_form_by_hand():
    # Six vectors v = (n0, n1, n2, a0, a1, a2) = (e1, e1, e2, e1, e2, e2), labels (0,0,1,0,0,1).
    # Each anchor's denominator: the other five. cos(e1,e1)=1, cos(e1,e2)=0, cos(e2,e2)=1.
    # n0 (e1): others (e1,e2,e1,e2,e2) -> exps (e,1,e,1,1); Z = 2e+3; positives n1,a0,a1 -> sims 1,1,0.
    z_e1 = 2 * E + 3
    n0 = -((1 - math.log(z_e1)) * 2 + (0 - math.log(z_e1))) / 3
    n1 = n0  # same vector, same label, same others up to order
    # n2 (e2, label 1): others (e1,e1,e1,e2,e2) -> Z = 3 + 2e; positive a2 (sim 1).
    z_n2 = 3 + 2 * E
    n2 = -(1 - math.log(z_n2))
    # a0 (e1, label 0): others (e1,e1,e2,e2,e2) -> Z = 2e + 3; positives n0, n1, a1 -> sims 1,1,0.
    a0 = n0
    # a1 (e2, label 0): others (e1,e1,e2,e1,e2) -> Z = 3 + 2e; positives n0, n1, a0 -> sims 0,0,0.
    a1 = -(3 * (0 - math.log(3 + 2 * E))) / 3
    # a2 (e2, label 1): others (e1,e1,e2,e1,e2) -> Z = 3 + 2e; positive n2 (sim 1).
    a2 = -(1 - math.log(3 + 2 * E))
    expected = (n0 + n1 + n2 + a0 + a1 + a2) / 6
    got = dynamic_contrastive_loss(Z_NAT, Z_ADV, LABELS, temperature=1.0, anchors="both")
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_temperature_scales_similarities():
    # With every label distinct, the 'adversarial' form is InfoNCE: -log softmax of the diagonal.
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    got = dynamic_contrastive_loss(z, z, torch.tensor([0, 1]), temperature=0.5, anchors="adversarial")
    expected = -(2 - math.log(math.exp(2) + 1))
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_contrastive_loss_gradient_is_finite_and_default_is_both():
    z = torch.randn(8, 4, requires_grad=True)
    z_adv = torch.randn(8, 4, requires_grad=True)
    labels = torch.tensor([0, 1, 0, 1, 2, 2, 3, 0])
    loss = dynamic_contrastive_loss(z, z_adv, labels)
    loss.backward()
    assert torch.isfinite(z.grad).all() and torch.isfinite(z_adv.grad).all()
    with torch.no_grad():
        assert float(loss) == pytest.approx(float(dynamic_contrastive_loss(
            z, z_adv, labels, temperature=0.07, anchors="both")))
    with pytest.raises(ValueError):
        dynamic_contrastive_loss(z, z_adv, labels, anchors="natural")


def test_kl_divergence_by_hand():
    natural = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    adversarial = torch.log(torch.tensor([[0.25, 0.75], [0.9, 0.1]]))
    expected = (0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75) + 0.0) / 2
    assert float(kl_divergence(natural, adversarial)) == pytest.approx(expected, rel=1e-5)


def test_cross_entropy_ignores_samples_without_label():
    logits = torch.tensor([[2.0, 0.0], [0.0, 5.0], [9.0, -9.0]])
    labels = torch.tensor([0, -1, -1])
    expected = -math.log(math.exp(2) / (math.exp(2) + 1))
    assert float(cross_entropy(logits, labels)) == pytest.approx(expected, rel=1e-6)
    assert float(cross_entropy(logits, torch.full((3,), -1))) == 0.0


def test_consistency_is_mean_squared_softmax_difference():
    student = torch.tensor([[0.0, 0.0]])
    teacher = torch.tensor([[math.log(3.0), 0.0]])  # softmax (0.75, 0.25)
    expected = ((0.5 - 0.75) ** 2 + (0.5 - 0.25) ** 2) / 2
    assert float(consistency_mse(student, teacher)) == pytest.approx(expected, rel=1e-6)


# --- Slow, loop-only references for the contrastive variants (WSCAT-fixed, WSCAT-self) ----------

def _unit(v):
    norm = math.sqrt(sum(a * a for a in v))
    return [a / norm for a in v]


def _dot(u, v):
    return sum(a * b for a, b in zip(u, v))


def slow_supcon_both_views(z, z_adv, labels, temperature):
    """SupCon over the 2B vectors (natural then adversarial); -1 = no label: own class."""
    views = [_unit(v) for v in z.tolist()] + [_unit(v) for v in z_adv.tolist()]
    n = len(z)
    total = 0.0
    for i in range(2 * n):
        others = [k for k in range(2 * n) if k != i]
        log_denominator = math.log(sum(math.exp(_dot(views[i], views[k]) / temperature)
                                       for k in others))
        label = int(labels[i % n])
        if label < 0:
            positives = [(i + n) % (2 * n)]
        else:
            positives = [p for p in others if int(labels[p % n]) == label]
        total += -sum(_dot(views[i], views[p]) / temperature - log_denominator
                      for p in positives) / len(positives)
    return total / (2 * n)


def slow_nt_xent(z, z_adv, temperature):
    """NT-Xent (SimCLR): each of the 2N views against its pair, denominator all 2N-1 others."""
    views = [_unit(v) for v in z.tolist()] + [_unit(v) for v in z_adv.tolist()]
    n = len(z)
    total = 0.0
    for i in range(2 * n):
        j = (i + n) % (2 * n)
        denominator = sum(math.exp(_dot(views[i], views[k]) / temperature)
                          for k in range(2 * n) if k != i)
        total += -math.log(math.exp(_dot(views[i], views[j]) / temperature) / denominator)
    return total / (2 * n)


def slow_info_nce(z, z_adv, temperature):
    """Paper Eq. 6 over the batch: anchor z'_i, positive z_i, denominator all natural z_n."""
    nat = [_unit(v) for v in z.tolist()]
    adv = [_unit(v) for v in z_adv.tolist()]
    total = 0.0
    for i in range(len(nat)):
        denominator = sum(math.exp(_dot(adv[i], z_n) / temperature) for z_n in nat)
        total += -math.log(math.exp(_dot(adv[i], nat[i]) / temperature) / denominator)
    return total / len(nat)


def _embeddings(seed=0, n=6, dim=5):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, dim, generator=g, dtype=torch.float64),
            torch.randn(n, dim, generator=g, dtype=torch.float64))


def test_distinct_labels_with_both_anchors_is_exactly_nt_xent():
    z, z_adv = _embeddings()
    got = dynamic_contrastive_loss(z, z_adv, -1 - torch.arange(6), temperature=0.5, anchors="both")
    assert float(got) == pytest.approx(slow_nt_xent(z, z_adv, 0.5), rel=1e-10)


def test_distinct_labels_with_adversarial_anchor_is_info_nce():
    z, z_adv = _embeddings(1)
    got = dynamic_contrastive_loss(z, z_adv, torch.arange(6), temperature=0.2,
                                   anchors="adversarial")
    assert float(got) == pytest.approx(slow_info_nce(z, z_adv, 0.2), rel=1e-10)


def test_fixed_labels_give_supcon_against_a_slow_loop():
    z, z_adv = _embeddings(2)
    labels = torch.tensor([0, 1, 0, 2, 1, 0])
    got = dynamic_contrastive_loss(z, z_adv, labels, temperature=0.07, anchors="both")
    assert float(got) == pytest.approx(slow_supcon_both_views(z, z_adv, labels, 0.07), rel=1e-10)


def test_cross_entropy_label_smoothing_by_hand():
    # K = 3, eps = 0.1: target (1 - eps) one-hot + eps / K: -(0.9 log p_y + 0.1/3 sum_k log p_k).
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0], [5.0, 5.0, 5.0]])
    labels = torch.tensor([1, 2, -1])
    expected = 0.0
    for row, y in zip(logits.tolist()[:2], labels.tolist()[:2]):
        log_z = math.log(sum(math.exp(v) for v in row))
        log_p = [v - log_z for v in row]
        expected += -(0.9 * log_p[y] + 0.1 / 3 * sum(log_p))
    expected /= 2
    assert float(cross_entropy(logits, labels, 0.1)) == pytest.approx(expected, rel=1e-6)


def test_logit_pairing_is_batch_mean_of_squared_l2():
    a = torch.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 1.0]])
    b = torch.tensor([[1.0, 0.0, 0.0], [2.0, -1.0, 1.0]])
    # Sample 0: 0 + 4 + 9 = 13; sample 1: 4 + 0 + 0 = 4; mean 8.5 (their code: sum / batch size).
    assert float(logit_pairing(a, b)) == pytest.approx(8.5)
