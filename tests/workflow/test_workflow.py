"""Workflow tests: the Snakemake DAG, config validation at load time, dvc.yaml in step with the
DAG (fast), and one tiny end-to-end run of the README line and of `dvc repro` (slow, ~2 min)."""
from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.helpers.tiny import fast_digits

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv running the tests: snakemake, dvc, wscat
DVC_YAML = [sys.executable, str(ROOT / "workflow" / "scripts" / "dvc_yaml.py")]
README_LINE = ["snakemake", "--cores", "1", "--resources", "gpu=1", "--", "results/tables/digits.tex"]


def real_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def copy_workflow(dest: Path, params: dict, *, package: bool = False) -> Path:
    """Snakefile, workflow/ (symlinked schema resolved) and `params` as params.yaml in `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copytree(ROOT / "workflow", dest / "workflow", ignore=shutil.ignore_patterns("__pycache__"))
    if package:  # dvc.yaml depends on wscat/; the code that runs is the installed package either way
        shutil.copytree(ROOT / "wscat", dest / "wscat", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return dest


def job_counts(stdout: str) -> dict[str, int]:
    """The 'Job stats' table of a Snakemake dry run."""
    counts, in_table = {}, False
    for line in stdout.splitlines():
        if line.startswith("job ") and "count" in line:
            in_table = True
        elif in_table and (match := re.fullmatch(r"(\w+)\s+(\d+)", line.strip())):
            if match[1] == "total":
                break
            counts[match[1]] = int(match[2])
    return counts


# --- fast: the DAG --------------------------------------------------------------------------

@pytest.mark.slow
def test_dry_run_lists_every_job_of_the_real_params(tmp_path: Path, env: dict[str, str]) -> None:
    """Every experiment asked for by name (a bare `snakemake` builds the demo only:
    tests/workflow/test_newcomer.py)."""
    params = real_params()
    from wscat.config import load_params
    from wscat.targets import experiment_targets, has_table, named_targets

    workdir = copy_workflow(tmp_path, params)
    loaded = load_params(workdir / "params.yaml")
    # The paper's datasets have no archives here: skip the DAG-time archive check (tested in
    # test_paper_scale.py), so their fetch jobs appear instead.
    experiments = [rule for rule, files, _ in named_targets(loaded) if rule.startswith("table_")]
    result = run([str(BIN / "snakemake"), "-n", *experiments], workdir,
                 {**env, "WSCAT_SKIP_ARCHIVE_CHECK": "1"})
    assert result.returncode == 0, result.stderr
    from wscat.config import method_for
    from wscat.data import raw_files

    # One fetch job per archive, named by its first dataset (the CIFAR-10 proxy reads CIFAR-10's).
    fetch_job = {}
    for name, entry in params["datasets"].items():
        fetch_job.setdefault(tuple(raw_files(name, entry)), f"fetch_{name.replace('-', '_')}")
    # Experiments share jobs (the ablation table reuses WSCAT's runs): count distinct outputs.
    splits, trains, pseudo, evaluates, tables, fetches = set(), set(), set(), set(), set(), set()
    for name, experiment in params["experiments"].items():
        dataset, model = experiment["dataset"], experiment["model"]
        tables.add(name)
        if dataset != "digits":
            fetches.add(fetch_job[tuple(raw_files(dataset, params["datasets"][dataset]))])
        for seed in experiment["seeds"]:
            splits.add((dataset, seed))
            for method in experiment["methods"]:
                evaluates.add((dataset, model, method, seed))
                trains.add((dataset, model, method, seed))
                labeler = method_for(params, method).get("labeler")
                if labeler:
                    trains.add((dataset, model, labeler, seed))
                    pseudo.add((dataset, model, labeler, seed))
    # An experiment with `table: false` (digits-table2) fills its paper tier's tables, which
    # read the extra attacks (AA-paper, NRF, checks) of each of its runs.
    own = {name for name in tables if has_table(loaded, name)}
    extras = {(params["experiments"][name]["dataset"], params["experiments"][name]["model"],
               method, seed) for name in tables - own
              for method in params["experiments"][name]["methods"]
              for seed in params["experiments"][name]["seeds"]}
    paper_tables = {path for name in tables - own for path in experiment_targets(loaded, name)}
    expected = Counter(split=len(splits), train=len(trains), pseudo_label=len(pseudo),
                       evaluate=len(evaluates), table=len(own), evaluate_extra=len(extras),
                       paper_table=len(paper_tables))
    expected.update({fetch: 1 for fetch in fetches})
    expected.update({rule: 1 for rule in experiments})
    assert job_counts(result.stdout) == {key: n for key, n in expected.items() if n}
    demo = params["experiments"]["digits"]  # the demo: supervised vs semi-supervised AT, 3 seeds
    assert len(demo["seeds"]) == 3
    assert {"standard", "trades", "mt", "rst", "wscat"} <= set(demo["methods"])
    table2 = params["experiments"]["digits-table2"]  # the paper's Table 2 on digits: 9 methods
    assert len(table2["seeds"]) == 3 and len(table2["methods"]) == 9


def _svg_edges(svg: str) -> set[tuple[str, str]]:
    """The (rule, rule) edges of a rule graph `dot` laid out as SVG: nodes by their titles."""
    names = dict(re.findall(r"<title>(\d+)</title>\s*<path[^>]*/>\s*<text[^>]*>([^<]+)</text>",
                            svg))
    return {(names[a], names[b]) for a, b in re.findall(r"<title>(\d+)&#45;&gt;(\d+)</title>", svg)}


def _dot_edges(dot: str) -> set[tuple[str, str]]:
    """The (rule, rule) edges of `snakemake --rulegraph`'s DOT text."""
    names = dict(re.findall(r"^\s*(\d+)\[label = \"([^\"]+)\"", dot, flags=re.MULTILINE))
    return {(names[a], names[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", dot,
                                                        flags=re.MULTILINE)}


def test_the_readme_s_rule_graph_is_today_s(tmp_path: Path, env: dict[str, str]) -> None:
    """docs/rulegraph.svg (the README's data-flow picture, `make rulegraph`) has the edges
    `snakemake --rulegraph` gives today: it lacked evaluate_extra -> paper_figure for four days
    after the robustness curves came."""
    workdir = copy_workflow(tmp_path, real_params())
    result = run([str(BIN / "snakemake"), "--quiet", "all", "--rulegraph", "--",
                  "results/paper/digits/index.md"], workdir, env)
    assert result.returncode == 0, result.stderr
    today = _dot_edges(result.stdout)
    assert len(today) > 20 and ("evaluate_extra", "paper_figure") in today
    drawn = _svg_edges((ROOT / "docs" / "rulegraph.svg").read_text())
    assert drawn == today, ("docs/rulegraph.svg is stale: run `make rulegraph`; missing "
                            f"{sorted(today - drawn)}, extra {sorted(drawn - today)}")


def test_pseudo_labels_come_from_the_method_labeler(tmp_path: Path, env: dict[str, str]) -> None:
    result = run([str(BIN / "snakemake"), "-n", "-p", "--", "results/models/digits/cnn/wscat/seed1/best.pt",
                  "results/models/digits/cnn/trades/seed1/best.pt"],
                 copy_workflow(tmp_path, real_params()), env)
    assert result.returncode == 0, result.stderr
    train = {re.search(r"--method (\S+)", line)[1]: line
             for line in (result.stdout + result.stderr).splitlines() if "wscat train" in line}
    assert "--pseudo results/pseudo/digits/cnn/mt/seed1.npz" in train["wscat"]
    assert "--pseudo" not in train["trades"]
    assert "--params params.yaml" in train["wscat"]


def _set(params: dict, dotted: str, value: object) -> None:
    *parents, key = dotted.split(".")
    for name in parents:
        params = params[name]
    params[key] = value


@pytest.mark.parametrize(("key", "value", "mentions"), [
    ("training.digits.epoch", 3, "epoch"),                            # unknown key
    ("training.digits.epochs", "twenty", "training.digits.epochs"),  # wrong type
    ("datasets.digits.eps", -0.1, "datasets.digits.eps"),            # out of range
    ("experiments.digits.methods", ["standard", "fancy"], "fancy"),  # unknown method
], ids=["unknown-key", "wrong-type", "negative-eps", "unknown-method"])
def test_bad_params_stop_the_dry_run_with_one_line(tmp_path: Path, env: dict[str, str], key: str,
                                                   value: object, mentions: str) -> None:
    params = real_params()
    _set(params, key, value)
    result = run([str(BIN / "snakemake"), "-n"], copy_workflow(tmp_path, params), env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and mentions in lines[0], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_the_demo_s_robustness_curves_add_only_its_extras_and_the_figure(tmp_path: Path,
                                                                         env: dict[str, str]) -> None:
    """`make robustness-demo`'s Snakemake target: beside the demo's table it adds one extra
    evaluation per run of the demo (AA-paper, NRF, the masking checks) and the figure, nothing
    else (no training, no core evaluation); a typo in the experiment is one line."""
    workdir = copy_workflow(tmp_path, real_params())
    figure = "results/robustness-curves/digits.png"
    counts = {}
    for name, targets in (("demo", [README_LINE[-1]]), ("both", [README_LINE[-1], figure])):
        result = run([str(BIN / "snakemake"), "-n", "--", *targets], workdir, env)
        assert result.returncode == 0, result.stderr[-3000:]
        counts[name] = Counter(job_counts(result.stdout))
    demo = real_params()["experiments"]["digits"]
    assert counts["both"] - counts["demo"] == Counter(
        evaluate_extra=len(demo["methods"]) * len(demo["seeds"]), robustness_curves=1)
    assert counts["demo"] - counts["both"] == Counter()
    typo = run([str(BIN / "snakemake"), "-n", "--", "results/robustness-curves/digit.png"],
               workdir, env)
    lines = typo.stderr.strip().splitlines()
    assert typo.returncode == 2 and len(lines) == 1, typo.stderr[-3000:]
    assert "no experiment 'digit' in params.yaml" in lines[0] and "digits-fresh" in lines[0]


# --- fast: dvc.yaml is generated from the DAG ---------------------------------------------------

@pytest.mark.slow
def test_dvc_yaml_is_up_to_date_with_the_snakemake_dag(env: dict[str, str]) -> None:
    result = run([*DVC_YAML, "--check"], ROOT, env)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_an_edited_dvc_yaml_is_detected(tmp_path: Path, env: dict[str, str]) -> None:
    # On a one-experiment copy: the real params' DAG (ten experiments) is built by the test above.
    root = copy_workflow(tmp_path / "wf", tiny_params())
    assert run([*DVC_YAML, "--root", str(root)], ROOT, env).returncode == 0
    edited = tmp_path / "dvc.yaml"
    text = (root / "dvc.yaml").read_text()
    edited.write_text(re.sub(r"\n *- results/metrics/[^\n]*seed1\.json:\n[^\n]*\n[^\n]*", "", text, count=1))
    assert edited.read_text() != text
    result = run([*DVC_YAML, "--check", "--root", str(root), "--output", str(edited)], ROOT, env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "lacks results/metrics/digits/cnn/" in result.stderr, result.stderr
    assert "regenerate it with `.venv/bin/python workflow/scripts/dvc_yaml.py`" in result.stderr


@pytest.mark.slow
def test_a_dropped_method_or_seed_is_caught_before_dvc_commit(tmp_path: Path,
                                                              env: dict[str, str]) -> None:
    """docs/workflow.md: drop a method from experiments.digits to skip it. The committed dvc.yaml
    still lists its metrics, and `dvc commit` (make demo's last step) would fail on the first
    one missing: `--check`, which the Makefile runs first, says so in one line with the command
    that regenerates dvc.yaml, and writes nothing."""
    params = tiny_params()
    params["experiments"]["digits"]["seeds"] = [1, 2]
    root = copy_workflow(tmp_path / "wf", params)
    assert run([*DVC_YAML, "--root", str(root)], ROOT, env).returncode == 0
    generated = (root / "dvc.yaml").read_text()
    params["experiments"]["digits"]["methods"].remove("mt")
    params["experiments"]["digits"]["seeds"] = [1]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    result = run([*DVC_YAML, "--check", "--root", str(root)], ROOT, env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "lists results/metrics/digits/cnn/" in result.stderr and "more, which params.yaml " \
        "no longer makes" in result.stderr, result.stderr
    assert "regenerate it with `.venv/bin/python workflow/scripts/dvc_yaml.py`" in result.stderr
    assert (root / "dvc.yaml").read_text() == generated
    assert run([*DVC_YAML, "--root", str(root)], ROOT, env).returncode == 0
    assert run([*DVC_YAML, "--check", "--root", str(root)], ROOT, env).returncode == 0
    regenerated = (root / "dvc.yaml").read_text()
    assert "results/metrics/digits/cnn/mt/seed1.json" not in regenerated and "seed2" not in regenerated
    assert "results/models/digits/cnn/mt/seed1/best.pt" in regenerated  # still WSCAT's labeler


@pytest.mark.slow
def test_the_check_keeps_the_stages_you_chose(tmp_path: Path, env: dict[str, str]) -> None:
    """A dvc.yaml written with --experiments is checked against those stages, not the demo's
    alone, and a stale one is told the same --experiments to regenerate with."""
    params = tiny_params()
    demo = params["experiments"]["digits"]
    params["experiments"]["digits-b"] = {**demo, "methods": ["standard", "trades"]}
    root = copy_workflow(tmp_path / "wf", params)
    two = ["--root", str(root), "--experiments", "digits", "digits-b"]
    assert run([*DVC_YAML, *two], ROOT, env).returncode == 0
    assert run([*DVC_YAML, "--check", "--root", str(root)], ROOT, env).returncode == 0
    params["experiments"]["digits-b"]["methods"] = ["standard"]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    result = run([*DVC_YAML, "--check", "--root", str(root)], ROOT, env)
    assert result.returncode == 2, result.stderr
    assert "`.venv/bin/python workflow/scripts/dvc_yaml.py --experiments digits digits-b`" \
        in result.stderr, result.stderr


def test_git_tracks_the_tables_and_metrics_dvc_does_not_cache(env: dict[str, str]) -> None:
    """The tables and summary metrics are committed, or `dvc metrics diff` has no baseline."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    paths = [path for stage in stages.values() for entry in stage.get("metrics", [])
             for path in entry]
    paths += [path for stage in stages.values() for entry in stage.get("outs", [])
              for path in entry if path.startswith("results/tables/")]
    assert paths
    ignored = run(["git", "check-ignore", "--no-index", *paths], ROOT, env).stdout.split()
    assert not ignored, f"git ignores {ignored}; see the results/ lines of .gitignore"


# --- slow: the README line and `dvc repro` on a tiny config ------------------------------------

def tiny_params() -> dict:
    params = real_params()
    # The demo's methods and WSCAT-sup (a Table 2 column): the dvc test checks that it inherits
    # WSCAT's knobs (`base: wscat`).
    demo = params["experiments"]["digits"]
    params["experiments"] = {"digits": {**demo, "seeds": [1], "model": "cnn",
                                        "methods": list(dict.fromkeys(
                                            [*demo["methods"], "wscat-sup"]))}}
    fast_digits(params, epochs=3)  # 3: enough that a beta change moves the metrics
    params["evaluation"]["n_examples"] = 40
    params["evaluation"]["per_dataset"]["digits"]["autoattack"]["n_examples"] = 8
    return params


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]):
    """The README line, exactly, in a copy of the workflow with a tiny params.yaml."""
    workdir = copy_workflow(tmp_path_factory.mktemp("tiny"), tiny_params(), package=True)
    return workdir, run(README_LINE, workdir, env)


@pytest.mark.slow
def test_readme_line_builds_the_table(tiny_run, env: dict[str, str]) -> None:
    workdir, result = tiny_run
    logs = "\n".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in workdir.glob("results/logs/**/*.log"))
    assert result.returncode == 0, result.stderr[-4000:] + logs
    from wscat.report.names import display_name

    methods = tiny_params()["experiments"]["digits"]["methods"]
    names = [display_name(method) for method in methods]
    tex = (workdir / "results/tables/digits.tex").read_text()
    header = next(line for line in tex.splitlines() if line.strip().startswith("{Methods}"))
    assert all(name.replace("_", r"\_") in header for name in names), header
    rows = [line.strip().split("&")[0] for line in tex.splitlines()
            if line.strip().startswith("{") and line.rstrip().endswith("\\\\")]
    # The demo's table: the paper's five attacks and Mean (AA-paper, NRF: the paper targets).
    assert rows[1:] == ["{Natural}", "{FGSM}", "{PGD}", "{CW}", "{AA}", "{Mean}"], tex
    with open(workdir / "results/tables/digits.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert sorted({row["method"] for row in table}) == sorted(names)
    assert Counter(row["method"] for row in table) == {name: 6 for name in names}
    # Beside it: the Markdown twin and the paired comparison against WSCAT.
    with open(workdir / "results/tables/digits-paired.csv", newline="") as handle:
        paired = list(csv.DictReader(handle))
    adversarial = [display_name(m) for m in methods if m not in ("standard", "mt", "wscat")]
    assert [row["method"] for row in paired] == adversarial
    assert "Paired comparison with WSCAT" in (workdir / "results/tables/digits.md").read_text()
    # ... and as a picture (tests/unit/test_paired_picture.py: what it plots)
    assert (workdir / "results/tables/digits-paired.png").read_bytes()[:4] == b"\x89PNG"
    assert (workdir / "results/tables/digits-paired.pdf").read_bytes()[:5] == b"%PDF-"
    summary = json.loads((workdir / "results/metrics/digits.json").read_text())
    assert sorted(summary) == sorted(methods)


def started_jobs(log: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of each job in the order Snakemake started them (its log)."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:\n)", log):
        if match := re.match(r"(?:local)?rule (\w+):\n", block):
            found = re.search(r"^\s+wildcards: (.*)$", block, re.MULTILINE)
            pairs = [item.split("=", 1) for item in found[1].split(", ")] if found else []
            jobs.append((match[1], dict(pairs)))
    return jobs


@pytest.mark.slow
def test_readme_line_starts_the_longest_chains_first(tiny_run) -> None:
    """On one core the start order is the priority order (wscat.workflow.job_priority): the
    split, the labelers, their pseudo-labels, the trainings on them, the other trainings, then
    the attacks on robust models before those on Standard and Mean Teacher."""
    from wscat import workflow as wf

    workdir, result = tiny_run
    assert result.returncode == 0, "the README line failed; see test_readme_line_builds_the_table"
    params = tiny_params()
    ranked = [(rule, wf.job_priority(params, rule, w["dataset"],
                                     w.get("labeler") or w.get("method")))
              for rule, w in started_jobs(result.stderr) if rule != "table"]
    assert [rule for rule, _ in ranked].count("train") == len(
        params["experiments"]["digits"]["methods"]), result.stderr[-3000:]
    priorities = [priority for _, priority in ranked]
    assert priorities == sorted(priorities, reverse=True), ranked
    # split, labeler, pseudo-labels, on them, other trainings, robust attacks, natural attacks
    assert len(set(priorities)) == 7, ranked


@pytest.mark.slow
def test_the_demo_s_robustness_curves_after_it_run_only_the_extras_and_the_figure(
        tiny_run, env: dict[str, str]) -> None:
    """After the demo (the README line), `make robustness-demo`'s target evaluates each run's
    extras and draws them, retraining and re-attacking nothing: the figure's numbers are those
    of each run's extra metrics file (its gradient-masking checks)."""
    from wscat.report import paper
    from wscat.report.names import display_name

    workdir, result = tiny_run
    assert result.returncode == 0, "the README line failed; see test_readme_line_builds_the_table"
    figure = ["snakemake", "--cores", "1", "--", "results/robustness-curves/digits.png"]
    dry = run(["snakemake", "-n", *figure[1:]], workdir, env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    demo = tiny_params()["experiments"]["digits"]
    assert job_counts(dry.stdout) == {"evaluate_extra": len(demo["methods"]) * len(demo["seeds"]),
                                      "robustness_curves": 1}, dry.stdout[-3000:]
    done = run(figure, workdir, env)
    assert done.returncode == 0, done.stderr[-3000:]
    for ext in ("pdf", "png", "csv"):
        assert (workdir / f"results/robustness-curves/digits.{ext}").stat().st_size > 80, ext
    with open(workdir / "results/robustness-curves/digits.csv", newline="") as handle:
        written = list(csv.DictReader(handle))
    for run_ in paper.experiment_runs(tiny_params(), "digits"):
        checks = json.loads((workdir / run_.extra()).read_text())["checks"]
        mine = [(row["panel"], float(row["x"]), float(row["accuracy"])) for row in written
                if (row["method"], int(row["seed"])) == (display_name(run_.method), run_.seed)]
        assert mine == [(key, x, a) for check, key in (("pgd_eps_monotone", "eps"),
                                                       ("pgd_steps_monotone", "steps"))
                        for x, a in zip(checks[check][key], checks[check]["accuracy"])]
    again = run(["snakemake", "-n", *figure[1:]], workdir, env)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
    # The CSV is the rule's output and the named target's file too: deleted, the figure's job
    # redraws it (it was once written beside the PNG unseen by Snakemake, and stayed lost).
    (workdir / "results/robustness-curves/digits.csv").unlink()
    lost = run(["snakemake", "-n", "--cores", "1", "robustness_digits"], workdir, env)
    assert job_counts(lost.stdout) == {"robustness_curves": 1, "robustness_digits": 1}, \
        lost.stdout[-3000:]


@pytest.mark.slow
def test_dvc_repro_reruns_only_the_changed_method(tiny_run, env: dict[str, str]) -> None:
    workdir, result = tiny_run
    assert result.returncode == 0, "the README line failed; see test_readme_line_builds_the_table"
    git = ["git", "-c", "user.name=wscat-test", "-c", "user.email=wscat-test@example.invalid"]
    dvc = str(BIN / "dvc")
    shutil.copy2(ROOT / ".dvcignore", workdir / ".dvcignore")
    # results/ is git-ignored except the tables and the summary metrics (see the test above).
    shutil.copy2(ROOT / ".gitignore", workdir / ".gitignore")
    steps = [[*git, "init", "-q"], [dvc, "init", "-q"], [dvc, "config", "core.analytics", "false"],
             [*DVC_YAML, "--root", str(workdir)], [dvc, "repro"], [*git, "add", "-A"],
             [*git, "commit", "-q", "-m", "tiny run"]]
    for step in steps:
        done = run(step, workdir, env)
        assert done.returncode == 0, f"{step}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    # A training ran iff its log was written again (DVC rewrites every file it caches after the
    # stage, checkpoints included, so their times say nothing; it does not cache the logs).
    logs = workdir / "results/logs/train/digits/cnn"
    before = {path: path.stat().st_mtime_ns for path in logs.glob("*/seed1.log")}
    assert len(before) == 6

    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["methods"]["wscat"]["beta"] = 5.0
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = run([dvc, "repro"], workdir, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    changed = {path.parent.name for path, mtime in before.items() if path.stat().st_mtime_ns != mtime}
    # Snakemake re-ran exactly the jobs the params change touched: WSCAT, and WSCAT-sup, which is
    # WSCAT on the labelled data alone (`base: wscat`), so it has WSCAT's beta too.
    assert changed == {"wscat", "wscat-sup"}
    diff = run([dvc, "metrics", "diff", "--json"], workdir, env)
    assert diff.returncode == 0, diff.stderr
    keys = set(json.loads(diff.stdout).get("results/metrics/digits.json", {}))
    assert keys and {key.partition(".")[0] for key in keys} <= {"wscat", "wscat-sup"}, diff.stdout
    shown = run([dvc, "metrics", "diff"], workdir, env).stdout
    assert "wscat." in shown, shown


@pytest.mark.slow
def test_a_metrics_file_a_failed_job_removed_is_rebuilt_with_its_table(tiny_run, env) -> None:
    """Snakemake leaves a finished table alone when one of its inputs was deleted since (a failed
    or interrupted evaluation deletes its metrics file); wscat.rebuild makes the table re-run,
    which rebuilds the metrics first, and then nothing re-runs twice."""
    workdir, result = tiny_run
    assert result.returncode == 0, "the README line failed; see test_readme_line_builds_the_table"
    metrics = workdir / "results/metrics/digits/cnn/trades/seed1.json"
    table = workdir / "results/tables/digits.md"
    def numbers() -> tuple:
        record = json.loads(metrics.read_text())
        return record["accuracy"], record["per_image"], table.read_text()

    state = workdir / ".snakemake/wscat-rebuild"

    def recorded() -> dict[str, str]:
        return {path.name: path.read_text() for path in state.glob("*")}

    before, kept = numbers(), recorded()
    metrics.unlink()
    dry = run(["snakemake", "-n", *README_LINE[1:]], workdir, env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout) == {"evaluate": 1, "table": 1}, dry.stdout[-3000:]
    assert "results/metrics/digits/cnn/trades/seed1.json is missing" in dry.stderr, dry.stderr
    assert recorded() == kept  # the dry run showed the re-run and recorded nothing
    done = run(README_LINE, workdir, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert numbers() == before  # the same evaluation, bit for bit
    import numpy as np

    with np.load(workdir / "results/pseudo/digits/cnn/mt/seed1.npz") as pseudo:  # WSCAT's labels
        assert str(pseudo["labeler"]) == "mt"  # what `wscat train` checks against its labeler
    again = run(["snakemake", "-n", *README_LINE[1:]], workdir, env)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("edit, retrained", [("evaluation", 0), ("validation", 1)])
def test_a_stronger_test_time_attack_re_evaluates_and_retrains_nothing(tiny_run, env, edit,
                                                                      retrained) -> None:
    """More PGD and CW steps at test time (`evaluation`): every model re-attacked, none retrained.
    More steps in model selection's attack (`validation`): every model retrained. A dry run on
    the finished tiny run, with the edit in a params file of its own (--configfile)."""
    workdir, result = tiny_run
    assert result.returncode == 0, "the README line failed; see test_readme_line_builds_the_table"
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params[edit].update(pgd_steps=params[edit]["pgd_steps"] + 1,
                        cw_steps=params[edit]["cw_steps"] + 1)
    (workdir / "edited.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dry = run(["snakemake", "-n", "--configfile", "edited.yaml", *README_LINE[1:]], workdir, env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = job_counts(dry.stdout)
    runs = len(params["experiments"]["digits"]["methods"])  # one seed
    assert counts.get("train", 0) == retrained * runs, dry.stdout[-3000:]
    assert counts["evaluate"] == runs and counts["table"] == 1, dry.stdout[-3000:]


def test_a_fresh_clone_of_committed_tables_says_how_to_build_its_runs(tmp_path: Path,
                                                                      env: dict[str, str]) -> None:
    """A clone of a commit that holds the tables (docs/workflow.md's baseline) has none of their
    runs and no Snakemake record: a dry run finds nothing to do and says so in one line naming
    the command, and that command plans every job of the table."""
    workdir = copy_workflow(tmp_path, tiny_params())
    tables = workdir / "results/tables"
    tables.mkdir(parents=True)
    for name in ("digits.tex", "digits.csv", "digits.md", "digits-paired.csv", "digits-paired.tex",
                 "digits-paired.pdf", "digits-paired.png"):  # docs/workflow.md's `git add`
        (tables / name).write_text("committed\n")
    target = "results/tables/digits.tex"
    dry = run([str(BIN / "snakemake"), "-n", "--", target], workdir, env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    lines = [line for line in dry.stderr.splitlines() if line.startswith("wscat:")]
    command = f"snakemake --forcerun {target} -- {target}"
    assert len(lines) == 1 and f"({command})" in lines[0], dry.stderr[-3000:]
    forced = run([str(BIN / "snakemake"), "-n", *command.split()[1:]], workdir, env)
    assert forced.returncode == 0, forced.stderr[-3000:]
    runs = len(tiny_params()["experiments"]["digits"]["methods"])  # one seed
    counts = job_counts(forced.stdout)
    assert counts["train"] == runs and counts["evaluate"] == runs and counts["table"] == 1, counts
