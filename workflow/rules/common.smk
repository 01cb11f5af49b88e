"""Helpers for the rules: config validation, targets and the paths one job needs from another.

The helpers name the files one job needs from another and pick the params.yaml sections each
job depends on: Snakemake re-runs a job when its params change, so a params.yaml edit re-runs
exactly the affected jobs.
"""

import copy
import csv
import json
import os
import shlex
import sys

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from wscat.config import ConfigError, evaluation_for, method_for, validate_params
from wscat.data import archive_status, raw_files
from wscat.data.capacity import split_problem
from wscat.report import paper as paper_files
from wscat.evaluation import ATTACKS
from wscat.report.names import display_name


wildcard_constraints:
    experiment=r"[a-z][a-z0-9_-]*",
    dataset=r"[a-z][a-z0-9_-]*",
    model=r"[a-z][a-z0-9_-]*",
    method=r"[a-z][a-z0-9.-]*",
    labeler=r"[a-z][a-z0-9-]*",
    seed=r"\d+",
    tier=r"[a-z][a-z0-9_-]*",
    label=r"(Tab|tab)-[A-Za-z0-9-]+(?<!-vs-paper)",
    figure=r"Fig-[a-z]+",


# The keys of a dataset section that decide its split; the threat model and augmentation
# (eps, step sizes, augment) do not, so changing them must not re-split and re-run everything.
SPLIT_KEYS = (
    "test_fraction",
    "labelled",
    "val_fraction",
    "val_max",
    "unlabelled_fraction",
    "subset",
)


def stop(message):
    """End the workflow with one clear line (a traceback would bury it)."""
    print(f"wscat: {message}", file=sys.stderr)
    sys.exit(1)


def use_given_configfile():
    """`--configfile FILE` stands for params.yaml: Snakemake lays FILE over the Snakefile's
    params.yaml, so a whole params file listing fewer experiments (or methods) would inherit
    params.yaml's others; the run's config is FILE alone. --config is refused: the subcommands
    would not see it."""
    if workflow.config_settings.config:
        stop(
            "--config overrides are not supported: wscat subcommands read one params file; "
            "copy params.yaml, change it and pass it with --configfile"
        )
    if workflow.overwrite_configfiles:
        config.clear()
        config.update(copy.deepcopy(workflow.config_settings.overwrite_config))


def validate_config():
    """The schema via Snakemake's validate, then wscat's cross-reference checks, then the
    splits of the datasets whose size is known without their archives.

    jsonschema's own message dumps the offending schema; wscat.config words the same failure
    on one line, so a schema failure is reported through it.
    """
    try:
        validate(config, "../schemas/params.schema.yaml", set_default=False)
        schema_error = None
    except WorkflowError as error:
        schema_error = error
    try:
        expanded = validate_params(config)
    except ConfigError as error:
        stop(str(error))
    if schema_error is not None:
        stop(str(schema_error).splitlines()[0])
    for name, dataset in expanded["datasets"].items():  # splits of datasets of fixed size
        problem = split_problem(name, dataset)
        if problem:
            stop(problem)
    config.update(expanded)  # the paper section's runs spelled out, as `wscat` reads them


def get_params_path():
    """The params file the `wscat` subcommands read: the config file this run loaded.

    Subcommands see one file, so the effective config must be exactly one file's content
    (`--configfile other.yaml` with a whole params file works; `--config key=value` does not).
    """
    files = workflow.overwrite_configfiles or workflow.configfiles
    if len(files) > 1:
        stop(
            f"{len(files)} --configfile files given; wscat subcommands read one params file, so "
            "merge them into one whole params file and pass that"
        )
    path = files[-1]
    with open(path) as handle:
        if validate_params(yaml.safe_load(handle)) != config:
            stop(f"the effective config differs from {path}; pass a whole params file")
    return str(path)


def to_json(section):
    """A params section as a stable string (Snakemake compares params to decide re-runs)."""
    return json.dumps(section, sort_keys=True)


# --- targets -------------------------------------------------------------------------------


def get_all_targets():
    """Every experiment's table."""
    return expand("results/tables/{experiment}.tex", experiment=config["experiments"])


def get_experiment(wildcards):
    return config["experiments"][wildcards.experiment]


