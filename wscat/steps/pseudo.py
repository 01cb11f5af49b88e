"""`wscat pseudo-label`: label the unlabelled part of a split with a trained labeler."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from wscat.checkpoint import check_run, check_trained_by
from wscat.config import RunConfig
from wscat.data import load_dataset, raw_files
from wscat.data.split import check_split_fits, load_split_of
from wscat.inference import load_model, outputs_of, predict
from wscat.file_kinds import check_input_kind
from wscat.io import atomic_path, check_writable, guard_outputs, json_text
from wscat.provenance import versions
from wscat.training import threads
from wscat.workflow import split_params, training_fingerprint


def run(params: dict[str, Any], *, dataset: str, seed: int, split_path: Path,
        checkpoint: Path, out: Path, metrics: Path, labeler: str,
        device: torch.device, model: str | None = None) -> dict[str, Any]:
    """Label the unlabelled part with the labeler's final/best EMA model (eval, no augmentation).
    A checkpoint of another dataset, labeler or seed is refused (`wscat.checkpoint.check_run`);
    with `model`, one of another model or of another training than these params give; a split
    made with other split params than these; and a labeler whose outputs are NaN or inf
    (wscat.inference.NonFiniteOutputs): nothing is written."""
    guard_outputs({f"dataset {dataset}": raw_files(dataset, params["datasets"][dataset]),
                   "--split": split_path, "--checkpoint": checkpoint},
                  {"--out": out, "--metrics": metrics})
    fields = {"dataset": dataset, "model": model, "method": labeler, "seed": seed}
    check_input_kind(split_path, "split", "--split", fields)  # not a checkpoint passed as --split
    check_input_kind(checkpoint, "checkpoint", "--checkpoint", fields)
    check_writable(out, metrics)
    split = load_split_of(split_path, dataset, seed, made_with=split_params(params, dataset))
    if len(split.unlabelled) == 0:  # nothing to label: say why rather than fail inside torch
        raise ValueError(f"{split_path} has no unlabelled images to label (every training "
                         f"image is labelled); set datasets.{dataset}.labelled to a label budget "
                         "and split again")
    source = load_dataset(dataset, params["datasets"][dataset])
    check_split_fits(split, len(source.labels), split_path)
    spec = None if model is None else RunConfig.from_params(
        params, dataset=dataset, model=model, method=labeler, seed=seed).model_spec
    net, meta = load_model(checkpoint, device, model=model, spec=spec)
    check_run(checkpoint, meta, dataset=dataset, method=labeler, seed=seed,
              method_flag="--labeler")
    if model is not None:  # the model known: the labeler's training must be the params' too
        check_trained_by(checkpoint, meta, training_fingerprint(params, dataset, model, labeler))
    with outputs_of(checkpoint, "unlabelled images"):  # NaN logits: no labels (argmax: 0)
        predicted = predict(net, source.images[torch.as_tensor(split.unlabelled)], device)
    truth = source.labels[torch.as_tensor(split.unlabelled)]  # for the metric only
    per_class = {str(c): round(100.0 * float((predicted[truth == c] == c).float().mean()), 4)
                 for c in range(source.num_classes) if bool((truth == c).any())}
    report = {"dataset": dataset, "seed": seed, "labeler": labeler, "n": len(predicted),
              "accuracy": round(100.0 * float((predicted == truth).float().mean()), 4),
              "per_class_accuracy": per_class,
              "manifest": {"checkpoint": str(checkpoint), "checkpoint_epoch": meta["epoch"],
                           "ema": True, "mode": "eval", "versions": versions(),
                           **threads.manifest_entry(meta, device, "pseudo_labelling")}}
    with atomic_path(out) as tmp, atomic_path(metrics) as report_tmp:  # both or neither
        with open(tmp, "wb") as handle:
            np.savez(handle, indices=split.unlabelled, pseudo_labels=predicted.numpy(),
                     labeler=np.array(labeler),  # both checked by the training that reads them
                     labeler_training=np.array(meta.get("training_fingerprint") or ""),
                     dataset=np.array(dataset), seed=np.array(seed),  # whose file it is
                     **({} if model is None else {"model": np.array(model)}))
        report_tmp.write_text(json_text(report))
    return report
