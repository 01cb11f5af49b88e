"""What `wscat add-dataset` prints after writing (wscat.steps.add_dataset.report): the choices
its blocks made, as the file written reads, and a rough time for the table on 2 CPU cores,
scaled from one measured `make demo`."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from wscat.config import evaluation_for, method_for, training_for
from wscat.data.split import validation_per_class
from wscat.steps.add_dataset import NpzSummary
from wscat.workflow import upstream_labelers

WIDTH = 98  # the report's lines, wrapped


def _fraction_of_255(value: float) -> str:
    """A pixel budget as N/255 where it is one (8/255), else the number itself."""
    steps = value * 255
    return f"{round(steps)}/255" if abs(steps - round(steps)) < 1e-6 else f"{value:g}"


@dataclass(frozen=True)
class Counts:
    """The images the split will draw for a dataset (wscat.data.split.make_split's sizes)."""

    pool: int  # to train on: the training images less the held-out test part
    labelled: int  # validation included, as datasets.NAME.labelled counts them
    validation: int
    unlabelled: int
    test: int
    evaluated: int  # the test images the evaluation attacks (evaluation.n_examples)


def counts(summary: NpzSummary, dataset: dict[str, Any], evaluation: dict[str, Any]) -> Counts:
    """The split's sizes from the npz's checks and a written datasets.NAME block."""
    labelled = dataset["labelled"]
    validation = summary.classes * validation_per_class(
        labelled, dataset["val_fraction"], dataset["val_max"], summary.classes)
    test = summary.test + summary.train - summary.pool  # the npz's own, or the held-out part
    cap = evaluation.get("n_examples")
    return Counts(pool=summary.pool, labelled=labelled, validation=validation,
                  unlabelled=summary.pool - labelled, test=test,
                  evaluated=test if cap is None else min(test, cap))


def _upstream(params: dict[str, Any], name: str, methods: list[str]) -> dict[str, dict[str, str]]:
    """{method: the labelers its training reads, by role} (wscat.workflow.upstream_labelers)."""
    return {m: upstream_labelers(method_for(params, m, name)) for m in methods}


def _labelers(params: dict[str, Any], name: str, methods: list[str]) -> dict[str, str]:
    """{method: its labeler} for the experiment's methods that learn from another's labels."""
    return {m: roles["labeler"] for m, roles in _upstream(params, name, methods).items()
            if "labeler" in roles}


def _trained(params: dict[str, Any], name: str, methods: list[str]) -> list[str]:
    """The runs a seed trains: the methods, then the labelers they read that they lack."""
    return list(dict.fromkeys([*methods, *(labeler for roles in _upstream(
        params, name, methods).values() for labeler in roles.values())]))


def _role(method: str, learns: dict[str, str]) -> str:
    """'mt, wscat's labeler,' for a labeler, the name alone otherwise."""
    users = [m for m, labeler in learns.items() if labeler == method]
    return f"{method}, {' and '.join(users)}'s labeler," if users else method


def _dataset_lines(name: str, params: dict[str, Any], summary: NpzSummary) -> list[str]:
    """datasets.NAME: the sizes the split will draw, then the threat model."""
    dataset = params["datasets"][name]
    n = counts(summary, dataset, evaluation_for(params, name))
    channels, height, width = summary.shape
    test = (f"{n.test} test (the npz's own)" if summary.test else
            f"{n.test} test (a stratified {dataset['test_fraction']:.0%} held out)")
    if n.evaluated < n.test:
        test += f", {n.evaluated} of them evaluated (evaluation.n_examples)"
    return [f"datasets.{name}: {height}x{width}x{channels} images, {summary.classes} classes: "
            f"{test}; {n.pool} to train on: {n.labelled} labelled ({n.validation} of them "
            f"validation), {n.unlabelled} unlabelled",
            f"datasets.{name}: eps {_fraction_of_255(dataset['eps'])}; training attack PGD-"
            f"{dataset['train_steps']} of step {_fraction_of_255(dataset['train_step_size'])}; "
            f"the evaluation's attacks step {_fraction_of_255(dataset['eval_step_size'])}"]


def _training_line(name: str, params: dict[str, Any]) -> str:
    """training.NAME: the runs' epochs and batch, and the runs (a labeler) that train longer."""
    training, methods = params["training"][name], params["experiments"][name]["methods"]
    learns = _labelers(params, name, methods)
    other = [f"{_role(m, learns)} {training_for(params, name, m)['epochs']} (per_method.{m})"
             for m in _trained(params, name, methods)
             if training_for(params, name, m)["epochs"] != training["epochs"]]
    return (f"training.{name}: {training['epochs']} epochs a run at batch "
            f"{training['batch_size']}" + "".join(f"; {text}" for text in other))


def _experiment_line(name: str, params: dict[str, Any]) -> str:
    """experiments.NAME: the model, the seeds, the methods and whose labels they learn from."""
    experiment = params["experiments"][name]
    learns = _labelers(params, name, experiment["methods"])
    labelers = ", ".join(f"{labeler} for {m}" for m, labeler in learns.items())
    return (f"experiments.{name}: model {experiment['model']}, seeds "
            f"{', '.join(str(seed) for seed in experiment['seeds'])}; methods "
            f"{', '.join(experiment['methods'])}" + (f" (labelers: {labelers})" if learns else ""))


def chosen(name: str, params: dict[str, Any], summary: NpzSummary) -> list[str]:
    """What add-dataset chose, from `params` as the file written reads: a line a choice, each
    headed by the block to edit."""
    return [*_dataset_lines(name, params, summary), _training_line(name, params),
            _experiment_line(name, params)]


@dataclass(frozen=True)
class Measured:
    """A measured `make demo` (digits: 5 methods of the cnn, 3 seeds) that the cost scales from."""

    seconds: float  # of Snakemake, 2 jobs at a time
    where: str  # the measurement, its file, commit and CPU
    train_share: float  # the training jobs' share of the job-seconds
    share_where: str
    pool: int  # digits' images to train on, and its test images
    test: int
    pixels: int  # 8 x 8
    runs: int  # trainings a seed: the 5 methods (the labelers are among them)
    epochs: int  # their epochs, summed: 4 x 40 + Mean Teacher's 100
    seeds: int
    model: tuple[tuple[str, Any], ...]  # models.cnn as measured


# docs/digits-tier.md's `make demo` at 1efcbfc (2026-11-29; README.md too): 9 min 15 s, 8 min 31 s
# of it Snakemake; benchmarks/results/demo-profile.md (4fdacd8, the same jobs): training 423.9 of
# 938.6 job-seconds. tests/unit/test_add_dataset_summary.py checks these against those files and
# against digits' split and params.yaml's demo.
DEMO = Measured(seconds=8 * 60 + 31, where="8 min 31 s of Snakemake on a 2-core AMD EPYC "
                "(docs/digits-tier.md, commit 1efcbfc)", train_share=423.9 / 938.6,
                share_where="benchmarks/results/demo-profile.md", pool=1438, test=359,
                pixels=8 * 8, runs=5, epochs=4 * 40 + 100, seeds=3,
                model=(("architecture", "cnn"), ("width", 24)))
LONG = 30 * 60  # seconds: beyond it, the cost line says how to cut it
# benchmarks/results/add-dataset-cost.md (benchmarks/add_dataset_cost.py at 9786b40) and
# add-dataset-cost-cifar10-sample.md (2ce1cb9, one seed of three): the rule against builds at
# add-dataset's own defaults; the test checks them against those files.
CHECKED = ("a 700-image digits subset at these defaults, estimated ~4.1 min, took 7 min 4 s "
           "(benchmarks/results/add-dataset-cost.md); 3,000 real CIFAR-10 images (32x32x3), "
           "estimated ~1.6 h a seed, took 34 min 53 s a seed "
           "(benchmarks/results/add-dataset-cost-cifar10-sample.md)")


def cost_seconds(name: str, params: dict[str, Any], summary: NpzSummary) -> float | None:
    """Snakemake's time for results/tables/NAME.tex on 2 CPU cores, scaled from DEMO: its training
    share by images to train on x pixels x epochs, the rest (mostly evaluation) by evaluated test
    images x pixels x runs; None for a model other than the one measured."""
    experiment = params["experiments"][name]
    if params["models"][experiment["model"]] != dict(DEMO.model):
        return None
    n = counts(summary, params["datasets"][name], evaluation_for(params, name))
    pixels = summary.shape[1] * summary.shape[2]
    seeds = len(experiment["seeds"])
    epochs = sum(training_for(params, name, m)["epochs"]
                 for m in _trained(params, name, experiment["methods"]))
    train = (n.pool * pixels * epochs * seeds) / (
        DEMO.pool * DEMO.pixels * DEMO.epochs * DEMO.seeds)
    rest = (n.evaluated * pixels * len(experiment["methods"]) * seeds) / (
        DEMO.test * DEMO.pixels * DEMO.runs * DEMO.seeds)
    return DEMO.seconds * (DEMO.train_share * train + (1 - DEMO.train_share) * rest)


def about(seconds: float) -> str:
    """A duration to two significant digits: '~45 s', '~8.5 min', '~1.3 h'."""
    unit, size = ("s", 1) if seconds < 60 else ("min", 60) if seconds < 3600 else ("h", 3600)
    return f"~{float(f'{seconds / size:.2g}'):g} {unit}"


def cost(name: str, params: dict[str, Any], summary: NpzSummary) -> str:
    """The cost line(s): a rough time for NAME's table on CPU, how it was scaled, and over LONG,
    the ways the project has to cut it."""
    seconds = cost_seconds(name, params, summary)
    if seconds is None:
        model = params["experiments"][name]["model"]
        return (f"cost: no estimate: models.{model} is {params['models'][model]}, and the one "
                f"measurement it would scale, `make demo`, trains {dict(DEMO.model)} "
                f"({DEMO.where})")
    line = (f"cost: {about(seconds)} to build results/tables/{name}.tex on 2 CPU cores. A rough "
            f"scale of one measurement, `make demo` on digits ({DEMO.runs} methods, {DEMO.seeds} "
            f"seeds, {DEMO.epochs} epochs a seed, {DEMO.pool} images to train on and {DEMO.test} "
            f"test images of 8x8): {DEMO.where}. Its training jobs, {DEMO.train_share:.0%} of its "
            f"job time ({DEMO.share_where}), scaled by images to train on x pixels (H x W) x "
            "epochs; the rest by test images x pixels x runs. AutoAttack's part grows with the "
            "test images the models still classify right at the dataset's eps, which no such "
            "scale can know, and a larger image costs the attacks less per pixel, so the build "
            f"can take nearly twice as long or a third of it: {CHECKED}.")
    if seconds <= LONG:
        return line
    return (f"{line}\nto cut it: on a GPU node, add --resources gpu=1 to snakemake (training."
            f"{name}'s precision: docs/speed.md); on more cores, --cores N (N jobs side by side, "
            "one thread each); on a SLURM cluster, --workflow-profile workflow/profiles/slurm or "
            f"slurm-cpu (docs/workflow.md); or fewer epochs (training.{name}), methods or seeds "
            f"(experiments.{name})")


def wrap(line: str, first: str, rest: str) -> str:
    """`line` wrapped at WIDTH, never inside a path or a hyphenated word; its later lines
    indented by 4 (`rest`), so that a reader (or a test) can join them back."""
    return textwrap.fill(line, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False, break_long_words=False)
