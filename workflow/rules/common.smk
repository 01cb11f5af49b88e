"""Lookups for the rules: targets, the paths one job needs from another, and the params.yaml
sections each job depends on (Snakemake re-runs a job when its params change). The paths come
from wscat.paths, the sections and checks from wscat.workflow; nothing here imports torch.
"""

import os
import sys
from pathlib import Path

from wscat import interrupted
from wscat.io import outputs_being_written
from wscat import paths
from wscat import slurm_preflight
from wscat import targets
from wscat import workflow as wf
from wscat import workflow_profile
from wscat.config import ConfigError, evaluation_for
from wscat.report import paper as paper_files
from wscat.report import labels
from wscat.rebuild import rebuild_token


wildcard_constraints:
    experiment=r"[a-z][a-z0-9_-]*",
    dataset=r"[a-z][a-z0-9_-]*",
    model=r"[a-z][a-z0-9_-]*",
    method=r"[a-z][a-z0-9.-]*",
    labeler=r"[a-z][a-z0-9-]*",
    seed=r"\d+",
    tier=r"[a-z][a-z0-9_-]*",
    label=r"(Tab|tab)-[A-Za-z0-9-]+(?<!-vs-paper)",
    figure=r"Fig-[a-z]+|robustness-curves",


def stop(message):
    """End the workflow with one clear line (a traceback would bury it)."""
    print(f"wscat: {message}", file=sys.stderr)
    sys.exit(2)


def or_stop(lookup):
    """`lookup(wildcards)`, a ConfigError ending the run in one line."""

    def checked(wildcards):
        try:
            return lookup(wildcards)
        except ConfigError as error:
            stop(str(error))

    return checked


def known(lookup):
    """`lookup(wildcards)` once the names in the wildcards are checked against params.yaml
    (wscat.workflow.check_names): a typo in a target's path is one line, not a traceback."""

    def checked(wildcards):
        wf.check_names(config, dict(wildcards.items()))
        return lookup(wildcards)

    return or_stop(checked)


# The params file the `wscat` subcommands read (--configfile FILE stands for params.yaml),
# validated once; `config` becomes its content with the paper section's runs spelled out.
# PARAMS, the rules' `params_file`, is not recorded: a job re-runs when the sections it reads
# change (its `config` param), not when the same content comes under another file name.
PARAMS_PATH, _params = or_stop(wf.load_config)(workflow)
PARAMS = wf.unrecorded(PARAMS_PATH)
config.clear()
config.update(_params)


def loaded_by_snakemake():
    """Whether this is the `snakemake` command itself loading the workflow (not a job inside it
    re-reading the Snakefile on a cluster node)."""
    mode = getattr(workflow.workflow_settings, "exec_mode", None)
    return getattr(mode, "name", "DEFAULT") == "DEFAULT"


# The `snakemake` command line loading the workflow (None under the Python API): its targets and
# whether it is a dry run.
CLI = slurm_preflight.cli_args()

# A misspelt --workflow-profile: Snakemake ignores it without a word and runs every job locally.
NO_PROFILE = workflow_profile.missing(CLI, Path(workflow.basedir))
if loaded_by_snakemake() and NO_PROFILE:
    stop(NO_PROFILE)


# The rules call `wscat`: `.venv/bin/snakemake` without the venv on PATH finds the one beside
# it (wscat.workflow.wscat_on_path); with none anywhere, one warning line (a conda run has its own).
if loaded_by_snakemake():
    no_wscat = wf.wscat_on_path()
    if no_wscat and not getattr(workflow.deployment_settings, "deployment_method", None):
        print(f"wscat: warning: {no_wscat}", file=sys.stderr)


# A training cut short by a killed --forcerun: its old results stand in for it (wscat.interrupted).
if loaded_by_snakemake():
    for line in interrupted.warnings(
        targets=getattr(CLI, "targets", None),
        profile=getattr(CLI, "workflow_profile", None),
        params=config,
    ):
        print(f"wscat: {line}", file=sys.stderr)


