"""benchmarks/proxy_code_parity.py on hand-made results trees (no proxy run): what is a finding (a
flipped per-image flag, a tensor one bit off, a file in one run only, a table row), what the
allow-list passes (the commit, the code digest, timings, a caption), the exit status, and the
bad-input refusals (one line, exit 2, nothing left behind)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import proxy_code_parity as parity  # noqa: E402

CORE = "metrics/cifar10-proxy/wrn-10-1/wscat/seed1.json"
CHECKPOINT = "models/cifar10-proxy/wrn-10-1/wscat/seed1/best.pt"


def _metrics(flags: str = "0110", git: str = "aaaaaaa") -> dict:
    return {"accuracy": {"PGD": 100.0 * flags.count("1") / len(flags)},
            "per_image": {"order": "stratified", "correct": {"PGD": flags}},
            "manifest": {"versions": {"git": git, "torch": "2.14.1"}, "seed": 1}}


def _tree(root: Path, metrics: dict | None = None, weight: torch.Tensor | None = None,
          code: str = "c" * 16, seconds: str = "1.5", row: str = "wscat,PGD,50.0") -> Path:
    """A results tree with one file of each kind the comparison reads."""
    files = {CORE: json.dumps(metrics or _metrics()),
             "models/cifar10-proxy/wrn-10-1/wscat/seed1/train_log.csv":
                 f"epoch,loss,seconds\n1,2.25,{seconds}\n",
             "tables/cifar10-proxy.csv": f"method,metric,mean\n{row}\n",
             "paper/cifar10-proxy/T.tex": "\\begin{table}\n\t\\caption{One seed.}\n\\end{table}\n",
             "proxy/code.txt": code + "\n", "logs/proxy/train-wscat.log": f"took {seconds} s\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    torch.save({"ema": {"w": torch.arange(6, dtype=torch.float32) if weight is None else weight},
                "meta": {"code_sha256": code, "versions": {"git": "aaaaaaa"}}},
               root / CHECKPOINT)
    (root / "splits/cifar10-proxy").mkdir(parents=True)
    np.savez(root / "splits/cifar10-proxy/seed1.npz", labelled=np.arange(4))
    return root


def _findings(found: dict) -> list[tuple[str, str]]:
    return [(d.path, d.key) for name, kind in found.items() if name != "not compared"
            for d in kind.findings]


def test_identical_trees_have_no_difference(tmp_path: Path) -> None:
    found = parity.compare_trees(_tree(tmp_path / "a"), _tree(tmp_path / "b"))
    assert all(not kind.differences for kind in found.values())
    assert "**No difference outside the allow-list**" in parity.render(found, [])


def test_a_flipped_per_image_flag_is_reported(tmp_path: Path) -> None:
    found = parity.compare_trees(_tree(tmp_path / "a"),
                                 _tree(tmp_path / "b", _metrics(flags="0100")))
    assert _findings(found) == [(CORE, ".accuracy.PGD"), (CORE, ".per_image.correct.PGD")]
    flag = found["JSON"].findings[1]
    assert (flag.old, flag.new) == ('"0110"', '"0100" (images [2] differ)')
    assert "of 1 core metrics files: 1 of 4 differ" in found["JSON"].notes[0]
    report = parity.render(found, [])
    assert "**2 difference(s) outside the allow-list**" in report
    assert f'{CORE} `.per_image.correct.PGD`: "0110" -> "0100" (images [2] differ)' in report
    assert "- ... 1 more in 1 file(s) (--limit 0 lists them all)" in parity.render(found, [], 1)


def test_the_commit_code_digest_and_timings_are_allowed(tmp_path: Path) -> None:
    old = _tree(tmp_path / "a")
    new = _tree(tmp_path / "b", _metrics(git="bbbbbbb"), code="d" * 16, seconds="9.0")
    torch.save({**torch.load(new / CHECKPOINT, weights_only=True),
                "history": [{"epoch": 1, "seconds": 3.0}]}, new / CHECKPOINT)
    torch.save({**torch.load(old / CHECKPOINT, weights_only=True),
                "history": [{"epoch": 1, "seconds": 2.0}]}, old / CHECKPOINT)
    found = parity.compare_trees(old, new)
    assert _findings(found) == []
    reasons = {(d.path, d.key): d.allowed for kind in found.values() for d in kind.differences}
    assert reasons[(CORE, ".manifest.versions.git")] == parity.GIT
    assert reasons[(CHECKPOINT, ".meta.code_sha256")] == parity.DIGEST
    assert reasons[(CHECKPOINT, ".history[0].seconds")] == parity.TIMING
    assert reasons[("proxy/code.txt", "")] == parity.DIGEST
    assert reasons[("logs/proxy/train-wscat.log", "")] == "not compared"
    assert "identical but the allowed differences" in parity.render(found, [])


def test_a_figure_drawn_otherwise_is_allowed_but_its_numbers_are_not(tmp_path: Path) -> None:
    """A figure's layout or colours change with wscat/report/ (a key moved below its panel),
    which no step's numbers read; the CSV and logs it draws stay compared."""
    old, new = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    for tree, pixels in ((old, b"\x89PNG one"), (new, b"\x89PNG two")):
        (tree / "curves/wscat.png").parent.mkdir(parents=True, exist_ok=True)
        (tree / "curves/wscat.png").write_bytes(pixels)
        (tree / "curves/wscat.csv").write_text("epoch,loss\n1,0.5\n")
    (new / "curves/wscat.csv").write_text("epoch,loss\n1,0.6\n")
    found = parity.compare_trees(old, new)
    assert _findings(found) == [("curves/wscat.csv", "")]
    assert [d.allowed for d in found["other"].differences if d.path.endswith(".png")] == [
        parity.FIGURE]


