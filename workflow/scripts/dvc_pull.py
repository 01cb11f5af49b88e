"""`make pull`: runs pushed with `dvc push` back from the DVC remote, up to date for Snakemake.

`dvc pull` (or, where no DVC remote is set, `dvc checkout` from this clone's own cache: back at
an earlier commit after `git checkout REV`) puts back every output of dvc.yaml's stages (splits,
pseudo-labels, checkpoints, metrics: workflow/scripts/dvc_yaml.py), but with the times of the
copy, in no order, and without the records Snakemake keeps of the params each job ran with
(.snakemake/ is not shared): a bare `snakemake` would then redo jobs whose results are already
there, and would not see a later edit of params.yaml. So, for each stage whose files and params
`dvc status` finds equal to dvc.lock's (the state the results were committed in), `snakemake
--touch --forceall` marks every job of its table done, in the DAG's order, and records the
params it ran with. It reads `dvc status` first: a stage whose params or code differ from
dvc.lock's is neither pulled nor marked, and is named with what differs and what to do; so is a
stage whose table reads a file of a stage left alone (runs two tables share are the first
stage's outputs), and a stage dvc.lock never recorded.

    python workflow/scripts/dvc_pull.py [--remote NAME]    # make pull [REMOTE=NAME]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: this repository's package and scripts
    sys.path.insert(0, str(ROOT))
from workflow.scripts import dvc_yaml  # noqa: E402
from wscat.config import ConfigError, load_params, yaml_error_line  # noqa: E402
from wscat.errors import first_line  # noqa: E402


class PullError(Exception):
    """What stops the pull, in one line."""


def tool(name: str) -> str:
    """`name` beside this Python (the venv's), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def environment(root: Path) -> dict[str, str]:
    """The environment DVC and Snakemake run in: a writable cache folder, no DVC analytics."""
    return {**os.environ, "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(root / ".cache")),
            "DVC_NO_ANALYTICS": "1"}


class Stage(NamedTuple):
    """A dvc.yaml stage that runs Snakemake: the targets of its command, its outputs."""

    targets: list[str]
    outs: set[str]


def read_stages(root: Path) -> dict[str, Stage]:
    """dvc.yaml's stages that run Snakemake (not its fetch-<dataset> stages)."""
    path = root / "dvc.yaml"
    if not path.is_file():
        raise PullError(f"no dvc.yaml in {root}: run it in the repository's root folder")
    try:
        stages = (yaml.safe_load(path.read_text()) or {}).get("stages") or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as error:
        raise PullError(f"cannot read {path}: {first(error)}; regenerate it with "
                        "`.venv/bin/python workflow/scripts/dvc_yaml.py`") from None
    found = {}
    for name, stage in stages.items():
        cmd = str(stage.get("cmd", "")) if isinstance(stage, dict) else ""
        if cmd.startswith("snakemake ") and " -- " in cmd:
            found[str(name)] = Stage(cmd.split(" -- ", 1)[1].split(), dvc_yaml.stage_outs(stage))
    if not found:
        raise PullError(f"{path} has no stage that runs Snakemake; regenerate it with "
                        "`.venv/bin/python workflow/scripts/dvc_yaml.py`")
    return found


def remotes(root: Path) -> tuple[list[str], str | None]:
    """The DVC remotes `dvc remote list` names, and the default one (None: none is)."""
    done = subprocess.run([tool("dvc"), "remote", "list"], cwd=root, env=environment(root),
                          capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise PullError(f"`dvc remote list` failed: {lines[-1].removeprefix('ERROR: ')}")
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    default = next((row[0] for row in rows if row[-1] == "(default)"), None)
    return [row[0] for row in rows], default


def pull(root: Path, remote: str | None, names: list[str]) -> None:
    """`dvc pull` of the stages `names` from `remote`, else the default one, its progress on the
    terminal (a remote of checkpoints can take minutes); a remote named but missing in one line
    before it starts. With no remote at all, `dvc checkout` from this clone's cache (an earlier
    commit's runs)."""
    listed, default = remotes(root)
    if remote is not None and remote not in listed:
        raise PullError(f"no DVC remote named {remote} here "
                        f"({'its remotes: ' + ', '.join(listed) if listed else 'it has none'}); "
                        "add it with `dvc remote add NAME URL`")
    if remote is None and default is None:  # this clone's own cache: after `git checkout REV`
        if subprocess.run([tool("dvc"), "checkout", *names], cwd=root, env=environment(root)
                          ).returncode != 0:
            raise PullError("`dvc checkout` failed (DVC's words above): this clone's DVC cache "
                            "lacks those files, or they would overwrite unsaved files of yours "
                            "(`dvc commit` keeps them); no DVC remote is set to pull from: name "
                            "the one the runs were pushed to (`make pull REMOTE=NAME`), or set a "
                            "default (`dvc remote add -d NAME URL`)")
        return
    cmd = [tool("dvc"), "pull", *(["--remote", remote] if remote else []), *names]
    if subprocess.run(cmd, cwd=root, env=environment(root)).returncode != 0:
        raise PullError("`dvc pull` failed (DVC's words above; where they name unsaved files of "
                        "yours, `dvc commit` keeps them, `dvc checkout --force` drops them); "
                        "nothing was marked up to date")


def changed(root: Path) -> dict[str, Any]:
    """`dvc status --json`: {stage: what differs from dvc.lock}; {} when nothing does."""
    done = subprocess.run([tool("dvc"), "status", "--json"], cwd=root,
                          env=environment(root), capture_output=True, text=True)
    try:
        status = json.loads(done.stdout) if done.returncode == 0 else None
    except json.JSONDecodeError:
        status = None
    if not isinstance(status, dict):
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise PullError(f"`dvc status --json` failed: {lines[-1]}")
    return status


def difference(entries: Any) -> str:
    """What `dvc status` says differs in one stage, in a few words."""
    parts = []
    for entry in entries if isinstance(entries, list) else [entries]:
        if isinstance(entry, dict):
            for kind, what in entry.items():  # e.g. {"changed deps": {"params.yaml":
                # {"methods.trades": "modified"}}}: the params' names, else the files'
                names = [name for key, value in what.items() for name in (
                    value if isinstance(value, dict) else [key])] if isinstance(what, dict) else []
                parts.append(f"{kind} {', '.join(names[:2])}"
                             f"{f' and {len(names) - 2} more' if len(names) > 2 else ''}".strip())
        else:
            parts.append(str(entry))
    return "; ".join(parts) or "changed"


def dag_files(root: Path, targets: list[str]) -> set[str]:
    """Every file Snakemake's DAG makes for `targets` (dvc_yaml's reading of `--summary`)."""
    return {path for path, _ in dvc_yaml.snakemake_outputs(root, targets)}


def touch(root: Path, targets: list[str]) -> None:
    """Mark every job of `targets` done, in the DAG's order, with the params it ran with."""
    cmd = [tool("snakemake"), "--touch", "--forceall", "--cores", "1", "--", *targets]
    done = subprocess.run(cmd, cwd=root, env=environment(root), capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        said = next((line for line in lines if line.startswith(("Error", "wscat:"))),
                    next((line for line in lines if "Exception" in line),
                         lines[-1] if lines else "(no output)"))
        raise PullError(f"`snakemake --touch --forceall -- {' '.join(targets)}` failed: {said}")


def recorded(root: Path) -> set[str]:
    """The stages dvc.lock records (run, committed); one line where there is no dvc.lock."""
    path = root / "dvc.lock"
    try:
        stages = (yaml.safe_load(path.read_text()) or {}).get("stages") or {}
    except FileNotFoundError:
        raise PullError(f"no dvc.lock in {root}: no run was recorded here or in the commit pulled "
                        "(`make demo` and `dvc repro` record theirs; commit dvc.lock, then `dvc "
                        "push`)") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as error:
        raise PullError(f"cannot read {path}: {first(error)}; `git checkout dvc.lock` puts "
                        "the committed one back") from None
    return {str(name) for name in stages} if isinstance(stages, dict) else set()


def first(error: BaseException) -> str:
    """An error's first line (YAML's with the line and column it stopped at)."""
    return yaml_error_line(error) if isinstance(error, yaml.YAMLError) else first_line(error)


def check_workspace(root: Path) -> None:
    """What would stop Snakemake after the files were pulled, found before: params.yaml that
    wscat refuses (its own line), and Snakemake's lock (another run here, or a killed one)."""
    try:
        load_params(root / "params.yaml")
    except ConfigError as error:
        raise PullError(str(error)) from None
    locks = root / ".snakemake" / "locks"
    if locks.is_dir() and any(locks.iterdir()):
        raise PullError(f"Snakemake's lock is held ({locks}): another snakemake runs here, or one "
                        "was killed; when none runs, `.venv/bin/snakemake --unlock`, then make pull again")


def unpulled(entries: Any) -> str | None:
    """Why a stage is not pulled, from `dvc status` before the pull: params or code here that
    are not those dvc.lock records (its files would be the commit's, Snakemake's records this
    workspace's). None where only its outputs differ: missing, or another commit's, which DVC
    replaces from its cache; a file of yours that it has never cached it refuses to overwrite,
    and the pull stops."""
    kinds = [kind for entry in (entries if isinstance(entries, list) else [entries])
             if isinstance(entry, dict) for kind in entry if kind != "changed outs"]
    if not kinds:
        return None
    return (f"it differs from dvc.lock ({difference(entries)}): this workspace's params or code "
            "are not those the runs were made with; put them back (e.g. `git checkout "
            "params.yaml`) or rebuild them (`dvc repro NAME`)")


def run(root: Path, remote: str | None) -> int:
    """Pull the stages dvc.lock records and this workspace agrees with, then mark up to date
    those that equal dvc.lock and read no file of a stage left alone (an output belongs to one
    stage: runs two tables share are the first one's). One Snakemake call for all of them: a
    second call would make the files two stages share newer than the first one's table. 0 when
    every recorded stage was marked; a stage never recorded is only named."""
    stages = read_stages(root)
    check_workspace(root)
    done = recorded(root)
    before = changed(root)
    why = {name: "never recorded in dvc.lock (not built, or not committed, where it was pushed "
                 "from): `dvc repro NAME` builds it" for name in stages if name not in done}
    for name in done:
        reason = unpulled(before.get(name, []))
        if reason:
            why[name] = reason
    wanted = sorted(name for name in done if name not in why)
    if wanted:  # (no targets: DVC would take every stage)
        pull(root, remote, wanted)
    after = changed(root)
    for name in stages:
        if name not in why and name in after:
            why[name] = (f"it differs from dvc.lock after the pull ({difference(after[name])}): "
                         "files DVC does not cache, the table's (git's), are not the commit's; "
                         "`git checkout` them back, or `dvc commit NAME` records them")
    differing = {path: name for name in why if name in stages for path in stages[name].outs}
    for name in [name for name in stages if name not in why] if differing else []:
        shared = sorted(dag_files(root, stages[name].targets) & set(differing))
        if shared:
            why[name] = (f"it reads {shared[0]}, an output of stage {differing[shared[0]]}, "
                         "which is left alone")
    equal = [name for name in stages if name not in why]
    if equal:
        touch(root, [target for name in equal for target in stages[name].targets])
    for name, stage in stages.items():
        print(f"{name}: left alone, {why[name].replace('NAME', name)}" if name in why else
              f"{name}: pulled and up to date for Snakemake (`snakemake -n -- "
              f"{' '.join(stage.targets)}` has nothing to do)")
    return 1 if any(name in why for name in stages if name in done) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", help="the DVC remote to pull from (default: the default one)")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the workflow's folder (default: the current one)")
    args = parser.parse_args(argv)
    try:
        return run(args.root.resolve(), args.remote)
    except PullError as error:
        print(f"make pull: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
