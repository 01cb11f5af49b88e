"""Mutation tests for the statistics' checks: benchmarks/paired_null.py (the simulation that shows
the paired interval holds its level with three seeds), benchmarks/compare_metrics.py (what "same
answers" is checked with), wscat/data/capacity.py (the split refusals `snakemake -n` gives before
anything runs) and wscat/own_method_check.py (what your own method's params.yaml entry may hold).
Each test kills hand-made mutants that went through the unit tests importing the module, with
expectations worked out by hand from the modules' docstrings, docs/evaluation.md ("Simulation"),
textbook quantiles of Student's t, the datasets' published sizes and first principles, never from
the function under test. The simulation's pieces are checked on small runs whose answers are known
(stand-ins for the interval and the bootstrap draws where what is checked is the counting).

What is checked, and from which fact:
- the simulated population (paired_null's docstring): the per-attack offsets give the demo's
  WSCAT accuracies over images of logit sd IMAGE_SD (Gauss-Hermite quadrature); an evaluation
  has both methods and three seeds (1, 2, 3) of (attacks, images) flags; its accuracies are the
  population's (logit sd sqrt(IMAGE_SD^2 + METHOD_IMAGE_SD^2)); the images' difficulty is shared
  and each method has its own deviation, so two methods agree on an image less often than two
  seeds of one method do, by E[(p - p')^2], at most 2 * METHOD_IMAGE_SD^2 / 16 (the logistic is
  1/4-Lipschitz); every (method, seed) has its own seed effect in points; 'other' is `gap`
  points lower. The vectorised probabilities have the same structure.
- the seed effects' shapes: normal sds per method and correlation rho; Student t3 scaled to sd
  (median |t3| = t(3, 0.75) = 0.765); a collapse of `drop` with probability p on WSCAT's seeds,
  the other method p * drop lower, the same expected Mean.
- the vectorised rates (`shape_rates`): the interval is handed d = other - WSCAT per seed (the
  seed effects in points) and d's image-bootstrap draws (with every image drawn once they are
  d); 'lower' is an interval wholly below 0, 'higher' wholly above, 'excludes' both, 'apart' and
  'excludes_apart' counted as named, each a share of exactly `repeats` repetitions.
- the loop (`rates`): each repetition counted once per verdict, the old bootstrap's exclusion
  (low > 0 or high < 0), the per-attack interval of 'other' against WSCAT; the old bootstrap
  draws three seeds of three with replacement and reads the 2.5% and 97.5% percentiles of
  other - WSCAT; Welch-Satterthwaite df (k - 1)(1 + shared / (s^2 / k))^2 with t at 0.975
  (t(2) = 4.303, t(8) = 2.306), no call where the seeds do not vary.
- the Markdown: the Monte Carlo standard error sqrt(0.05 * 0.95 / n), the paired difference's sd
  sd * sqrt(2), the highest of the five attacks' rates named, lower and higher in their columns;
  --write docs replaces what is between the markers and keeps them, and refuses a page without
  them. The level quoted in the README, wscat/report/paired.py and wscat/report/markdown.py is
  the docs table's (at most 3.4% with normal seed effects, 6-7% with collapses, 15-21% for the
  old bootstrap).
- compare_metrics (its docstring): every model's flags counted (the total over models, exit 1
  for one flag), differences in any attack, accuracies moved to 4 places, accuracy attacks that
  differ, flags longer on either side, a folder or non-UTF-8 bytes where a file should be, flags
  that are not text or lists, a file on one side named by the first of several.
- capacity (its docstring, the datasets' published sizes): digits' labels are scikit-learn's
  1,797, ten classes, no official train size, a dataset named digits without `source` too;
  CIFAR-10 50,000 training images, CIFAR-100 50,000 in 100 classes, ImageNet32-100 at most
  1,300 a class; a home-made archive (own md5) or an npz is not known; the split step's own line
  with the dataset named; the fully supervised split, validation settings as given, every
  dataset checked.
- own_method_check (its docstring): the knobs are the constructor's named arguments, required
  where without default, not the shapes, *args or **kwargs; each annotation read: int (not a
  bool or 3.0), float (an int too, not a bool), bool, str, None, X | None and Optional[X],
  Literal (True is not 1), a sequence or tuple is a list, a dict a mapping, anything else the
  constructor's to decide, an unresolvable annotation too; the refusal names "no knobs" and
  the annotation as written (Literal[1, 2], Optional[float], dict[str, float]: not their bare
  names), without "typing.".
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.unit.test_compare_metrics import _refused, _run, _write
from wscat.config import ConfigError
from wscat.data.capacity import check_splits, known_labels, split_problem
from wscat.evaluation import ATTACKS
from wscat.own_method_check import check, constructor_knobs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import paired_null as pn  # noqa: E402

# Student's t quantiles, from a printed table (two-sided 95% and 90%, one-sided 75%).
T2_975, T8_975, T3_75 = 4.303, 2.306, 0.765


def _expected_sigmoid(offset: float, sd: float) -> float:
    """E[1 / (1 + exp(-(offset + sd Z)))], Z standard normal, by 80-point Gauss-Hermite."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(weights / (1.0 + np.exp(-(offset + sd * nodes)))) / math.sqrt(2 * math.pi))


