"""What `wscat add-dataset` prints after writing: the defaults it chose, read back from the file
written (so the echo cannot disagree with it), and a rough cost scaled from the measured demo."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from wscat import cli
from wscat.config import load_params, training_for
from wscat.data import make_split
from wscat.steps import add_dataset, add_dataset_summary
from wscat.steps.add_dataset import NpzSummary

ROOT = Path(__file__).resolve().parents[2]


def write_npz(path: Path, n: int = 300, size: int = 8, test: bool = False) -> Path:
    """`n` grey `size` x `size` images of 4 classes; without a test part unless `test`."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n, size, size, 1), dtype=np.uint8)
    y = np.arange(n) % 4
    cut = n * 4 // 5
    np.savez(path, **({"x_train": x[:cut], "y_train": y[:cut], "x_test": x[cut:],
                       "y_test": y[cut:]} if test else {"x_train": x, "y_train": y}))
    return path


def added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
          **npz: int | bool) -> tuple[str, dict]:
    """`wscat add-dataset mine mine.npz` in a folder with the real params.yaml: (what it
    printed, with wrapped lines joined, and the params file as written)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    write_npz(tmp_path / "mine.npz", **npz)
    assert cli.main(["add-dataset", "mine", "mine.npz"]) == 0
    out = capsys.readouterr().out.replace("\n    ", " ")  # wrapped lines joined
    return out, yaml.safe_load((tmp_path / "params.yaml").read_text())


def line(out: str, head: str) -> str:
    """The printed lines that start with `head`, joined."""
    return " | ".join(text.strip() for text in out.splitlines() if text.strip().startswith(head))


def minutes(out: str) -> float:
    """The cost line's estimate, in minutes."""
    number, unit = re.search(r"^cost: ~([\d.]+) (s|min|h) ", out, re.M).groups()
    return float(number) * {"s": 1 / 60, "min": 1, "h": 60}[unit]


