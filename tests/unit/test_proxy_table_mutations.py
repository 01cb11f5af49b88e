"""Mutation tests for benchmarks/proxy_table.py (the CIFAR-10 proxy's Table 2 over the committed
seed folders): each test kills hand-made mutants that went through tests/unit/
test_proxy_table_arguments.py, with expectations from the module's docstrings,
benchmarks/results/cifar10-proxy/README.md (the seed folder's layout and run.json's fields),
docs/paper-scale.md and wscat/report/reported.csv (the paper's numbers), never from the function
under test. The seed folders are built here by hand in tmp_path: params.yaml is the committed
seed 1's (its fingerprints are those its manifests record) cut to three methods, and each run's
metrics hold per-image flags on 4 images with every attack alike (k of 4 right: each accuracy and
the harmonic Mean are 25k), so the mean and std over the seeds are worked out by hand. The
figures' drawing (matplotlib) is stood in for: what is checked is what proxy_table hands it.

What is checked, and from which fact:
- seed_dirs (its docstring, seed{s}/ folders in seed order): a file or a `seed4x` folder is no
  seed; seed10 comes after seed2; seed01 beside seed1 is refused; an empty folder, a missing one
  and a file are one-line refusals.
- read_json: unreadable JSON, a JSON value that is not an object (its docstring) and an object
  without the keys are one line.
- read_seeds / seed_difference / comparable (their docstrings): the seeds present become the
  params' seeds; a seed differing in the split, a labeler's training (a labeler that is not in
  the table's methods too), the extra evaluation settings or the paper tier is refused with the
  key path, the npz's path with its note; a section of another tier is not a difference; a
  third seed is compared with the first; a params.yaml one folder too deep is said so; a folder
  whose params lack the experiment or run another seed is refused.
- metrics_files: the core and extra file of every method and seed, in that order; a missing one
  or one of another seed is refused.
- check_records (--require-all): `complete` must be true itself, a missing run.json is refused;
  without --require-all an incomplete record is rendered as NOT COMPLETE.
- _runs_line (README: run.json's steps, complete, one_call, calls, wall_s, machine): the steps
  done, one call / the calls that did the steps with their walls summed / the steps kept, the
  wall rounded to seconds, the machine, the commits; a wall that is not a number of seconds
  (bool, negative, infinite), a call's likewise, calls without numbers and steps without
  status/kept are refused (a step's null call is no call); no run.json is said.
- code_commits: the manifests' git commits of every metrics file below metrics/, empty ones
  dropped, sorted; _commits_note only from two commits, in the seeds' order (the order they
  ran in), the diff from the first to the second.
- _labelers: one row per labeler of the table's methods (none for a method without one), a
  missing report as -, two decimals; _companion_markdown: ours ± std, the paper's number and a
  signed difference at two decimals, the note, the noise over the stds.
- partial_note and mark_partial: the counts and the missing seeds (singular/plural); the note
  inside the .tex \\caption{...} and the .md first line's *...*; not one caption is refused.
- render (docstring, README's "Table 2 over the seeds"): mean ± std over the seeds (extras
  included: Mean-paper over AA-paper, and `wscat table`'s own AA-paper and NRF rows); the five
  lifted tables' captions end with the partial note while seeds are missing, never when all are
  in; the page's status lines (word counts, plurals), title with the tier's model name,
  robustness grid in words; the stale paired figure goes with one seed; a NaN anywhere (.csv too, any case) refuses with nothing written; files
  written mode 0644, no .partial left, all returned; a stray seed folder one level up, a
  missing train log and --require-all's missing seeds are refused.
- what reaches the figures: the paper's differences from WSCAT (TRADES - WSCAT, Mean over the
  paper's AA: 30.62 - 59.40, AA: 25.44 - 52.23), each method's selection (TRADES: cw, best
  epoch; MT: last), the budget (8/255, PGD-20).
- main: --out defaults to SEEDS_DIR/table, --expect and --require-all reach render, a refusal
  exits 2 in one line, an --out that is a file is refused with the file untouched, --help 0.
"""
from __future__ import annotations

import csv
import functools
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import proxy_table  # noqa: E402

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
PROXY = "cifar10-proxy"
MODEL = "wrn-16-4"
COMMITTED = ROOT / "benchmarks" / "results" / PROXY / "seed1"
METHODS = ["trades", "mt", "wscat"]
ATTACKS = ["Natural", "FGSM", "PGD", "CW", "AA"]
# k of 4 images right on every attack: each accuracy, and their harmonic Mean, is 25k.
RIGHT = {1: {"trades": 1, "mt": 3, "wscat": 2},
         2: {"trades": 2, "mt": 3, "wscat": 3},
         3: {"trades": 2, "mt": 3, "wscat": 4}}
LOGS = {"trades": "epoch,loss,val_natural,val_cw,score\n1,2.0,40,10,10\n2,1.5,50,30,30\n"
                  "3,1.2,55,20,20\n",
        "wscat": "epoch,loss,val_natural,val_cw,score\n1,2.0,40,10,10\n2,1.5,50,30,30\n"
                 "3,1.2,55,20,20\n",
        "mt": "epoch,loss,val_natural,score\n1,2.0,40,40\n2,1.5,60,60\n3,1.2,50,50\n"}


@functools.cache
def _committed(name: str) -> str:
    """A file of the committed seed 1's folder, read once."""
    return (COMMITTED / name).read_text()


def base_params() -> dict[str, Any]:
    params = yaml.load(_committed("params.yaml"), Loader=Loader)
    params["experiments"][PROXY]["methods"] = list(METHODS)
    return params


