"""What must be recomputed and which settings apply, against hand-worked expectations (found by
mutation testing of wscat/workflow.py, wscat/config.py, trainer._fingerprint and wscat/targets.py).

The rules checked, each from the docs or the code's own comments:
- a training's fingerprint (workflow.train_params) holds its dataset, its schedule
  (`training[dataset]` with `per_method[method]` over it), its model, its resolved method and the
  `validation` steps, and its labelers' trainings (pseudo-labels, generated images); the test-time
  attacks (`evaluation`) are not in it (params.yaml's comment above `validation`);
- an edit of methods.wscat.beta changes WSCAT's and its variants' trainings (WSCAT-sup, -fixed,
  -self, -std: `base: wscat`) and no other method's; an edit of the labeler mt changes the methods
  trained on its pseudo-labels only;
- the core evaluation's fingerprint leaves out NRF and the checks, the extras' has them and
  AA-paper; both hold the threat model (eps, eval_step_size) and `deterministic`;
- validation_fingerprint: checkpoint, batch size, validation's PGD steps, threat model;
- a split depends on SPLIT_KEYS and the source, never on eps;
- resolve_method: a variant's own knobs win on every dataset, null drops a knob, base chains
  resolve level by level, per_dataset entries merge; method_for / training_for /
  evaluation_for lay the dataset's (method's) overrides over the defaults, blocks key by key;
- falls_short: steps * step_size < eps, rounding forgiven; short_attacks' numbers by hand;
- check_numbers: NaN/inf anywhere (lists too), integers in [-2^31, 2^31-1], seeds up to 2^32-1;
- targets: table: true unless said, the demo is the first experiment with a table.
Expected values are written out by hand; fingerprints are only compared with each other.
"""
from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.tiny import tiny_params
from wscat import targets, workflow
from wscat.config import (ConfigError, RunConfig, check_numbers, evaluation_for, falls_short,
                          method_for, resolve_method, short_attacks, training_for, validate_params,
                          validation_for)
from wscat.workflow import (evaluation_fingerprint, extra_fingerprint, fingerprint, split_params,
                            to_json, training_fingerprint, validation_fingerprint)

ROOT = Path(__file__).resolve().parents[2]
Params = dict[str, Any]
ALL_METHODS = ("standard", "trades", "wscat-sup", "mt", "rst", "wscat", "puat", "rlfat", "dmat",
               "wscat-fixed", "wscat-self", "wscat-std")


