"""A newcomer's first hour, as the README and docs/workflow.md give it (issue 23): a bare
`snakemake` builds the demo's table with the default profile loaded, other targets are listed
and asked for by name, an unknown one gets one line; `make demo` leaves DVC's record in step with
Snakemake and the documented baseline + `dvc metrics diff` work as written; your own npz goes to
a table through `wscat add-dataset`. Tiny params throughout (under 3 minutes on two cores)."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.tiny import tiny_params, write_params
from tests.workflow.test_workflow import job_counts, real_params

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VENV = BIN.parent
GIT = ["git", "-c", "user.name=wscat-test", "-c", "user.email=wscat-test@example.invalid"]
PROFILE_LINE = "Using workflow specific profile profiles/default"
pytestmark = pytest.mark.slow  # Snakemake loads the workflow in every test


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600
        ) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ok(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = run(cmd, cwd, env)
    logs = "".join(f"--- {log}\n{log.read_text()[-1500:]}" for log in cwd.glob("results/logs/**/*.log"))
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n{logs}"
    return done


def fresh_clone(dest: Path, params: dict) -> Path:
    """A fresh clone's layout (the default profile, the Makefile, the venv linked in) with
    `params` as its params.yaml; `.venv/.installed` is linked, never rebuilt."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "Makefile", ".gitignore", ".dvcignore", "requirements.txt",
                 "requirements-dev.txt", "requirements-lock.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("workflow", "wscat"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "profiles", dest / "profiles", symlinks=True)
    (dest / ".venv").symlink_to(VENV)
    write_params(dest / "params.yaml", params)
    return dest


def snakemake(*args: str) -> list[str]:
    return [str(BIN / "snakemake"), *args]


# --- defaults: a bare `snakemake`, the target list, an unknown target -----------------------------

def test_venv_snakemake_without_the_venv_on_path_runs_its_jobs(tmp_path: Path,
                                                              env: dict[str, str]) -> None:
    """`.venv/bin/snakemake` typed without `source .venv/bin/activate`: the jobs' `wscat` is the
    one beside Snakemake's Python (every job failed with `wscat: command not found`)."""
    workdir = fresh_clone(tmp_path, tiny_params())
    bare = os.pathsep.join(folder for folder in env["PATH"].split(os.pathsep)
                           if folder and not (Path(folder) / "wscat").exists())
    assert shutil.which("wscat", path=bare) is None
    done = ok([str(workdir / ".venv/bin/snakemake"), "--cores", "1", "--",
               "results/splits/digits/seed1.npz"], workdir, {**env, "PATH": bare})
    assert (workdir / "results/splits/digits/seed1.npz").is_file()
    assert "wscat: warning" not in done.stderr and "command not found" not in done.stderr


def test_a_bare_dry_run_builds_the_demo_only(tmp_path: Path, env: dict[str, str]) -> None:
    """No archives of the paper datasets here: a bare dry run must not need them."""
    workdir = fresh_clone(tmp_path, real_params())
    done = ok(snakemake("-n"), workdir, env)
    demo = real_params()["experiments"]["digits"]
    counts = job_counts(done.stdout)
    assert counts["table"] == 1 and counts["demo"] == 1 and "fetch_cifar10" not in counts
    assert counts["evaluate"] == len(demo["seeds"]) * len(demo["methods"])
    assert "results/tables/digits.tex" in done.stdout
    assert PROFILE_LINE in done.stderr  # loaded without a flag


def test_targets_are_listed_and_asked_for_by_name(tmp_path: Path, env: dict[str, str]) -> None:
    workdir = fresh_clone(tmp_path, real_params())
    listed = ok(snakemake("--list-target-rules"), workdir, env).stdout
    rules = {line.split(" ", 1)[0]: line for line in listed.splitlines()}
    assert {"demo", "table_digits", "table_digits_ablation", "table_cifar10", "paper_digits",
            "paper_paper", "paper_cifar10_proxy"} <= set(rules)
    assert "results/paper/digits/index.md" in rules["paper_digits"]
    # Table 2 on digits is written once: the paper tier's.
    assert "results/paper/digits/Tab-RQ1-digits.tex" in rules["table_digits_table2"]
    by_name = ok(snakemake("-n", "table_digits_table2"), workdir, env).stdout
    assert job_counts(by_name)["paper_table"] == 1 and "results/tables/digits-table2" not in by_name
    # A missing archive's fetch rule says whether it downloads or waits for a hand-placed file.
    assert rules["fetch_cifar10"].endswith("data/raw/cifar-10-python.tar.gz: downloaded, md5-checked)")
    assert "11 files under data/raw/imagenet32/: to be placed by hand" in rules["fetch_imagenet32"]
    # Each experiment's robustness curves, by name too: its extra evaluations and the figure.
    assert "results/robustness-curves/digits-ablation.png" in rules["robustness_digits_ablation"]
    curves = job_counts(ok(snakemake("-n", "robustness_digits"), workdir, env).stdout)
    demo = real_params()["experiments"]["digits"]
    assert curves["robustness_curves"] == 1 and "table" not in curves
    assert curves["evaluate_extra"] == len(demo["seeds"]) * len(demo["methods"])


