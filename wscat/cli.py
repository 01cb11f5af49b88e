"""`wscat <step>`: fetch, split, train, pseudo-label, evaluate, table, export, analyse,
list-experiments, and the paper's tables and figures (paper-table, paper-compare, paper-figure,
paper-index, curves, validate).
Bad input, an unwritable output or Ctrl-C: one line, exit 2 (130 for Ctrl-C); an unexpected
error: one line, exit 1, its traceback with --debug or WSCAT_DEBUG=1."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from wscat.config import ConfigError, load_params
from wscat.errors import DEBUG_ENV, INTERRUPTED, debug_requested, describe, exit_code, first_line
from wscat.io import check_writable

Params = dict[str, Any] | None


class Command(NamedTuple):
    """A subcommand: its help line, its arguments, and the step it runs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Params], None]


def _common(parser: argparse.ArgumentParser, *names: str) -> None:
    parser.add_argument("--params", type=Path, default=Path("params.yaml"),
                        help="params file (default: params.yaml)")
    for name in names:
        if name == "seed":
            parser.add_argument("--seed", type=int, required=True, help="run seed (1, 2, 3 in the paper)")
        elif name == "threads":
            parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
            parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
        else:
            parser.add_argument(f"--{name}", required=True)


def _device(args: argparse.Namespace) -> Any:
    from wscat.device import pick_device

    return pick_device(args.device, args.threads)


# --- fetch, split, train, pseudo-label, evaluate ------------------------------------------------

def _fetch_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset")


def _fetch(args: argparse.Namespace, params: Params) -> None:
    from wscat.data import fetch_dataset

    files = fetch_dataset(args.dataset, params["datasets"][args.dataset])
    print("\n".join(f"ok {path}" for path in files) or f"{args.dataset}: nothing to fetch")


def _split_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "seed")
    p.add_argument("--out", type=Path, required=True)


