"""The report's statistics and wording against answers worked out by hand.

Each test here kills mutations of the report code that the other report tests let through
(mutation testing of wscat/report/{paired,table,cells,markdown,compare}.py and wscat/metrics.py):
every expectation is computed from first principles (hand arithmetic, numpy's covariance pair by
pair, scipy's Student t), not from wscat's code. Inputs are tiny hand-built flags, frames and
metrics dicts (20 images at most): nothing trains, and the whole file runs in about a second.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from wscat.metrics import ATTACKS, aa_paper_difference, harmonic_mean
from wscat.report import markdown, paired, write_table
from wscat.report.cells import BOLD_RULE, bold_caption, bold_leads
from wscat.report.compare import noise_note, render
from wscat.report.table import METRICS, collect, render_tex, summarise

NAMES = {"trades": "TRADES", "rst": "RST", "wscat": "WSCAT"}
ORDER = "stratified, subset_seed 0"


# --- hand-built runs -------------------------------------------------------------------------

def _flags(counts: dict[str, int], n: int = 20) -> np.ndarray:
    """(attacks, n) flags: the first counts[attack] images of each attack correct."""
    return np.array([np.arange(n) < counts[a] for a in ATTACKS])


def _run(method: str, seed: int, flags: np.ndarray, mean_shift: float = 0.0) -> dict:
    """A metrics dict whose accuracies are its flags' (percent) and whose Mean is their harmonic
    mean plus `mean_shift`, written out by hand (5 / sum of reciprocals)."""
    acc = {a: 100.0 * float(f.mean()) for a, f in zip(ATTACKS, flags)}
    mean = 5.0 / sum(1.0 / v for v in acc.values()) if all(acc.values()) else 0.0
    n = flags.shape[1]
    return {"dataset": "digits", "model": "cnn", "method": method, "seed": seed,
            "accuracy": {**acc, "Mean": mean + mean_shift},
            "manifest": {"n_examples": n, "test_set_size": n, "evaluation_set": f"{n} images",
                         "test_set": "fixed"},
            "per_image": {"order": ORDER, "correct": {
                a: "".join("1" if x else "0" for x in f) for a, f in zip(ATTACKS, flags)}}}


BASE = {"Natural": 18, "FGSM": 14, "PGD": 12, "CW": 12, "AA": 10}  # of 20 images


def _shifted(shift: int) -> dict[str, int]:
    """BASE with `shift` more images right in every attack."""
    return {a: c + shift for a, c in BASE.items()}


def _row(**changes: object) -> dict:
    """A paired row (paired.COLUMNS) with an interval on three seeds."""
    row = {"method": "trades", "reference": "wscat", "delta_mean": 1.2, "ci_low": 0.5,
           "ci_high": 1.9, "excludes_zero": True, "n_seeds": 3, "n_images": 359,
           "n_bootstrap": 2000, "sd_seeds": 0.3, "se_test_set": 0.1, "df": 2,
           "apart_seed": None, "note": ""}
    return {**row, **changes}


# --- wscat.report.paired: the interval -------------------------------------------------------

def test_the_interval_is_centred_on_the_mean_and_widened_by_the_pairwise_covariance() -> None:
    """d = (1, 2, 6): mean 3 (median 2), s^2 = (4 + 1 + 9) / 2 = 7. The shared term is the
    average over the 3 x 2 ordered pairs of seeds of their covariance over the bootstrap draws
    (numpy, pair by pair); half = t(2, 0.975) sqrt(7 / 3 + shared)."""
    d = np.array([1.0, 2.0, 6.0])
    rng = np.random.default_rng(3)
    c = rng.normal(size=(400, 1))  # the test-set draw, shared by every seed
    d_boot = c + 0.3 * rng.normal(size=(400, 3))
    pairs = [np.cov(d_boot[:, i], d_boot[:, j])[0, 1] for i in range(3) for j in range(3)
             if i != j]
    shared = sum(pairs) / 6
    assert shared > 0.5  # the term matters here
    half = stats.t.ppf(0.975, 2) * np.sqrt(7.0 / 3.0 + shared)
    low, high, sd, se, df = paired.interval(d, d_boot)
    assert (low + high) / 2 == pytest.approx(3.0)
    assert (high - low) / 2 == pytest.approx(half, rel=1e-9)
    assert sd == pytest.approx(np.sqrt(7.0)) and se == pytest.approx(np.sqrt(shared)) and df == 2
    # Seeds that covary negatively over the images add nothing (clipped at 0), never narrow it.
    anti = np.column_stack([c[:, 0], -c[:, 0], 0.1 * rng.normal(size=400)])
    low, high, _, se, _ = paired.interval(d, anti)
    assert se == 0.0 and (high - low) / 2 == pytest.approx(stats.t.ppf(0.975, 2)
                                                           * np.sqrt(7.0 / 3.0))


def test_seed_means_are_harmonic_means_of_the_flags_and_of_weighted_draws() -> None:
    """Accuracies 100, 50, 50, 25, 25 -> harmonic mean 5 / 0.13; an attack at 0 makes it 0.
    A bootstrap draw counts each image by its weight, over the n images."""
    flags = np.array([[[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]],
                      [[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]],
                     dtype=bool)
    assert paired.seed_means(flags) == pytest.approx([5 / 0.13, 0.0])
    assert paired.seed_means(flags, column="FGSM") == pytest.approx([50.0, 50.0])
    weights = np.array([[4, 0, 0, 0], [0, 2, 2, 0]])  # image 0 four times; images 1 and 2 twice
    # FGSM: image 0 right -> 4 / 4; images 1 (right) and 2 (wrong) -> 2 / 4. PGD: 4 / 4; 2 / 4.
    for column in ("FGSM", "PGD"):
        assert paired.seed_means(flags, weights, column) == pytest.approx(
            np.array([[100.0, 100.0], [50.0, 50.0]]))


def test_a_method_on_other_seeds_than_the_reference_is_refused() -> None:
    """A method lacking one of WSCAT's seeds, or holding one more, is not paired seed by seed."""
    flags = {"wscat": {s: _flags(BASE) for s in (1, 2, 3)},
             "trades": {s: _flags(BASE) for s in (1, 2)}}
    with pytest.raises(ValueError, match=r"trades was not evaluated on the seeds of wscat"):
        paired.paired_interval(flags, ["trades"], n_bootstrap=10)
    flags["trades"] = {s: _flags(BASE) for s in (1, 2, 3, 4)}
    with pytest.raises(ValueError, match=r"trades was not evaluated on the seeds of wscat"):
        paired.paired_interval(flags, ["trades"], n_bootstrap=10)


