"""Which kernels decide a CPU run's bits: the demo's TRADES run (digits, the demo's CNN, seed 1,
`--epochs` epochs) trained once per kernel setting, twice each, every training a fresh `wscat
train` process on the same split, and the digest of the weights it selects (best.pt's, as a
metrics file records them: `weights_sha256`).

    .venv/bin/python benchmarks/cpu_numerics.py [--epochs 3] [--settings NAME ...] \\
        [--work DIR] [--out PAGE.md] [--compare OTHER.json]

torch picks a CPU's kernels by its instruction set: ATen's own loops (AVX-512, AVX2 or none:
`ATEN_CPU_CAPABILITY`), oneDNN's convolutions (`ONEDNN_MAX_CPU_ISA`, or oneDNN off: ATen's own
convolution) and MKL's matrix products (`MKL_CBWR`). Another kernel sums in another order, rounds
otherwise, and a training carries the difference on. A setting whose weights equal the default's
changed no kernel the run uses; the two trainings of one setting must agree (same machine, same
bits). `--out` writes the page and its JSON beside it (`PAGE.json`); `--compare` reads another
machine's JSON and says, setting by setting, whether its weights were these.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from demo_profile import _cpu_model  # noqa: E402 - a sibling script

# name -> (environment, oneDNN on). The last: every kernel family held to a choice that does not
# depend on the CPU's instruction set beyond AVX2 (MKL's COMPATIBLE branch, SSE2 without
# rcpps/rsqrtps: oneMKL's developer guide says its AVX2 branch falls back to the CPU's own
# dispatch on a non-Intel CPU).
SETTINGS: dict[str, tuple[dict[str, str], bool]] = {
    "default": ({}, True),
    "ATen AVX2": ({"ATEN_CPU_CAPABILITY": "avx2"}, True),
    "ATen none": ({"ATEN_CPU_CAPABILITY": "default"}, True),
    "oneDNN AVX2": ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, True),
    "oneDNN off": ({}, False),
    "ATen and oneDNN AVX2 (an AVX2-only CPU's)": ({"ATEN_CPU_CAPABILITY": "avx2",
                                                  "ONEDNN_MAX_CPU_ISA": "AVX2"}, True),
    "MKL COMPATIBLE": ({"MKL_CBWR": "COMPATIBLE"}, True),
    "ATen AVX2, oneDNN off, MKL COMPATIBLE": ({"ATEN_CPU_CAPABILITY": "avx2",
                                               "MKL_CBWR": "COMPATIBLE"}, False),
}
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
# `wscat train` with oneDNN switched off first when the first argument says "off".
WRAPPER = ("import sys, torch\n"
           "if sys.argv.pop(1) == 'off':\n"
           "    torch.backends.mkldnn.enabled = False\n"
           "from wscat.entry import console\n"
           "sys.argv[0] = 'wscat'\n"
           "sys.exit(console())\n")
Trainer = Callable[[str, int], tuple[str, float]]


class Refused(ValueError):
    """Bad input: one line, exit 2."""


def machine() -> dict[str, Any]:
    """The CPU, the kernels torch picks on it, and the versions that decide the bits."""
    import torch

    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return {"cpu": _cpu_model(), "cores": os.cpu_count(),
            "aten_capability": torch.backends.cpu.get_cpu_capability(),
            "avx2": "avx2" in flags, "avx512f": "avx512f" in flags,
            "torch": torch.__version__, "mkl": torch.backends.mkl.is_available(),
            "onednn": torch.backends.mkldnn.is_available()}


def prepare(work: Path, epochs: int) -> tuple[Path, Path]:
    """params.yaml with `epochs` for digits (every method), and seed 1's split, in `work`."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["training"]["digits"]["epochs"] = epochs
    params["training"]["digits"].pop("per_method", None)
    path, split = work / "params.yaml", work / "split.npz"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    _wscat(["split", "--params", str(path), "--dataset", "digits", "--seed", "1",
            "--out", str(split)], {}, True)
    return path, split


