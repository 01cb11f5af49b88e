"""One error path for `wscat`: an anticipated failure becomes one line saying what is wrong and
what to do; anything else is an unexpected error whose traceback `--debug` (or WSCAT_DEBUG=1)
shows."""
from __future__ import annotations

import errno
import os
import re
import zipfile
from pathlib import Path

from wscat.file_kinds import KIND_NAMES, is_npy

DEBUG_ENV = "WSCAT_DEBUG"

# Exit codes: 2 bad input (as argparse), 1 unexpected, 130 interrupted (as a shell's SIGINT),
# 143 terminated (SIGTERM: 128 + 15, as a shell reports it).
BAD_INPUT, UNEXPECTED, INTERRUPTED, TERMINATED = 2, 1, 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, a cluster's time limit, Snakemake stopping its jobs), raised in the
    main thread so that the clean-up of Ctrl-C runs: locks released, nothing half-written."""


# What np.load raises on a truncated, foreign or malformed .npz (and a missing key in it).
NPZ_ERRORS = (KeyError, ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile)


class OutputError(OSError):
    """An output location that cannot be written (read-only, full, not permitted)."""


def debug_requested(flag: bool = False) -> bool:
    """Whether to let an unexpected error raise with its traceback."""
    return flag or os.environ.get(DEBUG_ENV, "").strip() not in ("", "0", "false", "no")


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message (its type's name when it has none)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def npz_problem(error: BaseException, path: object | None = None) -> str:
    """np.load's failure as one line. A file that is no .npz at all is said to be so (an .npy
    that np.save wrote, by its header), and so is an .npz holding an array of Python objects:
    numpy's own message advises allow_pickle=True, which would run code from a file wscat did
    not write."""
    if path is not None and is_npy(str(path)):  # np.load returns its one array, not an archive
        return f"it is {KIND_NAMES['npy']}, not an .npz archive of named arrays"
    if isinstance(error, ValueError) and "allow_pickle" in str(error):
        if path is not None and zipfile.is_zipfile(str(path)):
            return ("an array in it holds Python objects (dtype=object), which only a pickle "
                    "load reads, and wscat loads no pickles")
        return "it is not an .npz file (not a zip archive of arrays)"
    if isinstance(error, IsADirectoryError):
        return "it is a folder, not a file"
    return " ".join(f"{type(error).__name__}: {error}".split())


def require_file(path: object, missing: str) -> None:
    """Raise FileNotFoundError(`missing`) when `path` does not exist, and a one-line ValueError
    when it is a folder, or something else that is no file (a pipe, a device), where a file
    belongs (np.load would wait on a pipe for ever)."""
    if os.path.isdir(str(path)):
        raise ValueError(f"{path} is a folder, not a file; pass the file itself")
    if not os.path.isfile(str(path)):
        if os.path.exists(str(path)):
            raise ValueError(f"{path} is not a regular file (a pipe or a device); pass the "
                             "file itself")
        raise FileNotFoundError(missing)


def is_text_file(path: object) -> bool:
    """Whether the file at `path` is UTF-8 text without NUL bytes (not a binary file)."""
    try:
        return "\0" not in Path(str(path)).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False


def os_error_line(error: OSError, path: object | None = None) -> str:
    """An OSError as one line: where, what, and how to fix it."""
    where = path or error.filename or "the output location"
    if isinstance(error, OutputError):
        return error.strerror or first_line(error)
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied on {where}; {_permission_fix(str(where))}"
    if error.errno == errno.EROFS:
        return f"{where} is on a read-only file system; choose a writable output location"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):  # (which step, so whether it resumes: unknown)
        return f"no space left on the device of {where}; free some space and rerun"
    if error.errno == errno.EISDIR:
        return f"{where} is a folder, not a file; pass a file path"
    if error.errno == errno.ENOTDIR:
        return f"a part of {where} is a file, not a folder; choose another location"
    if isinstance(error, FileNotFoundError) and not error.filename:
        return first_line(error)
    reason = error.strerror or first_line(error)
    return f"{reason}: {where}"


def write_error_line(error: OSError, path: object) -> str:
    """A failed write of `path` as one line: an OutputError's own message (it names the path),
    any other OSError as "cannot write PATH: " and os_error_line's."""
    if isinstance(error, OutputError):
        return os_error_line(error)
    return f"cannot write {path}: {os_error_line(error, path)}"