def _split(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import split

    split.run(params, args.dataset, args.seed, args.out)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "method", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--pseudo", type=Path, default=None, help="pseudo-labels (methods with data: pseudo)")
    p.add_argument("--labeler-checkpoint", type=Path, default=None,
                   help="labels unlabelled generated images (methods with generated_labeler)")
    p.add_argument("--out-dir", type=Path, required=True)


def _train(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import train

    summary = train.run(params, dataset=args.dataset, model=args.model, method=args.method,
                        seed=args.seed, split_path=args.split, pseudo_path=args.pseudo,
                        out_dir=args.out_dir, labeler_checkpoint=args.labeler_checkpoint,
                        device=_device(args))
    print(f"trained {args.method} seed {args.seed}: best epoch {summary['best_epoch']}")


def _pseudo_label_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "labeler", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--metrics", type=Path, required=True)


def _pseudo_label(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import pseudo

    report = pseudo.run(params, dataset=args.dataset, seed=args.seed, split_path=args.split,
                        checkpoint=args.checkpoint, out=args.out, metrics=args.metrics,
                        labeler=args.labeler, device=_device(args), model=args.model)
    print(f"pseudo-label accuracy ({args.labeler}): {report['accuracy']:.2f}%")


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "method", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part", choices=("all", "core", "extra"), default="all",
                   help="core: the paper's five attacks and Mean; extra: AA-paper, NRF and the "
                        "masking checks (needs --core); all: both (default)")
    p.add_argument("--core", type=Path, default=None, help="the core metrics file (--part extra)")


def _evaluate(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import evaluate

    result = evaluate.run(params, dataset=args.dataset, model=args.model, method=args.method,
                          seed=args.seed, split_path=args.split, checkpoint=args.checkpoint,
                          out=args.out, device=_device(args), part=args.part,
                          core_path=args.core)
    print(" ".join(f"{k}={v:.2f}" for k, v in result["accuracy"].items()))


# --- table, export -------------------------------------------------------------------------------

def _table_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "experiment")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--summary", type=Path, required=True)
    p.add_argument("--md", type=Path, default=None, help="the Markdown twin (README)")
    p.add_argument("--paired-csv", type=Path, default=None,
                   help="paired bootstrap comparison against WSCAT (.csv)")
    p.add_argument("--paired-tex", type=Path, default=None, help="the same as LaTeX")
    p.add_argument("metrics", type=Path, nargs="+", help="per-(method, seed) metrics JSON files")


def _table(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import table

    table.run(params, experiment=args.experiment, metrics=args.metrics, tex=args.tex,
              csv=args.csv, summary=args.summary, md=args.md, paired_csv=args.paired_csv,
              paired_tex=args.paired_tex)


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", type=Path, required=True, help="e.g. results/models/.../best.pt")
    p.add_argument("--metrics", type=Path, required=True,
                   help="its run's metrics JSON (results/metrics/...): clean and AutoAttack accuracy")
    p.add_argument("--out", type=Path, required=True,
                   help="the entry, NAME.json; the state dict goes to NAME.pt beside it")
    p.add_argument("--name", default=None, help="model name (default: method-dataset-model-seedN)")


def _export(args: argparse.Namespace, params: Params) -> None:
    """Reads the checkpoint and its metrics only, no params file."""
    from wscat.export import export_model

    entry = export_model(args.checkpoint, args.metrics, args.out, name=args.name)
    print(f"exported {entry['name']}: clean {entry['clean_acc']}%, AutoAttack "
          f"{entry['autoattack_acc']}% at eps {entry['eps']} -> {args.out}, {entry['state_dict']}")


# --- the paper's tables and figures, curves, validate --------------------------------------------

def _paper_table_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier", "label")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _paper_table(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_table(params, tier=args.tier, label=args.label, results=args.results,
                    tex=args.tex, csv=args.csv)


def _paper_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--label", required=True)
    p.add_argument("--table-csv", type=Path, required=True, help="the table's long CSV")
    p.add_argument("--paper-cells", nargs=2, metavar=("DATASET", "MODEL"), default=None,
                   help="compare with the paper's cells of this dataset and model (default: "
                        "the table's own names; the CIFAR-10 proxy: CIFAR10 WRN-28-10)")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--csv", type=Path, required=True)


def _paper_compare(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_compare(label=args.label, table_csv=args.table_csv,
                      paper_cells=tuple(args.paper_cells) if args.paper_cells else None,
                      tex=args.tex, csv=args.csv)


def _paper_figure_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier", "figure")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _paper_figure(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_figure(params, tier=args.tier, figure=args.figure, results=args.results,
                     out=args.out)


def _paper_index_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _paper_index(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_index(params, tier=args.tier, results=args.results, out=args.out)


def _curves_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--train-log", type=Path, required=True)
    p.add_argument("--title", default="")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")


def _curves(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_curves(train_log=args.train_log, out=args.out, title=args.title)


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "method", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)


def _validate(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import validate

    validate.run(params, dataset=args.dataset, model=args.model, method=args.method,
                 seed=args.seed, split_path=args.split, checkpoint=args.checkpoint,
                 out=args.out, device=_device(args))


def _analyse_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier", "figure", "dataset", "threads")
    p.add_argument("--out", type=Path, required=True,
                   help="results/analysis/TIER/FIGURE/DATASET.npz")
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _analyse(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import analyse

    analyse.run(params, tier=args.tier, figure=args.figure, dataset=args.dataset, out=args.out,
                device=_device(args), root=args.results)


def _list_experiments_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)


def _list_experiments(args: argparse.Namespace, params: Params) -> None:
    import yaml

    from wscat.sweeps import describe

    print(describe(yaml.safe_load(args.params.read_text()), params, str(args.params)))


COMMANDS: dict[str, Command] = {
    "fetch": Command("download (CIFAR) or check the archives of a dataset (md5)",
                     _fetch_arguments, _fetch),
    "split": Command("class-balanced labelled/unlabelled/validation split of one seed",
                     _split_arguments, _split),
    "train": Command("train one method (resumes from OUT_DIR/resume/last.pt)",
                     _train_arguments, _train),
    "pseudo-label": Command("label the unlabelled part with a trained labeler",
                            _pseudo_label_arguments, _pseudo_label),
    "evaluate": Command("Natural, FGSM, PGD, CW, AutoAttack (standard and the paper's variant), "
                        "NRF and gradient-masking checks on the test set",
                        _evaluate_arguments, _evaluate),
    "table": Command("render an experiment's table (.tex, .csv, summary .json)",
                     _table_arguments, _table),
    "export": Command("a checkpoint as a RobustBench-style entry (JSON + state dict)",
                      _export_arguments, _export),
    "paper-table": Command("one of the paper's tables (.tex and long .csv)",
                           _paper_table_arguments, _paper_table),
    "paper-compare": Command("a table's companion: ours, the paper's, difference",
                             _paper_compare_arguments, _paper_compare),
    "paper-figure": Command("one of the paper's figures (.pdf, .png, .csv)",
                            _paper_figure_arguments, _paper_figure),
    "paper-index": Command("index.md of a tier's tables and figures",
                           _paper_index_arguments, _paper_index),
    "curves": Command("training curves of one run (.pdf, .png)", _curves_arguments, _curves),
    "validate": Command("natural and PGD accuracy on the validation set (Fig-beta's tuning rule)",
                        _validate_arguments, _validate),
    "analyse": Command("what Fig-similarity or Fig-feature shows on one dataset of a paper tier, "
                       "computed on its checkpoints (.npz)", _analyse_arguments, _analyse),
    "list-experiments": Command("every experiment, method and dataset of the params file, "
                                "generated ones (wscat-beta0.2, digits-full) included",
                                _list_experiments_arguments, _list_experiments),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wscat", description=__doc__)
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of an unexpected error (or set {DEBUG_ENV}=1)")
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")
    for name, command in COMMANDS.items():
        command.add_arguments(steps.add_parser(name, help=command.help))
    return parser


def _check_names(params: dict, args: argparse.Namespace) -> None:
    if getattr(args, "dataset", None) is not None and args.dataset not in params["datasets"]:
        raise ConfigError(f"unknown dataset '{args.dataset}'; configured in params.yaml: "
                          f"{', '.join(params['datasets'])}")
    for attr in ("method", "labeler"):
        name = getattr(args, attr, None)
        if name is not None and name not in params["methods"]:
            raise ConfigError(f"unknown {attr} '{name}'; configured in params.yaml: "
                              f"{', '.join(params['methods'])}")


# Arguments that name files a step writes (`--metrics` is an output of pseudo-label only).
OUTPUT_ARGS = ("out", "tex", "csv", "summary", "md", "paired_csv", "paired_tex")


def check_outputs(args: argparse.Namespace) -> None:
    """Before any work: every output's folder exists or can be made, and takes files."""
    names = OUTPUT_ARGS + (("metrics",) if args.step == "pseudo-label" else ())
    check_writable(*(getattr(args, name, None) for name in names))
    check_writable(getattr(args, "out_dir", None), folders=True)


def run(args: argparse.Namespace) -> None:
    """Check the outputs and the names, then run the subcommand's step."""
    check_outputs(args)
    params = load_params(args.params) if hasattr(args, "params") else None
    if params is not None:
        _check_names(params, args)
    COMMANDS[args.step].run(args, params)


def main(argv: list[str] | None = None) -> int:
    """Run one step; every failure ends in one line on stderr and a non-zero exit status."""
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        print("wscat: error: interrupted while starting; nothing was written", file=sys.stderr)
        return INTERRUPTED
    try:
        run(args)
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - the one error path
        line = describe(error)
        if line is None:
            if debug_requested(args.debug):
                raise
            line = (f"unexpected {type(error).__name__}: {first_line(error)} (a bug: rerun with "
                    f"--debug or {DEBUG_ENV}=1 for the traceback and report it)")
        print(f"wscat {args.step}: error: {line}", file=sys.stderr)
        return exit_code(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
