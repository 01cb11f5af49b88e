"""What kind of wscat file an input is (a split, pseudo-labels, a checkpoint, a metrics file, a
params file...), read from its content; an input of the wrong kind is refused with the file to
pass instead, before its loader would call it damaged (wscat.cli, the steps, wscat.checkpoint)."""
from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from wscat import paths

# The arrays (.npz) and keys (.json) that make each kind of file wscat writes.
SPLIT_ARRAYS = frozenset({"dataset", "seed", "labelled", "unlabelled", "validation", "test"})
PSEUDO_ARRAYS = frozenset({"indices", "pseudo_labels"})
DATASET_ARRAYS = frozenset({"x_train", "y_train"})
# A kind, as a refusal names it: "X is <this>, not a ...".
KIND_NAMES = {
    "split": "a wscat split (`wscat split`)",
    "pseudo-labels": "a wscat pseudo-label file (`wscat pseudo-label --out`)",
    "dataset": "a dataset archive (x_train, y_train)",
    "checkpoint": "a PyTorch checkpoint (.pt)",
    "metrics": "a wscat metrics file (`wscat evaluate`)",
    "pseudo-report": "a pseudo-label report (`wscat pseudo-label --metrics`)",
    "validation": "a validation-scores file (`wscat validate`)",
    "export": "an exported model entry (`wscat export`)",
    "params": "a params file",
    "npy": "a single .npy array (np.save)",
    "training log": "a training log (`wscat train`'s train_log.csv)",
}
# What an input option expects: (the kind, as a refusal names it, the path to pass instead).
EXPECTED = {
    "split": ("split", paths.SPLIT),
    "pseudo-labels": ("pseudo-label file", paths.PSEUDO_LABELS),
    "checkpoint": ("checkpoint", paths.BEST),
    "metrics": ("metrics file", paths.METRICS),
    "params": ("params file", "params.yaml"),
    "dataset": ("dataset archive", "your .npz of x_train, y_train (and x_test, y_test)"),
    "training log": ("training log", paths.TRAIN_LOG),
    "table CSV": ("table CSV", paths.PAPER_TABLE_CSV),
}
NPZ_KINDS = {"split": SPLIT_ARRAYS, "pseudo-labels": PSEUDO_ARRAYS, "dataset": DATASET_ARRAYS}
NPY_MAGIC = b"\x93NUMPY"  # what np.save writes first: one array, where an .npz is a zip of them
# How to write a dataset archive: what a refusal of an .npy (or of an object array) advises.
DATASET_SAVE = ("np.savez(FILE, x_train=x, y_train=y), x a uint8 array N x H x W x C and y "
                "integer labels (x_test=, y_test= too for a test part)")
_LARGEST_TEXT = 64 << 20  # a JSON or YAML input larger than this is not looked into


class FileKind(NamedTuple):
    """What a file looks like: `kind` (a key of KIND_NAMES, "npy" for np.save's single array,
    "npz" for other arrays, or None: not recognised), `damaged` (a zip archive cut short: only
    its first entry's name is known) and `names` (an .npz's arrays)."""

    kind: str | None
    damaged: bool = False
    names: tuple[str, ...] = ()


def _zip_kind(names: list[str], damaged: bool) -> FileKind:
    """The kind of a zip archive from its entries' names (a damaged one: its first)."""
    if any(n.endswith("/data.pkl") or n.endswith("/version") for n in names):
        return FileKind("checkpoint", damaged)
    if not names or not all(n.endswith(".npy") for n in names):
        return FileKind(None, damaged)
    arrays = frozenset(n[:-len(".npy")] for n in names)
    for kind, needed in NPZ_KINDS.items():
        if needed <= arrays or damaged and arrays & needed:
            return FileKind(kind, damaged, tuple(sorted(arrays)))
    return FileKind("npz", damaged, tuple(sorted(arrays)))


def _first_entry(head: bytes) -> str | None:
    """The name of a zip archive's first entry, from its local header (a cut archive has one)."""
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        return None
    length = int.from_bytes(head[26:28], "little")
    return head[30:30 + length].decode("utf-8", "replace") or None


