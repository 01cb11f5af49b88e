"""AutoAttack two ways through pyautoattack: the settings each variant really runs with, seeded
reruns, resumable shards, AutoAttack's own counts read back from its log."""
import pytest
import torch
from torch import nn

from wscat.attacks import autoattack, shards
from wscat.attacks.shards import autoattack_accuracy
from wscat.attacks.square import FastSquareAttack
from wscat.models import LogitsOnly


class Linear(nn.Module):
    """(features, logits) of a fixed random linear classifier on 8x8 images: quick to attack."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(64, num_classes)
        nn.init.normal_(self.fc.weight)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.flatten(1), self.fc(x.flatten(1))


def _model(num_classes: int = 10) -> nn.Module:
    return Linear(num_classes).eval()


def _data(model, n: int = 12):
    """Images the model gets right (its own predictions as labels), so every attack has work."""
    x = torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return x, model(x)[1].argmax(1)


EPS = 0.02  # breaks about half of the points; the rest go through all four attacks


def test_standard_is_the_official_standard_version():
    adversary = autoattack.build(LogitsOnly(_model()), variant="standard", eps=0.1, seed=0,
                                 n_classes=10, device=torch.device("cpu"))
    config = autoattack.settings(adversary)
    assert config["order"] == ["apgd-ce", "apgd-t", "fab-t", "square"]
    assert (config["apgd-ce"]["iterations"], config["apgd-ce"]["restarts"]) == (100, 1)
    assert (config["apgd-t"]["iterations"], config["apgd-t"]["targets"]) == (100, 9)
    assert (config["fab-t"]["iterations"], config["fab-t"]["targets"]) == (100, 9)
    assert (config["square"]["queries"], config["square"]["restarts"]) == (5000, 1)


@pytest.mark.parametrize("num_classes", [10, 100])
def test_paper_runs_ten_iterations_and_all_other_classes(num_classes):
    adversary = autoattack.build(LogitsOnly(_model(num_classes)), variant="paper", eps=0.1,
                                 seed=0, n_classes=num_classes, device=torch.device("cpu"))
    config = autoattack.settings(adversary)
    # The release's third-party AutoAttack (torchattacks' "standard") runs APGD, APGD-T and FAB
    # at 10 iterations, then Square (docs/official-code.md, "Evaluation").
    assert config["order"] == ["apgd-ce", "apgd-t", "fab-t", "square"]
    for attack in ("apgd-ce", "apgd-t", "fab-t"):
        assert config[attack]["iterations"] == 10 and config[attack]["restarts"] == 1
    assert config["apgd-t"]["targets"] == config["fab-t"]["targets"] == num_classes - 1
    # torchattacks' Square: 5,000 queries, one restart, p_init 0.8, its rescaled p schedule
    # (the official standard version turns the rescaling off).
    assert config["square"] == {"queries": 5000, "restarts": 1, "p_init": 0.8,
                                "rescaled_schedule": True}
    assert isinstance(adversary.square, FastSquareAttack)
    # APGD's step-size checkpoints follow the 10 iterations (set in its constructor).
    assert adversary.apgd.n_iter_2 == max(int(0.22 * 10), 1)


def test_the_paper_variant_ends_with_square_on_the_points_left(monkeypatch):
    """Square attacks the points the three white-box attacks left, and its result counts."""
    model = _model()
    x, y = _data(model)
    from pyautoattack.square import SquareAttack

    calls = []
    perturb = SquareAttack.perturb

    def counted(self, x_in, y_in=None):
        calls.append(len(x_in))
        return perturb(self, x_in, y_in)

    monkeypatch.setattr(SquareAttack, "perturb", counted)
    result = autoattack_accuracy(model, x, y, variant="paper", eps=EPS, seed=0, batch_size=50,
                                 shard_size=100)
    assert list(result.after) == ["apgd-ce", "apgd-t", "fab-t", "square"]
    assert calls and calls[0] == round(result.after["fab-t"] * len(x) / 100)
    assert result.after["square"] == result.accuracy <= result.after["fab-t"]


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown AutoAttack variant 'plus'"):
        autoattack.build(LogitsOnly(_model()), variant="plus", eps=0.1, seed=0, n_classes=10,
                         device=torch.device("cpu"))


def test_counts_read_from_the_log_match_our_recount():
    model = _model()
    x, y = _data(model)
    result = autoattack_accuracy(model, x, y, variant="standard", eps=EPS, seed=0,
                                 batch_size=8, shard_size=100)
    assert result.clean == 100.0  # AutoAttack's own count of the points it started from
    assert result.after["square"] == result.accuracy  # its flags = our forward pass
    after = list(result.after.values())
    assert after == sorted(after, reverse=True)
    assert 0 < result.accuracy < 100.0


def shard_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("AutoAttack ")]


def test_shards_resume_after_a_kill_and_give_the_uninterrupted_result(tmp_path, monkeypatch,
                                                                      capsys):
    model = _model()
    x, y = _data(model)
    # eps 0.1 breaks every point with APGD-CE, so each shard is quick.
    kwargs = dict(variant="paper", eps=0.1, seed=0, batch_size=8, shard_size=4)
    capsys.readouterr()
    uninterrupted = autoattack_accuracy(model, x, y, **kwargs)
    assert uninterrupted.n_shards == 3
    assert shard_lines(capsys.readouterr().err) == [  # the log: how far, how long is left
        "AutoAttack paper: shard 1/3 done, under a minute left",
        "AutoAttack paper: shard 2/3 done, under a minute left", "AutoAttack paper: shard 3/3 done"]

    real, calls = autoattack.run_shard, []

    def killed_after_two(*args, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(shards.autoattack, "run_shard", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        autoattack_accuracy(model, x, y, shard_dir=tmp_path, **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aa-paper-00000.json",
                                                          "aa-paper-00001.json"]
    calls.clear()
    monkeypatch.setattr(shards.autoattack, "run_shard", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    capsys.readouterr()
    resumed = autoattack_accuracy(model, x, y, shard_dir=tmp_path, **kwargs)
    assert len(calls) == 1  # only the third shard ran again
    assert resumed == uninterrupted
    assert shard_lines(capsys.readouterr().err) == [
        "AutoAttack paper: shard 1/3 resumed from disk",
        "AutoAttack paper: shard 2/3 resumed from disk", "AutoAttack paper: shard 3/3 done"]

    # A shard made with other settings (here another seed) is not reused.
    calls.clear()
    autoattack_accuracy(model, x, y, shard_dir=tmp_path, **{**kwargs, "seed": 1})
    assert len(calls) == 3


QUICK = dict(variant="paper", eps=0.1, seed=0, batch_size=8, shard_size=4)  # 3 shards of 12


def shards_attacked(monkeypatch) -> list[int]:
    """A list that grows by one for each shard AutoAttack really attacks (not resumed)."""
    real, calls = autoattack.run_shard, []
    monkeypatch.setattr(shards.autoattack, "run_shard",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


def test_a_shard_attacked_in_fp32_is_not_reused_under_bf16_autocast(tmp_path, monkeypatch):
    """evaluation.precision switched after a kill: the bf16 attack runs every shard again, and a
    rerun in fp32 still finds its own shards."""
    model = _model()
    x, y = _data(model)
    autoattack_accuracy(model, x, y, shard_dir=tmp_path, **QUICK)
    calls = shards_attacked(monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autoattack_accuracy(model, x, y, shard_dir=tmp_path, **QUICK)
    assert len(calls) == 3
    calls.clear()
    autoattack_accuracy(model, x, y, shard_dir=tmp_path / "fp32", **QUICK)
    autoattack_accuracy(model, x, y, shard_dir=tmp_path / "fp32", **QUICK)
    assert len(calls) == 3  # the second fp32 call resumed all three


class Scaled(Linear):
    """Linear behind an input scale kept, as wscat's Normalize keeps its mean and std, in a
    non-persistent buffer: not in the state dict."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(scale), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return super().forward(x * self.scale)


def test_the_same_weights_under_another_normalisation_attack_their_own_shards(tmp_path,
                                                                             monkeypatch):
    first, second = Scaled(1.0).eval(), Scaled(0.5).eval()
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(),
                                                 second.state_dict().values()))
    x, y = _data(first)
    autoattack_accuracy(first, x, y, shard_dir=tmp_path, **QUICK)
    calls = shards_attacked(monkeypatch)
    autoattack_accuracy(second, x, y, shard_dir=tmp_path, **QUICK)
    assert len(calls) == 3
