"""Whether the code between two commits could move a CIFAR-10 proxy number: the tiny proxy at each.

A seed of Table 2 runs at the commit of its day (`benchmarks/cifar10_proxy.py`, one seed per
device call), so each seed's write-up says whether the code between two seeds' commits could move
a number. This runs the proxy's tiny CPU mode (the params, archive and npz of
tests/workflow/test_cifar10_proxy.py, all six methods) once at each commit, each from its own
`git worktree` at the same temporary path, with the same params file, npz, seed and --results
path, and compares the two results trees:

- the file lists;
- every JSON file (core and extra metrics, per-image flags included; pseudo-label reports; the
  summaries and run records) key by key;
- the split and pseudo-label npz arrays and every checkpoint's tensors, bit for bit;
- the training logs (train_log.csv) but their seconds; the tables (tables/, paper/) and every
  other file byte for byte, a table's differing lines printed;

everything but ALLOWED, the differences expected between any two runs (the commit, the code
digest, timings) or between two report codes (captions, a figure's drawing). Before comparing,
it checks that every step imported its worktree's `wscat`: the recorded code digests and git
revisions must be the worktree's.

    .venv/bin/python benchmarks/proxy_code_parity.py --old d242b3f --new HEAD --out report.md

The report (Markdown) goes to stdout and --out; progress to stderr. Exit 0: nothing outside
ALLOWED differs; 1: something does (a finding: the report names it); 2: bad input (an unknown
revision, not a git checkout, uncommitted proxy code where a revision is HEAD) or a run that could
not be compared, in one line, with nothing left behind. CUDA paths are not exercised: a CPU run.
"""
from __future__ import annotations

import csv
import difflib
import fnmatch
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from compare_metrics import Refused, _load, _pair  # noqa: E402

PROG = "proxy_code_parity"
PROXY = "benchmarks/cifar10_proxy.py"
# What the proxy's steps run: uncommitted changes here are not in HEAD's worktree.
PROXY_CODE = ("wscat", PROXY, "benchmarks/jobrunner.py", "benchmarks/mps.py",
              "benchmarks/proxy_table.py")
TIMING = "a wall time: differs between any two runs"
GIT = "the commit the step ran at (wscat.provenance.git_revision); checked to be its worktree's"
DIGEST = "the wscat/ code digest (wscat.provenance.code_digest); checked to be its worktree's"
FIGURE = ("a figure's drawing (layout, colours: wscat/report/, outside the code digest); the "
          "numbers it draws are in the files compared beside it")
# (file pattern, key-path pattern, why): differences expected between two commits' runs.
ALLOWED: tuple[tuple[str, str, str], ...] = (
    ("*", r"\.(manifest|meta)\.versions\.git", GIT),
    ("*.pt", r"\.meta\.code_sha256", DIGEST),
    ("*.pt", r"\.history\[\d+\]\.seconds", TIMING),
    ("*/train_log.csv", r"\[\d+\]\.seconds", TIMING),
    ("proxy/calls.json", r"\[\d+\]\.(wall_s|steps\..+\.seconds)", TIMING),
    ("proxy/seed*/run.json", r"\.(wall_s|calls\[\d+\]\.wall_s|steps\[\d+\]\.seconds)", TIMING),
    ("proxy/seed*/run.json", r"\.code_digest",
     DIGEST + " (recorded since 7506062: absent in older runs)"),
    ("proxy/code.txt", r"", DIGEST),
    ("*.png", r"", FIGURE),
    ("*.pdf", r"", FIGURE),
    ("*.tex", r"line \d+: \\caption\{.*",
     "a table's caption (prose; its numbers are in the rows and the CSVs): printed"),
)
# Files whose bytes hold timings or the order the steps ended in: listed, not compared.
UNCOMPARED = ("logs/*.log", "logs/*/*.log", "proxy/progress.log", "proxy/seed*/progress.log",
              "proxy/seed*/summary.md")