@pytest.mark.parametrize(("target", "mentions", "lists"), [
    ("results/tables/digit.tex", "no experiment 'digit'", "results/tables/digits.tex"),
    ("results/tables/digits-table2.tex", "results/paper/digits/Tab-RQ1-digits.tex",
     "table_digits_table2"),
    ("results/paper/digit/index.md", "unknown paper tier 'digit'", "digits, paper"),
    ("results/models/digits/cnn/wscatt/seed1/best.pt", "no method 'wscatt'", "trades, wscat,"),
    ("results/metrics/digitz/cnn/wscat/seed1.json", "no dataset 'digitz'", "digits, digits-full"),
], ids=["typo", "table2-written-once", "unknown-tier", "unknown-method", "unknown-dataset"])
def test_an_unknown_target_gets_one_line(tmp_path: Path, env: dict[str, str], target: str,
                                         mentions: str, lists: str) -> None:
    workdir = fresh_clone(tmp_path, real_params())
    done = run(snakemake("-n", "--", target), workdir, env)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "InputFunctionException" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.startswith("wscat:")]
    assert len(lines) == 1 and mentions in lines[0] and lists in lines[0], done.stderr


def test_a_failed_jobs_own_error_line_reaches_the_terminal(tmp_path: Path,
                                                            env: dict[str, str]) -> None:
    """The default profile's show-failed-logs: the split step's one line, not only its log path."""
    params = tiny_params()
    x = np.random.default_rng(0).random((40, 8, 8, 1)).astype(np.float32)
    y = np.arange(40) % 2
    workdir = fresh_clone(tmp_path, params)
    np.savez(workdir / "floats.npz", x_train=x, y_train=y)
    params["datasets"]["floats"] = {**params["datasets"]["digits"], "source": "npz",
                                    "path": "floats.npz", "labelled": 10}
    write_params(workdir / "params.yaml", params)
    done = run(snakemake("--", "results/splits/floats/seed1.npz"), workdir, env)
    assert done.returncode != 0
    assert "x_train is float32, expected uint8" in done.stdout + done.stderr


# --- DVC after `make demo`: the documented sequence -----------------------------------------------

def demo_params() -> dict:
    params = tiny_params(epochs=1)
    params["experiments"]["digits"]["methods"] = ["standard", "trades"]
    return params


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """A fresh clone (git + DVC, dvc.yaml generated for its params) after `make demo`."""
    workdir = fresh_clone(tmp_path_factory.mktemp("clone"), demo_params())
    shutil.copytree(ROOT / ".dvc", workdir / ".dvc", ignore=shutil.ignore_patterns("tmp", "cache"))
    ok([*GIT, "init", "-q"], workdir, env)
    ok([sys.executable, str(ROOT / "workflow/scripts/dvc_yaml.py"), "--root", str(workdir)],
       workdir, env)
    ok([*GIT, "add", "-A"], workdir, env)
    ok([*GIT, "commit", "-q", "-m", "clone"], workdir, env)
    # -o: the linked venv counts as installed (never rebuilt from here)
    ok(["make", "-o", ".venv/.installed", "demo"], workdir, env)
    return workdir


def dvc(*args: str) -> list[str]:
    return [str(BIN / "dvc"), *args]


def test_make_demo_leaves_dvc_status_clean(demo: Path, env: dict[str, str]) -> None:
    assert (demo / "dvc.lock").is_file()
    status = ok(dvc("status"), demo, env)
    assert status.stdout.strip() == "Data and pipelines are up to date.", status.stdout
    shown = ok(dvc("metrics", "show"), demo, env)
    assert "failed to load" not in shown.stdout + shown.stderr
    assert "trades.PGD" in shown.stdout


