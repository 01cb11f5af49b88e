"""`wscat add-dataset NAME FILE.npz`: check your own images and add them to the params file.

The npz is read by the same loader as the split step (uint8 N x H x W x C images, integer labels
0..K-1; x_test/y_test optional), plus the checks a class-balanced split needs. Then three
commented blocks go into params.yaml, each at the end of its section: `datasets.NAME` (the split
and threat model), `training.NAME` (the schedule) and `experiments.NAME` (the demo's methods on
it), so that `snakemake -- results/tables/NAME.tex` builds its table; and one entry,
`methods.mt.per_dataset.NAME`: the Mean Teacher's teacher decays for NAME's epochs. The rest of
the file is kept byte for byte; the result is validated before it replaces the file
(atomically), and nothing is written when NAME exists, has the form of a dataset the paper
section generates (NAME-unlabelled20, NAME-full), or any check fails. The npz is only read; `out`
is a new .yaml file or the params file itself, never another file overwritten. Done, it prints
what the blocks chose, read back from the file written, and a rough time for the table on CPU
scaled from the measured `make demo` (`report`, wscat.steps.add_dataset_summary).
"""
from __future__ import annotations

import errno
import math
import os
import re
import shlex
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from wscat.config import ConfigError, load_params, method_for
from wscat.data.split import held_out, validation_per_class
from wscat.errors import OutputError
from wscat.io import atomic_path
from wscat.paths import PAIRED
from wscat.sweeps import full_dataset, unlabelled_dataset

NAME = re.compile(r"^[a-z][a-z0-9_-]*$")  # the schema's name_key: a results/ path component
# The names a paper tier gives the datasets it generates (wscat.sweeps): a dataset of yours with
# such a name would stand in for that sweep's point, or hide it (an entry you write is kept).
GENERATED = re.compile(r"^(?P<base>.+)-(?:unlabelled\d+|full)$")
PARAMS_SUFFIXES = (".yaml", ".yml")
SECTIONS = ("datasets", "training", "experiments")
DEMO_METHODS = ("standard", "trades", "mt", "rst", "wscat")  # the demo's columns
MIN_CLASSES = 4  # AutoAttack's targeted DLR loss reads the 3rd and 4th largest logits
DIM_SCALE = 32  # a brightest pixel at or below it: a 0..max scale (digits' 0..16), not 0..255
MIN_PER_CLASS = 6  # 5 labelled (1 of them validation: 20%) and at least 1 unlabelled
TEST_FRACTION = 0.2  # held out when the npz has no test part (digits' share)
VAL_FRACTION, VAL_MAX = 0.2, 2000  # the paper's validation rule, written into the block
EPOCHS = 40  # the demo's schedule; the labeler trains 2.5 times as long, as on digits
BATCH = 128
# Mean Teacher (methods.mt): its teacher decays are CIFAR-10's, per step at the release's 391
# steps an epoch (all 50000 images, batch 128; this pipeline's CIFAR-10 epoch is 385 steps, its
# validation images held out); its rampup_epochs is a share of a 100-epoch labeler run (30 of 100).
CIFAR_STEPS = 391
MT_LABELER_EPOCHS = 100


@dataclass(frozen=True)
class NpzSummary:
    """What the checks found: sizes, image shape (C, H, W), classes, per-class counts."""

    train: int
    test: int
    shape: tuple[int, int, int]
    classes: int
    min_per_class: int  # in the training pool a seed draws labelled images from
    pool: int  # that training pool's size: the training images, less the held-out test part