def _text_kind(path: Path, head: bytes, parse_yaml: bool) -> FileKind:
    """The kind of a JSON file (by its keys), a training log (by its header) or, with
    `parse_yaml`, a YAML params file."""
    if b"\0" in head or path.stat().st_size > _LARGEST_TEXT:
        return FileKind(None)
    if head.startswith(b"epoch,"):  # wscat.training.log.write_log's header: one row an epoch
        return FileKind("training log")
    try:
        if head.lstrip().startswith(b"{"):
            data = json.loads(path.read_text())
        elif parse_yaml and path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(path.read_text())
        else:
            return FileKind(None)
    except Exception:  # noqa: BLE001 - bad JSON, bad YAML, unreadable: none of our kinds
        return FileKind(None)
    if not isinstance(data, dict):
        return FileKind(None)
    if "datasets" in data and "methods" in data:
        return FileKind("params")
    if "state_dict" in data and "wscat" in data:
        return FileKind("export")
    if "labeler" in data and "per_class_accuracy" in data:
        return FileKind("pseudo-report")
    if data.get("set") == "validation":
        return FileKind("validation")
    if isinstance(data.get("accuracy"), dict) and "manifest" in data:
        return FileKind("metrics")
    return FileKind(None)


def file_kind(path: str | Path, *, parse_yaml: bool = True) -> FileKind:
    """Which kind of wscat file `path` is, from its content (a split, pseudo-labels, a dataset
    archive, a checkpoint, metrics, a params file, ...); FileKind(None) when it is none of them,
    cannot be read or is not a file. Reads a zip archive's directory, not its arrays."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return FileKind(None)
    if head.startswith(NPY_MAGIC):
        return FileKind("npy")
    if head[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as archive:
                return _zip_kind(archive.namelist(), damaged=False)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            first = _first_entry(head)
            return _zip_kind([first] if first else [], damaged=True)
    return _text_kind(path, head, parse_yaml)


def described(found: FileKind) -> str:
    """A recognised file as a refusal names it: "a wscat split (`wscat split`)", or an .npz of
    other arrays by its first arrays' names."""
    if found.kind == "npz":
        return f"an .npz of other arrays ({', '.join(found.names[:6])})"
    return KIND_NAMES[found.kind]


def other_kind(path: str | Path, own: str | None) -> str | None:
    """What `path` holds (`described`) when it is a wscat file of another kind than `own`, the
    one a step writes there: an output that would destroy it; None otherwise (no file, no wscat
    kind, or `own`)."""
    if not os.path.isfile(path):
        return None
    found = file_kind(path)
    return None if found.kind in (None, own) else described(found)


# A run folder (`wscat train --out-dir`): what marks one, and its DVCLive folder of curves.
CURVES_DIR = "dvclive"
RUN_MARKS = ("best.pt", "last.pt", "train_log.csv", "resume")


def run_of_curves(path: str | Path) -> Path | None:
    """The run folder whose DVCLive folder (dvclive/, the training's curves) `path` lies in,
    at any depth; None when it lies in none. A `dvclive` folder counts when the folder above it
    holds a run's files (best.pt, last.pt, train_log.csv or resume/), or is a run's resume/
    (where a retraining keeps its new curves until it ends)."""
    for folder in Path(os.path.abspath(path)).parents:
        if folder.name == CURVES_DIR and folder.is_dir() and (folder.parent.name == "resume" or any(
                (folder.parent / mark).exists() for mark in RUN_MARKS)):
            run = folder.parent  # named as the path was given: relative to here, or absolute
            return run if Path(path).is_absolute() else Path(os.path.relpath(run))
    return None


def curves_output(path: str | Path) -> str | None:
    """Why an output `path` inside a run's DVCLive folder is refused, in words ("is inside the
    training curves of RUN (...)"); None outside every one."""
    run = run_of_curves(path)
    if run is None:
        return None
    return (f"is inside the training curves of {run} (its {CURVES_DIR}/, `wscat train`'s "
            "DVCLive files)")


def check_json_output(path: str | Path, option: str, what: str) -> None:
    """Refuse (ValueError, one line) an output that gets JSON (`what`: "the metrics") under a
    name that does not end in .json: `--metrics c.png` would write JSON into an image's name.
    `option` is a flag ("--out") or an API argument ("out=")."""
    if Path(path).suffix.lower() == ".json":
        return
    given = f"{option}{path}" if option.endswith("=") else f"{option} {path}"
    raise ValueError(f"{given} must name a .json file ({what} is JSON); pass "
                     f"{Path(path).with_suffix('.json').name} or another .json path (nothing "
                     "was written)")


# What a file of each kind records of the run it belongs to, checked before a step rewrites it:
# a rerun rewrites its own file, never another run's (`wscat split --seed 2 --out .../seed1.npz`).
RUN_FIELDS = {"split": ("dataset", "seed"),
              "pseudo-labels": ("labeler", "seed", "dataset", "model"),
              "pseudo-report": ("labeler", "seed", "dataset"),
              "metrics": ("method", "seed", "dataset", "model", "part"),
              "validation": ("method", "seed", "dataset", "model")}
RUN_NOUNS = {"split": "the split", "pseudo-labels": "the pseudo-labels",
             "pseudo-report": "the pseudo-label report", "metrics": "the metrics",
             "validation": "the validation scores"}


