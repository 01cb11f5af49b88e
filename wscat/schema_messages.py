"""A params.yaml schema error as a line that says what to write: a number YAML 1.1 reads as text
('1e-4'), a value left empty (YAML's null), a value none of a oneOf/anyOf's branches takes, or a
name its pattern refuses, in the words of the pattern's title (wscat.config's messages)."""
from __future__ import annotations

import re
from typing import Any

import jsonschema
import yaml

# A number as a person writes it; YAML 1.1 (PyYAML, Snakemake, DVC) reads some of these as text:
# 1e-4 and 1e9 (its floats need a dot and a signed exponent), or anything quoted.
_NUMBER_TEXT = re.compile(r"([-+]?)(\d+\.?\d*|\.\d+)(?:[eE]([-+]?)(\d+))?")
_TYPE_NAMES = {"null": "null", "integer": "an integer", "number": "a number",
               "string": "a string", "boolean": "true or false", "object": "a mapping",
               "array": "a list"}
# A key written with no value (`epochs:`): YAML reads it as null, which jsonschema calls None.
EMPTY = "null (an empty value)"
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
        return schema.get("title") or f"{text} matching {schema['pattern']}"
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


def known_keys(schema: Any, root: dict[str, Any], depth: int = 0) -> set[str]:
    """Every key a mapping's schema names: its `properties`, and those of the branches it
    combines (allOf, anyOf, oneOf, if/then/else), local `$ref`s followed."""
    schema = _resolved(schema, root)
    if not isinstance(schema, dict) or depth > 8:
        return set()
    keys = set(schema.get("properties") or {})
    for combined in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(combined) or []:
            keys |= known_keys(branch, root, depth + 1)
    for branch in ("if", "then", "else"):
        keys |= known_keys(schema.get(branch), root, depth + 1)
    return keys


def close_key(error: jsonschema.ValidationError, root: dict[str, Any]) -> str:
    """For a key the schema does not know (additionalProperties, unevaluatedProperties): '; did
    you mean X?' when a known key is close to it (`betta`, `epoch`), else ''."""
    import difflib

    if error.validator not in ("additionalProperties", "unevaluatedProperties") \
            or not isinstance(error.instance, dict):
        return ""
    known = known_keys(error.schema, root)
    patterns = list((_resolved(error.schema, root).get("patternProperties") or {}))
    for key in error.instance:  # the unexpected ones: neither named nor matching a pattern
        if isinstance(key, str) and key not in known \
                and not any(re.search(pattern, key) for pattern in patterns):
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


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
    if instance is None and error.validator in ("type", "enum", "const"):
        return f"{EMPTY} is not {_expected(error.schema, root)}: give one"
    if error.validator in ("oneOf", "anyOf") and error.context:
        shown = EMPTY if instance is None else _shown(instance)
        message = f"{shown} is not valid: give {_expected(error.schema, root)}"
        description = error.schema.get("description") if isinstance(error.schema, dict) else None
        if isinstance(description, str) and "\n" not in description.strip() \
                and len(description) <= 100:
            message += f" ({description.strip()})"
        return message
    if error.validator == "pattern" and isinstance(error.schema, dict) \
            and isinstance(instance, str) and error.schema.get("title"):
        message = f"{instance!r} is not {error.schema['title']}"
        fixed = instance.strip().lower()
        if fixed != instance and re.search(error.validator_value, fixed):
            message += f": write {fixed}"
        return message
    if error.validator == "unevaluatedProperties":  # a method's key no objective takes
        return (error.message.replace("Unevaluated properties", "Additional properties")
                + close_key(error, root))
    return error.message
