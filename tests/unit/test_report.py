"""Unit tests for wscat.report: Table 2 from per-(method, seed) metrics files."""
from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

try:
    import wscat  # noqa: F401
except ImportError:  # run from a checkout without installing wscat
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from wscat.report import write_table
from wscat.report.table import METRICS, collect, summarise

METHODS = ["standard", "trades", "wscat"]
DISPLAY = {"standard": "Standard", "trades": "TRADES", "wscat": "WSCAT_50%"}
ADVERSARIAL = {"trades", "wscat"}
SEEDS = [1, 2, 3]

# Accuracy (percent) per method, metric: one value per seed. Standard has the best Natural accuracy
# but is not an AT method; TRADES wins Natural among AT methods; TRADES and WSCAT tie on AA.
# These files hold no per-image results: no paired interval, so no cell is bold
# (tests/unit/test_paired_bold.py has the bold with them).
ACCURACY = {
    "standard": {"Natural": [98.0, 98.5, 99.0], "FGSM": [10.0, 11.0, 12.0], "PGD": [0.0, 0.0, 0.0],
                 "CW": [0.0, 0.0, 0.0], "AA": [0.0, 0.0, 0.0], "Mean": [0.0, 0.0, 0.0]},
    "trades": {"Natural": [80.0, 81.0, 82.0], "FGSM": [50.0, 51.0, 52.0], "PGD": [40.0, 41.0, 45.0],
               "CW": [35.0, 35.0, 35.0], "AA": [30.0, 31.0, 32.0], "Mean": [45.0, 46.0, 47.0]},
    "wscat": {"Natural": [78.0, 79.0, 80.0], "FGSM": [60.0, 61.0, 62.0], "PGD": [50.0, 50.0, 53.0],
              "CW": [44.0, 45.0, 46.0], "AA": [29.0, 31.0, 33.0], "Mean": [55.0, 56.0, 57.0]},
}
# Worked by hand: mean and sample std over the seeds (ddof=1) of a few cells, to 2 decimals.
BY_HAND = {
    ("standard", "Natural"): (98.50, 0.50),   # sqrt((0.25 + 0 + 0.25) / 2)
    ("trades", "PGD"): (42.00, 2.65),         # sqrt((4 + 1 + 9) / 2)
    ("trades", "CW"): (35.00, 0.00),
    ("wscat", "PGD"): (51.00, 1.73),          # sqrt((1 + 1 + 4) / 2)
    ("wscat", "AA"): (31.00, 2.00),           # sqrt((4 + 0 + 4) / 2)
    ("trades", "AA"): (31.00, 1.00),          # sqrt((1 + 0 + 1) / 2)
}
CELL = re.compile(r"\{\$(\\bm)?\{(\d+\.\d\d)\}_\{\\pm(\d+\.\d\d)\}\$\}")