def stop_on_outputs_being_written():
    """Before any job (onstart): an output of a job to run, or its run folder, that another
    wscat process writes now (`wscat train` or `evaluate` by hand, the API, another snakemake's
    job) ends the run in one line, exit 2. Snakemake would delete that process's files before
    the job ran and again once its `wscat` step, refused the output lock, failed."""
    busy = outputs_being_written(
        str(output) for job in workflow.dag.needrun_jobs() for output in job.output
    )
    if busy:
        path, writer = busy[0]
        more = f" (and {len(busy) - 1} more)" if len(busy) > 1 else ""
        stop(
            f"{path}{more} is being written by another wscat process ({writer}); this run "
            "would delete its files: wait for it to finish, then run this again (nothing ran)"
        )


onstart:
    stop_on_outputs_being_written()


def check_slurm_run():
    """Through the slurm executor: the profile's keys, the Slurm client and the cluster checked
    once, before any job (wscat.slurm_preflight); a problem ends the run in one line, exit 2 (a
    dry run only warns). Called last in the Snakefile, once every rule exists."""
    problem, dry_run = slurm_preflight.problem(workflow)
    if problem and dry_run:
        print(f"wscat: warning: {problem} (a real run stops here)", file=sys.stderr)
    elif problem:
        print(f"wscat: {problem}", file=sys.stderr)
        sys.exit(2)


# --- targets -------------------------------------------------------------------------------


def get_default_targets():
    """The demo's table: what a bare `snakemake` (and `snakemake -n`) builds."""
    return or_stop(lambda _: targets.default_targets(config))(None)


def get_named_targets():
    """(rule name, files, one line) of each experiment and paper tier, built by name."""
    return or_stop(lambda _: targets.named_targets(config))(None)


@or_stop
def get_experiment(wildcards):
    """An experiment with a table; an unknown one (a typo): one line listing the targets."""
    return targets.table_experiment(config, wildcards.experiment)


def get_experiment_metrics(wildcards):
    """The per-(method, seed) metrics an experiment's table aggregates."""
    experiment = get_experiment(wildcards)
    return expand(
        paths.METRICS,
        dataset=experiment["dataset"],
        model=experiment["model"],
        method=experiment["methods"],
        seed=experiment["seeds"],
    )


@or_stop
def get_robustness_experiment(wildcards):
    """Any experiment (its robustness curves); an unknown one: one line listing them."""
    return targets.robustness_experiment(config, wildcards.experiment)


@or_stop
def get_robustness_inputs(wildcards):
    """Both metrics files of each of an experiment's runs: its robustness curves draw the extras."""
    return targets.robustness_inputs(config, wildcards.experiment)


def get_robustness_params(wildcards):
    return wf.to_json(get_robustness_experiment(wildcards))


# --- split, train, pseudo-label, evaluate ---------------------------------------------------


@known
def get_split_input(wildcards):
    """The dataset's archives, checked while the DAG is built (wscat.workflow.checked_archives)."""
    return [ancient(path) for path in wf.checked_archives(config, wildcards.dataset)]


@known
def get_split(wildcards):
    return paths.SPLIT.format(**wildcards)


def get_split_params(wildcards):
    return wf.split_params(config, wildcards.dataset)


@known
def get_training_inputs(wildcards):
    """Pseudo-labels, generated images and their labeler's checkpoint, where the method uses them."""
    return wf.training_inputs(config, **wildcards)


def get_training_flags(wildcards, input):
    return wf.flags(pseudo=input.get("pseudo"), labeler_checkpoint=input.get("labeler_checkpoint"))


def get_train_params(wildcards):
    return wf.train_params(config, wildcards.dataset, wildcards.model, wildcards.method)


def get_labeler_checkpoint(wildcards):
    """Pseudo-labels come from the labeler's selected checkpoint."""
    return paths.CHECKPOINT.format(**wildcards, method=wildcards.labeler, name="best")


