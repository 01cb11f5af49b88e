"""Every run's validation accuracy per epoch, over the seeds, in one picture: what checkpoint
selection read (the labelled validation split), and which epoch each run's reported weights
come from. Adversarially trained runs are judged by CW-20 accuracy (or, with `selection: hm`, by
the harmonic mean of natural and PGD-20 accuracy: their PGD-20 accuracy is drawn), the others
(the labelers, Standard) by natural accuracy: the paper's selection criteria (params.yaml
`selection`)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from wscat.report.figures import read_train_log

PANELS = (("val_natural", "natural accuracy (%)", "runs without an attack: the labelers, Standard"),
          ("val_cw", "CW-{cw_steps} accuracy (%)", "adversarially trained runs"),
          ("val_pgd", "PGD-{pgd_steps} accuracy (%)",
           "adversarially trained runs selected by the harmonic mean with natural accuracy"))
PAPER_STEPS = {"pgd_steps": 20, "cw_steps": 20}  # the paper's validation attacks (params.yaml)


def checkpoint_epoch(path: Path, selection: str) -> int:
    """The epoch whose weights best.pt holds, from train_log.csv at `path` (read_train_log has
    checked it): the last for `selection: last`, else the best `score` (the selection
    criterion's value) among validated epochs, a tie going to the later one (the trainer's
    rule, wscat/training/trainer.py)."""
    log = pd.read_csv(path)
    if selection == "last":
        return int(log["epoch"].iloc[-1])
    if "score" in log.columns and not pd.api.types.is_numeric_dtype(log["score"]):
        raise ValueError(f"{path}: column score holds a value that is not a number, so which "
                         "epoch best.pt holds is unknown; pass the train_log.csv `wscat train` "
                         "wrote")
    if "score" not in log.columns or log["score"].isna().all():
        raise ValueError(f"{path}: no validated epoch has a score, so which epoch best.pt "
                         "holds is unknown; pass the train_log.csv `wscat train` wrote")
    scored = log.dropna(subset=["score"])
    return int(scored.loc[scored["score"] == scored["score"].max(), "epoch"].iloc[-1])


def rows(logs: Mapping[tuple[str, int], Path], selection: Mapping[str, str],
         names: Mapping[str, str]) -> list[dict]:
    """What the figure plots: one row per (method, seed, epoch) with a validation score, in its
    panel's column (CW-20 where the run logged it, PGD-20 where it was selected by the harmonic
    mean, else natural), and whether the run's checkpoint is that epoch's."""
    out = []
    for (method, seed), path in logs.items():
        log = read_train_log(path)
        column = next((c for c in ("val_cw", "val_pgd") if c in log.columns), "val_natural")
        chosen = checkpoint_epoch(path, selection[method])
        for _, row in log.dropna(subset=[column]).iterrows():
            out.append({"method": names.get(method, method), "seed": seed,
                        "epoch": int(row["epoch"]), "metric": column,
                        "accuracy": round(float(row[column]), 4),
                        "checkpoint": int(row["epoch"]) == chosen})
    return out


def _legend(frame: pd.DataFrame, colours: Mapping[str, str],
            styles: Mapping[int, str]) -> list:
    """A panel's key: a colour per method, then a line style per seed (a run is the pair; a
    key per run would grow as methods × seeds)."""
    from matplotlib.lines import Line2D

    methods = dict.fromkeys(frame["method"])
    return ([Line2D([], [], color=colours[m], linewidth=1.2, label=m) for m in methods]
            + [Line2D([], [], linestyle=styles[s], color="0.35", linewidth=1.2,
                      label=f"seed {s}") for s in sorted(set(frame["seed"]))])


def validation_figure(plotted: list[dict], prefix: Path,
                      steps: Mapping[str, int] = PAPER_STEPS) -> None:
    """prefix.pdf, .png and .csv: a panel per metric, a line per run (colour: method, style:
    seed), a dot on the epoch each run's checkpoint holds. `steps`: the validation attacks'
    (config.validation_for), named in the panels' labels."""
    from wscat.report.figures import key_below, plt, save
    from wscat.report.names import method_colours

    panels = [panel for panel in PANELS if any(r["metric"] == panel[0] for r in plotted)]
    methods = list(dict.fromkeys(row["method"] for row in plotted))
    seeds = sorted({row["seed"] for row in plotted})
    colours = method_colours(methods)  # a method's colour is the same in every figure
    styles = {s: ("-", "--", ":", "-.")[i % 4] for i, s in enumerate(seeds)}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.6), squeeze=False)
    for ax, (metric, label, what) in zip(axes[0], panels):
        frame = pd.DataFrame([r for r in plotted if r["metric"] == metric])
        for (method, seed), run in frame.groupby(["method", "seed"], sort=False):
            ax.plot(run["epoch"], run["accuracy"], styles[seed], color=colours[method],
                    linewidth=1.2, label=f"{method}, seed {seed}")
            chosen = run[run["checkpoint"]]
            ax.plot(chosen["epoch"], chosen["accuracy"], "o", color=colours[method])
        ax.set_title(what, fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"validation {label.format(**steps)}")
        ax.grid(color="0.9")
        key = _legend(frame, colours, styles)
        key_below(ax, ncol=min(len(key), 7), handles=key, handlelength=2.5, columnspacing=1.2)
    fig.suptitle("Validation accuracy per epoch (the labelled validation split); "
                 "o: the epoch whose weights each run reports", fontsize=9)
    fig.tight_layout()
    save(fig, prefix, plotted)
