"""The ecosystem's commands on a tiny run of the embedded default (TRADES and WSCAT, one seed, two
epochs), the way the README shows them: `dvc repro` in a fresh git + DVC repository, then
`snakemake --report`, its Chromium screenshot, `dvc plots show`, `wscat export`, the Python API,
and last `dvc exp run -S methods.wscat.beta=...` with `dvc exp show` and `dvc plots diff`."""
from __future__ import annotations

import base64
import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.tiny import tiny_params
from workflow.scripts.report_screenshot import find_chromium, screenshot

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GIT = ["git", "-c", "user.name=wscat-test", "-c", "user.email=wscat-test@example.invalid"]
METHODS = ["trades", "wscat"]  # WSCAT brings its labeler, Mean Teacher
ATTACKS = ["Natural", "FGSM", "PGD", "CW", "AA", "Mean"]
pytestmark = pytest.mark.slow  # every test reads the `repo` fixture's `dvc repro`


def run(cmd: list[str], cwd: Path, env: dict[str, str],
        timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ok(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = run(cmd, cwd, env)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def params() -> dict:
    tiny = tiny_params(epochs=2)
    tiny["experiments"]["digits"]["methods"] = METHODS
    return tiny


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """A fresh clone's layout with tiny params, built by `dvc repro` and committed."""
    workdir = tmp_path_factory.mktemp("repo")
    for name in ("Snakefile", ".gitignore", ".dvcignore"):
        shutil.copy2(ROOT / name, workdir / name)
    for name in ("workflow", "wscat", "profiles"):  # profiles/default: a link into workflow/
        shutil.copytree(ROOT / name, workdir / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (workdir / "params.yaml").write_text(yaml.safe_dump(params(), sort_keys=False))
    dvc = str(BIN / "dvc")
    for step in ([*GIT, "init", "-q"], [dvc, "init", "-q"], [dvc, "config", "core.analytics", "false"],
                 [sys.executable, str(ROOT / "workflow/scripts/dvc_yaml.py"), "--root", str(workdir)],
                 [dvc, "repro"], [*GIT, "add", "-A"], [*GIT, "commit", "-q", "-m", "baseline"]):
        ok(step, workdir, env)
    return workdir


def table(repo: Path) -> dict[tuple[str, str], str]:
    """{(method, metric): mean} of the Table 2 CSV, as printed there."""
    with open(repo / "results/tables/digits.csv", newline="") as handle:
        return {(row["method"], row["metric"]): row["mean"] for row in csv.DictReader(handle)}


# --- snakemake --report -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def report(repo: Path, env: dict[str, str]) -> Path:
    ok([str(BIN / "snakemake"), "--report", "results/report.html", "--", "results/tables/digits.tex"],
       repo, env)
    return repo / "results/report.html"


def report_results(path: Path) -> dict[str, dict]:
    """The report's result records (path -> name, labels, caption, data URI, ...)."""
    found = re.search(r"^\s*var results = (\{.*\});\s*$", path.read_text(), re.M)
    assert found, "no results in the report"
    return json.loads(found[1])


def test_report_holds_the_table_2_numbers_with_captions(repo: Path, report: Path) -> None:
    results = report_results(report)
    per_run = {path: record for path, record in results.items() if path.startswith("results/metrics/")}
    assert sorted(per_run) == [f"results/metrics/digits/cnn/{method}/seed1.json" for method in METHODS]
    numbers = table(repo)
    for record in per_run.values():
        labels = record["labels"]
        # The paper's rows in its order (AA-paper and NRF are the paper targets' extras).
        assert list(labels) == ["method", "seed", *ATTACKS]
        # One seed: the table's mean is the run's value, printed alike.
        assert all(labels[attack] == numbers[(labels["method"], attack)] for attack in ATTACKS)
        assert "Test accuracy (%)" in record["caption"] and "eps 0.15" in record["caption"]
        # the attacks' steps and the checkpoint as these params give them, not the paper's
        steps = yaml.safe_load((repo / "params.yaml").read_text())["evaluation"]
        assert (f"PGD-{steps['pgd_steps']} (cross-entropy), CW-{steps['cw_steps']} (CW margin)"
                in record["caption"] and "selection kept (best.pt" in record["caption"]), record
    training = [record for path, record in results.items() if path.endswith("train_log.csv")]
    assert sorted(record["labels"]["method"] for record in training) == ["MT", "TRADES", "WSCAT"]
    assert all(record["labels"]["epochs"] == 2 for record in training)
    pseudo = [record for path, record in results.items() if path.startswith("results/pseudo/")]
    assert [record["labels"]["labeler"] for record in pseudo] == ["MT"]
    # Once workflow/rules/report.smk marks the table for the report, its CSV is the table itself.
    tables = [record for path, record in results.items() if path.startswith("results/tables/")]
    for record in tables:  # the table and its paired comparison against WSCAT, and its picture
        data = base64.b64decode(record["data_uri"].split("base64,", 1)[1])
        assert data == (repo / "results/tables" / record["filename"]).read_bytes()
    assert sorted(record["filename"] for record in tables) == ["digits-paired.csv",
                                                               "digits-paired.png", "digits.csv"]
    assert "Weakly Supervised Contrastive Adversarial Training" in report.read_text()


def test_chromium_renders_the_report(report: Path, tmp_path: Path) -> None:
    if find_chromium() is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); "
                    "the README's screenshot was made with it")
    png = screenshot(report, tmp_path / "report.png", width=1024, height=640)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1024, 640)
    assert len(data) > 20_000  # a rendered page, not a blank one (a blank PNG is ~2 KB)


