"""Your own method: `objective: FILE.py:Class` in params.yaml names a `wscat.methods.Method`
subclass in a file of yours (docs/methods.md, "Your own method").

Its knobs are its constructor's keyword arguments, written beside `objective` as a built-in
method's are (`lam: 6.0`); the keys the pipeline reads (`PIPELINE_KEYS`) are not passed to it
(wscat.own_method_check says which knobs and values it takes). Its code is the file and the
modules of yours it imports (`code_files`): their SHA-256 is part of the method's training params
(wscat.workflow.train_params), so an edit of any of them retrains it and makes its old metrics
stale, as a changed knob does. No torch here: the class is imported only when asked for.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from pathlib import Path
from types import CodeType
from typing import Any

from wscat.errors import first_line

# FILE.py:Class, FILE a path from the folder you run in, as every path in params.yaml.
FILE_OBJECTIVE = re.compile(r"(?P<file>[^:\s]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)")
# What the pipeline reads from a method's entry; everything else is a knob of its constructor.
PIPELINE_KEYS = frozenset({"base", "objective", "data", "selection", "labeler", "per_dataset",
                           "generated", "generated_fraction", "generated_labeler"})
# Constructor arguments the model and data decide (wscat.methods.SHAPES), never params.yaml's.
SHAPES = ("feature_dim", "num_classes", "image_shape")

_LOADED: dict[tuple[Path, str, str], type] = {}


class OwnMethodError(ValueError):
    """Your method's own code raised (its constructor or loss): one line naming the file and line;
    `wscat --debug` shows the traceback."""


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


def _roots(path: Path) -> list[Path]:
    """Where the file's own imports are found: its folder (as `python FILE.py` has it), then
    the folder you run in."""
    return list(dict.fromkeys([path.parent, Path(".")]))


def _local_module(name: str, roots: list[Path]) -> Path | None:
    """The file of a module of yours (`helpers` -> helpers.py beside the method or in the folder
    you run in; `pkg.util` -> pkg/util.py), None for an installed one."""
    parts = name.split(".")
    for root in roots:
        for candidate in (root.joinpath(*parts).with_suffix(".py"),
                          root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


def code_files(objective: str) -> list[Path]:
    """The method's file and, read from their import statements (not run), every module of yours
    they import, transitively: the code an edit of which is a change of the method."""
    path = source(objective)
    _readable(path)
    found, todo = [path], [path]
    while todo:
        current = todo.pop()
        try:
            tree = ast.parse(current.read_bytes(), filename=str(current))
        except (SyntaxError, ValueError, OSError):
            continue  # `load` reports it, with its line
        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        # a.b.c runs a/__init__.py and a/b/__init__.py too
        prefixes = {".".join(n.split(".")[:i]) for n in names for i in range(1, n.count(".") + 2)}
        for name in sorted(prefixes):
            if name.split(".")[0] == "wscat":
                continue  # the package's own code: the run's version records it
            local = _local_module(name, _roots(path))
            if local is not None and all(local.resolve() != f.resolve() for f in found):
                found.append(local)
                todo.append(local)
    return [found[0], *sorted(found[1:])]


def _readable(path: Path) -> None:
    if not path.is_file():
        raise ValueError(f"{path}: no such file to read the method from (paths in params.yaml "
                         f"are read from the folder you run in, here {Path.cwd()})")


def digest(objective: str) -> str:
    """SHA-256 over the method's code files (`code_files`), each with its path."""
    sha = hashlib.sha256()
    for path in code_files(objective):
        sha.update(f"{path.as_posix()}\0".encode())
        sha.update(path.read_bytes())
        sha.update(b"\0")
    return sha.hexdigest()


def digest_or_none(objective: str) -> str:
    """`digest`, or "" where the file cannot be read (the check then says why)."""
    try:
        return digest(objective)
    except (ValueError, OSError):
        return ""


def _where(error: BaseException, path: Path) -> str:
    """' (FILE line N)' for the deepest frame of the error in the method's file, else ''."""
    target = str(path.resolve())
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if frame.filename == target]
    if isinstance(error, SyntaxError) and error.lineno:
        lines.append(error.lineno)
    return f" ({path} line {lines[-1]})" if lines else ""


def _compiled(path: Path) -> CodeType:
    """The file's code compiled from its text now. Python's own loader would take a .pyc in
    __pycache__ whose recorded time (whole seconds) and size match: a file edited within the
    second of an earlier import, to the same length (`version = 1` -> `2`), would run its old
    code under the new content's digest. Its own imports go through Python's loader, which
    wscat keeps from writing their .pyc (`load`)."""
    return compile(path.read_bytes(), str(path.resolve()), "exec", dont_inherit=True)