def make_seed(root: Path, seed: int, *, git: str = "aaaa111", params: dict | None = None,
              record: dict | None = None) -> Path:
    """seed{seed}/ under `root` as README's layout has it, from the committed seed 1's params and
    manifests, with RIGHT[seed]'s flags."""
    folder = root / f"seed{seed}"
    params = json.loads(json.dumps(params or base_params()))
    params["experiments"][PROXY]["seeds"] = [seed]
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(yaml.dump(params, Dumper=Dumper, sort_keys=False))
    for method in METHODS:
        k = RIGHT[seed][method]
        src = f"metrics/{PROXY}/{MODEL}/{method}"
        runs = folder / "metrics" / PROXY / MODEL / method
        runs.mkdir(parents=True)
        core = json.loads(_committed(f"{src}/seed1.json"))
        core["seed"] = core["manifest"]["seed"] = seed
        core["manifest"]["n_examples"] = 4
        core["manifest"]["attacks"]["AA"]["n_examples"] = 4  # AutoAttack ran on the 4 flagged
        core["manifest"]["versions"]["git"] = git
        core["per_image"]["correct"] = {a: "1" * k + "0" * (4 - k) for a in ATTACKS}
        core["accuracy"] = {**{a: 25.0 * k for a in ATTACKS}, "Mean": 25.0 * k}
        (runs / f"seed{seed}.json").write_text(json.dumps(core))
        extra = json.loads(_committed(f"{src}/seed1-extra.json"))
        extra["seed"] = extra["manifest"]["seed"] = seed
        extra["manifest"]["n_examples"] = 4
        extra["manifest"]["versions"]["git"] = git
        extra["accuracy"] = {"AA-paper": 25.0 * k, "NRF": 25.0 * k}
        (runs / f"seed{seed}-extra.json").write_text(json.dumps(extra))
        log = folder / "models" / PROXY / MODEL / method / f"seed{seed}" / "train_log.csv"
        log.parent.mkdir(parents=True)
        log.write_text(LOGS[method])
    pseudo = folder / "pseudo" / PROXY / MODEL / "mt" / f"seed{seed}.json"
    pseudo.parent.mkdir(parents=True)
    pseudo.write_text(json.dumps({"seed": seed, "accuracy": 60.0 + seed}))
    (folder / "run.json").write_text(json.dumps(record or {
        "complete": True, "one_call": True, "machine": f"M{seed}", "wall_s": 500.4,
        "steps": [{"name": "a", "status": "done", "kept": False},
                  {"name": "b", "status": "done", "kept": False}]}))
    return folder


class Drawn:
    """What render hands the three figures (their drawing stood in for: a small file each)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, nan: bool = False) -> None:
        from wscat.report import paired_figure, robustness_figure, validation_figure

        self.calls: dict[str, Any] = {}

        def stand_in(name: str):
            def draw(plotted, prefix, *args, **kwargs):
                self.calls[name] = (plotted, args, kwargs)
                for ext in ("png", "pdf"):
                    Path(f"{prefix}.{ext}").write_bytes(b"x")
                Path(f"{prefix}.csv").write_text("a\nNaN\n" if nan and name == "validation"
                                                 else "a\n1\n")
            return draw

        monkeypatch.setattr(paired_figure, "paired_figure", stand_in("paired"))
        monkeypatch.setattr(validation_figure, "validation_figure", stand_in("validation"))
        monkeypatch.setattr(robustness_figure, "robustness_figure", stand_in("robustness"))


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Seeds 1, 2 (code at aaaa111) and 3 (bbbb222) rendered once, under umask 077."""
    root = tmp_path_factory.mktemp("three")
    seeds, out = root / "seeds", root / "out"
    for seed in (1, 2, 3):
        make_seed(seeds, seed, git="bbbb222" if seed == 3 else "aaaa111")
    monkeypatch = pytest.MonkeyPatch()
    drawn = Drawn(monkeypatch)
    (out).mkdir()
    (out / "paired-vs-wscat.png").write_bytes(b"old")
    mask = os.umask(0o077)
    try:
        written = proxy_table.render(seeds, out, [1, 2, 3])
    finally:
        os.umask(mask)
        monkeypatch.undo()
    return {"seeds": seeds, "out": out, "written": written, "drawn": drawn.calls}


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Seeds 1 and 2 of a tier of seeds 1, 2, 5, rendered once by main with --out left to its
    default (SEEDS_DIR/table); seed 2's run.json records a call that did not finish."""
    seeds = tmp_path_factory.mktemp("two") / "seeds"
    make_seed(seeds, 1)
    make_seed(seeds, 2, record={"complete": False, "one_call": True,
                                "steps": [{"status": "done", "kept": False}]})
    monkeypatch = pytest.MonkeyPatch()
    Drawn(monkeypatch)
    try:
        assert proxy_table.main(["--seeds-dir", str(seeds), "--expect", "1", "2", "5"]) == 0
    finally:
        monkeypatch.undo()
    return {"seeds": seeds, "out": seeds / "table"}


