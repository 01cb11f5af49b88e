"""Helpers for the rules: config validation, targets and the paths one job needs from another.

The helpers name the files one job needs from another and pick the params.yaml sections each
job depends on: Snakemake re-runs a job when its params change, so a params.yaml edit re-runs
exactly the affected jobs.
"""
import json
import os
import sys

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from wscat.config import ConfigError, validate_params


wildcard_constraints:
    experiment=r"[a-z][a-z0-9_-]*",
    dataset=r"[A-Za-z0-9_]+",
    model=r"[A-Za-z0-9_]+",
    method=r"[a-z][a-z0-9-]*",
    labeler=r"[a-z][a-z0-9-]*",
    seed=r"\d+",


# The keys of a dataset section that decide its split; the threat model and augmentation
# (eps, step sizes, augment) do not, so changing them must not re-split and re-run everything.
SPLIT_KEYS = ("test_fraction", "labelled", "val_fraction", "val_max")


def stop(message):
    """End the workflow with one clear line (a traceback would bury it)."""
    print(f"wscat: {message}", file=sys.stderr)
    sys.exit(1)


def validate_config():
    """The schema via Snakemake's validate, then wscat's cross-reference checks.

    jsonschema's own message dumps the offending schema; wscat.config words the same failure
    on one line, so a schema failure is reported through it.
    """
    try:
        validate(config, "../schemas/params.schema.yaml", set_default=False)
        schema_error = None
    except WorkflowError as error:
        schema_error = error
    try:
        validate_params(config)
    except ConfigError as error:
        stop(str(error))
    if schema_error is not None:
        stop(str(schema_error).splitlines()[0])


def get_params_path():
    """The params file the `wscat` subcommands read: the config file this run loaded.

    Subcommands see one file, so the effective config must be exactly one file's content
    (`--configfile other.yaml` with a whole params file works; `--config key=value` does not).
    """
    path = (workflow.overwrite_configfiles or workflow.configfiles)[-1]
    with open(path) as handle:
        if yaml.safe_load(handle) != config:
            stop(f"the effective config differs from {path}; wscat subcommands read one params "
                 "file, so pass a whole params file with --configfile instead of --config overrides")
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
    return expand("results/metrics/{dataset}/{model}/{method}/seed{seed}.json",
                  dataset=experiment["dataset"], model=experiment["model"],
                  method=experiment["methods"], seed=experiment["seeds"])


# --- split ---------------------------------------------------------------------------------

def get_split(wildcards):
    return f"results/splits/{wildcards.dataset}/seed{wildcards.seed}.npz"


def get_split_params(wildcards):
    dataset = config["datasets"][wildcards.dataset]
    return to_json({key: dataset[key] for key in SPLIT_KEYS})


# --- train ---------------------------------------------------------------------------------

def get_method(wildcards):
    return config["methods"][wildcards.method]


def get_pseudo_input(wildcards):
    """The labeler's pseudo-labels for a method trained on `data: pseudo`; nothing otherwise."""
    method = get_method(wildcards)
    if method["data"] != "pseudo":
        return {}
    path = "results/pseudo/{w.dataset}/{w.model}/{labeler}/seed{w.seed}.npz"
    return {"pseudo": path.format(w=wildcards, labeler=method["labeler"])}


def get_pseudo_flag(wildcards, input):
    return f" --pseudo {input.pseudo}" if "pseudo" in input.keys() else ""


def get_out_dir(wildcards, output):
    """train writes best.pt, last.pt and train_log.csv into one folder."""
    return os.path.dirname(output.best)


def get_train_params(wildcards):
    """What training reads: the dataset (threat model, augmentation), its schedule, the method,
    and the steps of the validation attack that selects best.pt."""
    evaluation = config["evaluation"]
    return to_json({
        "dataset": config["datasets"][wildcards.dataset],
        "training": config["training"][wildcards.dataset],
        "method": get_method(wildcards),
        "validation": {key: evaluation[key] for key in ("pgd_steps", "cw_steps")},
    })


# --- pseudo-label --------------------------------------------------------------------------

def get_labeler_checkpoint(wildcards):
    """Pseudo-labels come from the labeler's selected checkpoint."""
    return "results/models/{w.dataset}/{w.model}/{w.labeler}/seed{w.seed}/best.pt".format(w=wildcards)


# --- evaluate ------------------------------------------------------------------------------

def get_checkpoint(wildcards):
    """The checkpoint evaluation attacks: best (validation-selected) or last, per params.yaml."""
    path = "results/models/{w.dataset}/{w.model}/{w.method}/seed{w.seed}/{name}.pt"
    return path.format(w=wildcards, name=config["evaluation"]["checkpoint"])


def get_evaluate_params(wildcards):
    """The attack suite and the dataset's threat model."""
    dataset = config["datasets"][wildcards.dataset]
    return to_json({"evaluation": config["evaluation"],
                    "threat": {key: dataset[key] for key in ("eps", "eval_step_size")}})


# --- table ---------------------------------------------------------------------------------

def get_table_params(wildcards):
    return to_json(get_experiment(wildcards))


validate_config()
PARAMS = get_params_path()
