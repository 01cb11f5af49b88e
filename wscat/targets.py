"""The workflow's targets: what a bare `snakemake` builds (the demo's table), the targets asked for
by name (each experiment's table, each paper tier), and one line for a target that is none of
them. Read by workflow/rules/common.smk and workflow/scripts/dvc_yaml.py; no torch here.

An experiment's table is results/tables/{experiment}.{tex,csv,md}, unless the experiment sets
`table: false`: then its runs only fill the paper tier tables that name it (digits-table2 is the
digits tier's Table 2, results/paper/digits/Tab-RQ1-digits.*), so each table is written once.
"""
from __future__ import annotations

import re
from typing import Any

from wscat import paths
from wscat.config import ConfigError
from wscat.report import paper

LIST_HINT = "snakemake --list-target-rules lists them all"


def has_table(params: dict[str, Any], experiment: str) -> bool:
    """Whether the experiment has a table of its own under results/tables/."""
    return params["experiments"][experiment].get("table", True)


def paper_tables(params: dict[str, Any], experiment: str) -> list[str]:
    """The paper tier tables (.tex) an experiment's runs fill, in params.yaml's order."""
    return [paths.fill(paths.PAPER_TABLE_TEX, tier=tier, label=entry[part]["label"])
            for tier, spec in (params.get("paper") or {}).items()
            for entry in spec["datasets"] for part in paper.parts(entry)
            if entry[part]["experiment"] == experiment]


def experiment_targets(params: dict[str, Any], experiment: str) -> list[str]:
    """What building an experiment means: its table, or (table: false) the paper tables it fills."""
    if has_table(params, experiment):
        return [paths.fill(paths.TABLE_TEX, experiment=experiment)]
    tables = paper_tables(params, experiment)
    if not tables:
        raise ConfigError(f"experiments.{experiment} has table: false but no paper tier names it, "
                          "so it would build nothing; drop `table: false` or name it in paper:")
    return tables


def default_experiment(params: dict[str, Any]) -> str:
    """The demo: params.yaml's first experiment with a table of its own."""
    for name in params["experiments"]:
        if has_table(params, name):
            return name
    raise ConfigError("no experiment in params.yaml has a table of its own (all set table: "
                      "false), so a bare `snakemake` has nothing to build; name a target")


def default_targets(params: dict[str, Any]) -> list[str]:
    """What a bare `snakemake` (and `snakemake -n`) builds: the demo's table."""
    return experiment_targets(params, default_experiment(params))


def rule_name(prefix: str, name: str) -> str:
    """A target rule's name: `table_digits_ablation`, `paper_cifar10_proxy`."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


def named_targets(params: dict[str, Any]) -> list[tuple[str, list[str], str]]:
    """(rule name, files, one line) of every target asked for by name: per experiment its table
    and its robustness curves, per paper tier its index (`snakemake --list-target-rules` prints
    them)."""
    default = default_experiment(params)
    named = []
    for name, spec in params["experiments"].items():
        files = experiment_targets(params, name)
        what = f"{spec['dataset']}, {spec['model']}, {len(spec['methods'])} methods, seeds " \
               f"{','.join(map(str, spec['seeds']))}"
        note = " (the demo: a bare `snakemake`)" if name == default else ""
        named.append((rule_name("table", name), files,
                      f"experiment {name}{note}: {' '.join(files)} ({what})"))
        curves = paths.fill(paths.ROBUSTNESS_PNG, experiment=name)
        numbers = paths.fill(paths.ROBUSTNESS_CSV, experiment=name)  # redrawn when lost
        named.append((rule_name("robustness", name), [curves, numbers],
                      f"robustness curves of experiment {name}: {curves}, their numbers {numbers}"
                      " (each run's PGD accuracy against eps and steps: its extra evaluation)"))
    for tier, spec in (params.get("paper") or {}).items():
        index = paths.fill(paths.PAPER_INDEX, tier=tier)
        datasets = list(dict.fromkeys(  # the datasets its tables are of, in params.yaml's order
            params["experiments"][entry[part]["experiment"]]["dataset"]
            for entry in spec["datasets"] for part in paper.parts(entry)
            if entry[part]["experiment"] in params["experiments"]))
        named.append((rule_name("paper", tier), [index],
                      f"every table and figure of paper tier {tier} ({', '.join(datasets)}): "
                      f"{index}"))
    return named


def valid_targets(params: dict[str, Any]) -> list[str]:
    """The targets by file, for the one line that refuses an unknown one."""
    files = [f for name in params["experiments"] for f in experiment_targets(params, name)]
    return files + [paths.fill(paths.PAPER_INDEX, tier=tier) for tier in params.get("paper") or {}]


def table_experiment(params: dict[str, Any], experiment: str) -> dict[str, Any]:
    """The experiment behind results/tables/{experiment}.*; one line naming the valid targets
    when there is none (a typo) or the experiment's table lives in a paper tier."""
    spec = params["experiments"].get(experiment)
    if spec is None:
        raise ConfigError(f"no experiment '{experiment}' in params.yaml, so no "
                          f"results/tables/{experiment}.*; targets: "
                          f"{', '.join(valid_targets(params))} ({LIST_HINT})")
    if not has_table(params, experiment):
        raise ConfigError(f"experiment '{experiment}' has no results/tables/ table (table: false "
                          f"in params.yaml); its table is {', '.join(experiment_targets(params, experiment))}"
                          f" (snakemake {rule_name('table', experiment)})")
    return spec


def robustness_experiment(params: dict[str, Any], experiment: str) -> dict[str, Any]:
    """The experiment behind results/robustness-curves/{experiment}.* (any experiment, `table:
    false` too); one line naming the experiments when there is none (a typo)."""
    spec = params["experiments"].get(experiment)
    if spec is None:
        raise ConfigError(f"no experiment '{experiment}' in params.yaml, so no "
                          f"{paths.fill(paths.ROBUSTNESS, experiment=experiment)}.*; experiments: "
                          f"{', '.join(params['experiments'])}")
    return spec


def robustness_inputs(params: dict[str, Any], experiment: str, root: str = paths.RESULTS
                      ) -> list[str]:
    """What an experiment's robustness curves read: each run's core metrics file, then its extra
    one, whose gradient-masking checks hold the curves (checked against the core one, as for a
    paper tier's figure)."""
    robustness_experiment(params, experiment)
    return [path for run in paper.experiment_runs(params, experiment)
            for path in run.evaluated(root)]