def get_experiment_metrics(wildcards):
    """The per-(method, seed) metrics an experiment's table aggregates."""
    experiment = get_experiment(wildcards)
    return expand(
        "results/metrics/{dataset}/{model}/{method}/seed{seed}.json",
        dataset=experiment["dataset"],
        model=experiment["model"],
        method=experiment["methods"],
        seed=experiment["seeds"],
    )


# --- data ----------------------------------------------------------------------------------


def get_raw_files(dataset):
    """The archives a dataset is read from (none for the embedded default), as strings."""
    return [str(path) for path in raw_files(dataset, config["datasets"][dataset])]


def get_fetch_groups():
    """One fetch job per distinct set of archives: (rule name, dataset, archives)."""
    groups, seen = [], set()
    for dataset in config["datasets"]:
        files = tuple(get_raw_files(dataset))
        if files and files not in seen:
            seen.add(files)
            groups.append((f"fetch_{dataset.replace('-', '_')}", dataset, list(files)))
    return groups


_archive_checked = {}


def get_split_input(wildcards):
    """The dataset's archives. While the DAG is built, a split the dataset cannot hold (for the
    datasets whose size is fixed), a corrupt archive (md5) or one that is neither here nor
    downloadable stops the run with the split step's one line (WSCAT_SKIP_ARCHIVE_CHECK=1 skips
    this, for tools that only read the DAG)."""
    dataset = wildcards.dataset
    files = get_raw_files(dataset)
    if files and not os.environ.get("WSCAT_SKIP_ARCHIVE_CHECK"):
        if dataset not in _archive_checked:
            _archive_checked[dataset] = archive_status(dataset, config["datasets"][dataset])
        if _archive_checked[dataset]:
            stop(_archive_checked[dataset])
    return [ancient(path) for path in files]


# --- split ---------------------------------------------------------------------------------


def get_split(wildcards):
    return f"results/splits/{wildcards.dataset}/seed{wildcards.seed}.npz"


def get_split_params(wildcards):
    dataset = config["datasets"][wildcards.dataset]
    split = {key: dataset[key] for key in SPLIT_KEYS if key in dataset}
    return to_json({**split, "source": dataset.get("source", wildcards.dataset)})


# --- train ---------------------------------------------------------------------------------


def get_method(wildcards):
    return method_for(config, wildcards.method, wildcards.dataset)


def get_pseudo_input(wildcards):
    """The labeler's pseudo-labels for a method trained on `data: pseudo`, and DMAT's generated
    images when it has some; nothing otherwise."""
    method = get_method(wildcards)
    inputs = {}
    if method.get("generated"):
        inputs["generated"] = method["generated"]
        if method.get("generated_labeler"):
            path = "results/models/{w.dataset}/{w.model}/{labeler}/seed{w.seed}/best.pt"
            inputs["labeler_checkpoint"] = path.format(
                w=wildcards, labeler=method["generated_labeler"]
            )
    if method["data"] == "pseudo":
        path = "results/pseudo/{w.dataset}/{w.model}/{labeler}/seed{w.seed}.npz"
        inputs["pseudo"] = path.format(w=wildcards, labeler=method["labeler"])
    return inputs


def get_pseudo_flag(wildcards, input):
    flags = f" --pseudo {input.pseudo}" if "pseudo" in input.keys() else ""
    if "labeler_checkpoint" in input.keys():
        flags += f" --labeler-checkpoint {input.labeler_checkpoint}"
    return flags


def get_out_dir(wildcards, output):
    """train writes best.pt, last.pt and train_log.csv into one folder."""
    return os.path.dirname(output.best)


def get_train_params(wildcards):
    """What training reads: the dataset (threat model, augmentation), its schedule, the method,
    and the steps of the validation attack that selects best.pt."""
    evaluation = evaluation_for(config, wildcards.dataset)
    return to_json(
        {
            "dataset": config["datasets"][wildcards.dataset],
            "training": config["training"][wildcards.dataset],
            "model": config["models"][wildcards.model],
            "method": method_for(config, wildcards.method, wildcards.dataset),
            "validation": {key: evaluation[key] for key in ("pgd_steps", "cw_steps")},
        }
    )


# --- pseudo-label --------------------------------------------------------------------------


def get_labeler_checkpoint(wildcards):
    """Pseudo-labels come from the labeler's selected checkpoint."""
    return "results/models/{w.dataset}/{w.model}/{w.labeler}/seed{w.seed}/best.pt".format(
        w=wildcards
    )


# --- evaluate ------------------------------------------------------------------------------