def test_a_tensor_one_bit_off_is_reported(tmp_path: Path) -> None:
    weight = torch.arange(6, dtype=torch.float32)
    weight.view(torch.int32)[3] ^= 1  # the last bit of one element's mantissa
    found = parity.compare_trees(_tree(tmp_path / "a"), _tree(tmp_path / "b", weight=weight))
    assert _findings(found) == [(CHECKPOINT, ".ema.w")]
    assert found["checkpoints"].findings[0].new.startswith(
        "tensor float32[6], 1 of 6 elements differ in their bits (max |diff| 2.38e-07)")


def test_a_negative_zero_is_not_a_zero(tmp_path: Path) -> None:
    """Bit for bit: -0.0 == 0.0 as numbers, not as bits."""
    found = parity.compare_trees(_tree(tmp_path / "a", weight=torch.zeros(2)),
                                 _tree(tmp_path / "b", weight=torch.tensor([0.0, -0.0])))
    assert _findings(found) == [(CHECKPOINT, ".ema.w")]


def test_a_file_missing_from_one_run_is_reported(tmp_path: Path) -> None:
    old, new = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    (new / "paper/cifar10-proxy/T.tex").unlink()
    found = parity.compare_trees(old, new)
    assert _findings(found) == [("paper/cifar10-proxy/T.tex", "")]
    missing = found["files"].findings[0]
    assert (missing.old, missing.new) == ("present", "<absent>")


def test_npz_arrays_a_table_row_and_a_training_loss_are_compared(tmp_path: Path) -> None:
    old, new = _tree(tmp_path / "a"), _tree(tmp_path / "b", row="wscat,PGD,45.0")
    np.savez(new / "splits/cifar10-proxy/seed1.npz", labelled=np.arange(4)[::-1])
    log = new / "models/cifar10-proxy/wrn-10-1/wscat/seed1/train_log.csv"
    log.write_text(log.read_text().replace("2.25", "2.5"))
    found = parity.compare_trees(old, new)
    assert _findings(found) == [
        ("splits/cifar10-proxy/seed1.npz", ".labelled"),
        ("models/cifar10-proxy/wrn-10-1/wscat/seed1/train_log.csv", "[0].loss"),
        ("tables/cifar10-proxy.csv", "line 2")]
    assert found["tables"].findings[0].new == "wscat,PGD,45.0"