def recorded_run(path: str | Path, kind: str) -> dict[str, Any]:
    """The run a file of `kind` (a key of RUN_FIELDS) records: those of its fields it holds (a
    file written before one was recorded lacks it; a metrics file without `part` is part all);
    {} when it cannot be read."""
    fields = RUN_FIELDS[kind]
    try:
        if kind in NPZ_KINDS:
            import numpy as np

            with np.load(path, allow_pickle=False) as data:
                return {key: data[key].item() for key in fields
                        if key in data.files and data[key].ndim == 0}
        data = json.loads(Path(path).read_text())
    except Exception:  # noqa: BLE001 - unreadable or damaged: its loader judges it
        return {}
    if not isinstance(data, dict):
        return {}
    record = {key: data[key] for key in fields if key in data}
    return {**record, "part": data.get("part", "all")} if kind == "metrics" else record


def _same(key: str, held: Any, wanted: Any) -> bool:
    """Whether a recorded field is the run's: parts core and all share a file (the core's
    numbers, all adding the extras), extra has its own."""
    if key == "part":
        return (held == "extra") == (wanted == "extra")
    return held == wanted


def _run_words(run: Mapping[str, Any], show_part: bool) -> str:
    """A run as a refusal names it: "wscat seed 1 on digits (cnn)", a split's "digits seed 1"."""
    who = run.get("method", run.get("labeler"))
    words = [str(who if who is not None else run.get("dataset", "")),
             f"seed {run['seed']}" if "seed" in run else "",
             f"on {run['dataset']}" if who is not None and "dataset" in run else "",
             f"({run['model']})" if "model" in run else ""]
    text = " ".join(word for word in words if word)
    return f"{text}, part {run['part']}" if show_part else text


def other_run(path: str | Path, kind: str | None, run: Mapping[str, Any]) -> str | None:
    """What `path`, a file of `kind`, holds when it records another run than `run` (compared on
    the fields both name): "the split of digits seed 2, not of digits seed 1"; None when it is
    `run`'s own (a rerun rewrites it), records none, cannot be read, or is no file."""
    if kind not in RUN_FIELDS or not os.path.isfile(path) or file_kind(path).kind != kind:
        return None
    held = recorded_run(path, kind)
    wanted = {key: value for key, value in run.items() if value is not None and key in held}
    if all(_same(key, held[key], value) for key, value in wanted.items()):
        return None
    show_part = "part" in wanted and not _same("part", held["part"], wanted["part"])
    held = {key: held[key] for key in wanted}
    return (f"{RUN_NOUNS[kind]} of {_run_words(held, show_part)}, not of "
            f"{_run_words(wanted, show_part)}")


def _hint(pattern: str, fields: Mapping[str, Any]) -> str:
    """`pattern` with the known `fields` filled in, the others as their names in capitals (the
    seed as N)."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        known = fields.get(name)
        return str(known) if known is not None else "N" if name == "seed" else name.upper()

    return re.sub(r"\{(\w+)\}", value, pattern)


def check_input_kind(path: str | Path | None, expected: str, option: str = "",
                     fields: Mapping[str, Any] | None = None) -> None:
    """Refuse (ValueError, one line) a file given to `option` that is another kind of wscat file
    than `expected` (a key of EXPECTED): a split passed as --checkpoint says so and which file to
    pass, instead of the loader's advice to delete a damaged file. A file of the expected kind, a
    damaged one and an unrecognised one pass: their loader judges them."""
    if path is None or not os.path.isfile(path):
        return
    found = file_kind(path, parse_yaml=expected != "params")
    if found.kind is None or found.kind == expected or found.damaged:
        return
    if found.kind == "npy" and expected == "dataset":
        raise ValueError(npy_line(path))
    if found.kind == "npz" and expected in NPZ_KINDS and set(found.names) & NPZ_KINDS[expected]:
        return  # the expected arrays, some of them: a damaged file of that kind
    what = described(found)
    name, pattern = EXPECTED[expected]
    where = f"pass {option} " if option else "pass "
    raise ValueError(f"{path} is {what}, not a {name}: {where}{_hint(pattern, fields or {})}")


def is_npy(path: str | Path) -> bool:
    """Whether `path` is a single array np.save wrote (an .npy, whatever its name)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(NPY_MAGIC)) == NPY_MAGIC
    except OSError:
        return False


def npy_line(path: str | Path) -> str:
    """The refusal of an .npy given as a dataset archive (np.load returns its one array, which
    has no x_train, y_train): what it is and how to save one."""
    return (f"{path} is {KIND_NAMES['npy']}, not an .npz archive of named arrays; save the "
            f"dataset with {DATASET_SAVE}")