@functools.cache
def _parsed() -> Params:
    return yaml.load((ROOT / "params.yaml").read_text(),
                     Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def params_yaml() -> Params:
    """params.yaml as written (paper section unexpanded), a fresh copy."""
    return copy.deepcopy(_parsed())


def prints(params: Params, dataset: str = "digits", model: str = "cnn") -> dict[str, str]:
    return {m: training_fingerprint(params, dataset, model, m) for m in ALL_METHODS}


@functools.cache
def _prints_now(dataset: str, model: str) -> dict[str, str]:
    return prints(params_yaml(), dataset, model)


def changed_by(edit: Callable[[Params], None], dataset: str = "digits",
               model: str = "cnn") -> set[str]:
    """The methods whose training fingerprint on (dataset, model) an edit of params.yaml changes."""
    before = _prints_now(dataset, model)
    params = params_yaml()
    edit(params)
    after = prints(params, dataset, model)
    return {m for m in ALL_METHODS if before[m] != after[m]}


WSCAT_FAMILY = {"wscat", "wscat-sup", "wscat-fixed", "wscat-self", "wscat-std"}
ON_MT_LABELS = {"wscat", "wscat-fixed", "wscat-self"}  # data: pseudo, labeler: mt


# --- training fingerprints: which edits retrain which methods ----------------------------------

def test_an_edit_of_wscat_beta_retrains_wscat_and_its_variants_only() -> None:
    assert changed_by(lambda p: p["methods"]["wscat"].update(beta=0.2)) == WSCAT_FAMILY


def test_an_edit_of_a_variants_own_knob_retrains_that_variant_only() -> None:
    assert changed_by(lambda p: p["methods"]["wscat-fixed"].update(temperature=0.5)) == {
        "wscat-fixed"}


def test_an_edit_of_the_labeler_retrains_the_methods_on_its_pseudo_labels() -> None:
    """mt labels WSCAT, -fixed and -self; WSCAT-sup (labeler: null, data: labelled) and WSCAT-std
    (labeler: standard) read none of it, nor DMAT without generated images."""
    edit = lambda p: p["methods"]["mt"]["per_dataset"]["digits"].update(teacher_decay=0.8)  # noqa: E731
    assert changed_by(edit) == {"mt", *ON_MT_LABELS}
    assert changed_by(lambda p: p["methods"]["standard"].update(selection="last")) == {
        "standard", "rst", "wscat-std"}


def test_generated_images_bind_dmat_to_their_labeler() -> None:
    def with_generated(p: Params) -> None:
        p["methods"]["dmat"]["generated"] = "data/generated/digits.npz"

    def and_mt_edited(p: Params) -> None:
        with_generated(p)
        p["methods"]["mt"].update(consistency=10.0)

    base = params_yaml()
    with_generated(base)
    edited = params_yaml()
    and_mt_edited(edited)
    assert (training_fingerprint(base, "digits", "cnn", "dmat")
            != training_fingerprint(edited, "digits", "cnn", "dmat"))
    # without a labeler for them, an mt edit leaves DMAT alone
    for p in (base, edited):
        p["methods"]["dmat"]["generated_labeler"] = None
    assert (training_fingerprint(base, "digits", "cnn", "dmat")
            == training_fingerprint(edited, "digits", "cnn", "dmat"))


def test_per_dataset_knobs_retrain_on_their_dataset_only() -> None:
    assert changed_by(lambda p: p["methods"]["wscat"]["per_dataset"]["cifar100"].update(
        lam=2.0)) == set()
    assert changed_by(lambda p: p["methods"]["wscat"]["per_dataset"].update(
        digits={"lam": 2.0})) == WSCAT_FAMILY


def test_per_method_schedules_retrain_that_method_and_those_on_its_labels() -> None:
    """training.digits.per_method.mt is mt's schedule alone (and so its labels')."""
    assert changed_by(lambda p: p["training"]["digits"]["per_method"]["mt"].update(
        epochs=90)) == {"mt", *ON_MT_LABELS}
    assert changed_by(lambda p: p["training"]["digits"].update(lr=0.05)) == set(ALL_METHODS)
    assert changed_by(lambda p: p["training"]["digits"]["per_method"].update(
        trades={"epochs": 41})) == {"trades"}


def test_dataset_model_and_validation_edits_retrain_everything_evaluation_edits_nothing() -> None:
    assert changed_by(lambda p: p["datasets"]["digits"].update(eps=0.2)) == set(ALL_METHODS)
    assert changed_by(lambda p: p["models"]["cnn"].update(width=32)) == set(ALL_METHODS)
    assert changed_by(lambda p: p["models"]["cnn-wide"].update(width=48)) == set()
    assert changed_by(lambda p: p["models"]["cnn-wide"].update(width=48),
                      model="cnn-wide") == set(ALL_METHODS)
    assert changed_by(lambda p: p["validation"].update(pgd_steps=10)) == set(ALL_METHODS)
    assert changed_by(lambda p: p["validation"].update(cw_steps=10)) == set(ALL_METHODS)
    assert changed_by(lambda p: p["evaluation"].update(pgd_steps=50, cw_steps=50)) == set()
    assert changed_by(lambda p: p["evaluation"]["per_dataset"]["digits"].update(
        batch_size=64)) == set()
    assert changed_by(lambda p: p["datasets"]["cifar10"].update(eps=0.1)) == set()


def test_a_labeler_chain_that_comes_back_is_refused_in_one_line() -> None:
    params = params_yaml()
    params["methods"]["mt"].update(data="pseudo", labeler="wscat")
    with pytest.raises(ConfigError, match="comes back to it"):
        training_fingerprint(params, "digits", "cnn", "wscat")


def test_fingerprint_is_sixteen_hex_digits_of_the_sha256_of_sorted_json() -> None:
    # SHA-256("abc") = ba7816bf 8f01cfea 414140de ... (FIPS 180-2's example)
    assert fingerprint("abc") == "ba7816bf8f01cfea"
    assert to_json({"b": 1, "a": [2, None]}) == '{"a": [2, null], "b": 1}'


# --- evaluation and validation fingerprints ---------------------------------------------------

def _eval_prints(p: Params, dataset: str = "digits") -> tuple[str, str, str]:
    return (evaluation_fingerprint(p, dataset), extra_fingerprint(p, dataset),
            validation_fingerprint(p, dataset))


def _which(edit: Callable[[Params], None], dataset: str = "digits") -> tuple[bool, bool, bool]:
    """(core, extra, validation): which evaluation fingerprints an edit changes."""
    params = params_yaml()
    edit(params)
    before, after = _eval_prints(params_yaml(), dataset), _eval_prints(params, dataset)
    return before[0] != after[0], before[1] != after[1], before[2] != after[2]


@pytest.mark.parametrize("edit, expected", [
    (lambda p: p["evaluation"]["nrf"].update(steps=40), (False, True, False)),
    (lambda p: p["evaluation"]["checks"].update(tolerance=2.0), (False, True, False)),
    (lambda p: p["evaluation"].update(pgd_steps=40), (True, True, False)),
    (lambda p: p["evaluation"].update(cw_steps=40), (True, True, False)),
    (lambda p: p["evaluation"].update(checkpoint="last"), (True, True, True)),
    (lambda p: p["evaluation"]["per_dataset"]["digits"].update(batch_size=64), (True, True, True)),
    (lambda p: p["evaluation"]["per_dataset"]["cifar10-proxy"].update(batch_size=64),
     (False, False, False)),
    (lambda p: p["evaluation"]["per_dataset"]["digits"]["autoattack"].update(seed=3),
     (True, True, False)),
    (lambda p: p["validation"].update(pgd_steps=7), (False, False, True)),
    (lambda p: p["validation"].update(cw_steps=7), (False, False, False)),
    (lambda p: p["datasets"]["digits"].update(eval_step_size=0.03), (True, True, True)),
    (lambda p: p["datasets"]["digits"].update(eps=0.2), (True, True, True)),
    (lambda p: p["datasets"]["digits"].update(train_step_size=0.05), (False, False, False)),
    (lambda p: p["training"]["digits"].update(deterministic=False), (True, True, False)),
    (lambda p: p["training"]["digits"].update(lr=0.2), (False, False, False)),
])
def test_which_evaluation_fingerprints_an_edit_changes(edit: Callable[[Params], None],
                                                        expected: tuple[bool, bool, bool]) -> None:
    assert _which(edit) == expected


def test_the_proxys_own_evaluation_entry_is_in_its_fingerprint() -> None:
    assert _which(lambda p: p["evaluation"]["per_dataset"]["cifar10-proxy"]["autoattack"].update(
        shard_size=10), "cifar10-proxy") == (True, True, False)


def test_aa_paper_fixed_in_code_is_in_the_extras_fingerprint_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params = params_yaml()
    before = _eval_prints(params)
    monkeypatch.setattr(workflow, "AA_PAPER", {"version": "other"})
    after = _eval_prints(params)
    assert (before[0] == after[0], before[1] != after[1], before[2] == after[2]) == (
        True, True, True)


def test_the_split_depends_on_its_keys_and_source_not_the_threat_model() -> None:
    params = params_yaml()
    assert json.loads(split_params(params, "digits")) == {
        "source": "digits", "test_fraction": 0.2, "labelled": 100, "val_fraction": 0.2,
        "val_max": 2000}
    params["datasets"]["digits"].update(subset={"train": 10}, unlabelled_fraction=0.5, eps=0.3,
                                        source="other")
    assert json.loads(split_params(params, "digits")) == {
        "source": "other", "test_fraction": 0.2, "labelled": 100, "val_fraction": 0.2,
        "val_max": 2000, "subset": {"train": 10}, "unlabelled_fraction": 0.5}
    del params["datasets"]["digits"]["source"]
    assert json.loads(split_params(params, "digits"))["source"] == "digits"


def test_your_own_images_split_anew_when_their_file_changes() -> None:
    """`source: npz`: the file's md5 is the split's too. A replaced file (its md5 line updated
    or deleted, as the md5 refusal says) retrains every run; its labels need a new split as
    well, not the old file's indices (which `load_split_of` would otherwise accept). The same
    file under another path splits the same."""
    params = params_yaml()
    params["datasets"]["mine"] = {**params["datasets"]["digits"], "source": "npz",
                                  "path": "data/mine.npz", "md5": "a" * 32}
    before = json.loads(split_params(params, "mine"))
    assert before["md5"] == "a" * 32
    params["datasets"]["mine"]["md5"] = "b" * 32
    assert json.loads(split_params(params, "mine")) == {**before, "md5": "b" * 32}
    del params["datasets"]["mine"]["md5"]
    assert json.loads(split_params(params, "mine")) == {**before, "md5": None}
    params["datasets"]["mine"].update(md5="a" * 32, path="elsewhere/mine.npz")
    assert json.loads(split_params(params, "mine")) == before
    assert "md5" not in json.loads(split_params(params, "digits"))


def test_a_paper_tier_reads_the_experiments_it_names() -> None:
    base = workflow.paper_section(params_yaml(), "digits")
    named, unnamed = params_yaml(), params_yaml()
    named["experiments"]["digits-ablation"]["seeds"] = [1, 2]
    unnamed["experiments"]["digits-fresh"]["seeds"] = [10]
    assert workflow.paper_section(named, "digits") != base
    assert workflow.paper_section(unnamed, "digits") == base


def test_fig_similarity_reruns_when_a_setting_of_the_aes_it_makes_changes() -> None:
    """Its AEs are made by TRADES', RLFAT's and WSCAT's inner maximisations on one WSCAT
    checkpoint: RLFAT's blocks or the threat model change them while that checkpoint stands."""
    def prints(params: dict) -> tuple[str, str]:
        return tuple(workflow.analysis_params(params, "digits", figure, "digits")
                     for figure in ("Fig-similarity", "Fig-feature"))

    base = prints(params_yaml())
    for edit in (lambda p: p["methods"]["rlfat"].update(blocks=4),
                 lambda p: p["datasets"]["digits"].update(train_step_size=0.01)):
        params = params_yaml()
        edit(params)
        similarity, feature = prints(params)
        assert similarity != base[0] and feature == base[1]
    other = params_yaml()
    other["methods"]["dmat"]["lam"] = 9.0  # not among Fig-similarity's methods
    assert prints(other) == base


# --- which settings apply: resolve_method, method_for, training_for, evaluation_for -------------

def test_a_variants_own_knobs_win_on_every_dataset_and_its_overrides_merge() -> None:
    params = params_yaml()
    params["methods"]["wscat-fixed"].update(beta=0.1, per_dataset={"imagenet32": {"lam": 2.0}})
    assert method_for(params, "wscat-fixed", "imagenet32") == {
        "objective": "wscat", "data": "pseudo", "labeler": "mt", "selection": "cw",
        "positives": "labels", "lam": 2.0, "beta": 0.1, "temperature": 0.07, "anchors": "both",
        "label_smoothing": 0.1, "projection_dim": 256}
    assert method_for(params, "wscat-fixed", "cifar100")["lam"] == 1.0
    assert method_for(params, "wscat-fixed", "digits")["lam"] == 5.0
    assert resolve_method(params, "wscat-fixed")["per_dataset"] == {
        "cifar100": {"lam": 1.0}, "imagenet32": {"lam": 2.0}}


def test_a_variant_inherits_its_bases_per_dataset_entries() -> None:
    params = params_yaml()
    assert method_for(params, "wscat-self", "imagenet32")["beta"] == 0.3
    assert method_for(params, "wscat-self", "imagenet32")["lam"] == 1.0
    assert method_for(params, "wscat-self", "imagenet32")["positives"] == "self"
    assert method_for(params, "wscat", "imagenet32")["lam"] == 1.0
    assert method_for(params, "wscat", "digits")["lam"] == 5.0
    assert method_for(params, "wscat")["beta"] == 0.05


def test_null_drops_a_knob_and_a_base_chain_resolves_level_by_level() -> None:
    params = params_yaml()
    sup = method_for(params, "wscat-sup", "digits")
    assert "labeler" not in sup and sup["data"] == "labelled" and sup["objective"] == "wscat"
    params["methods"]["twice"] = {"base": "wscat-fixed", "temperature": 0.2}
    twice = method_for(params, "twice", "imagenet32")
    assert (twice["positives"], twice["temperature"], twice["beta"], twice["objective"]) == (
        "labels", 0.2, 0.3, "wscat")
    params["methods"]["wscat"]["base"] = "twice"
    with pytest.raises(ConfigError, match="circular base chain"):
        resolve_method(params, "wscat-fixed")


def test_per_method_overrides_the_schedule_for_that_method_only() -> None:
    params = params_yaml()
    assert training_for(params, "digits", "mt")["epochs"] == 100
    assert training_for(params, "digits", "wscat")["epochs"] == 40
    assert training_for(params, "digits")["epochs"] == 40
    assert "per_method" not in training_for(params, "digits", "mt")
    assert training_for(params, "cifar10", "mt")["warmup_fraction"] == 0.0
    assert training_for(params, "cifar10", "mt")["epochs"] == 100
    assert training_for(params, "cifar10", "trades")["warmup_fraction"] == 0.025


def test_evaluation_per_dataset_merges_blocks_key_by_key() -> None:
    params = params_yaml()
    proxy = evaluation_for(params, "cifar10-proxy")
    assert proxy["batch_size"] == 1000 and "per_dataset" not in proxy
    assert proxy["autoattack"] == {"n_examples": None, "seed": 0, "shard_size": 1000}
    params["evaluation"]["autoattack"]["n_examples"] = 100
    digits = evaluation_for(params, "digits")
    assert digits["batch_size"] == 512
    assert digits["autoattack"] == {"n_examples": None, "seed": 0, "shard_size": 500}
    assert digits["nrf"]["steps"] == 20 and digits["nrf"]["n_examples"] is None
    assert evaluation_for(params, "cifar10")["autoattack"]["n_examples"] == 100
    assert evaluation_for(params, "cifar10")["batch_size"] == 256


def test_validation_steps_come_from_validation_else_the_evaluation_on_that_dataset() -> None:
    params = params_yaml()
    params["validation"] = {"pgd_steps": 11, "cw_steps": 13}
    params["evaluation"]["per_dataset"]["digits"]["pgd_steps"] = 7
    assert validation_for(params, "digits") == {"pgd_steps": 11, "cw_steps": 13}
    del params["validation"]
    assert validation_for(params, "digits") == {"pgd_steps": 7, "cw_steps": 20}


def test_a_run_config_takes_each_section_for_its_dataset_and_method() -> None:
    params = params_yaml()
    run = RunConfig.from_params(params, dataset="digits", model="cnn", method="mt", seed=1)
    assert run.training["epochs"] == 100
    assert run.method_params["teacher_decay"] == 0.7
    assert run.evaluation["batch_size"] == 512
    assert run.validation == {"pgd_steps": 20, "cw_steps": 20}


# --- falls_short, short_attacks --------------------------------------------------------------

def test_falls_short_is_steps_times_step_below_eps_rounding_forgiven() -> None:
    assert falls_short(2, 0.5, 1.0) is False       # exactly eps: reaches
    assert falls_short(8, 1 / 255, 8 / 255) is False
    assert falls_short(13, 0.007 / 13, 0.007) is False  # 0.006999999999999999: rounding
    assert falls_short(1, 1 - 1e-9, 1.0) is False  # short by the forgiven rounding, not more
    assert falls_short(7, 1 / 255, 8 / 255) is True
    assert falls_short(99, 0.01, 1.0) is True


def _short(eps: float, step: float, **evaluation: Any) -> str | None:
    params = params_yaml()
    params["datasets"]["digits"].update(eps=eps, eval_step_size=step)
    params["evaluation"].update({k: v for k, v in evaluation.items() if k != "nrf_steps"})
    if "nrf_steps" in evaluation:
        params["evaluation"]["nrf"]["steps"] = evaluation["nrf_steps"]
    return short_attacks(params, "digits")


def test_short_attacks_names_the_steps_needed_by_hand() -> None:
    # 0.07 / 0.01 = 7.000000000000001 in floats: 7 steps are needed, not 8
    line = _short(0.07, 0.01, pgd_steps=5, cw_steps=20, nrf_steps=20)
    assert line is not None and "raise evaluation.pgd_steps to 7 or more" in line
    assert "PGD-5 moves at most 5 x 0.01 = 0.05 < eps = 0.07" in line
    # 0.15 / 0.04 = 3.75: 4 steps
    line = _short(0.15, 0.04, pgd_steps=3, cw_steps=4, nrf_steps=4)
    assert line is not None and "to 4 or more" in line


def test_short_attacks_reads_nrf_steps_inside_its_block_and_the_fewest_steps() -> None:
    line = _short(0.15, 0.01875, pgd_steps=20, cw_steps=20, nrf_steps=5)
    assert line is not None and "raise evaluation.nrf.steps to 8 or more" in line
    # PGD-5 and CW-3: eval_step_size must reach eps in 3 steps: 0.15 / 3 = 0.05
    line = _short(0.15, 0.01875, pgd_steps=5, cw_steps=3, nrf_steps=20)
    assert line is not None and "eval_step_size to 0.05 or more" in line
    assert _short(0.15, 0.01875, pgd_steps=8, cw_steps=8, nrf_steps=8) is None


# --- check_numbers ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    {"evaluation": {"checks": {"eps_factors": [0.0, float("nan")]}}},
    {"a": [[1.0, float("inf")]]},
    {"training": {"digits": {"epochs": 2**31}}},
    {"training": {"digits": {"epochs": -2**31 - 1}}},
    {"experiments": {"d": {"seeds": [1, 2**32]}}},
    {"evaluation": {"subset_seed": 2**32}},
])
def test_check_numbers_refuses(value: Any) -> None:
    with pytest.raises(ConfigError):
        check_numbers(value)


