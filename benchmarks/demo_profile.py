"""Where a Snakemake run's time went: CPU and wall seconds per rule and per method (Snakemake's
`benchmark:` files), and per attack inside the evaluations (the `timing:` lines of their logs).

    make demo && .venv/bin/python benchmarks/demo_profile.py [--results results] [--out FILE.md]

Run it after `make demo` (or any target) on a quiet machine; docs/digits-tier.md's demo profile is its
output. Process start-up is the part of a job's time outside the step itself: the job's wall time
minus the step's own (`evaluated (...) in`, training's epoch seconds are not summed here).
"""
from __future__ import annotations

import argparse
import csv
import platform
import re
from collections import defaultdict
from pathlib import Path

TIMING = re.compile(r"^timing: (\S+) ([0-9.]+) s$")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def rule_times(results: Path) -> dict[str, dict[str, float]]:
    """rule -> {jobs, wall seconds, cpu seconds} from results/benchmarks/{rule}/**.tsv."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in sorted((results / "benchmarks").glob("*/**/*.tsv")):
        rule = path.relative_to(results / "benchmarks").parts[0]
        with open(path, newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                totals[rule]["jobs"] += 1
                totals[rule]["wall_s"] += float(row["s"])
                totals[rule]["cpu_s"] += float(row.get("cpu_time") or 0)
    return totals


def method_times(results: Path, rule: str) -> dict[str, float]:
    """method -> wall seconds of one rule's jobs (the third path part: dataset/model/method)."""
    totals: dict[str, float] = defaultdict(float)
    for path in (results / "benchmarks" / rule).glob("*/*/*/*.tsv"):
        with open(path, newline="") as handle:
            totals[path.parts[-2]] += sum(float(r["s"]) for r in csv.DictReader(handle, delimiter="\t"))
    return dict(totals)


def attack_times(results: Path) -> dict[str, float]:
    """attack -> wall seconds summed over every evaluation log."""
    totals: dict[str, float] = defaultdict(float)
    for folder in ("evaluate", "evaluate_extra"):
        for log in (results / "logs" / folder).glob("**/*.log"):
            for line in log.read_text(errors="replace").splitlines():
                match = TIMING.match(line.strip())
                if match:
                    totals[match[1]] += float(match[2])
    return dict(totals)


def report(results: Path) -> str:
    rules, lines = rule_times(results), []
    lines += [f"Machine: {_cpu_model()}; results folder `{results}`.", "",
              "| rule | jobs | wall s (sum over jobs) | CPU s |", "|---|---:|---:|---:|"]
    for rule, t in sorted(rules.items(), key=lambda kv: -kv[1]["wall_s"]):
        lines.append(f"| {rule} | {int(t['jobs'])} | {t['wall_s']:.1f} | {t['cpu_s']:.1f} |")
    total = sum(t["wall_s"] for t in rules.values())
    lines += [f"| all | {int(sum(t['jobs'] for t in rules.values()))} | {total:.1f} | "
              f"{sum(t['cpu_s'] for t in rules.values()):.1f} |", ""]
    for rule in ("train", "evaluate"):
        per_method = method_times(results, rule)
        if per_method:
            lines += [f"| {rule}: method | wall s |", "|---|---:|"]
            lines += [f"| {m} | {s:.1f} |" for m, s in sorted(per_method.items(), key=lambda kv: -kv[1])]
            lines.append("")
    attacks = attack_times(results)
    if attacks:
        lines += ["| attack (inside evaluate) | wall s |", "|---|---:|"]
        # `AA/<attack>` and `AA-paper/<attack>` lines split an AutoAttack column into its four
        # attacks: shown under their column, and not counted twice in the rest.
        whole = {a: s for a, s in attacks.items() if "/" not in a}
        for a, s in sorted(whole.items(), key=lambda kv: -kv[1]):
            lines.append(f"| {a} | {s:.1f} |")
            parts = {p.split("/", 1)[1]: t for p, t in attacks.items() if p.startswith(a + "/")}
            lines += [f"| &nbsp;&nbsp;{a}: {p} | {t:.1f} |"
                      for p, t in sorted(parts.items(), key=lambda kv: -kv[1])]
        evaluate_wall = rules.get("evaluate", {}).get("wall_s", 0.0) + rules.get(
            "evaluate_extra", {}).get("wall_s", 0.0)
        lines += [f"| start-up, data, model loading (the rest of the evaluation jobs) | "
                  f"{evaluate_wall - sum(whole.values()):.1f} |", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    args = parser.parse_args()
    text = report(args.results)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
