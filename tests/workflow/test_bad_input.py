"""Bad input, one case a line: the command, the phrase its one error line must hold. Every case
exits non-zero with exactly one line on stderr, no traceback, and leaves no new or changed file.
`wscat` runs in-process (cli.main) to keep the suite fast; a few cases that need a real process
(torch's pickle warning, Ctrl-C, a non-root user) run `python -m wscat`."""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import bad_input as bad
from tests.conftest import BIN
from tests.workflow.test_workflow import copy_workflow, real_params
from tests.helpers.tiny import tiny_params, write_params
from wscat import cli

SPLIT = "split --dataset digits --seed 1 --out out/s.npz"
TRAIN = "train --dataset digits --model cnn --method standard --seed 1 --split {split} --out-dir out/run"
RST = "train --dataset digits --model cnn --method rst --seed 1 --split s.npz --pseudo {pseudo} --out-dir out/run"
EVALUATE = ("evaluate --dataset digits --model {model} --method standard --seed 1 --split s.npz "
            "--checkpoint {checkpoint} --out out/m.json")
PSEUDO = ("pseudo-label --dataset digits --model {model} --labeler standard --seed 1 --split s.npz "
          "--checkpoint {checkpoint} --out out/p.npz --metrics out/p.json")

X = np.zeros((20, 8, 8, 1), np.uint8)
Y = np.arange(20) % 10