# --- DVC plots -----------------------------------------------------------------------------------

def plot_rows(output: str) -> dict[str, set[tuple[str, str]]]:
    """{plot: {(revision, run file)}} of `dvc plots show/diff --json`."""
    data = json.loads(output)
    assert not data.get("errors"), data["errors"]
    return {name: {(row["rev"], row["filename"]) for entry in entries
                   for row in entry["content"]["data"]["values"]}
            for name, entries in data["data"].items()}


def test_dvc_plots_show_draws_the_learning_curves(repo: Path, env: dict[str, str]) -> None:
    rows = plot_rows(ok([str(BIN / "dvc"), "plots", "show", "--json"], repo, env))
    assert set(rows) == {"digits-loss", "digits-val_natural", "digits-val_robust"}
    runs = {Path(name).parts[0] for _, name in rows["digits-loss"]}
    assert runs == {"mt", "trades", "wscat"}
    # Mean Teacher keeps its last epoch (no robust validation); the others are selected on CW-20.
    assert {Path(name).parts[0] for _, name in rows["digits-val_robust"]} == {"trades", "wscat"}
    data = json.loads(ok([str(BIN / "dvc"), "plots", "show", "--json"], repo, env))
    epochs = {row["step"] for row in data["data"]["digits-loss"][0]["content"]["data"]["values"]}
    assert epochs == {"1", "2"}


# --- sharing a model, the Python API -------------------------------------------------------------