CATEGORIES = ("files", "JSON", "npz arrays", "checkpoints", "training logs", "tables", "other")
SHOWN = 110  # characters of a value shown in the report


@dataclass
class Difference:
    """One difference: the file (relative to the results), where in it, old and new, and the
    ALLOWED reason when it is expected ('' for a finding)."""
    path: str
    key: str
    old: str
    new: str
    allowed: str = ""


@dataclass
class Category:
    """A kind of file compared: how many pairs, their differences, and notes for the report."""
    name: str
    files: int = 0
    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Difference]:
        return [d for d in self.differences if not d.allowed]


# --- comparing ----------------------------------------------------------------------------------

def same_leaf(a: Any, b: Any) -> bool:
    """Leaves equal: tensors and arrays bit for bit (dtype and shape too), others by type and ==
    (a NaN equals a NaN: JSON writes them all alike)."""
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    return type(a) is type(b) and (a == b or (isinstance(a, float) and a != a and b != b))


def _bits(tensor: Any) -> bytes:
    """A tensor's bytes (on the CPU, contiguous), whatever its dtype."""
    import torch

    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def walk(a: Any, b: Any, where: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(key path, old, new) of every leaf that differs; a key on one side only is '<absent>' on
    the other, a list of another length one difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in dict.fromkeys([*a, *b]):
            if key not in a or key not in b:
                yield f"{where}.{key}", a.get(key, "<absent>"), b.get(key, "<absent>")
            else:
                yield from walk(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) \
            and type(a) is type(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from walk(x, y, f"{where}[{i}]")
    elif not same_leaf(a, b):
        yield where, a, b


def show(value: Any) -> str:
    """A value as the report shows it: tensors and arrays by dtype and shape, others as JSON."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        return f"tensor {str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"array {value.dtype}{list(value.shape)}"
    text = value if isinstance(value, str) and value == "<absent>" else json.dumps(
        value, default=str)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def show_new(old: Any, new: Any) -> str:
    """The new value, with what differs where that is short to say: how many elements of a
    tensor (by their bits), which images of a per-image flag string."""
    import numpy as np
    import torch

    text = show(new)
    if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor) \
            and old.shape == new.shape and old.dtype == new.dtype:
        size, count = old.element_size(), old.numel()
        a, b = (np.frombuffer(_bits(t), np.uint8).reshape(count, size) for t in (old, new))
        text += f", {int((a != b).any(axis=1).sum())} of {count} elements differ in their bits"
        if old.dtype.is_floating_point:
            gap = (old.detach().cpu().double() - new.detach().cpu().double()).abs().max()
            text += f" (max |diff| {float(gap):.3g})"
    elif isinstance(old, str) and isinstance(new, str) and len(old) == len(new) \
            and set(old + new) <= {"0", "1"}:
        text += f" (images {[i for i, (x, y) in enumerate(zip(old, new)) if x != y][:20]} differ)"
    return text


def allowed(path: str, key: str) -> str:
    """The ALLOWED reason for a difference at `key` of the file `path`; '' when none."""
    for pattern, keys, why in ALLOWED:
        if fnmatch.fnmatch(path, pattern) and re.fullmatch(keys, key):
            return why
    return ""


def differences(path: str, old: Any, new: Any) -> list[Difference]:
    """The differing leaves of two loaded files, each marked with its ALLOWED reason."""
    return [Difference(path, key, show(a), show_new(a, b), allowed(path, key))
            for key, a, b in walk(old, new)]


def load(path: Path) -> Any:
    """A file as the tree of values it holds: JSON, a checkpoint (weights_only), an npz's arrays,
    a training log's rows."""
    import numpy as np
    import torch

    if path.suffix == ".json":
        return json.loads(path.read_text())
    if path.suffix == ".pt":
        return torch.load(path, map_location="cpu", weights_only=True)
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}
    return list(csv.DictReader(io.StringIO(path.read_text())))


def compare_loaded(rel: str, old: Path, new: Path) -> list[Difference]:
    """Two files loaded (`load`) and walked; an unreadable one is a difference in itself."""
    sides = []
    for path in (old, new):
        try:
            sides.append(load(path))
        except Exception as error:  # noqa: BLE001 - any failure to read is reported as such
            sides.append(f"<unreadable: {type(error).__name__}: {error}>")
    return differences(rel, *sides)


def compare_lines(rel: str, old: Path, new: Path) -> list[Difference]:
    """Two text files byte for byte; where they differ, each differing line (line numbers of the
    old file), so that the report prints them."""
    a, b = old.read_bytes(), new.read_bytes()
    if a == b:
        return []
    try:
        old_lines, new_lines = a.decode().splitlines(), b.decode().splitlines()
    except UnicodeDecodeError:
        return [Difference(rel, "", f"{len(a)} bytes", f"{len(b)} bytes, other bytes")]
    found = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            x = old_lines[i1 + k] if i1 + k < i2 else "<absent>"
            y = new_lines[j1 + k] if j1 + k < j2 else "<absent>"
            key = f"line {i1 + k + 1}: {x.strip() if x != '<absent>' else y.strip()}"
            found.append(Difference(rel, f"line {i1 + k + 1}", *changed_span(x.strip(), y.strip()),
                                    allowed(rel, key) if _both_captions(x, y) else ""))
    return found or [Difference(rel, "", "bytes", "other bytes (line endings)")]


def _both_captions(old: str, new: str) -> bool:
    """Whether two lines are both a LaTeX caption (a changed caption, not a row nor a caption
    that appeared or went)."""
    return all(line.strip().startswith("\\caption{") for line in (old, new))


def changed_span(old: str, new: str, context: int = 30) -> tuple[str, str]:
    """Two lines cut to where they differ, with `context` characters either side ('...' where
    cut), so that a change inside a long caption shows."""
    start = len(os.path.commonprefix([old, new]))
    end = len(os.path.commonprefix([old[start:][::-1], new[start:][::-1]]))
    first = max(0, start - context)

    def cut(line: str) -> str:
        last = min(len(line), len(line) - end + context)
        return ("..." if first else "") + line[first:last] + ("..." if last < len(line) else "")

    return _cut(cut(old)), _cut(cut(new))


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def compare_bytes(rel: str, old: Path, new: Path) -> list[Difference]:
    """Two files byte for byte (curves, params, code.txt): one difference, ALLOWED or not."""
    a, b = old.read_bytes(), new.read_bytes()
    if a == b:
        return []
    try:
        shown = (_cut(a.decode().strip()), _cut(b.decode().strip()))
    except UnicodeDecodeError:
        shown = (f"{len(a)} bytes", f"{len(b)} bytes, other bytes")
    return [Difference(rel, "", *shown, allowed(rel, ""))]


def category(rel: str) -> str:
    """Which comparison a results file gets ('not compared': timings and the steps' order)."""
    if any(fnmatch.fnmatch(rel, pattern) for pattern in UNCOMPARED):
        return "not compared"
    if rel.endswith(".json"):
        return "JSON"
    if rel.endswith(".npz"):
        return "npz arrays"
    if rel.endswith(".pt"):
        return "checkpoints"
    if rel.endswith("/train_log.csv"):
        return "training logs"
    if rel.startswith(("tables/", "paper/")):
        return "tables"
    return "other"


COMPARE = {"JSON": compare_loaded, "npz arrays": compare_loaded, "checkpoints": compare_loaded,
           "training logs": compare_loaded, "tables": compare_lines, "other": compare_bytes}


def files_of(results: Path) -> set[str]:
    """Every file under a results tree, relative to it (posix), caches left out."""
    return {p.relative_to(results).as_posix() for p in results.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def compare_trees(old: Path, new: Path) -> dict[str, Category]:
    """Every category of CATEGORIES for two results trees, plus 'not compared'."""
    found = {name: Category(name) for name in (*CATEGORIES, "not compared")}
    a, b = files_of(old), files_of(new)
    listing = found["files"]
    listing.files = len(a | b)
    listing.differences += [Difference(rel, "", "present" if rel in a else "<absent>",
                                       "present" if rel in b else "<absent>")
                            for rel in sorted(a ^ b)]
    for rel in sorted(a & b):
        kind = found[category(rel)]
        kind.files += 1
        if kind.name == "not compared":
            if (old / rel).read_bytes() != (new / rel).read_bytes():
                kind.differences.append(Difference(rel, "", "", "", "not compared"))
            continue
        kind.differences += COMPARE[kind.name](rel, old / rel, new / rel)
    found["JSON"].notes.append(flag_note(old, new, sorted(a & b)))
    return found


def flag_note(old: Path, new: Path, common: list[str]) -> str:
    """The per-image flags of the core metrics files, as benchmarks/compare_metrics.py counts
    them: how many differ per attack (already among the JSON differences, key by key)."""
    core = [rel for rel in common if fnmatch.fnmatch(rel, "metrics/*/*/*/seed*.json")
            and not rel.endswith("-extra.json")]
    total, flags, lines = 0, 0, []
    for rel in core:
        try:
            differ, _ = _pair(old / rel, new / rel)
            flags += sum(map(len, _load(old / rel)[0].values()))
        except Refused as error:
            lines.append(f"{rel}: not comparable ({error})")
            continue
        total += sum(differ.values())
        if any(differ.values()):
            lines.append(f"{rel}: {differ}")
    return (f"per-image flags (compare_metrics) of {len(core)} core metrics files: {total} of "
            f"{flags} differ" + "".join(f"; {line}" for line in lines))


# --- the runs -----------------------------------------------------------------------------------

class Stop(Exception):
    """A refusal or a run that cannot be compared: its message is the one line to print."""


def git(*args: str, cwd: Path | None = None) -> str:
    """A git command's stdout (stripped), in ROOT by default; Stop with git's line on a failure."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd or ROOT, capture_output=True, text=True,
                              timeout=120, check=True)
    except subprocess.CalledProcessError as error:
        raise Stop(f"git {' '.join(args)}: {(error.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout.strip()


def check_checkout() -> None:
    """Stop unless ROOT is the top of a git checkout (the worktrees come from its history)."""
    inside = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT,
                            capture_output=True, text=True)
    if inside.returncode != 0 or Path(inside.stdout.strip()).resolve() != ROOT.resolve():
        raise Stop(f"{ROOT} is not a git checkout: run this script from a clone of the "
                   "repository")


def checked_commit(rev: str, flag: str) -> str:
    """The full commit a revision names; Stop when git does not know it or its tree has no
    proxy script."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options",
                           f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise Stop(f"{flag} {rev}: not a commit this checkout knows; pass a commit, tag or "
                   "branch (`git log --oneline`)")
    commit = done.stdout.strip()
    if subprocess.run(["git", "cat-file", "-e", f"{commit}:{PROXY}"], cwd=ROOT,
                      capture_output=True).returncode != 0:
        raise Stop(f"{flag} {rev}: its tree has no {PROXY}; pass a commit that has the proxy")
    return commit


def check_committed(commits: dict[str, str]) -> None:
    """Stop where a revision is HEAD and the working tree's proxy code (PROXY_CODE) has
    uncommitted changes: HEAD's worktree would run the committed code, not them."""
    head = git("rev-parse", "HEAD")
    dirty = git("diff", "--name-only", "HEAD", "--", *PROXY_CODE).splitlines()
    for flag, commit in commits.items():
        if commit == head and dirty:
            raise Stop(f"{flag} names HEAD, but the working tree's proxy code has uncommitted "
                       f"changes ({dirty[0]}; {len(dirty)} file(s)) that HEAD's worktree "
                       "would not run; commit or stash them first")


def tiny_inputs(work: Path) -> tuple[Path, Path]:
    """The tests' tiny proxy (tests/workflow/test_cifar10_proxy.py, all six methods): its params
    file and npz under `work`, made with this checkout's test helpers and params.yaml."""
    import yaml

    from tests.helpers.archives import write_cifar10
    from tests.workflow.test_cifar10_proxy import PROXY as TIER
    from tests.workflow.test_cifar10_proxy import _npz_of, tiny_proxy_params
    from wscat.config import load_params
    from wscat.data import load_dataset

    raw = work / "raw"
    raw.mkdir(parents=True)
    params = tiny_proxy_params(raw, write_cifar10(raw, train_per_class=30, test_per_class=4))
    base = work / "params.yaml"
    base.write_text(yaml.safe_dump(params, sort_keys=False))
    npz = _npz_of(load_dataset(TIER, load_params(base)["datasets"][TIER]), work / "p.npz")
    return base, npz


def step_env(tree: Path) -> dict[str, str]:
    """The environment of the proxy and its steps: the worktree first on the import path."""
    paths = [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}


def probe(tree: Path) -> str:
    """The worktree's code digest, as its own `wscat` computes it, from a process started as
    the steps are (`python -m wscat` in the worktree, with `step_env`); Stop when that process
    imports another `wscat`."""
    code = ("import wscat, wscat.provenance as p; "
            "print(wscat.__file__); print(p.code_digest())")
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=step_env(tree),
                          capture_output=True, text=True, timeout=120)
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        raise Stop(f"importing wscat in the worktree {tree} failed: "
                   f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    if not Path(lines[0]).resolve().is_relative_to(tree.resolve()):
        raise Stop(f"a step in the worktree {tree} would import {lines[0]}, not the worktree's "
                   "wscat; unset PYTHONPATH entries that hold a wscat/")
    return lines[1]


def run_proxy(tree: Path, base: Path, npz: Path, seed: int, results: Path, out: Path,
              log: Path, label: str = "") -> float:
    """The worktree's proxy script on the tiny inputs (the tests' schedule: 2 steps at once,
    1 thread each, evaluations beside the trainings); its seconds. Stop when it fails. Its own
    session, so that an interrupt here ends it and its steps (SIGTERM to the group)."""
    argv = [sys.executable, str(tree / PROXY), "--params", str(base), "--npz", str(npz),
            "--seed", str(seed), "--jobs", "2", "--threads", "1", "--evaluations", "beside",
            "--results", str(results), "--out", str(out)]
    started = time.monotonic()
    with open(log, "w") as handle:
        proc = subprocess.Popen(argv, cwd=tree, env=step_env(tree), stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait()
        finally:
            if proc.poll() is None:
                stop_group(proc)
    if code != 0:
        tail = (log.read_text().strip().splitlines() or ["no output"])[-1]
        raise Stop(f"the proxy at {label or tree} failed (exit {code}): {tail}")
    return time.monotonic() - started


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to a process group (the proxy writes its summary and kills its steps), then
    SIGKILL after 30 s."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def check_imports(results: Path, digest: str, revision: str) -> None:
    """Stop unless every recorded code digest (code.txt, each checkpoint's code_sha256) is
    `digest` and every recorded git revision (manifests, checkpoints) is `revision`: each step
    imported its worktree's wscat."""
    recorded = (results / "proxy" / "code.txt").read_text().strip()
    if recorded != digest:
        raise Stop(f"{results}/proxy/code.txt names code {recorded}, the worktree's is {digest}: "
                   "the proxy did not import the worktree's wscat")
    for path in sorted([*results.rglob("*.pt"), *results.rglob("*.json")]):
        data = load(path)
        where = data.get("meta" if path.suffix == ".pt" else "manifest") \
            if isinstance(data, dict) else None
        if not isinstance(where, dict):  # calls.json, a summary: no step's record
            continue
        code, git_rev = where.get("code_sha256"), (where.get("versions") or {}).get("git")
        if code not in (None, digest) or git_rev not in (None, revision):
            raise Stop(f"{path} names code {code or '-'} at {git_rev or '-'}, the worktree's is "
                       f"{digest} at {revision}: a step did not import the worktree's wscat")


@dataclass
class Run:
    """One commit's run: its revision as git names it, code digest, seconds, results tree."""
    commit: str
    revision: str
    digest: str
    seconds: float
    results: Path


def run_at(commit: str, work: Path, base: Path, npz: Path, seed: int, side: str) -> Run:
    """The tiny proxy at `commit`: its worktree at work/tree (the same path for both commits),
    results at work/results, both moved aside to work/<side>-results once checked."""
    tree, results, out = work / "tree", work / "results", work / "out"
    git("worktree", "add", "--detach", "--quiet", str(tree), commit)
    try:
        revision = git("rev-parse", "--short", "HEAD", cwd=tree / "wscat")
        digest = probe(tree)
        say(f"{side}: {revision} (code {digest}): running the tiny proxy")
        seconds = run_proxy(tree, base, npz, seed, results, out, work / f"{side}-run.log",
                            f"--{side} {revision}")
        check_imports(results, digest, revision)
    finally:
        remove_worktree(tree)
    aside = work / f"{side}-results"
    results.rename(aside)
    shutil.rmtree(out, ignore_errors=True)
    say(f"{side}: done in {seconds:.0f} s")
    return Run(commit, revision, digest, seconds, aside)


def remove_worktree(tree: Path) -> None:
    """The worktree and git's record of it, whatever state it is in."""
    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                   capture_output=True)
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


# --- the report ---------------------------------------------------------------------------------

def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo) and the cores this process may use."""
    name = "unknown CPU"
    try:
        name = next(line.split(":", 1)[1].strip() for line in
                    Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name}, {len(os.sched_getaffinity(0))} cores"


def render(found: dict[str, Category], header: list[str], limit: int = 0) -> str:
    """The Markdown report: `header` lines, then per category 'identical' or its findings (the
    first `limit` of them; 0: all), the expected (ALLOWED) differences counted by reason."""
    findings = sum(len(kind.findings) for kind in found.values() if kind.name != "not compared")
    verdict = f"{findings} difference(s)" if findings else "No difference"
    lines = ["# Proxy code parity", "", *header, "", f"**{verdict} outside the allow-list**", ""]
    for name in CATEGORIES:
        kind = found[name]
        expected = [d for d in kind.differences if d.allowed]
        state = "identical" if not kind.differences else (
            "identical but the allowed differences" if not kind.findings
            else f"{len(kind.findings)} difference(s)")
        lines.append(f"- **{name}** ({kind.files} files): {state}")
        shown = kind.findings[:limit or None]
        lines += [f"  - {d.path} `{d.key}`: {d.old} -> {d.new}" for d in shown]
        if len(shown) < len(kind.findings):
            rest = kind.findings[len(shown):]
            lines.append(f"  - ... {len(rest)} more in {len({d.path for d in rest})} file(s) "
                         "(--limit 0 lists them all)")
        for why in dict.fromkeys(d.allowed for d in expected):
            these = [d for d in expected if d.allowed == why]
            lines.append(f"  - allowed, {len(these)} in {len({d.path for d in these})} file(s): "
                         f"{why}")
            if why.endswith("printed"):
                lines += [f"    - {d.path} {d.key}: {d.old} -> {d.new}" for d in these]
        lines += [f"  - {note}" for note in kind.notes]
    skipped = found["not compared"]
    lines.append(f"- **not compared** ({skipped.files} files: the steps' logs, progress.log, "
                 f"summary.md, which hold timings and the order steps ended in; "
                 f"{len(skipped.differences)} differ byte-wise; their presence is in the file "
                 "lists)")
    return "\n".join(lines) + "\n"


def header_lines(old: Run, new: Run, seed: int, given: tuple[str, str] = ("", "")) -> list[str]:
    """The report's head: the commits (as `given`, where that is not their short hash), their
    code digests, what changed between them, the machine, the seconds of each run."""
    changed = git("diff", "--shortstat", old.commit, new.commit, "--", "wscat") or "no change"
    params = "same" if not git("diff", "--shortstat", old.commit, new.commit, "--",
                               "params.yaml") else "differs (this run uses the same tiny params)"
    names = [f"{run.revision}{f' ({name})' if name and name != run.revision else ''}"
             for run, name in zip((old, new), given)]
    return [f"- old: {names[0]}, wscat/ code digest {old.digest}, {old.seconds:.0f} s",
            f"- new: {names[1]}, wscat/ code digest {new.digest}, {new.seconds:.0f} s",
            f"- wscat/ between them: {changed}; params.yaml: {params}",
            f"- the tiny CPU proxy of tests/workflow/test_cifar10_proxy.py (six methods), seed "
            f"{seed}, 2 steps at once, 1 thread each; CUDA paths not exercised",
            f"- machine: {cpu_model()}"]


# --- the command --------------------------------------------------------------------------------

def parse(argv: list[str] | None = None) -> Any:
    from wscat.cli import Parser, seed_value

    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the earlier commit (a seed's)")
    parser.add_argument("--new", default="HEAD", help="the later commit (default HEAD)")
    parser.add_argument("--seed", type=seed_value, default=1, help="the tiny runs' seed")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument("--limit", type=int, default=30,
                        help="differences listed per category (0: all)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="a new folder to keep both results trees in (old/, new/)")
    return parser.parse_args(argv)


def checked(args: Any) -> dict[str, str]:
    """The two commits, after every argument is checked (Stop: one line, nothing made)."""
    from wscat.io import OutputError, check_writable

    if args.limit < 0:
        raise Stop(f"--limit {args.limit}: give a whole number of at least 0 (0: all)")
    if args.keep is not None and args.keep.exists():
        raise Stop(f"--keep {args.keep}: exists already; pass a new folder")
    try:
        check_writable(args.out)
        check_writable(args.keep, folders=True)
    except OutputError as error:
        raise Stop(error.strerror or str(error)) from None
    check_checkout()
    commits = {"--old": checked_commit(args.old, "--old"),
               "--new": checked_commit(args.new, "--new")}
    check_committed(commits)
    return commits


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        commits = checked(args)
    except Stop as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="proxy-parity-"))
    try:
        base, npz = tiny_inputs(work)
        old = run_at(commits["--old"], work, base, npz, args.seed, "old")
        new = run_at(commits["--new"], work, base, npz, args.seed, "new")
        found = compare_trees(old.results, new.results)
        report = render(found, header_lines(old, new, args.seed, (args.old, args.new)),
                        args.limit)
        if args.keep is not None:
            args.keep.mkdir(parents=True)
            old.results.rename(args.keep / "old")
            new.results.rename(args.keep / "new")
    except Stop as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the worktree and the runs' files are removed",
              file=sys.stderr)
        return 130
    finally:
        remove_worktree(work / "tree")
        shutil.rmtree(work, ignore_errors=True)
    print(report, end="")
    if args.out is not None:
        from wscat.io import write_text

        write_text(args.out, report)
    return 1 if any(kind.findings for name, kind in found.items() if name != "not compared") \
        else 0


def _terminated(*_: Any) -> None:
    """SIGTERM ends the script as Ctrl-C does: the proxy's group stopped, the worktree and the
    runs' files removed (the `finally` clauses), exit 143."""
    say("SIGTERM: stopping; the worktree and the runs' files are removed")
    sys.exit(143)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminated)
    sys.exit(main())
