"""An output path that holds another kind of wscat file than the step writes there is refused
before any work: `wscat split --out best.pt` once replaced a trained checkpoint with a split,
exit 0, no word. A file of the step's own kind is rewritten when it is the same run's, as a rerun
does; another run's (seed 2's split as seed 1's --out, Standard's pseudo-labels over Mean
Teacher's, TRADES's metrics over WSCAT's) is refused and left byte for byte."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from tests.unit.test_run_identity import _main, refused, work  # noqa: F401


def _split(work: Path, out: Path) -> list[object]:
    return ["split", "--params", work / "params.yaml", "--dataset", "digits", "--seed", 1,
            "--out", out]


def _same_bytes_after(path: Path, action) -> None:
    before = path.read_bytes()
    action()
    assert path.read_bytes() == before


def assert_in(part: str, line: str) -> None:
    assert part in line, line


def test_split_refuses_to_overwrite_a_checkpoint(work, tmp_path, capsys) -> None:
    target = tmp_path / "best.pt"
    shutil.copyfile(work / "run_s1/best.pt", target)
    before = target.read_bytes()
    line = refused(capsys, *_split(work, target))
    assert_in(f"--out {target} holds a PyTorch checkpoint (.pt), which `wscat split` would "
              "overwrite; choose another path, or delete that file first (nothing was written)",
              line)
    assert target.read_bytes() == before
    log = tmp_path / "train_log.csv"  # a training's log: a result, refused the same way
    shutil.copyfile(work / "run_s1/train_log.csv", log)
    _same_bytes_after(log, lambda: assert_in(
        f"--out {log} holds a training log (`wscat train`'s train_log.csv), which `wscat split` "
        "would overwrite", refused(capsys, *_split(work, log))))
    other = tmp_path / "notes.csv"  # a file of no wscat kind: rewritten as any output is
    other.write_text("a,b\n1,2\n")
    assert _main(*_split(work, other)) == 0


def test_a_split_is_rewritten_but_not_replaced_by_pseudo_labels_or_metrics(work, tmp_path,
                                                                          capsys) -> None:
    split = tmp_path / "s.npz"
    assert _main(*_split(work, split)) == 0
    assert _main(*_split(work, split)) == 0  # a rerun rewrites its own kind
    pseudo = ["pseudo-label", "--params", work / "params.yaml", "--dataset", "digits", "--model",
              "cnn", "--seed", 1, "--split", work / "s1.npz", "--labeler", "standard",
              "--checkpoint", work / "run_s1/best.pt", "--out", split, "--metrics",
              tmp_path / "p.json", "--device", "cpu"]
    _same_bytes_after(split, lambda: assert_in(
        "--out " + str(split) + " holds a wscat split (`wscat split`), which `wscat "
        "pseudo-label` would overwrite", refused(capsys, *pseudo)))
    assert not (tmp_path / "p.json").exists()
    evaluate = ["evaluate", "--params", work / "params.yaml", "--dataset", "digits", "--model",
                "cnn", "--method", "standard", "--seed", 1, "--split", work / "s1.npz",
                "--checkpoint", work / "run_s1/best.pt", "--out", split, "--part", "core",
                "--device", "cpu"]
    _same_bytes_after(split, lambda: assert_in("which `wscat evaluate` would overwrite",
                                               refused(capsys, *evaluate)))
    table = ["table", "--params", work / "params.yaml", "--experiment", "digits", "--tex",
             tmp_path / "t.tex", "--csv", split, "--summary", tmp_path / "t.json", work / "m.json"]
    _same_bytes_after(split, lambda: assert_in("--csv " + str(split) + " holds a wscat split",
                                               refused(capsys, *table)))
    assert not (tmp_path / "t.tex").exists()


# --- a file of the step's own kind that records another run -------------------------------------

def _pseudo(work: Path, seed: int, out: Path, report: Path) -> list[object]:
    return ["pseudo-label", "--params", work / "params.yaml", "--dataset", "digits", "--model",
            "cnn", "--seed", seed, "--split", work / f"s{seed}.npz", "--labeler", "standard",
            "--checkpoint", work / f"run_s{seed}/best.pt", "--out", out, "--metrics", report,
            "--device", "cpu"]


def _evaluate(work: Path, out: Path, part: str = "core") -> list[object]:
    return ["evaluate", "--params", work / "params.yaml", "--dataset", "digits", "--model", "cnn",
            "--method", "standard", "--seed", 1, "--split", work / "s1.npz", "--checkpoint",
            work / "run_s1/best.pt", "--out", out, "--part", part, "--device", "cpu",
            *(["--core", work / "core.json"] if part == "extra" else [])]


def _metrics(path: Path, **run: object) -> Path:
    """A metrics file as `wscat evaluate` writes it, of the run `run` names."""
    record = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1, **run,
              "accuracy": {"Natural": 50.0}, "manifest": {}}
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}))
    return path


def test_a_split_of_another_seed_is_refused_not_replaced(work, tmp_path, capsys) -> None:
    seed1 = tmp_path / "seed1.npz"
    shutil.copyfile(work / "s1.npz", seed1)
    _same_bytes_after(seed1, lambda: assert_in(
        f"--out {seed1} holds the split of digits seed 1, not of digits seed 2, which `wscat "
        "split` would overwrite; pass another --out, or delete that file if you mean to replace "
        "it (nothing was written)", refused(capsys, *_split(work, seed1)[:-4], "--seed", 2,
                                            "--out", seed1)))
    assert _main(*_split(work, seed1)) == 0  # seed 1 again: its own file, rewritten


def test_pseudo_labels_of_another_seed_or_labeler_are_refused(work, tmp_path, capsys) -> None:
    out, report = tmp_path / "p.npz", tmp_path / "p.json"
    assert _main(*_pseudo(work, 1, out, report)) == 0
    _same_bytes_after(out, lambda: assert_in(  # seed 2's labels onto seed 1's
        f"--out {out} holds the pseudo-labels of standard seed 1 on digits (cnn), not of "
        "standard seed 2 on digits (cnn), which `wscat pseudo-label` would overwrite",
        refused(capsys, *_pseudo(work, 2, out, report))))
    other = tmp_path / "other.npz"  # its report alone
    _same_bytes_after(report, lambda: assert_in(
        f"--metrics {report} holds the pseudo-label report of standard seed 1 on digits, not of "
        "standard seed 2 on digits", refused(capsys, *_pseudo(work, 2, other, report))))
    assert not other.exists()
    with np.load(out) as data:  # Mean Teacher's labels, as the tester's workflow had them
        arrays = {**data, "labeler": np.array("mt")}
    np.savez(out, **arrays)
    _same_bytes_after(out, lambda: assert_in(
        f"--out {out} holds the pseudo-labels of mt seed 1 on digits (cnn), not of standard seed "
        "1 on digits (cnn)", refused(capsys, *_pseudo(work, 1, out, tmp_path / "q.json"))))
    np.savez(out, indices=arrays["indices"], pseudo_labels=arrays["pseudo_labels"],
             labeler=np.array("mt"))  # written before the run was recorded: the labeler decides
    _same_bytes_after(out, lambda: assert_in(
        "holds the pseudo-labels of mt, not of standard",
        refused(capsys, *_pseudo(work, 1, out, tmp_path / "q.json"))))
    assert not (tmp_path / "q.json").exists()
    assert _main(*_pseudo(work, 1, tmp_path / "p2.npz", report)) == 0  # its own report: rewritten


def test_metrics_of_another_run_or_part_are_refused(work, tmp_path, capsys) -> None:
    wscat = _metrics(tmp_path / "wscat.json", method="wscat")
    _same_bytes_after(wscat, lambda: assert_in(
        f"--out {wscat} holds the metrics of wscat seed 1 on digits (cnn), not of standard seed "
        "1 on digits (cnn), which `wscat evaluate` would overwrite; pass another --out, or "
        "delete that file", refused(capsys, *_evaluate(work, wscat))))
    seed2 = _metrics(tmp_path / "seed2.json", seed=2)
    _same_bytes_after(seed2, lambda: assert_in("of standard seed 2 on digits (cnn), not of "
                                               "standard seed 1", refused(capsys,
                                                                          *_evaluate(work, seed2))))
    core = _metrics(tmp_path / "core.json", part="core")  # the extras would replace the core
    _same_bytes_after(core, lambda: assert_in(
        "holds the metrics of standard seed 1 on digits (cnn), part core, not of standard seed 1 "
        "on digits (cnn), part extra", refused(capsys, *_evaluate(work, core, "extra"))))
    assert _main(*_evaluate(work, core)) == 0  # the same run and part: rewritten, as a rerun
    assert json.loads(core.read_text())["accuracy"] != {"Natural": 50.0}