def inspect(name: str, path: Path) -> NpzSummary:
    """Load `path` as the split step will (wscat.data.sources.npz) and check that a
    class-balanced split of it can be drawn; a problem raises one line saying what to fix."""
    from wscat.data.sources import check_dataset
    from wscat.data.sources.npz import RENUMBER, Npz

    if not path.is_file():
        raise FileNotFoundError(f"no file {path}; give the .npz to add")
    data = check_dataset(Npz().read(name, {"path": str(path)}))
    labels = data.labels.numpy()
    train, images = labels[: data.train_size], data.images[: data.train_size]  # None: all
    where = f"{path}"
    if int(images.max()) <= 1:
        raise ValueError(f"{where}: x_train's pixels are all 0 or 1, which reads as black; store "
                         "uint8 images with pixel = value * 255 (e.g. (x * 255).round().astype("
                         "np.uint8) for images in [0, 1])")
    top = int(images.max())
    if top <= DIM_SCALE:
        raise ValueError(f"{where}: x_train's brightest pixel is {top} of 255, so the images look "
                         f"stored on a 0..{top} scale (judged by the largest training pixel; "
                         f"{DIM_SCALE} or less is refused), where the threat model's eps of 8/255 "
                         f"would be {8 / top:.0%} of the range; rescale them to uint8 0..255, "
                         f"e.g. (x * 255 / {top}).round().astype(np.uint8)")
    present = np.unique(labels)  # {3, 7, 9} is 3 classes, not the 10 of 0..9
    if len(present) < MIN_CLASSES:
        named = ("" if len(present) == data.num_classes else
                 f" (labels {', '.join(str(k) for k in present)})")
        raise ValueError(f"{where}: {len(present)} classes{named}; the evaluation's AutoAttack "
                         f"(its targeted DLR loss) needs at least {MIN_CLASSES}")
    counts = np.bincount(train, minlength=data.num_classes)
    missing = [k for k, n in enumerate(counts) if n == 0]
    beyond = [k for k in missing if k > train.max()]  # only y_test can hold those
    if beyond:
        raise ValueError(f"{where}: the test labels (y_test) hold class {beyond[0]}, which the "
                         f"training labels (y_train, classes 0..{int(train.max())}) lack; fix "
                         "those test labels, or drop their images from x_test and y_test")
    if missing:
        raise ValueError(f"{where}: the training images have no class {missing[0]}; labels run "
                         f"0..K-1 (K = {data.num_classes} here) and every class needs training "
                         f"images; renumber the labels, e.g. {RENUMBER}")
    # Without a test part the split holds out round(20%) of each class (wscat.data.split's
    # held_out): a class of 7 keeps 6 to split, not floor(7 x 0.8) = 5.
    held = np.array([held_out(int(n), TEST_FRACTION) for n in counts], dtype=counts.dtype)
    pool = counts if data.train_size is not None else counts - held
    if pool.min() < MIN_PER_CLASS:
        k = int(pool.argmin())
        raise ValueError(f"{where}: class {k} has {int(pool.min())} training images to split; a "
                         f"class-balanced split needs at least {MIN_PER_CLASS} a class (5 "
                         "labelled, one of them validation, and unlabelled ones)")
    test = len(labels) - data.train_size if data.train_size is not None else 0
    return NpzSummary(train=len(train), test=test, shape=tuple(data.image_shape),
                      classes=data.num_classes, min_per_class=int(pool.min()),
                      pool=int(pool.sum()))


def _decay(steps: int) -> float:
    """EMA decay with a memory of about one epoch, 10 steps at least (digits, at 12 steps an
    epoch, has 0.9, set by hand; the released code's 0.995 at its CIFAR-10 epoch of 391 steps is
    the cap)."""
    return min(0.995, round(1 - 1 / max(10, steps), 3))


def teacher_decay(cifar: float, steps: int) -> float:
    """The Mean Teacher decay at `steps` an epoch that keeps the horizon in epochs `cifar` has at
    the release's CIFAR-10 epoch of 391 steps (params.yaml's rule for the proxy; digits departs
    from it): horizon = 1 / ((1 - cifar) x 391) epochs, decay = 1 - 1/(horizon x steps); 1 - decay
    to two significant digits (the proxy's 111 steps: 0.965 / 0.9965), and a memory of one step at
    least (0: the student)."""
    rate = (1 - cifar) * CIFAR_STEPS / steps
    return 0.0 if rate >= 1 else float(1 - Decimal(f"{rate:.2g}"))


