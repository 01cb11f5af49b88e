"""The shared trainer: label hygiene, exact resume after a kill, determinism, forward-pass budget."""
import contextlib
import io

import numpy as np
import pytest
import torch

from tests.helpers.killed import killed_after_first_epoch
from tests.helpers.tiny import ROOT, digits_split, tiny_params
from wscat.checkpoint import load_checkpoint
from wscat.config import RunConfig
from wscat.data.training_data import training_data
from wscat.methods import Batch, StepContext, build_method
from wscat.models import build_model
from wscat.training import train
from wscat.training import trainer as trainer_module
from wscat.progress import progress, time_left
from wscat.training.ema import make_ema, update_ema


@pytest.fixture(scope="module")
def setting():
    params = tiny_params(epochs=2)
    source, split = digits_split()
    return params, source, split


def _run(params, method):
    return RunConfig.from_params(params, dataset="digits", model="cnn", method=method, seed=1)


def _weights(path):
    return load_checkpoint(path)["model"]


def _scrambled(source, split):
    labels = source.labels.clone()
    idx = torch.as_tensor(split.unlabelled)
    labels[idx] = (labels[idx] + 1 + torch.arange(len(idx)) % 9) % 10  # every label changed
    return source.__class__(source.name, source.images, labels, source.num_classes, source.mean,
                            source.std)


@pytest.mark.parametrize("method", ["mt", "wscat"])
def test_unlabelled_true_labels_never_reach_a_loss(tmp_path, setting, method):
    params, source, split = setting
    pseudo = np.random.default_rng(0).integers(0, 10, len(split.unlabelled))
    kind = params["methods"][method]["data"]
    for name, src in (("true", source), ("scrambled", _scrambled(source, split))):
        data = training_data(src, split, kind, pseudo if kind == "pseudo" else None)
        train(_run(params, method), data, tmp_path / name)
    a, b = _weights(tmp_path / "true" / "last.pt"), _weights(tmp_path / "scrambled" / "last.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def _logged_rows(err: str) -> list[str]:
    """The epoch rows a training printed to a stderr that is not a terminal (a job's log)."""
    return [line for line in err.splitlines() if line.startswith("epoch=")]


def _timeless(row: str) -> str:
    return " ".join(part for part in row.split(" | ")[0].split() if not part.startswith("seconds="))


def test_killed_training_resumes_exactly(tmp_path, setting, monkeypatch, capsys):
    params, source, split = setting
    params = tiny_params(epochs=3)
    # The EMA averages from epoch 1 on, so the kill after epoch 2 falls where it holds its own
    # state (with the default 2.5 warm-up epochs it is still a copy, and a resume that drops
    # the EMA would go through).
    params["training"]["digits"]["ema_warmup_epochs"] = 0.5
    run = _run(params, "trades")
    data = training_data(source, split, "labelled", None)
    capsys.readouterr()
    train(run, data, tmp_path / "straight")
    straight_log = _logged_rows(capsys.readouterr().err)

    real_save, saves = trainer_module.save_checkpoint, []

    def save_then_die(path, state):
        real_save(path, state)
        if path.name == "last.pt":
            saves.append(path)
            if len(saves) == 2:
                raise KeyboardInterrupt("killed after epoch 2")

    monkeypatch.setattr(trainer_module, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train(run, data, tmp_path / "killed")
    assert (tmp_path / "killed" / "resume" / "last.pt").is_file()
    assert not (tmp_path / "killed" / "last.pt").exists()
    killed_log = _logged_rows(capsys.readouterr().err)  # epoch 2 died before its line
    monkeypatch.setattr(trainer_module, "save_checkpoint", real_save)
    train(run, data, tmp_path / "killed")
    # The rerun's log (which Snakemake's `>` began afresh) holds every epoch: those done before
    # the kill as resume/last.pt recorded them, the first as the killed run printed it.
    resumed_log = _logged_rows(capsys.readouterr().err)
    assert [_timeless(r) for r in resumed_log] == [_timeless(r) for r in straight_log]
    assert len(resumed_log) == 3 and len(killed_log) == 1
    assert resumed_log[0].split(" | ")[0] == killed_log[0].split(" | ")[0]
    assert [r.split(" | ")[1] for r in resumed_log[:2]] == [
        "1/3 epochs, from resume/last.pt", "2/3 epochs, from resume/last.pt"]
    straight, resumed = load_checkpoint(tmp_path / "straight" / "last.pt"), load_checkpoint(
        tmp_path / "killed" / "last.pt")
    for key in ("model", "ema"):
        assert all(torch.equal(straight[key][k], resumed[key][k]) for k in straight[key])
    assert [r["loss"] for r in straight["history"]] == [r["loss"] for r in resumed["history"]]
    assert not (tmp_path / "killed" / "resume").exists()


def _count_forwards(method_name, params):
    torch.manual_seed(0)
    model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,))
    method = build_method(params["methods"][method_name], feature_dim=model.feature_dim,
                          num_classes=10, image_shape=(1, 8, 8))
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 10, (16,))
    ctx = StepContext(eps=0.1, step_size=0.025, steps=10, generator=torch.Generator().manual_seed(0),
                      ema_model=model, progress=0.0, augment=lambda t: t)
    method.loss(model, Batch(x, x, y), ctx)
    return len(calls)


