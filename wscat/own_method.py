"""Your own method: `objective: FILE.py:Class` in params.yaml names a `wscat.methods.Method`
subclass in a file of yours (docs/methods.md, "Your own method").

Its knobs are its constructor's keyword arguments, written beside `objective` as a built-in
method's are (`lam: 6.0`); the keys the pipeline reads (`PIPELINE_KEYS`) are not passed to it.
The file's SHA-256 is part of the method's training params (wscat.workflow.train_params), so an
edit retrains it and makes its old metrics stale, as a changed knob does.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Any

# FILE.py:Class, FILE a path from the folder the workflow runs in (where params.yaml is).
FILE_OBJECTIVE = re.compile(r"(?P<file>[^:\s]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)")
# What the pipeline reads from a method's entry; everything else is a knob of its constructor.
PIPELINE_KEYS = frozenset({"base", "objective", "data", "selection", "labeler", "per_dataset",
                           "generated", "generated_fraction", "generated_labeler"})
# Constructor arguments the model and data decide (wscat.methods.SHAPES), never params.yaml's.
SHAPES = ("feature_dim", "num_classes", "image_shape")

_LOADED: dict[tuple[Path, str, str], type] = {}


def is_own(objective: Any) -> bool:
    """Whether an objective names a class in a file (FILE.py:Class) rather than a built-in."""
    return isinstance(objective, str) and FILE_OBJECTIVE.fullmatch(objective) is not None


def _parts(objective: str) -> tuple[Path, str]:
    match = FILE_OBJECTIVE.fullmatch(objective)
    if match is None:
        raise ValueError(f"objective {objective!r} is neither a built-in nor FILE.py:Class")
    return Path(match["file"]), match["name"]


def source(objective: str) -> Path:
    """The file an own objective names, as written (relative to the working folder)."""
    return _parts(objective)[0]


def digest(objective: str) -> str:
    """SHA-256 of the file's bytes: the method's code, as its training params record it."""
    path = source(objective)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise ValueError(f"{path}: no such file to read the method from "
                         f"({error.strerror or error}); give FILE.py:Class with FILE a path "
                         f"from the folder you run in") from None


def digest_or_none(objective: str) -> str:
    """`digest`, or "" where the file cannot be read (the check then says why)."""
    try:
        return digest(objective)
    except ValueError:
        return ""


def load(objective: str) -> type:
    """The class FILE.py:Class names, imported from the file (once a process for each content):
    one line (ValueError) where the file is missing, does not import, lacks the class, or the
    class is no `wscat.methods.Method`."""
    from wscat.methods.base import Method

    path, name = _parts(objective)
    code = digest(objective)
    key = (path.resolve(), name, code)
    if key in _LOADED:
        return _LOADED[key]
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"wscat_own_{code[:16]}_{stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up there
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the user's file: any error it raises is its own
        del sys.modules[module_name]
        where = f" (line {error.lineno})" if isinstance(error, SyntaxError) else ""
        raise ValueError(f"{path} does not import: {type(error).__name__}: {error}{where}; run "
                         f"`python {path}` to see the traceback") from None
    cls = getattr(module, name, None)
    if not inspect.isclass(cls):
        classes = sorted(n for n, v in vars(module).items()
                         if inspect.isclass(v) and issubclass(v, Method) and v is not Method
                         and v.__module__ == module_name)
        raise ValueError(f"{path} defines no class {name}"
                         + (f"; its methods: {', '.join(classes)}" if classes else ""))
    if not issubclass(cls, Method):
        raise ValueError(f"{path}:{name} is not a subclass of wscat.methods.Method (its loss "
                         "method is what the trainer calls; docs/methods.md, 'Your own method')")
    if inspect.isabstract(cls):
        raise ValueError(f"{path}:{name} does not define loss(model, batch, ctx) (it is "
                         "abstract)")
    _LOADED[key] = cls
    return cls


def constructor_knobs(cls: type) -> dict[str, bool]:
    """The knobs a method class's constructor takes, each with whether it is required."""
    parameters = inspect.signature(cls).parameters
    return {name: p.default is inspect.Parameter.empty for name, p in parameters.items()
            if name not in SHAPES and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def check(knobs: dict[str, Any]) -> None:
    """An own method's resolved entry: its class loads and takes exactly the knobs given (every
    key outside PIPELINE_KEYS), its required ones included; ValueError, one line, otherwise."""
    objective = knobs["objective"]
    cls = load(objective)
    accepted = constructor_knobs(cls)
    given = [key for key in knobs if key not in PIPELINE_KEYS]
    unknown = [key for key in given if key not in accepted]
    if unknown:
        takes = ", ".join(accepted) or "no knobs"
        raise ValueError(f"{objective} takes no knob {', '.join(map(repr, unknown))}; its "
                         f"constructor takes: {takes}")
    missing = [key for key, required in accepted.items() if required and key not in knobs]
    if missing:
        raise ValueError(f"{objective} needs {', '.join(map(repr, missing))} (its constructor "
                         "has no default for it); give it beside `objective`")