def test_the_comparison_resamples_2000_times_unless_told() -> None:
    """docs/evaluation.md and every caption say 2,000 resamples of the test images."""
    flags = {m: {s: _flags(_shifted(s % 2)) for s in (1, 2, 3)} for m in ("trades", "wscat")}
    row = paired.paired_interval(flags, ["trades"]).iloc[0]
    assert row["n_bootstrap"] == 2000 and row["n_seeds"] == 3 and row["n_images"] == 20


def test_the_verdicts_of_rows_without_an_interval_and_with_a_seed_apart() -> None:
    """One seed says so; a refused interval on three seeds says 'no interval'; a missing bound
    (None or NaN) is no interval; a seed apart is named by its seed, and a row of the frame
    (where none is apart, <NA>) reads plainly."""
    assert paired.verdict(_row(ci_low=None, ci_high=None, n_seeds=1)) == "one seed: no interval"
    assert paired.verdict(_row(ci_low=None, ci_high=None, excludes_zero=False)) == "no interval"
    assert paired.verdict(_row(apart_seed=2)) == "higher than WSCAT; seed 2 apart"
    nan = _row(ci_low=float("nan"), ci_high=float("nan"), n_seeds=1)  # as a frame or CSV holds it
    assert paired.verdict(nan) == "one seed: no interval" and markdown._interval(nan) == "—"
    frame = paired._frame([_row(), _row(method="rst", delta_mean=-1.2, ci_low=-1.9,
                                        ci_high=-0.5)], paired.COLUMNS)
    assert [paired.verdict(frame.iloc[i]) for i in range(2)] == ["higher than WSCAT",
                                                                 "lower than WSCAT"]