def rows_of(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(path, newline="") as handle:
        return {(row["method"], row["metric"]): row for row in csv.DictReader(handle)}


def first_line(path: Path, start: str) -> str:
    return next(line for line in path.read_text().splitlines() if line.lstrip().startswith(start))


# --- render: the table ---------------------------------------------------------------------

def test_mean_and_std_are_over_every_seed_extras_included(three) -> None:
    table = rows_of(three["out"] / "Tab-RQ1-CIFAR10.csv")
    # WSCAT: 50, 75, 100 -> 75 +- 25; TRADES: 25, 50, 50 -> 41.67 +- 14.43 (sample std).
    assert (table[("WSCAT", "Mean")]["mean"], table[("WSCAT", "Mean")]["std"]) == ("75.00",
                                                                                   "25.00")
    assert (table[("TRADES", "Mean")]["mean"], table[("TRADES", "Mean")]["std"]) == ("41.67",
                                                                                     "14.43")
    assert table[("WSCAT", "Mean-paper")]["mean"] == "75.00"  # over AA-paper: the extra files
    assert table[("WSCAT", "Mean")]["n_seeds"] == "3"
    # `wscat table`'s own files get the extras too (AA-paper and NRF rows, README).
    own = rows_of(three["out"] / "cifar10-proxy.csv")
    assert (own[("WSCAT", "AA-paper")]["mean"], own[("TRADES", "NRF")]["mean"]) == ("75.00",
                                                                                     "41.67")


def test_all_seeds_in_no_caption_is_marked_partial(three) -> None:
    out = three["out"]
    for name in ("cifar10-proxy.tex", "cifar10-proxy-paired.tex", "Tab-RQ1-CIFAR10.tex",
                 "Tab-RQ1-CIFAR10-vs-paper.tex", "cifar10-proxy.md", "table.md"):
        assert "still missing" not in (out / name).read_text(), name


def test_missing_seed_ends_each_lifted_caption(two) -> None:
    out, note = two["out"], "This table holds 2 of the tier's 3 seeds; seed 5 still missing."
    for name in ("cifar10-proxy.tex", "cifar10-proxy-paired.tex", "Tab-RQ1-CIFAR10.tex",
                 "Tab-RQ1-CIFAR10-vs-paper.tex"):
        assert first_line(out / name, "\\caption{").endswith(f" {note}}}"), name
    assert (out / "cifar10-proxy.md").read_text().splitlines()[0].endswith(f" {note}*")


def test_page_of_all_seeds(three) -> None:
    page = (three["out"] / "table.md").read_text()
    assert page.startswith("# Table 2 on the CIFAR-10 proxy (WRN-16-4), seeds 1, 2, 3\n")
    assert "**All three seeds of the tier are in (1, 2, 3): this is the three-seed table.**" \
        in page
    assert "- seed 1: 2 of 2 steps done, in one call, 500 s on M1, code at aaaa111\n" in page
    assert "- seed 3: 2 of 2 steps done, in one call, 500 s on M3, code at bbbb222\n" in page
    assert "**The seeds were measured at 2 code commits (aaaa111, bbbb222).**" in page
    assert "`git diff --stat aaaa111 bbbb222 -- wscat/`" in page
    assert "PGD accuracy on the test images at 0, 0.5, 1 and 2 times eps (PGD-20" in page
    assert "and at 5, 10, 20 and 40 steps (at eps)" in page
    assert "(paired-vs-wscat.png)" in page
    assert "| MT | 61.00 | 62.00 | 63.00 |" in page
    assert "| TRADES | Mean-paper | 41.67 ± 14.43 | 30.62 | +11.05 |" in page


def test_page_of_two_of_three_seeds(two) -> None:
    page = (two["out"] / "table.md").read_text()
    assert "**Seeds in: 1, 2 (2 of 3). Still missing: seed 5. This is not the three-seed " \
           "table.**" in page
    assert "code commits" not in page  # one commit: nothing to say
    assert "- seed 2: 1 of 1 steps done, NOT COMPLETE" in page  # rendered, not refused


def test_written_files_are_0644_all_returned_none_partial(three) -> None:
    out = three["out"]
    files = sorted(out.iterdir())
    assert three["written"] == files
    assert not [p for p in files if p.name.startswith(".")]
    assert {p.stat().st_mode & 0o777 for p in files} == {0o644}
    assert (out / "paired-vs-wscat.png").read_bytes() == b"x"  # drawn anew, not the old one


@pytest.mark.parametrize("fails", ["copy", "rename"])
def test_a_failed_write_leaves_no_partial_file_and_names_the_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    """A copy into out that fails (a full disk, Ctrl-C) or a rename onto a file that will not be
    replaced: no .partial file is left in out, and a failed rename names the table's file, not
    the temporary one."""
    seeds, out = tmp_path / "seeds", tmp_path / "out"
    for seed in (1, 2, 3):
        make_seed(seeds, seed)
    Drawn(monkeypatch)
    calls = []
    real = proxy_table.shutil.copyfile if fails == "copy" else proxy_table.os.replace

    def third_fails(source: Any, target: Any) -> Any:  # the third into out (os is global)
        if Path(target).parent != out:
            return real(source, target)
        calls.append(target)
        if len(calls) == 3:
            if fails == "copy":
                raise OSError(28, "it failed", str(target))
            raise OSError(1, "it failed", str(source), str(target))  # as os.replace names them
        return real(source, target)

    if fails == "copy":
        monkeypatch.setattr(proxy_table.shutil, "copyfile", third_fails)
    else:
        monkeypatch.setattr(proxy_table.os, "replace", third_fails)
    with pytest.raises(OSError) as error:
        proxy_table.render(seeds, out, [1, 2, 3])
    assert not [p.name for p in out.iterdir() if p.name.endswith(".partial")]
    if fails == "rename":
        assert error.value.filename == str(calls[2]), error.value.filename  # the table's file
    else:  # nothing replaced before every file was copied
        assert list(out.iterdir()) == []


def test_sigterm_while_writing_cleans_up_as_ctrl_c_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """`timeout` (SIGTERM) while the table's files are copied into out: no .partial file is
    left, nothing replaced, one line and exit 143 (it used to die where it stood)."""
    import signal

    seeds, out = tmp_path / "seeds", tmp_path / "out"
    for seed in (1, 2, 3):
        make_seed(seeds, seed)
    Drawn(monkeypatch)
    real, calls = proxy_table.shutil.copyfile, []

    def terminated(source: Any, target: Any) -> Any:
        if Path(target).parent == out:
            calls.append(target)
            if len(calls) == 3:
                os.kill(os.getpid(), signal.SIGTERM)
        return real(source, target)

    monkeypatch.setattr(proxy_table.shutil, "copyfile", terminated)
    before = signal.getsignal(signal.SIGTERM)
    code = proxy_table.main(["--seeds-dir", str(seeds), "--out", str(out), "--expect", "1", "2",
                             "3"])
    err = capsys.readouterr().err
    assert code == 143 and err.startswith("proxy_table: error: ") and err.count("\n") == 1, err
    assert list(out.iterdir()) == [] and signal.getsignal(signal.SIGTERM) == before


def test_what_reaches_the_figures(three) -> None:
    drawn = three["drawn"]
    plotted, _, kwargs = drawn["paired"]
    gaps = {(row["column"], row["method"]): row["paper_difference"] for row in plotted}
    assert gaps[("Mean", "TRADES")] == pytest.approx(30.62 - 59.40)
    assert gaps[("AA", "TRADES")] == pytest.approx(25.44 - 52.23)
    assert kwargs["reference"] == "WSCAT"
    curves, _, _ = drawn["validation"]
    marked = {(row["method"], row["seed"]): row["epoch"] for row in curves if row["checkpoint"]}
    assert marked[("TRADES", 1)] == 2 and marked[("MT", 1)] == 3  # cw: best; mt: last
    assert {row["seed"] for row in curves} == {1, 2, 3}
    _, args, _ = drawn["robustness"]
    assert args == ({"CIFAR10 proxy": (pytest.approx(8 / 255), 20)},)


def test_one_seed_drops_the_stale_paired_figure(tmp_path: Path, monkeypatch) -> None:
    seeds, out = tmp_path / "seeds", tmp_path / "out"
    make_seed(seeds, 1)
    out.mkdir()
    for ext in ("png", "pdf", "csv"):
        (out / f"paired-vs-wscat.{ext}").write_text("old")
    Drawn(monkeypatch)
    proxy_table.render(seeds, out, [1, 2, 3])
    assert not list(out.glob("paired-vs-wscat.*"))
    page = (out / "table.md").read_text()
    assert "paired-vs-wscat.png" not in page
    assert page.startswith("# Table 2 on the CIFAR-10 proxy (WRN-16-4), seed 1\n")
    assert "**Seed in: 1 (1 of 3). Still missing: seeds 2, 3. This is not the three-seed " \
           "table.**" in page


def test_a_nan_anywhere_refuses_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    seeds, out = tmp_path / "seeds", tmp_path / "out"
    make_seed(seeds, 1)
    make_seed(seeds, 2)
    Drawn(monkeypatch, nan=True)
    with pytest.raises(ValueError, match="validation-curves.csv would hold a NaN"):
        proxy_table.render(seeds, out, [1, 2])
    assert not out.exists()


# --- render: refusals ----------------------------------------------------------------------

def test_require_all_refuses_missing_seeds(tmp_path: Path) -> None:
    make_seed(tmp_path / "seeds", 1)
    with pytest.raises(ValueError, match="seed 2 of 1, 2 is missing in .*; run it "):
        proxy_table.render(tmp_path / "seeds", tmp_path / "out", [1, 2], True)
    with pytest.raises(ValueError, match="seeds 2, 3 of 1, 2, 3 are missing in .*; run them "):
        proxy_table.render(tmp_path / "seeds", tmp_path / "out", [1, 2, 3], True)


def test_a_seed_folder_one_level_up_is_named(tmp_path: Path) -> None:
    make_seed(tmp_path / "seeds", 1)
    make_seed(tmp_path, 2)  # beside seeds/
    with pytest.raises(ValueError, match="seed 2's folder, one folder above"):
        proxy_table.render(tmp_path / "seeds", tmp_path / "out", [1, 2])


def test_require_all_refuses_an_incomplete_record(tmp_path: Path) -> None:
    make_seed(tmp_path / "seeds", 1, record={"complete": False, "steps": []})
    with pytest.raises(ValueError, match="the record of a call that did not finish"):
        proxy_table.render(tmp_path / "seeds", tmp_path / "out", [1], True)


def test_a_missing_train_log_is_an_incomplete_seed(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    make_seed(seeds, 1)
    make_seed(seeds, 2)
    (seeds / "seed2" / "models" / PROXY / MODEL / "mt" / "seed2" / "train_log.csv").unlink()
    dirs = proxy_table.seed_dirs(seeds)
    with pytest.raises(ValueError, match="train_log.csv: missing, so seed 2 is not complete"):
        proxy_table._run_files(proxy_table.read_seeds(dirs), dirs, proxy_table.paper.Run.train_log)


# --- the seed folders ----------------------------------------------------------------------

def test_seed_dirs_takes_folders_named_seed_n_in_seed_order(tmp_path: Path) -> None:
    for name in ("seed10", "seed2", "seed4x", "other"):
        (tmp_path / name).mkdir()
    (tmp_path / "seed3").write_text("a file")
    assert list(proxy_table.seed_dirs(tmp_path).items()) == [(2, tmp_path / "seed2"),
                                                             (10, tmp_path / "seed10")]
    (tmp_path / "seed02").mkdir()
    with pytest.raises(ValueError, match="seed02: name it seed2/"):
        proxy_table.seed_dirs(tmp_path)


@pytest.mark.parametrize("what, says", [("empty", "no seed{s}/ folder"),
                                        ("absent", "no such folder"),
                                        ("file", "a file, not a folder")])
def test_seed_dirs_refusals(tmp_path: Path, what: str, says: str) -> None:
    path = tmp_path / "seeds"
    if what == "empty":
        path.mkdir()
    elif what == "file":
        path.write_text("x")
    with pytest.raises(ValueError, match=rf"{path}: .*{says.replace('{', '.').replace('}', '.')}"):
        proxy_table.seed_dirs(path)


@pytest.mark.parametrize("text, says", [('{"seed": 1, "acc', "not a readable run record"),
                                        ('"seed"', "a run record that is not a JSON object"),
                                        ('{"other": 1}', "a run record without seed")])
def test_read_json_refuses_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=says):
        proxy_table.read_json(path, "run record", ("seed",))
    with pytest.raises(ValueError, match=says + r".*; unpack the run's OUT/seed2\.tar\.gz again$"):
        proxy_table.read_json(path, "run record", ("seed",), 2)  # the seed known: its tarball


@pytest.mark.parametrize("content, says", [
    (b"experiments: [1\nb: 2\n", "params.yaml is not valid YAML: line 2"),
    (b"\x00\x01\x02binary", "params.yaml is not a YAML text file (binary, or not UTF-8)"),
    (b"a: 1\na: 2\n", "params.yaml: duplicate key a: given on line 1 (1) and on line 2 (2)"),
], ids=["garbled", "binary", "a-key-twice"])
def test_a_seed_s_params_that_is_no_yaml_says_to_unpack_its_tarball(
        tmp_path: Path, content: bytes, says: str) -> None:
    """Not "pass the params .yaml file" (there is no option to pass it), nor a what-is-wrong
    alone: the seed's own tarball to unpack again."""
    make_seed(tmp_path, 2)
    (tmp_path / "seed2" / "params.yaml").write_bytes(content)
    with pytest.raises(ValueError) as error:
        proxy_table.read_seeds(proxy_table.seed_dirs(tmp_path))
    line = str(error.value)
    assert says in line and line.endswith("; unpack the run's OUT/seed2.tar.gz again"), line
    assert "pass the params" not in line and "keep one" not in line, line


def _two_seeds(tmp_path: Path, change) -> dict[int, Path]:
    make_seed(tmp_path, 1)
    params = base_params()
    change(params)
    make_seed(tmp_path, 2, params=params)
    return proxy_table.seed_dirs(tmp_path)


@pytest.mark.parametrize("change, key", [
    (lambda p: p["datasets"][PROXY].update(labelled=3000), "(split."),
    (lambda p: p["training"][PROXY]["per_method"]["mt"].update(epochs=7), "(training of mt."),
    (lambda p: p["evaluation"]["nrf"].update(steps=7), "(evaluation."),
    (lambda p: p["paper"][PROXY]["model_names"].update({MODEL: "W"}),
     f"(paper.{PROXY}.model_names.{MODEL})"),
])
def test_seeds_run_with_other_params_are_refused(tmp_path: Path, change, key: str) -> None:
    dirs = _two_seeds(tmp_path, change)
    with pytest.raises(ValueError, match="seed 2 was run with other params than seed 1") as error:
        proxy_table.read_seeds(dirs)
    assert key in str(error.value) and "npz lay elsewhere" not in str(error.value)


def test_a_labeler_outside_the_methods_is_compared(tmp_path: Path) -> None:
    def only_wscat(params: dict) -> None:
        params["experiments"][PROXY]["methods"] = ["trades", "wscat"]

    make_seed(tmp_path, 1, params=_with(only_wscat))
    make_seed(tmp_path, 2, params=_with(only_wscat, lambda p: p["training"][PROXY]["per_method"]
                                        ["mt"].update(epochs=7)))
    with pytest.raises(ValueError, match=r"\(training of mt\."):
        proxy_table.read_seeds(proxy_table.seed_dirs(tmp_path))


def _with(*changes) -> dict:
    params = base_params()
    for change in changes:
        change(params)
    return params


def test_the_npz_path_difference_carries_its_note(tmp_path: Path) -> None:
    dirs = _two_seeds(tmp_path, lambda p: p["datasets"][PROXY].update(path="/elsewhere/p.npz"))
    with pytest.raises(ValueError, match=r"dataset\.path\) \(the npz lay elsewhere"):
        proxy_table.read_seeds(dirs)


def test_another_tiers_section_is_no_difference_and_seeds_become_those_present(
        tmp_path: Path) -> None:
    dirs = _two_seeds(tmp_path, lambda p: p["training"]["digits"].update(epochs=9))
    assert proxy_table.read_seeds(dirs)["experiments"][PROXY]["seeds"] == [1, 2]


def test_a_third_seed_is_compared_with_the_first(tmp_path: Path) -> None:
    make_seed(tmp_path, 1)
    make_seed(tmp_path, 2)
    make_seed(tmp_path, 3, params=_with(lambda p: p["evaluation"]["nrf"].update(steps=7)))
    with pytest.raises(ValueError, match="seed 3 was run with other params than seed 1 "):
        proxy_table.read_seeds(proxy_table.seed_dirs(tmp_path))


def test_first_difference_is_the_full_key_path() -> None:
    assert proxy_table._first_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "a.c"
    assert proxy_table._first_difference(1, 2) == "(the whole file)"


def test_read_seeds_refusals(tmp_path: Path) -> None:
    make_seed(tmp_path / "deep" / "seed1", 1)  # seed1/seed1/
    with pytest.raises(ValueError, match="one folder too deep"):
        proxy_table.read_seeds(proxy_table.seed_dirs(tmp_path / "deep"))
    make_seed(tmp_path / "other", 2)
    (tmp_path / "other" / "seed2").rename(tmp_path / "other" / "seed5")
    with pytest.raises(ValueError, match=r"a run of seeds \[2\], not of seed 5"):
        proxy_table.read_seeds(proxy_table.seed_dirs(tmp_path / "other"))
    params = base_params()
    del params["experiments"][PROXY]
    params["paper"].pop(PROXY, None)
    folder = tmp_path / "none" / "seed1"
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(ValueError, match="no experiment 'cifar10-proxy'"):
        proxy_table.read_seeds({1: folder})


def test_metrics_files_are_every_core_and_extra_of_every_seed(tmp_path: Path) -> None:
    make_seed(tmp_path, 1)
    make_seed(tmp_path, 2)
    dirs = proxy_table.seed_dirs(tmp_path)
    params = proxy_table.read_seeds(dirs)
    assert proxy_table.metrics_files(params, dirs) == [
        tmp_path / f"seed{s}/metrics/{PROXY}/{MODEL}/{m}/seed{s}{end}.json"
        for s in (1, 2) for m in METHODS for end in ("", "-extra")]
    path = tmp_path / f"seed2/metrics/{PROXY}/{MODEL}/mt/seed2.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "seed": 1}))
    with pytest.raises(ValueError, match="holds another seed's metrics than seed 2"):
        proxy_table.metrics_files(params, dirs)
    path.unlink()
    with pytest.raises(ValueError, match="seed2.json: missing, so seed 2 is not complete"):
        proxy_table.metrics_files(params, dirs)


@pytest.mark.parametrize("record, says", [(None, "run.json: missing"),
                                          ({"complete": "yes"}, "did not finish the seed"),
                                          ({"complete": 1}, "did not finish the seed")])
def test_check_records_wants_complete_true_itself(tmp_path: Path, record, says: str) -> None:
    if record is not None:
        (tmp_path / "run.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=says):
        proxy_table.check_records({1: tmp_path})


def test_the_seeds_images_must_be_the_proxy_s(tmp_path: Path) -> None:
    """run.json's npz_md5: the repository's seeds must record the proxy's (PROXY_NPZ_MD5),
    naming the odd seed and the --npz that works; another table's seeds must agree. A seed run
    before it was recorded (seed 1 of the committed table) is compared by its params' path."""
    dirs = {}
    for seed, md5 in ((1, None), (2, "a" * 32), (3, "a" * 32)):
        dirs[seed] = tmp_path / f"seed{seed}"
        dirs[seed].mkdir()
        (dirs[seed] / "run.json").write_text(json.dumps(
            {"complete": True, **({"npz_md5": md5} if md5 else {})}))
    proxy_table.check_images(dirs, None)
    with pytest.raises(ValueError, match=f"seed 2 {'a' * 32}, seed 3 {'a' * 32}: not the proxy's "
                                         r"images .* rerun them with --npz data/proxy/"):
        proxy_table.check_images(dirs, proxy_table.PROXY_NPZ_MD5)
    (dirs[3] / "run.json").write_text(json.dumps({"complete": True, "npz_md5": "b" * 32}))
    with pytest.raises(ValueError, match=f"other images .*seed 2 {'a' * 32}, seed 3 {'b' * 32}"):
        proxy_table.check_images(dirs, None)
    for seed in (2, 3):
        (dirs[seed] / "run.json").write_text(json.dumps(
            {"complete": True, "npz_md5": proxy_table.PROXY_NPZ_MD5}))
    proxy_table.check_images(dirs, proxy_table.PROXY_NPZ_MD5)


# --- the page's parts ----------------------------------------------------------------------

def _line(tmp_path: Path, record: dict | None, commits: list[str] | None = None) -> str:
    if record is not None:
        (tmp_path / "run.json").write_text(json.dumps(record))
    return proxy_table._runs_line(4, tmp_path, commits or [])


def _steps(*spec: tuple[str, bool] | tuple[str, bool, int]) -> list[dict]:
    return [{"status": s[0], "kept": s[1], **({"call": s[2]} if len(s) > 2 else {})}
            for s in spec]


def test_runs_line_one_call(tmp_path: Path) -> None:
    record = {"complete": True, "one_call": True, "wall_s": 499.6, "machine": "M",
              "steps": _steps(("done", False), ("done", False), ("failed", False))}
    assert _line(tmp_path, record, ["c1", "c2"]) == (
        "- seed 4: 2 of 3 steps done, in one call, 500 s on M, code at c1, c2")


def test_runs_line_names_the_code_digest_run_json_records(tmp_path: Path) -> None:
    """The device's git may name another commit than the code it ran (seed 2's manifests say
    6a4b7c4+modified for d242b3f's files): run.json's code_digest names the code itself."""
    record = {"one_call": True, "wall_s": 500.0, "machine": "M", "code_digest": "0123abcd4567ef89",
              "steps": _steps(("done", False))}
    assert _line(tmp_path, record, ["c1+modified"]) == (
        "- seed 4: 1 of 1 steps done, in one call, 500 s on M, code at c1+modified "
        "(wscat/ digest 0123abcd4567ef89)")
    for absent in ("", None, 7):
        assert _line(tmp_path, {**record, "code_digest": absent}, ["c1"]).endswith("code at c1")


def test_runs_line_sums_the_calls_that_did_the_steps(tmp_path: Path) -> None:
    record = {"complete": True, "one_call": False, "wall_s": 45.0,
              "calls": [{"call": 1, "wall_s": 570.0}, {"call": 2, "wall_s": 45.0},
                        {"call": 3, "wall_s": 9.0}],
              "steps": _steps(("done", False, 1), ("done", False, 2))}
    assert _line(tmp_path, record) == (
        "- seed 4: 2 of 2 steps done, in 2 calls (570 s + 45 s), 615 s on an unrecorded "
        "machine, code at an unrecorded commit")


def test_runs_line_one_call_of_a_record_with_calls_is_kept_steps(tmp_path: Path) -> None:
    record = {"wall_s": 30.0, "calls": [{"call": 1, "wall_s": 30.0}],
              "steps": _steps(("done", True, 1), ("done", False, 1), ("done", True, 1))}
    assert _line(tmp_path, record).startswith(
        "- seed 4: 3 of 3 steps done, 2 steps kept from an earlier call, 30 s for the rest "
        "(the earlier call's not recorded) on")


def test_runs_line_says_not_complete_only_for_false(tmp_path: Path) -> None:
    steps = _steps(("done", False))
    assert "in one call" in _line(tmp_path, {"one_call": True, "steps": steps})
    assert "NOT COMPLETE" in _line(tmp_path, {"complete": False, "one_call": True, "steps": steps})


@pytest.mark.parametrize("wall", [True, -3, float("inf"), "600"])
def test_runs_line_refuses_a_wall_that_is_not_seconds(tmp_path: Path, wall) -> None:
    with pytest.raises(ValueError, match="wall_s is"):
        _line(tmp_path, {"wall_s": wall, "steps": _steps(("done", False))})


def test_runs_line_refuses_steps_without_status_or_kept(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lack a status or kept field; unpack the run's "
                                         r"OUT/seed4\.tar\.gz again$"):
        _line(tmp_path, {"steps": [{"status": "done"}]})
    (tmp_path / "run.json").unlink()
    assert _line(tmp_path, None) == "- seed 4: no run.json (how the run went is not recorded)"


def test_code_commits_of_every_metrics_file_below_metrics(tmp_path: Path) -> None:
    found = ("c5", "c2", "c7", "c1", "c4", "c6", "c3")  # in no order a set would keep by chance
    for name, git in (*((f"a/b/{c}.json", c) for c in found), ("a/y.json", "c2"),
                      ("z.json", "")):
        path = tmp_path / "metrics" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"manifest": {"versions": {"git": git}}}))
    (tmp_path / "metrics" / "v.json").write_text("{}")
    assert proxy_table.code_commits(tmp_path) == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]