def test_forward_pass_budget_per_step():
    params = tiny_params()
    # TRADES: 1 clean (eval, attack target) + 10 attack + natural + adversarial = 13, not 23.
    assert _count_forwards("trades", params) == 13
    # WSCAT reuses the natural forward for the attack's target and positives: 12.
    assert _count_forwards("wscat", params) == 12


def _bn_pair():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2))
    ema = make_ema(model)
    model.train()
    model(torch.randn(8, 1, 5, 5) * 3 + 1)  # moves the model's running statistics
    return model, ema


def test_the_ema_copies_or_averages_the_batch_norm_statistics():
    model, ema = _bn_pair()
    before = ema[1].running_mean.clone()
    update_ema(ema, model, 0.75)
    assert torch.equal(ema[1].running_mean, model[1].running_mean)  # copied (the default)
    model, ema = _bn_pair()
    update_ema(ema, model, 0.75, average_buffers=True)
    expected = 0.75 * before + 0.25 * model[1].running_mean
    assert torch.allclose(ema[1].running_mean, expected)
    assert not torch.allclose(ema[1].running_mean, model[1].running_mean)
    assert ema[1].num_batches_tracked.item() == model[1].num_batches_tracked.item() == 1


def test_a_per_method_schedule_is_laid_over_the_datasets():
    from wscat.config import ConfigError, training_for, validate_params

    params = tiny_params(epochs=2)
    params["training"]["digits"]["per_method"] = {"mt": {"epochs": 5, "ema_buffers": "average"}}
    params = validate_params(params)
    assert training_for(params, "digits", "mt")["epochs"] == 5
    assert training_for(params, "digits", "trades")["epochs"] == 2
    assert "per_method" not in training_for(params, "digits", "mt")
    assert _run(params, "mt").training["ema_buffers"] == "average"
    assert "ema_buffers" not in _run(params, "trades").training
    params["training"]["digits"]["per_method"] = {"nope": {"epochs": 5}}
    with pytest.raises(ConfigError, match="per_method: unknown method 'nope'"):
        validate_params(params)
    params["training"]["digits"]["per_method"] = {"mt": {"epochs": 0}}
    with pytest.raises(ConfigError):
        validate_params(params)


def test_the_trainer_compiles_in_the_mode_params_give(tmp_path, setting, monkeypatch):
    """`compile_mode` (per dataset, or per method) reaches torch.compile; without compile: true
    it is refused, and a schedule that gives none compiles in torch's default mode."""
    from wscat.config import ConfigError, validate_params

    params, source, split = setting
    params = tiny_params(epochs=1)
    params["training"]["digits"].update(compile=True)
    params["training"]["digits"]["per_method"] = {"standard": {"compile_mode": "reduce-overhead"}}
    params = validate_params(params)
    seen = []

    def spy(model, *, channels_last, compile, mode="default"):
        seen.append((compile, mode))
        return model  # the eager module: this test is about what is asked, not torch.compile

    monkeypatch.setattr(trainer_module, "prepare_model", spy)
    marks = []  # CUDA graphs: every step marked as one (wscat.training.speed.begin_graph_step)
    monkeypatch.setattr(trainer_module, "begin_graph_step", lambda: marks.append(1))
    data = training_data(source, split, "labelled", None)
    train(_run(params, "standard"), data, tmp_path / "standard")
    steps = len(marks)
    assert steps == trainer_module.iterations_per_epoch(
        data.n_train, params["training"]["digits"]["batch_size"]) > 0
    train(_run(params, "trades"), data, tmp_path / "trades")
    assert seen == [(True, "reduce-overhead"), (True, "default")] and len(marks) == steps
    # Graphs for every method but one: the dataset's mode, one method with compile: false.
    params["training"]["digits"].update(compile_mode="reduce-overhead")
    params["training"]["digits"]["per_method"] = {"mt": {"compile": False}}
    validate_params(params)
    params["training"]["digits"]["compile"] = False  # now nothing compiles: the mode is refused
    with pytest.raises(ConfigError, match=r"training\.digits: compile_mode reduce-overhead "
                                          "needs compile: true"):
        validate_params(params)
    params["training"]["digits"].pop("compile_mode")
    params["training"]["digits"]["per_method"] = {"standard": {"compile_mode": "reduce-overhead"}}
    with pytest.raises(ConfigError, match="per_method.standard: compile_mode reduce-overhead "
                                          "needs compile: true"):
        validate_params(params)
    params["training"]["digits"]["per_method"]["standard"]["compile"] = True
    validate_params(params)


