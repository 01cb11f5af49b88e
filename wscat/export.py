"""Share a trained model as a RobustBench-style entry: a JSON record beside a state-dict file.

The JSON carries RobustBench's model-info fields (name, dataset, threat model, eps,
architecture, clean and AutoAttack accuracy, ...) taken from a checkpoint and its metrics file,
plus a `wscat` block with what is needed to rebuild the model; the state dict (the EMA weights
that were evaluated) sits in NAME.pt, named and hashed in the JSON.

    wscat export --checkpoint results/models/digits/cnn/wscat/seed1/best.pt \\
        --metrics results/metrics/digits/cnn/wscat/seed1.json --out shared/wscat-digits.json

    model = wscat.export.load_exported("shared/wscat-digits.json")   # eval mode, [0,1] inputs
    logits = model(images)   # N x classes, as RobustBench's benchmark and AutoAttack expect

The loaded module returns logits only; `model.model` is the wscat network (features, logits)
whose state dict NAME.pt holds.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

from wscat.checkpoint import check_finished, load_checkpoint, save_tensors
from wscat.errors import OutputError, first_line
from wscat.file_kinds import KIND_NAMES, curves_output, file_kind
from wscat.inference import epochs_completed, which_of
from wscat.io import atomic_path, check_writable, guard_outputs, write_json
from wscat.metrics import is_percent
from wscat.models import LogitsOnly
from wscat.paths import METRICS, RUN_NAMES
from wscat.report.names import display_name

FORMAT = "wscat-robustbench-entry-v1"


def architecture_name(spec: dict[str, Any]) -> str:
    """RobustBench's way of naming a model: WideResNet-28-10, ResNet-50, ..."""
    kind = spec["architecture"]
    if kind == "wideresnet":
        return f"WideResNet-{spec['depth']}-{spec['width']}"
    if kind == "resnet":
        blocks = "" if spec.get("block", "bottleneck") == "bottleneck" else " (basic blocks)"
        return f"ResNet-{spec['depth']}{blocks}"
    options = ", ".join(f"{key} {value}" for key, value in spec.items() if key != "architecture")
    return f"{kind.upper()} ({options})" if options else kind.upper()


