"""`wscat <step>`: fetch, split, train, pseudo-label, evaluate, table, export, analyse,
list-experiments, add-dataset (your own .npz), and the paper's tables and figures (paper-table,
paper-compare, paper-figure, paper-index, robustness-curves, curves, validate).
Bad input, an unwritable output, Ctrl-C or SIGTERM: one line, exit 2 (130 for Ctrl-C, 143 for
SIGTERM, each leaving nothing half-written); an unexpected error: one line, exit 1, its traceback
with --debug or WSCAT_DEBUG=1."""
from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from wscat import __version__
from wscat.config import SEED_MAX, ConfigError, load_params, unknown_name
from wscat.device import DEVICE_ENV, THREADS_MAX, device_default
from wscat.entry import STARTING
from wscat.errors import (DEBUG_ENV, INTERRUPTED, Terminated, debug_requested, describe,
                          exit_code, first_line)
from wscat.file_kinds import check_input_kind
from wscat.io import check_writable, guard_outputs, output_lock
from wscat.memory import keep_freed_memory
from wscat.own_method import OwnMethodError
from wscat.paths import RUN_NAMES, SPLIT

Params = dict[str, Any] | None


class Command(NamedTuple):
    """A subcommand: its help line, its arguments, and the step it runs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Params], None]


class TypedPath(type(Path())):  # type: ignore[misc]
    """A path argument that keeps its text as typed (`typed`): Path drops a trailing separator,
    and `--out new/` must be refused as a folder, not written as the file `new`."""

    typed: str


def path_value(text: str) -> Path:
    """A path argument (every `type=Path` of the parser converts through this); an empty one
    is refused here, as Path("") would be the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give a file or folder name")
    path = TypedPath(text)
    path.typed = text
    return path


def seed_value(text: str) -> int:
    """A seed: an integer in 0..2^32-1 (argparse names the flag in its one-line error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer; give a seed in "
                                         f"0..{SEED_MAX}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..{SEED_MAX}; give a seed in "
                                         "that range")
    return value


def seconds_value(text: str) -> float:
    """A number of seconds: finite, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number; give seconds, 0 or more"
                                         ) from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} seconds; give a finite number, 0 or more")
    return value