def make_metrics(folder: Path, methods: list[str] = METHODS, seeds: list[int] = SEEDS) -> list[Path]:
    """Write one metrics JSON per (method, seed) with the ACCURACY numbers."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for method in methods:
        for i, seed in enumerate(seeds):
            path = folder / f"{method}-seed{seed}.json"
            accuracy = {metric: ACCURACY[method][metric][i] for metric in METRICS}
            path.write_text(json.dumps({"dataset": "digits", "model": "cnn", "method": method, "seed": seed,
                                        "accuracy": accuracy, "manifest": {"commit": "abc"}}))
            files.append(path)
    return files


def build(tmp_path: Path, files: list[Path], methods: list[str] = METHODS) -> dict[str, Path]:
    """Run write_table into tmp_path/out; return the output paths."""
    out = tmp_path / "out"
    paths = {"tex_path": out / "digits.tex", "csv_path": out / "digits.csv", "summary_path": out / "digits.json"}
    write_table(experiment="digits", dataset="digits", model="cnn", metrics_files=files, methods=methods,
                display_names=DISPLAY, adversarial=ADVERSARIAL, **paths)
    return paths


def parse_tabular(tex: str) -> tuple[str, list[list[str]], list[int]]:
    """Return the column spec, the rows (cells split on unescaped &) and the row indices preceded by \\midrule."""
    match = re.search(r"\\begin\{tabular\}\{([^}]*)\}(.*?)\\end\{tabular\}", tex, re.S)
    assert match, "no tabular environment"
    spec, body = match.groups()
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    assert lines[0] == r"\toprule" and lines[-1] == r"\bottomrule"
    rows, midrules = [], []
    for line in lines[1:-1]:
        if line == r"\midrule":
            midrules.append(len(rows))
            continue
        assert line.endswith(r"\\"), line
        rows.append(re.split(r"(?<!\\)&", line[:-2]))
    return spec, rows, midrules


def test_a_table_write_that_fails_changes_none_of_its_files(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The .tex, .csv and summary of one table (its .md and paired files too) belong together: a failed
    write of the last (a full disk) leaves the earlier render's files as they were."""
    files = make_metrics(tmp_path / "metrics")
    out = tmp_path / "out"
    paths = {"tex_path": out / "digits.tex", "csv_path": out / "digits.csv",
             "summary_path": out / "digits.json"}
    out.mkdir()
    for path in paths.values():
        path.write_text("an earlier render")
    real = Path.write_text

    def full_disk(self: Path, text: str, *args, **kwargs) -> int:
        if self.name.startswith(".digits.json."):
            raise OSError(28, "No space left on device", str(self))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError):
        write_table(experiment="digits", dataset="digits", model="cnn", metrics_files=files,
                    methods=METHODS, display_names=DISPLAY, adversarial=ADVERSARIAL, **paths)
    assert {path.read_text() for path in paths.values()} == {"an earlier render"}
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths.values())


def test_csv_and_summary_match_hand_computed(tmp_path: Path) -> None:
    paths = build(tmp_path, make_metrics(tmp_path / "metrics"))
    with paths["csv_path"].open(newline="") as handle:
        records = list(csv.DictReader(handle))
    assert list(records[0]) == ["table", "dataset", "model", "method", "metric", "mean", "std", "n_seeds"]
    assert len(records) == len(METHODS) * len(METRICS)
    assert [r["metric"] for r in records[:3]] == ["Natural"] * 3  # metric-major, as reported.csv
    key = {name: method for method, name in DISPLAY.items()}
    table = {(key[r["method"]], r["metric"]): r for r in records}
    for (method, metric), (mean, std) in BY_HAND.items():
        assert (float(table[method, metric]["mean"]), float(table[method, metric]["std"])) == (mean, std)
    summary = json.loads(paths["summary_path"].read_text())
    assert set(summary) == set(METHODS)
    for method in METHODS:
        assert list(sorted(summary[method])) == sorted(METRICS)
        for metric in METRICS:
            values = ACCURACY[method][metric]
            row = table[method, metric]
            assert (row["table"], row["dataset"], row["model"], row["n_seeds"]) == ("digits", "digits", "cnn", "3")
            assert row["mean"] == f"{statistics.fmean(values):.2f}"
            assert row["std"] == f"{statistics.stdev(values):.2f}"
            assert summary[method][metric] == round(statistics.fmean(values), 4)
    assert summary["trades"]["PGD"] == 42.0 and summary["standard"]["Natural"] == 98.5


def test_one_seed_leaves_the_csv_std_empty(tmp_path: Path) -> None:
    """A single seed has no spread: the .csv says nothing (as reported.csv), not 0.00."""
    paths = build(tmp_path, make_metrics(tmp_path / "metrics", seeds=SEEDS[:1]))
    with paths["csv_path"].open(newline="") as handle:
        records = list(csv.DictReader(handle))
    assert records and all(r["std"] == "" and r["n_seeds"] == "1" for r in records)
    assert all(r["mean"] for r in records)


