"""The paired bootstrap against WSCAT, the Markdown twin of a table, and the README paste."""
from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from wscat.evaluation import ATTACKS, harmonic_mean
from wscat.report import write_table
from wscat.report.paired import correctness, paired_bootstrap

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
from readme_tables import paste  # noqa: E402

N = 300
NAMES = {"trades": "TRADES", "rst": "RST", "wscat": "WSCAT", "standard": "Standard"}


def _flags(rate: dict[str, float], rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {a: rng.random(N) < rate[a] for a in ATTACKS}


def _metrics(method: str, seed: int, flags: dict[str, np.ndarray]) -> dict:
    accuracy = {a: 100.0 * float(flags[a].mean()) for a in ATTACKS}
    accuracy["Mean"] = harmonic_mean([accuracy[a] for a in ATTACKS])
    return {"dataset": "digits", "model": "cnn", "method": method, "seed": seed,
            "accuracy": {k: round(v, 4) for k, v in accuracy.items()},
            "per_image": {"order": "stratified", "correct": {
                a: "".join("1" if f else "0" for f in flags[a]) for a in ATTACKS}}}


def _runs(offsets: dict[str, float], seeds=(1, 2, 3)) -> list[dict]:
    """Metrics of methods whose per-attack accuracy is a base rate plus an offset."""
    base = {"Natural": 0.9, "FGSM": 0.7, "PGD": 0.6, "CW": 0.6, "AA": 0.5}
    runs = []
    for seed in seeds:
        for method, offset in offsets.items():
            rng = np.random.default_rng(100 * seed + len(method))
            runs.append(_metrics(method, seed, _flags({a: v + offset for a, v in base.items()},
                                                      rng)))
    return runs


def test_a_large_gain_is_resolved_and_an_equal_method_is_not():
    runs = _runs({"trades": -0.2, "rst": 0.0, "wscat": 0.0})
    # rst draws the same flags as wscat except for the seed offset by name length: make it equal.
    for run in runs:
        if run["method"] == "rst":
            twin = next(r for r in runs if r["method"] == "wscat" and r["seed"] == run["seed"])
            run["per_image"] = twin["per_image"]
    frame = paired_bootstrap(correctness(runs), ["trades", "rst"], n_bootstrap=500)
    trades, rst = frame.set_index("method").loc["trades"], frame.set_index("method").loc["rst"]
    assert trades["excludes_zero"] and trades["ci_high"] < 0 < -trades["delta_mean"]
    assert trades["ci_low"] <= trades["delta_mean"] <= trades["ci_high"]
    assert rst["delta_mean"] == 0 and not rst["excludes_zero"]
    # The point estimate is the difference of the seed-averaged harmonic Means.
    means = {m: np.mean([r["accuracy"]["Mean"] for r in runs if r["method"] == m])
             for m in ("trades", "wscat")}
    assert trades["delta_mean"] == pytest.approx(means["trades"] - means["wscat"], abs=1e-3)


def test_a_small_difference_stays_within_noise():
    frame = paired_bootstrap(correctness(_runs({"trades": -0.005, "wscat": 0.0})), ["trades"],
                             n_bootstrap=500)
    assert not frame.iloc[0]["excludes_zero"]


def test_missing_per_image_data_is_one_clear_error():
    runs = _runs({"trades": 0.0, "wscat": 0.0})
    del runs[0]["per_image"]
    with pytest.raises(ValueError, match="per-image correctness"):
        correctness(runs)


def _write(tmp_path: Path, runs: list[dict]) -> list[Path]:
    files = []
    for run in runs:
        path = tmp_path / f"{run['method']}-{run['seed']}.json"
        path.write_text(json.dumps(run))
        files.append(path)
    return files


def test_the_markdown_twin_matches_the_csv(tmp_path: Path):
    methods = ["standard", "trades", "rst", "wscat"]
    files = _write(tmp_path, _runs({"standard": -0.4, "trades": -0.2, "rst": 0.02, "wscat": 0.0}))
    out = {k: tmp_path / f"digits{k}" for k in (".tex", ".csv", ".json", ".md", "-p.csv",
                                                  "-p.tex")}
    write_table(experiment="digits", dataset="digits", model="cnn", metrics_files=files,
                methods=methods, display_names=NAMES, adversarial={"trades", "rst", "wscat"},
                tex_path=out[".tex"], csv_path=out[".csv"], summary_path=out[".json"],
                md_path=out[".md"], paired_csv_path=out["-p.csv"], paired_tex_path=out["-p.tex"])
    with open(out[".csv"], newline="") as handle:
        cells = {(r["method"], r["metric"]): (r["mean"], r["std"]) for r in csv.DictReader(handle)}
    md = out[".md"].read_text()
    header, rows = None, {}
    for line in md.splitlines():
        if not line.startswith("| "):
            continue
        parts = [p.strip().strip("*") for p in line.strip("|").split("|")]
        if header is None:
            header = parts[1:]
        elif parts[0] in ("Natural", "FGSM", "PGD", "CW", "AA (standard)", "Mean", "AA"):
            rows[parts[0].replace(" (standard)", "")] = parts[1:]
    assert header == [NAMES[m] for m in methods]
    assert set(rows) == {"Natural", "FGSM", "PGD", "CW", "AA", "Mean"}
    for metric, values in rows.items():
        for name, value in zip(header, values):
            assert tuple(value.split(" ± ")) == cells[(name, metric)], (metric, name)
    # The paired section: one row per adversarially trained method other than WSCAT.
    with open(out["-p.csv"], newline="") as handle:
        paired = list(csv.DictReader(handle))
    assert [r["method"] for r in paired] == ["TRADES", "RST"]
    for row in paired:
        line = next(l for l in md.splitlines() if l.startswith(f"| {row['method']} |")
                    and "[" in l)
        assert f"{float(row['delta_mean']):+.2f}" in line and row["verdict"] in line
    assert r"\label{Tab-paired-digits}" in out["-p.tex"].read_text()


def test_readme_paste_replaces_only_the_marked_block():
    readme = ("# x\n<!-- begin: results/tables/digits.md -->\nold\n"
              "<!-- end: results/tables/digits.md -->\ntail\n")
    pasted = paste(readme, "results/tables/digits.md", "| a |\n")
    assert pasted == ("# x\n<!-- begin: results/tables/digits.md -->\n| a |\n"
                      "<!-- end: results/tables/digits.md -->\ntail\n")
    with pytest.raises(SystemExit, match="markers"):
        paste("# none\n", "results/tables/digits.md", "| a |\n")


def test_the_readme_carries_the_demo_block():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- begin: results/tables/digits.md -->\n(.*?)<!-- end: "
                      r"results/tables/digits.md -->", readme, re.S)
    assert block and "Paired comparison with WSCAT" in block.group(1)