def threads_value(text: str) -> int:
    """A number of CPU threads: an integer from 1 to THREADS_MAX."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer; give 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} threads; give 1 or more")
    if value > THREADS_MAX:
        raise argparse.ArgumentTypeError(f"{value} threads; give at most {THREADS_MAX} (this "
                                         f"machine has {os.cpu_count()} CPUs)")
    return value


# Help of the names the steps share (the values are keys of the params file's sections).
NAME_HELP = {
    "dataset": "a dataset of the params file's `datasets:` (digits, cifar10, ...; "
               "`wscat list-experiments` lists them)",
    "model": "a model of the params file's `models:` (cnn, wrn-16-4, wrn-28-10, ...)",
    "method": "a method of the params file's `methods:` (wscat, trades, rst, mt, ...)",
    "labeler": "the method whose checkpoint labels the unlabelled images (mt, standard, ...)",
    "experiment": "an experiment of the params file's `experiments:` (digits, ...)",
    "tier": "a tier of the params file's `paper:` section (digits, ...)",
    "figure": "one of the paper's figures (Fig-similarity, ...) or robustness-curves",
    "label": "one of the paper's tables, as named in `paper:` (Tab-RQ1-digits, ...)",
}


FROM_CHECKPOINT = " (default: the --checkpoint's, which records it)"
SPLIT_HELP = ("the seed's split (`wscat split`; default: the workflow's, "
              f"{SPLIT.format(dataset='DATASET', seed='SEED')})")


def _common(parser: argparse.ArgumentParser, *names: str, from_checkpoint: bool = False,
            trains: bool = False) -> None:
    """The options most steps share; `from_checkpoint`: the run's names (--dataset, --model,
    --method or --labeler, --seed) may be left out, and are then the checkpoint's
    (`fill_from_checkpoint`); `trains`: --device says when a paper-size model trains on a CPU."""
    parser.add_argument("--params", type=Path, default=Path("params.yaml"),
                        help="params file (default: params.yaml)")
    for name in names:
        own = from_checkpoint and (name in RUN_NAMES or name == "labeler")
        if name == "seed":
            parser.add_argument("--seed", type=seed_value, required=not own,
                                help=f"run seed in 0..{SEED_MAX} (1, 2, 3 in the paper)"
                                     + (FROM_CHECKPOINT if own else ""))
        elif name == "threads":
            parser.add_argument("--threads", type=threads_value, default=None,
                                help="CPU threads for torch (default: torch's, about one a "
                                     "core; on a machine busy with other work, 1: "
                                     "docs/speed.md)")
            parser.add_argument("--device", default=device_default(),
                                help=f"cpu, cuda, cuda:N or auto (default: ${DEVICE_ENV} or auto, "
                                     "CUDA where there is one)" + (
                                         "; a paper-size model (10M+ parameters: wrn-28-10, "
                                         "resnet-50, ...) trains on a CPU only when the CPU is "
                                         f"named (--device cpu or {DEVICE_ENV}=cpu)"
                                         if trains else ""))
        else:
            parser.add_argument(f"--{name}", required=not own,
                                help=NAME_HELP[name] + (FROM_CHECKPOINT if own else ""))


def _device(args: argparse.Namespace) -> Any:
    """The step's device, named on stdout (the job log's first line; stderr stays for errors)."""
    from wscat.device import device_line, named, pick_device

    device = pick_device(args.device, args.threads)
    print(device_line(device, automatic=not named(args.device)), flush=True)
    return device


# --- fetch, split, train, pseudo-label, evaluate ------------------------------------------------

def _fetch_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset")


def _fetch(args: argparse.Namespace, params: Params) -> None:
    from wscat.data import fetch_dataset

    files = fetch_dataset(args.dataset, params["datasets"][args.dataset])
    print("\n".join(f"ok {path}" for path in files) or f"{args.dataset}: nothing to fetch")


def _split_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "seed")
    p.add_argument("--out", type=Path, required=True,
                   help="the split to write (.npz: labelled, unlabelled, validation, test indices)")


def _split(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import split

    split.run(params, args.dataset, args.seed, args.out)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "method", "seed", "threads", trains=True)
    p.add_argument("--split", type=Path, required=True, help="the seed's split (`wscat split`)")
    p.add_argument("--pseudo", type=Path, default=None, help="pseudo-labels (methods with data: pseudo)")
    p.add_argument("--labeler-checkpoint", type=Path, default=None,
                   help="labels unlabelled generated images (methods with generated_labeler)")
    p.add_argument("--out-dir", type=Path, required=True,
                   help="the run's folder: best.pt, last.pt, train_log.csv, dvclive/, resume/")


def _train(args: argparse.Namespace, params: Params) -> None:
    from wscat.device import named
    from wscat.steps import train

    summary = train.run(params, dataset=args.dataset, model=args.model, method=args.method,
                        seed=args.seed, split_path=args.split, pseudo_path=args.pseudo,
                        out_dir=args.out_dir, labeler_checkpoint=args.labeler_checkpoint,
                        device=_device(args), device_named=named(args.device))
    print(f"trained {args.method} seed {args.seed}: best epoch {summary['best_epoch']}")


def _pseudo_label_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "labeler", "seed", "threads", from_checkpoint=True)
    p.add_argument("--split", type=Path, default=None, help=SPLIT_HELP)
    p.add_argument("--checkpoint", type=Path, required=True, help="the labeler's best.pt")
    p.add_argument("--out", type=Path, required=True,
                   help="the pseudo-labels to write (.npz, one per unlabelled image)")
    p.add_argument("--metrics", type=Path, required=True,
                   help="their report to write (.json: accuracy against the hidden labels)")


def _pseudo_label(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import pseudo

    report = pseudo.run(params, dataset=args.dataset, seed=args.seed, split_path=args.split,
                        checkpoint=args.checkpoint, out=args.out, metrics=args.metrics,
                        labeler=args.labeler, device=_device(args), model=args.model)
    print(f"pseudo-label accuracy ({args.labeler}): {report['accuracy']:.2f}%")


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "method", "seed", "threads", from_checkpoint=True)
    p.add_argument("--split", type=Path, default=None, help=SPLIT_HELP)
    p.add_argument("--checkpoint", type=Path, required=True, help="the run's best.pt")
    p.add_argument("--out", type=Path, required=True,
                   help="the metrics to write (.json: accuracies and how they were measured)")
    p.add_argument("--part", choices=("all", "core", "extra"), default="all",
                   help="core: the paper's five columns (Natural, FGSM, PGD, CW, AA) and "
                        "Mean; extra: AA-paper, NRF and the masking checks (needs --core); all: "
                        "both (default)")
    p.add_argument("--core", type=Path, default=None, help="the core metrics file (--part extra)")
    p.add_argument("--core-wait", type=seconds_value, default=0.0, metavar="SECONDS",
                   help="--part extra beside its core evaluation: if the --core file is not "
                        "there yet, run AA-paper and NRF first, then wait up to SECONDS for it "
                        "(default 0: it must be there)")


def _evaluate(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import evaluate

    result = evaluate.run(params, dataset=args.dataset, model=args.model, method=args.method,
                          seed=args.seed, split_path=args.split, checkpoint=args.checkpoint,
                          out=args.out, device=_device(args), part=args.part,
                          core_path=args.core, core_wait=args.core_wait)
    print(" ".join(f"{k}={v:.2f}" for k, v in result["accuracy"].items()))


# --- table, export -------------------------------------------------------------------------------

def _table_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "experiment")
    p.add_argument("--tex", type=Path, required=True, help="the LaTeX table to write")
    p.add_argument("--csv", type=Path, required=True, help="the table as CSV")
    p.add_argument("--summary", type=Path, required=True,
                   help="the mean per (method, attack) over the seeds, as JSON")
    p.add_argument("--md", type=Path, default=None, help="the Markdown twin (README)")
    p.add_argument("--paired-csv", type=Path, default=None,
                   help="paired comparison against WSCAT (.csv): each method's difference "
                   "in Mean and its 95%% interval, Student's t over the seeds widened by a "
                   "test-set bootstrap (docs/evaluation.md)")
    p.add_argument("--paired-tex", type=Path, default=None, help="the same as LaTeX")
    p.add_argument("--paired-figure", type=Path, default=None, metavar="PATH",
                   help="the same as a picture, in Mean and on each attack: PATH.pdf and "
                   "PATH.png (a path without extension; the pipeline's: "
                   "results/tables/EXPERIMENT-paired)")
    p.add_argument("metrics", type=Path, nargs="+", help="per-(method, seed) metrics JSON files")


def _table(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import table

    table.run(params, experiment=args.experiment, metrics=args.metrics, tex=args.tex,
              csv=args.csv, summary=args.summary, md=args.md, paired_csv=args.paired_csv,
              paired_tex=args.paired_tex, paired_figure=args.paired_figure)


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", type=Path, required=True, help="e.g. results/models/.../best.pt")
    p.add_argument("--metrics", type=Path, default=None,
                   help="its run's metrics JSON: clean and AutoAttack accuracy (default: the run's "
                   "results/metrics/.../seedN.json, for a best.pt under results/models/)")
    p.add_argument("--out", type=Path, required=True,
                   help="the entry to write (.json); the state dict goes beside it, .pt for "
                        ".json (OUT.json: OUT.pt)")
    p.add_argument("--name", default=None, help="model name (default: method-dataset-model-seedN)")


def metrics_of(checkpoint: Path) -> Path:
    """The metrics file of the run whose validation-selected checkpoint this is (wscat.paths:
    results/models/RUN/best.pt -> results/metrics/RUN.json); else ValueError: pass --metrics."""
    from wscat.paths import run_of

    found = run_of(checkpoint)
    if found is not None:
        root, run = found
        return Path(run.metrics(root))
    raise ValueError(f"--checkpoint {checkpoint} is not a run's best.pt under results/models/, so "
                     "its metrics file is not known: pass --metrics (the run's "
                     "results/metrics/.../seedN.json)")


def _export(args: argparse.Namespace, params: Params) -> None:
    """Reads the checkpoint and its metrics only, no params file."""
    from wscat.export import export_model

    metrics = args.metrics if args.metrics is not None else metrics_of(args.checkpoint)
    entry = export_model(args.checkpoint, metrics, args.out, name=args.name)
    weights = Path(args.out).with_name(entry["state_dict"])  # the entry names it by file name
    print(f"exported {entry['name']}: clean {entry['clean_acc']}%, AutoAttack "
          f"{entry['autoattack_acc']}% at eps {entry['eps']} -> {args.out}, {weights}")


# --- the paper's tables and figures, curves, validate --------------------------------------------

def _paper_table_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier", "label")
    p.add_argument("--tex", type=Path, required=True, help="the LaTeX table to write")
    p.add_argument("--csv", type=Path, required=True, help="the long CSV (reported.csv's columns)")
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _paper_table(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_table(params, tier=args.tier, label=args.label, results=args.results,
                    tex=args.tex, csv=args.csv)


def _paper_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--label", required=True, help=NAME_HELP["label"])
    p.add_argument("--table-csv", type=Path, required=True, help="the table's long CSV")
    p.add_argument("--paper-cells", nargs=2, metavar=("DATASET", "MODEL"), default=None,
                   help="compare with the paper's cells of this dataset and model (default: "
                        "the table's own names; the workflow passes the CIFAR-10 proxy's, "
                        "CIFAR10 WRN-28-10, from params.yaml's `compare`)")
    p.add_argument("--tex", type=Path, required=True, help="the LaTeX companion to write")
    p.add_argument("--csv", type=Path, required=True, help="the companion as CSV")


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


def _robustness_curves_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "experiment")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _robustness_curves(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_robustness_curves(params, experiment=args.experiment, results=args.results,
                                out=args.out)


def _paper_index_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier")
    p.add_argument("--out", type=Path, required=True, help="the index to write (index.md)")
    p.add_argument("--results", default="results", help="the results folder (default: results)")


def _paper_index(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_index(params, tier=args.tier, results=args.results, out=args.out)


def _curves_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--train-log", type=Path, required=True, help="the run's train_log.csv")
    p.add_argument("--title", default="",
                   help="the figure's title (default: the train log's folder)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")


def _curves(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import paper

    paper.run_curves(train_log=args.train_log, out=args.out, title=args.title)


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "dataset", "model", "method", "seed", "threads", from_checkpoint=True)
    p.add_argument("--split", type=Path, default=None, help=SPLIT_HELP)
    p.add_argument("--checkpoint", type=Path, required=True, help="the run's best.pt")
    p.add_argument("--out", type=Path, required=True,
                   help="the validation scores to write (.json)")


def _validate(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import validate

    validate.run(params, dataset=args.dataset, model=args.model, method=args.method,
                 seed=args.seed, split_path=args.split, checkpoint=args.checkpoint,
                 out=args.out, device=_device(args))


def _analyse_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "tier", "dataset", "threads")
    p.add_argument("--figure", required=True,
                   help="Fig-similarity or Fig-feature (the figures an analysis file serves)")
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

    from wscat.data.capacity import check_splits
    from wscat.sweeps import describe

    check_splits(params)  # as `snakemake -n` does: a split the split step would refuse
    print(describe(yaml.safe_load(args.params.read_text()), params, str(args.params)))


def _add_dataset_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the new dataset's name (datasets.NAME, training.NAME, "
                                "experiments.NAME, and methods.mt.per_dataset.NAME where Mean "
                                "Teacher needs it; results/tables/NAME.tex)")
    p.add_argument("npz", type=Path, help="uint8 x_train (N x H x W x C), integer y_train in "
                                          "0..K-1 (K >= 4), and x_test, y_test if it has a test "
                                          "part")
    _common(p)
    p.add_argument("--out", type=Path, help="write the params file with the new blocks here "
                                            "(default: add them to --params in place)")


def _add_dataset(args: argparse.Namespace, params: Params) -> None:
    from wscat.steps import add_dataset

    written = add_dataset.run(args.params, args.name, args.npz, out=args.out)
    print(add_dataset.report(args.name, written))


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
    "robustness-curves": Command("an experiment's robustness curves (.pdf, .png, .csv): PGD "
                                 "accuracy against eps and steps, from its runs' extra metrics",
                                 _robustness_curves_arguments, _robustness_curves),
    "curves": Command("training curves of one run (.pdf, .png)", _curves_arguments, _curves),
    "validate": Command("natural and PGD accuracy on the validation set (Fig-beta's tuning rule)",
                        _validate_arguments, _validate),
    "analyse": Command("what Fig-similarity or Fig-feature shows on one dataset of a paper tier, "
                       "computed on its checkpoints (.npz)", _analyse_arguments, _analyse),
    "list-experiments": Command("every experiment, method and dataset of the params file, "
                                "generated ones (wscat-beta0.2, digits-full) included",
                                _list_experiments_arguments, _list_experiments),
    "add-dataset": Command("check your own .npz and add its dataset, training and experiment "
                           "blocks to the params file", _add_dataset_arguments, _add_dataset),
}


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (no usage block), exit 2; subcommands inherit it.
    An unknown option is named by the step it was given to, and a missing required option
    comes with the options given that the step does not know (a misspelling, often)."""

    _given: list[str] = []

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            steps = next((a.choices for a in self._actions
                          if isinstance(a, argparse._SubParsersAction)), {})
            owner = steps.get(getattr(parsed, "step", None), self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def error(self, message: str) -> None:  # type: ignore[override]
        message = " ".join(message.split())
        if message.startswith("the following arguments are required"):
            unknown = [given.split("=")[0] for given in self._given if given.startswith("--")
                       and given.split("=")[0] not in self._option_string_actions]
            if unknown:
                verb = "is not an option" if len(unknown) == 1 else "are not options"
                message += f"; {', '.join(unknown)} {verb} of `{self.prog}` (misspelt?)"
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="wscat", description=__doc__)
    parser.add_argument("--version", action="version", version=f"wscat {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of an unexpected error (or set {DEBUG_ENV}=1)")
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")
    for name, command in COMMANDS.items():
        step = steps.add_parser(name, help=command.help)
        step.register("type", Path, path_value)  # `type=Path` keeps the text as typed
        command.add_arguments(step)
    return parser