@pytest.mark.parametrize("value", [
    {"training": {"digits": {"epochs": 2**31 - 1, "lr": -1e300}}},
    {"training": {"digits": {"epochs": -2**31}}},
    {"experiments": {"d": {"seeds": [0, 2**32 - 1, 2**31]}}},
    {"evaluation": {"subset_seed": 2**32 - 1}},
    {"flag": True},
])
def test_check_numbers_accepts(value: Any) -> None:
    check_numbers(value)


# --- validate_params: the refusals the schema cannot express ----------------------------------

def _refused(edit: Callable[[Params], None], match: str) -> None:
    params = tiny_params()
    edit(params)
    with pytest.raises(ConfigError, match=match):
        validate_params(params)


def test_per_dataset_may_not_change_the_objective() -> None:
    _refused(lambda p: p["methods"]["wscat"]["per_dataset"].update(digits={"objective": "trades"}),
             "not the objective")


def test_labelled_per_batch_up_to_the_batch_and_per_method_too() -> None:
    params = tiny_params()
    params["training"]["digits"].update(batch_size=64, labelled_per_batch=64)
    validate_params(params)
    _refused(lambda p: p["training"]["digits"].update(
        batch_size=64, labelled_per_batch=None, per_method={"mt": {"labelled_per_batch": 100}}),
        "per_method.mt.labelled_per_batch = 100 exceeds batch_size = 64")


