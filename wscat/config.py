"""Typed access to params.yaml, validated once against wscat/params.schema.yaml (linked from
workflow/schemas/).

The schema is the single definition of what is valid; this module adds only the checks a
JSON schema cannot express (cross-references between sections).
"""
from __future__ import annotations

import copy
import functools
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from wscat import own_method
from wscat.errors import require_file
from wscat.paths import PAIRED
from wscat.file_kinds import check_input_kind
from wscat.schema_messages import close_key, schema_message
from wscat.strict_yaml import DuplicateKeyError, StrictLoader
from wscat.sweeps import expand_paper, generated

SCHEMA_PATH = Path(__file__).resolve().parent / "params.schema.yaml"


class ConfigError(ValueError):
    """A bad value in params.yaml or on the command line; the message says how to fix it."""


@functools.cache
def _schema() -> dict[str, Any]:
    """The schema as parsed once a process (libyaml's parser where PyYAML has it: ~7x faster, the
    same mapping; every job and every Snakemake run reads it)."""
    return yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_schema() -> dict[str, Any]:
    """The params schema (shipped inside the package; the workflow validates with the same file)."""
    return copy.deepcopy(_schema())


@functools.cache
def _validator(definition: str | None = None) -> jsonschema.Draft202012Validator:
    """The schema's validator, built once a process: of the whole params file (None), or of one
    of its definitions (e.g. "method": a method as the trainer sees it, base resolved)."""
    schema = _schema()
    if definition is not None:
        schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    return jsonschema.Draft202012Validator(schema)


def schema_pointer() -> str:
    """The schema file as the user can open it: wscat/params.schema.yaml from the checkout's
    root, else its absolute path (another folder, an installed package)."""
    try:
        at_root = SCHEMA_PATH.parent.parent == Path.cwd().resolve()
    except OSError:  # the working folder was removed
        at_root = False
    return str(SCHEMA_PATH.relative_to(SCHEMA_PATH.parent.parent)) if at_root else str(SCHEMA_PATH)


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


# What the code can represent: seeds are numpy/torch seeds (0..2^32-1), every other integer (a
# count, a size, a number of steps) indexes tensors and loops with 32-bit room to spare.
SEED_MAX = 2**32 - 1
INT_MAX = 2**31 - 1


