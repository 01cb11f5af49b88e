"""Table 2 of the CIFAR-10 proxy over the seeds whose runs are in, with no GPU.

Each GPU run of benchmarks/cifar10_proxy.py returns OUT/seed{s}.tar.gz, whose seed{s}/ is
committed as benchmarks/results/cifar10-proxy/seed{s}/ (its README): the run's metrics (per-image flags,
manifests), pseudo-label reports and train logs at their places under results/, its params,
summary.md and run.json. This script reads those folders and renders, through the same functions
as `wscat table`, `wscat paper-table` and `wscat paper-compare` (so it follows their statistics):
mean ± std over the seeds, the paired comparison with WSCAT, and the companion beside the paper's
CIFAR-10 numbers (wscat/report/reported.csv). It names the seeds present and the ones missing
(on its page, and at the end of each table's caption while some are missing); it calls the table
the three-seed table only when every seed of the tier is in.

    python benchmarks/proxy_table.py            # benchmarks/results/cifar10-proxy/ -> .../table/
    python benchmarks/proxy_table.py --seeds-dir DIR --out DIR [--require-all]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wscat.config import load_params, method_for, validate_params, validation_for  # noqa: E402
from wscat.errors import describe, exit_code  # noqa: E402
from wscat.io import write_text  # noqa: E402
from wscat.report import paper  # noqa: E402

EXPERIMENT = TIER = "cifar10-proxy"
SEEDS_DIR = ROOT / "benchmarks" / "results" / EXPERIMENT
# The md5 of the proxy's images, ../shared/datasets/cifar10-proxy.npz (DEVELOPERS.md copies it
# to data/proxy/): what every committed seed ran on (run.json's npz_md5, from seed 2 on).
PROXY_NPZ_MD5 = "17dd8790b0856bd7f129454a280ef3d5"
SEED_DIR = re.compile(r"seed(\d+)")
NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def tarball(seed: int | None) -> str:
    """The tarball a run of `seed` returned (OUT/seed{s}.tar.gz where the seed is not known)."""
    return f"OUT/seed{'{s}' if seed is None else seed}.tar.gz"


def read_json(path: Path, what: str, keys: tuple[str, ...] = (), seed: int | None = None
              ) -> dict[str, Any]:
    """A seed folder's JSON file as an object with `keys`; anything else is one line naming it
    and the tarball of `seed` to unpack again."""
    again = f"unpack the run's {tarball(seed)} again"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable {what} ({type(error).__name__}: "
                         f"{str(error).splitlines()[0]}); {again}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a {what} that is not a JSON object (a "
                         f"{type(data).__name__}); {again}")
    missing = [key for key in keys if key not in data]
    if missing:
        raise ValueError(f"{path}: a {what} without {', '.join(missing)}; {again}")
    return data


def read_params(folder: Path, seed: int) -> dict[str, Any]:
    """A seed folder's params.yaml, validated (wscat.config.load_params); a file that is not YAML
    text (binary, garbled, a key given twice) is one line saying to unpack its tarball again."""
    from wscat.config import ConfigError, read_yaml
    from wscat.errors import is_text_file
    from wscat.strict_yaml import DuplicateKeyError

    path = folder / "params.yaml"
    again = f"unpack the run's {tarball(seed)} again"
    if not is_text_file(path):
        raise ValueError(f"{path} is not a YAML text file (binary, or not UTF-8); {again}")
    try:
        read_yaml(path)
    except ConfigError as error:  # not YAML, or a key given twice (whose "keep one" is ours)
        said = str(error)
        if isinstance(error.__cause__, DuplicateKeyError):
            said = said.rsplit("; ", 1)[0]
        raise ValueError(f"{said}; {again}") from None
    return load_params(path)


def seed_dirs(seeds_dir: Path) -> dict[int, Path]:
    """seed -> its folder (seed{s}/ under `seeds_dir`), in seed order."""
    if not seeds_dir.is_dir():
        what = "a file, not a folder" if seeds_dir.exists() else "no such folder"
        raise ValueError(f"{seeds_dir}: {what}; pass --seeds-dir, the folder that holds "
                         "the runs' seed{s}/ folders")
    found: dict[int, Path] = {}
    for path in sorted(seeds_dir.iterdir()):
        if not path.is_dir() or not (m := SEED_DIR.fullmatch(path.name)):
            continue
        seed = int(m.group(1))
        if path.name != f"seed{seed}":  # seed01 beside seed1 would drop one of them unsaid
            raise ValueError(f"{path}: name it seed{seed}/ (as the run's tarball does); the "
                             "table reads one folder a seed")
        found[seed] = path
    if not found:
        raise ValueError(f"{seeds_dir}: no seed{{s}}/ folder; unpack a run's "
                         "OUT/seed{s}.tar.gz there (DEVELOPERS.md, 'The CIFAR-10 proxy on a lent "
                         "GPU')")
    return dict(sorted(found.items()))


def comparable(params: dict[str, Any]) -> dict[str, Any]:
    """What the proxy's steps read from validated params, but the seed: the experiment, the
    split, each method's training (wscat.workflow.train_params) and its labelers', the core and
    extra evaluation settings, and the paper tier. A change elsewhere in params.yaml (another
    tier's) leaves two seeds' runs comparable."""
    from wscat.workflow import evaluate_params, split_params, train_params, upstream_labelers

    spec = {k: v for k, v in params["experiments"][EXPERIMENT].items() if k != "seeds"}
    dataset, model = spec["dataset"], spec["model"]
    trained = list(spec["methods"])  # and every labeler up their chains
    for method in trained:
        trained += [labeler for labeler in upstream_labelers(method_for(params, method, dataset))
                    .values() if labeler not in trained]
    return {f"experiments.{EXPERIMENT}": spec,
            "split": json.loads(split_params(params, dataset)),
            **{f"training of {method}": json.loads(train_params(params, dataset, model, method))
               for method in trained},
            "evaluation": json.loads(evaluate_params(params, dataset, extra=True)),
            f"paper.{TIER}": (params.get("paper") or {}).get(TIER)}


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    """The first key path at which two params differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(dict.fromkeys([*a, *b])):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}".lstrip("."))
    return where or "(the whole file)"