def teacher_entry(name: str, steps: int, labeler_epochs: int, params: dict[str, Any]
                  ) -> list[str]:
    """methods.mt.per_dataset.NAME: the teacher's decays at NAME's steps an epoch, and the ramp-up
    scaled to the labeler's epochs where they differ from methods.mt's 100; [] without a Mean
    Teacher `mt`."""
    if "mt" not in params["methods"]:
        return []
    mt = method_for(params, "mt")
    if mt.get("objective") != "mean_teacher":
        return []
    early, late = mt["teacher_decay"], mt["teacher_decay_late"]
    knobs = {"teacher_decay": teacher_decay(early, steps),
             "teacher_decay_late": teacher_decay(late, steps)}
    horizons = " / ".join(f"{1 / ((1 - d) * CIFAR_STEPS):.2g}" for d in (early, late))
    rampup = mt["rampup_epochs"]
    ramp = f"ramp-up: methods.mt's {rampup} of {MT_LABELER_EPOCHS} epochs"
    if labeler_epochs == MT_LABELER_EPOCHS:
        ramp += f", the labeler's {labeler_epochs} too"
    else:
        knobs["rampup_epochs"] = round(rampup * labeler_epochs / MT_LABELER_EPOCHS)
        ramp += f", the same share of the labeler's {labeler_epochs}"
    zero = [key for key in ("teacher_decay", "teacher_decay_late") if knobs[key] == 0.0]
    note = ([f"# {' and '.join(zero)} 0: the horizon is under one step at {steps} steps an "
             "epoch, so the teacher is the student itself (no averaging) while it applies"]
            if zero else [])
    return [
        "# wscat add-dataset: the teacher keeps CIFAR-10's horizons in epochs: "
        f"{early} / {late} at {CIFAR_STEPS}",
        f"# steps an epoch = {horizons} epochs; at {steps} steps, decay = 1 - 1/(horizon x "
        "steps), 1 - decay",
        f"# to 2 significant digits; {ramp}",
        *note,
        f"{name}: {{{', '.join(f'{key}: {value}' for key, value in knobs.items())}}}",
    ]


