"""Mutation tests for wscat/evaluation.py (the attack suite whose numbers fill every table) and
wscat/metrics.py: each test kills hand-made mutants that went through the unit tests importing
them, with expectations from the modules' docstrings, docs/evaluation.md ("Metrics files",
"Subsets", "Gradient-masking checks") and first principles, never from the function under test.
AutoAttack and NRF are stood in for by hand-made results (what is checked is where the suite
reads and puts them); Natural, FGSM, PGD and CW run for real on the linear model of
test_attack_mutations, whose robust points are known in closed form.

What is checked, and from which fact:
- stratified_order: "classes take turns, each class's members shuffled": round r holds the r-th
  member (in the seeded permutation) of each class that has one, classes in turn (ascending).
- correct/accuracy: every example of every batch is counted (the last batch of one image too);
  non-finite logits in any batch are counted (n of N named), and `accuracy` refuses them as
  `correct` does (`finite`, "as correct's"); the seeded generator alone decides the random start
  (the global RNG does not), and the step size given is the one PGD walks; a model in train mode
  is refused ("checked on every forward pass").
- percent: accuracy in percent over all flags (2 of 3 is 66.67%, not a floored integer).
- core_suite: Natural/FGSM/PGD/CW on all n images, each attack's non-finite logits refused under
  its own name (FGSM's too, before AutoAttack runs), AutoAttack on the first
  autoattack.n_examples (capped at n), its robust flags its own per-image row (not another
  attack's), its accuracy (not its clean count) the AA column; the Mean is the harmonic mean of
  the five; PGD runs pgd_steps, CW cw_steps, both at the step size given, PGD from a fresh
  generator seeded by `seed` (the point the masking checks reuse); the manifest names each
  attack's images out of the whole test set (test_set_size), and records AutoAttack's own clean
  accuracy, robust accuracy after each attack, shards, seed, warnings, FGSM's step (eps) and each
  attack's steps.
- extra_suite: AA-paper is the "paper" variant on the first autoattack.n_examples, with the shard
  folder; NRF on the first nrf.n_examples (capped at n), its generator seeded by `seed`; a core
  given as a function is called; the checks read the core's numbers: the curve point at the
  suite's eps and steps is the table's PGD (not FGSM's), eps 0's natural for AutoAttack is the
  natural accuracy on AutoAttack's subset, each AutoAttack's own clean count is compared with it
  (AA's from the core manifest, AA-paper's from its run), Square is judged on AA's robust
  accuracies after each attack, both AutoAttacks' warnings count, PGD is compared with FGSM (not
  the reverse) with the params' tolerance; the steps grid at eps, the eps grid (x eps, step size x
  the same factor) at pgd_steps, eps 0 at pgd_steps, each point from a fresh generator seeded by
  `seed`, each refusing non-finite logits.
- merge: columns in the tables' order (the five, AA-paper, NRF, Mean), the core's Mean (the
  paper's five, not the extras), the core's per-image flags, the extras' checks, both parts'
  AutoAttack warnings.
- metrics: harmonic_mean is 0 when a value is 0 and n / sum(1/v) over however many values;
  is_percent takes ints and floats in [0, 100] both ends, not bools, NaN or inf; an empty
  AA-paper record means none recorded; Square's settings are compared only where recorded.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from tests.unit.test_attack_mutations import EPS, pairwise
from wscat import evaluation
from wscat.attacks.shards import AutoAttackResult
from wscat.evaluation import (SuiteResult, accuracy, core_suite, correct, extra_suite, merge,
                              percent, stratified_order)
from wscat.inference import NonFiniteOutputs
from wscat.metrics import AA_PAPER, aa_paper_difference, harmonic_mean, is_percent

STEP, SEED = 0.05, 5  # 4 steps of 0.05 = 2 eps: PGD and CW reach the optimal corner from any start
EVALUATION: dict[str, Any] = {
    "batch_size": 5, "subset_seed": 3, "pgd_steps": 4, "cw_steps": 6,
    "autoattack": {"n_examples": 4, "seed": 7, "shard_size": 2},
    "nrf": {"n_examples": 50, "layer": "auto", "ib_steps": 1, "ib_lr": 0.1, "ib_beta": 0.3,
            "steps": 4, "weight": 1.0},
    "checks": {"pgd_steps": [2, 4, 8], "eps_factors": [0.0, 0.5, 1.0, 2.0], "tolerance": 0.5},
}


def data() -> tuple[nn.Module, torch.Tensor, torch.Tensor, list[int]]:
    """11 images (batches of 5, 5 and 1) of the pairwise linear model; the last three labelled 2,
    a class at -100 that no image is, so wrong under every attack. Natural: 8 of 11 right (all 4
    of AutoAttack's first 4); robust (margin beyond eps's reach, right label): 3 of 11."""
    model, x, y, _, robust = pairwise(n=11, fractions=(0.3, 1.7))
    y = y.clone()
    y[8:] = 2
    flags = [int(r) for r in robust]
    flags[8:] = [0, 0, 0]
    assert flags == [0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0]  # the closed form of this draw
    return model, x, y, flags


NATURAL, ROBUST = 100 * 8 / 11, 100 * 3 / 11


def fresh_seed(generator: torch.Generator) -> int | None:
    """The seed s whose fresh generator's state `generator` holds (None: it has drawn)."""
    for s in (0, 1, 3, SEED, 7, SEED + 1):
        if torch.equal(generator.get_state(), torch.Generator().manual_seed(s).get_state()):
            return s
    return None


