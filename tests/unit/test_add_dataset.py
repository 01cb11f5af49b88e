"""`wscat add-dataset`'s parts in-process: the blocks land at the end of their sections with every
other line of params.yaml kept, the defaults follow the data, and a bad npz writes nothing."""
from __future__ import annotations

import difflib
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from wscat import cli
from wscat.config import ConfigError, load_params, method_for, training_for
from wscat.data.sources import archive_status, load_dataset
from wscat.steps import add_dataset

ROOT = Path(__file__).resolve().parents[2]


def pixels(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)


def npz(path: Path, n: int = 400, classes: int = 4, size: int = 32, test: bool = True) -> Path:
    rng = np.random.default_rng(0)
    y = np.arange(n) % classes
    x = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    cut = n * 4 // 5
    parts = dict(x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])
    np.savez(path, **(parts if test else dict(x_train=x, y_train=y)))
    return path


def test_blocks_go_to_the_end_of_their_sections_and_nothing_else_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the repository root, where params.yaml lies and steps run
    params = tmp_path / "params.yaml"
    original = (ROOT / "params.yaml").read_text()
    params.write_text(original)
    add_dataset.run(params, "rgb", npz(tmp_path / "rgb.npz"))
    old, new = original.splitlines(), params.read_text().splitlines()
    changes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    assert {tag for tag, *_ in changes} == {"equal", "insert"}  # every old line kept, in order
    inserts = [new[j1:j2] for tag, _, _, j1, j2 in changes if tag == "insert"]
    # datasets, training, experiments, and methods.mt.per_dataset (the teacher's decays)
    assert len(inserts) == 4 and all(line.startswith("  ") for block in inserts for line in block)
    load_params(params)  # valid
    loaded = yaml.safe_load(params.read_text())  # as written (load_params adds the sweeps)
    assert list(loaded["experiments"])[-1] == list(loaded["datasets"])[-1] == "rgb"
    assert list(loaded["training"])[-1] == "rgb"
    # From the data: 80 training images a class -> 8 labelled a class; 32x32 -> shift 4
    dataset = loaded["datasets"]["rgb"]
    assert dataset["labelled"] == 32 and dataset["augment"]["crop_padding"] == 4
    assert "test_fraction" not in dataset and dataset["path"] == "rgb.npz"
    assert loaded["training"]["rgb"]["batch_size"] == 128 and loaded["training"]["rgb"]["ema_decay"] == 0.9