# --- paired_null: the simulated population ------------------------------------------------------

def test_the_offsets_give_the_demo_accuracies() -> None:
    """Over images of logit sd IMAGE_SD (2) and a method's own deviation (sd 0.7), a logit of sd
    sqrt(2^2 + 0.7^2), each attack's offset gives WSCAT's demo accuracy."""
    assert pn.BASE == {"Natural": 92.8, "FGSM": 76.6, "PGD": 73.0, "CW": 68.1, "AA": 65.1}
    for offset, attack in zip(pn.OFFSETS, ATTACKS):
        assert 100 * _expected_sigmoid(offset, math.sqrt(4.49)) == pytest.approx(
            pn.BASE[attack], abs=0.15)


def _accuracies(runs: list[dict[str, dict[int, np.ndarray]]]) -> np.ndarray:
    """(repetitions, methods wscat/other, seeds, attacks) accuracies in percent."""
    return np.array([[[100 * run[m][s].mean(axis=1) for s in (1, 2, 3)] for m in ("wscat", "other")]
                     for run in runs])


def test_an_evaluation_has_both_methods_three_seeds_and_the_populations_accuracies() -> None:
    rng = np.random.default_rng(3)
    runs = [pn.simulate(rng, 0.0) for _ in range(300)]
    assert sorted(runs[0]) == ["other", "wscat"]
    assert all(sorted(run[m]) == [1, 2, 3] for run in runs for m in run)
    flags = runs[0]["wscat"][1]
    assert flags.dtype == bool and flags.shape == (5, pn.N_IMAGES)
    # The population: offset + difficulty (sd 2) + the method's own deviation (sd 0.7).
    population = [100 * _expected_sigmoid(o, math.sqrt(2.0**2 + 0.7**2)) for o in pn.OFFSETS]
    mean = _accuracies(runs).mean(axis=(0, 1, 2))
    assert mean == pytest.approx(population, abs=0.6)
    assert mean == pytest.approx([pn.BASE[a] for a in ATTACKS], abs=0.6)  # the demo's row


def test_methods_differ_on_a_test_set_by_their_own_deviation_alone() -> None:
    """No seed effect: two seeds of one method share p (agreement E[p^2 + (1-p)^2]); the other
    method's p' differs by its own deviation, so agreement drops by E[(p - p')^2], more than 0
    and at most 2 * 0.7^2 / 16 = 0.061 (the logistic's slope is at most 1/4); a difficulty
    drawn per method would exceed that bound, a deviation shared would give 0."""
    rng = np.random.default_rng(4)
    within, between = [], []
    for _ in range(200):
        run = pn.simulate(rng, 0.0)
        within.append(np.mean(run["wscat"][1] == run["wscat"][2]))
        within.append(np.mean(run["other"][1] == run["other"][2]))
        between.append(np.mean(run["wscat"][1] == run["other"][1]))
        between.append(np.mean(run["wscat"][2] == run["other"][2]))
    drop = np.mean(within) - np.mean(between)
    assert 0.005 < drop < 2 * 0.7**2 / 16