@pytest.fixture
def pgd_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float, int, int | None]]:
    """(eps, step size, steps, fresh seed of the generator) of every PGD run the suite starts."""
    calls: list[tuple[float, float, int, int | None]] = []
    real = evaluation.pgd

    def spy(objective, x, *, eps, step_size, steps, generator=None, **kw):
        calls.append((round(eps, 9), round(step_size, 9), steps,
                      None if generator is None else fresh_seed(generator)))
        return real(objective, x, eps=eps, step_size=step_size, steps=steps, generator=generator,
                    **kw)

    monkeypatch.setattr(evaluation, "pgd", spy)
    return calls


def aa_result(variant: str, n: int) -> AutoAttackResult:
    """Hand-made AutoAttack results on 4 images, each number distinct from the others."""
    if variant == "standard":
        robust, clean = [True, False, False, True], 75.0
        after = {"apgd-ce": 75.0, "apgd-t": 50.0, "fab-t": 50.0, "square": 50.0}
    else:
        robust, clean = [False, False, True, False], 100.0
        after = {"apgd-ce": 75.0, "apgd-t": 75.0, "fab-t": 75.0, "square": 25.0}
    assert n == len(robust)
    return AutoAttackResult(accuracy=100.0 * sum(robust) / n, clean=clean, after=after,
                            warnings=[f"{variant} warned"], settings={"order": list(after)},
                            n_examples=n, n_shards=2, robust=robust)


@pytest.fixture
def aa_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake(model, x, y, *, variant, eps, seed, batch_size, shard_size, shard_dir=None):
        calls.append({"variant": variant, "x": x, "eps": eps, "seed": seed,
                      "shard_dir": shard_dir})
        return aa_result(variant, len(x))

    monkeypatch.setattr(evaluation, "autoattack_accuracy", fake)
    return calls


# --- the order, the counts ---------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_order_takes_each_class_in_turn_round_by_round(seed: int) -> None:
    labels = torch.tensor([2, 0, 1, 0, 2, 2, 1, 0, 0, 1, 2, 0])  # 5 zeros, 3 ones, 4 twos
    shuffled = torch.randperm(12, generator=torch.Generator().manual_seed(seed)).tolist()
    members = {c: [p for p in shuffled if int(labels[p]) == c] for c in (0, 1, 2)}
    expected = [members[c][r] for r in range(5) for c in (0, 1, 2) if r < len(members[c])]
    assert stratified_order(labels, seed).tolist() == expected


def test_every_example_of_every_batch_is_counted() -> None:
    model, x, y, _ = data()
    for bs in (5, 10, 11, 64):  # 5 and 10: a last batch of one image
        assert correct(model, x, y, batch_size=bs).tolist() == [True] * 8 + [False] * 3
    assert percent(torch.tensor([True, True, False])) == pytest.approx(200 / 3)


