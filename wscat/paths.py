"""Every results path pattern, once: the Snakemake rules, the report and dvc.yaml format from here.

A pattern is a plain string whose `{fields}` are Snakemake wildcards in a rule and `str.format`
fields elsewhere (`fill`). Everything lives under `results/`; `fill(..., root=...)` moves a path
under another folder (the tests' copies, `wscat paper-* --results`). No torch here: the workflow
imports this module while it builds the DAG.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RESULTS = "results"
RESUME_DIR = "resume"  # a run folder's checkpoints while it trains (wscat.training.trainer)

# One trained (dataset, model, method, seed): the key of its model folder, metrics, logs, curves.
RUN = "{dataset}/{model}/{method}/seed{seed}"
RUN_NAMES = ("dataset", "model", "method", "seed")  # what names a run (and its checkpoint)

SPLIT = "results/splits/{dataset}/seed{seed}.npz"
PSEUDO = "results/pseudo/{dataset}/{model}/{labeler}/seed{seed}"
PSEUDO_LABELS = PSEUDO + ".npz"
PSEUDO_ACCURACY = PSEUDO + ".json"  # on the unlabelled part, per class
MODEL_DIR = "results/models/" + RUN  # best.pt, last.pt, train_log.csv, dvclive/
CHECKPOINT = MODEL_DIR + "/{name}.pt"  # name: best (validation-selected) or last
BEST = CHECKPOINT.replace("{name}", "best")
LAST = CHECKPOINT.replace("{name}", "last")
TRAIN_LOG = MODEL_DIR + "/train_log.csv"
DVCLIVE = MODEL_DIR + "/dvclive"
METRICS = "results/metrics/" + RUN + ".json"  # the paper's five attacks and their Mean
EXTRA = "results/metrics/" + RUN + "-extra.json"  # AA-paper, NRF, the gradient-masking checks
VALIDATION = "results/validation/" + RUN + ".json"
CURVES = "results/curves/" + RUN
CURVES_PDF, CURVES_PNG = CURVES + ".pdf", CURVES + ".png"

TABLE = "results/tables/{experiment}"
TABLE_TEX, TABLE_CSV, TABLE_MD = TABLE + ".tex", TABLE + ".csv", TABLE + ".md"
# The paired comparison against WSCAT: so no experiment's name may end in PAIRED (wscat.config)
PAIRED = "-paired"
PAIRED_TEX, PAIRED_CSV = TABLE + PAIRED + ".tex", TABLE + PAIRED + ".csv"
# ... and as a picture (wscat.report.paired_figure): its numbers are the .csv's and the .md's
PAIRED_PDF, PAIRED_PNG = TABLE + PAIRED + ".pdf", TABLE + PAIRED + ".png"
SUMMARY = "results/metrics/{experiment}.json"
# An experiment's robustness curves (wscat.report.robustness_figure): its runs' PGD accuracy
# against eps and steps, from their extra metrics files (`wscat robustness-curves`).
ROBUSTNESS = "results/robustness-curves/{experiment}"
ROBUSTNESS_PDF, ROBUSTNESS_PNG = ROBUSTNESS + ".pdf", ROBUSTNESS + ".png"
ROBUSTNESS_CSV = ROBUSTNESS + ".csv"  # the numbers the figure plots

PAPER = "results/paper/{tier}"  # a tier's tables, companions, figures and index.md
PAPER_TABLE = PAPER + "/{label}"
PAPER_TABLE_TEX, PAPER_TABLE_CSV = PAPER_TABLE + ".tex", PAPER_TABLE + ".csv"
PAPER_COMPARE = PAPER_TABLE + "-vs-paper"  # beside the paper's own numbers
PAPER_COMPARE_TEX, PAPER_COMPARE_CSV = PAPER_COMPARE + ".tex", PAPER_COMPARE + ".csv"
PAPER_FIGURE = PAPER + "/{figure}"
PAPER_FIGURE_PDF, PAPER_FIGURE_PNG = PAPER_FIGURE + ".pdf", PAPER_FIGURE + ".png"
PAPER_FIGURE_CSV = PAPER_FIGURE + ".csv"  # the numbers the figure plots
PAPER_INDEX = PAPER + "/index.md"
# What Fig-similarity and Fig-feature show on one dataset (the analysis step, `wscat analyse`).
ANALYSIS = "results/analysis/{tier}/{figure}/{dataset}.npz"


def log(step: str, key: str) -> str:
    """A job's log: results/logs/{step}/{key}.log (key: e.g. RUN, or one experiment's name)."""
    return f"results/logs/{step}/{key}.log"


def benchmark(step: str, key: str) -> str:
    """A job's `benchmark:` file (wall time, memory): results/benchmarks/{step}/{key}.tsv."""
    return f"results/benchmarks/{step}/{key}.tsv"