def test_each_seed_has_its_own_effect_and_the_other_method_is_gap_lower() -> None:
    """Two seeds of one method: with no seed effect their AA accuracies differ by image noise
    alone (sd about 2.8 points); with seed sd 5 points the difference has sd about
    sqrt(2 * 25 + 8) = 7.6. A gap of 10 points: 'other' is 10 points lower on Natural (92.8%:
    hardly an image with p < 0.1, so the clip at 0 takes nothing off)."""
    rng = np.random.default_rng(5)
    for seed_sd, low, high in ((0.0, 1.5, 4.0), (5.0, 6.0, 9.0)):
        acc = _accuracies([pn.simulate(rng, seed_sd) for _ in range(300)])
        spread = np.std(acc[:, :, 0, -1] - acc[:, :, 1, -1])
        assert low < spread < high, (seed_sd, spread)
    acc = _accuracies([pn.simulate(rng, 0.0, gap=10.0) for _ in range(300)])
    gap = np.mean(acc[:, 1, :, 0] - acc[:, 0, :, 0])
    assert -10.5 < gap < -9.0


def test_the_vectorised_probabilities_share_difficulty_not_deviation() -> None:
    """(repeats, methods, attacks, images): logit(p) - offset is the same for every attack of an
    image (difficulty + own deviation), sd sqrt(4 + 0.49); between the two methods it differs by
    the own deviations alone, sd 0.7 * sqrt(2)."""
    p = pn._probabilities(np.random.default_rng(6), 50)
    assert p.shape == (50, 2, 5, pn.N_IMAGES)
    centred = np.log(p / (1 - p)) - pn.OFFSETS[None, None, :, None]
    assert np.allclose(centred, centred[:, :, :1], atol=1e-6)
    assert np.std(centred[:, 0, 0]) == pytest.approx(math.sqrt(4.49), rel=0.03)
    assert np.std(centred[:, 1, 0] - centred[:, 0, 0]) == pytest.approx(0.7 * math.sqrt(2),
                                                                        rel=0.03)


def test_the_seed_effect_shapes() -> None:
    rng = np.random.default_rng(7)
    effects = pn.normal(3.0, 0.4, rho=0.5)(rng, 200_000)
    assert effects.shape == (200_000, 2, pn.N_SEEDS)
    assert np.std(effects[:, 0]) == pytest.approx(3.0, rel=0.01)
    assert np.std(effects[:, 1]) == pytest.approx(0.4, rel=0.01)
    assert np.corrcoef(effects[:, 0].ravel(), effects[:, 1].ravel())[0, 1] == pytest.approx(
        0.5, abs=0.01)
    assert np.std(pn.normal(3.0)(rng, 100_000)[:, 1]) == pytest.approx(3.0, rel=0.01)
    # t3 scaled to sd 3: scale 3 / sqrt(3 / (3 - 2)), so median |effect| = sqrt(3) * 0.765.
    heavy = pn.heavy(3, 3.0)(rng, 200_000)
    assert np.median(np.abs(heavy)) == pytest.approx(math.sqrt(3) * T3_75, rel=0.02)
    collapse = pn.collapse(0.2, 12.0, 1.0)(rng, 200_000)
    assert np.mean(collapse[:, 0] < -6.0) == pytest.approx(0.2, abs=0.005)
    assert np.mean(collapse[:, 1] < -6.0) < 0.001
    assert np.mean(collapse[:, 0]) == pytest.approx(-2.4, abs=0.05)
    assert np.mean(collapse[:, 1]) == pytest.approx(-2.4, abs=0.02)


# --- paired_null: what is counted ---------------------------------------------------------------

VERDICTS = [(1.0, 2.0), (-2.0, -1.0), (-1.0, 1.0), (0.0, 1.0)]  # higher, lower, neither, neither