def load(objective: str) -> type:
    """The class FILE.py:Class names, imported from the file (once a process for each content),
    with the file's folder and the folder you run in on sys.path, in every process alike: one
    line (ValueError) where the file is missing, does not import, lacks the class, or the class
    is no `wscat.methods.Method`."""
    from wscat.methods.base import Method

    path, name = _parts(objective)
    code = digest(objective)
    key = (path.resolve(), name, code)
    if key in _LOADED:
        return _LOADED[key]
    for root in _roots(path):
        if str(root.resolve()) not in sys.path:
            sys.path.append(str(root.resolve()))
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"wscat_own_{code[:16]}_{stem}"
    spec = importlib.util.spec_from_file_location(module_name, path.resolve())
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up there
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no .pyc of your files from us (see _compiled)
    try:
        exec(_compiled(path), module.__dict__)
    except Exception as error:  # the user's file: any error it raises is its own
        del sys.modules[module_name]
        raise OwnMethodError(f"{path} does not import: {_raised(error, path)}") from error
    finally:
        sys.dont_write_bytecode = writes
    cls = getattr(module, name, None)
    if cls is Method:
        raise ValueError(f"{path}:{name} is wscat's base class, imported; name your subclass "
                         f"of it ({', '.join(_methods(module, module_name)) or 'none there'})")
    if not inspect.isclass(cls):
        classes = _methods(module, module_name)
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


def _methods(module: Any, module_name: str) -> list[str]:
    from wscat.methods.base import Method

    return sorted(n for n, v in vars(module).items()
                  if inspect.isclass(v) and issubclass(v, Method) and v is not Method
                  and v.__module__ == module_name)


def _raised(error: BaseException, path: Path) -> str:
    """'Type: first line of the message (FILE line N)', as each of your code's errors is said."""
    message = first_line(error) if str(error).strip() else "(no message)"
    return f"{type(error).__name__}: {message}{_where(error, path)}"


# Columns and file names of the trainer's own log (train_log.csv, dvclive/): a statistic of
# your loss may not take one.
RESERVED_STATS = frozenset({"epoch", "lr", "loss", "seconds", "score"})
STAT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def build(objective: str, cls: type, arguments: dict[str, Any]) -> Any:
    """Your method's instance, its loss guarded: an error raised in either is one line naming
    the file and line (OwnMethodError), and the loss's return is checked on its first call."""
    path = source(objective)
    try:
        method = cls(**arguments)
    except Exception as error:  # your constructor's own error
        hint = "; does its __init__ call super().__init__()?" if "_modules" in str(error) else ""
        raise OwnMethodError(f"{objective}: its constructor raised {_raised(error, path)}"
                             f"{hint}") from error
    if "_modules" not in vars(method):  # an nn.Module never set up: .to() and saving would fail
        raise OwnMethodError(f"{objective}: its __init__ does not call super().__init__()")
    own_loss, checked = method.loss, []

    @functools.wraps(own_loss)
    def loss(model: Any, batch: Any, ctx: Any) -> Any:
        try:
            result = own_loss(model, batch, ctx)
        except Exception as error:  # your loss's own error
            raise OwnMethodError(f"{objective}: its loss raised {_raised(error, path)}"
                                 ) from error
        if not checked:
            _check_return(objective, result)
            checked.append(True)
        return result

    method.loss = loss  # an instance attribute: not in the state dict
    return method


def _check_return(objective: str, result: Any) -> None:
    """What the trainer needs of a loss: (a scalar tensor with a gradient, {name: tensor}), the
    names fit for a log column and a file, none of the trainer's own."""
    import torch

    why = None
    if not (isinstance(result, tuple) and len(result) == 2):
        why = "a pair (loss, {name: tensor}) as Method.loss returns"
    else:
        value, stats = result
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            why = "its first item a scalar tensor (the loss)"
        elif not value.requires_grad:
            why = "a loss with a gradient (computed outside torch.no_grad, from the model)"
        elif not isinstance(stats, dict):
            why = "its second item a dict of statistics ({} for none)"
        else:
            for name, stat in stats.items():
                if not isinstance(name, str) or not STAT_NAME.fullmatch(name):
                    why = (f"statistic names of letters, digits and _ ({name!r} would be a log "
                           "column and a file name)")
                elif name in RESERVED_STATS or name.startswith("val_"):
                    why = (f"statistic names other than the trainer's own ({name!r}; its log "
                           f"has {', '.join(sorted(RESERVED_STATS))} and val_*)")
                elif not isinstance(stat, torch.Tensor) or stat.numel() != 1:
                    why = f"each statistic a scalar tensor ({name!r} is not; .detach() it)"
                if why:
                    break
    if why:
        raise OwnMethodError(f"{objective}: its loss must return {why}")
