"""`wscat validate`: natural and PGD accuracy on the validation set, the numbers of Fig-beta's
tuning rule, with the model in eval mode."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from wscat.analysis import validation_accuracies
from wscat.checkpoint import check_run, check_trained_by
from wscat.config import RunConfig, evaluation_for, validation_for
from wscat.data import load_dataset, raw_files
from wscat.data.split import check_split_fits, load_split_of
from wscat.inference import check_which, load_model, outputs_of
from wscat.io import check_writable, guard_outputs, write_json
from wscat.training import threads
from wscat.workflow import split_params, training_fingerprint, validation_fingerprint


def run(params: dict[str, Any], *, dataset: str, model: str, method: str, seed: int,
        split_path: Path, checkpoint: Path, out: Path, device: torch.device) -> dict[str, Any]:
    """Fig-beta's tuning numbers on the validation set, with the model in eval mode; written to
    `out` (JSON). A checkpoint of another run (dataset, model, method, seed) is refused, as
    `wscat evaluate` refuses it, one of another training than these params give, and a split
    made with other split params than these or that does not fit the dataset (indices past its
    images, validation or training images among the test ones: check_split_fits); so is another
    checkpoint of the run than the params evaluate (evaluation.checkpoint: best.pt or last.pt),
    and a model whose outputs are NaN or inf (wscat.inference.NonFiniteOutputs). The manifest
    records the training's fingerprint and the validation settings'
    (wscat.workflow.validation_fingerprint): Fig-beta refuses numbers of another training or
    settings than the params give."""
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    guard_outputs({f"dataset {dataset}": raw_files(dataset, params["datasets"][dataset]),
                   "--split": split_path, "--checkpoint": checkpoint}, {"--out": out})
    check_writable(out)
    split = load_split_of(split_path, dataset, seed, made_with=split_params(params, dataset))
    net, meta = load_model(checkpoint, device, model=model, spec=run.model_spec)
    check_run(checkpoint, meta, dataset=dataset, method=method, seed=seed, method_flag="--method")
    check_which(checkpoint, meta["which"], evaluation_for(params, dataset)["checkpoint"],
                "validate")  # the one the workflow passes (validation_fingerprint records it)
    training = training_fingerprint(params, dataset, model, method)
    check_trained_by(checkpoint, meta, training)
    source = load_dataset(dataset, params["datasets"][dataset])
    check_split_fits(split, len(source.labels), split_path)  # as train, evaluate, pseudo-label
    x, y = source.take(torch.as_tensor(split.validation), device)
    evaluation = evaluation_for(params, dataset)
    steps = validation_for(params, dataset)["pgd_steps"]  # model selection's PGD
    with outputs_of(checkpoint, "validation images"):  # NaN logits: no scores (argmax: 0)
        accuracies = validation_accuracies(net, x, y, eps=run.data["eps"],
                                           step_size=run.data["eval_step_size"], steps=steps,
                                           batch_size=evaluation["batch_size"], seed=seed,
                                           finite=True)
    result = {**accuracies, "dataset": dataset, "model": model, "method": method,
              "seed": seed, "n": len(x), "set": "validation",
              "manifest": {"checkpoint": str(checkpoint), "epoch": meta["epoch"], "ema": True,
                           "model_mode": "eval", "pgd_steps": steps,
                           "eps": run.data["eps"], "step_size": run.data["eval_step_size"],
                           "training": {"fingerprint": training},
                           **threads.manifest_entry(meta, device, "validation"),
                           "validation_settings": validation_fingerprint(params, dataset)}}
    write_json(out, result)
    return result