def test_shape_rates_counts_each_verdict_of_exactly_repeats_repetitions(monkeypatch) -> None:
    """20 repetitions in chunks of 8 (8, 8, 4): interval i says VERDICTS[i % 4], seed 0 apart
    where i % 3 == 0 (i = 0, 3, ..., 18: 7), so higher 5, lower 5, apart 7, and apart with an
    interval excluding 0 at i = 0, 9, 12: 3. The interval sees other - WSCAT per seed (other 5
    points up here, so about +3.5 to +5 in the Mean) and, with every image drawn once, the same
    d in each bootstrap row."""
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def interval(d: np.ndarray, d_boot: np.ndarray) -> tuple:
        seen.append((d, d_boot))
        return (*VERDICTS[(len(seen) - 1) % 4], 0.0, 0.0, 2)

    def apart(d: np.ndarray, d_boot: np.ndarray) -> int | None:
        return 0 if (len(seen) - 1) % 3 == 0 else None

    monkeypatch.setattr(pn, "interval", interval)
    monkeypatch.setattr(pn, "apart", apart)
    monkeypatch.setattr(pn, "image_draws", lambda n, b, rng: np.ones((b, n), dtype=np.int64))

    def shape(rng: np.random.Generator, repeats: int) -> np.ndarray:
        effects = np.zeros((repeats, 2, pn.N_SEEDS))
        effects[:, 1] = 5.0
        return effects

    rates = pn.shape_rates(shape, 20, n_bootstrap=3, chunk=8)
    assert rates == pytest.approx({"lower": 0.25, "higher": 0.25, "apart": 0.35,
                                   "excludes_apart": 0.15, "excludes": 0.5})
    assert len(seen) == 20
    assert all(d.shape == (3,) and d_boot.shape == (3, 3) for d, d_boot in seen)
    assert 2.0 < np.mean([d for d, _ in seen]) < 6.0
    assert max(np.abs(d_boot - d).max() for d, d_boot in seen) < 1e-3


def test_rates_counts_each_repetition_once(monkeypatch) -> None:
    """Four repetitions: the interval excludes 0 in the first, the old one in the first two,
    Welch-Satterthwaite in none (seeds equal), the per-attack one on PGD in the last; the
    per-attack interval compares 'other' against WSCAT."""
    calls = {"n": 0}
    row = {"delta_mean": 1.0, "sd_seeds": 0.0, "se_test_set": 1.0, "apart_seed": 1}

    def paired_interval(flags, methods, *, n_bootstrap, seed):
        import pandas as pd

        calls["n"] += 1
        assert methods == ["other"]
        return pd.DataFrame([{**row, "excludes_zero": calls["n"] == 1}])

    def paired_by_attack(flags, methods, *, n_bootstrap, seed):
        import pandas as pd

        assert methods == ["other"]
        return pd.DataFrame([{"column": a, "excludes_zero": calls["n"] == 4 and a == "PGD"}
                             for a in ATTACKS])

    monkeypatch.setattr(pn, "simulate", lambda rng, seed_sd, gap: {})
    monkeypatch.setattr(pn, "paired_interval", paired_interval)
    monkeypatch.setattr(pn, "paired_by_attack", paired_by_attack)
    monkeypatch.setattr(pn, "old_interval",
                        lambda flags, rng, b: (1.0, 2.0) if calls["n"] == 1 else (-2.0, -1.0)
                        if calls["n"] == 2 else (-1.0, 1.0))
    rates = pn.rates(3.0, 0.0, repeats=4, old=True, attacks=True)
    assert rates == {"new": 0.25, "old": 0.5, "satterthwaite": 0.0, "attack:Natural": 0.0,
                     "attack:FGSM": 0.0, "attack:PGD": 0.25, "attack:CW": 0.0, "attack:AA": 0.0}


def test_the_old_bootstrap_draws_seeds_with_replacement_and_reads_2_5_and_97_5() -> None:
    """Every image alike within a run, so only the seed draws move it: 'other' scores 100 on its
    third seed, 0 on the others, WSCAT 0. A draw of three seeds holds the third k times,
    Binomial(3, 1/3): P(k = 0) = 8/27, P(k = 3) = 1/27 = 3.7% > 2.5%, so the interval is
    [0, 100] (the 95th percentile would be 66.7; never drawing the third seed, [0, 0])."""
    zeros, ones = np.zeros((5, pn.N_IMAGES), bool), np.ones((5, pn.N_IMAGES), bool)
    flags = {"wscat": {1: zeros, 2: zeros, 3: zeros}, "other": {1: zeros, 2: zeros, 3: ones}}
    low, high = pn.old_interval(flags, np.random.default_rng(8), 8000)
    assert (low, high) == (0.0, pytest.approx(100.0))


@pytest.mark.parametrize("sd, se, delta, excludes", [
    # s^2 / k = 1, no shared term: df 2, half-width t(2) = 4.303
    (math.sqrt(3), 0.0, 4.25, False), (math.sqrt(3), 0.0, 4.35, True),
    (math.sqrt(3), 0.0, -4.35, True),
    # shared 1: df 2 * (2 / 1)^2 = 8, half-width t(8) * sqrt(2) = 3.261
    (math.sqrt(3), 1.0, 3.2, False), (math.sqrt(3), 1.0, 3.32, True),
    (0.0, 1.0, 50.0, False)])  # the seeds do not vary: no degrees of freedom to speak of