def _check_names(params: dict, args: argparse.Namespace) -> None:
    """A dataset, method or labeler params.yaml lacks (wscat.config.unknown_name): one line.
    The model is checked with the run (wscat.config.RunConfig.from_params)."""
    unknown = unknown_name(params, {attr: getattr(args, attr, None)
                                    for attr in ("dataset", "method", "labeler")})
    if unknown is not None:
        key, name, section = unknown
        raise ConfigError(f"unknown {key} '{name}'; configured in {args.params}: "
                          f"{', '.join(params[section])}")


# Arguments that name files a step writes (`--metrics` is an output of pseudo-label only).
OUTPUT_ARGS = ("out", "tex", "csv", "summary", "md", "paired_csv", "paired_tex", "paired_figure")
# Arguments that name files or folders a step reads (`--metrics`: an input but to pseudo-label).
INPUT_ARGS = ("params", "split", "pseudo", "labeler_checkpoint", "checkpoint", "core", "metrics",
              "train_log", "table_csv", "results", "npz")


def _curves_outputs(out: Path) -> list[Path]:
    """What `wscat curves --out OUT` writes (OUT.pdf, OUT.png; run.v2 keeps its name)."""
    from wscat.report.figures import curves_files  # matplotlib: only when curves run

    return list(curves_files(out).values())


