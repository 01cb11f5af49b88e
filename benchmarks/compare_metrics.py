"""Two results folders' core metrics, model by model: how many per-image flags differ per attack,
and which accuracies moved. What "same answers" is checked with after a speed change:

    .venv/bin/python benchmarks/compare_metrics.py BEFORE/results AFTER/results [--dataset digits]

Exit 0 when every per-image flag is the same, 1 when some differ (as `diff`). Bad input (no model
compared, a metrics file on one side only, an unreadable file, flags of different lengths or
attacks, an accuracy that is no finite percentage: NaN, infinity, true): one line on stderr,
exit 2, nothing printed to stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wscat.metrics import is_percent  # noqa: E402


class Refused(ValueError):
    """Input that cannot be compared; its message is the one line to print."""


def _metrics(results: Path, dataset: str) -> set[Path]:
    """The core metrics files under `results`, relative to it (the extras' files left out)."""
    return {p.relative_to(results) for p in results.glob(f"metrics/{dataset}/*/*/seed*.json")
            if not p.name.endswith("-extra.json")}


def _load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A metrics file's per-image flags (as `wscat evaluate` writes them, a string of 0 and 1;
    a list of booleans or 0/1 is turned into one) and accuracies, each attack -> value."""
    try:
        data = json.loads(path.read_text())
        flags, accuracy = data["per_image"]["correct"], data["accuracy"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise Refused(f"{path}: not readable JSON ({err}): rerun `wscat evaluate` for it") from None
    except (KeyError, TypeError) as err:
        raise Refused(f"{path}: no per_image.correct and accuracy ({type(err).__name__} {err}): "
                      "not a core metrics file of `wscat evaluate`") from None
    if not (isinstance(flags, dict) and isinstance(accuracy, dict)
            and all(isinstance(f, (str, list)) for f in flags.values())):
        raise Refused(f"{path}: per_image.correct is not attack -> flags or accuracy not attack "
                      "-> number: not a core metrics file of `wscat evaluate`")
    for attack, value in accuracy.items():  # NaN, infinity or true were compared as numbers
        if not is_percent(value):
            raise Refused(f"{path}: accuracy {attack} is {json.dumps(value)}, not a finite "
                          "percentage in [0, 100]: rerun `wscat evaluate` for it")
    text = {k: f if isinstance(f, str) else "".join("1" if x == 1 else "0" if x == 0 else "?"
                                                     for x in f) for k, f in flags.items()}
    for attack, f in text.items():  # one form, so a list and its string compare equal
        if set(f) - {"0", "1"}:
            raise Refused(f"{path}: per_image.correct {attack} holds a flag other than 0 and 1: "
                          "not a core metrics file of `wscat evaluate`")
    return text, accuracy


def _pair(old: Path, new: Path) -> tuple[dict[str, int], dict[str, float]]:
    """Flags differing per attack and accuracies moved between two files of one model."""
    (flags_a, acc_a), (flags_b, acc_b) = _load(old), _load(new)
    for what, a, b in (("flag", flags_a, flags_b), ("accuracy", acc_a, acc_b)):
        if set(a) != set(b):
            raise Refused(f"{new}: {what} attacks {sorted(b)}, {old} has {sorted(a)}: "
                          "compare runs of the same evaluation")
    for k in flags_a:
        if len(flags_a[k]) != len(flags_b[k]):
            raise Refused(f"{new}: {len(flags_b[k])} per-image flags of {k}, {old} has "
                          f"{len(flags_a[k])}: compare runs on the same images")
    differ = {k: sum(x != y for x, y in zip(flags_a[k], flags_b[k])) for k in flags_a}
    moved = {k: round(acc_b[k] - v, 4) for k, v in acc_a.items() if acc_b[k] != v}
    return differ, moved


def compare(before: Path, after: Path, dataset: str) -> int:
    """Print one line per model; return the total number of per-image flags that differ.

    Raises Refused, before printing anything, when no model is compared, a model's metrics file
    is on one side only, or a pair cannot be compared."""
    old, new = _metrics(before, dataset), _metrics(after, dataset)
    if not old and not new:
        raise Refused(f"no metrics file {before}/metrics/{dataset}/*/*/seed*.json nor in {after}: "
                      "pass two results/ folders and the --dataset they evaluated")
    for side, other, only in ((before, after, old - new), (after, before, new - old)):
        if only:
            first = sorted(only)[0]
            raise Refused(f"{side / first} has no counterpart {other / first} "
                          f"({len(only)} file(s) only in {side}): run the same target in both")
    lines, total = [], 0
    for rel in sorted(old):
        differ, moved = _pair(before / rel, after / rel)
        total += sum(differ.values())
        lines.append(f"{rel.parent.parent.name}/{rel.parent.name} {rel.stem}: flags differing "
                     f"{differ}; "
                     f"accuracies moved {moved}")
    print("\n".join([*lines, f"total per-image flags differing: {total}"]))
    return total


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and compare: exit 1 if flags differ; bad input, one line and exit 2."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--dataset", default="digits")
    args = parser.parse_args(argv)
    try:
        differing = compare(args.before, args.after, args.dataset)
    except Refused as err:
        print(f"compare_metrics: error: {err}", file=sys.stderr)
        sys.exit(2)
    if differing:
        sys.exit(1)


if __name__ == "__main__":
    main()