def seed_difference(before: dict[str, Any], now: dict[str, Any]) -> str | None:
    """Where two runs' validated params differ in what the proxy's steps read (`comparable`),
    as a key path, or None: runs that may share a table. The npz's path is part of it: every
    run's training fingerprint (wscat.workflow.training_fingerprint) includes it."""
    a, b = comparable(before), comparable(now)
    return _first_difference(a, b) if a != b else None


def path_note(key: str, committed: dict[str, Any] | None = None) -> str:
    """What a difference in the npz's path means: the same images, another fingerprint. Before
    a run (`committed`: a committed seed's params), the path that seed's npz had, which `--npz`
    can give from any checkout."""
    if not key.endswith(".dataset.path"):
        return ""
    if committed is None:
        return (" (the npz lay elsewhere on the device: the training fingerprints the table "
                "checks include its path, so run every seed from a checkout at the same path)")
    path = committed["datasets"][EXPERIMENT]["path"]
    return (f" (the npz's path is part of every training fingerprint: the committed seed's was "
            f"{path}; pass --npz {path} with the same file there)")


def read_seeds(dirs: dict[int, Path]) -> dict[str, Any]:
    """The params the seeds were run with (checked equal but for the seed in what the proxy's
    steps read: `seed_difference`), with experiments.cifar10-proxy.seeds = the seeds present."""
    first: tuple[int, dict[str, Any]] | None = None
    for seed, folder in dirs.items():
        if not (folder / "params.yaml").is_file():
            deeper = (folder / folder.name / "params.yaml").is_file()
            raise ValueError(f"{folder / 'params.yaml'}: missing, so {folder} is not a whole "
                             "seed folder" + ("; the tarball was unpacked one folder too deep"
                                              if deeper else "")
                             + f"; unpack the run's OUT/{folder.name}.tar.gz into the folder "
                             f"that holds {folder.name}/: tar xzf {folder.name}.tar.gz -C "
                             f"{folder.parent}/")
        params = read_params(folder, seed)
        if EXPERIMENT not in params["experiments"]:
            raise ValueError(f"{folder / 'params.yaml'}: no experiment '{EXPERIMENT}'; not a "
                             "CIFAR-10 proxy run's folder")
        if params["experiments"][EXPERIMENT]["seeds"] != [seed]:
            raise ValueError(f"{folder / 'params.yaml'}: a run of seeds "
                             f"{params['experiments'][EXPERIMENT]['seeds']}, not of seed {seed} "
                             f"as the folder's name says; put each run's folder under its seed")
        if first is None:
            first = (seed, params)
        elif (key := seed_difference(first[1], params)) is not None:
            raise ValueError(f"seed {seed} was run with other params than seed {first[0]} "
                             f"({key}){path_note(key)}; its numbers do not add up with theirs: "
                             "rerun it with the same params")
    params = json.loads(json.dumps(first[1]))
    params["experiments"][EXPERIMENT]["seeds"] = list(dirs)
    return validate_params(params)


