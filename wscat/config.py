"""Typed access to params.yaml, validated once against workflow/schemas/params.schema.yaml.

The schema is the single definition of what is valid; this module adds only the checks a
JSON schema cannot express (cross-references between sections).
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parent / "params.schema.yaml"


class ConfigError(ValueError):
    """A bad value in params.yaml or on the command line; the message says how to fix it."""


def load_schema() -> dict[str, Any]:
    """The params schema (shipped inside the package; the workflow validates with the same file)."""
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """Check `params` against the schema and the cross-references; raise ConfigError on the first
    problem. Returns the params with the runs of the `paper` section made explicit
    (`expand_paper`)."""
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(params), key=lambda e: (len(e.absolute_path), e.path))
    if errors:
        error = errors[0]
        if error.validator == "additionalProperties":
            message = f"unknown key in params.yaml at {_where(error)}: {error.message}"
        elif error.validator == "propertyNames":
            message = f"unknown name in params.yaml at {_where(error)}: {error.message}"
        else:
            message = f"bad value in params.yaml at {_where(error)}: {error.message}"
        raise ConfigError(message + " (see workflow/schemas/params.schema.yaml)")
    _check_references(params)
    _check_paper(params)
    if params.get("paper"):
        params = expand_paper(params)
        _check_references(params)  # the generated methods and datasets
    return params


# --- the paper section: the runs its figures and tables need ---------------------------------

def beta_method(method: str, beta: float) -> str:
    """The method key of one point of the beta sweep (Fig-beta): e.g. wscat-beta0.2."""
    return f"{method}-beta{beta:g}"


def unlabelled_dataset(dataset: str, fraction: float) -> str:
    """The dataset key of one point of the unlabelled-data sweep (Fig-unlabel): e.g. digits-unlabelled25."""
    return f"{dataset}-unlabelled{round(100 * fraction)}"


def full_dataset(dataset: str) -> str:
    """The dataset key of the fully supervised setting (tab-sup): every training label used."""
    return f"{dataset}-full"


def _add_dataset(params: dict[str, Any], name: str, base: str, **overrides: Any) -> None:
    """A dataset variant: the base's entry with `overrides`, its schedule and every per-dataset
    override of the base (methods, evaluation) unless params.yaml names the variant itself."""
    if name in params["datasets"]:
        return
    params["datasets"][name] = {**params["datasets"][base],
                                "source": params["datasets"][base].get("source", base), **overrides}
    params["training"].setdefault(name, copy.deepcopy(params["training"][base]))
    for entry in params["methods"].values():
        per_dataset = entry.get("per_dataset") or {}
        if base in per_dataset:
            per_dataset.setdefault(name, copy.deepcopy(per_dataset[base]))
    per_dataset = params["evaluation"].get("per_dataset") or {}
    if base in per_dataset:
        per_dataset.setdefault(name, copy.deepcopy(per_dataset[base]))


def expand_paper(params: dict[str, Any]) -> dict[str, Any]:
    """A copy of `params` with the runs of `paper.<tier>` spelled out as ordinary entries:
    - beta: methods `{method}-beta{value}` (the method with beta = value on every dataset);
    - unlabelled: datasets `{dataset}-unlabelled{percent}` (that share of the unlabelled pool);
    - supervised: datasets `{dataset}-full` (labelled: null, every training label used).
    Every tool (Snakemake, `wscat`) reads the same expanded params."""
    params = copy.deepcopy(params)
    for tier in (params.get("paper") or {}).values():
        beta = tier.get("beta")
        if beta:
            for value in beta["values"]:
                params["methods"].setdefault(beta_method(beta["method"], value),
                                             {"base": beta["method"], "beta": value})
        unlabelled = tier.get("unlabelled")
        if unlabelled:
            for entry in tier["datasets"]:
                for fraction in unlabelled["fractions"]:
                    if fraction < 1:
                        _add_dataset(params, unlabelled_dataset(entry["dataset"], fraction),
                                     entry["dataset"], unlabelled_fraction=fraction)
        for run in (tier.get("supervised") or {}).get("runs", []):
            _add_dataset(params, full_dataset(run["dataset"]), run["dataset"], labelled=None)
    return params


def _check_paper(params: dict[str, Any]) -> None:
    """The paper section names experiments, datasets, models and methods that exist."""
    for tier_name, tier in (params.get("paper") or {}).items():
        where = f"paper.{tier_name}"
        for entry in tier["datasets"]:  # (its experiments are looked up when a target asks)
            if entry["dataset"] not in params["datasets"]:
                raise ConfigError(f"{where}.datasets: unknown dataset '{entry['dataset']}'")
        # Every section but datasets is optional (the CIFAR-10 proxy tier has only Table 2).
        names = [m for key in ("similarity", "feature", "time", "supervised")
                 for m in tier.get(key, {}).get("methods", [])]
        names += [tier[key]["method"] for key in ("beta", "unlabelled") if key in tier]
        for method in names:
            if method not in params["methods"]:
                raise ConfigError(f"{where}: unknown method '{method}'")
        for run in tier.get("supervised", {}).get("runs", []):
            if run["dataset"] not in params["datasets"]:
                raise ConfigError(f"{where}.supervised: unknown dataset '{run['dataset']}'")
            for model in run["models"]:
                if model not in params["models"]:
                    raise ConfigError(f"{where}.supervised: unknown model '{model}'")


def resolve_method(params: dict[str, Any], method: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A method's entry with its `base` laid under it: a variant (WSCAT-fixed = WSCAT with
    positives: labels) names the method it configures and only the knobs it changes.
    `per_dataset` overrides are merged dataset by dataset."""
    if method in _seen:
        raise ConfigError(f"methods.{method}.base: circular base chain {' -> '.join(_seen + (method,))}")
    entry = dict(params["methods"][method])
    base = entry.pop("base", None)
    if base is None:
        return entry
    if base not in params["methods"]:
        raise ConfigError(f"methods.{method}.base: unknown method '{base}'; known methods: "
                          f"{', '.join(sorted(params['methods']))}")
    inherited = resolve_method(params, base, _seen + (method,))
    own = set(entry) - {"per_dataset"}  # a variant's own knobs win on every dataset
    per_dataset = {dataset: {k: v for k, v in knobs.items() if k not in own}
                   for dataset, knobs in inherited.get("per_dataset", {}).items()}
    for dataset, knobs in (entry.get("per_dataset") or {}).items():
        per_dataset[dataset] = {**per_dataset.get(dataset, {}), **knobs}
    merged = {**inherited, **entry}
    if per_dataset:
        merged["per_dataset"] = per_dataset
    return merged