# Files a step writes beside an output argument (`--out` without extension: the figures).
DERIVED_OUTPUTS: dict[str, Callable[[Path], list[Path]]] = {
    "export": lambda out: [out, out.with_suffix(".pt")],
    "paper-figure": lambda out: [out.with_suffix(f".{ext}") for ext in ("pdf", "png", "csv")],
    "robustness-curves": lambda out: [out.with_suffix(f".{ext}") for ext in ("pdf", "png", "csv")],
    "curves": _curves_outputs,
}


def _paired_figure_files(prefix: Path) -> list[Path]:
    """What `wscat table --paired-figure PATH` writes: PATH.pdf, PATH.png."""
    from wscat.steps.table import figure_files

    return list(figure_files(prefix).values())


# The same for an output argument other than --out: (step, argument) -> what it writes.
FLAG_DERIVED_OUTPUTS: dict[tuple[str, str], Callable[[Path], list[Path]]] = {
    ("table", "paired_figure"): _paired_figure_files,
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _output_names(args: argparse.Namespace) -> tuple[str, ...]:
    """The arguments of a parsed command that name files it writes."""
    return OUTPUT_ARGS + (("metrics",) if args.step == "pseudo-label" else ())


def step_outputs(args: argparse.Namespace) -> tuple[dict[str, Path], dict[str, Path]]:
    """(output files, output folders) of a parsed command, each under its flag."""
    names = _output_names(args)
    files = {_flag(name): Path(getattr(args, name)) for name in names
             if getattr(args, name, None) is not None}
    derived = DERIVED_OUTPUTS.get(args.step)
    if derived is not None and "--out" in files:
        out = files.pop("--out")
        files.update({"--out" if path == out else f"--out ({path.name})": path
                      for path in derived(out)})
    for (step, name), paths_of in FLAG_DERIVED_OUTPUTS.items():
        if step == args.step and _flag(name) in files:
            flag = _flag(name)
            files.update({f"{flag} ({path.name})": path for path in paths_of(files.pop(flag))})
    folders = {"--out-dir": Path(args.out_dir)} if getattr(args, "out_dir", None) else {}
    return files, folders


def step_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The files (and folders) a parsed command names as its inputs, under their flags."""
    names = [n for n in INPUT_ARGS if not (n == "metrics" and args.step == "pseudo-label")]
    return {_flag(name): getattr(args, name) for name in names
            if getattr(args, name, None) is not None}


FOLDER_INPUTS = ("--results",)  # the inputs that are folders; every other one is a file
# The kind of wscat file each file input is (wscat.file_kinds.EXPECTED); pseudo-label's --metrics is an
# output, every other step's an input.
INPUT_KINDS = {"--split": "split", "--pseudo": "pseudo-labels", "--checkpoint": "checkpoint",
               "--labeler-checkpoint": "checkpoint", "--core": "metrics", "--metrics": "metrics",
               "--params": "params", "--train-log": "training log", "--table-csv": "table CSV",
               "--npz": "dataset"}
# Inputs given as positional arguments: no flag to name, so a refusal names them as the usage
# line does (`wscat table ... metrics [metrics ...]`, `wscat add-dataset ... name npz`).
POSITIONAL_INPUTS = {("table", "--metrics"): "metrics", ("add-dataset", "--npz"): "npz"}


def input_name(step: str, flag: str) -> str:
    """An input as a refusal names it: its flag, or a positional argument's name in the usage
    line (table's `metrics`, add-dataset's `npz`)."""
    return POSITIONAL_INPUTS.get((step, flag), flag)


def check_input_kinds(args: argparse.Namespace, params: Params = None) -> None:
    """Refuse an input that is another kind of wscat file than its option takes (a split passed
    as --checkpoint), saying which file to pass (wscat.file_kinds.check_input_kind); `params` names the
    method's labelers in that advice."""
    from wscat.config import method_for

    fields = {name: getattr(args, name, None) for name in ("dataset", "model", "method", "seed",
                                                          "labeler", "tier", "label")}
    knobs = (method_for(params, args.method, args.dataset)
             if params is not None and getattr(args, "method", None) else {})
    for flag, value in step_inputs(args).items():
        kind = INPUT_KINDS.get(flag)
        if kind is None:
            continue
        given = {**fields, "labeler": fields["labeler"] or knobs.get("labeler")}
        if args.step == "pseudo-label":
            given["method"] = args.labeler
        elif flag == "--labeler-checkpoint":
            given["method"] = knobs.get("generated_labeler") or "LABELER"
        option = "" if (args.step, flag) in POSITIONAL_INPUTS else flag
        for path in value if isinstance(value, list) else [value]:
            check_input_kind(path, kind, option, given)


# The steps whose --checkpoint is the run's own best.pt (pseudo-label: its labeler's): a run name
# left out is the checkpoint's, and a --split left out the seed's split where the workflow keeps it.
NAMES_FROM_CHECKPOINT = ("evaluate", "validate", "pseudo-label")


def fill_from_checkpoint(args: argparse.Namespace) -> bool:
    """evaluate, validate, pseudo-label: each of --dataset, --model, --method (pseudo-label's
    --labeler: the labeler's own method) and --seed not given becomes the checkpoint's
    (wscat.checkpoint.run_names), and --split not given the workflow's split of that dataset and
    seed (wscat.paths.SPLIT; one line where it is not there). One given is kept, and the step
    refuses a checkpoint or split of another run as before (wscat.checkpoint.check_run,
    check_model; the split's seed and params). Whether it filled --split, an input the guard
    then checks too."""
    if args.step not in NAMES_FROM_CHECKPOINT:
        return False
    as_given = {name: "labeler" if name == "method" and args.step == "pseudo-label" else name
                for name in RUN_NAMES}
    lacking = [name for name in RUN_NAMES if getattr(args, as_given[name]) is None]
    if lacking:
        from wscat.checkpoint import run_names

        recorded = run_names(args.checkpoint)
        for name in lacking:
            setattr(args, as_given[name], recorded[name])
    if args.split is not None:
        return False
    args.split = Path(SPLIT.format(dataset=args.dataset, seed=args.seed))
    if not args.split.is_file():
        raise ValueError(f"no --split given, and the workflow's split of {args.dataset} seed "
                         f"{args.seed}, {args.split}, is not there; pass --split, or make it: "
                         f"wscat split --dataset {args.dataset} --seed {args.seed} --out "
                         f"{args.split}")
    return True


def _check_inputs(args: argparse.Namespace, files: dict[str, Path],
                  folders: dict[str, Path]) -> None:
    """No file input is a folder, no folder input a file, and no output an input."""
    step, inputs = args.step, step_inputs(args)
    for flag, value in inputs.items():
        for path in value if isinstance(value, list) else [value]:
            if flag not in FOLDER_INPUTS and Path(path).is_dir():
                name = input_name(step, flag)
                raise ValueError(f"{name if name == flag else f'the {name}'} {path} is a folder, "
                                 "not a file; pass the file itself")
            if flag in FOLDER_INPUTS and Path(path).exists() and not Path(path).is_dir():
                raise ValueError(f"{flag} {path} is a file, not a folder; pass the results "
                                 "folder (default: results)")
    if step == "add-dataset":  # --out may name --params: the in-place edit (add_dataset.run)
        inputs = {flag: value for flag, value in inputs.items() if flag != "--params"}
    guard_outputs({input_name(step, flag): value for flag, value in inputs.items()},
                  files, folders)


def guard(args: argparse.Namespace) -> None:
    """Before any work: no file input is a folder, no output is an input (the step adds the
    inputs only it knows), what evaluate and validate leave to the checkpoint is filled in
    (`fill_from_checkpoint`; a split so found is checked as the others), and no output holds
    another kind of file or another run's."""
    files, folders = step_outputs(args)
    _check_inputs(args, files, folders)
    if fill_from_checkpoint(args):  # the split it found is an input too
        _check_inputs(args, files, folders)
    check_output_kinds(args.step, files, run_of(args))


# The kind of wscat file (wscat.file_kinds) each output is; every other output is none of them.
OUTPUT_KINDS = {("split", "--out"): "split", ("pseudo-label", "--out"): "pseudo-labels",
                ("pseudo-label", "--metrics"): "pseudo-report", ("evaluate", "--out"): "metrics",
                ("validate", "--out"): "validation", ("add-dataset", "--out"): "params",
                ("analyse", "--out"): "npz"}  # analyse: arrays of its own (embeddings, ...)


# The outputs that get JSON, and what they hold: a name that does not end in .json is refused.
JSON_OUTPUTS = {("pseudo-label", "--metrics"): "the pseudo-label report",
                ("evaluate", "--out"): "the metrics",
                ("validate", "--out"): "the validation scores",
                ("table", "--summary"): "the table's summary"}


def run_of(args: argparse.Namespace) -> dict[str, Any]:
    """The run a parsed command writes for: its dataset, model, method or labeler, seed, part."""
    return {name: getattr(args, name, None)
            for name in ("dataset", "model", "method", "labeler", "seed", "part")}


def check_output_kinds(step: str, files: dict[str, Path],
                       run: dict[str, Any] | None = None) -> None:
    """Refuse an output path that holds another kind of wscat file than the step writes there (a
    checkpoint given as a split's --out), or a file of its kind that records another run than
    `run` (seed 2's split as seed 1's --out): writing would destroy it. A file of the step's
    own kind and run is rewritten, as a rerun does; a file of no wscat kind (a table) too. Any
    path inside a run's DVCLive folder (its curves, wscat.file_kinds.run_of_curves) is refused,
    whatever it holds, by every step."""
    from wscat.file_kinds import curves_output, other_kind, other_run

    for flag, path in files.items():
        inside = curves_output(path)
        if inside is not None:  # a run's curves, whatever their file's name or kind
            raise ValueError(f"{flag} {path} {inside}, which `wscat {step}` would overwrite; "
                             "choose a path outside it (nothing was written)")
    if step == "export":  # wscat.export replaces only an earlier entry and its own state dict
        return
    for flag, path in files.items():
        own = OUTPUT_KINDS.get((step, flag.split()[0]))
        what = other_kind(path, own)
        if what is not None:
            raise ValueError(f"{flag} {path} holds {what}, which `wscat {step}` would "
                             "overwrite; choose another path, or delete that file first "
                             "(nothing was written)")
        what = other_run(path, own, run or {})
        if what is not None:
            raise ValueError(f"{flag} {path} holds {what}, which `wscat {step}` would "
                             f"overwrite; pass another {flag.split()[0]}, or delete that file "
                             "if you mean to replace it (nothing was written)")


def check_outputs(args: argparse.Namespace) -> None:
    """Before any work: every output's folder exists or can be made, and takes files."""
    check_writable(*(getattr(args, name, None) for name in _output_names(args)))
    check_writable(getattr(args, "out_dir", None), folders=True)


def check_json_outputs(args: argparse.Namespace) -> None:
    """An output that gets JSON is named .json: `--metrics c.png` would write JSON under an
    image's name (wscat.file_kinds.check_json_output)."""
    from wscat.file_kinds import check_json_output

    for flag, path in step_outputs(args)[0].items():
        if (args.step, flag) in JSON_OUTPUTS:
            check_json_output(path, flag, JSON_OUTPUTS[args.step, flag])


def run(args: argparse.Namespace) -> None:
    """Check the outputs, lock them, check the names and the kinds of the inputs, then run the
    subcommand's step."""
    guard(args)
    check_outputs(args)
    files, folders = step_outputs(args)
    with contextlib.ExitStack() as locks:
        command = " ".join(["wscat", *sys.argv[1:]])[:200]
        for path in sorted({*files.values(), *folders.values()}):
            locks.enter_context(output_lock(path, command))
        params = load_params(args.params) if hasattr(args, "params") else None
        if params is not None:
            _check_names(params, args)
        check_input_kinds(args, params)
        check_json_outputs(args)
        COMMANDS[args.step].run(args, params)


def _quiet_broken_pipe() -> None:
    """stdout's reader went away (`wscat list-experiments | head`): send the rest to /dev/null so
    that Python's final flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a step runs, SIGTERM raises `Terminated` (a KeyboardInterrupt) in the main thread,
    so it ends as Ctrl-C does: locks released, partial outputs removed, one line, exit 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Run one step; every failure ends in one line on stderr and a non-zero exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version (0) or a usage error, already one line (2)
        return done.code if isinstance(done.code, int) else 0 if done.code is None else 2
    except KeyboardInterrupt:
        print(STARTING, file=sys.stderr)
        return INTERRUPTED
    keep_freed_memory()  # fewer page faults per tensor op; the same bits (wscat/memory.py)
    try:
        with sigterm_as_interrupt():
            run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 0
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - the one error path
        line = describe(error)
        if isinstance(error.__cause__ if isinstance(error, ConfigError) else error,
                      OwnMethodError) and debug_requested(args.debug):
            raise  # your method's own error: its traceback is yours to read
        if line is None:
            if debug_requested(args.debug):
                raise
            line = (f"unexpected {type(error).__name__}: {first_line(error)} (a bug: rerun with "
                    f"--debug or {DEBUG_ENV}=1 for the traceback and report it)")
        print(f"wscat {args.step}: error: {line}", file=sys.stderr)
        return exit_code(error)
    return 0


def console() -> int:
    """The `wscat` command (and `python -m wscat`): `main`, then an exit that skips the
    interpreter's last garbage collections over the ~190,000 objects torch's import made
    (~0.5 s of a job's ~2 s start-up: benchmarks/startup.py). `gc.freeze` only takes them out
    of that walk; every output was written and closed inside `main` (wscat.io.atomic_path), and
    atexit handlers and the flush of stdout and stderr run as before. Not in `main`, which
    tests and Python callers run in their own process."""
    code = main()
    _ignore_late_signals()
    gc.freeze()
    return code


def _ignore_late_signals() -> None:
    """The step has ended (its outputs written, its line printed): a Ctrl-C or SIGTERM now could
    only interrupt the interpreter's teardown, printing an atexit handler's KeyboardInterrupt
    traceback (torch's) after a finished step, or ending it silently with 130. Ignored instead:
    the exit status stays the step's."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(console())
