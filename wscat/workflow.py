"""What the Snakemake workflow asks of the package: its one params file, the params.yaml sections
each job depends on, the inputs a training run reads, command-line options and the archive check.

Snakemake re-runs a job when its params change, so each job's params are exactly the sections
it reads: a params.yaml edit re-runs exactly the affected jobs. Nothing here imports torch
(building the DAG must stay fast); workflow/rules/common.smk calls these with its `config`.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from wscat import own_method, paths
from wscat.config import (ConfigError, evaluation_for, load_params, method_for, training_for,
                          unknown_name, validation_for)
from wscat.data.capacity import check_splits
from wscat.data.sources import archive_status, raw_files
from wscat.metrics import AA_PAPER
from wscat.report import paper

SKIP_ARCHIVE_CHECK = "WSCAT_SKIP_ARCHIVE_CHECK"  # set: tools that only read the DAG
# The keys of a dataset section that decide its split; the threat model and augmentation
# (eps, step sizes, augment) do not, so changing them must not re-split and re-run everything.
SPLIT_KEYS = ("test_fraction", "labelled", "val_fraction", "val_max", "unlabelled_fraction",
              "subset")
_archive_problems: dict[str, str | None] = {}


def load_config(workflow: Any) -> tuple[str, dict[str, Any]]:
    """(path, params) of the one params file a Snakemake run reads, validated once
    (wscat.config), with the splits of the datasets whose size is known without their archives
    checked too.

    `--configfile FILE` stands for params.yaml, whole: the wscat subcommands read one file, so
    --config overrides and several --configfile files are refused.
    """
    if workflow.config_settings.config:
        raise ConfigError("--config overrides are not supported: wscat subcommands read one params "
                          "file; copy params.yaml, change it and pass it with --configfile")
    configfiles = workflow.overwrite_configfiles or workflow.configfiles
    if len(configfiles) > 1:
        raise ConfigError(f"{len(configfiles)} --configfile files given; wscat subcommands read one "
                          "params file, so merge them into one whole params file and pass that")
    path = str(configfiles[-1])
    params = load_params(path)  # the paper section's runs spelled out, as `wscat` reads them
    check_splits(params)
    return path, params


def wscat_on_path(environ: MutableMapping[str, str] | None = None,
                  executable: str | None = None) -> str | None:
    """Let the rules' `wscat ...` commands find `wscat` when Snakemake was started without the
    environment on PATH (`.venv/bin/snakemake` alone): where no `wscat` is on PATH but one sits
    beside the Python running Snakemake, that folder goes first on PATH, which every job
    inherits (a SLURM job too: sbatch exports the environment). A `wscat` already on PATH is
    left as it is. Returns a warning line where none is found at all, else None."""
    environ = os.environ if environ is None else environ
    executable = sys.executable if executable is None else executable
    path = environ.get("PATH", "")
    if shutil.which("wscat", path=path):
        return None
    beside = os.path.dirname(executable)  # not resolved: a venv's python links elsewhere
    if beside and shutil.which("wscat", path=beside):
        environ["PATH"] = beside + (os.pathsep + path if path else "")
        return None
    return ("no `wscat` command on PATH, so every job would stop with `wscat: command not "
            "found`: run `make venv`, then `source .venv/bin/activate` (or run `snakemake "
            "--sdm conda`)")


def unrecorded(value: Any) -> Callable[..., Any]:
    """A rule param that Snakemake passes to the shell but does not record: `value`, from a
    function of `input` (Snakemake records no param derived from a job's input or output).

    The params file's path is one: a job depends on the content of the sections it reads
    (recorded as its `config` param), never on the file's name, so a moved or renamed identical
    params file re-runs nothing."""

    def param(wildcards: Any, input: Any) -> Any:  # noqa: A002 - Snakemake's argument name
        return value

    return param


def checked_archives(params: dict[str, Any], dataset: str) -> list[str]:
    """The dataset's archives; one missing and not downloadable, or corrupt, raises the split
    step's one line (checked once per dataset while the DAG is built; $WSCAT_SKIP_ARCHIVE_CHECK
    set: not checked, for tools that only read the DAG)."""
    files = archives(params, dataset)
    if files and not os.environ.get(SKIP_ARCHIVE_CHECK):
        if dataset not in _archive_problems:
            _archive_problems[dataset] = archive_status(dataset, params["datasets"][dataset])
        if _archive_problems[dataset]:
            raise ConfigError(_archive_problems[dataset])
    return files


def check_names(params: dict[str, Any], wildcards: dict[str, str]) -> None:
    """One line (ConfigError) for a target path that names a dataset, model or method
    params.yaml does not have (`.../wscatt/seed1/best.pt`), instead of a KeyError traceback."""
    unknown = unknown_name(params, wildcards)
    if unknown is not None:
        key, value, section = unknown
        raise ConfigError(f"no {key} '{value}' in params.yaml ({section}: "
                          f"{', '.join(sorted(params[section]))}); check the target's path")


def archives(params: dict[str, Any], dataset: str) -> list[str]:
    """The archives a dataset is read from (none for the embedded default)."""
    return [str(path) for path in raw_files(dataset, params["datasets"][dataset])]


def fetch_groups(params: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """One fetch rule per distinct set of archives: (rule name, dataset, the archives missing
    now). An archive on disk is no rule's output, so `snakemake -F` or `--forcerun` never deletes
    it (Snakemake removes a forced job's outputs first): your own .npz, a hand-placed ImageNet32
    batch or a CIFAR archive on a node without network stay where they are."""
    groups, seen = [], set()
    for dataset in params["datasets"]:
        files = tuple(archives(params, dataset))
        missing = [path for path in files if not Path(path).exists()]
        if missing and files not in seen:
            seen.add(files)
            groups.append((f"fetch_{dataset.replace('-', '_')}", dataset, missing))
    return groups


def fetch_description(params: dict[str, Any], dataset: str, files: list[str]) -> str:
    """A fetch rule's line (`snakemake --list-target-rules`): what it fetches, and how."""
    how = ("downloaded, md5-checked" if params["datasets"][dataset].get("download")
           else "to be placed by hand (download: false; md5-checked)")
    what = (", ".join(files) if len(files) <= 2
            else f"{len(files)} files under {os.path.commonpath(files)}/")
    return f"dataset {dataset}'s archives, {what}: {how}"


def training_inputs(params: dict[str, Any], dataset: str, model: str, method: str,
                    seed: str) -> dict[str, str | list[str]]:
    """The labeler's pseudo-labels for a method trained on `data: pseudo`, DMAT's generated
    images (with their labeler's checkpoint) when it has some, and your own method's code files
    (a list: an edit retrains); nothing otherwise."""
    knobs = method_for(params, method, dataset)
    inputs: dict[str, str | list[str]] = {}
    if own_method.is_own(knobs["objective"]):  # your own method's code: an edit retrains
        inputs["method_code"] = [str(p) for p in own_method.code_files(knobs["objective"])]
    if knobs.get("generated"):
        inputs["generated"] = knobs["generated"]
        if knobs.get("generated_labeler"):
            inputs["labeler_checkpoint"] = paths.Run(dataset, model, knobs["generated_labeler"],
                                                     seed).checkpoint()
    if knobs["data"] == "pseudo":
        inputs["pseudo"] = paths.fill(paths.PSEUDO_LABELS, dataset=dataset, model=model,
                                      labeler=knobs["labeler"], seed=seed)
    return inputs


def flags(**options: str | Sequence[str] | None) -> str:
    """Command-line options for a shell line: ' --name value...' for each option given."""
    line = ""
    for name, value in options.items():
        if value is not None:
            values = [value] if isinstance(value, str) else value
            line += f" --{name.replace('_', '-')} " + " ".join(map(shlex.quote, values))
    return line


# --- the params.yaml sections a job reads (Snakemake compares them to decide re-runs) ---------


def to_json(section: Any) -> str:
    """A params section as a stable string."""
    return json.dumps(section, sort_keys=True)


def split_params(params: dict[str, Any], dataset: str) -> str:
    """What decides a dataset's split: SPLIT_KEYS, the source and, for your own images (`source:
    npz`), the file's md5 (its content: the same file elsewhere splits the same): other labels
    in a replaced file need another split, whether its md5 line is updated or deleted."""
    cfg = params["datasets"][dataset]
    split = {key: cfg[key] for key in SPLIT_KEYS if key in cfg}
    source = cfg.get("source", dataset)
    own = {"md5": cfg.get("md5")} if source == "npz" else {}
    return to_json({**split, "source": source, **own})


def train_params(params: dict[str, Any], dataset: str, model: str, method: str) -> str:
    """The dataset (threat model, augmentation), its schedule, the model, the method (your own
    method's with its code's SHA-256: an edit of the code is a change of the method), and the
    steps of the validation attack that selects best.pt (`validation`; not the test-time
    attacks', so a change of those re-evaluates without retraining)."""
    knobs = method_for(params, method, dataset)
    code = ({"code_sha256": own_method.digest_or_none(knobs["objective"])}
            if own_method.is_own(knobs["objective"]) else {})
    return to_json({
        "dataset": params["datasets"][dataset],
        "training": training_for(params, dataset, method),
        "model": params["models"][model],
        "method": knobs,
        **code,
        "validation": validation_for(params, dataset),
    })


def evaluate_params(params: dict[str, Any], dataset: str, extra: bool = False) -> str:
    """The attacks (the core: without NRF and the checks, which are the extras') and the
    dataset's threat model; the extras' also the AutoAttack of the paper's column
    (wscat.metrics.AA_PAPER, fixed in code), so a change of it reruns AA-paper."""
    evaluation = evaluation_for(params, dataset)
    if not extra:
        evaluation = {k: v for k, v in evaluation.items() if k not in ("nrf", "checks")}
    cfg = params["datasets"][dataset]
    return to_json({
        "evaluation": evaluation,
        "threat": {key: cfg[key] for key in ("eps", "eval_step_size")},
        "deterministic": params["training"][dataset]["deterministic"],
        **({"aa_paper": AA_PAPER} if extra else {}),
    })


def fingerprint(section: str) -> str:
    """16 hex digits of the SHA-256 of a params section's stable string (`to_json`)."""
    return hashlib.sha256(section.encode()).hexdigest()[:16]


def training_fingerprint(params: dict[str, Any], dataset: str, model: str, method: str,
                         _seen: frozenset[str] = frozenset()) -> str:
    """The fingerprint of the training that makes a checkpoint of `method`: its params section
    (`train_params`) and, where it trains on a labeler's pseudo-labels or generated images, the
    fingerprint of that labeler's training too.

    Every rule that reads the checkpoint records it as a param, so a training change makes their
    outputs stale; `wscat evaluate` writes it into the metrics' manifest, and `wscat table`
    refuses metrics whose fingerprint is not the one the current params give."""
    if method in _seen:
        raise ConfigError(f"methods.{method}: its labeler chain comes back to it; give it a "
                          "labeler that does not train on its pseudo-labels")
    upstream = upstream_labelers(method_for(params, method, dataset))
    return fingerprint(to_json({
        "training": train_params(params, dataset, model, method),
        **{role: training_fingerprint(params, dataset, model, labeler, _seen | {method})
           for role, labeler in upstream.items()}}))


def upstream_labelers(knobs: dict[str, Any]) -> dict[str, str]:
    """The labelers a method's training reads (a method's resolved knobs), by role: the one
    whose pseudo-labels it trains on and the one that labels its generated images."""
    upstream = {}
    if knobs.get("data") == "pseudo":
        upstream["labeler"] = knobs["labeler"]
    if knobs.get("generated") and knobs.get("generated_labeler"):
        upstream["generated_labeler"] = knobs["generated_labeler"]
    return upstream


def evaluation_fingerprint(params: dict[str, Any], dataset: str) -> str:
    """The fingerprint of the core evaluation's settings (`evaluate_params`): an extra part is
    bound to the core file measured with the same ones."""
    return fingerprint(evaluate_params(params, dataset))


def extra_fingerprint(params: dict[str, Any], dataset: str) -> str:
    """The fingerprint of the extra part's settings (`evaluate_params(..., extra=True)`: the
    core's with NRF and the checks): what an extra metrics file was measured with."""
    return fingerprint(evaluate_params(params, dataset, extra=True))


def validation_fingerprint(params: dict[str, Any], dataset: str) -> str:
    """The fingerprint of what `wscat validate` measures with: the checkpoint the workflow
    passes it (best or last), the PGD attack (`validation`'s steps, the evaluation's batch) and
    the dataset's threat model."""
    evaluation = evaluation_for(params, dataset)
    cfg = params["datasets"][dataset]
    return fingerprint(to_json({
        "evaluation": {"checkpoint": evaluation["checkpoint"], "batch_size": evaluation["batch_size"],
                       "pgd_steps": validation_for(params, dataset)["pgd_steps"]},
        "threat": {key: cfg[key] for key in ("eps", "eval_step_size")}}))


def paper_section(params: dict[str, Any], tier: str) -> str:
    """What a tier's outputs read from params.yaml: the tier, and every experiment it names."""
    return to_json(_paper_section(params, tier))


def _paper_section(params: dict[str, Any], tier: str) -> dict[str, Any]:
    spec = paper.tier_spec(params, tier)
    names = {e[part]["experiment"] for e in spec["datasets"] for part in paper.parts(e)}
    return {"tier": spec,
            "experiments": {name: params["experiments"][name] for name in sorted(names)}}


def analysis_params(params: dict[str, Any], tier: str, figure: str, dataset: str) -> str:
    """What `wscat analyse` reads from params.yaml: the tier's section and, for Fig-similarity,
    the settings of each method whose AEs it makes (RLFAT's blocks, say) and the dataset's threat
    model: it attacks one WSCAT checkpoint, whose training records WSCAT's settings and the
    threat model but not the other methods'."""
    section = _paper_section(params, tier)
    if figure == "Fig-similarity":
        methods = section["tier"]["similarity"]["methods"]
        section["similarity"] = {
            "methods": {m: method_for(params, m, dataset) for m in methods},
            "threat": params["datasets"][dataset]}
    return to_json(section)


# --- the order in which ready jobs start (Snakemake's `priority`, higher first) --------------

# Objectives without an adversarial term: AutoAttack ends on their models within seconds (most
# images fall to its first attack), where a robust model keeps all four attacks busy.
NATURAL_OBJECTIVES = frozenset({"standard", "mean_teacher"})
PRIORITY = {"split": 50, "labeler": 40, "pseudo_label": 30, "on_labels_of_labeler": 20, "train": 10,
            "attack_robust": 2, "attack_natural": 1}


def labelers(params: dict[str, Any], dataset: str) -> set[str]:
    """The methods whose checkpoints other methods train on (pseudo-labels, generated images)."""
    return {labeler for method in params["methods"]
            for labeler in upstream_labelers(method_for(params, method, dataset)).values()}


def job_priority(params: dict[str, Any], rule: str, dataset: str, method: str | None) -> int:
    """Longest chain first. A pseudo-labelled training waits for its labeler's training and
    pseudo-labels, so that chain starts first (labeler, pseudo-labels, the trainings on them),
    then the other trainings; then the attacks, robust models first, so that the last jobs are
    the short ones and the cores finish together. A seed's split, the start of all its chains,
    goes before everything. `method` is the labeler for `pseudo_label`, None for `split`.
    Only the order changes: every job's outputs are the same."""
    try:
        if rule == "split":
            return PRIORITY["split"]
        if rule == "pseudo_label":
            return PRIORITY["pseudo_label"]
        knobs = method_for(params, method, dataset)
        if rule == "train":
            if method in labelers(params, dataset):
                return PRIORITY["labeler"]
            if knobs.get("data") == "pseudo" or knobs.get("generated"):
                return PRIORITY["on_labels_of_labeler"]
            return PRIORITY["train"]
        if rule in ("evaluate", "evaluate_extra"):
            natural = knobs.get("objective") in NATURAL_OBJECTIVES
            return PRIORITY["attack_natural" if natural else "attack_robust"]
    except (ConfigError, KeyError):
        pass  # an unknown method: the job's own rule reports it; order it last
    return 0