def test_a_positive_eps_needs_positive_step_sizes() -> None:
    _refused(lambda p: p["datasets"]["digits"].update(eval_step_size=0.0), "step sizes")


@pytest.mark.parametrize("edit, match", [
    (lambda p: p["methods"]["trades"].update(labeler="mt"), "labeler is only used with data: pseudo"),
    (lambda p: p["methods"]["rst"].update(labeler="wscat"), "itself needs pseudo-labels"),
    (lambda p: p["methods"]["dmat"].update(generated_labeler="rst"), "generated_labeler"),
    (lambda p: p["experiments"]["digits"].update(reference="puat"), "is not one of its methods"),
    (lambda p: p["evaluation"]["per_dataset"].update(mnist={"batch_size": 8}),
     "^params.yaml: evaluation.per_dataset: unknown dataset 'mnist'; known datasets: cifar10, "),
    (lambda p: p["methods"]["wscat"]["per_dataset"].update(mnist={"lam": 1.0}),
     "per_dataset: unknown dataset 'mnist'; known datasets: cifar10, "),
    (lambda p: p["methods"]["rst"].update(labeler="mtt"),
     "^params.yaml: methods.rst.labeler: unknown method 'mtt'; known methods: dmat, mt, "),
    (lambda p: p["experiments"]["digits"]["methods"].append("madry"),
     "^params.yaml: experiments.digits.methods: unknown method 'madry'; known methods: dmat, "),
    (lambda p: p["training"]["digits"].update(per_method={"madry": {"epochs": 1}}),
     "^params.yaml: training.digits.per_method: unknown method 'madry'; known methods: dmat, "),
])
def test_cross_references_the_schema_cannot_express_are_refused(
        edit: Callable[[Params], None], match: str) -> None:
    _refused(edit, match)