CASES = [  # (id, maker of the bad input or None, command, phrase)
    # params
    ("unknown-key", bad.setting("training.digits.epochz", 3), SPLIT, "epochz"),
    ("wrong-type", bad.setting("training.digits.epochs", "ten"), SPLIT, "training.digits.epochs"),
    ("negative-eps", bad.setting("datasets.digits.eps", -0.1), SPLIT, "datasets.digits.eps"),
    ("eps-above-1", bad.setting("datasets.digits.eps", 2.0), SPLIT, "datasets.digits.eps"),
    ("train-step-above-1", bad.setting("datasets.digits.train_step_size", 1.5), SPLIT, "train_step_size"),
    ("eval-step-above-1", bad.setting("datasets.digits.eval_step_size", 3), SPLIT, "eval_step_size"),
    ("val-fraction-above-1", bad.setting("datasets.digits.val_fraction", 1.5), SPLIT, "val_fraction"),
    ("test-fraction-1", bad.setting("datasets.digits.test_fraction", 1.0), SPLIT, "test_fraction"),
    ("unlabelled-fraction-0", bad.setting("datasets.digits.unlabelled_fraction", 0), SPLIT,
     "unlabelled_fraction"),
    ("warmup-above-1", bad.setting("training.digits.warmup_fraction", 2), SPLIT, "warmup_fraction"),
    ("ema-decay-above-1", bad.setting("training.digits.ema_decay", 1.5), SPLIT, "ema_decay"),
    ("smoothing-1", bad.setting("methods.trades.label_smoothing", 1.0), SPLIT, "label_smoothing"),
    ("val-max-0", bad.setting("datasets.digits.val_max", 0), SPLIT, "val_max"),
    ("train-steps-0", bad.setting("datasets.digits.train_steps", 0), SPLIT, "train_steps"),
    ("epochs-0", bad.setting("training.digits.epochs", 0), SPLIT, "epochs"),
    ("batch-1", bad.setting("training.digits.batch_size", 1), SPLIT, "batch_size"),
    ("pgd-steps-0", bad.setting("evaluation.pgd_steps", 0), SPLIT, "pgd_steps"),
    ("selection-steps-0", bad.setting("validation.cw_steps", 0), SPLIT, "validation.cw_steps"),
    ("reference-not-its-method", bad.setting("experiments.digits.reference", "rlfat"), SPLIT,
     "experiments.digits.reference: 'rlfat' is not one of its methods"),
    ("zero-step-with-eps", bad.setting("datasets.digits.train_step_size", 0), SPLIT,
     "step sizes must be positive"),
    ("unknown-experiment-method", bad.params_edit(
        lambda p: p["experiments"]["digits"]["methods"].append("fgsm-at")), SPLIT, "fgsm-at"),
    ("unknown-base", bad.setting("methods.wscat-self.base", "nope"), SPLIT, "nope"),
    ("unknown-labeler", bad.setting("methods.rst.labeler", "nope"), SPLIT, "nope"),
    ("bad-model-key", bad.setting("models.cnn", {"architecture": "mlp"}), SPLIT, "models.cnn"),
    ("malformed-yaml", bad.text("params.yaml", "a:\n  b: 1\n c: [\n"), SPLIT, "line 3, column 2"),
    ("yaml-not-mapping", bad.text("params.yaml", "- 1\n- 2\n"), SPLIT, "mapping"),
    ("empty-yaml", bad.text("params.yaml", ""), SPLIT, "mapping"),
    ("params-missing", None, SPLIT + " --params nope.yaml", "params file not found"),
    ("params-is-folder", None, SPLIT + " --params run", "--params run is a folder"),
    ("labelled-too-many", bad.setting("datasets.digits.labelled", 5000), SPLIT, "labelled = 5000"),
    ("labelled-not-balanced", bad.setting("datasets.digits.labelled", 305), SPLIT, "multiple"),
    ("labelled-above-class", bad.setting("datasets.digits.labelled", 1420), SPLIT, "class"),
    ("unknown-dataset", None, "split --dataset mnist --seed 1 --out out/s.npz", "unknown dataset 'mnist'"),
    ("unknown-method", None, TRAIN.format(split="s.npz").replace("standard", "madry"),
     "unknown method 'madry'"),
    ("unknown-model", None, TRAIN.format(split="s.npz").replace("cnn", "mlp"), "unknown model 'mlp'"),
    ("puat-never-leaves-pretraining", bad.setting("methods.puat.per_dataset.digits.pretrain_epochs",
                                                  1000),
     TRAIN.format(split="s.npz").replace("standard", "puat"),
     "would never start and it would train as Mean Teacher"),
    ("unknown-labeler-arg", None, PSEUDO.format(model="cnn", checkpoint="run/best.pt").replace(
        "--labeler standard", "--labeler nope"), "unknown labeler 'nope'"),
    # splits
    ("split-missing", None, TRAIN.format(split="nope.npz"), "split file not found"),
    ("split-truncated", bad.truncated("s.npz", "bad.npz"), TRAIN.format(split="bad.npz"),
     "not a wscat split file"),
    ("split-empty", bad.text("bad.npz", b""), TRAIN.format(split="bad.npz"), "not a wscat split file"),
    ("split-text", bad.text("bad.npz", "hello"), TRAIN.format(split="bad.npz"), "not a wscat split file"),
    ("split-keys", bad.npz_edit("s.npz", "bad.npz", lambda a: a.pop("test")),
     TRAIN.format(split="bad.npz"), "not a wscat split file"),
    ("split-float", bad.npz_edit("s.npz", "bad.npz", lambda a: a.update(test=a["test"] + 0.5)),
     TRAIN.format(split="bad.npz"), "integer indices"),
    ("split-out-of-range", bad.npz_edit("s.npz", "bad.npz",
                                        lambda a: a.update(labelled=a["labelled"] + 5000)),
     TRAIN.format(split="bad.npz"), "outside 0..1796"),
    ("split-negative", bad.npz_edit("s.npz", "bad.npz",
                                    lambda a: a.update(unlabelled=a["unlabelled"] - 5000)),
     TRAIN.format(split="bad.npz"), "outside"),
    ("split-test-overlap", bad.npz_edit("s.npz", "bad.npz",
                                        lambda a: a.update(labelled=a["test"][:50])),
     TRAIN.format(split="bad.npz"), "shares images with `test`"),
    ("split-validation-overlap", bad.npz_edit("s.npz", "bad.npz",
                                              lambda a: a.update(validation=a["labelled"][:5])),
     TRAIN.format(split="bad.npz"), "`labelled` shares images with `validation`"),
    ("split-pseudo-overlap", bad.npz_edit("s.npz", "bad.npz",
                                          lambda a: a.update(unlabelled=a["labelled"])),
     TRAIN.format(split="bad.npz"), "`labelled` shares images with `unlabelled`"),
    ("split-twice", bad.npz_edit("s.npz", "bad.npz", lambda a: a.update(
        labelled=np.concatenate([a["labelled"], a["labelled"][-1:]]))),
     TRAIN.format(split="bad.npz"), "more than once"),
    ("split-other-seed", None, TRAIN.format(split="s.npz").replace("--seed 1", "--seed 2"),
     "not of digits seed 2"),
    ("split-out-of-range-evaluate", bad.npz_edit("s.npz", "bad.npz",
                                                 lambda a: a.update(test=a["test"] + 5000)),
     EVALUATE.format(model="cnn", checkpoint="run/best.pt").replace("s.npz", "bad.npz"), "outside"),
    # pseudo-labels
    ("pseudo-missing", None, RST.format(pseudo="nope.npz"), "pseudo-label file not found"),
    ("pseudo-not-passed", None, RST.format(pseudo="p.npz").replace(" --pseudo p.npz", ""),
     "pass --pseudo"),
    ("pseudo-truncated", bad.truncated("p.npz", "bad.npz"), RST.format(pseudo="bad.npz"),
     "not a wscat pseudo-label file"),
    ("pseudo-keys", bad.npz_edit("p.npz", "bad.npz", lambda a: a.pop("pseudo_labels")),
     RST.format(pseudo="bad.npz"), "not a wscat pseudo-label file"),
    ("pseudo-other-split", bad.npz_edit("p.npz", "bad.npz", lambda a: a.update(indices=a["indices"][1:])),
     RST.format(pseudo="bad.npz"), "another split"),
    ("pseudo-label-range", bad.npz_edit("p.npz", "bad.npz",
                                        lambda a: a.update(pseudo_labels=a["pseudo_labels"] + 10)),
     RST.format(pseudo="bad.npz"), "pseudo-labels go up to"),
    ("pseudo-other-labeler", bad.npz_edit("p.npz", "bad.npz",
                                          lambda a: a.update(labeler=np.array("mt"))),
     RST.format(pseudo="bad.npz"), "holds the pseudo-labels of 'mt'"),
    ("pseudo-negative", bad.npz_edit("p.npz", "bad.npz",
                                     lambda a: a.update(pseudo_labels=a["pseudo_labels"] - 10)),
     RST.format(pseudo="bad.npz"), "one class index"),
    # checkpoints
    ("checkpoint-missing", None, EVALUATE.format(model="cnn", checkpoint="nope.pt"), "checkpoint not found"),
    ("checkpoint-truncated", bad.truncated("run/best.pt", "bad.pt"),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "truncated"),
    ("checkpoint-empty", bad.text("bad.pt", b""), EVALUATE.format(model="cnn", checkpoint="bad.pt"),
     "cannot be read"),
    ("checkpoint-text", bad.text("bad.pt", "hello"), EVALUATE.format(model="cnn", checkpoint="bad.pt"),
     "cannot be read"),
    ("checkpoint-foreign", bad.foreign_checkpoint("bad.pt"),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "not a wscat-checkpoint-v1"),
    ("checkpoint-malicious", bad.malicious_checkpoint("bad.pt"),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "cannot be read"),
    ("checkpoint-other-model", bad.checkpoint_edit("bad.pt", bad.other_architecture),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "holds model 'cnn-wide'"),
    ("checkpoint-other-model-asked", None, EVALUATE.format(model="cnn-wide", checkpoint="run/best.pt"),
     "not 'cnn-wide'"),
    ("checkpoint-other-model-pseudo", bad.checkpoint_edit("bad.pt", bad.other_architecture),
     PSEUDO.format(model="cnn", checkpoint="bad.pt"), "holds model 'cnn-wide'"),
    ("checkpoint-weights-misfit", bad.checkpoint_edit("bad.pt", bad.wrong_metadata),
     EVALUATE.format(model="cnn-wide", checkpoint="bad.pt"), "do not fit"),
    ("checkpoint-weights-misfit-pseudo", bad.checkpoint_edit("bad.pt", bad.wrong_metadata),
     PSEUDO.format(model="cnn-wide", checkpoint="bad.pt"), "do not fit"),
    ("checkpoint-no-meta", bad.checkpoint_edit("bad.pt", lambda s: s.pop("meta")),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "no metadata"),
    ("checkpoint-meta-incomplete", bad.checkpoint_edit("bad.pt", lambda s: s["meta"].pop("num_classes")),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "metadata does not describe"),
    ("checkpoint-other-method", None,
     EVALUATE.format(model="cnn", checkpoint="run/best.pt").replace("standard", "trades"), "not trades"),
    # datasets
    ("npz-dataset-missing", bad.toy_dataset("toy.npz"), SPLIT.replace("digits", "toy"), "missing toy.npz"),
    ("npz-dataset-truncated", bad.both(bad.toy_dataset("toy.npz"), bad.text("toy.npz", b"PK\x03\x04")),
     SPLIT.replace("digits", "toy"), "not a usable npz dataset"),
    ("npz-dataset-keys", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset("toy.npz", x_train=X)),
     SPLIT.replace("digits", "toy"), "expected keys"),
    ("npz-dataset-float", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=X.astype(float), y_train=Y, x_test=X, y_test=Y)),
     SPLIT.replace("digits", "toy"), "uint8"),
    ("npz-dataset-labels", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=X, y_train=Y[:5], x_test=X, y_test=Y)),
     SPLIT.replace("digits", "toy"), "integer labels"),
    ("cifar-missing", bad.setting("datasets.cifar10.download", False), SPLIT.replace("digits", "cifar10"),
     "missing data/raw/cifar-10-python.tar.gz"),
    ("cifar-corrupt", bad.text("data/raw/cifar-10-python.tar.gz", "not an archive"),
     SPLIT.replace("digits", "cifar10"), "fails its md5 check"),
    ("cifar100-corrupt", bad.text("data/raw/cifar-100-python.tar.gz", "not an archive"),
     SPLIT.replace("digits", "cifar100"), "fails its md5 check"),
    ("imagenet32-missing", None, SPLIT.replace("digits", "imagenet32"), "missing"),
    ("generated-missing", bad.setting("methods.dmat.generated", "gen.npz"),
     TRAIN.format(split="s.npz").replace("standard", "dmat"), "generated-data file not found"),
    # outputs
    ("out-is-folder", bad.text("out/s.npz/keep", ""), SPLIT, "is a folder"),
    ("out-under-file", bad.text("out", "a file"), SPLIT, "not a folder"),
    ("out-dir-under-file", bad.text("out", "a file"), TRAIN.format(split="s.npz"), "not a folder"),
    ("metrics-under-file", bad.text("out", "a file"),
     EVALUATE.format(model="cnn", checkpoint="run/best.pt"), "not a folder"),
    ("bad-device", None, TRAIN.format(split="s.npz") + " --device tpu", "--device"),
    ("export-metrics-truncated", bad.text("m.json", '{"accuracy": '),
     "export --checkpoint run/best.pt --metrics m.json --out out/e.json", "m.json: not valid JSON"),
    ("export-metrics-other-run", bad.text("m.json", "{}"),
     "export --checkpoint run/best.pt --metrics m.json --out out/e.json", "not of the checkpoint's run"),
    ("export-not-json", None, "export --checkpoint run/best.pt --metrics m.json --out out/e.txt",
     "must name a .json"),
    ("table-metrics-truncated", bad.text("m.json", '{"accuracy": '),
     "table --experiment digits --tex out/t.tex --csv out/t.csv --summary out/t.json m.json",
     "m.json: not valid JSON"),
    ("table-metrics-missing", None,
     "table --experiment digits --tex out/t.tex --csv out/t.csv --summary out/t.json nope.json",
     "metrics file not found"),
    ("table-unknown-experiment", None,
     "table --experiment nope --tex out/t.tex --csv out/t.csv --summary out/t.json nope.json",
     "unknown experiment 'nope'"),
    ("export-metrics-missing", None, "export --checkpoint run/best.pt --metrics nope.json --out out/e.json",
     "nope.json"),
    # an output is never an input (each rule's category: tests/unit/test_bad_input_categories.py)
    ("evaluate-out-is-checkpoint", None, EVALUATE.format(model="cnn", checkpoint="run/best.pt")
     .replace("out/m.json", "run/best.pt"), "is the input --checkpoint"),
    ("evaluate-out-links-to-checkpoint", bad.link("link.pt", "run/best.pt"),
     EVALUATE.format(model="cnn", checkpoint="link.pt").replace("out/m.json", "run/best.pt"),
     "is the input --checkpoint"),
    ("evaluate-out-relative-checkpoint", None, EVALUATE.format(model="cnn", checkpoint="run/best.pt")
     .replace("out/m.json", "out/../run/./best.pt"), "is the input --checkpoint"),
    ("evaluate-core-is-out", bad.text("m.json", "{}"), EVALUATE.format(
        model="cnn", checkpoint="run/best.pt").replace("out/m.json", "m.json") + " --part extra --core m.json",
     "is the input --core"),
    ("pseudo-out-is-split", None, PSEUDO.format(model="cnn", checkpoint="run/best.pt")
     .replace("out/p.npz", "s.npz"), "is the input --split"),
    ("pseudo-two-outputs-one-file", None, PSEUDO.format(model="cnn", checkpoint="run/best.pt")
     .replace("out/p.json", "out/p.npz"), "are the same output"),
    ("split-out-is-dataset", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=bad.images(), y_train=Y, x_test=bad.images(seed=1), y_test=Y)),
     SPLIT.replace("digits", "toy").replace("out/s.npz", "toy.npz"),
     "--out toy.npz holds a dataset archive (x_train, y_train), which `wscat split` would "
     "overwrite"),
    ("split-out-is-params", None, SPLIT.replace("out/s.npz", "params.yaml"), "is the input --params"),
    ("train-out-dir-holds-split", bad.copy("s.npz", "out/run/s.npz"), TRAIN.format(split="out/run/s.npz"),
     "holds the input --split"),
    ("train-out-dir-is-labeler", None, TRAIN.format(split="s.npz").replace("out/run", "run/best.pt")
     + " --labeler-checkpoint run/best.pt", "is the input --labeler-checkpoint"),
    ("export-out-is-metrics", bad.text("m.json", "{}"),
     "export --checkpoint run/best.pt --metrics m.json --out m.json", "is the input --metrics"),
    ("export-weights-are-checkpoint", bad.text("m.json", "{}"),
     "export --checkpoint run/best.pt --metrics m.json --out run/best.json", "is the input --checkpoint"),
    ("table-out-is-metrics", bad.text("m.json", "{}"),
     "table --experiment digits --tex m.json --csv out/t.csv --summary out/t.json m.json",
     "--tex m.json is the input metrics m.json"),  # a positional argument: no --metrics to name
    ("table-metrics-is-folder", None,
     "table --experiment digits --tex out/t.tex --csv out/t.csv --summary out/t.json run",
     "the metrics run is a folder"),
    ("add-dataset-out-is-npz", bad.npz_dataset("toy.npz", x_train=bad.images(), y_train=Y),
     "add-dataset mine toy.npz --out toy.npz", "--out toy.npz is the input npz toy.npz"),
    ("add-dataset-npz-is-folder", None, "add-dataset mine run --out new.yaml",
     "the npz run is a folder"),
    # numbers: finite, and representable
    ("eps-nan", bad.setting("datasets.digits.eps", float("nan")), SPLIT, "datasets.digits.eps: nan"),
    ("lr-inf", bad.setting("training.digits.lr", float("inf")), SPLIT, "training.digits.lr: inf"),
    ("beta-minus-inf", bad.setting("methods.wscat.beta", float("-inf")), SPLIT,
     "methods.wscat.beta: -inf"),
    ("lr-too-large-for-a-float", bad.raw_setting("training.digits.lr", "1.0e+400"), SPLIT,
     "not a finite number"),
    ("epochs-too-large", bad.setting("training.digits.epochs", 2**40), SPLIT,
     "beyond what the code can represent"),
    ("epochs-left-empty", bad.raw_setting("training.digits.epochs", ""), SPLIT,
     "training.digits.epochs: null (an empty value) is not an integer >= 1: give one"),
    # degenerate settings, refused where they are set
    ("val-fraction-0", bad.setting("datasets.digits.val_fraction", 0), SPLIT, "0 validation images"),
    ("labelled-per-batch-above-batch", bad.setting("training.digits.labelled_per_batch", 4096), SPLIT,
     "exceeds batch_size"),
    ("compile-mode-without-compile", bad.setting("training.digits.compile_mode", "reduce-overhead"),
     SPLIT, "compile_mode reduce-overhead needs compile: true"),
    ("compile-mode-unknown", bad.setting("training.digits.compile_mode", "fast"), SPLIT,
     "compile_mode"),
    # degenerate data, refused when read
    ("npz-dataset-one-class", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=bad.images(), y_train=Y * 0, x_test=bad.images(seed=1), y_test=Y * 0)),
     SPLIT.replace("digits", "toy"), "1 class(es)"),
    ("npz-dataset-constant-channel", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=np.concatenate([bad.images(), np.full((20, 8, 8, 1), 7, np.uint8)], -1),
        y_train=Y, x_test=bad.images(shape=(8, 8, 2)), y_test=Y)),
     SPLIT.replace("digits", "toy"), "channel 1 has the same value"),
    ("npz-dataset-channel-first", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=bad.images(shape=(3, 8, 8)), y_train=Y,
        x_test=bad.images(shape=(3, 8, 8)), y_test=Y)), SPLIT.replace("digits", "toy"), "channel-first"),
    ("npz-dataset-text", bad.both(bad.toy_dataset("toy.npz"), bad.text("toy.npz", "x,y\n1,2\n")),
     SPLIT.replace("digits", "toy"), "not an .npz file"),
    ("npz-dataset-object-array", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=np.array([X, X[:3, :4]], dtype=object), y_train=Y)),
     SPLIT.replace("digits", "toy"), "its x_train holds Python objects (dtype=object, e.g. images "
     "of different sizes)"),
    ("npz-dataset-npy", bad.both(bad.toy_dataset("toy.npz"), lambda work: np.save(
        work / "toy.npy", X) or (work / "toy.npy").rename(work / "toy.npz")),
     SPLIT.replace("digits", "toy"), "toy.npz is a single .npy array (np.save), not an .npz archive"),
    ("split-npy", lambda work: np.save(work / "bad.npy", X) or (work / "bad.npy").rename(
        work / "bad.npz"), TRAIN.format(split="bad.npz"),
     "bad.npz is a single .npy array (np.save), not a split: pass --split"),
    ("pseudo-npy", lambda work: np.save(work / "bad.npy", Y) or (work / "bad.npy").rename(
        work / "bad.npz"), RST.format(pseudo="bad.npz"),
     "bad.npz is a single .npy array (np.save), not a pseudo-label file: pass --pseudo"),
    ("checkpoint-npy", lambda work: np.save(work / "bad.npy", X) or (work / "bad.npy").rename(
        work / "bad.pt"), EVALUATE.format(model="cnn", checkpoint="bad.pt"),
     "bad.pt is a single .npy array (np.save), not a checkpoint"),
    ("add-dataset-npy", lambda work: np.save(work / "bad.npy", X) or (work / "bad.npy").rename(
        work / "bad.npz"), "add-dataset mine bad.npz --out new.yaml",
     "bad.npz is a single .npy array (np.save), not an .npz archive"),
    ("add-dataset-object-array", bad.npz_dataset(
        "toy.npz", x_train=np.array([X, X[:3, :4]], dtype=object), y_train=Y),
     "add-dataset mine toy.npz --out new.yaml", "its x_train holds Python objects"),
    ("add-dataset-unlabelled-name", bad.npz_dataset("toy.npz", x_train=bad.images(), y_train=Y),
     "add-dataset digits-unlabelled20 toy.npz --out new.yaml",
     "'digits-unlabelled20' has the form <dataset>-unlabelled<percent>"),
    ("add-dataset-full-name", bad.npz_dataset("toy.npz", x_train=bad.images(), y_train=Y),
     "add-dataset toy-full toy.npz --out new.yaml", "'toy-full' has the form <dataset>-full"),
    ("add-dataset-out-not-yaml", bad.npz_dataset("toy.npz", x_train=bad.images(), y_train=Y),
     "add-dataset mine toy.npz --out new.npz", "--out new.npz does not end in .yaml or .yml"),
    ("npz-dataset-label-beyond-int64", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=bad.images(), y_train=Y.astype(np.uint64) + np.uint64(2**63),
        x_test=bad.images(seed=1), y_test=Y)), SPLIT.replace("digits", "toy"), "not a class index"),
    ("npz-dataset-test-only-class", bad.both(bad.toy_dataset("toy.npz"), bad.npz_dataset(
        "toy.npz", x_train=bad.images(), y_train=Y % 5, x_test=bad.images(seed=1), y_test=Y)),
     SPLIT.replace("digits", "toy"), "which no training image has"),
    # an argument the step would not read: refused, not ignored
    ("labeler-checkpoint-not-read", None, TRAIN.format(split="s.npz")
     + " --labeler-checkpoint run/best.pt", "drop --labeler-checkpoint"),
    ("threads-beyond-the-most", None, TRAIN.format(split="s.npz") + " --threads 100000",
     "argument --threads"),
    ("split-empty-validation", bad.npz_edit("s.npz", "bad.npz", lambda a: a.update(validation=a["validation"][:0])),
     TRAIN.format(split="bad.npz"), "`validation` part is empty"),
    ("split-is-folder", bad.text("dir.npz/keep", ""), TRAIN.format(split="dir.npz"), "is a folder"),
    ("pseudo-is-folder", bad.text("dir.npz/keep", ""), RST.format(pseudo="dir.npz"), "is a folder"),
    ("pseudo-text", bad.text("bad.npz", "1,2,3\n"), RST.format(pseudo="bad.npz"), "not an .npz file"),
    ("split-text-not-npz", bad.text("bad.npz", "1,2,3\n"), TRAIN.format(split="bad.npz"),
     "not an .npz file"),
    ("checkpoint-pickle-of-objects", bad.plain_pickle("bad.pt"),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "Python objects beyond tensors"),
    ("checkpoint-torch-save-of-objects", bad.malicious_checkpoint("bad.pt"),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "Python objects beyond tensors"),
    ("checkpoint-is-folder", None, EVALUATE.format(model="cnn", checkpoint="run"), "is a folder"),
    ("checkpoint-nan-weights", bad.checkpoint_edit("bad.pt", bad.nan_weights),
     EVALUATE.format(model="cnn", checkpoint="bad.pt"), "NaN or infinite"),
    ("checkpoint-nan-weights-pseudo", bad.checkpoint_edit("bad.pt", bad.nan_weights),
     PSEUDO.format(model="cnn", checkpoint="bad.pt"), "NaN or infinite"),
    # the command line
    ("seed-negative", None, SPLIT.replace("--seed 1", "--seed -1"), "argument --seed: -1 is outside"),
    ("seed-too-large", None, SPLIT.replace("--seed 1", "--seed 4294967296"), "argument --seed"),
    ("seed-not-a-number", None, SPLIT.replace("--seed 1", "--seed one"), "argument --seed"),
    ("threads-negative", None, TRAIN.format(split="s.npz") + " --threads -1", "argument --threads"),
    ("threads-0", None, TRAIN.format(split="s.npz") + " --threads 0", "argument --threads"),
    ("argument-missing", None, "split --dataset digits --seed 1", "required: --out"),
    ("argument-unknown", None, SPLIT + " --bogus 3", "unrecognized arguments: --bogus"),
    ("argument-unknown-names-its-step", None, "list-experiments --bogus",
     "wscat list-experiments: error: unrecognized arguments: --bogus"),
    ("argument-misspelt", None, SPLIT.replace("--dataset", "--datset"),
     "required: --dataset; --datset is not an option of `wscat split` (misspelt?)"),
    ("step-unknown", None, "splitt --dataset digits", "invalid choice: 'splitt'"),
]