class NaNWhere(nn.Module):
    """(features, logits) of 3 classes, NaN on the images whose first pixel is above 0.9."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.flatten(1)
        logits = flat[:, :3] * torch.tensor([1.0, 2.0, 3.0])
        return flat, torch.where(flat[:, :1] > 0.9, torch.full_like(logits, float("nan")), logits)


def test_nan_logits_are_counted_in_every_batch_and_refused_by_accuracy() -> None:
    x = torch.full((6, 1, 2, 2), 0.5)
    x[0, 0, 0, 0] = x[3, 0, 0, 0] = 1.0  # batches of 2: the first and the second hold one each
    y = torch.zeros(6, dtype=torch.long)
    model = NaNWhere().eval()
    with pytest.raises(NonFiniteOutputs, match=r"^the model's outputs are NaN or inf on 2 of 6 "):
        correct(model, x, y, batch_size=2, finite=True)
    with pytest.raises(NonFiniteOutputs, match=r"on 2 of 6 images under PGD;"):
        accuracy(model, x, y, attack="PGD", eps=0.0, step_size=0.0, steps=1, batch_size=2,
                 finite=True, generator=torch.Generator().manual_seed(0))


def test_accuracy_s_start_is_its_generator_s_and_its_step_the_one_given(pgd_calls) -> None:
    """One step of 0.01 from the random start: which points flip depends on the start."""
    model, x, y, _, _ = pairwise(n=60, fractions=(0.1, 0.15))
    runs = []
    with torch.random.fork_rng():
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)
            runs.append(accuracy(model, x, y, attack="PGD", eps=EPS, step_size=0.01, steps=1,
                                 batch_size=64, generator=torch.Generator().manual_seed(0)))
    assert runs[0] == runs[1] and 0 < runs[0] < 100
    assert pgd_calls == [(EPS, 0.01, 1, 0)] * 2


def test_a_model_in_train_mode_is_refused() -> None:
    model, x, y, _ = data()
    with pytest.raises(RuntimeError, match="eval mode"):
        correct(model.train(), x, y)


# --- the core suite ----------------------------------------------------------------------------

def test_the_core_suite_puts_each_attack_s_result_in_its_own_column(pgd_calls, aa_calls,
                                                                    tmp_path: Path) -> None:
    model, x, y, flags = data()
    suite = core_suite(model, x, y, eps=EPS, step_size=STEP, evaluation=EVALUATION, seed=SEED,
                       test_set_size=40, shard_dir=tmp_path)
    aa = 50.0  # the stand-in's 2 robust of 4
    assert suite.accuracy == pytest.approx({"Natural": NATURAL, "FGSM": ROBUST, "PGD": ROBUST,
                                            "CW": ROBUST, "AA": aa,
                                            "Mean": 5 / (1 / NATURAL + 3 / ROBUST + 1 / aa)})
    assert [c["variant"] for c in aa_calls] == ["standard"]
    assert torch.equal(aa_calls[0]["x"], x[:4]) and aa_calls[0]["seed"] == 7
    text = "".join(map(str, flags[:4]))
    assert suite.per_image == {"Natural": "1111", "FGSM": text, "PGD": text, "CW": text,
                               "AA": "1001"}
    # PGD: 4 steps, a fresh generator seeded by `seed`, then its 3 batches; CW: 6 steps after it.
    assert [c[:3] for c in pgd_calls] == [(EPS, STEP, 4)] * 3 + [(EPS, STEP, 6)] * 3
    assert pgd_calls[0][3] == SEED
    attacks = suite.attacks
    subset11 = "class-stratified subset: 11 of 40 test images (seed 3)"
    for name in ("Natural", "FGSM", "PGD", "CW"):
        assert (attacks[name]["n_examples"], attacks[name]["subset"]) == (11, subset11), name
    assert attacks["FGSM"]["step_size"] == EPS and attacks["FGSM"]["steps"] == 1
    assert (attacks["PGD"]["steps"], attacks["CW"]["steps"]) == (4, 6)
    assert attacks["PGD"]["step_size"] == attacks["CW"]["step_size"] == STEP
    recorded = {k: attacks["AA"][k] for k in ("variant", "n_examples", "subset", "seed", "shards",
                                              "clean_accuracy", "robust_accuracy_after", "eps")}
    assert recorded == {"variant": "standard", "n_examples": 4,
                        "subset": "class-stratified subset: 4 of 40 test images (seed 3)",
                        "seed": 7, "shards": 2, "clean_accuracy": 75.0, "eps": EPS,
                        "robust_accuracy_after": {"apgd-ce": 75.0, "apgd-t": 50.0,
                                                  "fab-t": 50.0, "square": 50.0}}
    assert attacks["Mean"]["of"] == ["Natural", "FGSM", "PGD", "CW", "AA"]
    assert suite.autoattack_warnings == {"AA": ["standard warned"]}


def test_fgsm_s_nan_logits_are_refused_under_fgsm(aa_calls, monkeypatch) -> None:
    """FGSM's points give NaN logits: the core suite names FGSM (not a later attack)."""
    model, x, y, _ = data()
    monkeypatch.setattr(evaluation, "fgsm", lambda objective, x_in, *, eps: x_in + float("nan"))
    with pytest.raises(NonFiniteOutputs, match=r"on 11 of 11 images under FGSM;"):
        core_suite(model, x, y, eps=EPS, step_size=STEP, evaluation=EVALUATION, seed=SEED)
    assert aa_calls == []


