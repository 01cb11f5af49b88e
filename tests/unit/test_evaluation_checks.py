"""The gradient-masking checks on hand-made numbers, the class-stratified order of the test set,
and the per-dataset evaluation overrides."""
import pytest
import torch

from tests.helpers.tiny import tiny_params
from wscat.attacks import masking
from wscat.config import ConfigError, evaluation_for, validate_params
from wscat.evaluation import stratified_order, subset_name


def test_monotone_check_allows_the_tolerance_and_names_the_rise():
    ok = masking.falls_monotonically([5, 10, 20], [60.0, 55.0, 55.5], tolerance=1.0, what="steps")
    assert ok["passed"] and ok["steps"] == [5, 10, 20]
    bad = masking.falls_monotonically([0.1, 0.2], [40.0, 45.0], tolerance=1.0, what="eps")
    assert not bad["passed"]
    assert "rises from 40.00% (eps 0.1) to 45.00% (eps 0.2)" in bad["detail"]


def test_square_check_uses_autoattack_threshold():
    after = {"apgd-ce": 50.0, "apgd-t": 45.0, "fab-t": 45.0, "square": 45.0}
    assert masking.square_not_better(after)["passed"]
    worse = masking.square_not_better({**after, "square": 44.0})
    assert not worse["passed"] and worse["white_box"] == 45.0 and worse["after_square"] == 44.0


def test_eps_zero_autoattack_warnings_and_fgsm_checks():
    assert masking.eps_zero_is_natural({"PGD": 90.0, "AA": 80.0}, {"PGD": 90.0, "AA": 80.0})["passed"]
    differ = masking.eps_zero_is_natural({"PGD": 90.0}, {"PGD": 89.0})
    assert not differ["passed"] and "89.00% at eps 0 vs 90.00% natural" in differ["detail"]
    assert masking.no_autoattack_warnings({"AA": [], "AA-paper": []})["passed"]
    warned = masking.no_autoattack_warnings({"AA": ["there are 3 points with zero gradient!"]})
    assert not warned["passed"] and "zero gradient" in warned["detail"]
    assert masking.iterative_not_weaker(60.0, 50.0, tolerance=1.0)["passed"]
    assert not masking.iterative_not_weaker(50.0, 60.0, tolerance=1.0)["passed"]


def test_square_beating_the_paper_s_weak_variant_is_kept_but_not_a_failed_check():
    """An audit: the demo's WSCAT failed the check on AA-paper's Square finding one image after
    its 10-step APGD, and every robust model's table would carry a masking footnote. The
    standard AutoAttack's Square success, and AA-paper's other warnings, still fail it."""
    square = ("Square Attack has decreased the robust accuracy of 0.28%. This might indicate "
              "that the robustness evaluation using AutoAttack is unreliable.")
    kept = masking.no_autoattack_warnings({"AA": [], "AA-paper": [square]})
    assert kept == {"passed": True, "detail": "AutoAttack raised no warning", "warnings": 0}
    standard = masking.no_autoattack_warnings({"AA": [square], "AA-paper": [square]})
    assert not standard["passed"] and standard["warnings"] == 1
    assert standard["detail"] == f"AA: {square}"
    zero = masking.no_autoattack_warnings({"AA": [], "AA-paper": [
        "there are 3 points with zero gradient!", square]})
    assert not zero["passed"]
    assert zero["detail"] == "AA-paper: there are 3 points with zero gradient!"


def test_every_prefix_of_the_order_is_class_balanced():
    """A test set sorted by class (the worst case) still gives balanced subsets."""
    labels = torch.arange(10).repeat_interleave(torch.tensor([30, 31, 29, 30, 30, 28, 30, 32, 30, 30]))
    order = stratified_order(labels, seed=0)
    assert sorted(order.tolist()) == list(range(len(labels)))
    for n in (10, 50, 100, 250):
        counts = torch.bincount(labels[order[:n]], minlength=10)
        assert int(counts.max() - counts.min()) <= 1, (n, counts)
    assert torch.equal(order, stratified_order(labels, seed=0))
    assert not torch.equal(order, stratified_order(labels, seed=1))


def test_subset_names():
    assert subset_name(359, 359, 0) == "full test set (359 images)"
    assert subset_name(100, 359, 0) == "class-stratified subset: 100 of 359 test images (seed 0)"


def test_per_dataset_overrides_merge_key_by_key():
    params = tiny_params()
    params["evaluation"]["per_dataset"]["digits"] = {"autoattack": {"n_examples": 7},
                                                     "nrf": {"n_examples": 5}}
    merged = evaluation_for(validate_params(params), "digits")
    assert merged["autoattack"] == {**params["evaluation"]["autoattack"], "n_examples": 7}
    assert merged["nrf"] == {**params["evaluation"]["nrf"], "n_examples": 5}
    assert evaluation_for(params, "cifar10")["nrf"] == params["evaluation"]["nrf"]


@pytest.mark.parametrize("change, where", [
    (lambda e: e["nrf"].update(layer="block3"), "evaluation.nrf.layer"),
    (lambda e: e["autoattack"].update(shard_size=0), "evaluation.autoattack.shard_size"),
    (lambda e: e["checks"].update(pgd_steps=[20]), "evaluation.checks.pgd_steps"),
    (lambda e: e["autoattack"].update(version="plus"), "evaluation.autoattack"),
])
def test_bad_evaluation_params_are_refused(change, where):
    params = tiny_params()
    change(params["evaluation"])
    with pytest.raises(ConfigError, match=where):
        validate_params(params)