@pytest.fixture(scope="module")
def ready(tmp_path_factory) -> Path:
    """A work folder with good inputs: params.yaml (1 epoch), s.npz, p.npz and run/best.pt."""
    work = tmp_path_factory.mktemp("ready")
    params = tiny_params(epochs=1)
    write_params(work / "params.yaml", params)
    here = os.getcwd()
    os.chdir(work)
    try:
        assert cli.main(["split", "--dataset", "digits", "--seed", "1", "--out", "s.npz"]) == 0
        assert cli.main(TRAIN.format(split="s.npz").replace("out/run", "run").split()
                        + ["--threads", "1"]) == 0
        unlabelled = np.load("s.npz")["unlabelled"]
        np.savez("p.npz", indices=unlabelled, pseudo_labels=np.arange(len(unlabelled)) % 10)
    finally:
        os.chdir(here)
    return work


@pytest.fixture
def work(ready, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "work"
    shutil.copytree(ready, folder)
    monkeypatch.chdir(folder)
    return folder


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*")}


UNEXPECTED = ": error: unexpected "  # the catch-all's line: an error nobody anticipated (a bug)
UNSAFE_ADVICE = ("allow_pickle", "weights_only", "trust the source")  # numpy's and torch's advice


def one_line_error(command: list[str], phrase: str, work: Path, capsys, code: int = 2) -> str:
    """Run `wscat command` in-process; check the one-line error, its exit code (2: bad input,
    through the anticipated path, not the catch-all) and that nothing was written."""
    before = snapshot(work)
    capsys.readouterr()
    got = cli.main(command)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert got == code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert (UNEXPECTED in lines[0]) == (code == 1), lines[0]
    assert not any(unsafe in lines[0] for unsafe in UNSAFE_ADVICE), lines[0]
    assert phrase in lines[0], lines[0]
    assert snapshot(work) == before, "the failed step left files behind"
    return lines[0]


@pytest.mark.parametrize("maker, command, phrase", [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_bad_input_is_one_line(work, capsys, maker, command, phrase):
    if maker is not None:
        maker(work)
    one_line_error(command.split(), phrase, work, capsys)


# --- outputs that cannot be written: before any work ---------------------------------------

def _refuse(code: int):
    def mkstemp(*args, **kwargs):
        raise OSError(code, os.strerror(code), kwargs.get("dir"))
    return mkstemp


@pytest.mark.parametrize("code, phrase", [(errno.EROFS, "read-only"), (errno.EACCES, "permission denied"),
                                          (errno.ENOSPC, "no space left")])
@pytest.mark.parametrize("command", [SPLIT, TRAIN.format(split="s.npz"),
                                     EVALUATE.format(model="cnn", checkpoint="run/best.pt"),
                                     PSEUDO.format(model="cnn", checkpoint="run/best.pt")],
                         ids=["split", "train", "evaluate", "pseudo-label"])
def test_unwritable_output_fails_before_the_work(work, capsys, monkeypatch, command, code, phrase):
    """The writer's probe fails (as on a read-only, forbidden or full folder): the step stops
    before it loads data, trains or attacks."""
    from wscat import io
    from wscat.steps import evaluate, pseudo, split, train

    monkeypatch.setattr(io.tempfile, "mkstemp", _refuse(code))
    for step in (split, train, evaluate, pseudo):
        monkeypatch.setattr(step, "load_dataset", lambda *a, **k: pytest.fail("work started"))
    one_line_error(command.split(), phrase, work, capsys)


def test_a_nearly_full_disk_is_refused_before_the_work(work, capsys, monkeypatch):
    from wscat import io
    from wscat.steps import evaluate

    class Full:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(io.os, "statvfs", lambda path: Full())
    monkeypatch.setattr(evaluate, "attack_suite", lambda *a, **k: pytest.fail("attack started"))
    one_line_error(EVALUATE.format(model="cnn", checkpoint="run/best.pt").split(), "no space left",
                   work, capsys)


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs (root can here); skip where mounting is not allowed."""
    mounted = []

    def mount(name: str, options: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                                capture_output=True)
        if result.returncode:
            pytest.skip("cannot mount a tmpfs here; the mocked cases above cover this path")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)


def test_read_only_mount(work, capsys, tmpfs):
    ro = tmpfs("ro", "size=1m,ro")
    one_line_error(SPLIT.replace("out/s.npz", f"{ro}/s.npz").split(), "read-only file system",
                   work, capsys)
    line = one_line_error(EVALUATE.format(model="cnn", checkpoint="run/best.pt").replace(
        "out/m.json", f"{ro}/m/m.json").split(), "read-only file system", work, capsys)
    assert "evaluate" in line
    assert not any(ro.iterdir())


def test_full_mount(work, capsys, tmpfs):
    full = tmpfs("full", "size=512k")  # below the free space a step asks for
    one_line_error(TRAIN.format(split="s.npz").replace("out/run", f"{full}/run").split(),
                   "no space left", work, capsys)
    assert not any(full.iterdir())


def test_disk_full_mid_run_keeps_a_resumable_checkpoint(work, capsys, tmpfs, monkeypatch):
    """The disk fills after the first epoch's checkpoint: one line, epoch 1 kept; once space is
    freed the rerun resumes from it and ends as an uninterrupted run."""
    from wscat.training import trainer

    params = tiny_params(epochs=2)
    write_params(work / "params.yaml", params)
    disk = tmpfs("disk", "size=2m")
    filler, filled = disk / "filler", []
    saved = trainer.save_checkpoint

    def save_then_fill(path, state):
        saved(path, state)
        if Path(path).name == "last.pt" and not filled:
            filled.append(path)
            with open(filler, "wb") as handle:  # take every free byte
                try:
                    while True:
                        handle.write(b"\0" * 65536)
                except OSError:
                    pass

    monkeypatch.setattr(trainer, "save_checkpoint", save_then_fill)
    command = TRAIN.format(split="s.npz").replace("out/run", f"{disk}/run").split()
    capsys.readouterr()
    assert cli.main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "no space left" in err[-1] and "Traceback" not in "\n".join(err)
    assert sorted(p.name for p in (disk / "run" / "resume").iterdir()) == ["best.pt", "last.pt"]
    filler.unlink()
    assert cli.main(command) == 0
    assert "resuming standard seed 1 from epoch 1" in capsys.readouterr().err
    assert cli.main(TRAIN.format(split="s.npz").replace("out/run", "straight").split()) == 0
    from wscat.checkpoint import load_checkpoint

    a, b = load_checkpoint(disk / "run" / "last.pt"), load_checkpoint(work / "straight" / "last.pt")
    assert all(bool((a["ema"][k] == b["ema"][k]).all()) for k in a["ema"])


# --- the error path itself --------------------------------------------------------------------

def test_unexpected_error_is_one_line_and_debug_shows_it(work, capsys, monkeypatch):
    from wscat.steps import split

    def boom(*args, **kwargs):
        raise RuntimeError("something nobody expected\nsecond line")

    monkeypatch.setattr(split, "run", boom)
    line = one_line_error(SPLIT.split(), "unexpected RuntimeError: something nobody expected",
                          work, capsys, code=1)
    assert "--debug" in line
    with pytest.raises(RuntimeError):
        cli.main(["--debug", *SPLIT.split()])
    monkeypatch.setenv("WSCAT_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(SPLIT.split())


def test_interrupt_is_one_line(work, capsys, monkeypatch):
    from wscat.steps import split

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(split, "run", interrupted)
    before = snapshot(work)
    assert cli.main(SPLIT.split()) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0]
    assert snapshot(work) == before


def test_outputs_respect_the_umask(work):
    old = os.umask(0o022)
    try:
        assert cli.main(SPLIT.split()) == 0
        assert (work / "out" / "s.npz").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        assert cli.main(SPLIT.replace("out/s.npz", "out/t.npz").split()) == 0
        assert (work / "out" / "t.npz").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


# --- in a real process ------------------------------------------------------------------------

def wscat_process(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wscat", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, **kwargs)


@pytest.mark.slow
def test_pickle_checkpoint_prints_our_line_alone(work):
    bad.plain_pickle("bad.pt")(work)
    result = wscat_process(EVALUATE.format(model="cnn", checkpoint="bad.pt").split(), work)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "cannot be read" in lines[0] and "this ran code" not in result.stdout
    assert not (work / "out").exists()


@pytest.mark.slow
def test_ctrl_c_during_training_is_one_line(work):
    write_params(work / "params.yaml", tiny_params(epochs=200))
    # SIG_DFL: a shell that starts tests in the background makes its children ignore SIGINT.
    process = subprocess.Popen([sys.executable, "-m", "wscat", *TRAIN.format(split="s.npz").split()],
                               cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (work / "out" / "run" / "resume" / "last.pt").exists():  # training has begun
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted" in err.strip().splitlines()[-1]
    assert (work / "out" / "run" / "resume" / "last.pt").is_file()  # the rerun resumes from it


def test_read_only_folder_for_a_non_root_user(capsys):
    """The path a user without root hits: a folder without write permission. Root ignores
    permissions, so as root a forked child becomes `nobody` and runs the command in-process."""
    work = Path("/tmp") / f"wscat-nonroot-{os.getpid()}"  # pytest's tmp_path is root's alone
    work.mkdir(mode=0o755)
    here = os.getcwd()
    try:
        write_params(work / "params.yaml", tiny_params(epochs=1))
        (work / "params.yaml").chmod(0o644)
        (work / "locked").mkdir(mode=0o555)
        os.chdir(work)
        command = SPLIT.replace("out/s.npz", "locked/s.npz").split()
        if os.geteuid() != 0:
            code, err = cli.main(command), capsys.readouterr().err
        else:
            code, err = _as_nobody(command, work / "stderr.txt")
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert "permission denied" in lines[0], lines[0]
        assert not any((work / "locked").iterdir())
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)


def _as_nobody(command: list[str], stderr: Path) -> tuple[int, str]:
    """cli.main(command) in a forked child running as uid/gid 65534; (exit code, its stderr)."""
    handle = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            os.dup2(handle, 2)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            os.setgid(65534)
            os.setuid(65534)
            code = cli.main(command)
        finally:
            os._exit(code)
    os.close(handle)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), stderr.read_text()


# --- the dry run (`snakemake -n`) refuses what the steps would refuse -------------------------

def _dry_run(folder: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), "-n", *extra], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def _workflow(tmp_path: Path, change=None) -> Path:
    params = real_params()
    if change:
        change(params)
    return copy_workflow(tmp_path / "wf", params)


@pytest.mark.slow
@pytest.mark.parametrize("change, phrase", [
    (lambda p: p["datasets"]["digits"].update(labelled=5000), "labelled = 5000"),
    (lambda p: p["datasets"]["cifar10"].update(labelled=60000), "labelled = 60000"),
    (lambda p: p["datasets"]["digits"].update(eps=2.0), "datasets.digits.eps"),
], ids=["digits-labelled", "cifar10-labelled", "eps-above-1"])
def test_dry_run_refuses_what_the_split_step_would(tmp_path, env, change, phrase):
    result = _dry_run(_workflow(tmp_path, change), env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and phrase in lines[0], result.stderr


@pytest.mark.slow
def test_dry_run_checks_a_present_cifar_archive(tmp_path, env):
    folder = _workflow(tmp_path)
    (folder / "data" / "raw").mkdir(parents=True)
    (folder / "data" / "raw" / "cifar-10-python.tar.gz").write_text("not an archive")
    result = _dry_run(folder, env, "--", "results/splits/cifar10/seed1.npz")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "fails its md5 check" in result.stderr.strip().splitlines()[-1], result.stderr


def test_dry_run_reports_malformed_yaml_with_its_line(tmp_path, env):
    folder = _workflow(tmp_path)
    (folder / "params.yaml").write_text("datasets:\n  digits: 1\n x: [\n")
    result = _dry_run(folder, env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and "line 3, column 2" in lines[0], result.stderr


@pytest.mark.slow
def test_configfile_with_fewer_experiments_is_the_whole_config(tmp_path, env):
    folder = _workflow(tmp_path)
    mine = real_params()
    mine["experiments"] = {"digits": mine["experiments"]["digits"]}
    mine.pop("paper")
    write_params(folder / "mine.yaml", mine)
    result = _dry_run(folder, env, "--configfile", "mine.yaml")
    assert result.returncode == 0, result.stderr
    assert "results/tables/digits.tex" in result.stdout
    assert "cifar10" not in result.stdout
    result = _dry_run(folder, env, "--configfile", "mine.yaml", "--config", "foo=bar")
    assert result.returncode != 0, result.stderr
    assert "--config overrides" in result.stderr.strip().splitlines()[-1], result.stderr