def test_one_seed_prints_no_plus_minus(tmp_path: Path) -> None:
    """One seed has no spread: the .tex and Markdown cells hold the mean alone, not a ± 0.00 that
    claims a spread of zero, and the caption says why; two seeds bring the ± back."""
    from wscat.report.markdown import table_markdown

    for seeds in (SEEDS[:1], SEEDS[:2]):
        folder = tmp_path / f"seeds{len(seeds)}"
        frame = pd.DataFrame([{"method": m, "seed": seed, "metric": k,
                               "value": ACCURACY[m][k][i]}
                              for m in METHODS for i, seed in enumerate(seeds) for k in METRICS])
        md = table_markdown(summarise(frame, METHODS), methods=METHODS, display_names=DISPLAY,
                            adversarial=ADVERSARIAL, caption="c")
        tex = build(folder, make_metrics(folder / "metrics", seeds=seeds))["tex_path"].read_text()
        cells = [cell.strip() for row in parse_tabular(tex)[1][1:] for cell in row[1:]]
        md_cells = [cell.strip(" *") for line in md.splitlines()[4:] for cell in line.split("|")[2:-1]]
        assert len(cells) == len(md_cells) == len(METHODS) * len(METRICS)  # Mean included
        if len(seeds) == 1:
            assert all(re.fullmatch(r"\{\$(\\bm)?\{\d+\.\d\d\}\$\}", c) for c in cells), cells
            assert all(re.fullmatch(r"\d+\.\d\d", c) for c in md_cells), md_cells
            assert "seed 1 (one seed: no spread; means alone)" in tex
        else:
            assert all(CELL.fullmatch(c) for c in cells), cells
            assert all(re.fullmatch(r"\d+\.\d\d ± \d+\.\d\d", c) for c in md_cells), md_cells


def test_summarise_uses_the_sample_std() -> None:
    import pandas as pd
    frame = pd.DataFrame({"method": ["m"] * 2, "seed": [1, 2], "metric": ["PGD"] * 2, "value": [1.0, 3.0]})
    frame = pd.concat([frame] + [frame.assign(metric=m) for m in METRICS if m != "PGD"])
    row = summarise(frame, ["m"]).set_index("metric").loc["PGD"]
    assert (row["mean"], row["n_seeds"]) == (2.0, 2)
    assert row["std"] == pytest.approx(2 ** 0.5)  # ddof=1, as pandas; ddof=0 would give 1
    one = summarise(frame[frame["seed"] == 1], ["m"]).set_index("metric").loc["PGD"]
    assert (one["mean"], one["std"], one["n_seeds"]) == (1.0, 0.0, 1)  # one seed: no spread


def test_tex_layout_and_bold(tmp_path: Path) -> None:
    tex = build(tmp_path, make_metrics(tmp_path / "metrics"))["tex_path"].read_text()
    assert tex.lstrip().startswith(r"\begin{table*}[t]") and r"\centering" in tex
    assert (r"\caption{Performance on digits (cnn): mean and sample standard deviation (ddof=1) "
            "over seeds 1, 2, 3. Bold: the highest mean among the AT methods, where its paired "
            "95\\% interval against every other AT method excludes 0 (none can be here: no "
            "per-image results of every run on the same images).}") in tex
    assert r"\label{Tab-RQ1-digits}" in tex
    spec, rows, midrules = parse_tabular(tex)
    assert spec.replace("|", "") == "l" + "c" * len(METHODS)
    assert all(len(row) == 1 + len(METHODS) for row in rows)
    assert rows[0] == ["{Methods}", "{Standard}", "{TRADES}", r"{WSCAT\_50\%}"]
    assert [row[0] for row in rows[1:]] == [f"{{{m}}}" for m in METRICS]
    assert midrules == [1, 6]  # under the header, and between AA and Mean
    for row in rows[1:]:
        metric = row[0].strip("{}")
        bold = set()
        for method, cell in zip(METHODS, row[1:]):
            match = CELL.fullmatch(cell)
            assert match, cell
            values = ACCURACY[method][metric]
            assert match[2] == f"{statistics.fmean(values):.2f}" and match[3] == f"{statistics.stdev(values):.2f}"
            if match[1]:
                bold.add(method)
        assert not bold, metric  # the highest mean alone is not bold
    assert rows[1][1] == r"{${98.50}_{\pm0.50}$}"
    assert rows[1][2] == r"{${81.00}_{\pm1.00}$}"