def test_welch_satterthwaite(sd: float, se: float, delta: float, excludes: bool) -> None:
    row = {"sd_seeds": sd, "se_test_set": se, "delta_mean": delta}
    assert pn.satterthwaite_excludes_zero(row) is excludes


# --- paired_null: the Markdown and the docs -----------------------------------------------------

def test_the_tables_columns(monkeypatch) -> None:
    """Stand-in rates: the Monte Carlo se at 10,000 repetitions is sqrt(0.0475 / 10000) = 0.22
    points; a seed sd of 3 each is 3 * sqrt(2) = 4.2 for the paired difference; the attack with
    the highest rate (PGD, 3%) is named; lower and higher in their own columns."""
    attack = {"Natural": 0.02, "FGSM": 0.01, "PGD": 0.03, "CW": 0.0, "AA": 0.015}
    monkeypatch.setattr(pn, "rates", lambda seed_sd, gap, **kw: {
        "new": 0.01, "old": 0.2, "satterthwaite": 0.07,
        **{f"attack:{a}": v for a, v in attack.items()}})
    monkeypatch.setattr(pn, "shape_rates", lambda shape, repeats: {
        "excludes": 0.0329, "lower": 0.017, "higher": 0.0159, "apart": 0.038,
        "excludes_apart": 0.0})
    text = pn.table(10000)
    assert text.startswith("10000 repetitions a row (Monte Carlo standard error at 5%: "
                           "0.2 points)")
    assert "| 3 | 4.2 | 0 | 1.0% | 7.0% | 20.0% | 3.0% (PGD) |" in text
    assert "| 2.05 | 2.9 | 11 | 1.0% |" in text
    assert "(Monte Carlo standard error at 5%: 0.22 points)" in text
    assert "| normal, sd 3 each | 3.29% | 1.70% | 1.59% | 3.8% | 0.00% |" in text


def test_write_docs_replaces_between_the_markers(monkeypatch, tmp_path: Path) -> None:
    page = tmp_path / "evaluation.md"
    begin, end = pn.MARKERS
    page.write_text(f"before\n{begin}\nold\ntable\n{end}\nafter\n")
    monkeypatch.setattr(pn, "DOCS", page)
    monkeypatch.setattr(pn, "table", lambda repeats: "NEW\n")
    assert pn.main(["--repeats", "1", "--write", "docs"]) == 0
    assert page.read_text() == f"before\n{begin}\nNEW\n{end}\nafter\n"
    page.write_text("no markers\n")
    with pytest.raises(SystemExit, match="no <!-- begin: benchmarks/paired_null.py -->"):
        pn.main(["--repeats", "1", "--write", "docs"])
    assert page.read_text() == "no markers\n"


def _docs_tables() -> tuple[list[list[str]], list[list[str]]]:
    """The two tables between paired_null's markers in docs/evaluation.md, rows of cells."""
    text = (ROOT / "docs" / "evaluation.md").read_text()
    block = text.split(pn.MARKERS[0])[1].split(pn.MARKERS[1])[0]
    tables: list[list[list[str]]] = [[]]
    for line in block.splitlines():
        if line.startswith("|") and not line.startswith("|--") and not line.startswith("|---"):
            tables[-1].append([c.strip() for c in line.strip("|").split("|")])
        elif not line.strip() and tables[-1]:
            tables.append([])
    first, second = [t for t in tables if t]
    return first[1:], second[1:]


def _pct(cell: str) -> float:
    return float(cell.split("%")[0])


