"""`wscat train`: train one (dataset, model, method, seed) on its split, resuming where a killed
run stopped."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from wscat.checkpoint import check_run, check_trained_by
from wscat.config import RunConfig, check_pretraining_ends, method_for, short_attacks
from wscat.data import ImageDataset, load_dataset, raw_files
from wscat.data.split import check_split_fits, load_split_of
from wscat.data.training_data import (add_generated, load_generated, load_pseudo_labels,
                                      training_data)
from wscat.device import check_training_device, parameter_count
from wscat.inference import load_model, predict
from wscat.file_kinds import check_input_kind
from wscat.io import check_writable, guard_outputs, output_lock
from wscat.provenance import machine, versions
from wscat.training import TrainingData, train
from wscat.training.run_folder import check_run_folder
from wscat.workflow import split_params, training_fingerprint


def model_parameters(run: RunConfig, source: ImageDataset) -> int:
    """The parameter count of the run's model for `source`, counted on torch's meta device (no
    memory, no time)."""
    from wscat.models import build_model

    with torch.device("meta"):
        net = build_model(**run.model_spec, in_channels=source.image_shape[0],
                          num_classes=source.num_classes, mean=source.mean, std=source.std)
    return parameter_count(net)


def with_generated(data: TrainingData, run: RunConfig, source: ImageDataset,
                   labeler_checkpoint: Path | None, device: torch.device,
                   params: dict[str, Any]) -> TrainingData:
    """DMAT: the generated images of `methods.<name>.generated` added to the run's data, with
    the npz's labels or, without them, the predictions of the labeler's checkpoint (which must
    be the labeler's run, trained as `params` give)."""
    images, labels = load_generated(Path(run.method_params["generated"]), source)
    if labels is None:
        if labeler_checkpoint is None:
            raise ValueError(f"{run.method_params['generated']} has no labels: set methods."
                             f"{run.method}.generated_labeler (e.g. mt) or add `labels` to the "
                             "file")
        labeler, meta = load_model(labeler_checkpoint, device, model=run.model,
                                   spec=run.model_spec)
        check_run(labeler_checkpoint, meta, dataset=run.dataset,
                  method=run.method_params.get("generated_labeler"), seed=run.seed)
        check_trained_by(labeler_checkpoint, meta, training_fingerprint(
            params, run.dataset, run.model, run.method_params["generated_labeler"]))
        labels = predict(labeler, images, device)
    return add_generated(data, run, images, labels)


def run(params: dict[str, Any], *, dataset: str, model: str, method: str, seed: int,
        split_path: Path, pseudo_path: Path | None, out_dir: Path,
        device: torch.device, labeler_checkpoint: Path | None = None,
        device_named: bool = False) -> dict[str, Any]:
    """Train one (dataset, model, method, seed). A paper-size model is refused on a CPU unless
    `device_named` (`--device cpu` given, not chosen by `auto`); an input of another kind (a
    split as --pseudo) and an --out-dir that holds another run (`check_run_folder`) before any
    work."""
    run = RunConfig.from_params(params, dataset=dataset, model=model, method=method, seed=seed)
    check_pretraining_ends(run)
    guard_outputs({f"dataset {dataset}": raw_files(dataset, params["datasets"][dataset]),
                   "--split": split_path, "--pseudo": pseudo_path,
                   "--labeler-checkpoint": labeler_checkpoint,
                   f"methods.{method}.generated": run.method_params.get("generated")},
                  {}, {"--out-dir": out_dir})
    fields = {"dataset": dataset, "model": model, "method": method, "seed": seed,
              "labeler": run.method_params.get("labeler")}
    check_input_kind(split_path, "split", "--split", fields)
    check_input_kind(pseudo_path, "pseudo-labels", "--pseudo", fields)
    check_input_kind(labeler_checkpoint, "checkpoint", "--labeler-checkpoint",
                     {**fields, "method": run.method_params.get("generated_labeler")})
    fingerprint = training_fingerprint(params, dataset, model, method)
    # before anything in it is touched
    check_run_folder(out_dir, dataset=dataset, model=model, method=method, seed=seed)
    check_writable(out_dir, folders=True)
    split = load_split_of(split_path, dataset, seed, made_with=split_params(params, dataset))
    kind = run.method_params["data"]
    if kind == "pseudo" and pseudo_path is None:
        raise ValueError(f"method '{method}' trains on pseudo-labels from "
                         f"'{run.method_params['labeler']}': pass --pseudo FILE")
    if kind != "pseudo" and pseudo_path is not None:  # not read: say so rather than ignore it
        raise ValueError(f"method '{method}' trains on no pseudo-labels (data: {kind}); drop "
                         "--pseudo, or name a method that does (e.g. wscat, rst)")
    if labeler_checkpoint is not None and not run.method_params.get("generated"):  # not read
        takers = [name for name in params["methods"]
                  if method_for(params, name, dataset).get("generated")]
        raise ValueError(f"method '{method}' has no generated images to label "
                         f"(methods.{method}.generated is not set); drop --labeler-checkpoint "
                         "(it is read only by a method with generated images: "
                         f"{', '.join(takers) or 'none in these params'})")
    source = load_dataset(dataset, params["datasets"][dataset])
    check_training_device(device, model=model, parameters=model_parameters(run, source),
                          cpu_named=device_named)
    check_split_fits(split, len(source.labels), split_path)
    pseudo = (load_pseudo_labels(pseudo_path, split, source.num_classes,
                                 labeler=run.method_params["labeler"],
                                 labeler_training=training_fingerprint(
                                     params, dataset, model, run.method_params["labeler"]))
              if kind == "pseudo" else None)
    data = training_data(source, split, kind, pseudo)
    if run.method_params.get("generated"):
        data = with_generated(data, run, source, labeler_checkpoint, device, params)
    if (out_dir / "best.pt").is_file() and not (out_dir / "resume" / "last.pt").is_file():
        print(f"{out_dir} holds this run, finished: it trains again from the start; best.pt, "
              "last.pt, train_log.csv and dvclive/ there are replaced when it ends",
              file=sys.stderr, flush=True)
    selected_by = {"cw": ("CW",), "hm": ("PGD",)}.get(run.method_params["selection"])
    warning = selected_by and short_attacks(params, dataset, "validation", selected_by)
    if warning:  # best.pt is chosen by a truncated attack: said once, before the long part
        print(f"wscat train: {warning}", file=sys.stderr, flush=True)
    with output_lock(out_dir, f"wscat train {method} seed {seed}"):  # one writer per run
        return train(run, data, out_dir, device=device,
                     meta={"versions": versions(), "machine": machine(device),
                           "training_fingerprint": fingerprint})