def eps_text(eps: float) -> str:
    """8/255 as RobustBench writes it; other budgets (digits' 0.15) as decimals."""
    in_levels = Fraction(eps).limit_denominator(255)
    if in_levels.denominator == 255 and abs(float(in_levels) - eps) < 1e-9:
        return f"{in_levels.numerator}/255"
    return f"{eps:g}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_metrics(metrics: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The metrics file of the checkpoint's run (same dataset, model, method and seed)."""
    if not metrics.is_file():
        raise FileNotFoundError(f"metrics file not found: {metrics} (run `wscat evaluate` first)")
    try:
        result = json.loads(metrics.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{metrics}: not valid JSON ({error}); rerun `wscat evaluate`") from error
    if not isinstance(result, dict):
        raise ValueError(f"{metrics} is not a metrics file of `wscat evaluate`")
    run = (meta["dataset"], meta["model"], meta["method"], meta["seed"])
    measured = tuple(result.get(key) for key in ("dataset", "model", "method", "seed"))
    if measured != run:
        raise ValueError(f"{metrics} is the evaluation of {'/'.join(map(str, measured))}, not of "
                         f"the checkpoint's run {'/'.join(map(str, run))}; pass that run's "
                         f"metrics (--metrics {METRICS.format(**dict(zip(RUN_NAMES, run)))})")
    return result


def _check_accuracy(metrics: Path, accuracy: Any) -> dict[str, float]:
    """The metrics' accuracies, refused (ValueError) unless each is a finite percentage in
    [0, 100] and Natural and AA are there: no NaN or impossible number is shipped."""
    if not isinstance(accuracy, dict):
        raise ValueError(f"{metrics} holds no accuracies; rerun `wscat evaluate`")
    for key in ("Natural", "AA"):
        if key not in accuracy:
            raise ValueError(f"{metrics} has no '{key}' accuracy (an extra part alone?); pass the "
                             "metrics of `wscat evaluate --part core` (or all)")
    for key, value in accuracy.items():
        if not is_percent(value):
            raise ValueError(f"{metrics}: accuracy '{key}' is {value!r}, not a finite percentage "
                             "in [0, 100]; rerun `wscat evaluate` to measure it again")
    return accuracy


def _check_measured(metrics: Path, manifest: Any, checkpoint: Path) -> None:
    """Refuse (ValueError) metrics measured on other weights than the checkpoint's (the
    manifest's weights_sha256, as `wscat evaluate` writes it): the entry ships these weights,
    so its numbers must be theirs, whichever epoch or file they came from."""
    from wscat.inference import load_model
    from wscat.steps.evaluate import weights_digest

    manifest = manifest if isinstance(manifest, dict) else {}
    training = manifest.get("training")
    recorded = training.get("weights_sha256") if isinstance(training, dict) else None
    if recorded is None:
        raise ValueError(f"{metrics} does not record which weights it measured (manifest "
                         f"weights_sha256); rerun `wscat evaluate` on {checkpoint}")
    net, _ = load_model(checkpoint, torch.device("cpu"))
    held = weights_digest(net)
    if recorded != held:
        raise ValueError(f"{metrics} was measured on other weights than {checkpoint}'s "
                         f"(weights_sha256 {recorded} there, {held} here); pass the metrics of "
                         "this checkpoint, or run `wscat evaluate` on it first")


def _check_outputs(checkpoint: Path, metrics: Path, out: Path, weights: Path,
                   flags: dict[str, str]) -> None:
    """Refuse (OutputError), before anything is written: an output that is an input or a folder,
    and an existing file that is not an earlier export to `out` (a training checkpoint beside
    it, say): only the entry's own state dict, matching its recorded sha256, is replaced.
    `flags` names the arguments as the caller has them (the command line's or the API's)."""
    given = flags["out"]
    guard_outputs({flags["checkpoint"]: checkpoint, flags["metrics"]: metrics},
                  {given: out, f"{given} ({weights.name})": weights})
    for path in (out, weights):
        inside = curves_output(path)
        if inside is not None:  # a run's curves, whatever their file's name or kind
            raise ValueError(f"{given} {path} {inside}, which `wscat export` would overwrite; "
                             f"choose an {given} outside it (nothing was written)")
    check_writable(out, weights)
    entry: dict[str, Any] = {}
    if out.exists():
        if file_kind(out).kind != "export":
            raise OutputError(errno.EEXIST, f"{out} exists and is not an earlier `wscat export` "
                              f"entry; choose another {given}, or move it away")
        entry = json.loads(out.read_text())
    if weights.exists() and (entry.get("state_dict") != weights.name
                             or entry.get("state_dict_sha256") != _sha256(weights)):
        what = KIND_NAMES.get(file_kind(weights).kind or "", "another file")
        raise OutputError(errno.EEXIST, f"{weights} exists and is not the state dict of an earlier "
                          f"export to {out} (it is {what}); choose another {given}, or move "
                          "it away")


def _rebuild(meta: dict[str, Any], state: dict[str, Any], accuracy: dict[str, float],
             manifest: dict[str, Any]) -> dict[str, Any]:
    """The entry's `wscat` block: what `load_exported` needs to rebuild the model, and the
    evaluation it came with."""
    return {
        "format": FORMAT,
        "method": meta["method"],
        "seed": meta["seed"],
        "model": meta["model"],
        "model_spec": meta["model_spec"],
        "in_channels": meta["in_channels"],
        "num_classes": meta["num_classes"],
        "mean": meta["mean"],
        "std": meta["std"],
        "input_range": [0.0, 1.0],  # the model normalises inside
        "checkpoint_epoch": epochs_completed(state),  # last.pt's 0-based epoch, + 1
        "checkpoint": which_of(state),  # best or last
        "accuracy": accuracy,
        "manifest": manifest,
    }


CLI_FLAGS = {"checkpoint": "--checkpoint", "metrics": "--metrics", "out": "--out"}


def export_model(checkpoint: str | Path, metrics: str | Path, out: str | Path, *,
                 name: str | None = None, flags: dict[str, str] = CLI_FLAGS) -> dict[str, Any]:
    """Write `out` (the JSON entry) and `out` with suffix .pt (the state dict); return the entry.

    `metrics` must be the metrics file `wscat evaluate` wrote for this very checkpoint (same run,
    weights and epoch), its accuracies finite percentages; a checkpoint of an unfinished training
    (a run's resume/) is refused. Everything is checked before anything is written; an existing
    NAME.json or NAME.pt is replaced only when it is an earlier export. `flags`: how refusals
    name the arguments (the API passes its own: out=, not --out).
    """
    checkpoint, metrics, out = Path(checkpoint), Path(metrics), Path(out)
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file (the state dict goes beside it), not {out}")
    weights = out.with_suffix(".pt")
    check_finished(checkpoint)  # not an unfinished training's resume/ checkpoint
    _check_outputs(checkpoint, metrics, out, weights, flags)
    state = load_checkpoint(checkpoint)
    meta = state["meta"]
    result = _read_metrics(metrics, meta)
    accuracy, manifest = _check_accuracy(metrics, result.get("accuracy")), result.get("manifest")
    _check_measured(metrics, manifest, checkpoint)
    name = name or f"{meta['method']}-{meta['dataset']}-{meta['model']}-seed{meta['seed']}"
    aa = manifest.get("attacks", {}).get("AA", {})
    aa_images = aa.get("n_examples", manifest["n_examples"])
    entry = {
        "name": name,
        "dataset": meta["dataset"],
        "threat_model": "Linf",
        "eps": eps_text(manifest["eps"]),
        "architecture": architecture_name(meta["model_spec"]),
        "clean_acc": f"{accuracy['Natural']:.2f}",
        "autoattack_acc": f"{accuracy['AA']:.2f}",
        "additional_data": False,  # the unlabelled images are the dataset's own training images
        "number_forward_passes": 1,
        "footnote": (f"{display_name(meta['method'])} trained by wscat, seed {meta['seed']}; "
                     f"AutoAttack {aa.get('version', 'standard')} on {aa_images} test images, "
                     f"the other attacks on {manifest['n_examples']}."),
        "state_dict": weights.name,
        "wscat": _rebuild(meta, state, accuracy, manifest),
    }
    with atomic_path(out) as entry_tmp, atomic_path(weights) as weights_tmp:  # both or neither
        save_tensors(weights_tmp, state["ema"])
        entry["state_dict_sha256"] = _sha256(weights_tmp)
        write_json(entry_tmp, entry)
        for path in (weights_tmp, entry_tmp):  # files to share: readable by others, as a copy
            os.chmod(path, 0o644)
    return entry


EXPORT_AGAIN = "export the model again (`wscat export`, api.export_model)"


def load_exported(entry: str | Path, device: str | torch.device = "cpu") -> LogitsOnly:
    """The model of an exported entry, in eval mode, after checking the state dict's hash: it maps
    [0,1] images to logits, as RobustBench's `benchmark` and AutoAttack expect; its `.model` is
    the wscat network (features, logits), the one NAME.pt holds the weights of."""
    entry = Path(entry)
    info = json.loads(entry.read_text())
    spec = info.get("wscat") if isinstance(info, dict) else None
    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ValueError(f"{entry} is not a {FORMAT} entry (no `wscat` block of that format); "
                         "pass the NAME.json an export wrote")
    missing = ([key for key in ("state_dict", "state_dict_sha256")
                if not isinstance(info.get(key), str)]
               + [f"wscat.{key}" for key in ("model_spec", "in_channels", "num_classes", "mean",
                                             "std") if key not in spec])
    if missing:  # a hand-edited entry: KeyError or AttributeError tracebacks
        raise ValueError(f"{entry} lacks {', '.join(missing)} (not an entry an export wrote, "
                         f"or edited); {EXPORT_AGAIN}")
    weights = entry.parent / info["state_dict"]
    if _sha256(weights) != info["state_dict_sha256"]:
        raise ValueError(f"{weights} does not match the sha256 recorded in {entry}: it was "
                         "changed, or is another export's; keep NAME.json and NAME.pt of one "
                         f"export together, or {EXPORT_AGAIN}")
    from wscat.models import build_model

    try:  # an edited model_spec: a 17-line load_state_dict error
        model = build_model(**spec["model_spec"], in_channels=spec["in_channels"],
                            num_classes=spec["num_classes"], mean=tuple(spec["mean"]),
                            std=tuple(spec["std"]))
        model.load_state_dict(torch.load(weights, map_location=device, weights_only=True))
    except (TypeError, ValueError, RuntimeError, KeyError) as error:
        raise ValueError(f"{entry}: its wscat block does not build the network {weights.name} "
                         f"holds ({first_line(error)}); {EXPORT_AGAIN}") from None
    return LogitsOnly(model.to(device)).eval()
