"""The paper's figures (matplotlib; PDF for LaTeX, PNG for a quick look, CSV of the numbers),
from metrics files and the analysis step's files (results/analysis/, `wscat analyse`).

- Fig-similarity: distribution of cos(f(x), f(x')) for the AEs of TRADES, RLFAT and WSCAT.
- Fig-beta: natural, PGD and their harmonic mean against beta; beta picked on validation.
- Fig-unlabel: the harmonic mean of the five accuracies against the unlabelled data used.
- Fig-feature: t-SNE of training embeddings of WSCAT, WSCAT-fixed and WSCAT-self.
- Training curves of one run (loss terms and validation accuracies per epoch).
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from wscat.errors import NPZ_ERRORS, first_line  # noqa: E402
from wscat.metrics import harmonic_mean, is_percent  # noqa: E402
from wscat.io import atomic_path, check_writable, read_json_object  # noqa: E402
from wscat.report import paper  # noqa: E402
from wscat.report.names import display_name, method_colours  # noqa: E402
from wscat.report.table import seed_std  # noqa: E402

COLOURS = {"Natural": "tab:blue", "PGD": "tab:red", "HM": "tab:green"}


def save(fig: plt.Figure, prefix: Path, table: list[dict[str, Any]] | None = None,
         files: dict[str, Path] | None = None) -> None:
    """prefix.pdf and prefix.png (and prefix.csv of the plotted numbers), or `files` (by
    extension): every path checked before any is written, and none moved into place before all
    are rendered."""
    exts = ("pdf", "png", "csv") if table else ("pdf", "png")
    files = files or {ext: prefix.with_suffix(f".{ext}") for ext in exts}
    try:
        check_writable(*files.values())
        with contextlib.ExitStack() as stack:
            render(fig, {ext: stack.enter_context(atomic_path(path))
                         for ext, path in files.items()}, table)
    finally:
        plt.close(fig)


def render(fig: plt.Figure, tmp: dict[str, Path], table: list[dict[str, Any]] | None = None
           ) -> None:
    """The figure into tmp["pdf"] and tmp["png"] (a PDF without a creation date: the same bytes
    each time), and `table` into tmp["csv"] where it is given; the caller moves them into place
    (`save`, or `wscat.report.table.write_table` beside a table's own files)."""
    for ext in ("pdf", "png"):
        fig.savefig(tmp[ext], format=ext, dpi=150, bbox_inches="tight",
                    metadata={"CreationDate": None} if ext == "pdf" else None)
    if table and "csv" in tmp:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(table[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
        tmp["csv"].write_text(out.getvalue())


def key_below(ax: plt.Axes, *, drop: float = 0.2, ncol: int = 5, **legend: Any) -> None:
    """The panel's key below it, `drop` of its height down, no frame: a key in a corner hid
    curves (nine methods' robustness curves, PUAT's loss jump, three seeds' validation)."""
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -drop), ncol=ncol,
              frameon=False, **legend)


def seeds_label(seeds: list[int]) -> str:
    """"seed 1" or "seeds 1, 2, 3", for a figure's title."""
    return (f"seed {seeds[0]}" if len(seeds) == 1
            else "seeds " + ", ".join(map(str, seeds)))


def _panels(n: int, width: float = 3.6, height: float = 3.0, rows: int = 1
            ) -> tuple[plt.Figure, np.ndarray]:
    fig, axes = plt.subplots(rows, n, figsize=(width * n, height * rows), squeeze=False)
    return fig, axes


FIGURE_EXTS = (".pdf", ".png")
NOT_PLOTTED = {"epoch", "lr", "score", "seconds"}  # train_log.csv columns that are not curves
LOG_HINT = "pass a run's train_log.csv (`wscat train` writes it in its --out-dir)"


def curves_files(out: Path) -> dict[str, Path]:
    """The files `wscat curves --out OUT` writes: OUT.pdf and OUT.png, the name kept as given
    (run.v2 -> run.v2.pdf); an OUT already ending in .pdf or .png drops that ending."""
    stem = out.with_suffix("") if out.suffix.lower() in FIGURE_EXTS else out
    return {ext: stem.with_name(f"{stem.name}.{ext}") for ext in ("pdf", "png")}


def read_train_log(path: Path) -> pd.DataFrame:
    """train_log.csv as numbers, refused in one line unless it has the epoch, loss and val_
    columns `wscat train` writes, each value a finite number. An empty cell (a val_ column on an
    epoch not validated) stays a gap, but for epoch and loss; NaN or infinity, which a finished
    run never logs (training stops on a non-finite loss), is refused rather than drawn as a
    broken or missing curve."""
    try:
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError as error:
        raise ValueError(f"{path} is empty, not a training log; {LOG_HINT}") from error
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a training log (not a CSV table: "
                         f"{' '.join(first_line(error).split())}); {LOG_HINT}") from error
    columns = [str(c) for c in text.columns]
    missing = [c for c in ("epoch", "loss") if c not in columns]
    if not any(c.startswith("val_") for c in columns):
        missing.append("val_*")
    if missing:
        raise ValueError(f"{path} lacks the {', '.join(missing)} column"
                         f"{'s' if len(missing) > 1 else ''} of a training log (its columns: "
                         f"{', '.join(columns)}); {LOG_HINT}")
    if text.empty:
        raise ValueError(f"{path}: no epochs logged; {LOG_HINT}")
    log = pd.DataFrame(index=text.index)
    for column in ["epoch", *(c for c in columns if c not in NOT_PLOTTED)]:
        log[column] = [_log_number(path, column, row, cell, gap=column not in ("epoch", "loss"))
                       for row, cell in enumerate(text[column], start=2)]
    return log


def _log_number(path: Path, column: str, line: int, cell: str, *, gap: bool) -> float:
    """One cell of a training log as a finite number (with `gap`, an empty cell: NaN, a gap)."""
    cell = cell.strip()
    if gap and cell == "":
        return math.nan
    try:
        value = float(cell)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        what = "empty" if cell == "" else f"'{cell}'"
        raise ValueError(f"{path}, line {line}: {column} is {what}, not a finite number "
                         "(`wscat train` logs finite numbers only, and stops a run whose loss "
                         "turns NaN or infinite); retrain the run, or pass the train_log.csv it "
                         "wrote")
    return value


def curves(train_log: Path, prefix: Path, title: str) -> None:
    """Loss terms (left) and validation accuracies (right) per epoch of one run, written to
    `curves_files(prefix)`."""
    log = read_train_log(train_log)
    fig, axes = _panels(2, width=4.2)
    left, right = axes[0]
    for column in log.columns:
        if column in NOT_PLOTTED:
            continue
        target = right if column.startswith("val_") else left
        target.plot(log["epoch"], log[column], label=column.removeprefix("val_"), marker=".")
    # `loss` is what the step minimised; each term is logged before its weight (e.g. Eq. 9's
    # lambda and beta), so a term may sit above the loss it is part of
    left.set(xlabel="epoch", ylabel="loss", title="training loss; its terms unweighted")
    right.set(xlabel="epoch", ylabel="validation accuracy (%)", title="validation (EMA model)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        key_below(ax)
    fig.suptitle(title, fontsize=9, y=1.04)  # above the panels' titles, not between them
    save(fig, prefix, files=curves_files(prefix))


def _load(path: str, run: paper.Run) -> dict[str, Any]:
    """A metrics or validation file of `run`, refused in one line when it is missing (saying what
    makes it), not a JSON object, or another run's (a copy: wscat.steps.table.check_run_file)."""
    from wscat.steps.paper import missing_input
    from wscat.steps.table import check_run_file

    try:
        data = read_json_object(path, "the object of a run's numbers", _remake(path))
    except FileNotFoundError:
        raise ValueError(missing_input(path)) from None
    check_run_file(path, data, run)
    return data


def _remake(path: str) -> str:
    """What rebuilds a broken input: its Snakemake target, forced."""
    from wscat.steps.paper import made_by

    found = made_by(path)
    step = f" (`{found[1]}`)" if found else ""
    return f"make it again: snakemake --forcerun {path}{step} -- <this figure>"


def _percent(path: str, numbers: Any, key: str) -> float:
    """numbers[key] as an accuracy in percent: a finite number in [0, 100] (wscat.metrics.
    is_percent); NaN, infinity or anything else is refused in one line, never drawn or chosen."""
    value = numbers.get(key) if isinstance(numbers, dict) else None
    if not is_percent(value):
        shown = "missing" if value is None else f"{json.dumps(value)}"
        raise ValueError(f"{path}: {key} is {shown}, not a finite percentage in [0, 100]; "
                         f"{_remake(path)}")
    return float(value)


def _percents(path: str, numbers: Any, keys: tuple[str, ...]) -> dict[str, float]:
    """`_percent` of each of `keys`, from numbers read once."""
    return {key: _percent(path, numbers, key) for key in keys}


def beta_figure(params: dict[str, Any], tier: str, root: str, prefix: Path) -> None:
    """Fig-beta, one panel per dataset; the chosen beta maximises the validation harmonic mean
    of natural and PGD accuracy (the paper's tuning rule; a tie: the smaller beta), and is
    recorded in the CSV."""
    entries = paper.tier_spec(params, tier)["datasets"]
    seeds = paper.tier_spec(params, tier)["beta"]["seeds"]
    fig, axes = _panels(len(entries))
    table = []
    for ax, entry in zip(axes[0], entries):
        model = paper.dataset_model(params, entry)
        points = []
        for beta, method in paper.beta_points(params, tier, entry):
            runs = [paper.Run(entry["dataset"], model, method, s) for s in seeds]
            test = [_percents(r.metrics(root), _load(r.metrics(root), r).get("accuracy"),
                              ("Natural", "PGD")) for r in runs]
            val = [_percents(r.validation(root), _load(r.validation(root), r),
                             ("Natural", "PGD", "HM")) for r in runs]
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
            # the end points sit on the axes' edges: whole markers
            ax.plot(x, [p[key] for p in points], marker="o", color=COLOURS[name],
                    label=name, clip_on=False)
        # what the choice read, beside the test curves it did not read
        ax.plot(x, [p["val_hm"] for p in points], marker="o", color=COLOURS["HM"],
                linestyle=":", markerfacecolor="white", label="HM (validation)", clip_on=False)
        ax.axvline(chosen["beta"], color="grey", linestyle="--",
                   label=f"chosen on validation: {chosen['beta']:g}")
        positive = [b for b in x if b > 0]
        ax.set_xscale("symlog", linthresh=min(positive) if positive else 1.0)
        ax.set_xlim(left=min(x))
        ax.set(xlabel=r"$\beta$", ylabel="accuracy (%)", title=entry["name"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))  # beside, not over
    fig.suptitle(rf"Effect of $\beta$ ({seeds_label(seeds)}); HM: the harmonic mean of "
                 "Natural and PGD\nfilled: test accuracy; hollow, dotted: validation (what "
                 "chose beta)", fontsize=9, y=1.08)
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
            means = [_percent(r.metrics(root), _load(r.metrics(root), r).get("accuracy"), "Mean")
                     for r in runs]
            count = len(load_split(runs[0].split(root)).unlabelled)
            xs.append(count)
            ys.append(float(np.mean(means)))
            table.append({"dataset": entry["name"], "fraction": fraction, "unlabelled": count,
                          "mean": round(ys[-1], 4), "std": round(seed_std(means), 4),
                          "n_seeds": len(means)})  # as the tables' CSVs: std 0 of one seed
        ax.plot(xs, ys, marker="o", color="tab:green")
        ax.set(xlabel="unlabelled samples used", ylabel="Mean (%)", title=entry["name"])
        ax.grid(alpha=0.3)
    fig.suptitle(f"Effect of the amount of unlabelled data ({display_name(spec['method'])}, "
                 f"{seeds_label(spec['seeds'])})\nMean: the harmonic mean of Natural, FGSM, "
                 "PGD, CW and AA", fontsize=9, y=1.08)
    save(fig, prefix, table)


# What each analysed figure draws, per array: its shape ("m": a row per method, "n": one per
# image, the same n in every array), as wscat.steps.analyse writes it.
ANALYSIS_ARRAYS = {"Fig-similarity": {"cos": ("m", "n")},
                   "Fig-feature": {"tsne": ("m", "n", 2), "index": ("n",), "label": ("n",)}}


def _analysis(path: str, methods: list[str], figure: str) -> dict[str, np.ndarray]:
    """An analysis file (`wscat analyse`), checked to hold the methods params.yaml asks for and
    the arrays `figure` draws (ANALYSIS_ARRAYS): finite numbers, a row per method and as many
    images in each (a method or an image short would be left out of the figure unseen, a NaN
    drawn as a gap and written into the CSV)."""
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
    images = None
    for key, shape in ANALYSIS_ARRAYS[figure].items():
        array = arrays.get(key)
        if array is not None and array.ndim == len(shape) and images is None:
            images = array.shape[shape.index("n")]
        wanted = tuple({"m": len(methods), "n": images}.get(size, size) for size in shape)
        if (array is None or array.shape != wanted or not images
                or not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all()):
            found = "none" if array is None else f"{array.dtype} {array.shape}"
            raise ValueError(f"{path}: its `{key}` is {found}, not the finite numbers of shape "
                             f"{wanted} {figure} draws; rerun `wscat analyse` (or its Snakemake "
                             "rule)")
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
        cos = _analysis(path, spec["methods"], "Fig-similarity")["cos"]
        # 60 bins over the data's range (a robust model's cosines sit near 1), none left out
        low = min(float(np.floor(cos.min() * 20) / 20), 0.95)
        bins = np.linspace(low, max(1.0, float(cos.max())), 61)
        colours = method_colours([display_name(m) for m in spec["methods"]])
        for method, values in zip(spec["methods"], cos):
            colour = colours[display_name(method)]
            ax.hist(values, bins=bins, alpha=0.3, label=display_name(method), density=True,
                    color=colour)
            # an outline each: two methods' fills on one another blend into one colour
            ax.hist(values, bins=bins, density=True, histtype="step", color=colour,
                    linewidth=1.2)
            table.append({"dataset": entry["name"], "method": display_name(method),
                          "n": len(values), "mean": round(float(values.mean()), 4),
                          "median": round(float(np.median(values)), 4),
                          "q10": round(float(np.quantile(values, 0.1)), 4),
                          "q90": round(float(np.quantile(values, 0.9)), 4)})
        ax.set(xlabel="cosine similarity of natural and AE embeddings", ylabel="density",
               title=f"{entry['name']} ({display_name(spec['model'])} model)")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Similarity between embeddings of natural data and AEs", fontsize=9, y=1.04)
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
        data = _analysis(path, spec["methods"], "Fig-feature")
        chosen, y = data["index"], data["label"]
        for col, (method, points) in enumerate(zip(spec["methods"], data["tsne"])):
            ax = axes[row][col]
            drawn = ax.scatter(points[:, 0], points[:, 1], c=y, cmap="tab10", s=3)
            ax.set(title=f"{display_name(method)} ({entry['name']})", xticks=[], yticks=[])
            table += [{"dataset": entry["name"], "method": display_name(method), "index": int(i),
                       "label": int(label), "x": round(float(p[0]), 4), "y": round(float(p[1]), 4)}
                      for i, label, p in zip(chosen, y, points)]
        classes = sorted({int(label) for label in y})
        if len(classes) <= 10:  # a legend entry per class; more classes: a colour bar
            handles = drawn.legend_elements(num=classes)[0]
            axes[row][-1].legend(handles, [str(c) for c in classes], title="class", fontsize=7,
                                 title_fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
        else:
            fig.colorbar(drawn, ax=list(axes[row]), label="class", fraction=0.02)
    fig.suptitle("t-SNE of training embeddings, coloured by the true label", fontsize=9,
                 y=1.02)
    save(fig, prefix, table)