def test_a_jobs_log_says_how_far_the_run_is_and_about_how_long_it_has_left(tmp_path, setting,
                                                                          capsys):
    """Each epoch's log line (stderr not a terminal: a job's log) ends in `| E/N epochs` and,
    before the last, the time left at this process's pace."""
    params, source, split = setting
    params = tiny_params(epochs=3)
    train(_run(params, "standard"), training_data(source, split, "labelled", None), tmp_path)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch=")]
    assert [line.split(" | ")[1] for line in lines] == [
        "1/3 epochs, under a minute left", "2/3 epochs, under a minute left", "3/3 epochs"]


@pytest.mark.parametrize("seconds, said", [(29, "under a minute left"), (31, "about 1 min left"),
                                           (59 * 60, "about 59 min left"),
                                           (3600 + 5 * 60, "about 1 h 05 min left")])
def test_the_time_left_is_said_in_minutes_and_hours(seconds: float, said: str) -> None:
    assert time_left(seconds) == said


def test_the_time_left_leaves_out_the_first_part_once_there_are_others() -> None:
    """The first epoch of a compiled or graphed run holds its compilation: 60 s, then 10 s an
    epoch, with 6 of 10 epochs to go, is one minute left, not three."""
    class Bar:
        disable = True

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        trainer_module._show(Bar(), {"epoch": 4, "loss": 1.0}, 10, [60.0, 10.0, 10.0, 10.0])
    assert err.getvalue() == "epoch=4 loss=1.0 | 4/10 epochs, about 1 min left\n"
    assert progress(1, 10, "shards", [60.0]) == "1/10 shards, about 9 min left"
    assert progress(10, 10, "shards", [60.0]) == "10/10 shards"
    assert progress(3, 10, "shards", []) == "3/10 shards"  # all resumed: no pace yet


@pytest.mark.parametrize("change", ["pseudo-labels", "labeler training", "method code",
                                    "wscat code"])
def test_a_killed_run_starts_afresh_when_what_it_trained_on_changed(tmp_path, setting,
                                                                   monkeypatch, capsys, change):
    """A run killed after an epoch, then run again after its labeler was retrained (other
    pseudo-labels, or another labeler training in the step's meta), its own method's code was
    edited or wscat's own code changed (`snakemake --forcerun train` after a pull, an audit's
    case: the loss of new code continued the old code's epochs, best.pt naming the new
    revision): not resumed (epochs of the old labels or loss kept under the new ones, a workflow
    user's finding), but trained afresh, equal to a run that never saw the old ones."""
    params, source, split = setting
    params = tiny_params(epochs=2)
    meta = {"training_fingerprint": "a" * 16}
    if change == "method code":
        code = tmp_path / "mine.py"
        code.write_text((ROOT / "examples/mart.py").read_text())
        params["methods"]["mine"] = {"objective": f"{code}:Mart", "data": "labelled",
                                     "selection": "last", "lam": 6.0}
        run, data = _run(params, "mine"), training_data(source, split, "labelled", None)
    else:
        pseudo = np.random.default_rng(0).integers(0, 10, len(split.unlabelled))
        run, data = _run(params, "wscat"), training_data(source, split, "pseudo", pseudo)
    killed_after_first_epoch(monkeypatch, lambda: train(run, data, tmp_path / "run", meta=meta))
    if change == "pseudo-labels":
        data = training_data(source, split, "pseudo", (pseudo + 1) % 10)
    elif change == "labeler training":
        meta = {"training_fingerprint": "b" * 16}
    elif change == "method code":
        code.write_text(code.read_text().replace("return loss, {", "return 2 * loss, {"))
        assert "2 * loss" in code.read_text()
    else:
        monkeypatch.setattr(trainer_module, "code_digest", lambda: "f" * 16)
    capsys.readouterr()
    train(run, data, tmp_path / "run", meta=meta)
    said = ("its epoch 1 ran on other wscat code" if change == "wscat code" else
            "it was made with other params, data, labels or method code")
    assert f"ignoring resume/last.pt: {said}" in capsys.readouterr().err
    train(run, data, tmp_path / "fresh", meta=meta)
    again, fresh = (load_checkpoint(tmp_path / name / "last.pt") for name in ("run", "fresh"))
    assert all(torch.equal(again["model"][k], fresh["model"][k]) for k in fresh["model"])