def test_the_summary_is_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Before, add-dataset printed one line naming the blocks and the next command; what they
    chose was only in params.yaml."""
    out, params = added(tmp_path, monkeypatch, capsys)
    dataset, training = params["datasets"]["mine"], params["training"]["mine"]
    experiment = params["experiments"]["mine"]
    # The sizes are those the split step draws from the written block
    with np.load(tmp_path / "mine.npz") as data:
        labels = data["y_train"]
    split = make_split("mine", labels, num_classes=4, seed=1, test_fraction=dataset[
        "test_fraction"], labelled=dataset["labelled"], val_fraction=dataset["val_fraction"],
        val_max=dataset["val_max"])
    pool = len(split.labelled) + len(split.validation) + len(split.unlabelled)
    assert (f"datasets.mine: 8x8x1 images, 4 classes: {len(split.test)} test (a stratified "
            f"{dataset['test_fraction']:.0%} held out); {pool} to train on: {dataset['labelled']} "
            f"labelled ({len(split.validation)} of them validation), {len(split.unlabelled)} "
            "unlabelled") in line(out, "datasets.mine:")
    eps = line(out, "datasets.mine: eps")
    assert (f"eps {round(dataset['eps'] * 255)}/255; training attack PGD-{dataset['train_steps']}"
            f" of step {round(dataset['train_step_size'] * 255)}/255; the evaluation's attacks "
            f"step {round(dataset['eval_step_size'] * 255)}/255") in eps
    assert line(out, "training.mine:") == (
        f"training.mine: {training['epochs']} epochs a run at batch {training['batch_size']}; mt, "
        f"wscat's labeler, {training['per_method']['mt']['epochs']} (per_method.mt)")
    assert line(out, "experiments.mine:") == (
        f"experiments.mine: model {experiment['model']}, seeds "
        f"{', '.join(map(str, experiment['seeds']))}; methods "
        f"{', '.join(experiment['methods'])} (labelers: standard for rst, mt for wscat)")
    assert out.startswith("added datasets.mine, training.mine, experiments.mine and "
                          "methods.mt.per_dataset.mine to params.yaml (commented: edit them there)")
    assert out.rstrip().endswith("next: snakemake -n -- results/tables/mine.tex")


def test_the_summary_reads_the_file_not_a_constant(tmp_path: Path) -> None:
    """An edit of the written blocks shows in the echo: it holds no second copy of a default."""
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    written = add_dataset.run(params, "mine", write_npz(tmp_path / "mine.npz"))
    before = add_dataset.report("mine", written)
    edited = yaml.safe_load(params.read_text())
    edited["training"]["mine"]["epochs"] = 7
    edited["datasets"]["mine"]["labelled"] = 40
    edited["experiments"]["mine"].update(seeds=[4], methods=["trades"])
    params.write_text(yaml.safe_dump(edited, sort_keys=False))
    after = add_dataset.report("mine", written)
    assert "40 epochs a run" in before and "7 epochs a run" in after
    assert "40 labelled (8 of them validation), 200 unlabelled" in after.replace("\n    ", " ")
    assert "seeds 4; methods trades\n" in after
    assert minutes(after) < minutes(before)


def test_the_cost_grows_with_the_images_and_their_pixels(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    for folder in "abc":
        (tmp_path / folder).mkdir()
    small, _ = added(tmp_path / "a", monkeypatch, capsys)
    more, _ = added(tmp_path / "b", monkeypatch, capsys, n=1200)
    bigger, _ = added(tmp_path / "c", monkeypatch, capsys, n=1200, size=28, test=True)
    assert minutes(small) < minutes(more) < minutes(bigger)
    for out in (small, more, bigger):  # the measurement it scales, named
        assert "8 min 31 s of Snakemake on a 2-core AMD EPYC (docs/digits-tier.md, commit " \
               "1efcbfc)" in out and "(benchmarks/results/demo-profile.md)" in out
    # Over half an hour it says how to cut it, with what the project has
    assert minutes(more) < 30 < minutes(bigger)
    assert "to cut it" not in more and "to cut it: on a GPU node, add --resources gpu=1" in bigger
    assert "--workflow-profile workflow/profiles/slurm or slurm-cpu" in bigger
    assert (ROOT / "workflow/profiles/slurm").is_dir() and (ROOT / "workflow/profiles/slurm-cpu"
                                                            ).is_dir()


def summary_of(pool: int, test: int, size: int) -> NpzSummary:
    """An npz without a test part: `pool` images to train on, `test` held out."""
    return NpzSummary(train=pool + test, test=0, shape=(1, size, size), classes=10,
                      min_per_class=pool // 10, pool=pool)


def test_digits_own_sizes_give_the_measured_time_and_the_rule_is_linear() -> None:
    """The demo's own blocks and digits' sizes give the measurement itself; the training part
    grows with images to train on, pixels and epochs, the rest with test images and pixels."""
    demo, cost = add_dataset_summary.DEMO, add_dataset_summary.cost_seconds
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    digits = summary_of(demo.pool, demo.test, 8)
    assert cost("digits", params, digits) == pytest.approx(demo.seconds)
    train, rest = demo.seconds * demo.train_share, demo.seconds * (1 - demo.train_share)
    assert cost("digits", params, summary_of(2 * demo.pool, demo.test, 8)) == pytest.approx(
        2 * train + rest)
    assert cost("digits", params, summary_of(demo.pool, 3 * demo.test, 8)) == pytest.approx(
        train + 3 * rest)
    assert cost("digits", params, summary_of(demo.pool, demo.test, 16)) == pytest.approx(
        4 * demo.seconds)
    params["training"]["digits"]["epochs"] = 20  # 4 x 20 + the labeler's 100 of 260
    assert cost("digits", params, digits) == pytest.approx(train * 180 / 260 + rest)
    params["evaluation"]["n_examples"] = demo.test // 2  # only these are attacked
    assert cost("digits", params, digits) == pytest.approx(
        train * 180 / 260 + rest * (demo.test // 2) / demo.test)


def test_another_model_gets_no_estimate() -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["experiments"]["digits"]["model"] = "wrn-16-4"
    digits = summary_of(add_dataset_summary.DEMO.pool, add_dataset_summary.DEMO.test, 8)
    assert add_dataset_summary.cost_seconds("digits", params, digits) is None
    assert add_dataset_summary.cost("digits", params, digits).startswith(
        "cost: no estimate: models.wrn-16-4 is {'architecture': 'wideresnet', 'depth': 16, "
        "'width': 4}, and the one measurement it would scale, `make demo`, trains "
        "{'architecture': 'cnn', 'width': 24} (8 min 31 s of Snakemake")
    params["experiments"]["digits"]["model"] = "cnn"  # the same name, another width
    params["models"]["cnn"]["width"] = 16
    assert add_dataset_summary.cost_seconds("digits", params, digits) is None


def test_the_measurement_is_the_one_the_files_record() -> None:
    """DEMO's numbers are those of the files it names, and of the demo it measured: digits'
    split, params.yaml's experiments.digits, training.digits and models.cnn."""
    from wscat.data.sources import load_dataset

    demo = add_dataset_summary.DEMO
    tier = (ROOT / "docs/digits-tier.md").read_text()
    row = next(text for text in tier.splitlines()
               if text.startswith("| `make demo`, commit 1efcbfc"))
    assert "8 min 31 s of Snakemake" in row and demo.seconds == 8 * 60 + 31
    assert "(AMD EPYC, 2 cores)" in " ".join(tier.split("| command |")[0].split())
    profile = (ROOT / "benchmarks/results/demo-profile.md").read_text()
    assert "| train | 15 | 423.9 |" in profile and "| all | 40 | 938.6 |" in profile
    assert demo.train_share == 423.9 / 938.6
    params = load_params(ROOT / "params.yaml")
    experiment, training = params["experiments"]["digits"], params["training"]["digits"]
    assert len(experiment["methods"]) == demo.runs and len(experiment["seeds"]) == demo.seeds
    assert sum(training_for(params, "digits", m)["epochs"]
               for m in experiment["methods"]) == demo.epochs == 4 * training["epochs"] + 100
    assert params["models"][experiment["model"]] == dict(demo.model)
    data = load_dataset("digits", params["datasets"]["digits"])
    assert tuple(data.image_shape) == (1, 8, 8) and demo.pixels == 64
    split = make_split("digits", data.labels.numpy(), num_classes=10, seed=1, test_fraction=0.2,
                       labelled=100, val_fraction=0.2, val_max=2000)
    assert len(split.test) == demo.test
    assert len(split.labelled) + len(split.validation) + len(split.unlabelled) == demo.pool


