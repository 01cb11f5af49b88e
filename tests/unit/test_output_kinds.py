"""An output path that holds another kind of wscat file than the step writes there is refused
before any work: `wscat split --out best.pt` once replaced a trained checkpoint with a split,
exit 0, no word. A file of the step's own kind is rewritten, as a rerun does."""
from __future__ import annotations

import shutil
from pathlib import Path

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
