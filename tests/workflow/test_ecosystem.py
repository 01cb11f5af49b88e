"""The project as its tools expect it (fast checks): `snakemake --lint` clean, snakefmt-formatted
rule files, the conda environment every rule names (pinned like requirements.txt, dry-run under
`--sdm conda`), an installable package with a `wscat` command and `--help` for each subcommand."""
from __future__ import annotations

import re
import shutil
import stat
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV_FILE = "workflow/envs/wscat.yaml"
SUBCOMMANDS = ["fetch", "split", "train", "pseudo-label", "evaluate", "table", "export"]


def run(cmd: list[str], cwd: Path, env: dict[str, str],
        timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def copy_workflow(dest: Path) -> Path:
    """The Snakefile, workflow/ and params.yaml: what Snakemake reads (the package is installed)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copy2(ROOT / "params.yaml", dest / "params.yaml")
    shutil.copytree(ROOT / "workflow", dest / "workflow", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def pins(lines: list[str]) -> dict[str, str]:
    """{package: version} of `name==version` lines (comments and blanks skipped)."""
    found = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not pinned exactly: {line}"
            found[name.lower()] = version
    return found


# --- Snakemake's own checks -------------------------------------------------------------------

def test_snakemake_lint_reports_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    result = run([str(BIN / "snakemake"), "--lint"], copy_workflow(tmp_path), env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Lints for" not in output and "good condition" in output, output


def _snakefiles() -> list[str]:
    return ["Snakefile", *sorted(str(path.relative_to(ROOT))
                                 for path in (ROOT / "workflow").rglob("*.smk"))]


@pytest.mark.parametrize("path", _snakefiles())
def test_snakefmt_leaves_the_file_unchanged(path: str, env: dict[str, str]) -> None:
    result = run([str(BIN / "snakefmt"), "--check", "--diff", path], ROOT, env)
    assert result.returncode == 0, f"run `snakefmt {path}`:\n{result.stdout}{result.stderr}"


# --- the software stack: conda environment == requirements.txt --------------------------------

def test_the_conda_environment_pins_what_requirements_txt_pins() -> None:
    environment = yaml.safe_load((ROOT / ENV_FILE).read_text())
    assert "conda-forge" in environment["channels"]
    conda_deps = [dep for dep in environment["dependencies"] if isinstance(dep, str)]
    assert "python=3.11" in conda_deps and "pip" in conda_deps
    pip_section = next(dep["pip"] for dep in environment["dependencies"] if isinstance(dep, dict))
    required = pins((ROOT / "requirements.txt").read_text().splitlines())
    assert pins(pip_section) == required
    deploy = ROOT / "workflow/envs/wscat.post-deploy.sh"  # installs the package itself
    assert deploy.stat().st_mode & stat.S_IXUSR and "pip install --no-deps -e ." in deploy.read_text()


def test_the_lock_holds_every_pin_of_the_requirements_files() -> None:
    """`make venv` installs requirements*.txt constrained by requirements-lock.txt: a pin changed
    in one and not the other would fail the install, so `make lock` must follow a pin change.
    The installed venv holds exactly the lock's versions."""
    def normal(name: str) -> str:  # PEP 503: jupyter_core and jupyter-core are one package
        return re.sub(r"[-_.]+", "-", name).lower()

    lock = {normal(k): v for k, v in pins((ROOT / "requirements-lock.txt").read_text()
                                             .splitlines()).items()}
    for name in ("requirements.txt", "requirements-dev.txt"):
        for package, version in pins((ROOT / name).read_text().splitlines()).items():
            assert lock.get(normal(package)) == version, (
                f"{name} pins {package}=={version}, requirements-lock.txt "
                f"{lock.get(normal(package))}: run `make lock venv`")
    installed = {normal(dist.metadata["Name"]): dist.version for dist in metadata.distributions()}
    assert {k: installed.get(k) for k in lock} == lock, "the venv is not the lock: `make venv`"


def _fake_conda(bin_dir: Path) -> Path:
    """A `conda` that answers the three questions Snakemake asks before a dry run."""
    bin_dir.mkdir()
    script = bin_dir / "conda"
    script.write_text("""#!/bin/sh
case "$*" in
  "info --json") echo '{"conda_prefix": "/nonexistent/conda", "platform": "linux-64"}';;
  "--version") echo "conda 24.7.1";;
  "config --get channel_priority --json") echo '{"get": {"channel_priority": "strict"}}';;
  *) echo "this stand-in conda only answers a dry run's questions, not: $*" >&2; exit 1;;
esac
""")
    script.chmod(0o755)
    return bin_dir


@pytest.mark.slow
def test_sdm_conda_dry_run_puts_every_job_in_the_one_environment(tmp_path: Path,
                                                                 env: dict[str, str]) -> None:
    """`snakemake --sdm conda -n`: with conda when it is installed, else with a stand-in that
    answers the version and configuration questions (a dry run creates no environment)."""
    workdir = copy_workflow(tmp_path / "wf")
    if shutil.which("conda") is None:
        env = {**env, "PATH": f"{_fake_conda(tmp_path / 'bin')}:{env['PATH']}"}
    target = ["--", "results/tables/digits.tex"]
    dry = run([str(BIN / "snakemake"), "--sdm", "conda", "-n", "--cores", "2", *target], workdir, env)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    output = dry.stdout + dry.stderr
    assert re.search(rf"Conda environment {re.escape(ENV_FILE)} will be created", output), output
    listed = run([str(BIN / "snakemake"), "--sdm", "conda", "--list-conda-envs", *target], workdir, env)
    assert listed.returncode == 0, listed.stderr[-3000:]
    rows = [line.split("\t") for line in listed.stdout.splitlines() if "\t" in line]
    assert rows[0][0] == "environment" and [row[0] for row in rows[1:]] == [ENV_FILE]
    # Every rule that runs a command names an environment (the lint test checks that none lacks
    # one); a job whose rule names another file would add a row above.


# --- the package -------------------------------------------------------------------------------

@pytest.mark.parametrize("subcommand", [None, *SUBCOMMANDS])
def test_every_subcommand_has_help(subcommand: str | None, tmp_path: Path, env: dict[str, str]) -> None:
    args = [str(BIN / "wscat"), *([subcommand] if subcommand else []), "--help"]
    result = run(args, tmp_path, env)  # no params.yaml here: --help needs none
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: wscat {subcommand or ''}".rstrip())
    if subcommand is None:
        assert all(name in result.stdout for name in SUBCOMMANDS)


def test_the_package_imports_beside_a_folder_named_wscat(tmp_path: Path,
                                                       env: dict[str, str]) -> None:
    """Python started in a clone's parent, which holds the clone's folder `wscat`: `from wscat
    import __version__` failed there ("unknown location"), setuptools' default editable import
    hook losing to that folder as a namespace package. `make venv` installs the package as a path
    entry (the Makefile's EDITABLE), where the package itself wins."""
    (tmp_path / "wscat").symlink_to(ROOT, target_is_directory=True)  # the clone, from its parent
    done = run([sys.executable, "-c", "from wscat import __version__; import wscat; "
                "print(wscat.__file__)"], tmp_path, {**env, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()) == ROOT / "wscat" / "__init__.py"


@pytest.mark.slow
def test_pip_builds_and_installs_the_package_with_its_console_command(tmp_path: Path,
                                                                      env: dict[str, str]) -> None:
    """`pip install .` from a clean copy of the sources (the build leaves nothing in the repo)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "requirements.txt", "requirements-dev.txt"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "wscat", source / "wscat", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
                 str(source)], tmp_path, env)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("wscat-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = archive.read(info).decode()
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    for needed in ("wscat/api.py", "wscat/export.py", "wscat/cli.py", "wscat/params.schema.yaml"):
        assert needed in names
    assert any(name.startswith("wscat/report/templates/") for name in names)
    assert not any(name.startswith("tests/") for name in names)
    assert "wscat = wscat.entry:console" in entry_points
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    assert pins(requires) == pins((ROOT / "requirements.txt").read_text().splitlines())
    assert "Provides-Extra: dev" in metadata

    site = tmp_path / "site"
    installed = run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], tmp_path, env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    installed_env = {**env, "PYTHONPATH": str(site)}
    probe = run([sys.executable, "-c", "import wscat, wscat.api, wscat.export; print(wscat.__file__)"],
                tmp_path, installed_env)
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).is_relative_to(site)  # the installed copy, not the checkout
    command = run([str(site / "bin" / "wscat"), "export", "--help"], tmp_path, installed_env)
    assert command.returncode == 0 and "--checkpoint" in command.stdout, command.stderr