def test_an_autoattack_subset_larger_than_the_images_is_all_of_them(aa_calls) -> None:
    model, x, y, _ = data()
    x, y = x[:4], y[:4]
    evaluation_ = {**EVALUATION, "autoattack": {**EVALUATION["autoattack"], "n_examples": 9}}
    suite = core_suite(model, x, y, eps=EPS, step_size=STEP, evaluation=evaluation_, seed=SEED)
    assert len(aa_calls[0]["x"]) == 4
    assert suite.attacks["AA"]["n_examples"] == 4
    assert suite.attacks["AA"]["subset"] == "full test set (4 images)"


# --- the extra suite and its checks ------------------------------------------------------------

CORE = SuiteResult(  # hand-made numbers, none of which the model's attacks could give
    accuracy={"Natural": 90.0, "FGSM": 60.0, "PGD": 20.0, "CW": 15.0, "AA": 12.0, "Mean": 30.0},
    attacks={"AA": {"clean_accuracy": 75.0,
                    "robust_accuracy_after": {"apgd-ce": 75.0, "apgd-t": 50.0, "fab-t": 50.0,
                                              "square": 50.0}}},
    checks={}, autoattack_warnings={"AA": ["standard warned"]}, per_image={})


@pytest.fixture
def nrf_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake(model, x, y, *, eps, step_size, config, batch_size, generator):
        calls.append({"n": len(x), "seed": fresh_seed(generator), "eps": eps,
                      "step_size": step_size})
        return 40.0, {"layer": "fc", "channels": 3, "non_robust_fraction": 0.5}

    monkeypatch.setattr(evaluation, "nrf_accuracy", fake)
    return calls


def test_the_extra_suite_reads_the_core_numbers_in_their_places(pgd_calls, aa_calls, nrf_calls,
                                                                tmp_path: Path) -> None:
    model, x, y, _ = data()
    called = []
    suite = extra_suite(model, x, y, core=lambda: called.append(1) or CORE, eps=EPS,
                        step_size=STEP, evaluation=EVALUATION, seed=SEED, test_set_size=40,
                        shard_dir=tmp_path)
    assert called == [1]
    assert [(c["variant"], len(c["x"]), c["shard_dir"]) for c in aa_calls] == [
        ("paper", 4, tmp_path)]
    assert nrf_calls == [{"n": 11, "seed": SEED, "eps": EPS, "step_size": STEP}]
    assert suite.accuracy == {"AA-paper": 25.0, "NRF": 40.0}
    assert suite.attacks["AA-paper"]["clean_accuracy"] == 100.0
    assert suite.attacks["AA-paper"]["n_examples"] == 4
    assert suite.attacks["NRF"]["n_examples"] == 11
    assert suite.attacks["NRF"]["subset"] == "class-stratified subset: 11 of 40 test images (seed 3)"
    assert suite.autoattack_warnings == {"AA-paper": ["paper warned"]}
    # The checks' own PGD points: steps 2 and 8 at eps; eps x 0, 0.5, 2 at 4 steps (eps x 1 at
    # 4 steps is the table's PGD); each from a fresh generator seeded by `seed`, in 3 batches.
    points = [(EPS, STEP, 2), (EPS, STEP, 8), (0.0, 0.0, 4), (EPS / 2, STEP / 2, 4),
              (2 * EPS, 2 * STEP, 4)]
    assert len(pgd_calls) == 3 * len(points)
    assert pgd_calls[::3] == [(round(e, 9), round(a, 9), n, SEED) for e, a, n in points]
    checks = suite.checks
    steps, eps = checks["pgd_steps_monotone"], checks["pgd_eps_monotone"]
    assert steps["steps"] == [2, 4, 8] and steps["accuracy"][1] == 20.0
    assert eps["eps"] == pytest.approx([0.0, 0.05, 0.1, 0.2])
    assert eps["accuracy"][0] == round(NATURAL, 4) and eps["accuracy"][2] == 20.0
    assert steps["tolerance"] == eps["tolerance"] == 0.5
    zero = checks["eps_zero_equals_natural"]
    assert zero["natural"] == {"PGD": 90.0, "AA": 100.0, "AA-paper": 100.0}
    assert zero["at_eps_zero"] == {"PGD": round(NATURAL, 4), "AA": 75.0, "AA-paper": 100.0}
    assert not zero["passed"]
    square = checks["square_not_better_than_white_box"]
    assert (square["white_box"], square["after_square"], square["passed"]) == (50.0, 50.0, True)
    assert checks["autoattack_no_warnings"]["warnings"] == 2
    fgsm = checks["pgd_not_weaker_than_fgsm"]
    assert (fgsm["fgsm"], fgsm["pgd"], fgsm["tolerance"], fgsm["passed"]) == (60.0, 20.0, 0.5,
                                                                           True)