def check_numbers(value: Any, where: str = "", source: str = "params.yaml") -> None:
    """Refuse NaN and +-inf wherever params.yaml (the file `source`) holds a number (JSON Schema's
    bounds let NaN through: every comparison with it is false), and integers beyond what the code
    represents."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_numbers(item, f"{where}.{key}" if where else str(key), source)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_numbers(item, f"{where}.{index}", source)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"bad value in {source} at {where or '<top level>'}: {value} is not "
                          "a finite number; give a finite value (a number too large for a float "
                          "reads as inf)")
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = where.split(".")
        limit = SEED_MAX if "seed" in parts[-1] or parts[-2:-1] == ["seeds"] else INT_MAX
        if not -INT_MAX - 1 <= value <= limit:
            raise ConfigError(f"bad value in {source} at {where}: {value} is beyond what the "
                              f"code can represent (at most {limit}); give a smaller value")


def _error_order(error: jsonschema.ValidationError) -> tuple[int, bool, str]:
    """Which schema error to report first: the shallowest, and a method's bad objective before
    what is missing beside it (which knobs it needs depends on the objective)."""
    path = list(error.absolute_path)
    objective = bool(path) and path[-1] == "objective"
    return len(path) - objective, not objective, str(path)


def validate_params(params: dict[str, Any], source: str | Path = "params.yaml") -> dict[str, Any]:
    """Check `params` against the schema and the cross-references; raise ConfigError on the first
    problem, naming `source` (the file they were read from). Returns the params with the runs of
    the `paper` section made explicit (wscat.sweeps.expand_paper)."""
    source = str(source)
    check_numbers(params, source=source)
    schema = _schema()
    errors = sorted(_validator().iter_errors(params), key=_error_order)
    if errors:
        error = errors[0]
        if error.validator == "additionalProperties":
            message = (f"unknown key in {source} at {_where(error)}: {error.message}"
                       f"{close_key(error, schema)}")
        elif error.validator == "propertyNames":
            message = f"unknown name in {source} at {_where(error)}: {error.message}"
        elif "propertyNames" in error.schema_path:
            message = f"bad name in {source} at {_where(error)}: {schema_message(error, schema)}"
        else:
            message = (f"bad value in {source} at {_where(error)}: "
                       f"{schema_message(error, schema)}")
        raise ConfigError(f"{message} (see {schema_pointer()})")
    _check_references(params, source)
    _check_paper(params, source)
    if params.get("paper"):
        params = expand_paper(params)
        _check_references(params, source)  # the generated methods and datasets
    return params


# --- the paper section: the names it uses exist (its runs are generated by wscat.sweeps) ----

# Fig-similarity's AEs: the inner maximisations wscat.analysis.adversarial_examples makes.
SIMILARITY_OBJECTIVES = ("trades", "rlfat", "wscat")


def _check_paper_objectives(params: dict[str, Any], where: str, tier: dict[str, Any],
                            source: str) -> None:
    """What the figures need of their methods, refused at load rather than in their jobs:
    Fig-beta sweeps a method that has a beta (TRADES has none: its sweep would rerun it
    unchanged, and the figure's own point be a KeyError); Fig-similarity attacks with the
    projection heads of a WSCAT model, the AEs of TRADES-, RLFAT- or WSCAT-type methods (no
    WSCAT whose positives are labels: the test images it attacks have none)."""
    def objective(name: str) -> Any:
        return method_for(params, name).get("objective")

    beta = tier.get("beta")
    if beta and any("beta" not in method_for(params, beta["method"], entry["dataset"])
                    for entry in tier["datasets"]):
        raise ConfigError(f"{source}: {where}.beta.method: '{beta['method']}' has no beta to "
                          f"sweep (objective {objective(beta['method'])}); name a method whose "
                          "objective takes beta (wscat)")
    similarity = tier.get("similarity") or {}
    if "model" in similarity and objective(similarity["model"]) != "wscat":
        raise ConfigError(f"{source}: {where}.similarity.model: '{similarity['model']}' is not "
                          f"a WSCAT method (objective {objective(similarity['model'])}); its "
                          "attack needs WSCAT's projection heads: name a method of objective "
                          "wscat")
    for method in similarity.get("methods", []):
        if objective(method) not in SIMILARITY_OBJECTIVES:
            raise ConfigError(f"{source}: {where}.similarity.methods: '{method}' (objective "
                              f"{objective(method)}) makes no AE Fig-similarity compares; name "
                              f"methods of objective {', '.join(SIMILARITY_OBJECTIVES)}")
    # The analysis attacks test images, which carry no (pseudo-)labels: a WSCAT whose positives
    # are labels would silently make WSCAT-self's AE (each image its own class).
    for key, names in (("model", [similarity.get("model")]),
                       ("methods", similarity.get("methods", []))):
        for method in names:
            if method is not None and method_for(params, method).get("positives") == "labels":
                raise ConfigError(f"{source}: {where}.similarity.{key}: '{method}' takes its "
                                  "positives from labels (positives: labels), which the test "
                                  "images it attacks do not have; name a method whose positives "
                                  "are predicted or self")

def _unknown(source: str, where: str, kind: str, name: Any, known: Iterable[str]) -> ConfigError:
    """The refusal of a name `where` uses that no entry of its section has, listing those."""
    return ConfigError(f"{source}: {where}: unknown {kind} '{name}'; known {kind}s: "
                       f"{', '.join(sorted(known))}")


def _check_paper(params: dict[str, Any], source: str = "params.yaml") -> None:
    """The paper section names experiments, datasets, models and methods that exist."""
    datasets, methods = params["datasets"], params["methods"]
    for tier_name, tier in (params.get("paper") or {}).items():
        where = f"paper.{tier_name}"
        for entry in tier["datasets"]:  # (its experiments are looked up when a target asks)
            if entry["dataset"] not in datasets:
                raise _unknown(source, f"{where}.datasets", "dataset", entry["dataset"], datasets)
        # Every section but datasets is optional (the CIFAR-10 proxy tier has only Table 2).
        names = [(f"{where}.{key}.methods", m) for key in ("similarity", "feature", "time",
                                                           "supervised")
                 for m in tier.get(key, {}).get("methods", [])]
        names += [(f"{where}.{key}.method", tier[key]["method"]) for key in ("beta", "unlabelled")
                  if key in tier]
        similarity = tier.get("similarity") or {}
        if "model" in similarity:
            names.append((f"{where}.similarity.model", similarity["model"]))
        for key, method in names:
            if method not in methods:
                raise _unknown(source, key, "method", method, methods)
        _check_paper_objectives(params, where, tier, source)
        for run in tier.get("supervised", {}).get("runs", []):
            if run["dataset"] not in datasets:
                raise _unknown(source, f"{where}.supervised.runs", "dataset", run["dataset"],
                               datasets)
            for model in run["models"]:
                if model not in params["models"]:
                    raise _unknown(source, f"{where}.supervised.runs", "model", model,
                                   params["models"])
    _check_generated_names(params)


def _check_generated_names(params: dict[str, Any]) -> None:
    """Two sweep points the paper section names alike (shares rounded to the same percent, as
    0.001 and 0.004: `-unlabelled0`; betas alike to 6 digits) would both get the first one's
    entry, so its runs, in silence: refused. An entry params.yaml names itself is kept as
    written (wscat.sweeps), whatever the points that name it."""
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in generated(params):
        section, name = entry["section"], entry["name"]
        if name in (params.get(section) or {}):
            continue
        seen = first.setdefault((section, name), entry)
        if seen["knobs"] != entry["knobs"]:
            raise ConfigError(f"{entry['from']} ({_knob_words(entry)}) and {seen['from']} "
                              f"({_knob_words(seen)}) both name {section} entry '{name}', so "
                              "both would be its runs; use values that differ in the name "
                              "(shares at least 1% apart)")


def _knob_words(entry: dict[str, Any]) -> str:
    """A generated entry's knobs as words for a refusal: 'beta 0.2'."""
    return ", ".join(f"{key} {value}" for key, value in entry["knobs"].items())


def resolve_method(params: dict[str, Any], method: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A method's entry with its `base` laid under it: a variant (WSCAT-fixed = WSCAT with
    positives: labels) names the method it configures and only the knobs it changes; a knob set
    to null there is dropped (WSCAT-sup: WSCAT on labelled data alone, so no labeler).
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
    merged = {k: v for k, v in {**inherited, **entry}.items() if not (v is None and k in own)}
    if per_dataset:
        merged["per_dataset"] = per_dataset
    return merged


# The names a command or a target path gives, and the params.yaml section each must be in.
NAMED = {"dataset": "datasets", "method": "methods", "labeler": "methods", "model": "models"}


def unknown_name(params: dict[str, Any], names: dict[str, Any]) -> tuple[str, str, str] | None:
    """(key, value, section) of the first of `names` (dataset, method, labeler, model: NAMED)
    that its params.yaml section lacks; None when all are there (or not given)."""
    for key, section in NAMED.items():
        value = names.get(key)
        if value is not None and value not in params[section]:
            return key, value, section
    return None


def method_for(params: dict[str, Any], method: str, dataset: str | None = None) -> dict[str, Any]:
    """A method's knobs on one dataset: its resolved entry, `per_dataset[dataset]` laid over it."""
    entry = resolve_method(params, method)
    overrides = entry.pop("per_dataset", {}) or {}
    return {**entry, **(overrides.get(dataset, {}) if dataset else {})}


def training_for(params: dict[str, Any], dataset: str, method: str | None = None
                 ) -> dict[str, Any]:
    """A run's schedule: `training[dataset]`, with `per_method[method]` laid over it (on digits
    and the proxy the labelers train longer than the runs they label for; in the release Mean
    Teacher and the runs both train 100 epochs)."""
    base = dict(params["training"][dataset])
    per_method = base.pop("per_method", None) or {}
    return {**base, **(per_method.get(method, {}) if method else {})}


VALIDATION_STEPS = ("pgd_steps", "cw_steps")


def validation_for(params: dict[str, Any], dataset: str) -> dict[str, int]:
    """The steps of the attack on the labelled validation split that scores each epoch (best.pt's
    selection, cw or hm) and that `wscat validate` runs: `validation`, or, in a params file
    without that section (older runs' files), the test-time attack's `evaluation` steps, which
    it used to share."""
    source = params.get("validation") or evaluation_for(params, dataset)
    return {key: source[key] for key in VALIDATION_STEPS}


# The step counts of the L-inf attacks that step eval_step_size, by attack, as dotted keys of
# their section (`evaluation` or `validation`); FGSM takes one step of eps and always reaches it.
STEP_KEYS = {"PGD": "pgd_steps", "CW": "cw_steps", "NRF": "nrf.steps"}


def falls_short(steps: int, step_size: float, eps: float) -> bool:
    """Whether `steps` steps of `step_size` add up to less than `eps` (by more than rounding:
    8 x 1/255 reaches 8/255): an attack that cannot cross the eps-ball from its start, weaker
    than FGSM's one step of eps by construction. The recognised sign of a truncated attack,
    though a random start inside the ball lets some pixels reach its edge."""
    return steps * step_size < eps * (1 - 1e-9)


def _listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]]))


