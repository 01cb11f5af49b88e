"""`wscat <step>`: fetch, split, train, pseudo-label, evaluate, table, export, analyse,
list-experiments, and the paper's tables and figures (paper-table, paper-compare, paper-figure,
paper-index, curves, validate).
Bad input, an unwritable output or Ctrl-C: one line, exit 2 (130 for Ctrl-C); an unexpected
error: one line, exit 1, its traceback with --debug or WSCAT_DEBUG=1."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wscat.config import ConfigError, load_params, method_for
from wscat.errors import DEBUG_ENV, INTERRUPTED, debug_requested, describe, exit_code, first_line
from wscat.io import check_writable


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wscat", description=__doc__)
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of an unexpected error (or set {DEBUG_ENV}=1)")
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")

    p = steps.add_parser("fetch", help="download (CIFAR) or check the archives of a dataset (md5)")
    _common(p, "dataset")

    p = steps.add_parser("split", help="class-balanced labelled/unlabelled/validation split of one seed")
    _common(p, "dataset", "seed")
    p.add_argument("--out", type=Path, required=True)

    p = steps.add_parser("train", help="train one method (resumes from OUT_DIR/resume/last.pt)")
    _common(p, "dataset", "model", "method", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--pseudo", type=Path, default=None, help="pseudo-labels (methods with data: pseudo)")
    p.add_argument("--labeler-checkpoint", type=Path, default=None,
                   help="labels unlabelled generated images (methods with generated_labeler)")
    p.add_argument("--out-dir", type=Path, required=True)

    p = steps.add_parser("pseudo-label", help="label the unlabelled part with a trained labeler")
    _common(p, "dataset", "model", "labeler", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--metrics", type=Path, required=True)

    p = steps.add_parser("evaluate", help="Natural, FGSM, PGD, CW, AutoAttack (standard and the "
                         "paper's variant), NRF and gradient-masking checks on the test set")
    _common(p, "dataset", "model", "method", "seed", "threads")
    p.add_argument("--split", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part", choices=("all", "core", "extra"), default="all",
                   help="core: the paper's five attacks and Mean; extra: AA-paper, NRF and the "
                        "masking checks (needs --core); all: both (default)")
    p.add_argument("--core", type=Path, default=None, help="the core metrics file (--part extra)")

    p = steps.add_parser("table", help="render an experiment's table (.tex, .csv, summary .json)")
    _common(p, "experiment")
    p.add_argument("--tex", type=Path, required=True)
    p.add_argument("--csv", type=Path, required=True)
    p.add_argument("--summary", type=Path, required=True)
    p.add_argument("--md", type=Path, default=None, help="the Markdown twin (README)")
    p.add_argument("--paired-csv", type=Path, default=None,
                   help="paired bootstrap comparison against WSCAT (.csv)")
    p.add_argument("--paired-tex", type=Path, default=None, help="the same as LaTeX")
    p.add_argument("metrics", type=Path, nargs="+", help="per-(method, seed) metrics JSON files")

    p = steps.add_parser("export", help="a checkpoint as a RobustBench-style entry (JSON + state dict)")
    p.add_argument("--checkpoint", type=Path, required=True, help="e.g. results/models/.../best.pt")
    p.add_argument("--metrics", type=Path, required=True,
                   help="its run's metrics JSON (results/metrics/...): clean and AutoAttack accuracy")
    p.add_argument("--out", type=Path, required=True,
                   help="the entry, NAME.json; the state dict goes to NAME.pt beside it")
    p.add_argument("--name", default=None, help="model name (default: method-dataset-model-seedN)")

    p = steps.add_parser("analyse", help="what Fig-similarity or Fig-feature shows on one dataset "
                         "of a paper tier, computed on its checkpoints (.npz)")
    _common(p, "tier", "figure", "dataset", "threads")
    p.add_argument("--out", type=Path, required=True, help="results/analysis/TIER/FIGURE/DATASET.npz")
    p.add_argument("--results", default="results", help="the results folder (default: results)")

    p = steps.add_parser("list-experiments", help="every experiment, method and dataset of the "
                         "params file, generated ones (wscat-beta0.2, digits-full) included")
    _common(p)

    from wscat.report import commands

    commands.add_parsers(steps, _common)
    return parser


def _device(args: argparse.Namespace):
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(args.device)
    except RuntimeError as error:
        raise ValueError(f"--device {args.device}: {first_line(error)}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: no CUDA device here; use --device cpu")
    return device


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
    check_outputs(args)
    if args.step == "export":  # reads the checkpoint and its metrics only, no params file
        from wscat.export import export_model

        entry = export_model(args.checkpoint, args.metrics, args.out, name=args.name)
        print(f"exported {entry['name']}: clean {entry['clean_acc']}%, AutoAttack "
              f"{entry['autoattack_acc']}% at eps {entry['eps']} -> {args.out}, {entry['state_dict']}")
        return
    from wscat.report import commands

    params = load_params(args.params) if hasattr(args, "params") else None
    if params is not None:
        _check_names(params, args)
    if args.step in commands.STEPS:
        commands.run(args, params, _device)
        return
    if args.step == "list-experiments":
        import yaml

        from wscat.sweeps import describe

        print(describe(yaml.safe_load(args.params.read_text()), params, str(args.params)))
        return
    if args.step == "analyse":
        from wscat.steps import analyse

        analyse.run(params, tier=args.tier, figure=args.figure, dataset=args.dataset,
                    out=args.out, device=_device(args), root=args.results)
        return
    from wscat import pipeline

    if args.step == "fetch":
        from wscat.data import fetch_dataset

        files = fetch_dataset(args.dataset, params["datasets"][args.dataset])
        print("\n".join(f"ok {path}" for path in files) or f"{args.dataset}: nothing to fetch")
    elif args.step == "split":
        pipeline.run_split(params, args.dataset, args.seed, args.out)
    elif args.step == "train":
        summary = pipeline.run_train(params, dataset=args.dataset, model=args.model,
                                     method=args.method, seed=args.seed, split_path=args.split,
                                     pseudo_path=args.pseudo, out_dir=args.out_dir,
                                     labeler_checkpoint=args.labeler_checkpoint,
                                     device=_device(args))
        print(f"trained {args.method} seed {args.seed}: best epoch {summary['best_epoch']}")
    elif args.step == "pseudo-label":
        report = pipeline.run_pseudo_label(params, dataset=args.dataset, seed=args.seed,
                                           split_path=args.split, checkpoint=args.checkpoint,
                                           out=args.out, metrics=args.metrics,
                                           labeler=args.labeler, device=_device(args),
                                           model=args.model)
        print(f"pseudo-label accuracy ({args.labeler}): {report['accuracy']:.2f}%")
    elif args.step == "evaluate":
        result = pipeline.run_evaluate(params, dataset=args.dataset, model=args.model,
                                       method=args.method, seed=args.seed, split_path=args.split,
                                       checkpoint=args.checkpoint, out=args.out,
                                       device=_device(args), part=args.part,
                                       core_path=args.core)
        print(" ".join(f"{k}={v:.2f}" for k, v in result["accuracy"].items()))
    elif args.step == "table":
        from wscat.report import write_table
        from wscat.report.names import display_name, is_adversarial

        if args.experiment not in params["experiments"]:
            raise ConfigError(f"unknown experiment '{args.experiment}'; configured: "
                              f"{', '.join(params['experiments'])}")
        experiment = params["experiments"][args.experiment]
        methods = experiment["methods"]
        write_table(experiment=args.experiment, dataset=experiment["dataset"],
                    model=experiment["model"], metrics_files=args.metrics, methods=methods,
                    display_names={m: display_name(m) for m in methods},
                    adversarial={m for m in methods if is_adversarial(method_for(params, m))},
                    tex_path=args.tex, csv_path=args.csv, summary_path=args.summary,
                    notes=table_notes(params, experiment["dataset"], methods), md_path=args.md,
                    paired_csv_path=args.paired_csv, paired_tex_path=args.paired_tex)


def table_notes(params: dict, dataset: str, methods: list[str]) -> list[str]:
    """Footnotes a table owes its reader: where a column departs from its paper's recipe."""
    from wscat.report.names import display_name

    notes = []
    for method in methods:
        knobs = method_for(params, method, dataset)
        if "generated_fraction" in knobs and not knobs.get("generated"):
            notes.append(f"{display_name(method)}: no generated data configured "
                         f"(methods.{method}.generated is null), so it trains its recipe "
                         "(TRADES with label smoothing and EMA) on the available data only.")
    return notes


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