def test_a_changed_caption_is_allowed_and_printed(tmp_path: Path) -> None:
    old, new = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    tex = new / "paper/cifar10-proxy/T.tex"
    tex.write_text(tex.read_text().replace("One seed.", "Three seeds."))
    found = parity.compare_trees(old, new)
    assert _findings(found) == []
    assert "T.tex line 2: \\caption{One seed.} -> \\caption{Three seeds.}" in \
        parity.render(found, [])


def test_a_step_that_imported_other_code_is_refused(tmp_path: Path) -> None:
    results = _tree(tmp_path / "a")
    parity.check_imports(results, "c" * 16, "aaaaaaa")
    with pytest.raises(parity.Stop, match="seed1.json names code - at aaaaaaa, the worktree's "
                                          "is c{16} at bbbbbbb: a step did not import"):
        parity.check_imports(results, "c" * 16, "bbbbbbb")
    with pytest.raises(parity.Stop, match="code.txt names code c{16}, the worktree's is d{16}"):
        parity.check_imports(results, "d" * 16, "aaaaaaa")


def test_the_exit_status_is_1_for_a_finding_and_the_report_goes_to_out(
        tmp_path: Path, monkeypatch, capsys) -> None:
    trees = {"old": _tree(tmp_path / "a"), "new": _tree(tmp_path / "b", _metrics(flags="0100"))}

    def fake_run(commit: str, work: Path, base: Path, npz: Path, seed: int, side: str):
        return parity.Run(commit, commit[:7], side * 4, 1.0, trees[side])

    monkeypatch.setattr(parity, "ROOT", _scratch_repo(tmp_path / "repo"))
    monkeypatch.setattr(parity, "tiny_inputs", lambda work: (work / "p.yaml", work / "p.npz"))
    monkeypatch.setattr(parity, "run_at", fake_run)
    out = tmp_path / "report.md"
    assert parity.main(["--old", "HEAD", "--out", str(out)]) == 1
    report = capsys.readouterr().out
    assert out.read_text() == report and "**2 difference(s) outside the allow-list**" in report
    assert "(HEAD), wscat/ code digest oldoldoldold, 1 s" in report and "- machine: " in report


def test_an_interrupted_run_leaves_no_worktree_nor_files(tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    repo = _scratch_repo(tmp_path / "repo")
    temp = tmp_path / "temp"
    temp.mkdir()

    def interrupted(tree: Path, *args: object) -> float:
        assert (tree / "wscat" / "a.py").is_file()  # the commit's worktree, checked out
        raise KeyboardInterrupt

    monkeypatch.setattr(parity, "ROOT", repo)
    made = parity.tempfile.mkdtemp
    monkeypatch.setattr(parity.tempfile, "mkdtemp", lambda **kw: made(dir=temp, **kw))
    monkeypatch.setattr(parity, "tiny_inputs", lambda work: (work / "p.yaml", work / "p.npz"))
    monkeypatch.setattr(parity, "probe", lambda tree: "c" * 16)
    monkeypatch.setattr(parity, "run_proxy", interrupted)
    assert parity.main(["--old", "HEAD"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert list(temp.iterdir()) == []
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True,
                            text=True).stdout.splitlines()
    assert len(listed) == 1 and not (repo / ".git" / "worktrees").exists()


def _scratch_repo(root: Path, proxy: bool = True, commit_only: bool = False) -> Path:
    """A git repository with wscat/ and, with `proxy`, the proxy script, one commit
    (`commit_only`: of the files already there)."""
    if not commit_only:
        (root / "wscat").mkdir(parents=True)
        (root / "wscat" / "a.py").write_text("A = 1\n")
    if proxy and not commit_only:
        (root / "benchmarks").mkdir()
        (root / "benchmarks" / "cifar10_proxy.py").write_text("")
    for argv in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                "commit", "-qm", "one"]):
        subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)
    return root