def test_the_tex_md_and_both_csvs_print_a_mean_alike(tmp_path: Path, monkeypatch) -> None:
    """numpy's rounding (x * 100, then half to even) put 57.40 in the .tex and .md of a mean of
    57.405000000000001 (and 56.60 for 56.594999999999999), the paper tier's CSV 57.41 (56.59): one
    rounding, Python's of the exact value, for every file."""
    from wscat.report.markdown import table_markdown
    from wscat.report.paper_tables import _csv

    pgd = {"trades": [66.6566, 49.673, 55.8854], "wscat": [71.0497, 40.3116, 58.4237]}
    monkeypatch.setitem(ACCURACY, "trades", {**ACCURACY["trades"], "PGD": pgd["trades"]})
    monkeypatch.setitem(ACCURACY, "wscat", {**ACCURACY["wscat"], "PGD": pgd["wscat"]})
    files = make_metrics(tmp_path / "metrics")
    paths = build(tmp_path, files)
    _, rows, _ = parse_tabular(paths["tex_path"].read_text())
    tex = dict(zip(METHODS, rows[1 + METRICS.index("PGD")][1:]))
    summary = summarise(collect(files), METHODS)
    md = table_markdown(summary, methods=METHODS, display_names=DISPLAY, adversarial=ADVERSARIAL,
                        caption="c")  # write_table's .md (with the paired comparison)
    md_row = next(line for line in md.splitlines() if line.startswith("| PGD "))
    shown_md = dict(zip(METHODS, md_row.split("|")[2:]))
    with paths["csv_path"].open(newline="") as handle:
        ours = {r["method"]: r for r in csv.DictReader(handle) if r["metric"] == "PGD"}
    tier = _csv([{"table": "t", "dataset": "digits", "model": "cnn", **row}
                 for row in summary.to_dict("records")])
    tier_rows = {r["method"]: r for r in csv.DictReader(tier.splitlines()) if r["metric"] == "PGD"}
    for method, printed in (("trades", "57.41"), ("wscat", "56.59")):
        assert f"{statistics.fmean(pgd[method]):.2f}" == printed
        assert CELL.fullmatch(tex[method])[2] == printed, tex[method]
        assert shown_md[method].strip(" *").split(" ± ")[0] == printed
        assert ours[DISPLAY[method]]["mean"] == tier_rows[method]["mean"] == printed
        assert ours[DISPLAY[method]]["std"] == tier_rows[method]["std"]


def test_tex_compiles(tmp_path: Path) -> None:
    tex = build(tmp_path, make_metrics(tmp_path / "metrics"))["tex_path"].read_text()
    spec, rows, _ = parse_tabular(tex)  # the structural check stands in where pdflatex is absent
    assert len(rows) == 1 + len(METRICS)
    if shutil.which("pdflatex"):
        document = tmp_path / "doc.tex"
        document.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{bm}\n"
                            f"\\begin{{document}}\n{tex}\n\\end{{document}}\n")
        result = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", document.name],
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout[-2000:]
        assert (tmp_path / "doc.pdf").stat().st_size > 0


def _drop_seed(files: list[Path]) -> list[Path]:
    return [f for f in files if f.name != "wscat-seed3.json"]


def _break_json(files: list[Path]) -> list[Path]:
    files[4].write_text('{"method": "trades", ')
    return files


def _drop_key(files: list[Path]) -> list[Path]:
    data = json.loads(files[0].read_text())
    del data["accuracy"]["AA"]
    files[0].write_text(json.dumps(data))
    return files


def _missing_file(files: list[Path]) -> list[Path]:
    return files + [files[0].with_name("absent.json")]


def _typed(key: str, value: object):
    """A metrics file whose `key` (a dotted path) holds a value of another JSON type."""
    def breakage(files: list[Path]) -> list[Path]:
        data = json.loads(files[0].read_text())
        *above, last = key.split(".")
        part = data
        for name in above:
            part = part.setdefault(name, {})
        part[last] = value
        files[0].write_text(json.dumps(data))
        return files
    return breakage


def _other_dataset(files: list[Path]) -> list[Path]:
    data = json.loads(files[0].read_text())
    files[0].write_text(json.dumps({**data, "dataset": "cifar10"}))
    return files