def fill(pattern: str, root: str = RESULTS, **fields: object) -> str:
    """`pattern` with its fields filled in, under `root` instead of results/."""
    path = pattern.format(**fields)
    return root + path[len(RESULTS):] if path.startswith(RESULTS + "/") else path


def field(path: str, pattern: str, name: str) -> str:
    """The value of field `name` in `path`, one of `pattern`'s paths (fields hold no '/')."""
    parts, names = path.split("/"), pattern.split("/")
    index = next(i for i, part in enumerate(names) if "{" + name + "}" in part)
    prefix, _, suffix = names[index].partition("{" + name + "}")
    return parts[index][len(prefix): len(parts[index]) - len(suffix)]


@dataclass(frozen=True)
class Run:
    """One trained (dataset, model, method, seed) and the files it has under `root`."""

    dataset: str
    model: str
    method: str
    seed: int

    def _fill(self, pattern: str, root: str, **fields: object) -> str:
        return fill(pattern, root, dataset=self.dataset, model=self.model, method=self.method,
                    seed=self.seed, **fields)

    def metrics(self, root: str = RESULTS) -> str:
        return self._fill(METRICS, root)

    def extra(self, root: str = RESULTS) -> str:
        """AA-paper, NRF and the gradient-masking checks (`wscat evaluate --part extra`)."""
        return self._fill(EXTRA, root)

    def evaluated(self, root: str = RESULTS) -> tuple[str, str]:
        """Both metrics files of a run: the paper's five attacks, then the extras."""
        return self.metrics(root), self.extra(root)

    def model_dir(self, root: str = RESULTS) -> str:
        return self._fill(MODEL_DIR, root)

    def checkpoint(self, root: str = RESULTS, name: str = "best") -> str:
        return self._fill(CHECKPOINT, root, name=name)

    def train_log(self, root: str = RESULTS) -> str:
        return self._fill(TRAIN_LOG, root)

    def validation(self, root: str = RESULTS) -> str:
        return self._fill(VALIDATION, root)

    def curves(self, root: str = RESULTS) -> str:
        return self._fill(CURVES, root)

    def split(self, root: str = RESULTS) -> str:
        return self._fill(SPLIT, root)


def run_of(path: str | Path, pattern: str = BEST) -> tuple[str, Run] | None:
    """The results folder and the Run of `path`, one of `pattern`'s files under any folder (an
    absolute path too); None where `path` is not one."""
    names = pattern.split("/")
    parts = Path(path).parts
    if len(parts) < len(names):
        return None
    fields = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(pattern))
    found = re.fullmatch(fields, "/".join(parts[-len(names):]))
    if found is None or not found["seed"].isdigit():
        return None
    root = str(Path(*parts[:-len(names)], RESULTS))
    return root, Run(found["dataset"], found["model"], found["method"], int(found["seed"]))


def unfinished(path: str | Path) -> bool:
    """Whether a checkpoint path lies in a run folder's resume/: an unfinished training's."""
    return Path(path).parent.name == RESUME_DIR
