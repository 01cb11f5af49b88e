"""The design's arrows: data knows no model. Nothing under wscat/data imports the models, the
methods, the trainer, the attacks, inference or the steps, directly or through another module."""
from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.helpers.tiny import ROOT

DATA = ROOT / "wscat" / "data"
FORBIDDEN = ("wscat.models", "wscat.inference", "wscat.methods", "wscat.training",
             "wscat.attacks", "wscat.evaluation", "wscat.checkpoint", "wscat.steps", "wscat.api",
             "wscat.export", "wscat.analysis")


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_no_data_module_names_a_model_module():
    """Every import statement, at the top or inside a function."""
    found = []
    for path in sorted(DATA.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if _forbidden(n)]
    assert not found


def _fresh_python(code: str) -> str:
    """The stdout of `code` run by this venv's Python in a new process (its own imports), from
    the repository's root; a failure shows its stderr."""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_importing_every_data_module_loads_no_model_module():
    """Through the imports of the modules data does import (config, errors, io, ...)."""
    code = ("import importlib, json, pkgutil, sys, wscat.data as d\n"
            "for m in pkgutil.walk_packages(d.__path__, 'wscat.data.'):\n"
            "    importlib.import_module(m.name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('wscat'))))\n")
    loaded = json.loads(_fresh_python(code))
    assert "wscat.data.training_data" in loaded
    assert [m for m in loaded if _forbidden(m)] == []


def test_the_report_steps_load_without_torch():
    """`wscat table`, the paper's tables and figures and the curves read files and draw: they
    start without torch (1.2 s a job), and `wscat.workflow` builds the DAG without it."""
    modules = ["wscat.workflow", "wscat.steps.table", "wscat.steps.paper", "wscat.report.figures",
               "wscat.report.paper_tables", "wscat.report.paired", "wscat.metrics"]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "print('torch' in sys.modules)\n")
    assert _fresh_python(code).split() == ["False"]


def test_the_proxy_scripts_load_without_torch():
    """benchmarks/cifar10_proxy.py (its `--check` before every device call and its refusals)
    and benchmarks/proxy_table.py (the three-seed table, on a machine with no GPU) record code
    digests and versions, not tensors: they start without torch (1.2 s a call); the jobs they
    run load it themselves."""
    code = ("import sys\n"
            "sys.path.insert(0, 'benchmarks')\n"
            "import cifar10_proxy, proxy_table\n"
            "from wscat import provenance\n"
            "provenance.versions(), provenance.code_digest()\n"
            "print('torch' in sys.modules)\n")
    assert _fresh_python(code).split() == ["False"]


def test_wscat_table_runs_without_torch(tmp_path):
    """The import check above does not see a step that loads torch while it runs: `wscat table`
    did, for one path test (is a metrics file's checkpoint in a resume/?), 1.2 s of every table
    job. The whole command on two runs' metrics files (recording the checkpoint, training and
    evaluation they were made with, as `wscat evaluate` does), and torch is still not loaded at
    the end."""
    from wscat.config import load_params
    from wscat.workflow import evaluation_fingerprint, training_fingerprint

    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text().replace(
        "experiments:\n", "experiments:\n  mini: {dataset: digits, model: cnn, seeds: [1], "
        "methods: [trades, wscat]}\n", 1))
    loaded = load_params(params)
    metrics = []
    for method in ("trades", "wscat"):
        path = tmp_path / f"{method}.json"
        path.write_text(json.dumps({
            "dataset": "digits", "model": "cnn", "method": method, "seed": 1,
            "accuracy": {"Natural": 90.0, "FGSM": 60.0, "PGD": 50.0, "CW": 50.0, "AA": 40.0,
                         "Mean": 55.0},
            "manifest": {
                "checkpoint": {"path": f"results/models/digits/cnn/{method}/seed1/best.pt"},
                "training": {"fingerprint": training_fingerprint(loaded, "digits", "cnn",
                                                                 method)},
                "evaluation_settings": evaluation_fingerprint(loaded, "digits")}}))
        metrics.append(str(path))
    argv = ["table", "--params", str(params), "--experiment", "mini",
            "--tex", str(tmp_path / "t.tex"), "--csv", str(tmp_path / "t.csv"),
            "--summary", str(tmp_path / "s.json"), *metrics]
    code = ("import sys\n"
            "from wscat.cli import main\n"
            f"assert main({argv!r}) == 0\n"
            "print('torch loaded' if 'torch' in sys.modules else 'no torch')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "WSCAT" in (tmp_path / "t.tex").read_text()
    assert result.stdout.splitlines()[-1] == "no torch", result.stdout