@pytest.mark.parametrize("breakage, methods, message", [
    (lambda files: files, METHODS + ["mt"], "no metrics file for method(s) mt"),
    (_drop_seed, METHODS, "different seeds"),
    (_drop_seed, METHODS, "no metrics file for wscat seed 3; pass it (`wscat evaluate` makes it)"),
    (_break_json, METHODS, "trades-seed2.json: not valid JSON"),
    (_drop_key, METHODS, "standard-seed1.json: 'accuracy' lacks metric"),
    (_missing_file, METHODS, "absent.json: metrics file not found; run `wscat evaluate` for "
                             "that run first, or fix the path"),
    (_other_dataset, METHODS, "cifar10"),
    # A list where an object belongs was an AttributeError (`wscat table`: "unexpected", exit 1)
    (_typed("checks", [1]), METHODS, "standard-seed1.json: 'checks' must be a JSON object, got "
                                     "list; re-evaluate it (`wscat evaluate`)"),
    (_typed("checks", {"c": 3}), METHODS, "check 'c' must be a JSON object, got int"),
    (_typed("manifest", 3), METHODS, "'manifest' must be a JSON object, got int"),
    (_typed("manifest.attacks", [3]), METHODS, "'manifest.attacks' must be a JSON object, got "
                                               "list"),
])
def test_bad_input_raises_and_writes_nothing(tmp_path: Path, breakage, methods, message) -> None:
    files = breakage(make_metrics(tmp_path / "metrics"))
    with pytest.raises(ValueError, match=re.escape(message)):
        build(tmp_path, files, methods)
    out = tmp_path / "out"
    assert not out.exists() or not any(out.iterdir())


def test_collect_long_frame(tmp_path: Path) -> None:
    frame = collect(make_metrics(tmp_path / "metrics"))
    assert list(frame.columns) == ["method", "seed", "metric", "value"]
    assert len(frame) == len(METHODS) * len(SEEDS) * len(METRICS)
    value = frame.query("method == 'trades' and seed == 3 and metric == 'PGD'")["value"].item()
    assert math.isclose(value, 45.0)


