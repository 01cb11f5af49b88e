"""Eager or CUDA-graphed training steps for the CIFAR-10 proxy: the rule written before the
measurement (benchmarks/results/compile-choice-cifar10-proxy.md), applied to two
`benchmarks/throughput.py` results of the same call, one eager and one with
`--compile-mode reduce-overhead` (torch.compile with CUDA graphs).

A speed switch only: it changes the kernels a step runs, never what the step computes (the
tier's definition), and it reads no label at all, so it may be chosen on speed alone.

    python3 benchmarks/compile_choice.py --eager proxy-eager.json --graphs proxy-graphs.json

For each group of the proxy's methods, by the row that stands for it (the labelers, Mean
Teacher and Standard: `mt`; the adversarial trainings, TRADES, RST, WSCAT and WSCAT-sup:
`wscat`), the seconds one training run would take alone:

    T = warm-up seconds (tracing, code generation, graph recording) + epochs x steps x s/step

with the group's epochs from params.yaml. The group trains with CUDA graphs when T falls by at
least `--margin` (10%: beyond a rerun's scatter) and when every row of the group measured with
graphs ran (a step that graphs refuse keeps its group eager). Prints the choice and the
params.yaml keys it needs; `--apply` also writes the choice into the params file (the keys of a
graphed group in, those of an eager group out; its comments kept; the result validated before
it replaces the file). Exit 0, or 2 on unreadable input.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from wscat.config import ConfigError, load_params, training_for  # noqa: E402

DATASET = "cifar10-proxy"
# Each group's row, and the methods it decides for (the proxy experiment's six).
GROUPS = {"mt": ["mt", "standard"], "wscat": ["wscat", "wscat-sup", "trades", "rst"]}
STEPS_PER_EPOCH = 111  # 14,200 training images / batch 128 (params.yaml, training.cifar10-proxy)
MODE = "reduce-overhead"
ROW_KEYS = {"method", "seconds_per_step", "warmup_seconds", "compile", "compile_mode", "model",
            "batch", "precision", "channels_last", "deterministic"}
SAME = ("model", "batch", "precision", "channels_last", "deterministic")  # eager as graphs


def run_seconds(row: dict[str, Any], epochs: int, steps_per_epoch: int) -> float:
    """T of the module docstring: one run alone, compile and recording included."""
    return row["warmup_seconds"] + epochs * steps_per_epoch * row["seconds_per_step"]


def choose(eager: dict[str, Any], graphs: dict[str, Any], epochs: dict[str, int], *,
           steps_per_epoch: int = STEPS_PER_EPOCH, margin: float = 0.10
           ) -> dict[str, tuple[bool, str]]:
    """Per group row: (graphs chosen, why). `eager` and `graphs` are throughput.py's JSON."""
    rows_e = {r["method"]: r for r in eager["rows"]}
    rows_g = {r["method"]: r for r in graphs["rows"]}
    failed = " ".join(graphs.get("failed", []))
    chosen: dict[str, tuple[bool, str]] = {}
    for key, members in GROUPS.items():
        refused = [m for m in members if f" {m} failed" in f" {failed}"]
        if key not in rows_e or key not in rows_g:
            chosen[key] = (False, f"no {key} row in both results: eager")
            continue
        t_e = run_seconds(rows_e[key], epochs[key], steps_per_epoch)
        t_g = run_seconds(rows_g[key], epochs[key], steps_per_epoch)
        why = f"{key}: {t_e:.0f} s eager, {t_g:.0f} s with graphs ({100 * (t_g / t_e - 1):+.1f}%)"
        if refused:
            chosen[key] = (False, f"{why}; graphs failed for {', '.join(refused)}: eager")
        elif t_g <= (1 - margin) * t_e:
            chosen[key] = (True, f"{why}: graphs")
        else:
            chosen[key] = (False, f"{why}: under {100 * margin:.0f}% faster, eager")
    return chosen


def graphed_methods(chosen: dict[str, tuple[bool, str]]) -> list[str]:
    """The methods of every group the choice gives graphs."""
    return [method for key, (graphs, _) in chosen.items() if graphs for method in GROUPS[key]]


def params_keys(chosen: dict[str, tuple[bool, str]]) -> list[str]:
    """The params.yaml lines a choice needs (per method: compile and its mode)."""
    return [f"training.{DATASET}.per_method.{method}: compile: true, compile_mode: {MODE}"
            for method in graphed_methods(chosen)]


_ENTRY = re.compile(r"^      (?P<method>[\w-]+): \{(?P<knobs>[^{}]*)\}(?P<rest>\s*(#.*)?)$")


def with_choice(text: str, graphed: list[str], eager: list[str] = ()) -> str:
    """params.yaml's text with `compile: true, compile_mode: reduce-overhead` in the flow
    mapping of each `graphed` method under training.<DATASET>.per_method (a new entry where there
    is none), and both keys taken out of each `eager` method's (its entry dropped if nothing is
    left: an earlier choice undone); every other line as it was. ValueError where the file is
    not laid out so."""
    lines = text.splitlines(keepends=True)

    def find(pattern: str, start: int, stop: int) -> int:
        for i in range(start, stop):
            if re.match(pattern, lines[i]):
                return i
        raise ValueError(f"no line matching {pattern!r} where training.{DATASET}.per_method "
                         "should be; add the keys by hand")

    top = find(r"^training:\s*(#.*)?$", 0, len(lines))
    end = next((i for i in range(top + 1, len(lines)) if re.match(r"^\S", lines[i])), len(lines))
    block = find(rf"^  {re.escape(DATASET)}:\s*(#.*)?$", top + 1, end)
    end = next((i for i in range(block + 1, end) if re.match(r"^ {0,2}\S", lines[i])), end)
    per_method = find(r"^    per_method:\s*(#.*)?$", block + 1, end)
    last = per_method
    for i in range(per_method + 1, end):
        if not lines[i].startswith("      "):
            break
        last = i
        entry = _ENTRY.match(lines[i].rstrip("\n"))
        if entry is None:
            raise ValueError(f"line {i + 1}: per_method entries must be one-line mappings here; "
                             "add the keys by hand")
        if entry["method"] in (*graphed, *eager):
            knobs = [k.strip() for k in entry["knobs"].split(",") if k.strip()
                     and not k.strip().startswith(("compile:", "compile_mode:"))]
            if entry["method"] in graphed:
                knobs += ["compile: true", f"compile_mode: {MODE}"]
            lines[i] = (f"      {entry['method']}: {{{', '.join(knobs)}}}{entry['rest']}\n"
                        if knobs else "")
    present = {m["method"] for line in lines[per_method + 1:last + 1]
               if (m := _ENTRY.match(line.rstrip("\n")))}
    new = [f"      {m}: {{compile: true, compile_mode: {MODE}}}\n" for m in graphed
           if m not in present]
    return "".join(lines[:last + 1] + new + lines[last + 1:])