def test_wscat_export_writes_a_robustbench_entry(repo: Path, tmp_path: Path,
                                                env: dict[str, str]) -> None:
    from wscat.export import load_exported
    from wscat.inference import load_model

    run_dir = repo / "results/models/digits/cnn/wscat/seed1"
    entry_path = tmp_path / "shared" / "wscat-digits.json"
    ok([str(BIN / "wscat"), "export", "--checkpoint", str(run_dir / "best.pt"), "--metrics",
        str(repo / "results/metrics/digits/cnn/wscat/seed1.json"), "--out", str(entry_path)],
       tmp_path, env)
    entry = json.loads(entry_path.read_text())
    numbers = table(repo)
    assert entry["clean_acc"] == numbers[("WSCAT", "Natural")]
    assert entry["autoattack_acc"] == numbers[("WSCAT", "AA")]
    assert (entry["threat_model"], entry["eps"], entry["dataset"]) == ("Linf", "0.15", "digits")
    assert entry["architecture"] == "CNN (width 16)" and entry["state_dict"] == "wscat-digits.pt"
    exported = load_exported(entry_path)
    original, _ = load_model(run_dir / "best.pt", torch.device("cpu"))
    x = torch.rand(16, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(exported(x), original(x)[1])  # logits only, as RobustBench expects
    (tmp_path / "shared" / "wscat-digits.pt").write_bytes(b"tampered")
    with pytest.raises(ValueError, match="sha256"):
        load_exported(entry_path)
    mismatched = run([str(BIN / "wscat"), "export", "--checkpoint", str(run_dir / "best.pt"),
                      "--metrics", str(repo / "results/metrics/digits/cnn/trades/seed1.json"),
                      "--out", str(tmp_path / "other.json")], tmp_path, env)
    assert mismatched.returncode == 2 and len(mismatched.stderr.strip().splitlines()) == 1


def test_the_api_reproduces_the_pipeline(repo: Path, tmp_path: Path) -> None:
    """train_method + evaluate_checkpoint give the numbers the workflow's jobs gave."""
    from wscat import api

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workflow's jobs (threads: 1)
    try:
        trained = api.train_method("trades", out_dir=tmp_path, params=repo / "params.yaml", seed=1)
        result = api.evaluate_checkpoint(trained.checkpoint, params=repo / "params.yaml")
    finally:
        torch.set_num_threads(threads)
    pipeline_metrics = json.loads((repo / "results/metrics/digits/cnn/trades/seed1.json").read_text())
    # The API's default part is the pipeline's evaluate job's: the paper's five and their Mean.
    assert result.accuracy == pipeline_metrics["accuracy"]
    assert trained.log.is_file() and (trained.curves / "metrics.json").is_file()
    model = api.build_model("cnn", params=repo / "params.yaml")
    features, logits = model(torch.rand(4, 1, 8, 8))
    assert logits.shape == (4, 10) and features.shape[0] == 4


# --- sharing runs: dvc push, then make pull in another clone -------------------------------------

def planned_outputs(dry_run: str) -> list[str]:
    """The first output of each job a Snakemake run or dry run lists."""
    return [line.split("output: ", 1)[1].split(", ")[0] for line in dry_run.splitlines()
            if line.startswith("    output: ")]


def test_pushed_runs_come_back_in_a_fresh_clone_up_to_date(repo: Path, tmp_path: Path,
                                                           env: dict[str, str]) -> None:
    """docs/workflow.md ("Sharing runs"): `dvc push` shares every file the table is built from;
    in a fresh `git clone`, `make pull`'s script brings each back bit for bit, Snakemake then has
    nothing to do and `dvc status` is clean, and an edit of one method's params reruns that
    method's training alone (Snakemake knows the params each pulled job ran with). After a new
    baseline is committed, `git checkout` of the old one and `make pull` put its runs back from
    the clone's own cache, as they were."""
    dvc, snakemake = str(BIN / "dvc"), str(BIN / "snakemake")
    ok([dvc, "remote", "add", "--local", "shared", str(tmp_path / "remote")], repo, env)
    ok([dvc, "push", "--remote", "shared"], repo, env)
    clone = tmp_path / "clone"
    ok(["git", "clone", "-q", str(repo), str(clone)], tmp_path, env)
    ok([dvc, "remote", "add", "--local", "shared", str(tmp_path / "remote")], clone, env)
    assert not (clone / "results/models").exists()  # git has the tables only
    pulled = ok([sys.executable, "workflow/scripts/dvc_pull.py", "--remote", "shared"], clone, env)
    assert pulled.splitlines()[-1] == ("digits: pulled and up to date for Snakemake (`snakemake "
                                       "-n -- results/tables/digits.tex` has nothing to do)")
    assert "results/models/digits/cnn/wscat/seed1/best.pt" in pulled  # DVC's own list, shown
    stage = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]["digits"]
    outs = [path for entry in stage["outs"] for path in entry]
    assert "results/models/digits/cnn/wscat/seed1/best.pt" in outs
    files = [path.relative_to(repo) for out in outs for path in sorted(
        (repo / out).rglob("*") if (repo / out).is_dir() else [repo / out]) if path.is_file()]
    assert len(files) > len(outs)  # the DVCLive folders' files too
    assert all((clone / path).read_bytes() == (repo / path).read_bytes() for path in files)
    assert "Nothing to be done" in ok([snakemake, "-n", "--", "results/tables/digits.tex"],
                                      clone, env)
    assert "up to date" in ok([dvc, "status"], clone, env)
    edited = yaml.safe_load((clone / "params.yaml").read_text())
    edited["methods"]["trades"]["lam"] = 5.0
    (clone / "params.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    assert planned_outputs(ok([snakemake, "-n", "--", "results/tables/digits.tex"], clone, env)) \
        == ["results/models/digits/cnn/trades/seed1/best.pt",
            "results/metrics/digits/cnn/trades/seed1.json", "results/tables/digits.tex"]

    # Back at the baseline after a new one: `make pull` with no default remote checks the
    # baseline's runs out of this clone's own cache.
    trades = "results/models/digits/cnn/trades/seed1/best.pt"
    ok([snakemake, "--", "results/tables/digits.tex"], clone, env)
    ok([dvc, "commit", "--force", "digits"], clone, env)
    ok([*GIT, "commit", "-q", "-am", "lam 5"], clone, env)
    assert (clone / trades).read_bytes() != (repo / trades).read_bytes()
    ok([*GIT, "checkout", "-q", "HEAD~1"], clone, env)
    back = ok([sys.executable, "workflow/scripts/dvc_pull.py"], clone, env)
    assert back.splitlines()[-1].startswith("digits: pulled and up to date for Snakemake")
    assert all((clone / path).read_bytes() == (repo / path).read_bytes() for path in files)
    assert "Nothing to be done" in ok([snakemake, "-n", "--", "results/tables/digits.tex"],
                                      clone, env)
    assert "up to date" in ok([dvc, "status"], clone, env)