def test_the_level_quoted_is_the_docs_tables() -> None:
    """The null rows (gap 0) of the first table and the normal-shaped rows of the second are at
    most 3.4% (README, paired.py, markdown.py: 'at most 3.4%'); the collapses reach 6-7%; the
    old bootstrap at seed sds 3 and 5 gave 15-21%."""
    from wscat.report import markdown

    first, second = _docs_tables()
    null = [row for row in first if row[2] == "0"]
    assert [row[0] for row in null] == ["0", "3", "5"]
    normal = [row for row in second if not row[0].startswith("WSCAT collapses")]
    collapses = [row for row in second if row[0].startswith("WSCAT collapses")]
    assert len(normal) == 5 and len(collapses) == 5
    highest = max(_pct(row[3]) for row in null)
    assert highest == 3.4 and max(_pct(row[1]) for row in normal) <= highest
    worst = max(_pct(row[1]) for row in collapses)
    assert 6.0 <= worst < 7.5
    old = [round(_pct(row[5])) for row in null[1:]]
    readme = (ROOT / "README.md").read_text()
    paired_doc = (ROOT / "wscat" / "report" / "paired.py").read_text()
    assert markdown.LEVEL_NORMAL == f"at most {highest}%"
    assert markdown.LEVEL_COLLAPSE == "about 6-7%"
    assert f"at most {highest}% of equal pairs called different" in paired_doc
    assert "about 6-7% of equal pairs different" in paired_doc
    assert f"called {old[0]}–{old[1]}% of equal methods different" in readme
    low = _pct(null[1][3])
    assert f"the new one {low}–{highest}% (with normal seed effects; 6–7% where" in readme


# --- compare_metrics ----------------------------------------------------------------------------