def apply(path: Path, graphed: list[str], eager: list[str] = ()) -> None:
    """Write the choice into the params file at `path`, validated first: the new text goes to a
    file beside it, loads as params, gives every `graphed` method graphs and leaves every `eager`
    one uncompiled; only then it replaces `path`."""
    tmp = path.with_name(f".{path.name}.compile-choice")
    try:
        tmp.write_text(with_choice(path.read_text(), graphed, eager))
        params = load_params(tmp)
        for method in graphed:
            schedule = training_for(params, DATASET, method)
            if not schedule["compile"] or schedule.get("compile_mode") != MODE:
                raise ValueError(f"{method} would not compile in mode {MODE}")
        for method in eager:
            if training_for(params, DATASET, method)["compile"]:
                raise ValueError(f"{method} would still compile (training.{DATASET}.compile is "
                                 f"true); set its per_method compile: false by hand")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eager", type=Path, required=True, help="throughput.py JSON, eager")
    parser.add_argument("--graphs", type=Path, required=True,
                        help="throughput.py JSON, --compile-mode reduce-overhead")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--margin", type=float, default=0.10)
    parser.add_argument("--apply", action="store_true",
                        help="also write the chosen keys into --params")
    args = parser.parse_args()
    if not 0 <= args.margin < 1:
        parser.error(f"--margin {args.margin:g}: give a share of the eager time in [0, 1), "
                     "e.g. 0.10")
    try:
        eager, graphs = (json.loads(p.read_text()) for p in (args.eager, args.graphs))
        for name, result in (("--eager", eager), ("--graphs", graphs)):
            if not isinstance(result, dict) or not isinstance(result.get("rows"), list) or any(
                    not isinstance(r, dict) or not ROW_KEYS <= r.keys() for r in result["rows"]):
                raise ValueError(f"{name}: not a throughput.py result with warm-up seconds "
                                 f"(each row needs {', '.join(sorted(ROW_KEYS))})")
        for name, result in (("--eager", eager), ("--graphs", graphs)):
            for row in result["rows"]:
                for key in ("seconds_per_step", "warmup_seconds"):
                    value = row[key]
                    least = "positive" if key == "seconds_per_step" else "non-negative"
                    if (isinstance(value, bool) or not isinstance(value, (int, float))
                            or not math.isfinite(value) or value < 0
                            or (least == "positive" and value == 0)):
                        raise ValueError(f"{name}: row {row['method']!r} has {key} {value!r}, "
                                         f"not a {least} number of seconds")
        settings = {tuple(r[k] for k in SAME) for r in eager["rows"] + graphs["rows"]}
        if len(settings) > 1:
            raise ValueError(f"the rows were measured with other settings ({', '.join(SAME)}: "
                             f"{sorted(settings)}); measure both in one call, as the page says")
        if any(r.get("compile") for r in eager["rows"]) or any(
                r.get("compile_mode") != MODE for r in graphs["rows"]):
            raise ValueError(f"--eager must be an eager run and --graphs one with --compile-mode "
                             f"{MODE}")
    except (OSError, ValueError) as error:
        print(f"compile_choice.py: {error}; give the two JSON files throughput.py wrote",
              file=sys.stderr)
        return 2
    try:
        params = load_params(args.params)
    except (OSError, ConfigError) as error:
        print(f"compile_choice.py: {error}", file=sys.stderr)
        return 2
    failed = graphs.get("failed", [])
    if not isinstance(failed, list) or not all(isinstance(line, str) for line in failed):
        print("compile_choice.py: --graphs: 'failed' is not a list of lines; give the JSON "
              "throughput.py wrote", file=sys.stderr)
        return 2
    epochs = {key: training_for(params, DATASET, key)["epochs"] for key in GROUPS}
    chosen = choose(eager, graphs, epochs, margin=args.margin)
    for key, (_, why) in chosen.items():
        print(f"{'+'.join(GROUPS[key])}: {why}")
    keys = params_keys(chosen)
    print("params.yaml needs: " + ("; ".join(keys) if keys else "nothing (all eager)"))
    graphed = graphed_methods(chosen)
    eager_methods = [m for members in GROUPS.values() for m in members if m not in graphed]
    if args.apply:
        before = args.params.read_text()
        try:
            apply(args.params, graphed, eager_methods)
        except (OSError, ValueError, ConfigError) as error:
            print(f"compile_choice.py: {args.params} left as it was: {error}", file=sys.stderr)
            return 2
        print(f"wrote the choice into {args.params}" if args.params.read_text() != before
              else f"{args.params} already holds the choice")
    return 0


if __name__ == "__main__":
    sys.exit(main())