def metrics_files(params: dict[str, Any], dirs: dict[int, Path]) -> list[Path]:
    """Every run's metrics and extra metrics, each in its seed's folder; one missing (a run whose
    evaluation did not finish) is an error."""
    spec = params["experiments"][EXPERIMENT]
    files = []
    for seed, folder in dirs.items():
        for method in spec["methods"]:
            for path in map(Path, paper.Run(spec["dataset"], spec["model"], method, seed)
                            .evaluated(str(folder))):
                if not path.is_file():
                    raise ValueError(f"{path}: missing, so seed {seed} is not complete (its run "
                                     "did not finish every evaluation); rerun that seed "
                                     "(DEVELOPERS.md) or move its folder out")
                if read_json(path, "metrics file", ("seed",), seed)["seed"] != seed:
                    raise ValueError(f"{path}: holds another seed's metrics than seed {seed}; "
                                     f"unpack the run's {tarball(seed)} unchanged")
                files.append(path)
    return files


def check_records(dirs: dict[int, Path]) -> None:
    """Refuse, for the table of every seed, a seed whose run.json is missing or says its call
    did not finish (a killed call's tarball unpacked over the finishing call's): its page would
    tell a stale story of the run."""
    for seed, folder in dirs.items():
        record_path = folder / "run.json"
        if not record_path.is_file():
            raise ValueError(f"{record_path}: missing; unpack the run's OUT/seed{seed}.tar.gz "
                             "unchanged")
        record = read_json(record_path, "run record", ("complete",), seed)
        if record["complete"] is not True:
            raise ValueError(f"{record_path}: the record of a call that did not finish the seed; "
                             f"unpack the OUT/seed{seed}.tar.gz of the call that did (its "
                             "summary.md says every step done)")


def recorded_images(dirs: dict[int, Path]) -> dict[int, str]:
    """The npz md5 each seed's run.json records, for the seeds whose record has one (seed 1 ran
    before it was recorded)."""
    records = {seed: folder / "run.json" for seed, folder in dirs.items()}
    return {seed: md5 for seed, record in records.items() if record.is_file()
            and (md5 := read_json(record, "run record", (), seed).get("npz_md5"))}


def check_images(dirs: dict[int, Path], reference: str | None) -> None:
    """Refuse seeds that ran on other images: the npz md5 each run.json records must be
    `reference` (the repository's seeds: PROXY_NPZ_MD5) or, without one, the same in every seed
    that records it. A seed run before it was recorded (seed 1) is compared by its params' npz
    path (`read_seeds`) only."""
    images = recorded_images(dirs)
    if reference is None and len(set(images.values())) > 1:
        shown = ", ".join(f"seed {seed} {md5}" for seed, md5 in images.items())
        raise ValueError(f"the seeds ran on other images (npz md5: {shown}); their numbers do not "
                         "add up: rerun the odd one on the images of the others")
    odd = {seed: md5 for seed, md5 in images.items() if reference and md5 != reference}
    if odd:
        shown = ", ".join(f"seed {seed} {md5}" for seed, md5 in odd.items())
        raise ValueError(f"{shown}: not the proxy's images (npz md5 {reference}); rerun "
                         f"{'them' if len(odd) > 1 else 'it'} with --npz "
                         "data/proxy/cifar10-proxy.npz, a copy of "
                         "../shared/datasets/cifar10-proxy.npz (DEVELOPERS.md)")


def _runs_line(seed: int, folder: Path, commits: list[str]) -> str:
    """One line on how a seed's run went (run.json): machine, wall time, steps, calls, and the
    code `commits` its metrics were measured at (`code_commits`)."""
    record_path = folder / "run.json"
    if not record_path.is_file():
        return f"- seed {seed}: no run.json (how the run went is not recorded)"
    record = read_json(record_path, "run record", ("steps",), seed)
    again = f"unpack the run's {tarball(seed)} again"
    steps = record["steps"]
    if not isinstance(steps, list) or not all(isinstance(step, dict) and {"status", "kept"}
                                              <= step.keys() for step in steps):
        raise ValueError(f"{record_path}: its steps lack a status or kept field; {again}")
    wall = record.get("wall_s", 0)
    if not _seconds(wall):
        raise ValueError(f"{record_path}: wall_s is {wall!r}, not a number of seconds; {again}")
    called = record.get("calls") or []
    if not isinstance(called, list) or not all(isinstance(c, dict) and _number(c.get("call"))
                                              for c in called) \
            or not all(_number(step.get("call")) for step in steps
                       if step.get("call") is not None):  # None: a step no call did
        raise ValueError(f"{record_path}: its calls are not a list of numbered calls (or a "
                         f"step's call is no number); {again}")
    for c in called:  # a call's seconds are added up and printed like wall_s
        if not _seconds(c.get("wall_s")):
            raise ValueError(f"{record_path}: call {c['call']}'s wall_s is "
                             f"{c.get('wall_s')!r}, not a number of seconds; {again}")
    done = sum(step["status"] == "done" for step in steps)
    walls = {c["call"]: c["wall_s"] for c in called}
    used = sorted({step["call"] for step in steps if step.get("call") in walls})
    if used:  # the calls that did the steps (run.json's `calls`), not the last one alone
        wall = sum(walls[c] for c in used)
    calls = ("NOT COMPLETE: the record of a call that did not finish (its metrics are all "
             "here; unpack the finishing call's tarball)" if record.get("complete") is False
             else "in one call" if record.get("one_call")
             else f"in {len(used)} calls (" + " + ".join(f"{walls[c]:.0f} s" for c in used)
             + ")" if len(used) > 1
             else f"{sum(step['kept'] for step in steps)} steps kept from an earlier call")
    # Kept steps of an unrecorded call: wall_s is the last call's, not the seed's.
    seconds = (f"{wall:.0f} s" if record.get("one_call") or len(used) > 1
               or not any(step["kept"] for step in steps)
               else f"{wall:.0f} s for the rest (the earlier call's not recorded)")
    digest = record.get("code_digest")
    return (f"- seed {seed}: {done} of {len(steps)} steps done, {calls}, "
            f"{seconds} on {record.get('machine', 'an unrecorded machine')}, code at "
            f"{', '.join(commits) or 'an unrecorded commit'}"
            + (f" (wscat/ digest {digest})" if isinstance(digest, str) and digest else ""))