def test_the_beta_figure_averages_per_seed_harmonic_means(tmp_path: Path) -> None:
    """Fig-beta's test "hm" is the mean over seeds of each seed's harmonic mean of Natural and
    PGD, the convention of the tables' Mean and of its own val_hm (the harmonic mean of the
    seed-averaged accuracies differs as soon as the seeds disagree)."""
    from wscat.config import load_params
    from wscat.metrics import harmonic_mean
    from wscat.report import paper
    from wscat.report.figures import beta_figure
    from wscat.sweeps import expand_paper

    params = expand_paper(load_params(Path(__file__).resolve().parents[2] / "params.yaml"))
    spec = params["paper"]["digits"]
    spec["datasets"] = spec["datasets"][:1]
    spec["beta"]["values"], spec["beta"]["seeds"] = [0.05], [1, 2]
    entry = spec["datasets"][0]
    (_, method), = paper.beta_points(params, "digits", entry)
    test = {1: (90.0, 10.0), 2: (50.0, 50.0)}  # per seed: Natural, PGD
    for seed, (natural, pgd) in test.items():
        run = paper.Run(entry["dataset"], paper.dataset_model(params, entry), method, seed)
        for path, body in ((run.metrics(str(tmp_path)), {"accuracy": {"Natural": natural,
                                                                       "PGD": pgd}}),
                           (run.validation(str(tmp_path)), {"Natural": natural, "PGD": pgd,
                                                            "HM": harmonic_mean([natural, pgd])})):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(body))
    beta_figure(params, "digits", str(tmp_path), tmp_path / "Fig-beta")
    with open(tmp_path / "Fig-beta.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    per_seed = statistics.mean(harmonic_mean(list(pair)) for pair in test.values())  # 34.0
    assert float(row["hm"]) == pytest.approx(per_seed, abs=1e-4)
    assert float(row["val_hm"]) == pytest.approx(per_seed, abs=1e-4)
    assert float(row["hm"]) != pytest.approx(harmonic_mean([70.0, 30.0]), abs=1)  # 42.0


@pytest.mark.parametrize("order, says", [(["apgd-ce", "apgd-t", "fab-t"], "no Square"),
                                         (["apgd-ce", "apgd-t", "fab-t", "square"], "then Square")])
def test_the_aa_paper_note_says_what_its_manifest_ran(order, says) -> None:
    """AA-paper runs the release's four attacks, Square last; a file of the three alone (as
    wscat ran it from 2026-11-27 until Square came back) is captioned as what it ran."""
    from wscat.report.table import _attack_notes

    data = {"manifest": {"attacks": {"AA-paper": {"attacks": {"order": order}}}}}
    (note,) = _attack_notes([data], ["AA-paper"])
    assert says in note and "10 iterations" in note


def test_the_nrf_note_names_the_feature_maps_its_manifests_attacked() -> None:
    """The layer comes from the manifests (`evaluation.nrf.layer` may be `last` or a name): the
    note used to say "a middle feature map" whatever ran; a table over two models names both."""
    from wscat.report.table import _attack_notes

    def data(layer: str) -> dict:
        return {"manifest": {"attacks": {"NRF": {"layer": layer}}}}

    (note,) = _attack_notes([data("features.3"), data("features.3")], ["NRF"])
    assert "feature map features.3 (evaluation.nrf.layer;" in note and "middle" not in note
    (note,) = _attack_notes([data("features.5"), data("features.2")], ["NRF"])
    assert "feature map features.2, features.5 (" in note


def _set_accuracy(path: Path, metric: str, value: object) -> None:
    """Overwrite one accuracy of a metrics file."""
    data = json.loads(path.read_text())
    data["accuracy"][metric] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("value", [350, -5, 100.01, -0.0001, float("nan"), float("inf"), "12", None, True])
def test_accuracy_outside_0_to_100_is_refused_and_nothing_written(tmp_path: Path, value: object) -> None:
    """Every accuracy is a finite percentage in [0, 100]; another value names its file and key."""
    files = make_metrics(tmp_path / "metrics")
    _set_accuracy(files[4], "PGD", value)
    with pytest.raises(ValueError, match=r"trades-seed2\.json: accuracy 'PGD' must be a finite number in \[0, 100\]"):
        build(tmp_path, files)
    assert not (tmp_path / "out").exists()


def test_an_extra_metric_outside_0_to_100_is_refused(tmp_path: Path) -> None:
    """An extra part's metrics (AA-paper, NRF) are held to the same range as the core's."""
    files = make_metrics(tmp_path / "metrics")
    extras = []
    for path in files:
        data = json.loads(path.read_text())
        extra = path.with_name(path.stem + "-extra.json")
        extra.write_text(json.dumps({**data, "part": "extra", "accuracy": {"AA-paper": 20.0, "NRF": 30.0}}))
        extras.append(extra)
    _set_accuracy(extras[0], "NRF", 130.0)
    with pytest.raises(ValueError, match=r"standard-seed1-extra\.json: accuracy 'NRF' must be a finite number in \[0, 100\]"):
        build(tmp_path, files + extras)
    assert not (tmp_path / "out").exists()


def test_accuracies_at_0_and_100_are_accepted(tmp_path: Path) -> None:
    """The bounds are percentages a model can reach."""
    files = make_metrics(tmp_path / "metrics")
    _set_accuracy(files[0], "Natural", 100)
    assert build(tmp_path, files)["tex_path"].exists()


def _subset(n: int) -> str:
    """How `wscat.evaluation.subset_name` names n of the 359 test images."""
    return "full test set (359 images)" if n == 359 else f"class-stratified subset: {n} of 359 test images (seed 0)"


def _manifest(seed: int, *, n: int = 359, n_aa: int = 359, settings: str = "3ccf0b616e9200ec") -> dict:
    """A manifest as `wscat evaluate` writes it (abridged): what differs between seeds differs here."""
    named = {"n_examples": n, "subset": _subset(n)}
    return {"seed": seed, "n_examples": n, "test_set_size": 359, "evaluation_set": _subset(n),
            "test_set": "fixed stratified test split", "eps": 0.15, "precision": "fp32", "device": f"cuda:{seed}",
            "checkpoint": {"path": f"results/models/seed{seed}/best.pt", "epoch": 30 + seed, "ema": True, "which": "best"},
            "evaluation_settings": settings, "versions": {"git": f"rev{seed}", "torch": "2.14.1"},
            "training": {"fingerprint": f"train{seed}", "weights_sha256": f"{seed:016x}"},
            "attacks": {"Natural": dict(named),
                        "PGD": {"library": "wscat", "eps": 0.15, "steps": 20, "step_size": 0.01875,
                                "random_start": True, "restarts": 1, "loss": "ce", "seed": seed, **named},
                        "AA": {"variant": "standard", "library": "pyautoattack", "library_version": "0.2.0",
                               "norm": "Linf", "eps": 0.15, "seed": 0, "shard_size": 500, "shards": seed,
                               "attacks": {"order": ["apgd-ce", "apgd-t", "fab-t", "square"]},
                               "clean_accuracy": 90.0 + seed, "robust_accuracy_after": {"square": 30.0 + seed},
                               "n_examples": n_aa, "subset": _subset(n_aa)}}}


def _with_manifests(files: list[Path], **changed: object) -> list[Path]:
    """Give every metrics file a realistic manifest; trades seed 2's evaluated with `changed`."""
    for path in files:
        data = json.loads(path.read_text())
        data["manifest"] = _manifest(data["seed"], **(changed if path.name == "trades-seed2.json" else {}))
        path.write_text(json.dumps(data))
    return files


def test_runs_that_differ_only_where_runs_may_differ_make_a_table(tmp_path: Path) -> None:
    """Method, seed, weights, training, device, git revision and what the attacks found are no
    evaluation settings: such files are tabulated together."""
    files = _with_manifests(make_metrics(tmp_path / "metrics"))
    tex = build(tmp_path, files)["tex_path"].read_text()
    assert "81.00" in tex


@pytest.mark.parametrize("changed, setting", [
    ({"n": 20, "n_aa": 4}, "n_examples"),          # seed 1 on all 359 images, seed 2 on 20 (AA on 4)
    ({"n_aa": 8}, "AA n_examples"),
    ({"settings": "0123456789abcdef"}, "evaluation_settings"),  # e.g. other PGD steps, same images
])
def test_runs_evaluated_with_other_settings_are_refused(tmp_path: Path, changed: dict, setting: str) -> None:
    """Seeds or methods measured on other images or with other evaluation params are not averaged
    or compared: one line names both files and the first setting that differs, nothing is written."""
    files = _with_manifests(make_metrics(tmp_path / "metrics"), **changed)
    with pytest.raises(ValueError) as refusal:
        build(tmp_path, files)
    message = str(refusal.value)
    assert "\n" not in message and "re-evaluate them with the same params" in message
    assert message.startswith(f"{files[4]}: evaluation setting '{setting}' ") and f"in {files[0]};" in message
    assert not (tmp_path / "out").exists()


def test_extra_parts_evaluated_with_other_settings_are_refused(tmp_path: Path) -> None:
    """The extra part's attacks (AA-paper) are compared across runs as the core's are."""
    files = _with_manifests(make_metrics(tmp_path / "metrics"))
    extras = []
    for path in files:
        data = json.loads(path.read_text())
        n = 4 if path.name == "wscat-seed3.json" else 8
        manifest = {**data["manifest"], "attacks": {"AA-paper": {"variant": "paper", "n_examples": n, "subset": _subset(n)}}}
        extra = path.with_name(path.stem + "-extra.json")
        extra.write_text(json.dumps({**data, "part": "extra", "accuracy": {"AA-paper": 20.0}, "manifest": manifest}))
        extras.append(extra)
    with pytest.raises(ValueError, match=r"wscat-seed3\.json: evaluation setting 'AA-paper n_examples' is 4, but 8"):
        build(tmp_path, files + extras)
    assert not (tmp_path / "out").exists()


def test_runs_are_compared_with_each_other_not_only_with_the_first(tmp_path: Path) -> None:
    """A first file that records no settings does not let the others differ among themselves."""
    files = _with_manifests(make_metrics(tmp_path / "metrics"), n_aa=4)
    data = json.loads(files[0].read_text())
    files[0].write_text(json.dumps({**data, "manifest": {}}))
    with pytest.raises(ValueError, match=r"trades-seed2\.json: evaluation setting 'AA n_examples' is 4, but 359 in "
                                         r"\S+standard-seed2\.json; re-evaluate them"):
        build(tmp_path, files)
