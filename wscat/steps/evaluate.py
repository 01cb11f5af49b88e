"""`wscat evaluate`: the attack suite on a checkpoint's test set (its core part, its extra part, or
all), written with its manifest."""
from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from wscat.checkpoint import check_run, check_trained_by
from wscat.config import RunConfig, short_attacks
from wscat.data import load_dataset, raw_files
from wscat.data.split import Split, check_split_fits, load_split_of
from wscat.errors import first_line
from wscat.evaluation import (SuiteResult, attack_suite, core_suite, extra_suite,
                              stratified_order, subset_name)
from wscat.inference import check_which, load_model, outputs_of
from wscat.file_kinds import check_input_kind
from wscat.io import check_writable, guard_outputs, output_lock, write_json
from wscat.metrics import ATTACKS, is_percent
from wscat.provenance import versions
from wscat.training.speed import autocast, configure_backend, tf32_flags
from wscat.training.threads import manifest_entry
from wscat.workflow import (evaluation_fingerprint, extra_fingerprint, split_params,
                            training_fingerprint)

PARTS = ("all", "core", "extra")
MEASURED = {"all": ("PGD", "CW", "NRF"), "core": ("PGD", "CW"), "extra": ("NRF",)}  # by part


def _core_result(path: Path, run: tuple[str, str, str, int]) -> SuiteResult:
    """The core suite's numbers, read back from its metrics file (the extras' checks need them),
    each checked (`_check_core_numbers`) before any work: none is copied through unchecked."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"core metrics not found: {path} (run `wscat evaluate --part core`)"
                                ) from None
    except (OSError, ValueError) as err:  # not JSON text (UnicodeDecodeError is a ValueError)
        raise ValueError(f"{path}: not a core metrics file of `wscat evaluate` (not JSON text: "
                         f"{first_line(err)}); {CORE_REDO}") from None
    lacking = _core_lacks(data)
    if lacking:
        raise ValueError(f"{path}: not a core metrics file of `wscat evaluate` ({lacking}); "
                         f"{CORE_REDO}")
    found = (data["dataset"], data["model"], data["method"], data["seed"])
    accuracy, manifest = data["accuracy"], data["manifest"]["attacks"]
    if found != run:
        raise ValueError(f"{path} holds {found[2]} seed {found[3]} on {found[0]}/{found[1]}, not "
                         f"{run[2]} seed {run[3]} on {run[0]}/{run[1]}; pass this checkpoint's "
                         "core metrics (`wscat evaluate --part core` writes them)")
    warnings = data.get("autoattack_warnings", {})
    _check_core_numbers(path, accuracy, manifest["AA"], warnings)
    return SuiteResult(accuracy=accuracy, attacks=manifest, checks={},
                       autoattack_warnings=warnings, per_image={})


CORE_REDO = "rerun `wscat evaluate --part core`"


def _json_type(value: Any) -> str:
    """What a JSON value is, in words: an object, a list, text, a number, true/false, null."""
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "a list", str: "text", type(None): "null"}.get(
        type(value), "a number")


def _core_lacks(data: Any) -> str | None:
    """The first key of a core metrics file that is missing or not an object where the extras'
    checks read into it, in words (`manifest.attacks.AA` is a list, not an object); None when
    each is there."""
    keys = {"": ("dataset", "model", "method", "seed", "accuracy", "manifest"),
            "manifest": ("attacks",), "manifest.attacks": ("AA",),
            "manifest.attacks.AA": ("clean_accuracy", "robust_accuracy_after")}
    values = {"": data}
    for where, needed in keys.items():
        value = values[where]
        if not isinstance(value, dict):
            return f"{where or 'it'} is {_json_type(value)}, not an object"
        for key in needed:
            name = f"{where}.{key}".lstrip(".")
            if key not in value:
                return f"no `{name}`"
            values[name] = value[key]
    return None


def _check_core_numbers(path: Path, accuracy: Any, aa: dict[str, Any], warnings: Any) -> None:
    """Refuse (ValueError, naming the file and the key) a core file whose numbers the extras'
    checks would read wrong: every accuracy (the paper's five among them), AutoAttack's clean
    accuracy and its robust accuracy after each attack (Square's and another's) must be a finite
    percentage in [0, 100], and AutoAttack's warnings lists of text."""
    redo = "rerun the core evaluation (`wscat evaluate --part core`)"

    def shown(value: Any) -> str:  # as the file spells it (NaN, null), cut short
        text = json.dumps(value)
        return text if len(text) <= 40 else text[:37] + "..."

    def percentages(key: str, values: Any, required: tuple[str, ...]) -> None:
        if not isinstance(values, dict):
            raise ValueError(f"{path}: {key} is {shown(values)}, not an object of name -> "
                             f"percentage; {redo}")
        for name in required:
            if name not in values:
                raise ValueError(f"{path}: {key}.{name} is missing; {redo}")
        for name, value in values.items():
            if not is_percent(value):
                raise ValueError(f"{path}: {key}.{name} is {shown(value)}, not a finite "
                                 f"percentage in [0, 100]; {redo}")

    percentages("accuracy", accuracy, ATTACKS)
    percentages("manifest.attacks.AA", {"clean_accuracy": aa["clean_accuracy"]}, ())
    after = aa["robust_accuracy_after"]
    percentages("manifest.attacks.AA.robust_accuracy_after", after, ("square",))
    if len(after) < 2:  # the Square check compares it with the white-box attacks before it
        raise ValueError(f"{path}: manifest.attacks.AA.robust_accuracy_after holds no white-box "
                         f"attack beside square; {redo}")
    if not (isinstance(warnings, dict) and all(
            isinstance(found, list) and all(isinstance(w, str) for w in found)
            for found in warnings.values())):
        raise ValueError(f"{path}: autoattack_warnings is {shown(warnings)}, not an object of "
                         f"attack -> list of warnings; {redo}")


def weights_digest(net: torch.nn.Module) -> str:
    """16 hex digits of the SHA-256 of a model's weights and buffers (names, dtypes, shapes,
    bytes, in state-dict order): which weights were measured, whatever file held them."""
    digest = hashlib.sha256()
    for name, tensor in net.state_dict().items():
        value = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{value.dtype}:{tuple(tensor.shape)}:".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def _provenance(params: dict[str, Any], run: RunConfig, net: torch.nn.Module) -> dict[str, Any]:
    """What a metrics file was measured on: the training that made the checkpoint (the
    fingerprint of its params, wscat.workflow.training_fingerprint, and the digest of the weights)
    and the core evaluation's settings. `wscat table` refuses metrics of another training than
    the current params give; an extra part must match its core file on weights and settings."""
    return {"training": {"fingerprint": training_fingerprint(params, run.dataset, run.model,
                                                             run.method),
                         "weights_sha256": weights_digest(net)},
            "evaluation_settings": evaluation_fingerprint(params, run.dataset)}


def _check_bound(core_path: Path, provenance: dict[str, Any]) -> None:
    """Refuse a core metrics file measured on other weights, another training or other core
    settings than this extra part: the two are read as one run."""
    manifest = json.loads(Path(core_path).read_text()).get("manifest") or {}
    core = {"training": manifest.get("training"),
            "evaluation_settings": manifest.get("evaluation_settings")}
    for key, what in (("training", "another checkpoint or training"),
                      ("evaluation_settings", "other evaluation settings")):
        if core[key] != provenance[key]:
            raise ValueError(f"{core_path} was measured on {what} than this extra part "
                             f"({core[key]} there, {provenance[key]} here); rerun the core "
                             "evaluation first (`wscat evaluate --part core`)")


def _evaluated_test_set(split: Split, labels: torch.Tensor, evaluation: dict[str, Any]
                        ) -> torch.Tensor:
    """The test indices in the class-stratified order of `evaluation.subset_seed`, cut to
    `evaluation.n_examples`: every subset is the first n of the same order."""
    test = torch.as_tensor(split.test)
    test = test[stratified_order(labels[test], evaluation["subset_seed"])]
    if evaluation["n_examples"] is not None:
        test = test[: evaluation["n_examples"]]
    return test


def _waited_core(core_path: Path, seconds: float, identity: tuple[str, str, str, int],
                 provenance: dict[str, Any], fields: dict[str, Any]) -> SuiteResult:
    """The core file once it exists (its step writes it whole, by a rename), waited for up to
    `seconds` and then checked as `run` checks one that is there at the start."""
    print(f"waiting up to {seconds:g} s for the core metrics {core_path}", file=sys.stderr)
    started = time.monotonic()
    deadline = started + seconds
    while not Path(core_path).exists():
        if time.monotonic() >= deadline:
            raise ValueError(f"--core {core_path} did not appear within {seconds:g} s of "
                             "AA-paper and NRF ending; run its core evaluation (`wscat evaluate "
                             "--part core`), then this step again (no metrics were written; "
                             "AA-paper's finished shards are kept for it)")
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    print(f"waited {time.monotonic() - started:.1f} s for the core metrics", file=sys.stderr)
    check_input_kind(core_path, "metrics", "--core", fields)
    core = _core_result(core_path, identity)
    _check_bound(core_path, provenance)
    return core


def _suite(part: str, net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
           core: SuiteResult | Callable[[], SuiteResult] | None,
           common: dict[str, Any]) -> SuiteResult:
    """The attacks of one part of the suite."""
    if part == "core":
        return core_suite(net, x, y, **common)
    if part == "extra":
        return extra_suite(net, x, y, core=core, **common)
    return attack_suite(net, x, y, **common)


def _manifest(suite: SuiteResult, run: RunConfig, *, n_examples: int, test_set_size: int,
              official_test: bool, checkpoint: Path, epoch: int | None,
              device: torch.device) -> dict[str, Any]:
    """How the numbers were measured: attacks, threat, test set, checkpoint, precision (and the
    TF32 flags in force on a CUDA device, None elsewhere), versions."""
    evaluation, threat = run.evaluation, run.data
    return {"attacks": suite.attacks, "eps": threat["eps"], "seed": run.seed,
            "n_examples": n_examples, "test_set_size": test_set_size,
            "evaluation_set": subset_name(n_examples, test_set_size, evaluation["subset_seed"]),
            "test_set": "official test set" if official_test else "fixed stratified test split",
            "checkpoint": {"path": str(checkpoint), "epoch": epoch, "ema": True,
                           "which": evaluation["checkpoint"]},
            "model_mode": "eval (checked on every forward pass)",
            "precision": evaluation["precision"], "tf32": tf32_flags(device),
            "device": str(device), "versions": versions()}


def run(params: dict[str, Any], *, dataset: str, model: str, method: str, seed: int,
        split_path: Path, checkpoint: Path, out: Path, device: torch.device,
        part: str = "all", core_path: Path | None = None,
        core_wait: float = 0.0) -> dict[str, Any]:
    """The attack suite on the test set; writes the metrics JSON with its manifest.

    `part`: core (the paper's five columns and Mean, with per-example correctness), extra (the
    paper's AutoAttack variant, NRF and the gradient-masking checks; reads the core file
    `core_path`), or all (both in one file). With `core_wait` > 0 an extra part whose core file
    is not there yet runs AA-paper and NRF first and then waits up to `core_wait` seconds for it
    (its core evaluation running beside it); the numbers are the same as in order. The test
    images are attacked in a class-stratified order (`evaluation.subset_seed`), so every subset
    is the first n of it. Finished AutoAttack shards wait in `{out}.shards/` until the metrics
    are written: a killed evaluation resumes. A model whose outputs are NaN or inf is refused
    (wscat.inference.NonFiniteOutputs, naming the checkpoint), no metrics written."""
    if part not in PARTS:
        raise ValueError(f"unknown part '{part}'; choose one of {', '.join(PARTS)}")
    if part == "extra" and core_path is None:
        raise ValueError("--part extra reads the core metrics: pass --core FILE")
    if part != "extra" and core_path is not None:  # not read: say so rather than ignore it
        raise ValueError(f"--core is read by --part extra only, not --part {part}; drop it")
    if part != "extra" and core_wait:
        raise ValueError(f"--core-wait is read by --part extra only, not --part {part}; drop it")
    if not (math.isfinite(core_wait) and core_wait >= 0):
        raise ValueError(f"--core-wait {core_wait:g}: give the seconds to wait for the core "
                         "file, 0 or more")
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    shard_dir = out.with_name(out.name + ".shards")
    guard_outputs({f"dataset {dataset}": raw_files(dataset, run.data), "--split": split_path,
                   "--checkpoint": checkpoint, "--core": core_path},
                  {"--out": out}, {"shards": shard_dir})
    fields = {"dataset": dataset, "model": model, "method": method, "seed": seed}
    for option, path, kind in (("--split", split_path, "split"),
                               ("--checkpoint", checkpoint, "checkpoint"),
                               ("--core", core_path, "metrics")):
        check_input_kind(path, kind, option, fields)  # not a split passed as --checkpoint
    check_writable(out)
    later = part == "extra" and core_wait > 0 and not Path(core_path).exists()
    identity = (dataset, model, method, seed)
    core = _core_result(core_path, identity) if part == "extra" and not later else None
    split = load_split_of(split_path, dataset, seed, made_with=split_params(params, dataset))
    net, meta = load_model(checkpoint, device, model=model, spec=run.model_spec)
    check_run(checkpoint, meta, dataset=dataset, method=method, seed=seed,
              method_flag="--method")  # what `wscat evaluate` takes from it when left out
    check_which(checkpoint, meta["which"], run.evaluation["checkpoint"])  # what `which` records
    provenance = _provenance(params, run, net)
    check_trained_by(checkpoint, meta, provenance["training"]["fingerprint"])
    if part == "extra" and not later:
        _check_bound(core_path, provenance)
    if later:  # read once AA-paper and NRF are done, checked as a file there at the start is
        core = functools.partial(_waited_core, core_path, core_wait, identity, provenance, fields)
    evaluation, threat = run.evaluation, run.data
    source = load_dataset(dataset, threat)
    check_split_fits(split, len(source.labels), split_path)
    test = _evaluated_test_set(split, source.labels, evaluation)
    x, y = source.take(test, device)
    with output_lock(out, f"wscat evaluate {method} seed {seed} ({part})"):  # one writer
        started = time.perf_counter()
        configure_backend(device, deterministic=run.training["deterministic"])
        common = dict(eps=threat["eps"], step_size=threat["eval_step_size"], evaluation=evaluation,
                      seed=seed, test_set_size=len(split.test), shard_dir=shard_dir)
        with autocast(device, evaluation["precision"]), outputs_of(checkpoint, "test images"):
            suite = _suite(part, net, x, y, core, common)  # non-finite logits: refused
        result = {"dataset": dataset, "model": model, "method": method, "seed": seed,
                  **({} if part == "all" else {"part": part}),
                  "accuracy": {k: round(v, 4) for k, v in suite.accuracy.items()},
                  "checks": suite.checks, "autoattack_warnings": suite.autoattack_warnings,
                  "manifest": _manifest(suite, run, n_examples=len(x),
                                        test_set_size=len(split.test),
                                        official_test=source.train_size is not None,
                                        checkpoint=checkpoint, epoch=meta["epoch"], device=device)}
        result["manifest"].update(provenance)
        result["manifest"].update(manifest_entry(meta, device))  # CPU threads: training, this
        if part != "core":  # NRF's and the checks' settings, which the core's leave out
            result["manifest"]["extra_settings"] = extra_fingerprint(params, dataset)
        if suite.per_image:  # 1/0 per test image, in the evaluated order: the paired bootstrap
            result["per_image"] = {"order": f"stratified, subset_seed {evaluation['subset_seed']}",
                                   "correct": suite.per_image}
        write_json(out, result)  # no timings inside: same params + seed give the same file
        shutil.rmtree(shard_dir, ignore_errors=True)
    print(f"evaluated ({part}) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    warning = short_attacks(params, dataset, "evaluation", MEASURED[part])
    if warning:  # a quick look with few steps: its numbers stand, the table's caption says so
        print(f"wscat evaluate: {warning}", file=sys.stderr)
    return result
