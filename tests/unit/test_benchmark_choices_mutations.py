"""Mutation tests for the benchmark scripts whose outputs fix knobs or README figures:
benchmarks/mt_labeler.py (which labeler run params.yaml takes), benchmarks/compile_choice.py
(eager or CUDA graphs per group of the proxy's methods) and benchmarks/demo_calibration.py (the
demo's digits setting): each test kills hand-made mutants that went through the tests importing
them (tests/unit/test_compile_choice.py, tests/unit/test_demo_calibration.py and the labeler tests
of tests/workflow/test_cifar10_proxy.py), with expectations from the scripts' docstrings, their
rules as written (the pages' heads), DESIGN.md's "No label outside the budget" and first
principles, never from the function under test. Training, labelling and evaluation are stood in
for by hand-made results: what is checked is which rows a choice reads, what it picks, on which
images a score is measured, what is refused and what is written.

What is checked, and from which fact:
- mt_labeler: the validation score is the checkpoint's accuracy in % on the split's labelled
  validation images, never its test, unlabelled or labelled training images; a run trains its
  labeler (not the run's name), scores best.pt (the checkpoint the pipeline labels with) and
  labels with its own labeler; the page's choice is per labeler the higher validation *sum*
  over seeds, a tie to fewer epochs, and the pseudo-label accuracy (the true labels of the
  unlabelled pool) never enters it; each run's seconds are summed over seeds, its epochs its own
  (not params.yaml's), the validation table shows the validation scores with mean and min over
  several seeds; `--jobs 0`, a page that is an input, a run named twice and a run that is not
  one (fixed: they counted twice in the sum, or stopped the script after the runs before them
  had trained) are refused before any work; a dataset params.yaml lacks and the proxy without
  --npz are refused in one line; the model defaults to the experiment's, and only a CPU
  run turns off bf16 and channels_last; a run's ramp-up keeps its share of the run, rounded,
  and names its EMA buffers; `standard:<epochs>` keeps the knobs params.yaml already sets.
- compile_choice: graphs when T falls by *at least* the margin (the boundary included), 10% by
  default; T counts the warm-up and 111 steps an epoch (params.yaml: "111 steps, every method");
  a graphed group's keys are those of every one of its methods, the groups cover the proxy
  experiment's six methods once; `--margin` is a share in [0, 1) (0 allowed, 1 not) and reaches
  the choice; a warm-up of 0 s is a measurement, a bool is not a number of seconds; an eager file
  given twice or a graphs file given twice is refused; each group's epochs come from params; only
  `--apply` writes; apply refuses (file untouched, no temporary left) a params file whose dataset
  level still compiles the methods it would make eager; with_choice refuses a proxy block without
  per_method rather than writing into the next dataset's.
- demo_calibration: the calibration split tests on the held-out images, no run trains on them
  (TRADES with every label included), it keeps the validation split, refuses a held-out image the
  seed labels, and draws a missing held set from the seed's unlabelled pool; held_out_images
  draws from the images no seed labels, round 2 from what round 1 (drawn with seed 0) left; the
  issue's test: a gap of exactly 8 passes, a gap equal to 3 x the larger sample std (ddof 1, of
  TRADES, RST and WSCAT only, not TRADES-with-every-label) does not, both RST and WSCAT must pass,
  gaps are to TRADES, the margin is the smaller gap less max(8, bound); the summary skips a
  one-seed setting and says a setting passes when one does; the rule's time estimate (w16's
  demo = 330 s of Snakemake for its five methods plus one more WSCAT, CPU seconds = train +
  eval, TRADES-with-every-label not counted, 60 s of install), its base the width-16 setting
  wherever it lies, the pick the largest margin among those that fit; pooling averages eval
  seconds too and keeps only rows in both rounds; run_setting evaluates every method on the
  calibration split it trained on (never the seed's own split, whose test set is the real one),
  TRADES-with-every-label as TRADES on the full split, each method on its own labeler's
  pseudo-labels made on the calibration split; main runs the fixed stages (`seeds`, `replicate`)
  on one held set (round 2 for `replicate`), params' eps outside stage `eps`, only the settings
  `--only` names, and refuses a name the stage lacks (fixed: nothing ran, then an IndexError);
  render's cells are Mean (Natural / AA).
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from wscat.config import load_params, training_for
from wscat.data.split import Split, load_split, save_split

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compile_choice as cc  # noqa: E402
import demo_calibration as dc  # noqa: E402
import mt_labeler as ml  # noqa: E402

PARAMS = ROOT / "params.yaml"
_LOADED: dict[str, Any] = {}


def _load(path: str | Path) -> dict[str, Any]:
    """load_params, params.yaml's own text loaded once (a copy each time): the file's 0.2 s of
    validation would otherwise be most of this file's time."""
    if Path(path).read_bytes() != PARAMS.read_bytes():
        return load_params(path)
    if "params" not in _LOADED:
        _LOADED["params"] = load_params(PARAMS)
    return copy.deepcopy(_LOADED["params"])