def test_every_model_is_counted_and_any_attack(tmp_path: Path, capsys, monkeypatch) -> None:
    """Two models, one CW flag differing in the first (pgd-at): exit 1, both lines, total 1; a CW
    accuracy of 4 of 8 against 5 of 8 moves by -12.5; one of 359 images, 100/359 = 0.2786 (4
    places)."""
    other = "metrics/digits/cnn/pgd-at/seed1.json"
    _write(tmp_path / "a", rel=other)
    _write(tmp_path / "b", {"PGD": "10110100", "CW": "11100000"}, rel=other)
    for side in "ab":
        _write(tmp_path / side)
    code, out, err = _run(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert (code, err) == (1, "")
    assert out == ("cnn/pgd-at seed1: flags differing {'PGD': 0, 'CW': 1}; accuracies moved "
                   "{'CW': -12.5}\n"
                   "cnn/wscat seed1: flags differing {'PGD': 0, 'CW': 0}; accuracies moved {}\n"
                   "total per-image flags differing: 1\n")
    _write(tmp_path / "c", {"PGD": "1" * 359})
    _write(tmp_path / "d", {"PGD": "0" + "1" * 358})
    _, out, _ = _run(capsys, monkeypatch, tmp_path / "c", tmp_path / "d")
    assert "accuracies moved {'PGD': -0.2786}" in out


def test_flags_as_lists_are_compared(tmp_path: Path, capsys, monkeypatch) -> None:
    _write(tmp_path / "a", {"PGD": [1, 0, 1], "CW": [1, 1, 0]})
    _write(tmp_path / "b", {"PGD": [1, 1, 1], "CW": [1, 1, 0]})
    code, out, _ = _run(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert code == 1 and "flags differing {'PGD': 1, 'CW': 0}" in out


def test_more_refusals(tmp_path: Path, capsys, monkeypatch) -> None:
    """Accuracy attacks that differ (flags alike), flags longer on the new side, flags that are
    a number, per_image.correct a list: one line, exit 2."""
    a = tmp_path / "a"
    _write(a)
    path = _write(tmp_path / "b")
    data = json.loads(path.read_text())
    data["accuracy"]["AA"] = 50.0
    path.write_text(json.dumps(data))
    err = _refused(capsys, monkeypatch, a, tmp_path / "b")
    assert f"{path}: accuracy attacks ['AA', 'CW', 'PGD']" in err
    _write(tmp_path / "b", {"PGD": "101101001", "CW": "11110000"})
    assert f"{path}: 9 per-image flags of PGD" in _refused(capsys, monkeypatch, a, tmp_path / "b")
    for correct in ({"PGD": 5, "CW": "11110000"}, ["10110100", "11110000"]):
        path.write_text(json.dumps({"accuracy": {"PGD": 50.0, "CW": 50.0},
                                    "per_image": {"correct": correct}}))
        err = _refused(capsys, monkeypatch, a, tmp_path / "b")
        assert f"{path}: per_image.correct is not attack -> flags" in err


@pytest.mark.parametrize("broken", ["folder", "bytes"])
def test_an_unreadable_file_is_refused(tmp_path: Path, capsys, monkeypatch, broken: str) -> None:
    """A folder where the metrics file should be, or a file that is not UTF-8 text."""
    _write(tmp_path / "a")
    path = tmp_path / "b" / "metrics/digits/cnn/wscat/seed1.json"
    path.parent.mkdir(parents=True)
    if broken == "folder":
        path.mkdir()
    else:
        path.write_bytes(b'{"accuracy": "\xff\xfe"}')
    err = _refused(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert f"{path}: not readable JSON" in err


def test_the_first_file_on_one_side_is_named(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "a").mkdir()
    for seed in (2, 1):
        _write(tmp_path / "b", rel=f"metrics/digits/cnn/wscat/seed{seed}.json")
    err = _refused(capsys, monkeypatch, tmp_path / "a", tmp_path / "b")
    assert f"{tmp_path / 'b' / 'metrics/digits/cnn/wscat/seed1.json'} has no counterpart" in err
    assert "(2 file(s) only in" in err


# --- capacity -----------------------------------------------------------------------------------

SPLIT = {"test_fraction": None, "val_fraction": 0.2, "val_max": 2000}


def test_digits_labels_are_scikit_learns() -> None:
    """scikit-learn's digits: 1,797 images of 10 classes (178, 182, 177, 183, 181, 182, 181, 179,
    174 and 180 of the digits 0-9), its own test split (no train size); a dataset named digits
    without a `source` is digits too."""
    for cfg in ({"source": "digits"}, {}):
        labels, classes, train_size = known_labels(cfg, "digits")
        assert (classes, train_size) == (10, None)
        assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


@pytest.mark.parametrize("source, classes, train, most, test", [
    ("cifar10", 10, 50_000, 5000, 1000), ("cifar100", 100, 50_000, 500, 100),
    ("imagenet32", 100, None, 1300, 50)])
def test_official_archives_hold_their_published_sizes(source: str, classes: int,
                                                      train: int | None, most: int,
                                                      test: int) -> None:
    """CIFAR-10: 50,000 training images, 5,000 a class, and 1,000 a class to test; CIFAR-100:
    50,000 in 100 classes, 100 a class to test; ImageNet32-100: at most 1,300 a class
    (ImageNet's largest), 50 a class to validate. A labelled set of every training image fits;
    one class more does not, in the split step's own words."""
    labels, n_classes, train_size = known_labels({"source": source}, source)
    assert n_classes == classes and train_size == classes * most
    assert train is None or train_size == train
    assert np.array_equal(np.bincount(labels[:train_size]), np.full(classes, most))
    assert np.array_equal(np.bincount(labels[train_size:]), np.full(classes, test))
    cfg = {"source": source, **SPLIT}
    assert split_problem(source, {**cfg, "labelled": classes * most}) is None
    assert split_problem(source, {**cfg, "labelled": classes * (most + 1)}) == (
        f"dataset '{source}': labelled = {classes * (most + 1)} but only {classes * most} "
        f"training samples exist; lower datasets.{source}.labelled in the params file")


def test_a_home_made_archive_or_an_npz_is_not_known() -> None:
    assert known_labels({"source": "cifar10", "md5": "0" * 32}, "mine") is None
    assert known_labels({"source": "npz", "path": "mine.npz"}, "mine") is None
    assert split_problem("mine", {"source": "npz", **SPLIT, "labelled": 7}) is None


@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"labelled": None}, None),  # the fully supervised split
    ({"unlabelled_fraction": 0.5}, None),
    ({"val_max": 5}, "0 validation images per class"),
    ({"val_fraction": 0.0}, "0 validation images per class"),
    ({"labelled": 105}, "datasets.digits.labelled = 105 is not a multiple of the 10 classes (the "
     "labelled set is class-balanced); set it to 100 or 110 in the params file"),
    ({"labelled": 5}, "datasets.digits.labelled = 5 is not a multiple of the 10 classes (the "
     "labelled set is class-balanced); set it to 10 in the params file")])
def test_digits_split_settings(change: dict, problem: str | None) -> None:
    cfg = {"source": "digits", "test_fraction": 0.2, "labelled": 100, "val_fraction": 0.2,
           "val_max": 2000, **change}
    found = split_problem("digits", cfg)
    if problem is None:
        assert found is None
    else:
        assert found.startswith("dataset 'digits': ") and problem in found


