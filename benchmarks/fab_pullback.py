"""How often FAB-T pulls its iterate back, iteration by iteration (docs/evaluation.md, "Looked at
and left").

Each FAB iteration evaluates the model twice: with the gradient at the iterate, then without it
at the new point, to check whether it is adversarial. The next iteration's gradient pass starts
from that same point unless FAB pulled it back towards the clean image (it does so to every
adversarial row). This counts those rows: the share of the check pass a reuse could save.

    make demo
    .venv/bin/python benchmarks/fab_pullback.py --results results --method wscat --seed 1

runs pyautoattack's FAB-T (9 targets, 100 iterations) on up to `--n` correctly classified test
images, one thread, and prints the counts.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))


def main() -> None:
    from autoattack_speed import _load, add_run_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--method", default="wscat")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=250, help="correctly classified images to use")
    args = parser.parse_args()

    import torch
    from pyautoattack.fab_pt import FABAttack_PT

    from wscat.attacks.mode import frozen_parameters
    from wscat.models import LogitsOnly

    torch.set_num_threads(1)
    net, x, y, run = _load(args.results, args.params, args.dataset, args.model, args.method,
                           args.seed)
    logits = LogitsOnly(net).eval()
    with torch.no_grad():
        correct = logits(x).argmax(1) == y
    x, y = x[correct][:args.n], y[correct][:args.n]
    fab = FABAttack_PT(logits, n_restarts=1, n_iter=100, eps=run.data["eps"], seed=0,
                       norm="Linf", verbose=False, device=x.device, n_target_classes=9)
    fab.targeted = True

    predictions: list[torch.Tensor] = []
    predict = fab._get_predicted_label
    fab._get_predicted_label = lambda z: predictions.append(predict(z)) or predictions[-1]
    counts = {"iterations": 0, "with_pullback": 0, "rows_pulled_back": 0, "rows": 0}
    single_run = fab.attack_single_run

    def counted(xs, ys, use_rand_start=False, is_targeted=False):
        predictions.clear()
        out = single_run(xs, ys, use_rand_start, is_targeted)
        attacked = ys[predictions[0] == ys]  # the first call: the clean predictions
        for predicted in predictions[1:]:  # then one check an iteration
            pulled = predicted != attacked
            counts["iterations"] += 1
            counts["with_pullback"] += int(pulled.any())
            counts["rows_pulled_back"] += int(pulled.sum())
            counts["rows"] += len(attacked)
        return out

    fab.attack_single_run = counted
    with frozen_parameters(net):
        fab.perturb(x, y)
    share = counts["rows_pulled_back"] / max(counts["rows"], 1)
    print(f"{args.method} seed {args.seed}, {len(x)} images: {counts['with_pullback']} of "
          f"{counts['iterations']} iterations pulled rows back; {counts['rows_pulled_back']:,} "
          f"of {counts['rows']:,} rows ({100 * share:.1f}%)")


if __name__ == "__main__":
    main()