def blocks(name: str, path: str, md5: str, summary: NpzSummary, params: dict[str, Any]
           ) -> dict[str, list[str]]:
    """The three sections' blocks (lines without indentation) with defaults from the data."""
    channels, height, width = summary.shape
    per_class = max(5, min(summary.min_per_class // 10, summary.min_per_class - 1))
    labelled = per_class * summary.classes
    # An epoch is the training pool less the validation images (wscat.data.training_data)
    n_train = summary.pool - summary.classes * validation_per_class(
        labelled, VAL_FRACTION, VAL_MAX, summary.classes)
    batch = min(BATCH, n_train)
    steps = math.ceil(n_train / batch)
    labeler_epochs = round(EPOCHS * 2.5)
    padding = max(1, round(height / 8))
    test_line = ([f"# the npz's own {summary.test} test images (x_test, y_test) are the test set"]
                 if summary.test else
                 [f"test_fraction: {TEST_FRACTION}         # the npz has no x_test: a fixed "
                  "stratified 20% is held out"])
    model = "cnn" if "cnn" in params["models"] else next(iter(params["models"]))
    methods = [m for m in DEMO_METHODS if m in params["methods"]] or list(params["methods"])[:1]
    dataset = [
        f"{name}:",
        (f"  # wscat add-dataset: {summary.train} training and {summary.test} test images, "
         if summary.test else
         f"  # wscat add-dataset: {summary.train} images, no test part (a stratified "
         f"{TEST_FRACTION:.0%} of them is held out below as the test set), ")
        + f"{height}x{width}x{channels}, {summary.classes} classes",
        "  source: npz",
        f"  path: {_scalar(path)}",
        f"  md5: {md5}   # of the file above: a changed file stops the split (update or delete)",
        *(f"  {line}" for line in test_line),
        f"  # {per_class} labelled a class (about 10% of the smallest class, at least 5), the rest",
        "  # unlabelled; validation = min(val_fraction * labelled, val_max), the paper's rule",
        f"  labelled: {labelled}",
        f"  val_fraction: {VAL_FRACTION}",
        f"  val_max: {VAL_MAX}",
        "  # Threat model in [0,1] pixel units: CIFAR's 8/255; training PGD-5 with step eps/2 (the",
        "  # same 2.5 eps of travel as CIFAR's PGD-10 at eps/4), evaluation step eps/8",
        "  eps: 0.03137254901960784",
        "  train_step_size: 0.01568627450980392",
        "  train_steps: 5",
        "  eval_step_size: 0.00392156862745098",
        "  augment:",
        f"    crop_padding: {padding}         # random shift by up to {padding} pixel(s) "
        "(height / 8)",
        "    flip: false              # true only if a mirrored image keeps its class",
        "    rotation: 0",
    ]
    training = [
        f"{name}:",
        f"  # The demo's schedule; {steps} steps an epoch at batch {batch} on {n_train} training "
        "images",
        f"  epochs: {EPOCHS}",
        f"  batch_size: {batch}",
        "  labelled_per_batch: null  # the labelled share of the training set (paper)",
        "  lr: 0.1",
        "  momentum: 0.9",
        "  nesterov: true",
        "  weight_decay: 5.0e-4",
        "  warmup_fraction: 0.025",
        f"  ema_decay: {_decay(steps)}           # a memory of about an epoch, 10 steps at least",
        "  ema_warmup_epochs: 2.5",
        "  val_every: 1",
        "  precision: fp32           # bf16, channels_last, compile: on a GPU (docs/speed.md)",
        "  channels_last: false",
        "  compile: false",
        "  deterministic: true",
        "  per_method:",
        f"    mt: {{epochs: {labeler_epochs}}}         # the Mean Teacher labeler trains "
        "longer, as on digits",
    ]
    experiment = [
        f"{name}:",
        f"  # `snakemake -- results/tables/{name}.tex` (wscat add-dataset)",
        f"  dataset: {name}",
        f"  model: {model}                # any image size; on a GPU: wrn-16-4 or the paper's wrn-28-10",
        "  seeds: [1, 2, 3]",
        f"  methods: [{', '.join(methods)}]",
    ]
    teacher = teacher_entry(name, steps, labeler_epochs, params)
    return {"datasets": dataset, "training": training, "experiments": experiment,
            **({"methods.mt.per_dataset": teacher} if teacher else {})}


KEY = re.compile(r"""(\s*)("[^"]*"|'[^']*'|[^\s#'"{\[][^:#]*?)\s*:(\s|$)""")  # `  key:` of a line


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _content(line: str) -> bool:
    """Whether a line holds YAML (not blank, not only a comment)."""
    return bool(line.strip()) and not line.lstrip().startswith("#")


def _entries(lines: list[str], lo: int, hi: int) -> list[tuple[int, str]]:
    """(line index, key) of the block mapping's entries in lines[lo:hi]: the lines at the indent
    of its first content line."""
    content = [i for i in range(lo, hi) if _content(lines[i])]
    if not content:
        return []
    indent = _indent(lines[content[0]])
    keys = [(i, KEY.match(lines[i])) for i in content if _indent(lines[i]) == indent]
    return [(i, match.group(2).strip("\"'")) for i, match in keys if match]


def insert(text: str, section: str, block: list[str]) -> str:
    """`text` with `block` appended to the block mapping `section` (a top-level key, or a dotted
    path such as `methods.mt.per_dataset`), indented as its entries; a missing last level is added
    (`per_dataset:`); every other line kept as it is."""
    lines = text.splitlines(keepends=True)
    path = section.split(".")
    lo, hi, parent = 0, len(lines), -2  # the mapping's lines, and the indent of its key
    for depth, key in enumerate(path):
        found = [i for i, name in _entries(lines, lo, hi) if name == key]
        where = ".".join(path[:depth + 1])
        if not found and depth == len(path) - 1 and depth > 0:
            block = [f"{key}:", *(f"  {line}" if line else "" for line in block)]
            break
        if not found or lines[found[-1]].split(":", 1)[1].split("#")[0].strip():
            raise ConfigError(f"params file's `{where}:` is not a block mapping (one entry a "
                              "line), so add-dataset cannot add to it; add the entry by hand")
        start = found[-1]
        parent = _indent(lines[start])
        lo, hi = start + 1, next((i for i in range(start + 1, hi) if _content(lines[i]) and
                                  _indent(lines[i]) <= parent), hi)
    entries = [line for line in lines[lo:hi] if _content(line)]
    indent = _indent(entries[0]) if entries else parent + 2
    end = hi
    while end > lo and not _content(lines[end - 1]) and (
            not lines[end - 1].strip() or _indent(lines[end - 1]) < indent):
        end -= 1  # what follows keeps its leading comments and blank lines
    if lines[end - 1:end] and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    added = [" " * indent + line + "\n" if line else "\n" for line in block]
    return "".join(lines[:end] + added + lines[end:])


def _stored_path(npz: Path) -> str:
    """The npz as the params file names it: the steps and Snakemake open `datasets.NAME.path`
    relative to the current folder (the repository root, wherever the params file lies), so
    relative to it when the npz lies below it, absolute otherwise."""
    resolved = npz.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(resolved)


def _scalar(value: str) -> str:
    """`value` as a one-line YAML scalar that reads back as itself: plain where it can be, quoted
    where plain would not (a path with ` #` would lose its end to a comment, one with `: ` or a
    tab would not parse)."""
    dumped = yaml.safe_dump({"k": value}, allow_unicode=True, width=math.inf)
    if dumped.count("\n") > 1:  # a line break folded over lines: escaped, double-quoted
        dumped = yaml.safe_dump({"k": value}, allow_unicode=True, width=math.inf,
                                default_style='"')
    return dumped.rstrip("\n").split(": ", 1)[1]


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (links and `..` resolved, or one inode)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def generated_form(name: str) -> None:
    """Refuse (one line) a name of the form the paper section gives the datasets it generates:
    `<dataset>-unlabelled<percent>` (Fig-unlabel's sweep) or `<dataset>-full` (tab-sup)."""
    match = GENERATED.match(name)
    if match is None:
        return
    base = match["base"]
    if name == full_dataset(base):
        form = "<dataset>-full, which the paper section gives its fully supervised runs"
    else:
        form = ("<dataset>-unlabelled<percent>, which the paper section gives the points of its "
                f"unlabelled-data sweep (e.g. {unlabelled_dataset(base, 0.25)})")
    other = name[:len(base)] + "_" + name[len(base) + 1:]
    raise ValueError(f"'{name}' has the form {form}; a tier would take yours for one of its own, "
                     f"so pick another name (e.g. '{other}'; nothing was written)")


def paired_form(name: str) -> None:
    """Refuse (one line) a name ending in -paired: its table, results/tables/NAME.tex, is where
    experiment NAME less -paired writes its paired comparison, and Snakemake builds that."""
    if not name.endswith(PAIRED):
        return
    base = name[: -len(PAIRED)]
    raise ValueError(f"'{name}' ends in {PAIRED}: results/tables/{name}.tex is where an "
                     f"experiment '{base}' writes its paired comparison, so `snakemake -- "
                     f"results/tables/{name}.tex` would build that one, not your table; pick "
                     f"another name (e.g. '{base}_paired'; nothing was written)")


def run(params_file: Path, name: str, npz: Path, out: Path | None = None) -> Path:
    """Check `npz`, then write the params file with NAME's blocks added: to `out` (a new file),
    or in place of `params_file` (`out` None or the params file itself). Returns the file
    written."""
    from wscat.data.sources.archives import md5_of

    if not NAME.match(name):
        raise ValueError(f"'{name}' is not a dataset name: use lower-case letters, digits, - and _, "
                         "starting with a letter (it becomes a results/ folder)")
    if out is not None and _same_file(out, params_file):
        out = None  # the default in-place edit, named
    if out is not None and out.suffix.lower() not in PARAMS_SUFFIXES:
        raise ValueError(f"--out {out} does not end in .yaml or .yml, but add-dataset writes a "
                         f"params file (YAML) there; pass a new .yaml file, e.g. --out "
                         f"{out.with_suffix('.yaml')} (nothing was written)")
    if out is not None and os.path.lexists(out):
        raise OutputError(errno.EEXIST, f"--out {out} exists and is not the --params file; pass "
                          f"a new file, or pass it as --params (--params {out}) to add the "
                          "blocks to it (nothing was written)")
    params = load_params(params_file)
    written = yaml.safe_load(params_file.read_text()) or {}
    for section in SECTIONS:
        if name in params.get(section, {}):
            if name not in (written.get(section) or {}):  # made when the file loads (a tier's)
                raise ValueError(f"{section}.{name} is made from {params_file} when it loads (a "
                                 "paper tier's dataset, not an entry you can remove); pick "
                                 "another name")
            raise ValueError(f"{section}.{name} already exists in {params_file}; pick another "
                             "name, or remove that entry first")
    generated_form(name)
    paired_form(name)
    summary = inspect(name, npz)
    text = params_file.read_text()
    # The file's own line ends (CRLF from an editor on Windows) and, for a symbolic link, the
    # file it points to: replaced in place, so the link stays a link.
    newline = "\r\n" if b"\r\n" in params_file.read_bytes() else "\n"
    target = out or params_file
    target = Path(os.path.realpath(target)) if target.is_symlink() else target
    for section, block in blocks(name, _stored_path(npz), md5_of(npz), summary,
                                 params).items():
        text = insert(text, section, block)
    with atomic_path(target) as tmp:
        tmp.write_text(text, newline=newline)
        load_params(tmp)  # the whole file valid, or nothing replaced
        if os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o777)
    return target


def next_step(name: str, written: Path) -> str:
    """The dry run to try next: Snakemake reads ./params.yaml unless given `--configfile`."""
    here = _same_file(written, Path("params.yaml"))
    configfile = "" if here else f" --configfile {shlex.quote(str(written))}"  # to paste
    return f"snakemake -n{configfile} -- results/tables/{name}.tex"


def report(name: str, written: Path) -> str:
    """What `wscat add-dataset` prints when done: the entries added, what they chose (the values
    as the file written reads, the npz's sizes checked again), a rough cost, the next step."""
    params = yaml.safe_load(Path(written).read_text())
    mt = (params.get("methods") or {}).get("mt") or {}
    teacher = f" and methods.mt.per_dataset.{name}" if name in (mt.get("per_dataset") or {}) else ""
    from wscat.steps.add_dataset_summary import chosen, cost, wrap

    summary = inspect(name, Path(params["datasets"][name]["path"]))
    lines = [f"added datasets.{name}, training.{name}, experiments.{name}{teacher} to {written} "
             "(commented: edit them there):",
             *(wrap(line, "  ", "    ") for line in chosen(name, params, summary)),
             *(wrap(line, "", "    ") for line in cost(name, params, summary).splitlines()),
             f"next: {next_step(name, written)}"]
    return "\n".join(lines)