@pytest.mark.parametrize("edit, match", [
    (lambda t: t["datasets"][0].update(dataset="digitz"),
     "^params.yaml: paper.digits.datasets: unknown dataset 'digitz'; known datasets: cifar10, "),
    (lambda t: t["similarity"].update(methods=["mtt"]),
     "^params.yaml: paper.digits.similarity.methods: unknown method 'mtt'; known methods: dmat, "),
    (lambda t: t["beta"].update(method="mtt"),
     "^params.yaml: paper.digits.beta.method: unknown method 'mtt'; known methods: dmat, "),
    (lambda t: t["supervised"]["runs"][0].update(models=["cnnn"]),
     "^params.yaml: paper.digits.supervised.runs: unknown model 'cnnn'; known models: cnn, "),
])
def test_a_paper_tier_naming_what_does_not_exist_is_refused_with_the_names_there_are(
        edit: Callable[[dict], None], match: str) -> None:
    params = params_yaml()
    edit(params["paper"]["digits"])
    with pytest.raises(ConfigError, match=match):
        validate_params(params)


def test_compile_mode_needs_compile_where_it_is_written() -> None:
    _refused(lambda p: p["training"]["digits"].update(
        compile=True, per_method={"mt": {"compile": False, "compile_mode": "default"}}),
        "per_method.mt: compile_mode")
    params = tiny_params()
    params["training"]["digits"].update(compile=True, per_method={"mt": {"compile_mode": "default"}})
    validate_params(params)
    params = tiny_params()
    params["training"]["digits"].update(compile=False, compile_mode="default",
                                        per_method={"mt": {"compile": True}})
    validate_params(params)


