"""A seed cut at its deadline and finished by a second call gives the uninterrupted seed's metrics.

DEVELOPERS.md tells a GPU session to finish a seed that its first call could not, with the same
command on the warm machine. This checks that path on CPU with the tiny proxy of
tests/workflow/test_cifar10_proxy.py (three methods, one epoch): call 1 with `--deadline`, which
must kill at least one step; call 2 on the same results; a third, uninterrupted run on fresh
results. Every metrics file (accuracies, per-image flags, manifests) must match, the checkpoint's
path (it names the results folder) aside.

    .venv/bin/python benchmarks/proxy_resume_check.py --deadline 10 --work /tmp/proxy-resume

`--stop-after S` cuts call 1 with `timeout S` instead (SIGTERM to its whole process group, as the
device command's `timeout 590` does), with no deadline: call 1 must still write its summary
and seed tarball (its `run.json` inside), and say which steps the signal killed.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _comparable(path: Path) -> dict[str, Any]:
    """A metrics file without its checkpoint's path (the one field that names --results)."""
    data = json.loads(path.read_text())
    data.get("manifest", {}).get("checkpoint", {}).pop("path", None)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deadline", type=int, default=10,
                        help="call 1's deadline, s (~40%% of an uninterrupted tiny run: it took "
                             "24 s whole on 2 cores on 2026-11-28, where 28 cut nothing)")
    parser.add_argument("--stop-after", type=float, default=None, metavar="S",
                        help="cut call 1 with `timeout S` (SIGTERM) instead of --deadline")
    parser.add_argument("--work", type=Path, required=True, help="an empty or new folder")
    args = parser.parse_args()
    if args.stop_after is not None and not (math.isfinite(args.stop_after) and args.stop_after > 0):
        print(f"proxy_resume_check: error: --stop-after {args.stop_after:g}: give a positive "
              "number of seconds", file=sys.stderr)
        return 2
    if args.work.exists() and any(args.work.iterdir()):
        sys.exit(f"proxy_resume_check: {args.work} is not empty; pass a new folder")
    import yaml

    from tests.helpers.archives import write_cifar10
    from tests.workflow.test_cifar10_proxy import PROXY, _npz_of, _proxy_script, tiny_proxy_params
    from wscat.config import load_params
    from wscat.data import load_dataset

    work = args.work
    raw = work / "raw"
    raw.mkdir(parents=True)
    params = tiny_proxy_params(raw, write_cifar10(raw, train_per_class=30, test_per_class=4),
                               ["trades", "mt", "wscat"])
    base = work / "params.yaml"
    base.write_text(yaml.safe_dump(params, sort_keys=False))
    npz = _npz_of(load_dataset(PROXY, load_params(base)["datasets"][PROXY]), work / "p.npz")
    cut = [] if args.stop_after else ["--deadline", str(args.deadline)]
    calls = [("cut", "out-1", cut), ("cut", "out-2", []), ("whole", "out-whole", [])]
    for results, out, extra in calls:
        if out == "out-1" and args.stop_after:
            done = _proxy_script(work, base, npz, work / f"results-{results}", work / out,
                                 prefix=("timeout", f"{args.stop_after:g}"))
        else:
            done = _proxy_script(work, base, npz, work / f"results-{results}", work / out, *extra)
        last = (done.stdout.strip().splitlines() or ["?"])[-2:]
        print(f"{out}: exit {done.returncode}; " + " / ".join(last), flush=True)
        if out == "out-1" and args.stop_after:
            if done.returncode != 124:  # timeout's status when its time ran out
                sys.exit(f"proxy_resume_check: call 1 ended before --stop-after (exit "
                         f"{done.returncode}); pass a shorter --stop-after")
            missing = [name for name in ("summary.md", "seed1.tar.gz", "progress.log")
                       if not (work / out / name).is_file()]
            if missing or "SIGTERM: stopping" not in (work / out / "progress.log").read_text():
                sys.exit(f"proxy_resume_check: the stopped call 1 left {work / out} without "
                         f"{', '.join(missing) or 'the SIGTERM line in progress.log'}")
            print(f"{out}: stopped by SIGTERM, it wrote summary.md and seed1.tar.gz (its "
                  "run.json inside)", flush=True)
        if out == "out-1" and " killed " not in done.stdout:
            sys.exit("proxy_resume_check: call 1 killed nothing; pass a shorter "
                     + ("--stop-after" if args.stop_after else "--deadline"))
        if out != "out-1" and done.returncode != 0:
            sys.exit(f"proxy_resume_check: {out} failed: {done.stderr[-2000:]}")
    cut = sorted((work / "results-cut/metrics").rglob("*.json"))
    whole = sorted((work / "results-whole/metrics").rglob("*.json"))
    names = [p.relative_to(work / "results-cut") for p in cut]
    assert names == [p.relative_to(work / "results-whole") for p in whole], (cut, whole)
    differ = [str(n) for n, a, b in zip(names, cut, whole) if _comparable(a) != _comparable(b)]
    print(f"{len(names)} metrics files; {len(differ)} differ" + (f": {differ}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