def _wscat(args: list[str], env: dict[str, str], onednn: bool) -> None:
    """One `wscat` process on one thread, the kernel variables of this shell replaced by `env`."""
    base = {key: value for key, value in os.environ.items() if key not in KERNEL_VARIABLES}
    done = subprocess.run([sys.executable, "-c", WRAPPER, "on" if onednn else "off", *args],
                          cwd=ROOT, env={**base, **env, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"wscat {args[0]} failed ({done.returncode}): "
                           f"{done.stderr.strip()[-500:]}")


def trainer(work: Path, params: Path, split: Path) -> Trainer:
    """Trains TRADES under a named setting; (weights digest, seconds of the process)."""
    from wscat.inference import load_model
    from wscat.steps.evaluate import weights_digest

    def train(setting: str, repeat: int) -> tuple[str, float]:
        import torch

        env, onednn = SETTINGS[setting]
        out = work / f"{sorted(SETTINGS).index(setting)}-{repeat}"
        started = time.perf_counter()
        _wscat(["train", "--params", str(params), "--dataset", "digits", "--model", "cnn",
                "--method", "trades", "--seed", "1", "--split", str(split), "--out-dir",
                str(out), "--threads", "1", "--device", "cpu"], env, onednn)
        seconds = time.perf_counter() - started
        net, _ = load_model(out / "best.pt", torch.device("cpu"))
        return weights_digest(net), seconds

    return train


def measure(settings: list[str], repeats: int, train: Trainer) -> dict[str, dict[str, Any]]:
    """{setting: {env, onednn, digests, seconds}}; the settings alternate, repeat by repeat."""
    found = {name: {"env": SETTINGS[name][0], "onednn": SETTINGS[name][1], "digests": [],
                    "seconds": []} for name in settings}
    for repeat in range(repeats):
        for name in settings:
            digest, seconds = train(name, repeat)
            found[name]["digests"].append(digest)
            found[name]["seconds"].append(round(seconds, 2))
    return found


def read_other(path: Path, epochs: int) -> dict[str, Any]:
    """Another machine's JSON, refused unless it is this script's for the same epochs."""
    try:
        other = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refused(f"--compare {path}: not readable as this script's JSON ({error}); give "
                      "the .json an earlier --out wrote") from None
    if not (isinstance(other, dict) and isinstance(other.get("machine"), dict)
            and isinstance(other.get("settings"), dict)):
        raise Refused(f"--compare {path}: not this script's JSON (no machine and settings); "
                      "give the .json an earlier --out wrote")
    for name, run in other["settings"].items():
        digests = run.get("digests") if isinstance(run, dict) else None
        if not (isinstance(digests, list) and digests
                and all(isinstance(d, str) for d in digests)):
            raise Refused(f"--compare {path}: setting '{name}' holds no digests; give the .json "
                          "an earlier --out wrote, unedited")
    if other.get("epochs") != epochs:
        raise Refused(f"--compare {path}: its runs trained {other.get('epochs')} epochs, these "
                      f"{epochs}; run with --epochs {other.get('epochs')}")
    return other


def _same(digests: list[str]) -> str:
    return digests[0] if len(set(digests)) == 1 else "differ: " + ", ".join(digests)


def render(record: dict[str, Any], other: dict[str, Any] | None, command: str) -> str:
    """The page: a row per setting, its digest against the default's (and another machine's)."""
    box, runs = record["machine"], record["settings"]
    default = runs.get("default", {}).get("digests", [None])[0]
    lines = [f"# Which kernels decide a CPU run's bits: TRADES on digits, {record['epochs']} "
             "epochs, seed 1", "", f"`{command}`", "",
             f"Machine: {box['cpu']}, {box['cores']} cores; torch {box['torch']}, ATen's kernels "
             f"here: {box['aten_capability']} (AVX2 {'yes' if box['avx2'] else 'no'}, AVX-512 "
             f"{'yes' if box['avx512f'] else 'no'}); {record['date']}. Each setting trained "
             f"{len(next(iter(runs.values()))['digests'])} times, each a fresh process on one "
             "thread; `weights` is best.pt's digest (a metrics file's `weights_sha256`); "
             "`seconds`: each training's process, ~2 s of start-up included."]
    if other is not None:
        lines.append(f"Compared with {other['machine'].get('cpu')} (ATen's kernels "
                     f"{other['machine'].get('aten_capability')}, torch "
                     f"{other['machine'].get('torch')}, {other.get('date')}).")
    header = "| setting | environment | oneDNN | weights | same as the default | seconds |"
    rule = "|---|---|---|---|---|---:|"
    if other is not None:
        header, rule = header + " there | same there |", rule + "---|---|"
    lines += ["", header, rule]
    for name, run in runs.items():
        env = " ".join(f"{k}={v}" for k, v in run["env"].items()) or "(none)"
        digest = _same(run["digests"])
        same = ("-" if name == "default" or default is None  # the default not run: no baseline
                else "yes" if digest == default else "no")
        row = (f"| {name} | {env} | {'on' if run['onednn'] else 'off'} | {digest} | {same} | "
               f"{' / '.join(f'{s:.1f}' for s in run['seconds'])} |")
        if other is not None:
            there = other["settings"].get(name)
            theirs = _same(there["digests"]) if there else "not run"
            row += f" {theirs} | {'yes' if theirs == digest else 'no'} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, train: Trainer | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
                        metavar="NAME", help=f"of: {'; '.join(SETTINGS)} (default: all)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, help="where the trainings go (default: a "
                        "temporary folder, removed after)")
    parser.add_argument("--out", type=Path, help="the page (.md); its JSON beside it")
    parser.add_argument("--compare", type=Path, help="another machine's JSON (an earlier --out's)")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.repeats < 1:
        parser.error("--epochs and --repeats must be 1 or more")
    if args.out is not None and args.out.suffix != ".md":
        parser.error(f"--out {args.out}: give a .md file (its JSON goes beside it)")
    if args.work is not None and not args.work.is_dir():
        parser.error(f"--work {args.work}: not a folder; give an existing one")
    settings = list(dict.fromkeys(args.settings))
    try:
        other = read_other(args.compare, args.epochs) if args.compare else None
    except Refused as refused:
        print(f"cpu_numerics: error: {refused}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        work = Path(scratch)
        if train is None:
            train = trainer(work, *prepare(work, args.epochs))
        runs = measure(settings, args.repeats, train)
    record = {"machine": machine(), "epochs": args.epochs, "date": str(datetime.date.today()),
              "settings": runs}
    command = ".venv/bin/python benchmarks/cpu_numerics.py " + " ".join(argv if argv is not None
                                                              else sys.argv[1:])
    text = render(record, other, command.strip())
    print(text, end="")
    if args.out is not None:
        from wscat.io import json_text, write_texts

        write_texts({args.out: text, args.out.with_suffix(".json"): json_text(record)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