def test_the_documented_baseline_and_metrics_diff(demo: Path, env: dict[str, str]) -> None:
    """docs/workflow.md, "DVC": the baseline commit, a params edit, `make demo`, `dvc metrics
    diff`: only the edited method's numbers, and no warning."""
    guide = (ROOT / "docs/workflow.md").read_text()
    baseline = ("git add results/tables/digits.* results/tables/digits-paired.* "
                "results/metrics/digits.json \\\n    dvc.lock && git commit -m baseline")
    assert baseline in guide
    (demo / "results/tables/other.md").write_text("another experiment's stale table\n")
    ok([*GIT, "add", "results/tables/digits.*", "results/tables/digits-paired.*",
        "results/metrics/digits.json", "dvc.lock"], demo, env)
    ok([*GIT, "commit", "-q", "-m", "baseline"], demo, env)
    committed = ok([*GIT, "show", "--name-only", "--format=", "HEAD"], demo, env).stdout.split()
    assert {"results/tables/digits.md", "results/tables/digits-paired.csv"} <= set(committed)
    assert "results/tables/other.md" not in committed  # the demo's files only
    (demo / "results/tables/other.md").unlink()
    params = yaml.safe_load((demo / "params.yaml").read_text())
    params["methods"]["trades"]["lam"] = 1.0
    write_params(demo / "params.yaml", params)
    changed = ok(dvc("status"), demo, env).stdout
    assert "methods.trades" in changed
    # A training ran iff its log was written again (DVC rewrites every file it caches after the
    # stage, checkpoints included, so their times say nothing; it does not cache the logs).
    logs = demo / "results/logs/train/digits/cnn"
    before = {path: path.stat().st_mtime_ns for path in logs.glob("*/seed1.log")}
    assert sorted(path.parent.name for path in before) == ["standard", "trades"]
    ok(["make", "-o", ".venv/.installed", "demo"], demo, env)
    retrained = {path.parent.name for path, mtime in before.items()
                 if path.stat().st_mtime_ns != mtime}
    assert retrained == {"trades"}
    assert ok(dvc("status"), demo, env).stdout.strip() == "Data and pipelines are up to date."
    diff = ok(dvc("metrics", "diff", "--json"), demo, env)
    assert "failed to load" not in diff.stderr, diff.stderr
    keys = set(json.loads(diff.stdout).get("results/metrics/digits.json", {}))
    assert keys and {key.partition(".")[0] for key in keys} == {"trades"}, diff.stdout
    shown = ok(dvc("metrics", "diff"), demo, env)
    assert "failed to load" not in shown.stdout + shown.stderr and "trades." in shown.stdout


# --- your own npz: `wscat add-dataset`, then the table ----------------------------------------------

def write_npz(path: Path, *, test: bool = True) -> None:
    """300 8x8 grey images of 4 classes that differ in brightness (learnable in two epochs)."""
    rng = np.random.default_rng(0)
    y = np.arange(300) % 4
    x = (rng.random((300, 8, 8, 1)) * 50 + y[:, None, None, None] * 60).astype(np.uint8)
    parts = {"x_train": x[:240], "y_train": y[:240], "x_test": x[240:], "y_test": y[240:]}
    np.savez(path, **(parts if test else {"x_train": x, "y_train": y}))


def test_add_dataset_refuses_bad_input_and_writes_nothing(tmp_path: Path,
                                                           env: dict[str, str]) -> None:
    workdir = fresh_clone(tmp_path, demo_params())
    original = (workdir / "params.yaml").read_bytes()
    write_npz(workdir / "toy.npz")
    x = np.random.default_rng(0).integers(0, 256, (30, 8, 8, 1), dtype=np.uint8)
    np.savez(workdir / "floats.npz", x_train=x.astype(np.float32), y_train=np.arange(30) % 4)
    np.savez(workdir / "gap.npz", x_train=x, y_train=np.array([0, 2, 3, 4])[np.arange(30) % 4])
    np.savez(workdir / "three.npz", x_train=x, y_train=np.arange(30) % 3)
    np.savez(workdir / "unit.npz", x_train=(np.arange(30 * 64) % 2).astype(np.uint8).reshape(
        30, 8, 8, 1), y_train=np.arange(30) % 4)
    np.savez(workdir / "empty.npz", x_train=x[:0], y_train=np.zeros(0, np.int64))
    np.savez(workdir / "beyond.npz", x_train=x, y_train=np.arange(30) % 4, x_test=x[:5],
             y_test=np.arange(5))  # y_test holds class 4, y_train only 0..3
    cases = [(["floats", "floats.npz"], "float32"), (["gap", "gap.npz"], "no class 1"),
             (["empty", "empty.npz"], "x_train is empty"), (["beyond", "beyond.npz"], "(y_test)"),
             (["three", "three.npz"], "at least 4"),
             (["unit", "unit.npz"], "value * 255"), (["digits", "toy.npz"], "already exists"),
             (["Toy", "toy.npz"], "not a dataset name"), (["toy", "absent.npz"], "absent.npz")]
    for args, mentions in cases:
        done = run([str(BIN / "wscat"), "add-dataset", *args], workdir, env)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and mentions in lines[0], (args, done.stderr)
    assert (workdir / "params.yaml").read_bytes() == original