def _number(value: object) -> bool:
    """Whether a run record's call number is an integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(value: object) -> bool:
    """Whether a run record's wall time is a number of seconds: finite, not negative, not a
    bool (what json reads as NaN, Infinity, text or true is none)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and 0 <= value < math.inf)


def _percent(value: object) -> bool:
    """Whether a pseudo-label report's accuracy is a percentage: a number (not a bool) from 0 to
    100 (NaN, text, null or true is none)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= 100


def code_commits(folder: Path) -> list[str]:
    """The git commits a seed's metrics files were measured with (their manifests' versions;
    two where two calls ran at different commits), sorted by name."""
    seed = int(m.group(1)) if (m := SEED_DIR.fullmatch(folder.name)) else None
    found = {((read_json(path, "metrics file", (), seed).get("manifest") or {})
              .get("versions") or {})
             .get("git") for path in sorted(folder.glob("metrics/**/*.json"))}
    return sorted(commit for commit in found if isinstance(commit, str) and commit)


def _labelers(params: dict[str, Any], dirs: dict[int, Path]) -> str:
    """The pseudo-labels' accuracy on the unlabelled images, per labeler and seed."""
    from wscat.report.names import display_name

    spec = params["experiments"][EXPERIMENT]
    lines = ["| labeler | " + " | ".join(f"seed {s}" for s in dirs) + " |",
             "|---|" + "---:|" * len(dirs)]
    for labeler in dict.fromkeys(method_for(params, m, spec["dataset"]).get("labeler")
                                 for m in spec["methods"]):
        if not labeler:
            continue
        cells = []
        for seed, folder in dirs.items():
            report = Path(f"{folder}/pseudo/{spec['dataset']}/{spec['model']}/{labeler}/"
                          f"seed{seed}.json")
            if not report.is_file():
                cells.append("-")
                continue
            accuracy = read_json(report, "pseudo-label report", ("accuracy",),
                                 seed)["accuracy"]
            if not _percent(accuracy):
                raise ValueError(f"{report}: accuracy {json.dumps(accuracy)} is not a percentage "
                                 f"(0 to 100); unpack the run's {tarball(seed)} again")
            cells.append(f"{accuracy:.2f}")
        lines.append(f"| {display_name(labeler)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _companion_markdown(path: Path) -> str:
    """The companion's CSV as Markdown: ours (mean ± std), the paper's, the difference, and
    which Mean stands beside the paper's (the companion's note), under the noise it must clear."""
    import csv

    from wscat.report.compare import noise_note

    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    lines = ["| method | metric | ours | paper | ours − paper | note |",
             "|---|---|---:|---:|---:|---|"]
    for row in rows:
        ours = "-" if not row["ours"] else f"{float(row['ours']):.2f}" + (
            f" ± {float(row['ours_std']):.2f}" if row["ours_std"] else "")
        difference = f"{float(row['difference']):+.2f}" if row["difference"] else "-"
        lines.append(f"| {row['method']} | {row['metric']} | {ours} | "
                     f"{float(row['paper']):.2f} | {difference} | {row.get('note') or ''} |")
    noise = noise_note(float(row["ours_std"]) if row["ours_std"] else None for row in rows)
    return f"*{noise}*\n\n" + "\n".join(lines) + "\n"


def render(seeds_dir: Path, out: Path, expected: list[int], require_all: bool = False
           ) -> list[Path]:
    """Write the table's files to `out` (all rendered first, so a failure writes nothing);
    returns the files written."""
    from wscat.steps import paper as paper_step
    from wscat.steps import table as table_step

    dirs = seed_dirs(seeds_dir)
    unexpected = [s for s in dirs if s not in expected]
    if unexpected:
        raise ValueError(f"{seeds_dir} holds seed{'s' if len(unexpected) > 1 else ''} "
                         f"{', '.join(map(str, unexpected))}, not among the expected seeds "
                         f"{', '.join(map(str, expected))}; add "
                         f"{'them' if len(unexpected) > 1 else 'it'} to --expect, or move "
                         f"{'those folders' if len(unexpected) > 1 else 'that folder'} out")
    missing = [s for s in expected if s not in dirs]
    for seed in missing:  # unpacked one folder too high: beside the seeds' folder
        stray = seeds_dir.resolve().parent / f"seed{seed}"
        if (stray / "params.yaml").is_file():
            raise ValueError(f"{stray}: seed {seed}'s folder, one folder above {seeds_dir}; "
                             f"move it into {seeds_dir}/ (tar xzf seed{seed}.tar.gz -C "
                             f"{seeds_dir}/)")
    if require_all and missing:
        many = len(missing) > 1
        raise ValueError(f"seed{'s' if many else ''} {', '.join(map(str, missing))} of "
                         f"{', '.join(map(str, expected))} {'are' if many else 'is'} missing in "
                         f"{seeds_dir}; run {'them' if many else 'it'} (DEVELOPERS.md) before the "
                         f"{len(expected)}-seed table")
    params = read_seeds(dirs)
    files = metrics_files(params, dirs)
    check_images(dirs, PROXY_NPZ_MD5 if seeds_dir.resolve() == SEEDS_DIR.resolve() else None)
    if require_all or not missing:  # the table calls itself the N-seed table: every call done
        check_records(dirs)
    label = performance_label(params)
    with tempfile.TemporaryDirectory(prefix="proxy-table-") as tmp:
        stage, root = Path(tmp) / "out", Path(tmp) / "results"
        for path in files:  # the seeds' folders as one results/ for `wscat paper-table`
            folder = next(f for f in dirs.values() if path.is_relative_to(f))
            link = root / path.relative_to(folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path.resolve())
        table = stage / EXPERIMENT
        compared = table_step.run(params, experiment=EXPERIMENT, metrics=files, tex=table.with_suffix(".tex"),
                       csv=table.with_suffix(".csv"), summary=table.with_suffix(".json"),
                       md=table.with_suffix(".md"),
                       paired_csv=stage / f"{EXPERIMENT}-paired.csv",
                       paired_tex=stage / f"{EXPERIMENT}-paired.tex")
        paper_step.run_table(params, tier=TIER, label=label, results=str(root),
                             tex=stage / f"{label}.tex", csv=stage / f"{label}.csv")
        paper_step.run_compare(label=label, table_csv=stage / f"{label}.csv",
                               paper_cells=paper.paper_cells(params, TIER, label),
                               tex=stage / f"{label}-vs-paper.tex",
                               csv=stage / f"{label}-vs-paper.csv")
        if missing:  # each lifted table says, in its caption, that it is not the whole tier
            for name in (f"{EXPERIMENT}.md", f"{EXPERIMENT}.tex", f"{EXPERIMENT}-paired.tex",
                         f"{label}.tex", f"{label}-vs-paper.tex"):
                mark_partial(stage / name, partial_note(list(dirs), expected))
        figure = paired_figure(*compared, stage / f"{label}-vs-paper.csv", stage / FIGURE,
                               params["experiments"][EXPERIMENT]["methods"])
        validation_curves(params, dirs, stage / CURVES)
        robustness_curves(params, dirs, stage / ROBUSTNESS)
        write_text(stage / "table.md", page(params, dirs, expected, stage, label, figure))
        for path in stage.iterdir():
            if path.suffix in (".md", ".csv", ".tex", ".json") and NAN.search(path.read_text()):
                raise ValueError(f"{path.name} would hold a NaN (a std over {len(dirs)} seed(s) "
                                 "is undefined where the table's statistics need two); render "
                                 "once another seed is in")
        out.mkdir(parents=True, exist_ok=True)
        written = []
        files = sorted(stage.iterdir())
        partials = [out / f".{path.name}.partial" for path in files]
        try:  # every file copied onto out's file system first, then the renames
            for path, partial in zip(files, partials):
                shutil.copyfile(path, partial)
                partial.chmod(0o644)
            for path, partial in zip(files, partials):
                target = out / path.name
                try:
                    os.replace(partial, target)
                except OSError as error:  # named by the file it would have replaced
                    raise OSError(error.errno, error.strerror, str(target)) from error
                written.append(target)
        finally:  # a failed copy or rename, or Ctrl-C, leaves no .partial file behind
            for partial in partials:
                partial.unlink(missing_ok=True)
        if not figure:  # none to draw now (one seed): an older render's picture would be stale
            for stale in out.glob(f"{FIGURE}.*"):
                stale.unlink()
    return written


def performance_label(params: dict[str, Any]) -> str:
    """The label of the paper tier's performance table for the experiment's dataset; a tier
    without one is a one-line refusal (the seeds' params.yaml is not a proxy run's)."""
    dataset = params["experiments"][EXPERIMENT]["dataset"]
    for entry in paper.tier_spec(params, TIER)["datasets"]:
        if entry["dataset"] == dataset:
            return entry["performance"]["label"]
    raise ValueError(f"params.yaml of the seeds: the paper tier '{TIER}' has no table of dataset "
                     f"'{dataset}', so there is no Table 2 to render; unpack the runs' "
                     "OUT/seed{s}.tar.gz unchanged")


def partial_note(present: list[int], expected: list[int]) -> str:
    """The sentence a table's caption ends with while seeds of the tier are missing."""
    missing = [s for s in expected if s not in present]
    return (f"This table holds {len(present)} of the tier's {len(expected)} seeds; "
            f"seed{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} still "
            "missing.")


CAPTION = {".tex": re.compile(r"^(\s*\\caption\{.*)\}$", re.M),  # its one \caption{...} line
           ".md": re.compile(r"\A(\*.*)\*$", re.M)}  # the first line, *the table's caption*


def mark_partial(path: Path, note: str) -> None:
    """End the caption of the table at `path` (.tex: its \\caption line; .md: its first line)
    with `note`; one caption or a one-line error (a template that changed its form)."""
    text = path.read_text()
    found = list(CAPTION[path.suffix].finditer(text))
    if len(found) != 1:
        raise ValueError(f"{path.name}: {len(found)} captions where one was expected; "
                         "benchmarks/proxy_table.py cannot mark it as holding part of the seeds")
    where = found[0].end(1)
    path.write_text(f"{text[:where]} {note}{text[where:]}")


FIGURE = "paired-vs-wscat"  # the paired comparison's picture: .png, .pdf, .csv
CURVES = "validation-curves"  # every run's validation accuracy per epoch: .png, .pdf, .csv
ROBUSTNESS = "robustness-curves"  # PGD accuracy against eps and steps: .png, .pdf, .csv


def _run_files(params: dict[str, Any], dirs: dict[int, Path],
               which: Callable[[paper.Run, str], str]) -> dict[tuple[str, int], Path]:
    """(method, seed) -> one file of each run of the seeds in (`which`: a paper.Run path, e.g.
    Run.train_log), or a one-line error for a missing one: that seed is not complete."""
    spec = params["experiments"][EXPERIMENT]
    files = {}
    for method in spec["methods"]:
        for seed, folder in dirs.items():
            path = Path(which(paper.Run(spec["dataset"], spec["model"], method, seed),
                              str(folder)))
            if not path.is_file():
                raise ValueError(f"{path}: missing, so seed {seed} is not complete; unpack the "
                                 f"run's OUT/seed{seed}.tar.gz again")
            files[(method, seed)] = path
    return files


def validation_curves(params: dict[str, Any], dirs: dict[int, Path], prefix: Path) -> None:
    """Every run's validation accuracy per epoch, over the seeds in, each run's checkpoint
    epoch marked (wscat/report/validation_figure.py), from the seeds' train_log.csv files."""
    from wscat.report import validation_figure as figure
    from wscat.report.names import display_name

    spec = params["experiments"][EXPERIMENT]
    logs = _run_files(params, dirs, paper.Run.train_log)
    selection = {m: method_for(params, m, spec["dataset"])["selection"] for m in spec["methods"]}
    figure.validation_figure(figure.rows(logs, selection, {m: display_name(m) for m in
                                                           spec["methods"]}), prefix,
                             validation_for(params, spec["dataset"]))


def robustness_curves(params: dict[str, Any], dirs: dict[int, Path], prefix: Path) -> None:
    """Every model's PGD accuracy against eps and against the steps, mean over the seeds in and
    each seed (wscat/report/robustness_figure.py), from the gradient-masking checks' numbers in
    the seeds' extra metrics files."""
    from wscat.report import robustness_figure as figure
    from wscat.report.names import display_name

    spec = params["experiments"][EXPERIMENT]
    extras = _run_files(params, dirs, paper.Run.extra)
    name = paper.tier_spec(params, TIER)["datasets"][0]["name"]
    figure.robustness_figure(
        figure.rows(extras, {m: display_name(m) for m in spec["methods"]}, name), prefix,
        {name: (params["datasets"][spec["dataset"]]["eps"], params["evaluation"]["pgd_steps"])})


def paired_figure(mean: pd.DataFrame, by_attack: pd.DataFrame | None, companion: Path,
                  prefix: Path, methods: list[str]) -> bool:
    """The paired differences from WSCAT (`wscat table`'s, in Mean and on each attack alone),
    with their intervals, beside the paper's differences read from the companion (its AA is the
    paper's own AutoAttack, its Mean over that); False (nothing drawn) where there is no
    interval to draw."""
    import csv

    from wscat.report import paired
    from wscat.report import paired_figure as figure
    from wscat.report.names import display_name

    if by_attack is None or not any(paired.has_interval(row) for row in
                                    mean.to_dict("records")):
        return False
    with open(companion, newline="") as handle:
        reported = {(row["method"], row["metric"].replace("Mean-paper", "Mean")):
                    float(row["paper"]) for row in csv.DictReader(handle)}
    reference = display_name(paired.REFERENCE)
    gaps = {(method, metric): round(value - reported[(reference, metric)], 2)
            for (method, metric), value in reported.items()
            if metric in figure.PANELS and (reference, metric) in reported}
    figure.paired_figure(figure.rows(by_attack, mean, gaps, {m: display_name(m) for m in methods}),
                         prefix, reference=reference,
                         paper_note="; the paper's AA is its own AutoAttack, its Mean over that.")
    return True


def _listed(values: list[float]) -> str:
    """1, 2 and 3: the numbers of a grid in words."""
    words = [f"{v:g}" for v in values]
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else words[0]


def _commits_note(by_seed: dict[int, list[str]]) -> list[str]:
    """Where the seeds ran at more than one commit: what the table can and cannot vouch for. The
    commits in the seeds' order (seed 1's first: the order they ran in, so the `git diff` goes
    from the older to the newer)."""
    commits = list(dict.fromkeys(c for seed in sorted(by_seed) for c in by_seed[seed]))
    if len(commits) < 2:
        return []
    clean = [c for c in commits if c.isalnum() and c != "unknown"]  # revisions git knows
    diffs = " and ".join(f"`git diff --stat {a} {b} -- wscat/`" for a, b in zip(clean, clean[1:]))
    said = [f"**The seeds were measured at {len(commits)} code commits ({', '.join(commits)}).** "
            "Their params match in everything the steps read (the training and evaluation "
            "fingerprints are checked), but the code may differ"
            + (f": {diffs} {'shows' if len(clean) == 2 else 'show'} what differs between "
               "them." if diffs else ".")]
    if any(c.endswith("+modified") for c in commits):
        said.append("A commit marked `+modified` names the checkout's commit while the package's "
                    "files differed from it (uncommitted edits, or the files of another commit): "
                    "the seed's page (`benchmarks/results/cifar10-proxy-*-seed*.md`) names the "
                    "code it ran, and run.json's `code_digest`, where recorded, is "
                    "`wscat.provenance.code_digest()` of it.")
    return [" ".join(said), ""]


def page(params: dict[str, Any], dirs: dict[int, Path], expected: list[int], stage: Path,
         label: str, figure: bool = False) -> str:
    """table.md: which seeds are in, how each ran, Table 2 with the paired comparison (and its
    picture), the companion beside the paper's CIFAR-10 numbers, the labelers' pseudo-labels."""
    present = list(dirs)
    missing = [s for s in expected if s not in dirs]
    seeds = ", ".join(map(str, present))
    count = {2: "two", 3: "three", 4: "four", 5: "five"}.get(len(expected), str(len(expected)))
    if not missing:
        status = (f"All {count} seeds of the tier are in ({seeds}): this is the {count}-seed "
                  "table.")
    else:
        status = (f"Seed{'s' if len(present) > 1 else ''} in: {seeds} ({len(present)} of "
                  f"{len(expected)}). Still missing: seed{'s' if len(missing) > 1 else ''} "
                  f"{', '.join(map(str, missing))}. This is not the {count}-seed table.")
    model = params["experiments"][EXPERIMENT]["model"]
    model = paper.tier_spec(params, TIER)["model_names"].get(model, model)
    commits = {seed: code_commits(folder) for seed, folder in dirs.items()}  # read once
    checks, pgd_steps = params["evaluation"]["checks"], params["evaluation"]["pgd_steps"]
    companion = stage / f"{label}-vs-paper.csv"
    return "\n".join([
        f"# Table 2 on the CIFAR-10 proxy ({model}), seed{'s' if len(present) > 1 else ''} "
        f"{seeds}", "",
        "Rendered by `benchmarks/proxy_table.py` from "
        + ", ".join(f"`seed{s}/`" for s in present) + " (no GPU).", "", f"**{status}**", "",
        *[_runs_line(seed, folder, commits[seed]) for seed, folder in dirs.items()], "",
        *_commits_note(commits),
        "## Accuracy (%), mean ± std over the seeds, and the paired comparison with WSCAT", "",
        (stage / f"{EXPERIMENT}.md").read_text(),
        *([f"![The paired differences from WSCAT, per attack and in Mean, beside the paper's]"
           f"({FIGURE}.png)", "",
           f"`{FIGURE}.png` (and `.pdf`, `.csv`): each method's difference from WSCAT per "
           "attack and in Mean, the 95% paired interval as the bar (filled point: it excludes "
           "0), and the paper's own difference as x (its AA is its AutoAttack variant, its "
           "Mean over that).", ""] if figure else []),
        "## Validation accuracy per epoch", "",
        "![Every run's validation accuracy per epoch, its checkpoint's epoch marked]"
        f"({CURVES}.png)",
        "",
        f"`{CURVES}.png` (and `.pdf`, `.csv`): each run's accuracy on the labelled validation "
        "split per epoch (what checkpoint selection reads; CW-20 for the adversarially trained "
        "runs, natural for the others), one line per method and seed; o marks the epoch whose "
        "weights the run reports (Mean Teacher's: the last, as the release labels with).", "",
        "## Robust accuracy against the budget and the steps", "",
        f"![Every model's PGD accuracy against eps and against the steps]({ROBUSTNESS}.png)", "",
        f"`{ROBUSTNESS}.png` (and `.pdf`, `.csv`): PGD accuracy on the test images at "
        f"{_listed(checks['eps_factors'])} times eps (PGD-{pgd_steps}, its step scaled with "
        f"eps) and at {_listed(checks['pgd_steps'])} steps (at eps), per method the mean over "
        "the seeds (a line with a hollow marker of its own, each smaller than the one before: "
        "equal curves stay visible) and each seed (dots): the numbers of the gradient-masking "
        "checks in "
        "each run's extra metrics file. A sound evaluation falls towards 0 as eps grows and "
        "levels off with the steps; a masked gradient keeps accuracy up at large eps, and a "
        "curve still falling at the most steps says PGD has not converged.", "",
        "## Beside the paper's CIFAR-10 numbers (Table 2, WRN-28-10, 100 epochs, 46,000 "
        "unlabelled images)", "", _companion_markdown(companion),
        "## The labelers' pseudo-labels: accuracy (%) on the unlabelled training images", "",
        _labelers(params, dirs)])


def seed_folder(out: Path, seeds_dir: Path) -> Path | None:
    """The seed folder (seed{s}/ under `seeds_dir`, there or not yet) that `out` is or lies in,
    or `seeds_dir` itself where `out` is it; None for any other folder."""
    out, seeds_dir = out.resolve(), seeds_dir.resolve()
    if out == seeds_dir:
        return seeds_dir
    if seeds_dir not in out.parents:
        return None
    first = out.relative_to(seeds_dir).parts[0]
    return seeds_dir / first if SEED_DIR.fullmatch(first) else None


def main(argv: list[str] | None = None) -> int:
    from wscat.cli import Parser, seed_value, sigterm_as_interrupt

    parser = Parser(prog="proxy_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds-dir", type=Path, default=SEEDS_DIR,
                        help="the folder of the runs' seed{s}/ folders")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the table's files go (default: SEEDS_DIR/table)")
    parser.add_argument("--expect", type=seed_value, nargs="+", default=None,
                        help="the tier's seeds (default: params.yaml's experiment seeds)")
    parser.add_argument("--require-all", action="store_true",
                        help="fail unless every expected seed is in")
    try:  # a usage error: one line (wscat.cli.Parser), exit 2; --help: 0
        args = _checked(parser, parser.parse_args(argv))
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0
    try:
        expected = args.expect or load_params(ROOT / "params.yaml")["experiments"][EXPERIMENT][
            "seeds"]
        with sigterm_as_interrupt():  # `timeout`'s SIGTERM cleans up as Ctrl-C does
            written = render(args.seeds_dir, args.out or args.seeds_dir / "table", expected,
                             args.require_all)
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - one line for bad input
        line = describe(error)
        if line is None:
            raise
        print(f"proxy_table: error: {line}", file=sys.stderr)
        return exit_code(error)
    print(f"wrote {len(written)} files: {', '.join(str(path) for path in written)}")
    return 0


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """The arguments, or a one-line usage error for an --out or --expect that cannot be right."""
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file; pass a folder for the table's files")
    if args.expect and len(set(args.expect)) < len(args.expect):
        twice = sorted({s for s in args.expect if args.expect.count(s) > 1})
        parser.error(f"--expect lists seed {', '.join(map(str, twice))} more than once; "
                     "name each seed once")
    if args.out is not None and (folder := seed_folder(args.out, args.seeds_dir)) is not None:
        where = ("the seeds' folder itself" if folder == args.seeds_dir.resolve() else
                 f"in {folder}, the place of a run's seed folder")
        parser.error(f"--out {args.out} is {where}, which the table reads; pass another folder "
                     f"(the default is {args.seeds_dir / 'table'})")
    return args


if __name__ == "__main__":
    sys.exit(main())
