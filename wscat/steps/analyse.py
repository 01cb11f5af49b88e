"""The analysis step: what Fig-similarity and Fig-feature show, computed on trained checkpoints
and written to results/analysis/{tier}/{figure}/{dataset}.npz (the figures only read it).

- Fig-similarity: `methods` (the AEs compared) and `cos` (methods x images): cos(f(x), f(x'))
  on the first `similarity.n_examples` test images, one model (`similarity.model`).
- Fig-feature: `methods`, `index` and `label` of the chosen training images, and `tsne`
  (methods x images x 2): t-SNE of each method's embeddings f(x).
Both hold a `manifest` (JSON): tier, figure, dataset, checkpoints, seed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wscat import analysis
from wscat.checkpoint import CheckpointError, check_run
from wscat.config import ConfigError, method_for, training_for
from wscat.data import load_dataset, load_split, raw_files
from wscat.io import atomic_path, check_writable, guard_outputs
from wscat.inference import load_model
from wscat.report import paper

FIGURES = ("Fig-similarity", "Fig-feature")  # the figures an analysis file serves


def _entry(params: dict[str, Any], tier: str, dataset: str) -> dict[str, Any]:
    entries = paper.tier_spec(params, tier)["datasets"]
    for entry in entries:
        if entry["dataset"] == dataset:
            return entry
    raise ConfigError(f"paper tier '{tier}' has no dataset '{dataset}'; its datasets: "
                      f"{', '.join(e['dataset'] for e in entries)}")


def _images(params: dict[str, Any], dataset: str, indices: np.ndarray, device: torch.device
            ) -> tuple[torch.Tensor, torch.Tensor]:
    source = load_dataset(dataset, params["datasets"][dataset])
    return source.take(torch.as_tensor(indices), device)


def _load_run(run: paper.Run, root: str, device: torch.device
              ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model of `run`'s checkpoint and its metadata, refused in one line (as `wscat evaluate`
    refuses it) when the checkpoint holds another method, seed or dataset."""
    checkpoint = run.checkpoint(root)
    model, meta = load_model(Path(checkpoint), device)
    try:
        check_run(checkpoint, meta, dataset=run.dataset, method=run.method, seed=run.seed)
    except ValueError as error:
        held = str(error).split("; ")[0]  # check_run's own what-to-do is a step's, not ours
        raise CheckpointError(f"{held}; put the best.pt of that run there (`wscat train`, or "
                              "its Snakemake rule, makes it)") from None
    return model, meta


def similarity(params: dict[str, Any], tier: str, entry: dict[str, Any], root: str,
               device: torch.device) -> dict[str, np.ndarray]:
    """One model (the checkpoint of `similarity.model`), the same natural test images, the AE of
    each method's inner maximisation, cos(f(x), f(x')) per image."""
    spec = paper.tier_spec(params, tier)["similarity"]
    dataset = entry["dataset"]
    run = paper.Run(dataset, paper.dataset_model(params, entry), spec["model"], spec["seed"])
    model, meta = _load_run(run, root, device)
    test = load_split(run.split(root)).test[: spec["n_examples"]]
    x, _ = _images(params, dataset, test, device)
    heads = analysis.wscat_heads(run.checkpoint(root), method_for(params, spec["model"], dataset),
                                 model.feature_dim, meta["num_classes"], tuple(x.shape[1:]),
                                 device)
    batch_size = training_for(params, dataset, spec["model"])["batch_size"]  # the model's own
    values = []
    for method in spec["methods"]:
        knobs = method_for(params, method, dataset)
        heads.beta = knobs.get("beta", heads.beta)
        generator = torch.Generator(device=device).manual_seed(spec["seed"])
        ctx = analysis.attack_context(params["datasets"][dataset], generator)
        x_adv = analysis.adversarial_examples(knobs["objective"], model, x, ctx, heads=heads,
                                              blocks=knobs.get("blocks", 2),
                                              batch_size=batch_size)
        values.append(analysis.cosine_similarity(model, x, x_adv))
    return {"methods": np.array(spec["methods"]), "cos": np.stack(values),
            "manifest": _manifest(tier, "Fig-similarity", dataset, [run.checkpoint(root)],
                                  spec["seed"])}


def feature(params: dict[str, Any], tier: str, entry: dict[str, Any], root: str,
            device: torch.device) -> dict[str, np.ndarray]:
    """t-SNE of training embeddings (labelled + unlabelled, a seeded subset), per method."""
    spec = paper.tier_spec(params, tier)["feature"]
    dataset, model_key = entry["dataset"], paper.dataset_model(params, entry)
    split = load_split(paper.Run(dataset, model_key, "", spec["seed"]).split(root))
    pool = np.concatenate([split.labelled, split.unlabelled])
    chosen = np.sort(np.random.default_rng(spec["seed"]).permutation(pool)[: spec["n_examples"]])
    x, y = _images(params, dataset, chosen, device)
    runs = [paper.Run(dataset, model_key, method, spec["seed"]) for method in spec["methods"]]
    points = []
    for run in runs:
        model, _ = _load_run(run, root, device)
        points.append(analysis.tsne(analysis.features(model, x), seed=spec["seed"]))
    return {"methods": np.array(spec["methods"]), "index": chosen, "label": y.cpu().numpy(),
            "tsne": np.stack(points),
            "manifest": _manifest(tier, "Fig-feature", dataset,
                                  [run.checkpoint(root) for run in runs], spec["seed"])}


def _manifest(tier: str, figure: str, dataset: str, checkpoints: list[str], seed: int
              ) -> np.ndarray:
    return np.array(json.dumps({"tier": tier, "figure": figure, "dataset": dataset,
                                "checkpoints": checkpoints, "seed": seed}, sort_keys=True))


def run(params: dict[str, Any], *, tier: str, figure: str, dataset: str, out: Path,
        device: torch.device, root: str = "results") -> None:
    """Compute what `figure` shows on one dataset of a paper tier and write it to `out` (.npz)."""
    if figure not in FIGURES:
        raise ConfigError(f"'{figure}' needs no analysis; the analysed figures: "
                          f"{', '.join(FIGURES)}")
    if paper.FIGURE_SECTIONS[figure] not in paper.tier_spec(params, tier):
        raise ConfigError(f"paper tier '{tier}' has no {paper.FIGURE_SECTIONS[figure]}: section, "
                          f"so no {figure}")
    entry = _entry(params, tier, dataset)
    guard_outputs({f"dataset {dataset}": raw_files(dataset, params["datasets"][dataset]),
                   "--results": root}, {"--out": out})
    check_writable(out)
    compute = similarity if figure == "Fig-similarity" else feature
    arrays = compute(params, tier, entry, root, device)
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)
