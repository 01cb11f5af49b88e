"""A bare `make` lists the targets and starts nothing that takes minutes (it used to run the
whole test suite); `make demo` checks dvc.yaml before its first job and ends by naming the table
it wrote."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_bare_make_lists_every_user_target_and_runs_nothing() -> None:
    plan = subprocess.run(["make", "-n", "--no-print-directory"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert plan.returncode == 0 and plan.stdout.strip(), plan.stderr
    assert all(line.startswith("echo ") for line in plan.stdout.strip().splitlines()), plan.stdout
    done = subprocess.run(["make", "-s", "--no-print-directory"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    listed = set(re.findall(r"^make ([a-z0-9-]+)", done.stdout, re.M))
    defined = set(re.findall(r"^([a-z0-9-]+):(?!=)", (ROOT / "Makefile").read_text(), re.M))
    assert listed <= defined, listed - defined
    # Every target but help itself, the developers' (the lock file, the README's picture) too.
    assert defined - listed == {"help"}, defined - listed
    assert "results/tables/digits.md" in done.stdout


def test_make_demo_ends_by_naming_its_table() -> None:
    done = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.installed",
                           "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    plan = done.stdout
    # After the table and its record in dvc.lock, the last command names the table.
    last = plan[plan.rindex("dvc commit"):]
    assert 'echo "make demo: the table is results/tables/digits.md' in last, last
    assert "results/tables/digits-paired.csv" in last


def _fake_tools(folder: Path, check_status: int) -> Path:
    """`folder` as a checkout for `make demo`: the Makefile, a git repository, and a .venv whose
    python (dvc_yaml.py --check exits `check_status`), snakemake and dvc only log their calls
    (snakemake writes the demo's Markdown table too, as a real run does)."""
    import shutil
    import stat

    shutil.copy(ROOT / "Makefile", folder / "Makefile")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (folder / ".venv" / ".installed").touch()
    log = folder / "calls.log"
    table = "mkdir -p results/tables && echo '| the demo table |' > results/tables/digits.md\n"
    for tool, status in (("python", check_status), ("snakemake", 0), ("dvc", 0)):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {log}\n'
                          f'{table if tool == "snakemake" else ""}exit {status}\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return log


def test_make_demo_checks_dvc_yaml_before_any_job(tmp_path: Path) -> None:
    """A dvc.yaml out of step with params.yaml (a seed added) stops `make demo` before Snakemake
    runs a job, not after all of them; an up-to-date one lets it run, then records in dvc.lock."""
    stale, fresh = tmp_path / "stale", tmp_path / "fresh"
    for folder, status in ((stale, 2), (fresh, 0)):
        folder.mkdir()
        log = _fake_tools(folder, status)
        done = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed",
                               "demo"], cwd=folder, capture_output=True, text=True, timeout=60)
        calls = log.read_text().splitlines()
        assert calls[0] == "python workflow/scripts/dvc_yaml.py --check", calls
        if status:
            assert done.returncode != 0 and calls == calls[:1], calls
        else:
            assert done.returncode == 0, done.stderr
            assert [c.split()[0] for c in calls] == ["python", "snakemake", "dvc"], calls
            # The table itself, then the line naming its files: the result, not only its path.
            lines = done.stdout.strip().splitlines()
            assert "| the demo table |" in lines[:-1], done.stdout
            assert lines[-1].startswith("make demo: the table is results/tables/digits.md")


def test_make_robustness_demo_runs_the_demo_then_only_its_curves(tmp_path: Path) -> None:
    """`make robustness-demo`: `make demo` as it is (its one Snakemake target, the table), then one
    Snakemake call for the robustness curves of the demo's own experiment, so that after `make
    demo` only their extra evaluations and the figure run; it ends by naming the figure."""
    import yaml

    from wscat import paths
    from wscat.targets import default_experiment

    calls = {}
    for target in ("demo", "robustness-demo"):
        folder = tmp_path / target
        folder.mkdir()
        log = _fake_tools(folder, 0)
        done = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed",
                               target], cwd=folder, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        calls[target] = log.read_text().splitlines()
    demo = calls["demo"]
    assert [c for c in demo if c.startswith("snakemake")] == [
        "snakemake --cores 2 -- results/tables/digits.tex"], demo
    figure = paths.fill(paths.ROBUSTNESS_PNG, experiment=default_experiment(
        yaml.safe_load((ROOT / "params.yaml").read_text())))
    assert figure == "results/robustness-curves/digits.png"
    numbers = figure.removesuffix(".png") + ".csv"  # asked for too: a lost CSV is redrawn
    assert calls["robustness-demo"] == [*demo, f"snakemake --cores 2 -- {figure} {numbers}"]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"make robustness-demo: the curves are {figure}"), done.stdout


def test_make_report_adds_the_robustness_curves_once_drawn(tmp_path: Path) -> None:
    """`make report` reports the demo's table; after `make robustness-demo` (its figure on disk)
    the figure too, and never asks Snakemake for a figure not drawn (a report of a missing file
    would run its jobs or stop)."""
    figure = "results/robustness-curves/digits.png"
    reports = []
    for drawn in (False, True):
        folder = tmp_path / str(drawn)
        folder.mkdir()
        log = _fake_tools(folder, 0)
        if drawn:
            (folder / figure).parent.mkdir(parents=True)
            (folder / figure).write_bytes(b"\x89PNG")
        done = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed",
                               "report"], cwd=folder, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        reports += [c for c in log.read_text().splitlines() if "--report" in c]
    assert reports == [
        "snakemake --report results/report.html -- results/tables/digits.tex",
        f"snakemake --report results/report.html -- results/tables/digits.tex {figure}"], reports