def reach(attacks: list[str], steps: int, step_size: float, eps: float, *, eps_name: str = "ε",
          times: str = "×") -> str:
    """'PGD-5 and CW-5 move at most 5 × 0.01875 = 0.09375 < ε = 0.15', the words of a warning
    and of a table's caption for attacks that fall short (`falls_short`)."""
    names = _listed([f"{attack}-{steps}" for attack in attacks])
    return (f"{names} move{'s' if len(attacks) == 1 else ''} at most {steps} {times} "
            f"{step_size:.4g} = {steps * step_size:.4g} < {eps_name} = {eps:.4g}")


def short_attacks(params: dict[str, Any], dataset: str, section: str = "evaluation",
                  attacks: tuple[str, ...] = ("PGD", "CW", "NRF")) -> str | None:
    """One warning line where an attack of `section` (`evaluation`: the test-time PGD, CW and
    NRF; `validation`: model selection's PGD and CW) among `attacks` falls short of eps on
    `dataset` (`falls_short`, at the dataset's eval_step_size), naming what to raise in
    params.yaml; None where every one reaches it. A warning, not a refusal: a quick look with
    few steps is legitimate, and its numbers are what they are."""
    data = params["datasets"][dataset]
    eps, step = data["eps"], data["eval_step_size"]
    settings = (evaluation_for(params, dataset) if section == "evaluation"
                else validation_for(params, dataset))
    short: dict[int, list[str]] = {}  # steps -> the attacks that take them
    keys = []
    for attack in attacks:
        key = STEP_KEYS[attack]
        value: Any = settings
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, int) and falls_short(value, step, eps):
            short.setdefault(value, []).append(attack)
            keys.append(f"{section}.{key}")
    if not short:
        return None
    needed = math.ceil(eps / step * (1 - 1e-9))
    moves = "; ".join(reach(names, steps, step, eps, eps_name="eps", times="x")
                      for steps, names in short.items())
    what = ("their accuracies can read above FGSM's and overstate robustness"
            if section == "evaluation" else
            "model selection (best.pt under selection cw or hm) ranks epochs by a truncated attack")
    return (f"warning: on {dataset}, {moves}: weaker than FGSM (one step of eps) by construction, "
            f"so {what}; raise {_listed(keys)} to {needed} or more (or "
            f"datasets.{dataset}.eval_step_size to {eps / min(short):.4g} or more) in params.yaml "
            "for numbers to report (a quick look may stay short)")


