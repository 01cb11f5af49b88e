"""Typed access to params.yaml, validated once against workflow/schemas/params.schema.yaml.

The schema is the single definition of what is valid; this module adds only the checks a
JSON schema cannot express (cross-references between sections).
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from wscat.sweeps import expand_paper

SCHEMA_PATH = Path(__file__).resolve().parent / "params.schema.yaml"


class ConfigError(ValueError):
    """A bad value in params.yaml or on the command line; the message says how to fix it."""


def load_schema() -> dict[str, Any]:
    """The params schema (shipped inside the package; the workflow validates with the same file)."""
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


# --- schema errors as a line that says what to write -------------------------------------------

# A number as a person writes it; YAML 1.1 (PyYAML, Snakemake, DVC) reads some of these as text:
# 1e-4 and 1e9 (its floats need a dot and a signed exponent), or anything quoted.
_NUMBER_TEXT = re.compile(r"([-+]?)(\d+\.?\d*|\.\d+)(?:[eE]([-+]?)(\d+))?")
_TYPE_NAMES = {"null": "null", "integer": "an integer", "number": "a number",
               "string": "a string", "boolean": "true or false", "object": "a mapping",
               "array": "a list"}
_BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
           ("exclusiveMaximum", "<"))


def _shown(value: Any) -> str:
    """A value as YAML spells it (null, true), short."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).split("\n")[0]
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return repr(value)