# --- DVC experiments (last: it changes the workspace) ----------------------------------------------

def test_dvc_exp_run_sweeps_beta_and_dvc_exp_show_lists_it(repo: Path, env: dict[str, str]) -> None:
    dvc = str(BIN / "dvc")
    swept = run([dvc, "exp", "run", "digits", "-S", "methods.wscat.beta=5.0", "--name", "beta-5"],
                repo, env)
    assert swept.returncode == 0, swept.stdout[-3000:] + swept.stderr[-3000:]
    # Snakemake retrained only what beta touches (its jobs, from the stage's output: DVC rewrites
    # every cached file after the stage, so their times say nothing)
    trained = [out for out in planned_outputs(swept.stdout + swept.stderr)
               if out.endswith("/best.pt")]
    assert trained == ["results/models/digits/cnn/wscat/seed1/best.pt"]

    shown = json.loads(ok([dvc, "exp", "show", "--json"], repo, env))
    experiments = {exp["name"]: exp for baseline in shown for exp in baseline.get("experiments") or []}
    assert "beta-5" in experiments, shown
    revision = experiments["beta-5"]["revs"][0]["data"]
    assert revision["params"]["params.yaml"]["data"]["methods"]["wscat"]["beta"] == 5.0
    assert "wscat" in revision["metrics"]["results/metrics/digits.json"]["data"]

    # The baseline's curves and the experiment's, both from DVC's cache.
    rows = plot_rows(ok([dvc, "plots", "diff", "HEAD", "beta-5", "--json"], repo, env))
    assert {rev for rev, _ in rows["digits-loss"]} == {"HEAD", "beta-5"}