# --- targets ---------------------------------------------------------------------------------

def test_targets_table_by_default_and_the_demo_is_the_first_with_one() -> None:
    params = params_yaml()
    assert targets.has_table(params, "digits") is True
    assert targets.has_table(params, "digits-table2") is False
    assert targets.paper_tables(params, "digits-ablation") == [
        "results/paper/digits/Tab-ap-digits.tex"]
    assert targets.experiment_targets(params, "digits-table2") == [
        "results/paper/digits/Tab-RQ1-digits.tex"]
    params["experiments"] = {"digits-table2": params["experiments"]["digits-table2"],
                             "digits-ablation": params["experiments"]["digits-ablation"]}
    assert targets.default_experiment(params) == "digits-ablation"
    assert targets.default_targets(params) == ["results/tables/digits-ablation.tex"]
    assert targets.rule_name("table", "digits-ablation.v2") == "table_digits_ablation_v2"
    assert targets.valid_targets(params) == [
        "results/paper/digits/Tab-RQ1-digits.tex", "results/tables/digits-ablation.tex",
        "results/paper/digits/index.md", "results/paper/paper/index.md",
        "results/paper/cifar10-proxy/index.md"]
    with pytest.raises(ConfigError, match="table: false"):
        targets.table_experiment(params, "digits-table2")
    assert targets.table_experiment(params, "digits-ablation")["dataset"] == "digits"


# --- trainer._fingerprint: what a resumed run must have been made with -------------------------