def _resolved(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its local `$ref` ("#/$defs/name") laid under it."""
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, dict) else {}
    rest = {key: value for key, value in schema.items() if key != "$ref"}
    return {**_resolved(target, root), **rest}


def _expected(schema: Any, root: dict[str, Any]) -> str:
    """What a schema accepts, in a few words ("null or an integer >= 1")."""
    schema = _resolved(schema, root)
    if "const" in schema:
        return _shown(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(_shown(value) for value in schema["enum"])
    branches = schema.get("oneOf") or schema.get("anyOf")
    if "type" not in schema and branches:
        return " or ".join(_expected(branch, root) for branch in branches)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    text = " or ".join(_TYPE_NAMES.get(kind, kind) for kind in kinds) or "another value"
    bounds = [f"{sign} {schema[key]}" for key, sign in _BOUNDS if key in schema]
    if bounds:
        text += " " + " and ".join(bounds)
    if "pattern" in schema:
        text += f" matching {schema['pattern']}"
    return text


def _wants_integer(schema: Any, root: dict[str, Any]) -> bool:
    """The schema (or one of its branches) takes integers but no other numbers."""
    schema = _resolved(schema, root)
    kinds = schema.get("type")
    kinds = {kinds} if isinstance(kinds, str) else set(kinds or [])
    for branch in schema.get("oneOf") or schema.get("anyOf") or []:
        branch = _resolved(branch, root)
        kind = branch.get("type")
        kinds |= {kind} if isinstance(kind, str) else set(kind or [])
    return "integer" in kinds and "number" not in kinds


def number_hint(text: str, integer: bool = False) -> str | None:
    """How to write `text`, a number YAML 1.1 reads as text (1e-4, 1e9, "0.5"), so that it reads
    as a number: "1.0e-4", "1.0e+9", "0.5"; None if `text` is no number."""
    match = _NUMBER_TEXT.fullmatch(text.strip())
    if match is None:
        return None
    sign, mantissa, exponent_sign, exponent = match.groups()
    value = float(match[0])
    if integer and value.is_integer() and abs(value) <= 2**63:
        return str(int(value))
    if exponent is None:
        written = f"{sign}{mantissa}"
    else:
        mantissa = f"0{mantissa}" if mantissa.startswith(".") else mantissa
        mantissa = mantissa if "." in mantissa else f"{mantissa}.0"
        mantissa = f"{mantissa}0" if mantissa.endswith(".") else mantissa
        written = f"{sign}{mantissa}e{exponent_sign or '+'}{exponent}"
    if isinstance(yaml.safe_load(written), (int, float)):
        return written
    return repr(value)  # Python's own spelling (0.0001, 1e+20) reads as a number in YAML 1.1


def schema_message(error: jsonschema.ValidationError, root: dict[str, Any]) -> str:
    """A schema error's message, saying what to write where jsonschema's own does not: a number
    YAML reads as text ('1e-4'), or a value none of a oneOf/anyOf's branches takes."""
    instance = error.instance
    if error.validator in ("type", "oneOf", "anyOf") and isinstance(instance, str):
        integer = (_wants_integer(error.schema, root) if error.validator != "type"
                   else _wants_integer({"type": error.validator_value}, root))
        written = number_hint(instance, integer)
        if written is not None:
            if written == instance.strip() or "e" not in instance.lower():
                how = f"write {written} without quotes"  # it was quoted
            elif "." in written:
                how = f"write {written} (YAML 1.1 needs a dot and a signed exponent)"
            else:
                how = f"write {written}"
            return f"{instance!r} is read as text by YAML: {how}"
    if error.validator in ("oneOf", "anyOf") and error.context:
        message = f"{_shown(instance)} is not valid: give {_expected(error.schema, root)}"
        description = error.schema.get("description") if isinstance(error.schema, dict) else None
        if isinstance(description, str) and "\n" not in description.strip() \
                and len(description) <= 100:
            message += f" ({description.strip()})"
        return message
    return error.message


# What the code can represent: seeds are numpy/torch seeds (0..2^32-1), every other integer (a
# count, a size, a number of steps) indexes tensors and loops with 32-bit room to spare.
SEED_MAX = 2**32 - 1
INT_MAX = 2**31 - 1


def check_numbers(value: Any, where: str = "") -> None:
    """Refuse NaN and +-inf wherever params.yaml holds a number (JSON Schema's bounds let NaN
    through: every comparison with it is false), and integers beyond what the code represents."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_numbers(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_numbers(item, f"{where}.{index}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"bad value in params.yaml at {where or '<top level>'}: {value} is not "
                          "a finite number; give a finite value (a number too large for a float "
                          "reads as inf)")
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = where.split(".")
        limit = SEED_MAX if "seed" in parts[-1] or parts[-2:-1] == ["seeds"] else INT_MAX
        if not -INT_MAX - 1 <= value <= limit:
            raise ConfigError(f"bad value in params.yaml at {where}: {value} is beyond what the "
                              f"code can represent (at most {limit}); give a smaller value")


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """Check `params` against the schema and the cross-references; raise ConfigError on the first
    problem. Returns the params with the runs of the `paper` section made explicit
    (wscat.sweeps.expand_paper)."""
    check_numbers(params)
    schema = load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(params), key=lambda e: (len(e.absolute_path), e.path))
    if errors:
        error = errors[0]
        if error.validator == "additionalProperties":
            message = f"unknown key in params.yaml at {_where(error)}: {error.message}"
        elif error.validator == "propertyNames":
            message = f"unknown name in params.yaml at {_where(error)}: {error.message}"
        else:
            message = (f"bad value in params.yaml at {_where(error)}: "
                       f"{schema_message(error, schema)}")
        raise ConfigError(message + " (see workflow/schemas/params.schema.yaml)")
    _check_references(params)
    _check_paper(params)
    if params.get("paper"):
        params = expand_paper(params)
        _check_references(params)  # the generated methods and datasets
    return params


# --- the paper section: the names it uses exist (its runs are generated by wscat.sweeps) ----

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


def method_for(params: dict[str, Any], method: str, dataset: str | None = None) -> dict[str, Any]:
    """A method's knobs on one dataset: its resolved entry, `per_dataset[dataset]` laid over it."""
    entry = resolve_method(params, method)
    overrides = entry.pop("per_dataset", {}) or {}
    return {**entry, **(overrides.get(dataset, {}) if dataset else {})}


def training_for(params: dict[str, Any], dataset: str, method: str | None = None
                 ) -> dict[str, Any]:
    """A run's schedule: `training[dataset]`, with `per_method[method]` laid over it (the
    proxy's Mean Teacher labeler trains longer than the runs it labels for, as in the paper)."""
    base = dict(params["training"][dataset])
    per_method = base.pop("per_method", None) or {}
    return {**base, **(per_method.get(method, {}) if method else {})}


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
                              f"{schema_message(error, schema)} (after resolving base/per_dataset)")


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
    for dataset, training in params["training"].items():
        for method in training.get("per_method") or {}:
            if method not in methods:
                raise ConfigError(f"training.{dataset}.per_method: unknown method '{method}'; "
                                  f"known methods: {', '.join(sorted(methods))}")
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