def test_add_dataset_without_a_test_part_holds_one_out(tmp_path: Path, env: dict[str, str]) -> None:
    workdir = fresh_clone(tmp_path, demo_params())
    write_npz(workdir / "mine.npz", test=False)
    original = (workdir / "params.yaml").read_text()
    ok([str(BIN / "wscat"), "add-dataset", "mine", "mine.npz"], workdir, env)
    text = (workdir / "params.yaml").read_text()
    assert text.startswith(original.split("datasets:")[0])  # the rest kept as it was
    params = yaml.safe_load(text)
    assert params["datasets"]["mine"]["test_fraction"] == 0.2
    assert params["experiments"]["mine"]["dataset"] == "mine"
    ok([str(BIN / "wscat"), "split", "--dataset", "mine", "--seed", "1", "--out",
        "results/splits/mine/seed1.npz"], workdir, env)
    with np.load(workdir / "results/splits/mine/seed1.npz") as split:
        labelled = set(split["labelled"]) | set(split["validation"])  # 6 a class (10% of 60)
        assert len(split["test"]) == 60 and len(labelled) == 24


def test_add_dataset_out_elsewhere_works_with_configfile(tmp_path: Path,
                                                         env: dict[str, str]) -> None:
    """docs/workflow.md: `--out other.yaml` writes a copy that `snakemake --configfile
    other.yaml` (run from the repository root) builds from, wherever the copy and the npz lie."""
    workdir = fresh_clone(tmp_path / "clone", demo_params())
    original = (workdir / "params.yaml").read_bytes()
    outside = tmp_path / "outside"
    outside.mkdir()
    write_npz(outside / "good.npz")
    added = ok([str(BIN / "wscat"), "add-dataset", "mydig", str(outside / "good.npz"), "--out",
                str(outside / "o2.yaml")], workdir, env)
    command = f"snakemake -n --configfile {outside / 'o2.yaml'} -- results/tables/mydig.tex"
    assert command in added.stdout and (workdir / "params.yaml").read_bytes() == original
    assert yaml.safe_load((outside / "o2.yaml").read_text())["datasets"]["mydig"]["path"] == str(
        (outside / "good.npz").resolve())
    dry = ok(snakemake("-n", "--configfile", str(outside / "o2.yaml"), "--",
                       "results/tables/mydig.tex"), workdir, env)
    assert job_counts(dry.stdout)["split"] == 3


def test_your_own_npz_to_a_table_as_documented(tmp_path: Path, env: dict[str, str]) -> None:
    """docs/workflow.md, "Your own images": add-dataset, a dry run, the table."""
    guide = (ROOT / "docs/workflow.md").read_text()
    for line in ("wscat add-dataset mydata path/to/mydata.npz",
                 "snakemake -n -- results/tables/mydata.tex", "snakemake -- results/tables/mydata.tex"):
        assert line in guide, line
    workdir = fresh_clone(tmp_path, demo_params())
    (workdir / "path/to").mkdir(parents=True)
    write_npz(workdir / "path/to/mydata.npz")
    added = ok([str(BIN / "wscat"), "add-dataset", "mydata", "path/to/mydata.npz"], workdir, env)
    assert "snakemake -n -- results/tables/mydata.tex" in added.stdout
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    entry = params["datasets"]["mydata"]
    assert (entry["source"], entry["path"], entry["labelled"]) == ("npz", "path/to/mydata.npz", 24)
    assert "test_fraction" not in entry  # the npz's own test part
    assert params["training"]["mydata"]["epochs"] == 40
    # Tiny for the test: one seed, two methods, two epochs (the recipe's defaults: 3 x 5 x 40).
    params["experiments"]["mydata"].update(seeds=[1], methods=["standard", "trades"])
    params["training"]["mydata"].update(epochs=2)
    write_params(workdir / "params.yaml", params)
    dry = ok(snakemake("-n", "--", "results/tables/mydata.tex"), workdir, env)
    assert job_counts(dry.stdout)["train"] == 2
    assert "fetch_mydata" not in dry.stdout + dry.stderr  # your file is no job's output
    ok(snakemake("--", "results/tables/mydata.tex"), workdir, env)
    with open(workdir / "results/tables/mydata.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["method"] for row in rows} == {"Standard", "TRADES"}
    assert all(re.fullmatch(r"\d+\.\d\d", row["mean"]) for row in rows), rows
    # "Rebuild from scratch" rebuilds what the workflow made, never deletes your images.
    images = (workdir / "path/to/mydata.npz").read_bytes()
    ok(snakemake("-F", "--", "results/splits/mydata/seed1.npz"), workdir, env)
    assert (workdir / "path/to/mydata.npz").read_bytes() == images