def method_for(params: dict[str, Any], method: str, dataset: str | None = None) -> dict[str, Any]:
    """A method's knobs on one dataset: its resolved entry, `per_dataset[dataset]` laid over it."""
    entry = resolve_method(params, method)
    overrides = entry.pop("per_dataset", {}) or {}
    return {**entry, **(overrides.get(dataset, {}) if dataset else {})}


def evaluation_for(params: dict[str, Any], dataset: str) -> dict[str, Any]:
    """The attack suite on one dataset: `evaluation`, with `per_dataset[dataset]` laid over it
    (its blocks, e.g. `autoattack` and `nrf`, merged key by key)."""
    base = dict(params["evaluation"])
    overrides = (base.pop("per_dataset", {}) or {}).get(dataset, {})
    return {**base, **{key: {**base[key], **value} if isinstance(base.get(key), dict) else value
                       for key, value in overrides.items()}}


def _check_method(params: dict[str, Any], name: str, schema: dict[str, Any]) -> None:
    """A method as the trainer sees it (base resolved), on every dataset it has overrides for."""
    resolved = resolve_method(params, name)
    for dataset in [None, *(resolved.get("per_dataset") or {})]:
        if dataset is not None and dataset not in params["datasets"]:
            raise ConfigError(f"methods.{name}.per_dataset: unknown dataset '{dataset}'")
        merged = method_for(params, name, dataset)
        if dataset is not None and merged.get("objective") != resolved.get("objective"):
            raise ConfigError(f"methods.{name}.per_dataset.{dataset} may only change knobs, "
                              "not the objective")
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(merged))
        if error is not None:
            where = f"methods.{name}" + (f".per_dataset.{dataset}" if dataset else "")
            field = ".".join(str(p) for p in error.absolute_path)
            raise ConfigError(f"bad value in params.yaml at {where}{'.' + field if field else ''}: "
                              f"{error.message} (after resolving base/per_dataset)")