def test_a_mean_off_by_a_hundredth_is_not_the_flags_mean() -> None:
    """Files keep 4 decimals: a Mean off by 0.0001 is rounding, by 0.01 it is another number."""
    flags = _flags(BASE)
    assert set(paired.correctness([_run("wscat", 1, flags, 0.0001)])) == {"wscat"}
    with pytest.raises(paired.NotTheTablesMean, match="not their harmonic mean"):
        paired.correctness([_run("wscat", 1, flags, 0.01)])


# --- wscat.report.cells: the bold's caption --------------------------------------------------

def test_the_bold_says_why_none_is_bold_when_flags_do_not_give_the_tables_numbers() -> None:
    """Per-image results that exist but give another Mean are not 'no per-image results'."""
    runs = [_run(m, s, _flags(_shifted(k)), 0.5) for s in (1, 2) for k, m in
            enumerate(("trades", "wscat"))]
    assert bold_leads(runs, ["trades", "wscat"], {"trades", "wscat"}) == (
        {}, "the per-image results do not give the table's accuracies")
    del runs[0]["per_image"]
    assert bold_leads(runs, ["trades", "wscat"], {"trades", "wscat"}) == (
        {}, "no per-image results of every run on the same images")


def test_the_bold_caption_word_for_word() -> None:
    """The rows without a paired interval are named only where some cell could be bold."""
    rows = [*METRICS, "AA-paper", "NRF"]
    assert bold_caption("one seed", rows) == BOLD_RULE + " (none can be here: one seed)."
    assert bold_caption("", rows) == (BOLD_RULE + "; AA (paper's variant), NRF: no paired "
                                      "interval, no bold.")
    assert bold_caption("", METRICS) == BOLD_RULE + "."


# --- wscat.report.table ----------------------------------------------------------------------

ACC = {"Natural": 80.0, "FGSM": 50.0, "PGD": 40.0, "CW": 40.0, "AA": 20.0}
HARMONIC = 5 / (1 / 80 + 1 / 50 + 1 / 40 + 1 / 40 + 1 / 20)  # 38.0952...


