"""What your own method's entry in params.yaml may hold (wscat.own_method): its constructor's
keyword arguments, each given where it has no default, each of the type its annotation names.
Checked by wscat.config before anything runs, in `snakemake -n` and every `wscat` step alike."""
from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from typing import Any

from wscat.own_method import PIPELINE_KEYS, SHAPES, load


def constructor_knobs(cls: type) -> dict[str, bool]:
    """The knobs a method class's constructor takes, each with whether it is required."""
    parameters = inspect.signature(cls).parameters
    return {name: p.default is inspect.Parameter.empty for name, p in parameters.items()
            if name not in SHAPES and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _type_problem(value: Any, annotation: Any) -> str | None:
    """None where `value` (as YAML gave it) fits `annotation`, else what it should be; None
    too for an annotation this does not read (a class of its own): the constructor decides."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        problems = [_type_problem(value, arg) for arg in args]
        return None if None in problems else " or ".join(p for p in problems if p)
    if origin is typing.Literal:  # true is not 1 here, as YAML tells them apart
        fits = any(value == arg and type(value) is type(arg) for arg in args)
        return None if fits else "one of " + ", ".join(map(repr, args))
    if annotation is type(None):
        return None if value is None else "null"
    if annotation is bool:
        return None if isinstance(value, bool) else "true or false"
    if annotation is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if annotation is float:
        return (None if isinstance(value, (int, float)) and not isinstance(value, bool)
                else "a number")
    if annotation is str:
        return None if isinstance(value, str) else "text"
    if origin in (list, tuple, collections.abc.Sequence) or annotation in (list, tuple):
        return None if isinstance(value, list) else "a list"
    if origin is dict or annotation is dict:
        return None if isinstance(value, dict) else "a mapping"
    return None


def check(knobs: dict[str, Any]) -> None:
    """An own method's resolved entry: its class loads and takes exactly the knobs given (every
    key outside PIPELINE_KEYS), its required ones included, each of its annotated type;
    ValueError, one line, otherwise."""
    objective = knobs["objective"]
    cls = load(objective)
    parameters = inspect.signature(cls).parameters
    for name, p in parameters.items():
        if p.kind is p.POSITIONAL_ONLY:
            raise ValueError(f"{objective}: its constructor takes {name!r} by position only (a "
                             "/ in its signature); knobs are passed by name")
        if name in PIPELINE_KEYS:
            raise ValueError(f"{objective}: its constructor takes {name!r}, a key the pipeline "
                             f"reads (methods.<name>.{name}); rename the argument")
    accepted = constructor_knobs(cls)
    given = [key for key in knobs if key not in PIPELINE_KEYS]
    shapes = [key for key in given if key in SHAPES]
    if shapes:
        raise ValueError(f"{objective}: {shapes[0]!r} is set by the model and data, not by "
                         "params.yaml; drop it")
    unknown = [key for key in given if key not in accepted]
    if unknown:
        takes = ", ".join(accepted) or "no knobs"
        extra = ("; its **kwargs are not passed: name each knob in its signature"
                 if any(p.kind is p.VAR_KEYWORD for p in parameters.values()) else "")
        raise ValueError(f"{objective} takes no knob {', '.join(map(repr, unknown))}; its "
                         f"constructor takes: {takes}{extra}")
    missing = [key for key, required in accepted.items() if required and key not in knobs]
    if missing:
        raise ValueError(f"{objective} needs {', '.join(map(repr, missing))} (its constructor "
                         "has no default for it); give it beside `objective`")
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - annotations this cannot resolve: the constructor decides
        hints = {}
    for key in given:
        problem = _type_problem(knobs[key], hints.get(key, inspect.Parameter.empty))
        if problem is not None:
            raise ValueError(f"{objective}: {key}: {knobs[key]!r} is not {problem} (its "
                             f"constructor's annotation: {_shown(hints[key])})")


def _shown(annotation: Any) -> str:
    """The annotation as written: a plain class by its name, anything else (Literal['a', 'b'],
    int | None, Optional[float]) in full, without "typing.": a Literal's __name__ is 'Literal'."""
    return (annotation.__name__ if isinstance(annotation, type)
            else str(annotation).replace("typing.", ""))