def test_no_test_part_holds_a_fraction_out(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    out = add_dataset.run(params, "mine", npz(tmp_path / "mine.npz", test=False),
                          out=tmp_path / "other.yaml")
    assert params.read_text() == (ROOT / "params.yaml").read_text()  # --out: the input untouched
    assert yaml.safe_load(out.read_text())["datasets"]["mine"]["test_fraction"] == 0.2
    # its header says so, not "N training and 0 test images"
    assert "no test part (a stratified 20% of them is held out below as the test set)" in \
        out.read_text() and " and 0 test images" not in out.read_text()


def test_without_a_test_part_the_pool_is_what_the_split_leaves(tmp_path: Path) -> None:
    """7 images a class, no test part: the split holds out round(7 x 0.2) = 1 a class, so 6 stay
    to split, enough (MIN_PER_CLASS); add-dataset once counted floor(7 x 0.8) = 5 and refused."""
    from wscat.data import make_split

    labels = np.arange(28) % 4
    np.savez(tmp_path / "d.npz", x_train=pixels((28, 8, 8, 1)), y_train=labels)
    summary = add_dataset.inspect("mine", tmp_path / "d.npz")
    assert summary.min_per_class == 6
    split = make_split("mine", labels, num_classes=4, seed=1, test_fraction=0.2, labelled=20,
                       val_fraction=0.2, val_max=2000)
    assert np.bincount(labels[split.test], minlength=4).tolist() == [1] * 4  # 6 a class stay


def test_insert_refuses_a_flow_mapping() -> None:
    with pytest.raises(ConfigError, match="block mapping"):
        add_dataset.insert("datasets: {}\n", "datasets", ["x:", "  y: 1"])


@pytest.mark.parametrize(("make", "mentions"), [
    (lambda p: np.savez(p, x_train=np.zeros((40, 8, 8), np.float32), y_train=np.arange(40) % 4),
     "float32"),
    (lambda p: np.savez(p, x_train=pixels((40, 3, 8, 8)), y_train=np.arange(40) % 4),
     "channel-first"),
    (lambda p: np.savez(p, x_train=pixels((8, 8, 8, 1)), y_train=np.arange(8) % 4),
     "needs at least 6"),
    (lambda p: np.savez(p, x_train=pixels((40, 8, 8, 1)), y_train=np.arange(40) % 4,
                        x_test=pixels((4, 8, 8, 1))), "no y_test beside x_test; expected keys "
     r"x_train, y_train \(required\) and x_test, y_test \(optional, together"),
    (lambda p: np.savez(p, x_train=pixels((40, 8, 8, 1))),  # the optional pair is not "missing"
     r"no y_train; expected keys x_train, y_train \(required\) and x_test, y_test \(optional"),
], ids=["float", "channel-first", "too-few", "half-test-part", "x-train-only"])
def test_a_bad_npz_writes_nothing(tmp_path: Path, make, mentions: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    make(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match=mentions):
        add_dataset.run(params, "bad", tmp_path / "bad.npz")
    assert params.read_text() == (ROOT / "params.yaml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.npz", "params.yaml"]


@pytest.mark.parametrize("where", ["under-the-root", "beside-the-out-file"])
def test_out_elsewhere_stores_a_path_the_steps_find(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    where: str) -> None:
    """--out in another folder: the path is read relative to the current folder (the repository
    root, where the steps and Snakemake run), never to the folder of the file written."""
    root, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    (root / "data").mkdir(parents=True)
    elsewhere.mkdir()
    params = root / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    data = npz((root / "data" if where == "under-the-root" else elsewhere) / "mine.npz", n=100)
    monkeypatch.chdir(root)
    out = add_dataset.run(Path("params.yaml"), "mine", data.relative_to(root)
                          if where == "under-the-root" else data, out=elsewhere / "other.yaml")
    assert out == elsewhere / "other.yaml" and params.read_text() == (ROOT / "params.yaml").read_text()
    entry = load_params(out)["datasets"]["mine"]
    assert entry["path"] == ("data/mine.npz" if where == "under-the-root" else str(data.resolve()))
    assert archive_status("mine", entry) is None  # Snakemake's dry-run check
    loaded = load_dataset("mine", entry)  # as the split step reads it (md5 checked)
    assert loaded.train_size == 80 and loaded.num_classes == 4


@pytest.mark.parametrize("file", ["my #1.npz", "a: b.npz", "tab\tx.npz", "[x].npz", "*x.npz"])
def test_a_path_yaml_would_misread_is_quoted(tmp_path: Path, file: str) -> None:
    """Before, the path went in plain: `my #1.npz` was read back as `my` (the rest a comment),
    so the split found no file; `a: b.npz` stopped on the temporary file's YAML error; a tab
    wrote a file that PyYAML's own loader (add-dataset's report) cannot read."""
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    data = npz(tmp_path / file, n=100)
    add_dataset.run(params, "mine", data)
    entry = load_params(params)["datasets"]["mine"]
    assert entry["path"] == str(data.resolve())
    assert yaml.safe_load(params.read_text())["datasets"]["mine"]["path"] == entry["path"]
    assert load_dataset("mine", entry).num_classes == 4  # md5 checked


def cli_error(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    """`wscat add-dataset bad PATH` in-process with warnings as errors: its one stderr line."""
    (path.parent / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a printed warning would be a second line
        code = cli.main(["add-dataset", "bad", str(path), "--params",
                         str(path.parent / "params.yaml")])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2 and len(lines) == 1 and not captured.out, captured.err
    assert (path.parent / "params.yaml").read_text() == (ROOT / "params.yaml").read_text()
    return lines[0]


@pytest.mark.parametrize("test", [False, True], ids=["no-test-part", "empty-test-part"])
def test_an_empty_npz_gets_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    test: bool) -> None:
    empty = dict(x_train=np.zeros((0, 8, 8, 1), np.uint8), y_train=np.zeros(0, np.int64))
    np.savez(tmp_path / "empty.npz", **empty, **(dict(x_test=empty["x_train"],
                                                      y_test=empty["y_train"]) if test else {}))
    assert "x_train is empty" in cli_error(capsys, tmp_path / "empty.npz")


def test_an_empty_test_part_gets_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """x_test present but with no images: every accuracy would be 0 / 0, so it is refused (the
    split step reads the npz the same way), naming the way to a held-out test set."""
    x = pixels((200, 8, 8, 1))
    np.savez(tmp_path / "t.npz", x_train=x, y_train=np.arange(200) % 10, x_test=x[:0],
             y_test=np.zeros(0, np.int64))
    line = cli_error(capsys, tmp_path / "t.npz")
    assert "x_test is empty" in line and "test_fraction" in line, line


def test_a_test_label_beyond_the_training_classes_blames_y_test(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = pixels((200, 8, 8, 1))
    np.savez(tmp_path / "t.npz", x_train=x[:160], y_train=np.arange(160) % 10, x_test=x[160:],
             y_test=np.arange(40) % 11)  # y_test holds 10; y_train 0..9
    line = cli_error(capsys, tmp_path / "t.npz")
    assert "y_test" in line and "class 10" in line and "0..9" in line, line
    assert "training images have no class" not in line


@pytest.mark.parametrize("form", ["crlf", "symlink"])
def test_the_edit_keeps_line_ends_and_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            form: str) -> None:
    """A CRLF params file kept its lines only as LF, and a symbolic link was replaced by a
    regular file: now every old line is kept byte for byte and the link stays a link."""
    monkeypatch.chdir(tmp_path)
    original = (ROOT / "params.yaml").read_bytes()
    real = tmp_path / "real.yaml"
    real.write_bytes(original.replace(b"\n", b"\r\n") if form == "crlf" else original)
    params = real
    if form == "symlink":
        params = tmp_path / "params.yaml"
        params.symlink_to(real.name)
    add_dataset.run(params, "rgb", npz(tmp_path / "rgb.npz"))
    written = real.read_bytes()
    if form == "crlf":
        assert written.count(b"\n") == written.count(b"\r\n")  # no bare LF
        old = original.replace(b"\n", b"\r\n").split(b"\r\n")
    else:
        assert params.is_symlink() and params.resolve() == real.resolve()
        old = original.split(b"\n")
    new = written.split(b"\r\n" if form == "crlf" else b"\n")
    changes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    assert {tag for tag, *_ in changes} == {"equal", "insert"}  # every old line kept, in order
    assert "rgb" in yaml.safe_load(written.decode())["datasets"]


# --- Mean Teacher's teacher on the new dataset: CIFAR's horizons in epochs --------------------

def rule(cifar_decay: float, steps: int) -> float:
    """params.yaml's methods.mt rule: CIFAR's decay at 391 steps an epoch averages over
    1 / ((1 - d) * 391) epochs; the same horizon at `steps` an epoch."""
    return 1 - 1 / (1 / ((1 - cifar_decay) * 391) * steps)


@pytest.mark.parametrize(("images", "steps", "near"), [
    # 14452 training images, 280 of them validation (144 labelled a class, 20%): 14172 to train
    # on, the proxy's 111 steps at batch 128
    (18065, 111, (0.965, 0.9965)),
    (1797, 12, (0.68, 0.968)),  # sklearn digits' size, no test part: 12 steps
], ids=["proxy-like", "digits-like"])
def test_the_teacher_keeps_cifars_horizons_in_epochs(tmp_path: Path, images: int, steps: int,
                                                     near: tuple[float, float]) -> None:
    """Before: the trainer's EMA was scaled to the data but the teacher kept CIFAR's per-step
    0.99 / 0.999, which at 12 steps an epoch average over 8 / 83 epochs (the audit's digits-like
    npz: pseudo-labels 77% against 96% with the rule's decays)."""
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    data = npz(tmp_path / "mine.npz", n=images, classes=10, size=8, test=images != 1797)
    add_dataset.run(params, "mine", data)
    loaded = load_params(params)  # the whole file validates
    assert f"{steps} steps an epoch" in "".join(add_dataset.blocks(
        "mine", "mine.npz", "0" * 32, add_dataset.inspect("mine", data), loaded)["training"])
    written = yaml.safe_load(params.read_text())["methods"]["mt"]["per_dataset"]["mine"]
    assert set(written) == {"teacher_decay", "teacher_decay_late"}  # the labeler's 100 epochs:
    knobs = method_for(loaded, "mt", "mine")  # methods.mt's ramp-up of 30 kept
    assert knobs["rampup_epochs"] == 30 and knobs["consistency"] == 50.0
    for got, cifar, close in zip((knobs["teacher_decay"], knobs["teacher_decay_late"]),
                                 (0.99, 0.999), near, strict=True):
        assert abs((1 - got) / (1 - rule(cifar, steps)) - 1) < 0.05, (got, rule(cifar, steps))
        assert abs(got - close) < 0.011, got
    if steps == 111:
        assert (written["teacher_decay"], written["teacher_decay_late"]) == (0.965, 0.9965)
    text = params.read_text()
    assert "1 - 1/(horizon x steps)" in text and f"at {steps} steps," in text  # the rule, stated


@pytest.mark.parametrize(("cifar", "steps", "decay"), [
    (0.99, 391, 0.99), (0.999, 391, 0.999),  # CIFAR-10 itself: methods.mt's own
    (0.99, 111, 0.965), (0.999, 111, 0.9965),  # the proxy: params.yaml's entry
    (0.99, 12, 0.67), (0.999, 12, 0.967),  # digits' 12 steps
    (0.99, 2, 0.0), (0.999, 2, 0.8)])  # under a step of memory: the student itself
def test_teacher_decay_follows_the_rule(cifar: float, steps: int, decay: float) -> None:
    assert add_dataset.teacher_decay(cifar, steps) == decay


def test_a_decay_of_0_says_the_teacher_is_the_student() -> None:
    """At 2 steps an epoch the early decay is 0 (a memory under one step): the comment says what
    that means, and none is written where no decay is 0."""
    params = load_params(ROOT / "params.yaml")
    short = add_dataset.teacher_entry("mine", 2, add_dataset.MT_LABELER_EPOCHS, params)
    assert short[-1].startswith("mine: {teacher_decay: 0.0, teacher_decay_late: 0.8")
    assert short[-2] == ("# teacher_decay 0: the horizon is under one step at 2 steps an epoch, "
                         "so the teacher is the student itself (no averaging) while it applies")
    longer = add_dataset.teacher_entry("mine", 111, add_dataset.MT_LABELER_EPOCHS, params)
    assert not any("student itself" in line for line in longer)


def test_a_labeler_of_other_epochs_keeps_the_ramp_ups_share(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(add_dataset, "EPOCHS", 20)  # the labeler: 50 epochs, not methods.mt's 100
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    add_dataset.run(params, "mine", npz(tmp_path / "mine.npz"))
    loaded = load_params(params)
    assert training_for(loaded, "mine", "mt")["epochs"] == 50
    assert method_for(loaded, "mt", "mine")["rampup_epochs"] == 15  # 30 of 100 -> 15 of 50


def test_a_params_file_without_per_dataset_gets_one(tmp_path: Path) -> None:
    text = (ROOT / "params.yaml").read_text()
    start = text.index("    per_dataset:\n      # Fixed a priori: 0.99")
    end = text.index("\n  rst:\n")
    params = tmp_path / "params.yaml"
    params.write_text(text[:start] + text[end + 1:])
    assert "per_dataset" not in yaml.safe_load(params.read_text())["methods"]["mt"]
    add_dataset.run(params, "mine", npz(tmp_path / "mine.npz"))
    assert set(load_params(params)["methods"]["mt"]["per_dataset"]) == {"mine"}


def test_the_speed_switches_cite_docs_speed(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    add_dataset.run(params, "mine", npz(tmp_path / "mine.npz"))
    text = params.read_text()
    assert '(README, "Speed")' not in text and "docs/speed.md" in text.split("  mine:")[2]
    assert (ROOT / "docs/speed.md").is_file()


# --- --out: a new file, or the params file itself -----------------------------------------------

def test_an_existing_out_is_refused_and_kept(tmp_path: Path) -> None:
    params, other = tmp_path / "params.yaml", tmp_path / "other.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    other.write_text("precious: true\n")
    with pytest.raises(OSError, match="other.yaml exists") as refused:
        add_dataset.run(params, "mine", npz(tmp_path / "mine.npz"), out=other)
    assert "--params" in str(refused.value) and "new file" in str(refused.value)
    assert other.read_text() == "precious: true\n"
    assert params.read_text() == (ROOT / "params.yaml").read_text()


@pytest.mark.parametrize("form", ["same-path", "symlink"])
def test_out_may_be_the_params_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    form: str) -> None:
    """--out naming --params is the default in-place edit, spelled out."""
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    out = params
    if form == "symlink":
        out = tmp_path / "link.yaml"
        out.symlink_to(params.name)
    written = add_dataset.run(params, "mine", npz(tmp_path / "mine.npz"), out=out)
    assert written.resolve() == params.resolve() and "mine" in load_params(params)["datasets"]
    assert not params.is_symlink() and (form != "symlink" or out.is_symlink())


def cli_add(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
            ) -> tuple[int, str, str]:
    """`wscat add-dataset mine mine.npz EXTRA...` in-process: (exit status, stdout, stderr)."""
    data = npz(tmp_path / "mine.npz")
    code = cli.main(["add-dataset", "mine", str(data), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_refuses_an_existing_out_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (tmp_path / "o2.yaml").write_text((ROOT / "params.yaml").read_text() + "# mine\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, out, err = cli_add(tmp_path, capsys, "--out", "o2.yaml")
    assert code == 2 and not out and len(err.splitlines()) == 1, err
    assert "o2.yaml" in err and "--params" in err, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "mine.npz"} == {
        k: v for k, v in before.items() if k != "mine.npz"}


def test_cli_takes_out_equal_to_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "o3.yaml").write_text((ROOT / "params.yaml").read_text())
    code, out, err = cli_add(tmp_path, capsys, "--params", "o3.yaml", "--out", "o3.yaml")
    assert code == 0, err
    assert "mine" in load_params(tmp_path / "o3.yaml")["datasets"]


@pytest.mark.parametrize("how", [
    ["--params", "o3.yaml"], ["--out", "o3.yaml"], ["--params", "sub/params.yaml"]])
def test_the_next_step_names_the_file_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              how: list[str]) -> None:
    """Before: `--params o3.yaml` (no --out) printed `snakemake -n -- ...` without --configfile,
    which reads ./params.yaml and finds no experiment 'mine'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for name in ("params.yaml", "o3.yaml", "sub/params.yaml"):
        if name != "o3.yaml" or how[0] == "--params":
            (tmp_path / name).write_text((ROOT / "params.yaml").read_text())
    code, out, err = cli_add(tmp_path, capsys, *how)
    assert code == 0, err
    assert f"next: snakemake -n --configfile {how[1]} -- results/tables/mine.tex" in out, out
    assert out.startswith("added datasets.mine, training.mine, experiments.mine and "
                          "methods.mt.per_dataset.mine to "), out  # every entry it wrote


def test_the_next_step_for_params_yaml_here_needs_no_configfile(tmp_path: Path) -> None:
    here = Path.cwd()
    assert add_dataset.next_step("mine", here / "params.yaml") == (
        "snakemake -n -- results/tables/mine.tex")
    assert add_dataset.next_step("mine", Path("params.yaml")) == (
        "snakemake -n -- results/tables/mine.tex")
    other = tmp_path / "o3.yaml"
    assert add_dataset.next_step("mine", other) == (
        f"snakemake -n --configfile {other} -- results/tables/mine.tex")


def test_the_next_step_quotes_a_path_with_a_space(tmp_path: Path) -> None:
    """Before: `--configfile /x/my params.yaml`, which the shell splits in two."""
    other = tmp_path / "my params.yaml"
    assert add_dataset.next_step("mine", other) == (
        f"snakemake -n --configfile '{other}' -- results/tables/mine.tex")