def _check_references(params: dict[str, Any]) -> None:
    methods = params["methods"]
    method_schema = {"$defs": load_schema()["$defs"], "$ref": "#/$defs/method"}
    for name in methods:
        _check_method(params, name, method_schema)
    for name, experiment in params["experiments"].items():
        dataset = experiment["dataset"]
        for section in ("datasets", "training"):
            if dataset not in params[section]:
                raise ConfigError(f"experiments.{name}: dataset '{dataset}' has no entry under "
                                  f"{section}: in params.yaml; add one")
        if experiment["model"] not in params["models"]:
            raise ConfigError(f"experiments.{name}: unknown model '{experiment['model']}'; "
                              f"models: {', '.join(params['models'])}")
        for method in experiment["methods"]:
            if method not in methods:
                raise ConfigError(f"experiments.{name}: unknown method '{method}'; known methods: "
                                  f"{', '.join(sorted(methods))}")
    for name in methods:
        method = method_for(params, name)
        labeler = method.get("labeler")
        if labeler is not None and labeler not in methods:
            raise ConfigError(f"methods.{name}.labeler: unknown method '{labeler}'")
        if labeler is not None and method_for(params, labeler)["data"] == "pseudo":
            raise ConfigError(f"methods.{name}.labeler: '{labeler}' itself needs pseudo-labels; "
                              "a labeler must train on labelled (or unlabelled) data alone")
        if method["data"] != "pseudo" and labeler is not None:
            raise ConfigError(f"methods.{name}: labeler is only used with data: pseudo")
        generated_labeler = method.get("generated_labeler")
        if generated_labeler is not None and (
                generated_labeler not in methods
                or method_for(params, generated_labeler)["data"] == "pseudo"):
            raise ConfigError(f"methods.{name}.generated_labeler: '{generated_labeler}' must be a "
                              "method trained without pseudo-labels (e.g. mt)")
    for dataset in params["evaluation"].get("per_dataset", {}) or {}:
        if dataset not in params["datasets"]:
            raise ConfigError(f"evaluation.per_dataset: unknown dataset '{dataset}'")
    for name, dataset in params["datasets"].items():
        if dataset["eps"] > 0 and (dataset["train_step_size"] <= 0 or dataset["eval_step_size"] <= 0):
            raise ConfigError(f"datasets.{name}: step sizes must be positive when eps > 0")


def yaml_error_line(error: yaml.YAMLError) -> str:
    """A YAML error as one line with its line and column (1-based), as an editor counts them."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


def stop_on_bad_yaml(path: str | Path) -> None:
    """For the Snakefile, before its `configfile:`: a params file that is not YAML ends the run
    with one line that has the line and column (Snakemake's own message has neither)."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        print(f"wscat: {path} is not valid YAML: {yaml_error_line(error)}", file=sys.stderr)
        sys.exit(1)


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read and validate a params file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"params file not found: {path} (run from the repository root or pass --params)")
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {yaml_error_line(error)}") from error
    if not isinstance(params, dict):
        raise ConfigError(f"{path} must hold a mapping of sections (experiments, datasets, ...)")
    return validate_params(params)


@dataclass(frozen=True)
class RunConfig:
    """Everything one (dataset, model, method, seed) run needs, taken from params.yaml."""

    dataset: str
    model: str
    method: str
    seed: int
    model_spec: dict[str, Any]
    data: dict[str, Any]
    training: dict[str, Any]
    method_params: dict[str, Any]
    evaluation: dict[str, Any]

    @classmethod
    def from_params(cls, params: dict[str, Any], *, dataset: str, model: str, method: str,
                    seed: int) -> "RunConfig":
        if dataset not in params["datasets"]:
            raise ConfigError(f"unknown dataset '{dataset}'; configured: {', '.join(params['datasets'])}")
        if method not in params["methods"]:
            raise ConfigError(f"unknown method '{method}'; configured: {', '.join(params['methods'])}")
        if model not in params["models"]:
            raise ConfigError(f"unknown model '{model}'; configured: {', '.join(params['models'])}")
        return cls(dataset=dataset, model=model, method=method, seed=seed,
                   model_spec=params["models"][model], data=params["datasets"][dataset],
                   training=params["training"][dataset],
                   method_params=method_for(params, method, dataset),
                   evaluation=evaluation_for(params, dataset))
