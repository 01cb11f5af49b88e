"""The paper's figures (matplotlib; PDF for LaTeX, PNG for a quick look, CSV of the numbers),
from metrics files and the analysis step's files (results/analysis/, `wscat analyse`).

- Fig-similarity: distribution of cos(f(x), f(x')) for the AEs of TRADES, RLFAT and WSCAT.
- Fig-beta: natural, PGD and their harmonic mean against beta; beta picked on validation.
- Fig-unlabel: the harmonic mean of the five accuracies against the unlabelled data used.
- Fig-feature: t-SNE of training embeddings of WSCAT, WSCAT-fixed and WSCAT-self.
- Training curves of one run (loss terms and validation accuracies per epoch).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from wscat.errors import NPZ_ERRORS, first_line  # noqa: E402
from wscat.metrics import harmonic_mean  # noqa: E402
from wscat.io import atomic_path, write_text  # noqa: E402
from wscat.report import paper  # noqa: E402
from wscat.report.names import display_name  # noqa: E402
from wscat.report.table import seed_std  # noqa: E402

COLOURS = {"Natural": "tab:blue", "PGD": "tab:red", "HM": "tab:green"}


def save(fig: plt.Figure, prefix: Path, table: list[dict[str, Any]] | None = None) -> None:
    """prefix.pdf and prefix.png (and prefix.csv of the plotted numbers), each written atomically."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for ext in ("pdf", "png"):
        with atomic_path(prefix.with_suffix(f".{ext}")) as tmp:
            fig.savefig(tmp, format=ext, dpi=150, bbox_inches="tight",
                        metadata={"CreationDate": None} if ext == "pdf" else None)
    plt.close(fig)
    if table:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(table[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
        write_text(prefix.with_suffix(".csv"), out.getvalue())


def _panels(n: int, width: float = 3.6, height: float = 3.0, rows: int = 1
            ) -> tuple[plt.Figure, np.ndarray]:
    fig, axes = plt.subplots(rows, n, figsize=(width * n, height * rows), squeeze=False)
    return fig, axes


def curves(train_log: Path, prefix: Path, title: str) -> None:
    """Loss terms (left) and validation accuracies (right) per epoch of one run."""
    log = pd.read_csv(train_log)
    if log.empty:
        raise ValueError(f"{train_log}: no epochs logged")
    fig, axes = _panels(2, width=4.2)
    left, right = axes[0]
    skip = {"epoch", "lr", "score", "seconds"}
    for column in log.columns:
        if column in skip:
            continue
        target = right if column.startswith("val_") else left
        target.plot(log["epoch"], log[column], label=column.removeprefix("val_"), marker=".")
    left.set(xlabel="epoch", ylabel="loss", title="training loss")
    right.set(xlabel="epoch", ylabel="validation accuracy (%)", title="validation (EMA model)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    save(fig, prefix)


def _load(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def beta_figure(params: dict[str, Any], tier: str, root: str, prefix: Path) -> None:
    """Fig-beta, one panel per dataset; the chosen beta maximises the validation harmonic mean
    of natural and PGD accuracy (the paper's tuning rule), and is recorded in the CSV."""
    entries = paper.tier_spec(params, tier)["datasets"]
    seeds = paper.tier_spec(params, tier)["beta"]["seeds"]
    fig, axes = _panels(len(entries))
    table = []
    for ax, entry in zip(axes[0], entries):
        model = paper.dataset_model(params, entry)
        points = []
        for beta, method in paper.beta_points(params, tier, entry):
            runs = [paper.Run(entry["dataset"], model, method, s) for s in seeds]
            test = [_load(r.metrics(root))["accuracy"] for r in runs]
            val = [_load(r.validation(root)) for r in runs]
            natural = float(np.mean([t["Natural"] for t in test]))
            pgd = float(np.mean([t["PGD"] for t in test]))
            points.append({"dataset": entry["name"], "beta": beta, "method": method,
                           "natural": round(natural, 4), "pgd": round(pgd, 4),
                           # per seed, then averaged: the tables' Mean and val_hm alike
                           "hm": round(float(np.mean([harmonic_mean([t["Natural"], t["PGD"]])
                                                      for t in test])), 4),
                           "val_natural": round(float(np.mean([v["Natural"] for v in val])), 4),
                           "val_pgd": round(float(np.mean([v["PGD"] for v in val])), 4),
                           "val_hm": round(float(np.mean([v["HM"] for v in val])), 4)})
        chosen = max(points, key=lambda p: (p["val_hm"], -p["beta"]))
        for point in points:
            point["chosen"] = point is chosen
        table += points
        x = [p["beta"] for p in points]
        for key, name in (("natural", "Natural"), ("pgd", "PGD"), ("hm", "HM")):
            ax.plot(x, [p[key] for p in points], marker="o", color=COLOURS[name], label=name)
        ax.axvline(chosen["beta"], color="grey", linestyle="--",
                   label=f"chosen on validation: {chosen['beta']:g}")
        positive = [b for b in x if b > 0]
        ax.set_xscale("symlog", linthresh=min(positive) if positive else 1.0)
        ax.set_xlim(left=min(x))
        ax.set(xlabel=r"$\beta$", ylabel="test accuracy (%)", title=entry["name"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(r"Effect of $\beta$ (seeds " + ", ".join(map(str, seeds)) + ")", fontsize=9,
                 y=1.04)
    save(fig, prefix, table)


def unlabel_figure(params: dict[str, Any], tier: str, root: str, prefix: Path) -> None:
    """Fig-unlabel: the harmonic mean of Natural, FGSM, PGD, CW, AA against the share of the
    unlabelled pool used, one panel per dataset."""
    from wscat.data.split import load_split

    entries = paper.tier_spec(params, tier)["datasets"]
    spec = paper.tier_spec(params, tier)["unlabelled"]
    fig, axes = _panels(len(entries))
    table = []
    for ax, entry in zip(axes[0], entries):
        model = paper.dataset_model(params, entry)
        xs, ys = [], []
        for fraction, dataset in paper.unlabelled_points(params, tier, entry):
            runs = [paper.Run(dataset, model, spec["method"], s) for s in spec["seeds"]]
            means = [_load(r.metrics(root))["accuracy"]["Mean"] for r in runs]
            count = len(load_split(runs[0].split(root)).unlabelled)
            xs.append(count)
            ys.append(float(np.mean(means)))
            table.append({"dataset": entry["name"], "fraction": fraction, "unlabelled": count,
                          "mean": round(ys[-1], 4), "std": round(seed_std(means), 4)})
        ax.plot(xs, ys, marker="o", color="tab:green")
        ax.set(xlabel="unlabelled samples used", ylabel="harmonic mean accuracy (%)",
               title=entry["name"])
        ax.grid(alpha=0.3)
    fig.suptitle(f"Effect of the amount of unlabelled data ({display_name(spec['method'])})",
                 fontsize=9)
    save(fig, prefix, table)


def _analysis(path: str, methods: list[str]) -> dict[str, np.ndarray]:
    """An analysis file (`wscat analyse`), checked to hold the methods params.yaml asks for."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        found = [str(m) for m in arrays["methods"]]
    except NPZ_ERRORS as error:
        raise ValueError(f"{path}: not an analysis file ({first_line(error)}); run `wscat "
                         "analyse` (or its Snakemake rule) first") from error
    if found != methods:
        raise ValueError(f"{path} analyses {', '.join(found)}, params.yaml asks for "
                         f"{', '.join(methods)}; rerun `wscat analyse`")
    return arrays


def similarity_figure(params: dict[str, Any], tier: str, root: str, prefix: Path) -> None:
    """Fig-similarity: one model (the checkpoint of `similarity.model`), the same natural test
    images, the AE of each method's inner maximisation, cos(f(x), f(x')) per image."""
    spec = paper.tier_spec(params, tier)["similarity"]
    entries = paper.tier_spec(params, tier)["datasets"]
    fig, axes = _panels(len(entries))
    table = []
    for ax, entry in zip(axes[0], entries):
        path = paper.analysis_file(tier, "Fig-similarity", entry["dataset"], root)
        cos = _analysis(path, spec["methods"])["cos"]
        bins = np.linspace(-0.2, 1.0, 61)
        for method, values in zip(spec["methods"], cos):
            ax.hist(values, bins=bins, alpha=0.5, label=display_name(method), density=True)
            table.append({"dataset": entry["name"], "method": display_name(method),
                          "n": len(values), "mean": round(float(values.mean()), 4),
                          "median": round(float(np.median(values)), 4),
                          "q10": round(float(np.quantile(values, 0.1)), 4),
                          "q90": round(float(np.quantile(values, 0.9)), 4)})
        ax.set(xlabel="cosine similarity of natural and AE embeddings", ylabel="density",
               title=f"{entry['name']} ({display_name(spec['model'])} model)")
        ax.legend(fontsize=7)
    fig.suptitle("Similarity between embeddings of natural data and AEs", fontsize=9)
    save(fig, prefix, table)


def feature_figure(params: dict[str, Any], tier: str, root: str, prefix: Path) -> None:
    """Fig-feature: t-SNE of training embeddings (labelled + unlabelled, a seeded subset),
    coloured by the true label; one row per dataset, one column per method."""
    spec = paper.tier_spec(params, tier)["feature"]
    entries = paper.tier_spec(params, tier)["datasets"]
    fig, axes = _panels(len(spec["methods"]), width=3.4, height=3.4, rows=len(entries))
    table = []
    for row, entry in enumerate(entries):
        path = paper.analysis_file(tier, "Fig-feature", entry["dataset"], root)
        data = _analysis(path, spec["methods"])
        chosen, y = data["index"], data["label"]
        for col, (method, points) in enumerate(zip(spec["methods"], data["tsne"])):
            ax = axes[row][col]
            ax.scatter(points[:, 0], points[:, 1], c=y, cmap="tab10", s=3)
            ax.set(title=f"{display_name(method)} ({entry['name']})", xticks=[], yticks=[])
            table += [{"dataset": entry["name"], "method": display_name(method), "index": int(i),
                       "label": int(label), "x": round(float(p[0]), 4), "y": round(float(p[1]), 4)}
                      for i, label, p in zip(chosen, y, points)]
    fig.suptitle("t-SNE of training embeddings, coloured by the true label", fontsize=9)
    save(fig, prefix, table)