def test_commits_note_only_from_two_commits() -> None:
    assert proxy_table._commits_note({1: ["c1"], 2: ["c1"]}) == []
    note = proxy_table._commits_note({2: ["c1"], 1: ["c2"]})  # seed 1 ran first, at c2
    assert note[0].startswith("**The seeds were measured at 2 code commits (c2, c1).**")
    assert "`git diff --stat c2 c1 -- wscat/`" in note[0]
    assert "+modified" not in note[0]


def test_commits_note_diffs_each_next_pair_of_commits_git_knows() -> None:
    """Three seeds, the second at a `+modified` checkout: `git diff` only between revisions git
    knows (seed 2's table offered `git diff --stat 2f00402 6a4b7c4+modified`, which git
    refuses), each next pair, and what `+modified` means."""
    note = proxy_table._commits_note({1: ["c1"], 2: ["c2+modified"], 3: ["c3"], 4: ["c4"]})[0]
    assert note.startswith("**The seeds were measured at 4 code commits (c1, c2+modified, c3, "
                           "c4).**")
    assert ("`git diff --stat c1 c3 -- wscat/` and `git diff --stat c3 c4 -- wscat/` show what "
            "differs between them.") in note
    assert "git diff --stat c2" not in note and "c2+modified -- " not in note
    assert "A commit marked `+modified` names the checkout's commit" in note
    alone = proxy_table._commits_note({1: ["c1"], 2: ["unknown"]})[0]  # no pair git knows
    assert "the code may differ. A commit marked" not in alone and "git diff" not in alone
    assert alone.endswith("but the code may differ.")