def test_the_checks_pgd_points_refuse_nan_logits(aa_calls, nrf_calls, monkeypatch) -> None:
    """Finite at eps, NaN at 2 eps (the eps grid's last point): refused, not read as class 0."""
    model, x, y, _ = data()
    real = evaluation.pgd

    def far_is_nan(objective, x_in, *, eps, **kw):
        out = real(objective, x_in, eps=eps, **kw)
        return out + float("nan") if eps > 1.5 * EPS else out

    monkeypatch.setattr(evaluation, "pgd", far_is_nan)
    with pytest.raises(NonFiniteOutputs, match=r"on 11 of 11 images under PGD;"):
        extra_suite(model, x, y, core=CORE, eps=EPS, step_size=STEP, evaluation=EVALUATION,
                    seed=SEED)


# --- merge ---------------------------------------------------------------------------------

def test_merge_keeps_the_tables_order_the_core_mean_flags_and_both_warnings() -> None:
    core = SuiteResult(accuracy={"Natural": 90.0, "FGSM": 60.0, "PGD": 20.0, "CW": 15.0,
                                 "AA": 12.0, "Mean": 30.0},
                       attacks={"AA": {"seed": 0}}, checks={},
                       autoattack_warnings={"AA": ["a"]}, per_image={"AA": "10"})
    extra = SuiteResult(accuracy={"AA-paper": 14.0, "NRF": 16.0}, attacks={"NRF": {"steps": 4}},
                        checks={"c": {"passed": True}}, autoattack_warnings={"AA-paper": ["b"]},
                        per_image={})
    merged = merge(core, extra)
    assert list(merged.accuracy.items()) == [
        ("Natural", 90.0), ("FGSM", 60.0), ("PGD", 20.0), ("CW", 15.0), ("AA", 12.0),
        ("AA-paper", 14.0), ("NRF", 16.0), ("Mean", 30.0)]
    assert merged.per_image == {"AA": "10"} and merged.checks == {"c": {"passed": True}}
    assert merged.autoattack_warnings == {"AA": ["a"], "AA-paper": ["b"]}
    assert merged.attacks == {"AA": {"seed": 0}, "NRF": {"steps": 4}}


# --- wscat.metrics -------------------------------------------------------------------------

def test_harmonic_mean_by_hand() -> None:
    assert harmonic_mean([50.0, 25.0]) == pytest.approx(2 / (1 / 50 + 1 / 25))
    assert harmonic_mean([10.0, 20.0, 40.0]) == pytest.approx(3 / (0.1 + 0.05 + 0.025))
    assert harmonic_mean([80.0, 0.0, 40.0]) == 0.0


@pytest.mark.parametrize("value, ok", [(0, True), (100, True), (0.0, True), (100.0, True),
                                       (55, True), (True, False), (float("nan"), False),
                                       (float("inf"), False), (-0.01, False), (100.01, False),
                                       ("50", False)])
def test_is_percent(value: object, ok: bool) -> None:
    assert is_percent(value) is ok


def test_an_empty_record_and_unrecorded_square_settings_are_no_difference() -> None:
    order = {"order": list(AA_PAPER["order"])}
    assert aa_paper_difference({}) is None
    assert aa_paper_difference({**order, "square": {"p_init": 0.8}}) is None
    assert aa_paper_difference({**order, "square": {"p_init": 0.5, "restarts": 1}}) == (
        "AA-paper's Square ran with p_init 0.5; it runs with p_init 0.8 now")
    assert aa_paper_difference({"order": ["apgd-ce", "apgd-t", "square", "fab-t"]}) == (
        "AA-paper ran apgd-ce, apgd-t, square, fab-t; it runs apgd-ce, apgd-t, fab-t, square now")