def yaml_error_line(error: yaml.YAMLError) -> str:
    """A YAML error as one line with its line and column (1-based), as an editor counts them."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


class DuplicateKeyError(yaml.YAMLError):
    """A key given twice in one mapping (PyYAML, Snakemake and DVC keep the last one silently)."""


def _node_paths(node: yaml.Node, path: str, paths: dict[yaml.Node, str]) -> None:
    """The dotted path of every mapping node under `node` (iteratively: no recursion limit)."""
    stack = [(node, path)]
    while stack:
        node, path = stack.pop()
        if node in paths:  # an alias of a node already seen
            continue
        paths[node] = path
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                stack.append((value, f"{path}.{name}" if path else str(name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((value, f"{path}.{index}" if path else str(index))
                         for index, value in enumerate(node.value))


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (DuplicateKeyError, with the
    key's dotted path and both lines), instead of keeping the last value silently."""

    def construct_document(self, node: yaml.Node) -> Any:
        self._paths: dict[yaml.Node, str] = {}
        _node_paths(node, "", self._paths)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, tuple[yaml.Node, yaml.Node]] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, (key_node, value_node))
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    continue
                if first[0] is not key_node:
                    raise DuplicateKeyError(self._duplicate(node, key, first, (key_node, value_node)))
        return super().construct_mapping(node, deep=deep)

    def _duplicate(self, node: yaml.MappingNode, key: Any,
                   *entries: tuple[yaml.Node, yaml.Node]) -> str:
        parent = getattr(self, "_paths", {}).get(node, "")
        where = f"{parent}.{key}" if parent else str(key)

        def entry(key_node: yaml.Node, value_node: yaml.Node) -> str:
            value = (f" ({value_node.value})" if isinstance(value_node, yaml.ScalarNode)
                     and len(value_node.value) <= 40 else "")
            return f"line {key_node.start_mark.line + 1}{value}"

        return (f"duplicate key {where}: given on {' and on '.join(entry(*e) for e in entries)}; "
                "keep one (YAML readers such as Snakemake and DVC silently use the last)")


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content, read with StrictLoader; ConfigError (one line, with the line
    numbers) if it is not YAML or gives a key twice in one mapping."""
    path = Path(path)
    try:
        return yaml.load(path.read_text(), Loader=StrictLoader)  # noqa: S506 - a SafeLoader
    except DuplicateKeyError as error:
        raise ConfigError(f"{path}: {error}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {yaml_error_line(error)}") from error


def stop_on_bad_yaml(path: str | Path) -> None:
    """For the Snakefile, before its `configfile:`: a params file that is not YAML, or gives a key
    twice, ends the run with one line that has the line numbers (Snakemake's own message has
    none, and its loader keeps the last of two values silently)."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        read_yaml(path)
    except ConfigError as error:
        print(f"wscat: {error}", file=sys.stderr)
        sys.exit(1)


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read (wscat.config.read_yaml: no key given twice) and validate a params file."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a params file; pass the .yaml file itself "
                          "(--params)")
    if not path.is_file():
        raise ConfigError(f"params file not found: {path} (run from the repository root or pass --params)")
    params = read_yaml(path)  # a key given twice is refused, not silently the last
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
                   training=training_for(params, dataset, method),
                   method_params=method_for(params, method, dataset),
                   evaluation=evaluation_for(params, dataset))