def _file(folder: Path, method: str, seed: int, accuracy: dict, measured: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{method}-{seed}.json"
    manifest = {"attacks": {"Mean": {"of": list(ATTACKS), "kind": "harmonic"}}} if measured else {}
    path.write_text(json.dumps({"dataset": "digits", "model": "cnn", "method": method,
                                "seed": seed, "accuracy": accuracy, "manifest": manifest}))
    return path


def test_a_files_mean_off_by_a_hundredth_is_refused(tmp_path: Path) -> None:
    """Beyond the 4-decimal rounding of a metrics file (at most 0.0003 on the Mean), a Mean that
    is not its five accuracies' harmonic mean would print beside them."""
    ok = _file(tmp_path / "a", "wscat", 1, {**ACC, "Mean": round(HARMONIC, 4)})
    assert len(collect([ok])) == 6
    bad = _file(tmp_path / "b", "wscat", 1, {**ACC, "Mean": round(HARMONIC + 0.01, 4)})
    with pytest.raises(ValueError, match="is not the harmonic mean"):
        collect([bad])


def test_the_extra_rows_are_shown_only_where_every_run_has_them(tmp_path: Path) -> None:
    full = {**ACC, "Mean": HARMONIC}
    one = _file(tmp_path, "wscat", 1, {**full, "AA-paper": 25.0})
    two = _file(tmp_path, "wscat", 2, full)
    frame = collect([one, two])
    assert frame.attrs["metrics"] == METRICS and "AA-paper" not in set(frame["metric"])
    two = _file(tmp_path, "wscat", 2, {**full, "AA-paper": 27.0})
    assert collect([one, two]).attrs["metrics"] == [*METRICS, "AA-paper"]


def _frame(values: dict[str, list[float]], metrics: list[str] = METRICS) -> pd.DataFrame:
    """A long frame of one method per key, one value per seed 1..k in every metric."""
    return pd.DataFrame([{"method": m, "seed": s + 1, "metric": k, "value": v}
                         for m, vs in values.items() for s, v in enumerate(vs) for k in metrics])


def test_summarise_refuses_a_method_twice_and_a_missing_value() -> None:
    frame = _frame({"wscat": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="more than once"):
        summarise(frame, ["wscat", "wscat"])
    short = frame[~((frame["seed"] == 3) & (frame["metric"] == "PGD"))]
    with pytest.raises(ValueError, match="2 PGD values for 3 seeds"):
        summarise(short, ["wscat"])


def test_the_summary_json_keeps_four_decimals(tmp_path: Path) -> None:
    """Natural 80, 80, 81 -> 80.3333; the other accuracies are the same every seed."""
    files = []
    for seed, natural in ((1, 80.0), (2, 80.0), (3, 81.0)):
        acc = {**ACC, "Natural": natural}
        acc["Mean"] = harmonic_mean(list(acc.values()))
        files.append(_file(tmp_path / "m", "wscat", seed, acc, measured=False))
    out = tmp_path / "out"
    write_table(experiment="digits", dataset="digits", model="cnn", metrics_files=files,
                methods=["wscat"], display_names=NAMES, adversarial={"wscat"},
                tex_path=out / "t.tex", csv_path=out / "t.csv", summary_path=out / "t.json")
    summary = json.loads((out / "t.json").read_text())
    assert summary["wscat"]["Natural"] == 80.3333


def test_the_extra_rows_sit_below_their_own_rule() -> None:
    """Table 2's layout: the five attacks, a rule, Mean, a rule, then AA (paper's variant) and
    NRF; with NRF alone, the rule before NRF."""
    def rows_and_rules(metrics: list[str]) -> list[str]:
        summary = pd.DataFrame([{"method": "wscat", "metric": k, "mean": 50.0, "std": 1.0,
                                 "n_seeds": 3} for k in metrics])
        tex = render_tex(summary, methods=["wscat"], display_names=NAMES, adversarial={"wscat"},
                         caption="c", label="x")
        body = tex.split("\\midrule\n", 1)[1].split("\\bottomrule")[0]
        return [line.strip().split("}")[0].lstrip("{") if line.strip() != "\\midrule" else "--"
                for line in body.splitlines() if line.strip()]

    assert rows_and_rules([*METRICS, "AA-paper", "NRF"]) == [
        "Natural", "FGSM", "PGD", "CW", "AA (standard)", "--", "Mean", "--",
        "AA (paper's variant)", "NRF"]
    alone = rows_and_rules([*METRICS, "NRF"])
    assert alone[:4] == ["Natural", "FGSM", "PGD", "CW"] and alone[5:] == ["--", "Mean", "--",
                                                                            "NRF"]


# --- wscat.metrics ---------------------------------------------------------------------------

PAPER_AA = {"order": ["apgd-ce", "apgd-t", "fab-t", "square"]}


def test_the_aa_paper_difference_names_each_setting_that_differs() -> None:
    """Each of the three iterative attacks' iterations, and only the Square settings a manifest
    records, are compared with AA_PAPER's (10; 5000 queries, 1 restart, p_init 0.8)."""
    assert aa_paper_difference({**PAPER_AA, "fab-t": {"iterations": 20}}) == (
        "AA-paper's fab-t ran 20 iterations; it runs 10 now")
    assert aa_paper_difference({**PAPER_AA, "square": {"queries": 5000}}) is None
    assert aa_paper_difference({**PAPER_AA, "square": {"queries": 1000, "restarts": 1}}) == (
        "AA-paper's Square ran with queries 1000; it runs with queries 5000 now")


# --- wscat.report.markdown: how to read the comparison ---------------------------------------

def test_the_reading_gives_students_t_and_the_resamples() -> None:
    """k seeds: t with k - 1 degrees of freedom at 0.975 (scipy), and the resamples of the
    test images; one seed: no interval, in words."""
    for k in (3, 4):
        text = markdown.how_to_read(_row(n_seeds=k), "WSCAT")
        assert (f"Student's t with {k - 1} degrees of freedom on the per-seed differences "
                f"(t = {stats.t.ppf(0.975, k - 1):.2f})") in text
        assert text.startswith(f"difference in Mean (method − WSCAT), averaged over {k} seeds")
        assert "(2000 resamples of the 359 test images)" in text
    assert markdown.how_to_read(_row(n_seeds=1), "WSCAT") == (
        "difference in Mean (method − WSCAT) on one seed: no interval, since one seed says "
        "nothing of the seed-to-seed spread.")


def test_one_row_with_a_seed_apart_brings_the_words_for_it() -> None:
    """One row of two with a seed apart is enough for the caption to say what that means."""
    frame = paired._frame([_row(apart_seed=2), _row(method="rst")], paired.COLUMNS)
    md = markdown.paired_markdown(frame, NAMES)
    assert "'Seed s apart': that seed's difference" in md
    assert "| TRADES | +1.20 | [+0.50, +1.90] | higher than WSCAT; seed 2 apart |" in md
    assert "'Seed s apart'" not in markdown.paired_markdown(
        paired._frame([_row(), _row(method="rst")], paired.COLUMNS), NAMES)


def test_the_paired_tex_caption_has_no_unicode_minus() -> None:
    """pdflatex's text fonts have no U+2212: the caption says 'method - WSCAT'."""
    tex = markdown.paired_tex(paired._frame([_row()], paired.COLUMNS), NAMES, label="T")
    caption = tex.split(r"\caption{")[1].split(r"\label")[0]
    assert "−" not in tex and "(method - WSCAT)" in caption


# --- wscat.report.compare: the companion ------------------------------------------------------

def _companion_row(dataset: str, method: str, ours: float, std: float | None,
                   paper_mean: float) -> dict:
    """A row of `compare.join` for metric AA, its difference rounded to 2 decimals."""
    return {"table": "T", "dataset": dataset, "model": "M", "method": method, "metric": "AA",
            "ours": ours, "ours_std": std, "paper": paper_mean, "paper_std": None,
            "difference": round(ours - paper_mean, 2), "note": ""}


def test_the_companion_prints_signed_differences_a_zero_std_and_rules_between_datasets() -> None:
    """Differences with their sign; a std of 0.00 over seeds printed (one seed is None); a rule
    only where the dataset or model changes."""
    rows = [_companion_row("D1", "WSCAT", 50.0, 0.0, 51.5),
            _companion_row("D1", "TRADES", 45.0, 1.2, 43.0),
            _companion_row("D2", "WSCAT", 60.0, 0.5, 60.0)]
    tex, written = render(rows, "T")
    body = tex.split("\\midrule\n", 1)[1].split("\\bottomrule")[0]
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    assert lines == [
        r"D1 & M & WSCAT & AA & $50.00_{\pm0.00}$ & $51.50$ & $-1.50$\\",
        r"D1 & M & TRADES & AA & $45.00_{\pm1.20}$ & $43.00$ & $+2.00$\\",
        r"\midrule",
        r"D2 & M & WSCAT & AA & $60.00_{\pm0.50}$ & $60.00$ & $+0.00$\\"]
    assert [r["difference"] for r in csv.DictReader(io.StringIO(written))] == [
        "-1.5", "2.0", "0.0"]


def test_the_noise_note_gives_the_largest_seed_std() -> None:
    """The noise a difference from the paper has to clear: our largest seed std."""
    assert "the std over seeds here up to 1.20 points" in noise_note([0.5, 1.2, None, 0.0])
