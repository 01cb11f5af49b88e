"""Two results folders' core metrics, model by model: how many per-image flags differ per attack,
and which accuracies moved. What "same answers" is checked with after a speed change:

    .venv/bin/python benchmarks/compare_metrics.py BEFORE/results AFTER/results [--dataset digits]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def compare(before: Path, after: Path, dataset: str) -> int:
    """Print one line per model; return the total number of per-image flags that differ."""
    total = 0
    for old in sorted(before.glob(f"metrics/{dataset}/*/*/seed*.json")):
        if old.name.endswith("-extra.json"):
            continue
        new = after / old.relative_to(before)
        if not new.is_file():
            sys.exit(f"{new} is missing: run the same target in {after.parent}")
        a, b = json.loads(old.read_text()), json.loads(new.read_text())
        flags_a, flags_b = a["per_image"]["correct"], b["per_image"]["correct"]
        differ = {k: sum(x != y for x, y in zip(flags_a[k], flags_b[k])) for k in flags_a}
        moved = {k: round(b["accuracy"][k] - v, 4) for k, v in a["accuracy"].items()
                 if b["accuracy"].get(k) != v}
        total += sum(differ.values())
        print(f"{old.parent.name} {old.stem}: flags differing {differ}; accuracies moved {moved}")
    print(f"total per-image flags differing: {total}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--dataset", default="digits")
    args = parser.parse_args()
    compare(args.before, args.after, args.dataset)


if __name__ == "__main__":
    main()