def get_checkpoint(wildcards):
    """The checkpoint evaluation attacks: best (validation-selected) or last, per params.yaml."""
    name = evaluation_for(config, wildcards.dataset)["checkpoint"]
    return paths.CHECKPOINT.format(**wildcards, name=name)


def trained_method(wildcards):
    """The method whose training a job is about: the labeler for pseudo_label, else the
    method (None for a split)."""
    return wildcards.get("labeler") or wildcards.get("method")


@or_stop
def get_training_fingerprint(wildcards):
    """The fingerprint of the training that made the checkpoint a job reads: a training change
    makes the job's outputs stale even where the checkpoint is missing (a failed retraining)."""
    return wf.training_fingerprint(
        config, wildcards.dataset, wildcards.model, trained_method(wildcards)
    )


def get_priority(rule):
    """The start order of a rule's ready jobs (wscat.workflow.job_priority: the splits, then
    the labeler chains, robust models' attacks before the others'); outputs do not depend on it."""

    def priority(wildcards):
        return wf.job_priority(config, rule, wildcards.dataset, trained_method(wildcards))

    return priority


def get_evaluate_params(wildcards):
    return wf.evaluate_params(config, wildcards.dataset)


def get_validation_settings(wildcards):
    """What `wscat validate` measures with (wscat.workflow.validation_fingerprint): the
    selection's PGD steps, not the test-time attacks'."""
    return wf.validation_fingerprint(config, wildcards.dataset)


def get_evaluate_extra_params(wildcards):
    return wf.evaluate_params(config, wildcards.dataset, extra=True)


# --- table and the paper's tables and figures (a tier's missing experiment: one line) ------


def get_table_params(wildcards):
    return wf.to_json(get_experiment(wildcards))


def recorded(path):
    """Whether Snakemake holds a record of `path` (.snakemake/metadata), which it needs to compare
    a job's params; True where the run has no such records to ask."""
    from snakemake.io import IOFile

    persistence = getattr(workflow, "persistence", None)
    try:
        return persistence is None or persistence.metadata(IOFile(path)) is not None
    except Exception:  # noqa: BLE001 - Snakemake's internals moved: assume a record, as before
        return True


# A dry run (`snakemake -n`) shows the re-run a missing input would cause but records nothing:
# put the file back before the real run and nothing re-runs (wscat.rebuild).
DRY_RUN = bool(getattr(CLI, "dryrun", False))


def get_table_rebuild(wildcards):
    """Changes when the table exists and a metrics file it aggregates does not (wscat.rebuild)."""
    return rebuild_token(
        expand(paths.TABLE_TEX, experiment=wildcards.experiment),
        get_experiment_metrics(wildcards),
        recorded=recorded,
        write=not DRY_RUN,
    )


@or_stop
def get_paper_table_input(wildcards):
    return paper_files.table_inputs(config, wildcards.tier, wildcards.label)


def get_paper_table_rebuild(wildcards):
    """Changes when the paper table exists and an input it reads does not (wscat.rebuild)."""
    return rebuild_token(
        expand(paths.PAPER_TABLE_TEX, tier=wildcards.tier, label=wildcards.label),
        get_paper_table_input(wildcards),
        recorded=recorded,
        write=not DRY_RUN,
    )


@or_stop
def get_paper_figure_input(wildcards):
    return paper_files.figure_inputs(config, wildcards.tier, wildcards.figure)


@or_stop
def get_paper_outputs(wildcards):
    return paper_files.tier_outputs(config, wildcards.tier)


@or_stop
def get_paper_section(wildcards):
    return wf.paper_section(config, wildcards.tier)


@or_stop
def get_analysis_params(wildcards):
    return wf.analysis_params(config, wildcards.tier, wildcards.figure, wildcards.dataset)


@or_stop
def get_paper_cells_flag(wildcards):
    """--paper-cells where a tier dataset's companion compares with the paper's cells of other
    names (the CIFAR-10 proxy's WRN-16-4 beside CIFAR10 WRN-28-10); nothing otherwise."""
    return wf.flags(paper_cells=paper_files.paper_cells(config, wildcards.tier, wildcards.label))
