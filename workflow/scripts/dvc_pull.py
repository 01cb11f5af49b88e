"""`make pull`: runs pushed with `dvc push` back from the DVC remote, up to date for Snakemake.

`dvc pull` (or, where no DVC remote is set, `dvc checkout` from this clone's own cache: back at
an earlier commit after `git checkout REV`) puts back every output of dvc.yaml's stages (splits,
pseudo-labels, checkpoints, metrics: workflow/scripts/dvc_yaml.py), but with the times of the
copy, in no order, and without the records Snakemake keeps of the params each job ran with
(.snakemake/ is not shared): a bare `snakemake` would then redo jobs whose results are already
there, and would not see a later edit of params.yaml. So, for each stage whose files and params
`dvc status` finds equal to dvc.lock's (the state the results were committed in), `snakemake
--touch --forceall` marks every job of its table done, in the DAG's order, and records the
params it ran with. A stage that differs is left alone and named, with what differs, and so is a
stage whose table reads a file of a differing stage (runs two tables share are the first stage's
outputs).

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
    except (OSError, yaml.YAMLError, AttributeError) as error:
        mark = getattr(error, "problem_mark", None)  # YAML's: the line it stopped at
        what = getattr(error, "problem", None) or (str(error).splitlines() or ["?"])[0]
        raise PullError(f"cannot read {path}: {what}{f' (line {mark.line + 1})' if mark else ''}"
                        "; regenerate it with `.venv/bin/python workflow/scripts/dvc_yaml.py`"
                        ) from None
    found = {}
    for name, stage in stages.items():
        cmd = str(stage.get("cmd", "")) if isinstance(stage, dict) else ""
        if cmd.startswith("snakemake ") and " -- " in cmd:
            outs = {str(path) for key in ("outs", "metrics") for entry in stage.get(key) or []
                    for path in (entry if isinstance(entry, dict) else [entry])}
            found[str(name)] = Stage(cmd.split(" -- ", 1)[1].split(), outs)
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


def pull(root: Path, remote: str | None) -> None:
    """`dvc pull` from `remote`, else the default one, its progress on the terminal (a remote
    of checkpoints can take minutes); a remote named but missing in one line before it starts.
    With no remote at all, `dvc checkout` from this clone's cache (an earlier commit's runs)."""
    names, default = remotes(root)
    if remote is not None and remote not in names:
        raise PullError(f"no DVC remote named {remote} here "
                        f"({'its remotes: ' + ', '.join(names) if names else 'it has none'}); "
                        "add it with `dvc remote add NAME URL`")
    if remote is None and default is None:  # this clone's own cache: after `git checkout REV`
        if subprocess.run([tool("dvc"), "checkout"], cwd=root, env=environment(root)
                          ).returncode != 0:
            raise PullError("`dvc checkout` failed (DVC's words above): this clone's DVC cache "
                            "lacks those files and no DVC remote is set to pull them from; name "
                            "the one the runs were pushed to (`make pull REMOTE=NAME`), or set a "
                            "default (`dvc remote add -d NAME URL`)")
        return
    cmd = [tool("dvc"), "pull", *(["--remote", remote] if remote else [])]
    if subprocess.run(cmd, cwd=root, env=environment(root)).returncode != 0:
        raise PullError(f"`dvc {' '.join(cmd[1:])}` failed (DVC's words above); nothing was "
                        "marked up to date")


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
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from workflow.scripts.dvc_yaml import snakemake_outputs

    return {path for path, _ in snakemake_outputs(root, targets)}


def touch(root: Path, targets: list[str]) -> None:
    """Mark every job of `targets` done, in the DAG's order, with the params it ran with."""
    cmd = [tool("snakemake"), "--touch", "--forceall", "--cores", "1", "--quiet", "all",
           "--", *targets]
    done = subprocess.run(cmd, cwd=root, env=environment(root), capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        raise PullError(f"`snakemake --touch --forceall -- {' '.join(targets)}` failed: "
                        f"{lines[-1]}")


def run(root: Path, remote: str | None) -> int:
    """Pull, then mark up to date the stages that equal dvc.lock and read no file of a stage
    that differs (an output belongs to one stage: runs two tables share are the first one's);
    0 when every stage was. One Snakemake call for all of them: a second call would make the
    files two stages share newer than the first one's table."""
    stages = read_stages(root)
    pull(root, remote)
    status = changed(root)
    why = {name: f"it differs from dvc.lock ({difference(status[name])}); `dvc status {name}` "
                 "says how; make them equal (e.g. `git checkout params.yaml`) and run make pull "
                 "again" for name in stages if name in status}
    differing = {path: name for name in why for path in stages[name].outs}
    for name in [name for name in stages if name not in why] if differing else []:
        shared = sorted(dag_files(root, stages[name].targets) & set(differing))
        if shared:
            why[name] = (f"it reads {shared[0]}, an output of stage {differing[shared[0]]}, "
                         "which differs")
    equal = [name for name in stages if name not in why]
    if equal:
        touch(root, [target for name in equal for target in stages[name].targets])
    for name, stage in stages.items():
        print(f"{name}: left alone, {why[name]}" if name in why else
              f"{name}: pulled and up to date for Snakemake (`snakemake -n -- "
              f"{' '.join(stage.targets)}` has nothing to do)")
    return 1 if why else 0


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