def evaluation_for(params: dict[str, Any], dataset: str) -> dict[str, Any]:
    """The attack suite on one dataset: `evaluation`, with `per_dataset[dataset]` laid over it
    (its blocks, e.g. `autoattack` and `nrf`, merged key by key)."""
    base = dict(params["evaluation"])
    overrides = (base.pop("per_dataset", {}) or {}).get(dataset, {})
    return {**base, **{key: {**base[key], **value} if isinstance(base.get(key), dict) else value
                       for key, value in overrides.items()}}


# Methods (as the trainer sees them, as JSON) that passed the schema in this process: the check is
# a function of the settings alone, and each Snakemake run and job would repeat it for every one.
_VALID_METHODS: set[str] = set()


def _plain(value: Any) -> bool:
    """Only JSON's own types: text keys; text, numbers, booleans, null, lists."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, (str, int, float, bool))


def _settings_key(settings: dict[str, Any]) -> str | None:
    """The settings as JSON, a key that tells apart every two settings the schema could (true
    and 1, 1 and 1.0); None where they hold anything else (a date, a number as a key): those
    are validated every time, never cached."""
    return json.dumps(settings, sort_keys=True) if _plain(settings) else None


def _check_method(params: dict[str, Any], name: str, source: str = "params.yaml") -> None:
    """A method as the trainer sees it (base resolved), on every dataset it has overrides for."""
    resolved = resolve_method(params, name)
    for dataset in [None, *(resolved.get("per_dataset") or {})]:
        if dataset is not None and dataset not in params["datasets"]:
            raise _unknown(source, f"methods.{name}.per_dataset", "dataset", dataset,
                           params["datasets"])
        merged = method_for(params, name, dataset)
        if dataset is not None and merged.get("objective") != resolved.get("objective"):
            raise ConfigError(f"methods.{name}.per_dataset.{dataset} may only change knobs, "
                              "not the objective")
        key = _settings_key(merged)
        own = own_method.is_own(merged.get("objective"))
        if key is not None and own:  # the same settings with an edited file: check again
            key += own_method.digest_or_none(merged["objective"])
        if key is not None and key in _VALID_METHODS:  # e.g. after the paper section's expansion
            continue
        validator = _validator("method")
        error = jsonschema.exceptions.best_match(validator.iter_errors(merged))
        where = f"methods.{name}" + (f".per_dataset.{dataset}" if dataset else "")
        if error is not None:
            field = ".".join(str(p) for p in error.absolute_path)
            raise ConfigError(f"bad value in {source} at {where}{'.' + field if field else ''}: "
                              f"{schema_message(error, validator.schema)} (after resolving "
                              "base/per_dataset)")
        if own:
            from wscat.own_method_check import check

            try:
                check(merged)
            except ValueError as own_error:
                raise ConfigError(f"{source}, {where}: {own_error}") from own_error
        if key is not None:
            _VALID_METHODS.add(key)


def _check_references(params: dict[str, Any], source: str = "params.yaml") -> None:
    """The checks a JSON schema cannot express: the names each section uses exist elsewhere."""
    methods = params["methods"]
    for name in methods:
        _check_method(params, name, source)
    for name, experiment in params["experiments"].items():
        if name.endswith(PAIRED):  # results/tables/NAME.tex is experiment BASE's paired table
            base = name[: -len(PAIRED)]
            raise ConfigError(f"experiments.{name}: a name ending in {PAIRED} has the table "
                              f"results/tables/{name}.tex, which is where an experiment "
                              f"'{base}' writes its paired comparison, so Snakemake builds that "
                              f"one; rename it (e.g. '{base}_paired')")
        dataset = experiment["dataset"]
        for section in ("datasets", "training"):
            if dataset not in params[section]:
                raise ConfigError(f"experiments.{name}: dataset '{dataset}' has no entry under "
                                  f"{section}: in {source}; add one")
        if experiment["model"] not in params["models"]:
            raise ConfigError(f"experiments.{name}: unknown model '{experiment['model']}'; "
                              f"models: {', '.join(params['models'])}")
        reference = experiment.get("reference")
        if reference is not None and reference not in experiment["methods"]:
            raise ConfigError(f"experiments.{name}.reference: '{reference}' is not one of its "
                              f"methods ({', '.join(experiment['methods'])}); name one of them")
        for method in experiment["methods"]:
            if method not in methods:
                raise _unknown(source, f"experiments.{name}.methods", "method", method, methods)
    for name in methods:
        method = method_for(params, name)
        labeler = method.get("labeler")
        if labeler is not None and labeler not in methods:
            raise _unknown(source, f"methods.{name}.labeler", "method", labeler, methods)
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
    for name, model in params["models"].items():  # what the schema cannot say of a depth
        depth = model.get("depth")
        if model["architecture"] == "wideresnet" and depth is not None and (
                depth < 10 or (depth - 4) % 6):
            raise ConfigError(f"{source}: models.{name}.depth: {depth} is no WideResNet depth "
                              "(6n+4: 10, 16, 22, 28, 34, 40, ...); give one of those")
    for dataset in [None, *(params["evaluation"].get("per_dataset") or {})]:
        checks = evaluation_for(params, dataset)["checks"]
        for key in ("pgd_steps", "eps_factors"):  # each point's accuracy against the next's
            values = checks[key]
            if any(later <= earlier for earlier, later in zip(values, values[1:])):
                where = "evaluation" + (f".per_dataset.{dataset}" if dataset else "")
                raise ConfigError(f"{source}: {where}.checks.{key}: {values} must increase (the "
                                  "check asks accuracy not to rise from one value to the next); "
                                  "sort them")
    for dataset in params["evaluation"].get("per_dataset", {}) or {}:
        if dataset not in params["datasets"]:
            raise _unknown(source, "evaluation.per_dataset", "dataset", dataset,
                           params["datasets"])
    for dataset, training in params["training"].items():
        _check_compile_mode(dataset, training)
        for method in training.get("per_method") or {}:
            if method not in methods:
                raise _unknown(source, f"training.{dataset}.per_method", "method", method,
                               methods)
        for method in [None, *(training.get("per_method") or {})]:
            schedule = training_for(params, dataset, method)
            fixed = schedule.get("labelled_per_batch")
            if fixed is not None and fixed > schedule["batch_size"]:
                where = f"training.{dataset}" + (f".per_method.{method}" if method else "")
                raise ConfigError(f"{where}.labelled_per_batch = {fixed} exceeds batch_size = "
                                  f"{schedule['batch_size']}: a batch cannot hold more labelled "
                                  "images than images; lower it or raise batch_size")
    for name, dataset in params["datasets"].items():
        if dataset["eps"] > 0 and (dataset["train_step_size"] <= 0 or dataset["eval_step_size"] <= 0):
            raise ConfigError(f"datasets.{name}: step sizes must be positive when eps > 0")


def check_pretraining_ends(run: RunConfig) -> None:
    """A PUAT run whose pre-training lasts the whole run never starts its adversarial game: it
    would train as Mean Teacher under PUAT's name. Refused when it is asked to train (`wscat
    train`, its job, the API), not at load: params shrunk for a quick look (fewer epochs) stay
    valid for the experiments that do not run PUAT."""
    knobs, epochs = run.method_params, run.training["epochs"]
    if knobs["objective"] == "puat" and knobs["pretrain_epochs"] >= epochs:
        raise ConfigError(
            f"{run.method} pre-trains for {knobs['pretrain_epochs']:g} of its {epochs} epochs "
            f"on {run.dataset} (pretrain_epochs), so its adversarial game would never start and "
            f"it would train as Mean Teacher; set methods.{run.method}.per_dataset."
            f"{run.dataset}.pretrain_epochs below {epochs} or raise "
            f"training.{run.dataset}.epochs")


def _check_compile_mode(dataset: str, training: dict[str, Any]) -> None:
    """A `compile_mode` where nothing compiles is a mistake: refused where it is written (the
    dataset's own, when neither it nor any per-method entry sets compile: true; a per-method
    one, when that method does not compile)."""
    per_method = training.get("per_method") or {}
    anything = training["compile"] or any(knobs.get("compile") for knobs in per_method.values())
    places = [(f"training.{dataset}", training, anything)] + [
        (f"training.{dataset}.per_method.{m}", knobs, knobs.get("compile", training["compile"]))
        for m, knobs in per_method.items()]
    for name, knobs, compiles in places:
        if "compile_mode" in knobs and not compiles:
            raise ConfigError(f"{name}: compile_mode {knobs['compile_mode']} needs compile: "
                              "true; set compile: true or drop compile_mode")


def yaml_error_line(error: yaml.YAMLError) -> str:
    """A YAML error as one line with its line and column (1-based), as an editor counts them."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


def _not_utf8(path: Path, error: UnicodeDecodeError) -> ConfigError:
    """The one-line refusal of a file that is not UTF-8 text: a binary file, or text saved in
    another encoding (where the first bad byte is)."""
    data = error.object if isinstance(error.object, bytes) else b""
    if b"\0" in data[:4096]:
        return ConfigError(f"{path} is a binary file, not YAML text; pass the params .yaml file")
    line = data.count(b"\n", 0, error.start) + 1
    column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
    return ConfigError(f"{path} is not a UTF-8 text file: byte 0x{data[error.start]:02x} on line "
                       f"{line}, column {column}; save it as UTF-8 (or, if it is another file, "
                       "pass the params .yaml file)")


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content, read with StrictLoader; ConfigError (one line, with the line
    numbers) if it is not UTF-8 text, not YAML, or gives a key twice in one mapping."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise _not_utf8(path, error) from error
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader
    except DuplicateKeyError as error:
        raise ConfigError(f"{path}: {error}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {yaml_error_line(error)}") from error


def stop_on_bad_yaml(path: str | Path) -> None:
    """For the Snakefile, before its `configfile:`: a params file that is not YAML, or gives a key
    twice, ends the run with one line that has the line numbers (Snakemake's own message has
    none, and its loader keeps the last of two values silently); exit 2. A missing file is one
    line too, unless `--configfile` names the params (Snakemake then loads that one alone)."""
    path = Path(path)
    if not path.is_file():
        from wscat.slurm_preflight import cli_args  # the command line loading the Snakefile

        args = cli_args()
        if args is not None and not getattr(args, "configfile", None):  # else no params at all
            print(f"wscat: no {path} in {Path.cwd()}: run snakemake from the repository root (or "
                  f"`-d ROOT`), or restore the file (`git checkout {path}`)", file=sys.stderr)
            sys.exit(2)
        return
    try:
        read_yaml(path)
    except ConfigError as error:
        print(f"wscat: {error}", file=sys.stderr)
        sys.exit(2)


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read (wscat.config.read_yaml: no key given twice) and validate a params file."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a params file; pass the .yaml file itself "
                          "(--params)")
    try:  # a pipe or a device is there but no file (reading a pipe would wait for ever)
        require_file(path, f"params file not found: {path} (run from the repository root or "
                           "pass --params)")
    except (FileNotFoundError, ValueError) as error:
        raise ConfigError(str(error)) from None
    try:  # another wscat file (a checkpoint, a split, metrics): say which, not a decode error
        check_input_kind(path, "params")
    except ValueError as error:
        raise ConfigError(str(error)) from error
    params = read_yaml(path)  # a key given twice is refused, not silently the last
    if not isinstance(params, dict):
        raise ConfigError(f"{path} must hold a mapping of sections (experiments, datasets, ...)")
    return validate_params(params, path)


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
    validation: dict[str, int]

    @classmethod
    def from_params(cls, params: dict[str, Any], *, dataset: str, model: str, method: str,
                    seed: int) -> "RunConfig":
        unknown = unknown_name(params, {"dataset": dataset, "method": method, "model": model})
        if unknown is not None:
            key, name, section = unknown
            raise ConfigError(f"unknown {key} '{name}'; configured: {', '.join(params[section])}")
        return cls(dataset=dataset, model=model, method=method, seed=seed,
                   model_spec=params["models"][model], data=params["datasets"][dataset],
                   training=training_for(params, dataset, method),
                   method_params=method_for(params, method, dataset),
                   evaluation=evaluation_for(params, dataset),
                   validation=validation_for(params, dataset))