def _permission_fix(where: str) -> str:
    """What to do about a permission refused on `where`: a file this user cannot read is an
    input (wscat writes its outputs through a new file in their folder), to make readable; a
    file or folder it cannot write, to make writable or replace."""
    if os.path.isfile(where) and not os.access(where, os.R_OK):
        return "make it readable for this user"
    if os.path.isdir(where) and os.access(where, os.W_OK) and not os.access(where, os.R_OK):
        return "make it readable for this user"
    return "make it writable for this user, or choose another location"


def _out_of_gpu_memory(error: BaseException) -> bool:
    """torch.OutOfMemoryError (CUDA's allocator), told by its name: this module runs in steps
    that never import torch."""
    return any(kind.__module__ == "torch" and kind.__name__ == "OutOfMemoryError"
               for kind in type(error).__mro__)


def gpu_memory_line(error: BaseException) -> str:
    """A GPU out of memory as one line: how much was asked for and what to change (the rest of
    torch's message, every process's use and the allocator's settings, left out)."""
    message = first_line(error)
    asked = re.match(r".*?Tried to allocate [\d.]+ \w+", message)
    return (f"out of GPU memory ({asked.group(0) if asked else message[:160]}): run fewer jobs "
            "on the GPU at once (Snakemake: --resources gpu=1; the CIFAR-10 proxy: --jobs), or "
            "lower the batch size in params.yaml (training.DATASET.batch_size trains afresh, "
            "evaluation.batch_size evaluates afresh)")


def describe(error: BaseException) -> str | None:
    """One line for an anticipated failure; None for an unexpected one."""
    if isinstance(error, Terminated):
        return "terminated (SIGTERM: a time limit, `timeout` or a scheduler); finished outputs " \
               "are complete and nothing half-written was kept, so rerun the same command to " \
               "continue"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted; finished outputs are complete and nothing half-written was kept, " \
               "so rerun the same command to continue"
    if isinstance(error, OSError):
        return os_error_line(error)
    if _out_of_gpu_memory(error):
        return gpu_memory_line(error)
    if isinstance(error, (ValueError, zipfile.BadZipFile, EOFError)):
        return first_line(error)
    return None


_NAMED_TARGET = re.compile(r"(table|robustness|paper)_\w+")
# A Makefile target that runs Snakemake: its name, then the files it asks Snakemake for.
# A target whose recipe runs Snakemake, after other lines or not (`demo` checks dvc.yaml first).
_MAKE_TARGET = re.compile(r"^([a-z0-9][a-z0-9-]*):[^=\n]*\n(?:\t(?!\$\(SNAKEMAKE\)).*\n)*"
                          r"\t\$\(SNAKEMAKE\) (.+)$", re.M)
# Any Makefile target's name (`report`, `test`): a word at a line's start, then `:` not `:=`.
_MAKE_NAME = re.compile(r"^([a-z0-9][a-z0-9-]*):(?!=)", re.M)
_MAKE_VARIABLE = re.compile(r"^([A-Za-z_]\w*)[ \t]*:?=[ \t]*(\S[^\n]*?)[ \t]*$", re.M)
_LIST_TARGETS = ("`snakemake --list-target-rules` lists the named targets, and "
                 "results/tables/EXPERIMENT.tex (experiments: `wscat list-experiments`) is the "
                 "usual file target")


def _makefile_text(makefile: str) -> str:
    """The Makefile's text; "" where there is none (or it is unreadable)."""
    try:
        with open(makefile, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return ""


def make_names(makefile: str = "Makefile") -> set[str]:
    """Every target of the Makefile, those that run Snakemake or not (`report`, `test`)."""
    return set(_MAKE_NAME.findall(_makefile_text(makefile)))


def make_targets(makefile: str = "Makefile") -> dict[str, list[str]]:
    """{name: files} of the Makefile's targets that run Snakemake (`paper-digits`:
    [results/paper/digits/index.md]); {} where there is no Makefile."""
    text = _makefile_text(makefile)
    # `robustness-demo` asks for `$(ROBUSTNESS_DEMO).png`: its plain variables (`NAME := value`,
    # `NAME = value`, as set in the Makefile) are expanded, so the line names the file.
    variables = dict(_MAKE_VARIABLE.findall(text))

    def expand(files: str) -> list[str]:
        return re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)),
                      files).split()

    return {match.group(1): expand(match.group(2)) for match in _MAKE_TARGET.finditer(text)}


