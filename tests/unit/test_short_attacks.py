"""An attack whose steps x step size fall short of eps (PGD-5 on digits: 5 x 0.01875 = 0.09375 <
0.15) is weaker than FGSM's one step of eps by construction, and its column can read above
FGSM's. `wscat evaluate` says so in one warning line and the table's caption in one sentence;
neither refuses it nor changes a number, and a table of attacks that reach eps is unchanged byte
for byte."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.tiny import tiny_params, write_params
from wscat import cli
from wscat.config import load_params, short_attacks
from wscat.report import write_table
from wscat.report.cells import METRICS

LINE = ("warning: on digits, PGD-5 moves at most 5 x 0.01875 = 0.09375 < eps = 0.15: weaker "
        "than FGSM (one step of eps) by construction, so their accuracies can read above FGSM's "
        "and overstate robustness; raise evaluation.pgd_steps to 8 or more (or "
        "datasets.digits.eval_step_size to 0.03 or more) in params.yaml for numbers to report "
        "(a quick look may stay short)")
SENTENCE = ("PGD-5 and CW-5 move at most 5 × 0.01875 = 0.09375 < ε = 0.15: weaker than FGSM "
            "(one step of ε) by construction.")
SENTENCE_TEX = (r"PGD-5 and CW-5 move at most 5 $\times$ 0.01875 = 0.09375 $<$ $\varepsilon$ = "
                r"0.15: weaker than FGSM (one step of $\varepsilon$) by construction.")


def test_the_warning_names_a_short_attack_and_what_to_raise() -> None:
    """PGD-5 on digits: one line naming the attack, steps, step size, product, eps and the
    knobs; PGD-20 (the params' own) and 8 x 1/255 on CIFAR (= 8/255, within rounding): none."""
    params = load_params()
    assert short_attacks(params, "digits") is None and short_attacks(params, "cifar10") is None
    params["evaluation"]["pgd_steps"] = 5
    assert short_attacks(params, "digits") == LINE
    assert short_attacks(params, "digits", attacks=("CW", "NRF")) is None  # CW-20 and NRF-20
    params["evaluation"]["pgd_steps"] = params["evaluation"]["cw_steps"] = 8
    assert short_attacks(params, "cifar10") is None  # 8 x 1/255 reaches 8/255
    params["evaluation"]["cw_steps"] = 7
    assert short_attacks(params, "cifar10").startswith(
        "warning: on cifar10, CW-7 moves at most 7 x 0.003922 = 0.02745 < eps = 0.03137:")
    params["validation"] = {"pgd_steps": 3, "cw_steps": 20}  # model selection's attack
    line = short_attacks(params, "digits", "validation")
    assert line.startswith("warning: on digits, PGD-3 moves at most 3 x 0.01875 = 0.05625 < ")
    assert "raise validation.pgd_steps to 8 or more" in line and "eval_step_size to 0.05" in line


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny params (one epoch, 40 test images, AA on 8), a split and Standard trained on it."""
    folder = tmp_path_factory.mktemp("short")
    params = tiny_params(epochs=1)
    params["datasets"]["digits"]["labelled"] = 100
    write_params(folder / "params.yaml", params)
    common = ["--params", folder / "params.yaml", "--dataset", "digits", "--seed", 1]
    assert cli.main([str(a) for a in ["split", *common, "--out", folder / "s1.npz"]]) == 0
    assert cli.main([str(a) for a in [
        "train", *common, "--model", "cnn", "--method", "standard", "--split", folder / "s1.npz",
        "--device", "cpu", "--out-dir", folder / "run"]]) == 0
    return folder


def test_wscat_evaluate_prints_the_line_once_and_only_for_a_short_attack(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The tiny params' PGD-5 and CW-5: the line once, after the numbers are written; with 20
    steps no line. The metrics' numbers are the suite's either way (the warning changes none)."""
    def evaluate(steps: int) -> tuple[list[str], dict]:
        params = tiny_params(epochs=1)
        params["datasets"]["digits"]["labelled"] = 100
        params["evaluation"]["pgd_steps"] = params["evaluation"]["cw_steps"] = steps
        write_params(trained / f"params{steps}.yaml", params)
        out = trained / f"m{steps}.json"
        capsys.readouterr()
        assert cli.main([str(a) for a in [
            "evaluate", "--params", trained / f"params{steps}.yaml", "--dataset", "digits",
            "--model", "cnn", "--method", "standard", "--seed", 1, "--split",
            trained / "s1.npz", "--checkpoint", trained / "run/best.pt", "--out", out,
            "--part", "core", "--device", "cpu"]]) == 0
        return capsys.readouterr().err.splitlines(), json.loads(out.read_text())

    lines, short = evaluate(5)
    warned = [line for line in lines if "warning:" in line]
    assert warned == [f"wscat evaluate: {LINE.replace('PGD-5 moves', 'PGD-5 and CW-5 move')}"
                      .replace("evaluation.pgd_steps", "evaluation.pgd_steps and "
                               "evaluation.cw_steps")], lines
    assert lines[-1] == warned[0]
    assert short["manifest"]["attacks"]["PGD"]["steps"] == 5
    lines, _ = evaluate(20)
    assert not [line for line in lines if "warning:" in line], lines


def test_wscat_train_says_so_where_best_pt_is_chosen_by_a_short_attack(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TRADES selects best.pt on CW (`selection: cw`) with model selection's steps: CW-5 (the tiny
    params' `validation`) prints the line once, before the training; CW-20 and Standard (chosen
    on natural accuracy) print none."""
    def train(method: str, steps: int) -> list[str]:
        params = tiny_params(epochs=1)
        params["datasets"]["digits"]["labelled"] = 100
        params["validation"] = {"pgd_steps": steps, "cw_steps": steps}
        write_params(trained / f"train{steps}.yaml", params)
        capsys.readouterr()
        assert cli.main([str(a) for a in [
            "train", "--params", trained / f"train{steps}.yaml", "--dataset", "digits",
            "--model", "cnn", "--method", method, "--seed", 1, "--split", trained / "s1.npz",
            "--device", "cpu", "--out-dir", trained / f"{method}{steps}"]]) == 0
        return [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]

    assert train("trades", 5) == [
        "wscat train: warning: on digits, CW-5 moves at most 5 x 0.01875 = 0.09375 < eps = 0.15: "
        "weaker than FGSM (one step of eps) by construction, so model selection (best.pt under "
        "selection cw or hm) ranks epochs by a truncated attack; raise validation.cw_steps to 8 "
        "or more (or datasets.digits.eval_step_size to 0.03 or more) in params.yaml for numbers "
        "to report (a quick look may stay short)"]
    assert train("trades", 20) == []
    assert train("standard", 5) == []


def _metrics(folder: Path, steps: int) -> list[Path]:
    """Two methods' metrics files whose manifests record PGD and CW of `steps` steps."""
    folder.mkdir(parents=True)
    files = []
    for method, robust in (("standard", 0.0), ("trades", 40.0)):
        attacks = {"Natural": {"n_examples": 359},
                   "FGSM": {"eps": 0.15, "steps": 1, "step_size": 0.15, "random_start": False},
                   **{name: {"eps": 0.15, "steps": steps, "step_size": 0.01875,
                             "random_start": True} for name in ("PGD", "CW")}}
        path = folder / f"{method}.json"
        path.write_text(json.dumps({
            "dataset": "digits", "model": "cnn", "method": method, "seed": 1,
            "accuracy": {metric: 80.0 if metric == "Natural" else robust for metric in METRICS},
            "manifest": {"eps": 0.15, "attacks": attacks}}))
        files.append(path)
    return files


def _table(folder: Path, files: list[Path]) -> dict[str, str]:
    """The .tex, .csv and Markdown of `wscat table`'s write_table, by suffix."""
    paths = {"tex_path": folder / "t.tex", "csv_path": folder / "t.csv",
             "summary_path": folder / "t.json", "md_path": folder / "t.md"}
    write_table(experiment="digits", dataset="digits", model="cnn", metrics_files=files,
                methods=["standard", "trades"], display_names={"standard": "Standard",
                                                               "trades": "TRADES"},
                adversarial={"trades"}, **paths)
    return {path.suffix: path.read_text() for path in paths.values()}


def test_the_caption_says_so_and_is_unchanged_otherwise(tmp_path: Path) -> None:
    """PGD-5 and CW-5: the sentence ends the caption of the .tex (in math mode for pdflatex) and
    of the Markdown, and nothing else differs from the PGD-20 table; the CSV and summary carry
    no caption and are the same."""
    long = _table(tmp_path / "20", _metrics(tmp_path / "m20", 20))
    short = _table(tmp_path / "5", _metrics(tmp_path / "m5", 5))
    assert "FGSM by construction" not in long[".tex"] + long[".md"]
    assert f" {SENTENCE_TEX}}}" in short[".tex"] and f" {SENTENCE}*" in short[".md"]
    assert short[".tex"].replace(f" {SENTENCE_TEX}", "") == long[".tex"]
    assert short[".md"].replace(f" {SENTENCE}", "") == long[".md"]
    assert (short[".csv"], short[".json"]) == (long[".csv"], long[".json"])


def test_a_table_over_datasets_names_each_one() -> None:
    """tab-sup and Tab-mode span datasets: each short attack's clause names its dataset; an
    NRF of 20 steps and FGSM (one step of eps) are never short."""
    from wscat.report.table import short_caption

    def run(dataset: str, eps: float, step: float, steps: int) -> dict:
        return {"dataset": dataset, "manifest": {"attacks": {
            "FGSM": {"eps": eps, "steps": 1, "step_size": eps},
            "NRF": {"eps": eps, "steps": 20, "step_size": step},
            "PGD": {"eps": eps, "steps": steps, "step_size": step}}}}

    assert short_caption([run("digits-full", 0.15, 0.01875, 20)]) == ""
    assert short_caption([run("digits-full", 0.15, 0.01875, 5),
                          run("cifar10-full", 8 / 255, 1 / 255, 4)]) == (
        " On digits-full, PGD-5 moves at most 5 × 0.01875 = 0.09375 < ε = 0.15; on cifar10-full, "
        "PGD-4 moves at most 4 × 0.003922 = 0.01569 < ε = 0.03137: weaker than FGSM (one step "
        "of ε) by construction.")