def get_checkpoint(wildcards):
    """The checkpoint evaluation attacks: best (validation-selected) or last, per params.yaml."""
    path = "results/models/{w.dataset}/{w.model}/{w.method}/seed{w.seed}/{name}.pt"
    return path.format(w=wildcards, name=evaluation_for(config, wildcards.dataset)["checkpoint"])


def get_evaluate_params(wildcards):
    """The core attacks and the dataset's threat model (NRF and the checks are the extras')."""
    dataset = config["datasets"][wildcards.dataset]
    evaluation = evaluation_for(config, wildcards.dataset)
    return to_json(
        {
            "evaluation": {k: v for k, v in evaluation.items() if k not in ("nrf", "checks")},
            "threat": {key: dataset[key] for key in ("eps", "eval_step_size")},
            "deterministic": config["training"][wildcards.dataset]["deterministic"],
        }
    )


def get_evaluate_extra_params(wildcards):
    """The whole attack suite and the dataset's threat model."""
    dataset = config["datasets"][wildcards.dataset]
    return to_json(
        {
            "evaluation": evaluation_for(config, wildcards.dataset),
            "threat": {key: dataset[key] for key in ("eps", "eval_step_size")},
            "deterministic": config["training"][wildcards.dataset]["deterministic"],
        }
    )


# --- report: the columns `snakemake --report` shows beside each result --------------------------
# Label functions run when the report is built, so they may read the finished output.


def get_train_labels(wildcards, output):
    """A training run: its method, seed, epochs and last validation scores (train_log.csv)."""
    with open(output.log) as handle:
        rows = list(csv.DictReader(handle))
    last = {key: value for row in rows for key, value in row.items() if value}
    robust = next(
        (f"{key[4:].upper()} {last[key]}" for key in ("val_cw", "val_pgd") if key in last), "-"
    )
    return {
        "method": display_name(wildcards.method),
        "seed": wildcards.seed,
        "epochs": len(rows),
        "val natural": last.get("val_natural", "-"),
        "val robust": robust,
    }


def get_metrics_labels(wildcards, output):
    """A run's test accuracies (%), as in the experiment tables."""
    with open(output[0]) as handle:
        accuracy = json.load(handle)["accuracy"]
    order = [*ATTACKS, "Mean"]  # the tables' row order
    attacks = sorted(accuracy, key=lambda name: order.index(name) if name in order else len(order))
    return {
        "method": display_name(wildcards.method),
        "seed": wildcards.seed,
        **{attack: f"{accuracy[attack]:.2f}" for attack in attacks},
    }


def get_pseudo_labels(wildcards, output):
    """A labeler's accuracy on the unlabelled part (%)."""
    with open(output.metrics) as handle:
        accuracy = json.load(handle)["accuracy"]
    return {
        "labeler": display_name(wildcards.labeler),
        "seed": wildcards.seed,
        "accuracy": f"{accuracy:.2f}",
    }


# --- table ---------------------------------------------------------------------------------


def get_table_params(wildcards):
    return to_json(get_experiment(wildcards))


# --- the paper's tables and figures (paper.smk) ------------------------------------------


def get_paper_table_input(wildcards):
    try:
        return paper_files.table_inputs(config, wildcards.tier, wildcards.label)
    except ConfigError as error:
        stop(str(error))


def get_paper_figure_input(wildcards):
    try:
        return paper_files.figure_inputs(config, wildcards.tier, wildcards.figure)
    except ConfigError as error:
        stop(str(error))


def get_paper_cells_flag(wildcards):
    """--paper-cells where a tier dataset's companion compares with the paper's cells of other
    names (the CIFAR-10 proxy's WRN-16-4 beside CIFAR10 WRN-28-10); nothing otherwise."""
    try:
        cells = paper_files.paper_cells(config, wildcards.tier, wildcards.label)
    except ConfigError as error:
        stop(str(error))
    return "" if cells is None else " --paper-cells " + " ".join(map(shlex.quote, cells))


def get_paper_section(wildcards):
    """What a tier's outputs read from params.yaml: the tier, and every experiment it names."""
    tier = paper_files.tier_spec(config, wildcards.tier)
    experiments = {e[part]["experiment"] for e in tier["datasets"] for part in paper_files.parts(e)}
    return to_json(
        {
            "tier": tier,
            "experiments": {name: config["experiments"][name] for name in sorted(experiments)},
        }
    )


use_given_configfile()
validate_config()
PARAMS = get_params_path()