def _no_such_target(target: str, names: set[str]) -> str:
    """The line for a target that is no rule's name, no file and no rule's output: a Makefile
    target's name is pointed to `make`; a word close to the name of a rule in `names` (those
    that can be targets) or of a Makefile target gets it as a suggestion."""
    made = make_targets().get(target)
    if made:
        return (f"wscat: {target} is a target of the Makefile, not a Snakemake rule: run `make "
                f"{target}`, or `snakemake -- {' '.join(made)}`")
    if target in make_names():  # `snakemake report`: the Makefile's, not Snakemake's --report
        return (f"wscat: {target} is a target of the Makefile, not a Snakemake rule: run `make "
                f"{target}` (`make` lists the targets)")
    hint = ""
    if "/" not in target:
        import difflib

        # A rule's name (those that can be targets: no wildcards) or, closer, a Makefile
        # target's (`table2` for `make table2-digits`); a tie goes to the rule.
        choices = [(difflib.SequenceMatcher(None, word, name).ratio(), not make, name, make)
                   for word, pool, make in ((target.replace("-", "_"), names, False),
                                            (target, make_names(), True))
                   for name in pool]
        score, _, name, make = max(choices, default=(0.0, True, "", False))
        hint = "" if score < 0.6 else (f" did you mean `make {name}`?" if make else
                                       f" did you mean {name}?")
    if _NAMED_TARGET.fullmatch(target):
        return (f"wscat: no target rule {target};{hint} `snakemake --list-target-rules` lists "
                "them (table_EXPERIMENT, robustness_EXPERIMENT, paper_TIER; experiments: "
                "`wscat list-experiments`)")
    return f"wscat: no rule makes {target};{hint} {_LIST_TARGETS}"


def unknown_target_line(workflow: object, argv: list[str] | None = None,
                        targets: list[str] | None = None) -> str | None:
    """For the Snakefile, once every rule is defined: one line for a requested target that no
    rule makes, is no rule's name and does not exist (Snakemake's own MissingRuleException comes
    after its banner, over several lines, with advice about input functions).

    `targets`: the targets as Snakemake's parser read them (`slurm_preflight.cli_args()`), where
    known. Without them they are read from `argv`: what follows `--`, and before it only words of
    the named targets' own form (table_EXPERIMENT, robustness_EXPERIMENT, paper_TIER:
    wscat.targets.rule_name), since there an option's value cannot be told from a target. A path
    is compared as Snakemake compares it, normalised (`./results/tables/x.tex` is
    `results/tables/x.tex`)."""
    import sys

    rules = list(getattr(workflow, "rules", ()))
    names = {rule.name for rule in rules}
    targetable = {rule.name for rule in rules  # a rule with wildcards is no target by name
                  if not getattr(rule, "has_wildcards", lambda: False)()}
    if targets is None:
        argv = sys.argv if argv is None else argv
        before = argv[1:argv.index("--")] if "--" in argv else argv[1:]
        after = argv[argv.index("--") + 1:] if "--" in argv else []
        targets = [word for word in before if _NAMED_TARGET.fullmatch(word)] + after
    for target in map(str, targets):
        if target in names or os.path.exists(target):
            continue
        if _NAMED_TARGET.fullmatch(target) or \
                not any(rule.is_producer(os.path.normpath(target)) for rule in rules):
            return _no_such_target(target, targetable)
    return None


def stop_on_unknown_target(workflow: object) -> None:
    """End a Snakemake run whose target no rule makes with `unknown_target_line`, exit 2 (bad
    input, as every refusal of the workflow's: a failed job is Snakemake's exit 1)."""
    import sys

    from wscat.slurm_preflight import cli_args

    line = unknown_target_line(workflow, targets=getattr(cli_args(), "targets", None))
    if line is not None:
        print(line, file=sys.stderr)
        sys.exit(2)


def exit_code(error: BaseException) -> int:
    """The exit status a failure ends with."""
    if isinstance(error, KeyboardInterrupt):
        return TERMINATED if isinstance(error, Terminated) else INTERRUPTED
    return BAD_INPUT if describe(error) is not None else UNEXPECTED