def test_the_check_against_a_build_is_the_one_the_file_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The cost line names the two builds it was checked against, with their files' numbers."""
    page = (ROOT / "benchmarks/results/add-dataset-cost.md").read_text()
    checked = add_dataset_summary.CHECKED
    estimate = re.search(r"estimated (~\S+ \S+), took (\d+ min \d+ s)", checked)
    assert estimate and f"cost line: **{estimate.group(1)}**" in page
    assert f"results/tables/mini.tex`: **{estimate.group(2)}**" in page
    assert "700 digits to train on and 175 test images" in page and "700-image" in checked
    page = (ROOT / "benchmarks/results/add-dataset-cost-cifar10-sample.md").read_text()
    estimate = re.search(r"estimated (~\S+ \S+) a seed, took (\d+ min \d+ s) a seed", checked)
    assert estimate and f"share of one seed of 3: **{estimate.group(1)}**" in page
    assert re.search(rf"seed 1's metrics files \(`[^`]+`\): \*\*{estimate.group(2)}\*\*", page)
    assert "2000 images to train on and 1000 test images of 32x32x3" in page
    assert "3,000 real CIFAR-10 images (32x32x3)" in checked
    out, _ = added(tmp_path, monkeypatch, capsys)
    assert f"so the build can take nearly twice as long or a third of it: {checked}." in out


@pytest.mark.parametrize(("seconds", "said"), [(45, "~45 s"), (511, "~8.5 min"), (3599, "~60 min"),
                                               (4 * 3600 + 600, "~4.2 h")])
def test_about(seconds: float, said: str) -> None:
    assert add_dataset_summary.about(seconds) == said
