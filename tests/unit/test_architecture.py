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


def test_importing_every_data_module_loads_no_model_module():
    """Through the imports of the modules data does import (config, errors, io, ...)."""
    code = ("import importlib, json, pkgutil, sys, wscat.data as d\n"
            "for m in pkgutil.walk_packages(d.__path__, 'wscat.data.'):\n"
            "    importlib.import_module(m.name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('wscat'))))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
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
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False"]