def test_labelers_table(tmp_path: Path) -> None:
    for seed in (1, 2):
        make_seed(tmp_path, seed)
    (tmp_path / "seed2" / "pseudo" / PROXY / MODEL / "mt" / "seed2.json").unlink()
    dirs = proxy_table.seed_dirs(tmp_path)
    params = proxy_table.read_seeds(dirs)
    assert proxy_table._labelers(params, dirs) == ("| labeler | seed 1 | seed 2 |\n"
                                                   "|---|---:|---:|\n"
                                                   "| MT | 61.00 | - |\n")


def test_companion_markdown(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("method,metric,ours,ours_std,paper,difference,note\n"
                    "TRADES,Mean-paper,41.6667,14.4338,30.6,11.0667,over AA-paper\n"
                    "MT,AA,,,0,,\n")
    text = proxy_table._companion_markdown(path)
    assert "the std over seeds here up to 14.43 points" in text.splitlines()[0]
    assert text.splitlines()[-2:] == [
        "| TRADES | Mean-paper | 41.67 ± 14.43 | 30.60 | +11.07 | over AA-paper |",
        "| MT | AA | - | 0.00 | - |  |"]


def test_partial_note_counts_and_plurals() -> None:
    assert proxy_table.partial_note([1], [1, 2, 3]) == (
        "This table holds 1 of the tier's 3 seeds; seeds 2, 3 still missing.")
    assert proxy_table.partial_note([1, 3], [1, 2, 3]) == (
        "This table holds 2 of the tier's 3 seeds; seed 2 still missing.")


def test_mark_partial_ends_the_one_caption(tmp_path: Path) -> None:
    tex = tmp_path / "t.tex"
    tex.write_text("\\begin{table}\n\t\\caption{Mean {x}.}\n\\end{table}\n")
    proxy_table.mark_partial(tex, "N.")
    assert tex.read_text() == "\\begin{table}\n\t\\caption{Mean {x}. N.}\n\\end{table}\n"
    md = tmp_path / "t.md"
    md.write_text("*Caption.*\n\n| a |\n\n*Another.*\n")
    proxy_table.mark_partial(md, "N.")
    assert md.read_text() == "*Caption. N.*\n\n| a |\n\n*Another.*\n"
    for path, text in ((tex, "\\caption{A}\n\\caption{B}\n"), (tex, "\\caption{A} % x\n"),
                       (md, "# T\n\n*Not first.*\n")):
        path.write_text(text)
        with pytest.raises(ValueError, match="captions where one was expected"):
            proxy_table.mark_partial(path, "N.")


def test_listed_in_words() -> None:
    assert proxy_table._listed([0.0, 0.5, 1.0]) == "0, 0.5 and 1"
    assert proxy_table._listed([5]) == "5"


def test_seed_folder_wants_the_whole_name(tmp_path: Path) -> None:
    assert proxy_table.seed_folder(tmp_path / "seed1x" / "t", tmp_path) is None


# --- main ----------------------------------------------------------------------------------

def test_main_refuses_in_one_line_exit_2(tmp_path: Path, capsys) -> None:
    make_seed(tmp_path / "seeds", 1)
    assert proxy_table.main(["--seeds-dir", str(tmp_path / "seeds"), "--expect", "1", "2", "3",
                             "--require-all", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seeds 2, 3 of 1, 2, 3 are missing" in err
    assert not (tmp_path / "o").exists()


def test_main_help_exits_0(capsys) -> None:
    assert proxy_table.main(["--help"]) == 0


def test_main_refuses_an_out_that_is_a_file(tmp_path: Path, capsys) -> None:
    make_seed(tmp_path / "seeds", 1)
    (tmp_path / "out.md").write_text("mine\n")
    assert proxy_table.main(["--seeds-dir", str(tmp_path / "seeds"), "--expect", "1",
                             "--out", str(tmp_path / "out.md")]) == 2
    assert "is a file; pass a folder" in capsys.readouterr().err
    assert (tmp_path / "out.md").read_text() == "mine\n"


# --- bugs found: a run record's calls, a JSON value that is not an object ------------------

@pytest.mark.parametrize("wall", [None, "570", math.inf, -500.0, True])
def test_runs_line_refuses_a_call_wall_that_is_not_seconds(tmp_path: Path, wall) -> None:
    """A call's seconds are added up and printed like wall_s, so they are checked like it: no
    seconds or text were a TypeError traceback, Infinity and -500 printed 'inf s' and '-455 s'
    on the page as if measured."""
    record = {"wall_s": 45.0, "steps": _steps(("done", False, 1), ("done", False, 2)),
              "calls": [{"call": 1, **({} if wall is None else {"wall_s": wall})},
                        {"call": 2, "wall_s": 45.0}]}
    with pytest.raises(ValueError, match=r"run.json: call 1's wall_s is .*, not a number of "
                                         "seconds"):
        _line(tmp_path, record)


@pytest.mark.parametrize("calls, call", [({"1": 570.0}, 1), (["570"], 1),
                                         ([{"wall_s": 570.0}], 1),
                                         ([{"call": 1, "wall_s": 570.0}], [1])])
def test_runs_line_refuses_calls_that_are_not_numbered(tmp_path: Path, calls, call) -> None:
    """README: `calls` holds each call's number and wall seconds, a step the `call` that did it
    (an AttributeError or TypeError traceback before)."""
    record = {"steps": [{"status": "done", "kept": False, "call": call}], "calls": calls}
    with pytest.raises(ValueError, match="its calls are not a list of numbered calls"):
        _line(tmp_path, record)


def test_runs_line_a_step_no_call_did_is_no_call(tmp_path: Path) -> None:
    """cifar10_proxy.py records `call: null` for a step no call did (a skipped one)."""
    record = {"calls": [{"call": 1, "wall_s": 30.0}, {"call": 2, "wall_s": 20.0}],
              "steps": _steps(("done", False, 1), ("done", False, 2), ("skipped", False, None))}
    assert _line(tmp_path, record).startswith(
        "- seed 4: 2 of 3 steps done, in 2 calls (30 s + 20 s), 50 s on")


def test_a_json_file_that_is_not_an_object_is_one_line(tmp_path: Path) -> None:
    """read_json's docstring: the file 'as an object'; a list under metrics/ was an
    AttributeError traceback from code_commits ('list' object has no attribute 'get')."""
    path = tmp_path / "metrics" / "x.json"
    path.parent.mkdir()
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"x.json: a metrics file that is not a JSON object "
                                         r"\(a list\)"):
        proxy_table.code_commits(tmp_path)


@pytest.mark.parametrize("accuracy", ["61.0", None, True, -1.0, 100.5, "NaN"])
def test_labelers_refuse_an_accuracy_that_is_not_a_percentage(tmp_path: Path, accuracy) -> None:
    """wscat/steps/pseudo.py writes `accuracy` as a percentage (100 × the share right); text was a
    format error without the file's name, null a '-' as if the report were missing, and NaN,
    true, -1 or 100.5 were printed as if measured."""
    make_seed(tmp_path, 1)
    report = tmp_path / "seed1" / "pseudo" / PROXY / MODEL / "mt" / "seed1.json"
    value = math.nan if accuracy == "NaN" else accuracy
    report.write_text(json.dumps({"seed": 1, "accuracy": value}))
    dirs = proxy_table.seed_dirs(tmp_path)
    with pytest.raises(ValueError, match=r"mt/seed1.json: accuracy .* is not a percentage "
                                         r"\(0 to 100\)"):
        proxy_table._labelers(proxy_table.read_seeds(dirs), dirs)


def test_labelers_print_the_ends_of_the_range(tmp_path: Path) -> None:
    for seed, accuracy in ((1, 0), (2, 100)):
        make_seed(tmp_path, seed)
        (tmp_path / f"seed{seed}" / "pseudo" / PROXY / MODEL / "mt" / f"seed{seed}.json"
         ).write_text(json.dumps({"seed": seed, "accuracy": accuracy}))
    dirs = proxy_table.seed_dirs(tmp_path)
    assert proxy_table._labelers(proxy_table.read_seeds(dirs), dirs).endswith(
        "| MT | 0.00 | 100.00 |\n")


def test_a_tier_without_the_datasets_table_is_one_line(tmp_path: Path) -> None:
    """render reads the label of the tier's performance table for the experiment's dataset
    (seed 1's params.yaml: the cifar10-proxy entry's performance label, Tab-RQ1-CIFAR10); a tier
    without that dataset was a StopIteration traceback, now a one-line refusal through main."""
    params = base_params()
    tier = params["paper"][PROXY]
    tier["datasets"] = [entry for entry in tier["datasets"] if entry["dataset"] != PROXY]
    make_seed(tmp_path / "seeds", 1, params=params)
    assert proxy_table.performance_label(base_params()) == "Tab-RQ1-CIFAR10"
    with pytest.raises(ValueError, match=f"tier '{PROXY}' has no table of dataset '{PROXY}'"):
        proxy_table.performance_label(params)
    assert proxy_table.main(["--seeds-dir", str(tmp_path / "seeds"), "--expect", "1"]) == 2
    assert not (tmp_path / "seeds" / "table").exists()