def test_the_resume_fingerprint_covers_every_tensor_the_configs_and_the_training() -> None:
    import dataclasses

    import torch

    from wscat.training import trainer
    from wscat.data.training_data import TrainingData

    def data() -> TrainingData:
        g = torch.Generator().manual_seed(0)
        return TrainingData(
            labelled_x=torch.rand(8, 1, 8, 8, generator=g), labelled_y=torch.arange(8) % 4,
            unlabelled_x=torch.rand(4, 1, 8, 8, generator=g), unlabelled_y=torch.arange(4) % 4,
            validation_x=torch.rand(4, 1, 8, 8, generator=g), validation_y=torch.arange(4) % 4,
            num_classes=4, mean=(0.5,), std=(0.29,), n_train=12)

    params = tiny_params()
    run = RunConfig.from_params(params, dataset="digits", model="cnn", method="wscat", seed=1)
    base = trainer._fingerprint(run, data(), {"training_fingerprint": "a" * 16})
    assert trainer._fingerprint(run, data(), {"training_fingerprint": "a" * 16}) == base
    assert trainer._fingerprint(run, data(), {"training_fingerprint": "b" * 16}) != base
    others = [data() for _ in range(7)]
    others[0].unlabelled_y = others[0].unlabelled_y.roll(1)   # pseudo-labels of a new labeler
    others[1].validation_x = others[1].validation_x.flip(0)
    others[2].num_classes = 5
    others[3].labelled_x = others[3].labelled_x.reshape(8, 1, 4, 16)  # same bytes, another shape
    others[4].labelled_per_batch = 4
    others[5].mean = (0.4,)
    others[6].n_train = 13
    assert all(trainer._fingerprint(run, d, {"training_fingerprint": "a" * 16}) != base
               for d in others)
    for changed in (dataclasses.replace(run, validation={"pgd_steps": 5, "cw_steps": 9}),
                    dataclasses.replace(run, seed=2)):
        assert trainer._fingerprint(changed, data(), {"training_fingerprint": "a" * 16}) != base
    test_time = dataclasses.replace(run, evaluation={**run.evaluation, "pgd_steps": 99})
    assert trainer._fingerprint(test_time, data(), {"training_fingerprint": "a" * 16}) == base


# --- rebuild_token: only a table that exists and lost an input is rebuilt ---------------------