@pytest.fixture(autouse=True)
def _params_once(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (ml, cc, dc):
        monkeypatch.setattr(module, "load_params", _load)


# ---------------------------------------------------------------- mt_labeler

def _split(**parts: list[int]) -> Split:
    """A split of the 14 images 0-13: labelled 0-1, unlabelled 2-5, validation 6-9, test 10-13
    unless given."""
    default = {"labelled": [0, 1], "unlabelled": [2, 3, 4, 5], "validation": [6, 7, 8, 9],
               "test": [10, 11, 12, 13]}
    default.update(parts)
    return Split(dataset="digits", seed=1, **{k: np.asarray(v, dtype=np.int64)
                                              for k, v in default.items()})


def test_the_validation_score_reads_the_validation_images_only(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every image is labelled 0; the stand-in model says 0 for images 6, 7 and 8 alone: 3 of the
    4 validation images, none of the test, unlabelled or labelled ones. The score is 75.0 (%)."""
    images = torch.arange(14, dtype=torch.float32).view(14, 1)
    seen: dict[str, Any] = {}

    def load_dataset(name: str, entry: dict) -> SimpleNamespace:
        seen["dataset"] = (name, entry)
        return SimpleNamespace(images=images, labels=torch.zeros(14, dtype=torch.long))

    def load_model(path: Path, device: torch.device) -> tuple[str, dict]:
        seen["checkpoint"] = path
        return "model", {}

    def predict(model: str, x: torch.Tensor, device: torch.device) -> torch.Tensor:
        return torch.tensor([0 if int(v) in (6, 7, 8) else 1 for v in x[:, 0]])

    monkeypatch.setattr(ml, "load_split", lambda path: _split())
    monkeypatch.setattr(ml, "load_dataset", load_dataset)
    monkeypatch.setattr(ml, "load_model", load_model)
    monkeypatch.setattr(ml, "predict", predict)
    params = {"datasets": {"digits": {"source": "digits"}}}
    score = ml.validation_accuracy(params, "digits", tmp_path / "s.npz", tmp_path / "best.pt",
                                   torch.device("cpu"))
    assert score == 75.0
    assert seen == {"dataset": ("digits", {"source": "digits"}),
                    "checkpoint": tmp_path / "best.pt"}


def test_one_run_trains_its_labeler_and_scores_the_checkpoint_it_labels_with(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`standard:20`: Standard trains (not a method named 'standard:20'), labels as Standard, and
    best.pt is scored on the run's split; the score is 'validation', the pseudo-label accuracy
    'accuracy' (a diagnostic), never swapped."""
    calls: dict[str, Any] = {}
    monkeypatch.setattr(ml, "train_step", SimpleNamespace(
        run=lambda params, **kw: calls.setdefault("train", (params, kw))))
    monkeypatch.setattr(ml, "pseudo_step", SimpleNamespace(
        run=lambda params, **kw: calls.setdefault("pseudo", kw) and {"accuracy": 12.5}))
    monkeypatch.setattr(ml, "validation_accuracy", lambda *a: calls.setdefault("score", a)
                        and 87.5)
    base = _load(PARAMS)
    split, out = tmp_path / "split.npz", tmp_path / "run"
    result = ml.one_run(base, "standard:20", "digits", "cnn", 3, split, out, torch.device("cpu"))
    assert (result["validation"], result["accuracy"]) == (87.5, 12.5)
    params, train = calls["train"]
    assert train["method"] == "standard" and train["seed"] == 3 and train["model"] == "cnn"
    assert train["split_path"] == split and train["pseudo_path"] is None
    assert train["out_dir"] == out
    assert training_for(params, "digits", "standard")["epochs"] == 20
    assert calls["pseudo"]["labeler"] == "standard"
    assert calls["pseudo"]["checkpoint"] == out / "best.pt"
    assert calls["pseudo"]["split_path"] == split
    assert calls["score"][2:4] == (split, out / "best.pt")


def _main(monkeypatch: pytest.MonkeyPatch, module: Any, argv: list[str]) -> Any:
    monkeypatch.setattr(sys, "argv", [module.__file__, *argv])
    if hasattr(module, "torch"):  # the scripts set one thread; the test process keeps its own
        monkeypatch.setattr(module.torch, "set_num_threads", lambda n: None)
    return module.main()


def test_the_labeler_rule_sums_over_seeds_and_breaks_a_tie_to_fewer_epochs() -> None:
    """Standard: 150 each (80 + 70, 75 + 75): the run of fewer epochs. Mean Teacher: mt:100:copy
    has the higher sum (150 against 145), though mt:40:copy has the higher best and first seed."""
    epochs = {"standard": 40, "standard:100": 100, "mt:40:copy": 40, "mt:100:copy": 100}
    assert ml.choose({"standard:100": [75.0, 75.0], "standard": [80.0, 70.0],
                      "mt:40:copy": [85.0, 60.0], "mt:100:copy": [70.0, 80.0]}, epochs) == {
        "standard": "standard", "mt": "mt:100:copy"}


def test_the_labeler_page_chooses_on_validation_never_on_pseudo_label_accuracy(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two seeds: 'standard:100' scores higher on validation, 'standard' has the better
    pseudo-labels (the true labels of the unlabelled pool: a diagnostic, which must not count)."""
    validation = {"standard": [80.0, 70.0], "standard:100": [85.0, 75.0]}
    pseudo = {"standard": [90.0, 90.0], "standard:100": [50.0, 70.0]}
    seconds = {1: 3.0, 2: 4.0}
    monkeypatch.setattr(ml, "split_step", SimpleNamespace(run=lambda *a: None))
    monkeypatch.setattr(ml, "one_run", lambda base, run, dataset, model, seed, *rest: {
        "validation": validation[run][seed - 1], "accuracy": pseudo[run][seed - 1],
        "seconds": seconds[seed]})
    page = tmp_path / "page.md"
    assert _main(monkeypatch, ml, ["--dataset", "digits", "--params", str(PARAMS), "--runs",
                                   *validation, "--seeds", "1", "2", "--tag", "t", "--page",
                                   str(page)]) == 0
    text = page.read_text()
    own = training_for(_load(PARAMS), "digits", "standard")["epochs"]
    assert own != 100  # the fact the lines below need: 'standard:100' is a run of its own
    assert text.split("## What the rule chose")[1].split("\n")[2] == (
        "- standard: **standard:100** (100 epochs); params.yaml needs: "
        "`training.digits.per_method.standard.epochs: 100`")
    scores, diagnostic = text.split("## Pseudo-label accuracy")
    # seconds summed over the seeds (3 + 4); the mean and the min over seeds
    assert f"| standard | {own} | 7 | 80.00 | 70.00 | 75.00 | 70.00 |" in scores
    assert "| standard:100 | 100 | 7 | 85.00 | 75.00 | 80.00 | 75.00 |" in scores
    assert f"| standard | {own} | 7 | 90.00 | 90.00 | 90.00 | 90.00 |" in diagnostic
    assert "| standard:100 | 100 | 7 | 50.00 | 70.00 | 60.00 | 50.00 |" in diagnostic


def test_the_labeler_refusals_come_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--jobs 0, a page that is the params file, a run named twice (its seeds would count twice in
    the rule's sum) and a run that is not one (it would stop the script after the runs before it
    had trained; a field past the last one it takes would be ignored): refused in one line,
    exit 2, before a split is made."""
    def no_work(*args: Any, **kw: Any) -> None:
        raise AssertionError("work started")

    monkeypatch.setattr(ml, "split_step", SimpleNamespace(run=no_work))
    monkeypatch.setattr(ml, "one_run", no_work)
    with pytest.raises(SystemExit, match="--jobs 0"):
        _main(monkeypatch, ml, ["--dataset", "digits", "--params", str(PARAMS), "--jobs", "0",
                                "--tag", "t", "--page", str(tmp_path / "p.md")])
    params = tmp_path / "params.yaml"
    params.write_bytes(PARAMS.read_bytes())
    assert _main(monkeypatch, ml, ["--dataset", "digits", "--params", str(params), "--tag", "t",
                                   "--page", str(params)]) == 2
    assert params.read_bytes() == PARAMS.read_bytes()
    for runs in (["standard", "mt", "standard"], ["mt:60", "standard"], ["mtx:60:copy"],
                 ["standard:x"], ["mt:60:copy:0.1:x"], ["standard:60:copy"]):
        capsys.readouterr()
        assert _main(monkeypatch, ml, ["--dataset", "digits", "--params", str(PARAMS), "--runs",
                                       *runs, "--tag", "t", "--page", str(tmp_path / "p.md")]) == 2
        error = capsys.readouterr().err
        assert len(error.strip().splitlines()) == 1 and error.startswith("mt_labeler.py: --runs")
    assert not (tmp_path / "p.md").exists()


def _args(**given: Any) -> argparse.Namespace:
    args = {"params": PARAMS, "dataset": "digits", "npz": None, "seeds": [1], "model": None,
            "device": "cpu", **given}
    return argparse.Namespace(**args)


def test_the_labeler_base_params() -> None:
    """An unknown dataset and the proxy without --npz are refused; the model defaults to the
    experiment's; a CPU run turns bf16 and channels_last off, a GPU run keeps params.yaml's."""
    with pytest.raises(SystemExit, match="no dataset 'nope'"):
        ml.base_params(_args(dataset="nope"))
    with pytest.raises(SystemExit, match="needs --npz"):
        ml.base_params(_args(dataset=ml.PROXY))
    real = _load(PARAMS)
    _, model = ml.base_params(_args())
    assert model == real["experiments"]["digits"]["model"]
    assert real["training"]["cifar10"]["precision"] == "bf16"  # the fact the next lines need
    assert real["training"]["cifar10"]["channels_last"] is True
    cpu, _ = ml.base_params(_args(dataset="cifar10"))
    gpu, _ = ml.base_params(_args(dataset="cifar10", device="cuda"))
    assert (cpu["training"]["cifar10"]["precision"], cpu["training"]["cifar10"]["channels_last"]
            ) == ("fp32", False)
    assert gpu["training"]["cifar10"] == real["training"]["cifar10"]


def test_a_runs_knobs_go_over_params_yaml_and_its_ramp_up_keeps_its_share() -> None:
    """digits: Mean Teacher's own 100 epochs; a 20-epoch run keeps the ramp-up's share, rounded
    (not floored, never 0); its EMA buffers are the run's; `standard:<epochs>` keeps the knobs
    params.yaml already sets for Standard."""
    base = _load(PARAMS)
    own = training_for(base, "digits", "mt")["epochs"]
    assert own == 100
    base["methods"]["mt"].setdefault("per_dataset", {}).setdefault("digits", {})[
        "rampup_epochs"] = 33
    params, method = ml.configure(base, "mt:20:average", "digits")
    assert method == "mt"
    assert params["methods"]["mt"]["per_dataset"]["digits"]["rampup_epochs"] == 7  # 6.6
    assert training_for(params, "digits", "mt")["ema_buffers"] == "average"
    params, _ = ml.configure(base, "mt:1:copy", "digits")  # 0.33 rounds to 0: at least 1
    assert params["methods"]["mt"]["per_dataset"]["digits"]["rampup_epochs"] == 1
    base["training"]["digits"]["per_method"]["standard"] = {"lr": 0.05}
    params, method = ml.configure(base, "standard:20", "digits")
    assert method == "standard"
    assert training_for(params, "digits", "standard")["lr"] == 0.05
    assert training_for(params, "digits", "standard")["epochs"] == 20


# ---------------------------------------------------------------- compile_choice

def _rows(rows: list[tuple[str, float, float]], *, graphs: bool = False,
          batch: int = 128) -> dict[str, Any]:
    """throughput.py's JSON: (method, s/step, warm-up s) per row."""
    return {"rows": [{"method": m, "seconds_per_step": s, "warmup_seconds": w,
                      "compile": graphs, "compile_mode": cc.MODE if graphs else None,
                      "model": "wrn-16-4", "batch": batch, "precision": "bf16",
                      "channels_last": True, "deterministic": True} for m, s, w in rows],
            "failed": []}


def test_graphs_when_the_run_falls_by_at_least_the_margin() -> None:
    """One step an epoch, one epoch: 4 s eager against 3 s with graphs is 25% faster, exactly a
    margin of 0.25 ('at least'); 9% faster is under the default 10%; 2% (98 s against 100 s,
    wscat's epochs) is too, though 5 + 48 s (mt's 10 epochs) would not be."""
    epochs = {"mt": 1, "wscat": 1}
    chosen = cc.choose(_rows([("mt", 4.0, 0.0)]), _rows([("mt", 3.0, 0.0)], graphs=True),
                       epochs, steps_per_epoch=1, margin=0.25)
    assert chosen["mt"][0]
    chosen = cc.choose(_rows([("mt", 1.0, 0.0)]), _rows([("mt", 0.91, 0.0)], graphs=True),
                       {"mt": 100, "wscat": 1}, steps_per_epoch=1)
    assert not chosen["mt"][0] and "under 10% faster" in chosen["mt"][1]
    # each group is timed with its own epochs: wscat's 100, 100 s eager against 48 + 50 s
    chosen = cc.choose(_rows([("wscat", 1.0, 0.0)]), _rows([("wscat", 0.5, 48.0)], graphs=True),
                       {"mt": 10, "wscat": 100}, steps_per_epoch=1)
    assert not chosen["wscat"][0] and chosen["wscat"][1].startswith("wscat: 100 s eager, 98 s")


def test_a_run_counts_111_steps_an_epoch_by_default() -> None:
    """1 s a step eager: 111 s an epoch; graphs at 0.5 s a step after a 44.2 s warm-up:
    44.2 + 55.5 = 99.7 s <= 0.9 x 111 = 99.9 s, graphs (with 110 steps: 99.2 > 99, eager)."""
    chosen = cc.choose(_rows([("mt", 1.0, 0.0)]), _rows([("mt", 0.5, 44.2)], graphs=True),
                       {"mt": 1, "wscat": 1})
    assert chosen["mt"][0]
    assert chosen["mt"][1].startswith("mt: 111 s eager, 100 s with graphs")


def test_the_groups_are_the_proxys_six_methods_each_once() -> None:
    """GROUPS covers experiments.cifar10-proxy.methods; a graphed group gives all its members
    graphs."""
    members = [m for group in cc.GROUPS.values() for m in group]
    proxy = _load(PARAMS)["experiments"]["cifar10-proxy"]["methods"]
    assert sorted(members) == sorted(proxy)
    assert cc.graphed_methods({"mt": (False, ""), "wscat": (True, "")}) == [
        "wscat", "wscat-sup", "trades", "rst"]


def _files(tmp_path: Path, eager: dict, graphs: dict) -> list[str]:
    (tmp_path / "e.json").write_text(json.dumps(eager))
    (tmp_path / "g.json").write_text(json.dumps(graphs))
    return ["--eager", str(tmp_path / "e.json"), "--graphs", str(tmp_path / "g.json")]


def test_the_compile_choice_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Each group's epochs from --params (mt 0.01 s a step x 111 x its epochs); --margin reaches
    the rule and may be 0, not 1; a 0 s warm-up is a measurement; only --apply writes."""
    params = tmp_path / "params.yaml"
    params.write_bytes(PARAMS.read_bytes())
    mt_epochs = training_for(_load(PARAMS), cc.DATASET, "mt")["epochs"]
    eager = _rows([("mt", 0.01, 0.0), ("wscat", 0.01, 0.0)])
    graphs = _rows([("mt", 0.007, 0.0), ("wscat", 0.01, 0.0)], graphs=True)  # mt 30% faster
    files = _files(tmp_path, eager, graphs)
    assert _main(monkeypatch, cc, [*files, "--params", str(params)]) == 0
    out = capsys.readouterr().out
    assert f"mt+standard: mt: {0.01 * 111 * mt_epochs:.0f} s eager" in out
    assert "mt+standard: " in out and out.split("mt+standard: ")[1].split("\n")[0].endswith(
        ": graphs")
    assert params.read_bytes() == PARAMS.read_bytes()
    assert _main(monkeypatch, cc, [*files, "--params", str(params), "--margin", "0.5"]) == 0
    assert "under 50% faster, eager" in capsys.readouterr().out
    assert _main(monkeypatch, cc, [*files, "--params", str(params), "--margin", "0"]) == 0
    with pytest.raises(SystemExit) as refused:
        _main(monkeypatch, cc, [*files, "--params", str(params), "--margin", "1"])
    assert refused.value.code == 2


@pytest.mark.parametrize("case", ["eager twice", "graphs twice", "bool seconds"])
def test_the_compile_choice_refusals(case: str, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An eager result as --graphs, a graphs result as --eager, True as seconds: exit 2, one
    line."""
    eager, graphs = _rows([("mt", 0.01, 0.0)]), _rows([("mt", 0.007, 2.0)], graphs=True)
    if case == "eager twice":
        graphs = eager
    elif case == "graphs twice":
        eager = graphs
    else:
        eager["rows"][0]["seconds_per_step"] = True
    assert _main(monkeypatch, cc, [*_files(tmp_path, eager, graphs), "--params",
                                   str(PARAMS)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_apply_refuses_a_dataset_level_compile_it_cannot_undo(tmp_path: Path) -> None:
    """training.cifar10-proxy.compile: true compiles every method without a per_method entry:
    making them eager by taking per_method keys out cannot work, so the file stays as it was."""
    everything = [m for group in cc.GROUPS.values() for m in group]
    text = cc.with_choice(PARAMS.read_text(), [], everything)
    start = text.index(f"\n  {cc.DATASET}:\n", text.index("\ntraining:"))
    end = text.index("per_method:", start)
    assert text[start:end].count("\n    compile: false\n") == 1
    text = text[:start] + text[start:end].replace("compile: false", "compile: true") + text[end:]
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match="would still compile"):
        cc.apply(path, [], everything)
    assert path.read_text() == text and [p.name for p in tmp_path.iterdir()] == ["params.yaml"]


def test_with_choice_writes_into_the_proxys_own_per_method_block_or_refuses() -> None:
    """Without a per_method block under training.cifar10-proxy the file is not laid out for it:
    ValueError, not an entry in the next dataset's per_method block."""
    text = PARAMS.read_text()
    start = text.index(f"\n  {cc.DATASET}:\n", text.index("\ntraining:"))
    block = text.index("\n    per_method:", start)
    after = text.index("\n  cifar100:", block)  # the next dataset, which has a per_method block
    assert "\n    per_method:" in text[after:]
    flat = text[:block] + text[after:]
    with pytest.raises(ValueError, match="add the keys by hand"):
        cc.with_choice(flat, ["mt"])


# ---------------------------------------------------------------- demo_calibration

def test_the_calibration_split_tests_on_the_held_out_images_and_trains_on_none(
        tmp_path: Path) -> None:
    """Held out 3, 5, 7 of the unlabelled 2-9: they are the test set, out of the unlabelled pool,
    and out of TRADES-with-every-label's labelled set (which gets the rest of the pool)."""
    save_split(_split(unlabelled=list(range(2, 10)), validation=[10, 11], test=[12, 13]),
               tmp_path / "s.npz")
    held = np.array([3, 5, 7])
    cal = load_split(dc.calibration_split(tmp_path / "s.npz", tmp_path / "c.npz", held=held))
    full = load_split(dc.calibration_split(tmp_path / "s.npz", tmp_path / "f.npz", full=True,
                                           held=held))
    assert cal.test.tolist() == full.test.tolist() == [3, 5, 7]
    assert cal.unlabelled.tolist() == [2, 4, 6, 8, 9] and cal.labelled.tolist() == [0, 1]
    assert full.labelled.tolist() == [0, 1, 2, 4, 6, 8, 9] and full.unlabelled.size == 0
    assert cal.validation.tolist() == full.validation.tolist() == [10, 11]
    with pytest.raises(ValueError, match="labelled in seed 1's split"):  # not a bare assert
        dc.calibration_split(tmp_path / "s.npz", tmp_path / "x.npz", held=np.array([0, 3]))
    assert not (tmp_path / "x.npz").exists()


def test_a_calibration_set_drawn_for_one_seed_comes_from_its_unlabelled_pool(
        tmp_path: Path) -> None:
    """Without `held`: HELD_OUT images of the seed's unlabelled pool (digits 0-1499), none of its
    other images (1500-1796)."""
    save_split(_split(labelled=[1500], unlabelled=list(range(1500)), validation=[1501],
                      test=list(range(1502, 1797))), tmp_path / "s.npz")
    cal = load_split(dc.calibration_split(tmp_path / "s.npz", tmp_path / "c.npz"))
    assert len(cal.test) == dc.HELD_OUT and cal.test.max() < 1500
    assert len(cal.unlabelled) == 1500 - dc.HELD_OUT


def test_held_out_images_come_from_what_no_seed_labels_round_2_from_what_round_1_left(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Seeds' unlabelled pools 1-12 and 2-14: the images no seed labels are 2-12. The stand-in
    draw takes the first 3 of a pool with seed 0, its last 3 otherwise: round 1 is 2, 3, 4;
    round 2 draws from 5-12, so 5, 6, 7."""
    pools = {1: np.arange(1, 13), 2: np.arange(2, 15)}
    monkeypatch.setattr(dc, "split_step", SimpleNamespace(run=lambda *a: None))
    monkeypatch.setattr(dc, "load_split", lambda path: SimpleNamespace(
        unlabelled=pools[int(Path(path).stem.split("-")[1])]))
    monkeypatch.setattr(dc, "_stratified", lambda pool, seed: pool[:3] if seed == 0
                        else pool[-3:])
    assert dc.held_out_images({}, [1, 2], tmp_path).tolist() == [2, 3, 4]
    assert dc.held_out_images({}, [1, 2], tmp_path, round_=2).tolist() == [5, 6, 7]


def _setting(setting: str, width: int, means: dict[str, list[float]], train_s: float = 1.0,
             eval_s: float = 0.0) -> list[dict[str, str]]:
    """The CSV's rows (strings) of one setting: one per method and seed."""
    return [{"setting": setting, "width": str(width), "seed": str(i + 1), "method": method,
             "train_s": str(train_s), "eval_s": str(eval_s), "Mean": str(value)}
            for method, values in means.items() for i, value in enumerate(values)]


def _means(trades: list[float], rst: list[float], wscat: list[float],
           full: list[float] | None = None) -> dict[str, list[float]]:
    return {"standard": [0.0] * len(trades), "mt": [0.0] * len(trades), "trades": trades,
            "rst": rst, "wscat": wscat, "trades-full": full or [80.0] * len(trades)}


def test_the_issue_test_at_its_boundaries() -> None:
    """Gap 8 with no spread passes ('at least 8'); TRADES 57/60/63 (std 3, ddof 1) against RST and
    WSCAT at 69 is a gap of 9 = 3 x 3: not 'more than'; TRADES-with-every-label's spread does not
    count; one of RST and WSCAT short fails; gaps are to TRADES; margin = smaller gap - max(8,
    bound)."""
    flat = dc.issue_test(_setting("a", 16, _means([60.0] * 3, [68.0] * 3, [70.0] * 3)))
    assert flat.passes and flat.margin == 0.0
    spread = dc.issue_test(_setting("a", 16, _means([57.0, 60.0, 63.0], [69.0] * 3, [69.0] * 3)))
    assert not spread.passes and spread.margin == 0.0
    wide_full = _means([60.0] * 3, [70.0] * 3, [72.0] * 3, full=[50.0, 80.0, 110.0])
    test = dc.issue_test(_setting("a", 16, wide_full))
    assert test.passes and test.margin == 2.0  # min(10, 12) - max(8, 0)
    assert not dc.issue_test(_setting("a", 16, _means([60.0] * 3, [70.0] * 3,
                                                      [67.0] * 3))).passes
    spread_rst = dc.issue_test(_setting("a", 16, _means([60.0] * 3, [68.0, 72.0, 76.0],
                                                        [80.0] * 3)))
    assert not spread_rst.passes and spread_rst.margin == 12.0 - 12.0  # bound 3 x 4


def test_the_summary_skips_one_seed_settings_and_says_when_one_passes() -> None:
    rows = (_setting("pass", 16, _means([60.0] * 3, [70.0] * 3, [70.0] * 3))
            + _setting("fail", 24, _means([60.0] * 3, [61.0] * 3, [61.0] * 3))
            + _setting("once", 32, _means([60.0], [90.0], [90.0])))
    lines = dc.summary(rows)
    assert [line.split(" | ")[0] for line in lines if line.startswith("| ") and " | 1 2 3 |"
            in line] == ["| pass", "| fail"]
    assert not any(line.startswith("| once") for line in lines)
    assert "A setting passes over seeds (see the table)." in lines


def test_the_summary_leaves_out_a_setting_where_a_method_did_not_run() -> None:
    """A setting without TRADES-with-every-label's rows printed 'nan ± nan' in its column as if
    it were a number: it is left out, and the page says which and why."""
    full = _setting("full", 16, _means([60.0] * 3, [70.0] * 3, [70.0] * 3))
    short = [r for r in _setting("short", 24, _means([60.0] * 3, [61.0] * 3, [61.0] * 3))
             if r["method"] != "trades-full"]
    lines = dc.summary(full + short)
    assert not any("nan" in line for line in lines)
    assert [line.split(" | ")[0] for line in lines if line.startswith("| ") and " | 1 2 3 |"
            in line] == ["| full"]
    assert "Left out, not every method ran: short (no trades-full)." in lines


def test_the_rules_time_estimate_and_its_base() -> None:
    """w16 (listed second) is the base: 11 CPU s per run (10 train + 1 eval), 15 runs of the
    five methods = 165 s, plus one more WSCAT (33 s) = 198 s stand for 330 s of Snakemake; with
    60 s of install its demo is 390 s, 335 s without WSCAT-sup. w24: 24 s per run, 360 s + 72 s,
    so 60 + 432 x 330/198 = 780 s and 60 + 600 = 660 s. TRADES-with-every-label's 100 s runs are
    not part of a demo."""
    w16 = _means([60.0] * 3, [61.0] * 3, [61.0] * 3)
    rows = (_setting("w24", 24, w16, train_s=20.0, eval_s=4.0)
            + _setting("w16", 16, w16, train_s=10.0, eval_s=1.0))
    for row in rows:
        if row["method"] == "trades-full":
            row["train_s"] = "100.0"
    table, verdict = dc.rule_table(rows)
    assert table[2].startswith("| w24 |") and table[2].endswith("| 780 (660) |")
    assert table[3].startswith("| w16 |") and table[3].endswith("| 390 (335) |")
    assert verdict == "No setting that fits passes: the demo keeps w16 (the rule's last branch)."


def test_the_rule_picks_the_largest_margin_among_those_that_fit() -> None:
    """w32 (margin 4, listed first) and w24 (margin 2) both pass and fit: w32, with WSCAT-sup."""
    rows = (_setting("w32", 32, _means([60.0] * 3, [72.0] * 3, [72.0] * 3))
            + _setting("w24", 24, _means([60.0] * 3, [70.0] * 3, [70.0] * 3))
            + _setting("w16", 16, _means([60.0] * 3, [61.0] * 3, [61.0] * 3)))
    assert dc.rule_table(rows)[1] == ("The rule picks **w32** (margin +4.00), with the WSCAT-sup "
                                      "column.")


def test_pooling_averages_the_seconds_and_keeps_rows_of_both_rounds_only() -> None:
    first = _setting("w16", 16, {"trades": [60.0]}, train_s=10.0, eval_s=2.0)
    second = (_setting("w16", 16, {"trades": [62.0]}, train_s=20.0, eval_s=4.0)
              + _setting("w24", 24, {"trades": [70.0]}))
    both = dc.pooled(first, second)
    assert len(both) == 1
    assert [float(both[0][k]) for k in ("Mean", "train_s", "eval_s")] == [61.0, 15.0, 3.0]


def test_run_setting_measures_every_method_on_its_calibration_split(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never on the seed's own split (its test set is the real one): each method is evaluated on
    the split it trained on, TRADES-with-every-label as TRADES on the full calibration split, each
    on its labeler's pseudo-labels, made on the calibration split (params.yaml's labelers)."""
    log: dict[str, list] = {"cal": [], "train": [], "pseudo": [], "evaluate": []}
    held = np.array([1, 2, 3])
    monkeypatch.setattr(dc, "split_step", SimpleNamespace(run=lambda *a: None))

    def calibration_split(split: Path, out: Path, *, full: bool = False,
                          held: np.ndarray | None = None) -> Path:
        log["cal"].append((split, out.name, full, held))
        return out

    monkeypatch.setattr(dc, "calibration_split", calibration_split)
    monkeypatch.setattr(dc, "train_step", SimpleNamespace(
        run=lambda params, **kw: log["train"].append(kw)))
    monkeypatch.setattr(dc, "pseudo_step", SimpleNamespace(
        run=lambda params, **kw: log["pseudo"].append(kw)))
    monkeypatch.setattr(dc, "evaluate_step", SimpleNamespace(
        run=lambda params, **kw: log["evaluate"].append(kw) or {
            "accuracy": {"Natural": 90.126, "Mean": 50.0}}))
    params = _load(PARAMS)
    methods = ["standard", "mt", "trades", "rst", "wscat", "trades-full"]
    rows = dc.run_setting(params, methods, 4, tmp_path, held)
    assert [(s, name, full, h is held) for s, name, full, h in log["cal"]] == [
        (tmp_path / "split.npz", "cal.npz", False, True),
        (tmp_path / "split.npz", "cal-full.npz", True, True)]
    cal, full = tmp_path / "cal.npz", tmp_path / "cal-full.npz"
    names = [m if m != "trades-full" else "trades" for m in methods]
    assert [kw["method"] for kw in log["train"]] == names
    assert [kw["split_path"] for kw in log["train"]] == [cal] * 5 + [full]
    assert [kw["split_path"] for kw in log["evaluate"]] == [cal] * 5 + [full]
    assert [kw["method"] for kw in log["evaluate"]] == names
    assert [kw["pseudo_path"] for kw in log["train"]] == [
        None if not (labeler := params["methods"][m].get("labeler"))
        else tmp_path / f"pseudo-{labeler}.npz" for m in names]
    assert {params["methods"][m].get("labeler") for m in ("rst", "wscat")} == {"standard", "mt"}
    assert [(kw["labeler"], kw["split_path"]) for kw in log["pseudo"]] == [("standard", cal),
                                                                          ("mt", cal)]
    assert [row["method"] for row in rows] == methods
    assert rows[0]["Natural"] == 90.13 and rows[0]["Mean"] == 50.0


@pytest.mark.parametrize("stage", ["seeds", "replicate", "settings"])
def test_the_calibration_stages(stage: str, monkeypatch: pytest.MonkeyPatch,
                                tmp_path: Path) -> None:
    """`seeds` and `replicate` hold out one set for every seed (round 2 for `replicate`),
    `settings` none; every stage but `eps` uses params.yaml's eps; --only picks settings."""
    calls: dict[str, list] = {"held": [], "run": []}
    held = np.array([7, 8, 9])

    def held_out_images(params: dict, seeds: list[int], tmp: Path, round_: int = 1
                        ) -> np.ndarray:
        calls["held"].append((seeds, round_))
        return held

    def run_setting(params: dict, methods: list[str], seed: int, tmp: Path,
                    given: np.ndarray | None = None) -> list[dict[str, Any]]:
        calls["run"].append((params["datasets"]["digits"]["eps"], seed, given))
        return [{"method": "trades", "Mean": 50.0}]

    monkeypatch.setattr(dc, "held_out_images", held_out_images)
    monkeypatch.setattr(dc, "run_setting", run_setting)
    only = dc.SETTINGS[stage][1][0]
    out = tmp_path / "out.csv"
    _main(monkeypatch, dc, ["--stage", stage, "--seeds", "1", "2", "--only", only, "--params",
                            str(PARAMS), "--out", str(out)])
    eps = _load(PARAMS)["datasets"]["digits"]["eps"]
    fixed = stage != "settings"
    assert calls["held"] == ([([1, 2], 2 if stage == "replicate" else 1)] if fixed else [])
    assert [(e, s, g is held if fixed else g is None) for e, s, g in calls["run"]] == [
        (eps, 1, True), (eps, 2, True)]
    with open(out, newline="") as handle:
        assert {row["setting"] for row in csv.DictReader(handle)} == {only}


def test_a_setting_no_stage_has_is_refused_before_any_work(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--only with a name the stage lacks ran nothing and then failed on its empty rows (an
    IndexError, no CSV): now one line, exit 2, before any split or training."""
    def no_work(*args: Any, **kw: Any) -> None:
        raise AssertionError("work started")

    monkeypatch.setattr(dc, "held_out_images", no_work)
    monkeypatch.setattr(dc, "run_setting", no_work)
    good = dc.SETTINGS["seeds"][0][0]
    with pytest.raises(SystemExit) as refused:
        _main(monkeypatch, dc, ["--stage", "seeds", "--only", good, "w99", "--params",
                                str(PARAMS), "--out", str(tmp_path / "out.csv")])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "error: --only w99: not a setting of stage seeds (" + ", ".join(
            name for name, *_ in dc.SETTINGS["seeds"]) + ")")
    assert not (tmp_path / "out.csv").exists()


def test_the_page_shows_mean_then_natural_and_aa(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """A cell is **Mean** (Natural / AA); train+eval s; a method a run lacks is a dash."""
    results = tmp_path / "results"
    results.mkdir()
    base = {"setting": "eps", "width": "32", "labelled": "100", "epochs": "40",
            "train_steps": "5", "eps": "0.1", "seed": "1"}
    rows = [{**base, "method": "standard", "train_s": "12.4", "eval_s": "3.0",
             "Natural": "91.0", "AA": "0.5", "Mean": "1.5"},
            {**base, "seed": "2", "method": "trades", "train_s": "20.0", "eval_s": "5.0",
             "Natural": "80.0", "AA": "40.0", "Mean": "50.0"}]
    dc.write_rows(results / "demo-calibration-eps.csv", copy.deepcopy(rows))
    monkeypatch.setattr(dc, "RESULTS", results)
    page = tmp_path / "page.md"
    dc.render(page)
    text = page.read_text()
    assert "| eps | 32 | 100 | 40 | 5 | 0.1 | 1 | **1.5** (91.0 / 0.5); 12+3 s | – |" in text
    assert "| eps | 32 | 100 | 40 | 5 | 0.1 | 2 | – | **50.0** (80.0 / 40.0); 20+5 s |" in text