@pytest.mark.parametrize("case, argv, line", [
    ("unknown", ["--old", "no-such-rev"],
     "--old no-such-rev: not a commit this checkout knows; pass a commit, tag or branch"),
    ("no git", ["--old", "HEAD"], "is not a git checkout: run this script from a clone"),
    ("dirty", ["--old", "HEAD"], "--old names HEAD, but the working tree's proxy code has "
                                 "uncommitted changes (wscat/a.py; 1 file(s))"),
    ("no proxy", ["--old", "HEAD"], "--old HEAD: its tree has no benchmarks/cifar10_proxy.py"),
    ("option", ["--old", "HEAD", "--seed", "-1"], "argument --seed: -1 is outside"),
    ("option", ["--old", "HEAD", "--limit", "-1"], "--limit -1: give a whole number of at least"),
])
def test_bad_input_is_one_line_and_leaves_nothing(case: str, argv: list[str], line: str,
                                                  tmp_path: Path, monkeypatch, capsys) -> None:
    repo = tmp_path / "repo"
    if case == "no git":
        repo.mkdir()
    elif case != "option":
        _scratch_repo(repo, proxy=case != "no proxy")
    if case == "dirty":
        (repo / "wscat" / "a.py").write_text("A = 2\n")
    monkeypatch.setattr(parity, "ROOT", repo)
    monkeypatch.setattr(parity.tempfile, "mkdtemp", lambda **_: pytest.fail("a folder made"))
    out = tmp_path / "report.md"
    try:
        code = parity.main([*argv, "--out", str(out)])
    except SystemExit as stop:  # the parser's usage errors
        code = stop.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and line in captured.err
    assert not out.exists()


def test_an_existing_keep_folder_and_an_out_folder_are_refused(tmp_path: Path, capsys) -> None:
    assert parity.main(["--old", "HEAD", "--keep", str(tmp_path)]) == 2
    assert parity.main(["--old", "HEAD", "--out", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"proxy_code_parity: error: --keep {tmp_path}: exists already; pass a new "
                     "folder",
                     f"proxy_code_parity: error: cannot write {tmp_path}: it is a folder; pass "
                     "a file path"]


def test_a_failed_proxy_run_is_one_line_and_leaves_nothing(tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    """A commit whose proxy exits non-zero: its last output line, exit 2; the probe started as
    the steps are imported the worktree's own wscat (its made-up digest)."""
    repo = tmp_path / "repo"
    (repo / "wscat").mkdir(parents=True)
    (repo / "wscat" / "__init__.py").write_text("")
    (repo / "wscat" / "provenance.py").write_text("def code_digest():\n    return 'e' * 16\n")
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "cifar10_proxy.py").write_text(
        "import sys\nprint('cifar10_proxy: error: boom')\nsys.exit(3)\n")
    _scratch_repo(repo, commit_only=True)
    temp = tmp_path / "temp"
    temp.mkdir()
    made = parity.tempfile.mkdtemp
    monkeypatch.setattr(parity.tempfile, "mkdtemp", lambda **kw: made(dir=temp, **kw))
    monkeypatch.setattr(parity, "ROOT", repo)
    monkeypatch.setattr(parity, "tiny_inputs", lambda work: (work / "p.yaml", work / "p.npz"))
    assert parity.main(["--old", "HEAD"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    short = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, text=True,
                           capture_output=True).stdout.strip()
    assert err[0] == f"{parity.PROG}: old: {short} (code {'e' * 16}): running the tiny proxy"
    assert err[1:] == [f"{parity.PROG}: error: the proxy at --old {short} failed (exit 3): "
                       "cifar10_proxy: error: boom"]
    assert list(temp.iterdir()) == [] and not (repo / ".git" / "worktrees").exists()