def test_a_table_not_built_yet_gets_no_rebuild_token(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Its missing inputs are built anyway (the table's job runs): nothing recorded, no line."""
    from wscat.rebuild import NOT_RECORDED, rebuild_token

    table, metrics = tmp_path / "never-built.tex", tmp_path / "missing.json"
    state = tmp_path / "state"
    assert rebuild_token([str(table)], [str(metrics)], state=state) is NOT_RECORDED
    assert not state.exists() and capsys.readouterr().err == ""


# --- a built-in objective takes its constructor's knobs, and no other's -------------------------

def test_each_builtin_objective_s_schema_names_are_its_constructor_s_knobs() -> None:
    """params.schema.yaml lists, per built-in objective, the names its entry may hold: what the
    pipeline reads (own_method.PIPELINE_KEYS; the generated-image keys for TRADES only) and the
    knobs of the objective's constructor (wscat.methods.knobs). A knob of another objective was
    dropped unseen (build_method passes the constructor's only): TRADES with a beta, Standard
    with label smoothing, Mean Teacher with a lam ran without them."""
    from wscat.config import _schema
    from wscat.methods import OBJECTIVES, knobs
    from wscat.own_method import PIPELINE_KEYS

    generated = {"generated", "generated_fraction", "generated_labeler"}
    listed = {}
    for rule in _schema()["$defs"]["builtin_rules"]["allOf"]:
        names = rule.get("then", {}).get("propertyNames", {}).get("enum")
        if names is not None:
            listed[rule["if"]["properties"]["objective"]["const"]] = set(names)
    assert set(listed) == set(OBJECTIVES)
    for objective, names in listed.items():
        pipeline = PIPELINE_KEYS - (set() if objective == "trades" else generated)
        assert names == pipeline | set(knobs(objective)), objective


@pytest.mark.parametrize("method, knob, value", [
    ("trades", "beta", 6.0), ("standard", "label_smoothing", 0.1), ("mt", "lam", 1.0),
    ("wscat", "consistency", 2.0), ("rlfat", "temperature", 0.5)])
def test_a_knob_the_objective_does_not_take_is_refused(method: str, knob: str,
                                                       value: float) -> None:
    params = params_yaml()
    params["methods"][method][knob] = value
    with pytest.raises(ConfigError, match=f"'{knob}' is not one of"):
        validate_params(params)


def test_a_variant_with_a_knob_its_base_s_objective_does_not_take_is_refused() -> None:
    params = params_yaml()
    params["methods"]["wscat-x"] = {"base": "wscat", "consistency": 3.0}
    with pytest.raises(ConfigError, match=r"methods\.wscat-x: 'consistency' is not one of"):
        validate_params(params)


@pytest.mark.parametrize("edit, says", [
    # each passed validation, then failed in its figure's job (a KeyError, a ValueError)
    (lambda tier: tier["beta"].update(method="trades"),
     "paper.digits.beta.method: 'trades' has no beta to sweep (objective trades)"),
    (lambda tier: tier["similarity"].update(model="trades"),
     "paper.digits.similarity.model: 'trades' is not a WSCAT method (objective trades)"),
    (lambda tier: tier["similarity"].update(model="nope"),
     "paper.digits.similarity.model: unknown method 'nope'; known methods:"),
    (lambda tier: tier["similarity"].update(methods=["trades", "mt"]),
     "paper.digits.similarity.methods: 'mt' (objective mean_teacher) makes no AE"),
    # passed, and silently attacked with WSCAT-self's l_con (no labels on the test images)
    (lambda tier: tier["similarity"].update(model="wscat-fixed"),
     "paper.digits.similarity.model: 'wscat-fixed' takes its positives from labels"),
    (lambda tier: tier["similarity"].update(methods=["trades", "wscat-fixed"]),
     "paper.digits.similarity.methods: 'wscat-fixed' takes its positives from labels"),
])
def test_a_figure_s_method_that_cannot_make_it_is_refused_at_load(edit, says: str) -> None:
    params = params_yaml()
    edit(params["paper"]["digits"])
    with pytest.raises(ConfigError, match=re.escape(says)):
        validate_params(params)


@pytest.mark.parametrize("edit, says", [
    # each passed validation and failed in the first training job (or, for the checks, tested
    # the wrong direction: accuracy compared with the previous point's instead of the next's)
    (lambda p: p["models"]["cnn"].update(depth=16), "'depth' is not one of ['architecture', "
                                                    "'width']"),
    (lambda p: p["models"]["wrn-16-4"].update(depth=27), "models.wrn-16-4.depth: 27 is no "
                                                         "WideResNet depth (6n+4"),
    (lambda p: p["models"]["resnet-50"].update(depth=51), "51 is not one of [18, 34, 50, 101, "
                                                          "152]"),
    (lambda p: p["models"]["resnet-50"].update(depth=34), "34 is not one of [50, 101, 152]"),
    (lambda p: p["evaluation"]["checks"].update(pgd_steps=[40, 20, 10]),
     "evaluation.checks.pgd_steps: [40, 20, 10] must increase"),
    (lambda p: p["evaluation"]["checks"].update(eps_factors=[0.0, 1.0, 0.5]),
     "evaluation.checks.eps_factors: [0.0, 1.0, 0.5] must increase"),
])
def test_a_model_or_check_setting_no_job_could_use_is_refused_at_load(edit, says: str) -> None:
    params = params_yaml()
    edit(params)
    with pytest.raises(ConfigError, match=re.escape(says)):
        validate_params(params)


def test_a_puat_run_that_never_leaves_pretraining_is_refused() -> None:
    """pretrain_epochs at or past the run's epochs: PUAT's adversarial game never starts, and it
    would train as Mean Teacher under PUAT's name (the proxy's 15 epochs against the paper's 50);
    refused when PUAT is to train, with what to set. One half-epoch less is accepted, and the
    params stay valid at load (epochs shrunk for a quick look break no other experiment)."""
    from wscat.config import check_pretraining_ends

    params = params_yaml()
    epochs = params["training"]["digits"]["epochs"]
    params["methods"]["puat"]["per_dataset"]["digits"]["pretrain_epochs"] = epochs
    validated = validate_params(params)
    run = RunConfig.from_params(validated, dataset="digits", model="cnn", method="puat", seed=1)
    with pytest.raises(ConfigError, match=re.escape(
            f"puat pre-trains for {epochs} of its {epochs} epochs on digits (pretrain_epochs), "
            "so its adversarial game would never start")) as caught:
        check_pretraining_ends(run)
    assert f"methods.puat.per_dataset.digits.pretrain_epochs below {epochs}" in str(caught.value)
    params["methods"]["puat"]["per_dataset"]["digits"]["pretrain_epochs"] = epochs - 0.5
    check_pretraining_ends(RunConfig.from_params(validate_params(params), dataset="digits",
                                                 model="cnn", method="puat", seed=1))
    check_pretraining_ends(RunConfig.from_params(validated, dataset="digits", model="cnn",
                                                 method="trades", seed=1))


def test_puat_takes_the_released_codes_values_per_dataset() -> None:
    """zhang-lilin/PUAT's configs: CIFAR-10 and ImageNet32 consistency 50, UAE 10, RAE 10 x 6,
    GAN 1; CIFAR-100 consistency 500, RAE 10 x 10, GAN 0.03 (its configs/puat_cifar100*.yaml)."""
    params = params_yaml()
    knobs = ("consistency", "uae_weight", "rae_weight", "gan_weight")
    for dataset in ("cifar10", "imagenet32"):
        assert [method_for(params, "puat", dataset)[k] for k in knobs] == [50, 10, 60, 1]
    assert [method_for(params, "puat", "cifar100")[k] for k in knobs] == [500, 10, 100, 0.03]