def test_every_dataset_is_checked() -> None:
    good = {"source": "digits", "test_fraction": 0.2, "labelled": 100, "val_fraction": 0.2,
            "val_max": 2000}
    check_splits({"datasets": {"digits": good}})
    with pytest.raises(ConfigError, match="dataset 'later': datasets.later.labelled = 5 is not a "
                       "multiple"):
        check_splits({"datasets": {"digits": good, "later": {**good, "labelled": 5}}})


# --- own_method_check ---------------------------------------------------------------------------

def test_the_knobs_are_the_named_arguments() -> None:
    class Mine:
        def __init__(self, a, b=1, *rest, feature_dim=3, c=None, **more) -> None:
            pass

    assert constructor_knobs(Mine) == {"a": True, "b": False, "c": False}


TYPED = """from __future__ import annotations
import typing
from wscat.methods import Method
class Other:
    pass
class Typed(Method):
    def __init__(self, count: int = 1, weight: float = 1.0, flag: bool = False, name: str = "x",
                 maybe: int | None = None, optional: typing.Optional[float] = None,
                 mode: typing.Literal[1, 2] = 1, items: typing.Sequence[float] = (),
                 pair: tuple = (), table: dict = None, mapping: dict[str, float] = None,
                 nothing: None = None, free: Other = None, anything: typing.Any = None
                 ) -> None:
        super().__init__()
    def loss(self, model, batch, ctx):
        raise NotImplementedError
class Unresolved(Method):
    def __init__(self, weight: float = 1.0, unknown: Missing = None) -> None:
        super().__init__()
    def loss(self, model, batch, ctx):
        raise NotImplementedError
class Bare(Method):
    def __init__(self) -> None:
        super().__init__()
    def loss(self, model, batch, ctx):
        raise NotImplementedError
"""


@pytest.fixture
def typed(tmp_path: Path, monkeypatch) -> Callable[..., None]:
    """check() on typed.py:Typed with the knobs given."""
    (tmp_path / "typed.py").write_text(TYPED)
    monkeypatch.chdir(tmp_path)
    return lambda objective="typed.py:Typed", **knobs: check({"objective": objective, **knobs})


@pytest.mark.parametrize("knob, value", [
    ("count", 3), ("weight", 6), ("weight", 0.5), ("flag", False), ("name", "y"), ("maybe", 3),
    ("maybe", None), ("optional", 2), ("optional", None), ("mode", 2), ("items", [1.0, 2.0]),
    ("pair", [1, 2]), ("table", {"a": 1}), ("mapping", {"a": 1.0}), ("nothing", None),
    ("free", "anything"), ("anything", [1])])
def test_a_value_that_fits_its_annotation(typed, knob: str, value: Any) -> None:
    typed(**{knob: value})


def test_an_annotation_that_cannot_be_resolved_leaves_it_to_the_constructor(typed) -> None:
    typed("typed.py:Unresolved", weight="any", unknown=3)


@pytest.mark.parametrize("knob, value, problem, shown", [
    ("count", True, "an integer", "int"), ("count", 3.0, "an integer", "int"),
    ("weight", True, "a number", "float"), ("flag", 1, "true or false", "bool"),
    ("name", 5, "text", "str"), ("maybe", "x", "an integer or null", "int | None"),
    ("optional", "x", "a number or null", "Optional[float]"),
    ("mode", True, "one of 1, 2", "Literal[1, 2]"), ("mode", 3, "one of 1, 2", "Literal[1, 2]"),
    ("items", "abc", "a list", "Sequence[float]"), ("pair", "ab", "a list", "tuple"),
    ("table", [1], "a mapping", "dict"), ("mapping", [1], "a mapping", "dict[str, float]"),
    ("nothing", 0, "null", "NoneType")])
def test_a_value_that_does_not_fit_is_refused(typed, knob: str, value: Any, problem: str,
                                              shown: str) -> None:
    """One line: the knob, its value, what it should be and the annotation as written (a
    Literal's values, not 'Literal')."""
    with pytest.raises(ValueError) as error:
        typed(**{knob: value})
    assert str(error.value) == (f"typed.py:Typed: {knob}: {value!r} is not {problem} (its "
                                f"constructor's annotation: {shown})")


def test_a_constructor_without_knobs_says_so(typed) -> None:
    with pytest.raises(ValueError, match=r"^typed.py:Bare takes no knob 'x'; its constructor "
                                         r"takes: no knobs$"):
        typed("typed.py:Bare", x=1)
