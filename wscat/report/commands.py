"""`wscat` subcommands of the paper's tables and figures (registered by wscat.cli):
paper-table, paper-compare, paper-figure, paper-index, curves, validate."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

STEPS = ("paper-table", "paper-compare", "paper-figure", "paper-index", "curves", "validate")


def add_parsers(steps: Any, common: Callable[..., None]) -> None:
    p = steps.add_parser("paper-table", help="one of the paper's tables (.tex and long .csv)")
    common(p, "tier", "label")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--results", default="results", help="the results folder (default: results)")

    p = steps.add_parser("paper-compare", help="a table's companion: ours, the paper's, difference")
    p.add_argument("--label", required=True)
    p.add_argument("--table-csv", type=Path, required=True, help="the table's long CSV")
    p.add_argument("--paper-cells", nargs=2, metavar=("DATASET", "MODEL"), default=None,
                   help="compare with the paper's cells of this dataset and model (default: "
                        "the table's own names; the CIFAR-10 proxy: CIFAR10 WRN-28-10)")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--csv", type=Path, required=True)

    p = steps.add_parser("paper-figure", help="one of the paper's figures (.pdf, .png, .csv)")
    common(p, "tier", "figure", "threads")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    p.add_argument("--results", default="results", help="the results folder (default: results)")

    p = steps.add_parser("paper-index", help="index.md of a tier's tables and figures")
    common(p, "tier")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--results", default="results", help="the results folder (default: results)")

    p = steps.add_parser("curves", help="training curves of one run (.pdf, .png)")
    p.add_argument("--train-log", type=Path, required=True)
    p.add_argument("--title", default="")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")

    p = steps.add_parser("validate", help="natural and PGD accuracy on the validation set "
                                          "(Fig-beta's tuning rule)")
    common(p, "dataset", "model", "method", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)


def run(args: argparse.Namespace, params: dict[str, Any] | None,
        device: Callable[[argparse.Namespace], Any]) -> None:
    from wscat.io import write_json, write_text
    from wscat.report import paper

    if args.step == "paper-table":
        from wscat.report.paper_tables import build

        tex, table = build(params, args.tier, args.label, args.results)
        write_text(args.csv, table)
        write_text(args.tex, tex)
    elif args.step == "paper-compare":
        from wscat.report.compare import join, render

        cells = tuple(args.paper_cells) if args.paper_cells else None
        tex, table = render(join(args.table_csv, cells), args.label, cells)
        write_text(args.csv, table)
        write_text(args.tex, tex)
    elif args.step == "paper-figure":
        from wscat.report import figures

        paper.tier_spec(params, args.tier)
        if args.figure not in paper.FIGURES:
            raise ValueError(f"unknown figure '{args.figure}'; figures: {', '.join(paper.FIGURES)}")
        if args.figure == "Fig-beta":
            figures.beta_figure(params, args.tier, args.results, args.out)
        elif args.figure == "Fig-unlabel":
            figures.unlabel_figure(params, args.tier, args.results, args.out)
        elif args.figure == "Fig-similarity":
            figures.similarity_figure(params, args.tier, args.results, args.out)
        else:
            figures.feature_figure(params, args.tier, args.results, args.out)
    elif args.step == "paper-index":
        write_text(args.out, index(params, args.tier, args.results))
    elif args.step == "curves":
        from wscat.report import figures

        figures.curves(args.train_log, args.out, args.title or str(args.train_log.parent))
    elif args.step == "validate":
        write_json(args.out, validate(params, args, device(args)))


def index(params: dict[str, Any], tier: str, root: str) -> str:
    """A Markdown list of a tier's tables, companions, figures and training curves."""
    from wscat.report import paper

    out = Path(root) / "paper" / tier
    lines = [f"# The paper's tables and figures: tier `{tier}`", "",
             "Rebuild: `snakemake --cores 2 -- " + f"{out}/index.md`", ""]
    for path in paper.tier_outputs(params, tier, root):
        lines.append(f"- [{Path(path).relative_to(root).as_posix()}]"
                     f"({os.path.relpath(path, out)})")
    return "\n".join(lines) + "\n"


def validate(params: dict[str, Any], args: argparse.Namespace, device: Any) -> dict[str, Any]:
    """Fig-beta's tuning numbers on the validation set, with the model in eval mode."""
    import torch

    from wscat.config import RunConfig, evaluation_for
    from wscat.data import load_dataset, load_split
    from wscat.pipeline import load_model
    from wscat.analysis import validation_accuracies
    from wscat.data import to_unit

    run = RunConfig.from_params(params, dataset=args.dataset, model=args.model,
                                method=args.method, seed=args.seed)
    split = load_split(args.split)
    if (split.dataset, split.seed) != (args.dataset, args.seed):
        raise ValueError(f"{args.split} is the split of {split.dataset} seed {split.seed}, "
                         f"not {args.dataset} seed {args.seed}")
    model, meta = load_model(args.checkpoint, device)
    source = load_dataset(args.dataset, params["datasets"][args.dataset])
    index_ = torch.as_tensor(split.validation)
    x, y = to_unit(source.images[index_].to(device)), source.labels[index_].to(device)
    evaluation = evaluation_for(params, args.dataset)
    accuracies = validation_accuracies(model, x, y, eps=run.data["eps"],
                                       step_size=run.data["eval_step_size"],
                                       steps=evaluation["pgd_steps"],
                                       batch_size=evaluation["batch_size"], seed=args.seed)
    return {**accuracies, "dataset": args.dataset, "model": args.model, "method": args.method,
            "seed": args.seed, "n": len(x), "set": "validation",
            "manifest": {"checkpoint": str(args.checkpoint), "epoch": meta["epoch"], "ema": True,
                         "model_mode": "eval", "pgd_steps": evaluation["pgd_steps"],
                         "eps": run.data["eps"], "step_size": run.data["eval_step_size"]}}
