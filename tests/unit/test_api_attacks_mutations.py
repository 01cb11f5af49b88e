"""Mutation tests for wscat/api.py (the Python API's functions), wscat/api_checks.py and the
attack modules wscat/attacks/{square,nrf,masking,mode}.py: each test kills hand-made mutants that
went through the unit tests importing them, with expectations from the modules' docstrings,
docs/api.md and first principles, never from the function under test. The API's steps are stood
in for by recorders (what is checked is what each call hands on, returns and refuses); NRF runs on
a 4-channel CNN or a hand-built stack; no training, well under 5 s.

What is checked, and from which fact:
- masking (its docstrings; Carlini et al.'s checks): a rise of exactly the tolerance passes and a
  non-finite step is a rise; the detail says "with more steps" / "with a larger eps"; eps 0
  differs from natural by more than 1e-3 (manifests keep 4 decimals) or when a number is not
  finite, and reports only the attacks run at eps 0; Square may lower accuracy by the tolerance,
  AutoAttack's 0.2 by default, says "(more than the tolerance)" only beyond it and fails, saying
  so, on a number that is not finite; PGD may trail FGSM by exactly the tolerance, and a failure
  says "FGSM is stronger".
- mode: `require_eval` raises the error and message it is given (inference's ValueError);
  `frozen_parameters` stops every gradient inside and restores each flag as it was.
- nrf (its module docstring, Kim et al.'s rule): a 1 x 1 output is no spatial feature map
  (auto: the middle of the others); a model whose parts do not give its logits is not split; the
  threshold M is each example's own largest channel variance, compared with the noise's
  variance (softplus(0)^2 = (ln 2)^2 without a step); `nrf_accuracy` refuses a train-mode model
  and NaN logits under "NRF", counts every batch (at eps 0 the natural accuracy), hands the
  config's ib_steps, ib_lr, ib_beta, layer and steps and the generator on, and the flagged
  fraction is over all (example, channel) pairs.
- square (its module docstring): batch independence is True for one example, False for two, and
  False when batches of 2, about n/2 or n - 1 differ; only an L-inf run of a batch-independent
  model takes the fast loop; `like` copies every setting; the model sees the changed points only,
  a single one in a pair with the next point, the held values kept for the others and left
  unchanged; the images are the library's, bit for bit, on tied whole-number logits until at
  most one point stands, and on images wider than high (the window capped by the shorter side).
- api_checks (docs/api.md "Bad input"): threads given as a numpy integer are an int; bytes are no
  path; a file torch cannot load passes as a checkpoint (its loader says what it is), an .npz of
  other arrays is not a split; uint8 images pass as they are; a checkpoint of another model spec
  is refused; a paper-size model on a CPU asked for by name is not.
- api (its docstrings, docs/api.md): a missing params file names its absolute path, the
  repository's params.yaml and the dict; the defaults (digits, params.yaml, load_model and
  load_exported on the CPU); predict of no images is an empty int64 tensor, and runs on the
  model's device unless one is given; build_model takes the dataset's channels, classes, mean and
  std; train_method keeps a split already there, labels with the model it trains and trains no
  generated-images labeler without generated images; part="extra" reads metrics.json and writes
  metrics-extra.json beside the checkpoint, never over its core= file; an out= that cannot be
  written is refused before any split; the evaluation gets the device picked from `device`.
"""
from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pyautoattack.square import SquareAttack
from torch import nn

from tests.helpers.tiny import ROOT, tiny_params
from wscat import api, api_checks, inference
from wscat.attacks import masking, nrf
from wscat.attacks.mode import frozen_parameters, require_eval
from wscat.attacks.nrf import non_robust_channels, split_model
from wscat.attacks.square import FastSquareAttack, batch_independent
from wscat.checkpoint import CheckpointError
from wscat.config import ConfigError
from wscat.data import load_dataset
from wscat.inference import NonFiniteOutputs
from wscat.models import build_model
from wscat.steps import evaluate, pseudo, split as split_step, train


# --- attacks/masking: the gradient-masking checks -----------------------------------------------

def test_a_rise_of_exactly_the_tolerance_passes_and_a_non_finite_step_is_a_rise() -> None:
    """"must not rise by more than `tolerance` points"; "a step with a number that is not finite
    counts as a rise"."""
    assert masking.falls_monotonically([5, 10], [60.0, 61.0], tolerance=1.0, what="steps")["passed"]
    for accuracies in ([60.0, math.nan], [math.nan, 50.0], [60.0, math.inf]):
        check = masking.falls_monotonically([5, 10], accuracies, tolerance=1.0, what="steps")
        assert not check["passed"], accuracies


def test_the_monotone_check_says_what_grows_in_words() -> None:
    steps = masking.falls_monotonically([5, 10], [60.0, 59.0], tolerance=0.5, what="steps")
    eps = masking.falls_monotonically([0.1, 0.2], [60.0, 59.0], tolerance=0.5, what="eps")
    assert steps["detail"] == "PGD accuracy does not rise with more steps (tolerance 0.5 points)"
    assert eps["detail"] == "PGD accuracy does not rise with a larger eps (tolerance 0.5 points)"


def test_eps_zero_differs_by_more_than_a_thousandth_or_when_not_finite() -> None:
    """Manifests keep 4 decimals: 0.0005 points apart is equal, 0.002 is not; NaN differs."""
    assert masking.eps_zero_is_natural({"PGD": 90.0}, {"PGD": 90.0005})["passed"]
    assert not masking.eps_zero_is_natural({"PGD": 90.0}, {"PGD": 90.002})["passed"]
    assert not masking.eps_zero_is_natural({"PGD": math.nan}, {"PGD": 90.0})["passed"]
    assert not masking.eps_zero_is_natural({"PGD": 90.0}, {"PGD": math.nan})["passed"]


def test_eps_zero_reports_the_natural_accuracy_of_the_attacks_run_at_eps_zero_only() -> None:
    check = masking.eps_zero_is_natural({"PGD": 90.0, "AA": 80.0, "FGSM": 70.0}, {"PGD": 90.0})
    assert check["natural"] == {"PGD": 90.0} and check["at_eps_zero"] == {"PGD": 90.0}


def test_square_may_lower_accuracy_by_the_tolerance_default_0_2_and_not_when_not_finite() -> None:
    """AutoAttack's own threshold, 0.2 points; exactly the tolerance passes; a number that is not
    finite fails and is said to be one."""
    after = {"apgd-ce": 46.0, "apgd-t": 45.0, "fab-t": 45.0}
    assert masking.square_not_better({**after, "square": 44.875})["passed"]      # 0.125
    worse = masking.square_not_better({**after, "square": 44.75})               # 0.25 > 0.2
    assert not worse["passed"] and worse["tolerance"] == 0.2
    assert worse["detail"].endswith("(more than the tolerance)")
    edge = masking.square_not_better({**after, "square": 44.75}, tolerance=0.25)
    assert edge["passed"] and "more than the tolerance" not in edge["detail"]
    assert masking.square_not_better({**after, "square": 45.0})["detail"] == (
        "Square lowers accuracy by 0.00 points after the white-box attacks")
    broken = masking.square_not_better({**after, "apgd-t": math.nan, "square": 45.0})
    assert not broken["passed"] and "(an accuracy is not a finite number)" in broken["detail"]


def test_pgd_may_trail_fgsm_by_the_tolerance_and_no_more() -> None:
    """"PGD must do at least as well as FGSM" within `tolerance` points: exactly the tolerance
    passes; half of it passes; a failure says FGSM is stronger."""
    assert masking.iterative_not_weaker(60.0, 61.0, tolerance=1.0)["passed"]
    assert masking.iterative_not_weaker(60.0, 60.5, tolerance=1.0)["passed"]
    weaker = masking.iterative_not_weaker(60.0, 61.5, tolerance=1.0)
    assert weaker["detail"] == "PGD 61.50% vs FGSM 60.00%: FGSM is stronger"
    assert masking.iterative_not_weaker(60.0, 60.5, tolerance=1.0)["detail"] == (
        "PGD 60.50% vs FGSM 60.00%")


# --- attacks/mode -------------------------------------------------------------------------------

def test_require_eval_raises_the_error_and_message_it_is_given() -> None:
    """wscat.inference asks for a ValueError (bad input: a model in train mode given to predict)."""
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    model.eval()
    model[1].train()
    with pytest.raises(ValueError, match="^call eval$"):
        require_eval(model, error=ValueError, message="call eval")


def test_frozen_parameters_stop_requiring_gradients_then_are_restored_each_as_it_was() -> None:
    """Inside: no parameter requires a gradient, so a library's backward() leaves every .grad
    None; after: each parameter's flag as before (a frozen one stays frozen)."""
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2))
    model[0].weight.requires_grad_(False)
    before = [p.requires_grad for p in model.parameters()]
    x = torch.ones(1, 3, requires_grad=True)
    with frozen_parameters(model):
        assert not any(p.requires_grad for p in model.parameters())
        model(x).sum().backward()
    assert all(p.grad is None for p in model.parameters()) and x.grad is not None
    assert [p.requires_grad for p in model.parameters()] == before


# --- attacks/nrf ---------------------------------------------------------------------------------

class _Stack(nn.Module):
    """classifier(features(normalize(x))) on 1 x 8 x 8 images: features.0 and features.2 output
    8 x 8 maps, features.3 and features.4 1 x 1 ones; `shift` is added to the logits only."""

    def __init__(self, shift: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.normalize = nn.Identity()
        self.features = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(2, 2, 3, padding=1), nn.Conv2d(2, 2, 8),
                                      nn.Conv2d(2, 2, 1))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(2, 3))
        self.shift = shift

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.features(self.normalize(x))
        return f.flatten(1), self.classifier(f) + self.shift


def test_a_one_by_one_map_is_no_spatial_feature_map() -> None:
    """"the middle one of the convolutions and blocks that output a spatial feature map": of
    features.0 and features.2 (8 x 8), auto takes the second; the 1 x 1 outputs are not offered."""
    model = _Stack().eval()
    assert split_model(model, torch.rand(2, 1, 8, 8)).layer == "features.2"
    with pytest.raises(ValueError, match=r"valid: auto, last, features\.0, features\.2$"):
        split_model(model, torch.rand(2, 1, 8, 8), "features.3")


def test_a_model_whose_parts_do_not_give_its_logits_is_not_split() -> None:
    with pytest.raises(ValueError, match="does not reproduce the model's logits"):
        split_model(_Stack(shift=1.0).eval(), torch.rand(2, 1, 8, 8))


def test_the_bottleneck_s_threshold_is_each_example_s_own_largest_variance() -> None:
    """Without a step, sigma = softplus(0) = ln 2, noise variance (ln 2)^2 = 0.48. Example 0's
    channels vary by about 0.01 (all above M: robust); example 1's channel 0 by about 4.3, so M =
    4.3 and both its channels are below it (non-robust). Over the batch (M per channel), example
    0's channel 0 would be non-robust. Example 2's channel 0 varies by 16 * 0.75^2 / 15 = 0.6:
    above (ln 2)^2 but below ln 2 (the noise's scale, not its variance), so non-robust too."""
    sign = torch.tensor([1.0, -1.0]).repeat(8)[:16].reshape(4, 4)
    sign = torch.where(torch.arange(4)[:, None] % 2 == 0, sign, -sign)
    z = torch.stack([torch.stack([0.1 * sign, 0.1 * sign]), torch.stack([2.0 * sign, 0.1 * sign]),
                     torch.stack([0.75 * sign, 0.1 * sign])])
    mask = non_robust_channels(lambda v: v.mean(dim=(2, 3)), z, torch.zeros(3, dtype=torch.long),
                               steps=0, lr=0.1, beta=1.0)
    assert mask.tolist() == [[False, False], [True, True], [True, True]]


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,),
                       width=4).eval()


NRF = {"layer": "features.0", "ib_steps": 3, "ib_lr": 0.05, "ib_beta": 0.02, "weight": 0.5,
       "steps": 4}


def test_nrf_accuracy_counts_every_batch_and_hands_on_the_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At eps 0 the attack leaves every image as it is: the accuracy is the natural one over all
    7 images (batches of 3, 3 and 1). The bottleneck gets ib_steps, ib_lr and ib_beta, the attack
    eps, step_size, `steps` and the generator; the layer is the config's; non_robust_fraction is
    the flagged (example, channel) pairs over all of them: here 2 channels of each example."""
    model = _cnn()
    x = torch.rand(7, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = model(x)[1].argmax(1)
    y[[1, 4, 6]] = (y[[1, 4, 6]] + 1) % 10  # three wrong: 4 of 7 right
    seen: dict[str, list] = {"ib": [], "pgd": []}
    real_pgd = nrf.pgd

    def channels(tail: Any, z: torch.Tensor, labels: torch.Tensor,
                 **kwargs: Any) -> torch.Tensor:
        seen["ib"].append(kwargs)
        mask = torch.zeros(len(z), z.shape[1], dtype=torch.bool)
        mask[:, :2] = True
        return mask

    def attack(objective: Any, xb: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        seen["pgd"].append(kwargs)
        return real_pgd(objective, xb, **kwargs)

    monkeypatch.setattr(nrf, "non_robust_channels", channels)
    monkeypatch.setattr(nrf, "pgd", attack)
    generator = torch.Generator().manual_seed(0)
    got, found = nrf.nrf_accuracy(model, x, y, eps=0.0, step_size=0.0, config=NRF,
                                  batch_size=3, generator=generator)
    assert got == pytest.approx(100.0 * 4 / 7)
    assert found["layer"] == "features.0"
    assert found["channels"] == 4  # the cnn's first block: `width` channels
    assert found["non_robust_fraction"] == 0.5  # 2 of each example's 4
    assert [k["steps"] for k in seen["ib"]] == [3, 3, 3]
    assert {(k["lr"], k["beta"], k["generator"] is generator) for k in seen["ib"]} == {
        (0.05, 0.02, True)}
    assert [(k["eps"], k["step_size"], k["steps"], k["generator"] is generator)
            for k in seen["pgd"]] == [(0.0, 0.0, 4, True)] * 3


def test_nrf_accuracy_refuses_a_train_mode_model_and_non_finite_logits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = torch.rand(2, 1, 8, 8), torch.zeros(2, dtype=torch.long)
    with pytest.raises(RuntimeError, match="eval mode"):
        nrf.nrf_accuracy(_cnn().train(), x, y, eps=0.1, step_size=0.01, config=NRF,
                         batch_size=2, generator=torch.Generator())
    monkeypatch.setattr(nrf, "pgd", lambda objective, xb, **kwargs: torch.full_like(xb, math.nan))
    with pytest.raises(NonFiniteOutputs, match="NRF"):
        nrf.nrf_accuracy(_cnn(), x, y, eps=0.1, step_size=0.01, config=NRF, batch_size=2,
                         generator=torch.Generator())


# --- attacks/square ------------------------------------------------------------------------------

def _logits(size_changes: int | None = None) -> Any:
    """Logits of the first 3 pixels, batch-independent; with `size_changes` = k, a batch of
    exactly k examples gets other numbers (as a kernel chosen by batch size may)."""

    def predict(x: torch.Tensor) -> torch.Tensor:
        out = x.flatten(1)[:, :3].clone()
        return out + 1e-3 if len(x) == size_changes else out

    return predict


def test_batch_independence_is_checked_on_sub_batches_of_the_sizes_the_loop_uses() -> None:
    """One example: nothing to skip (True); two: the pair is the only sub-batch of 2 or more, so
    the library's loop runs (False). Seven examples whose batches of 4 differ are dependent, and
    so are those whose batches of 2 or of 6 differ."""
    x = torch.rand(7, 1, 2, 2, generator=torch.Generator().manual_seed(0))
    assert batch_independent(_logits(), x[:1]) and batch_independent(_logits(), x)
    assert not batch_independent(_logits(), x[:2])
    for size in (2, 4, 6):
        assert not batch_independent(_logits(size), x), size


def _fast(norm: str = "Linf") -> FastSquareAttack:
    return FastSquareAttack(_logits(), norm=norm, n_queries=10, eps=0.1, p_init=0.8,
                            device=torch.device("cpu"))


def test_only_the_linf_run_of_a_batch_independent_model_takes_the_fast_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = torch.rand(5, 1, 2, 2), torch.zeros(5, dtype=torch.long)
    library = _record(monkeypatch, SquareAttack, name="attack_single_run")
    for norm, predict, fast_loop in [("Linf", _logits(), True), ("L2", _logits(), False),
                                     ("Linf", _logits(4), False)]:
        attack = _fast(norm)
        attack.predict = predict
        ours = _record(monkeypatch, attack, name="_linf_run")
        library.clear()
        attack.attack_single_run(x, y)
        assert (len(ours), len(library)) == ((1, 0) if fast_loop else (0, 1)), norm


def test_like_copies_every_setting() -> None:
    square = SquareAttack(_logits(), norm="Linf", n_queries=123, eps=0.25, p_init=0.3,
                          n_restarts=2, seed=7, resc_schedule=False, device=torch.device("cpu"))
    fast = FastSquareAttack.like(square)
    assert type(fast) is FastSquareAttack and vars(fast) == vars(square)


def test_the_model_sees_the_changed_points_only_and_one_of_them_with_a_partner(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's margin_and_loss for every point: computed for the changed ones (one alone:
    in a pair with the next point, so that no batch of one is evaluated), held for the others,
    the held tensors left as they were."""
    attack = _fast()
    seen: list[torch.Tensor] = []

    def margin_and_loss(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(x[:, 0, 0, 0].clone())
        return x[:, 0, 0, 0] * 10, -x[:, 0, 0, 0]

    monkeypatch.setattr(attack, "margin_and_loss", margin_and_loss)
    x = torch.arange(4.0).reshape(4, 1, 1, 1).expand(4, 1, 2, 2).contiguous()
    y = torch.zeros(4, dtype=torch.long)
    held_margin, held_loss = torch.full((4,), 7.0), torch.full((4,), 8.0)

    def run(changed: list[bool]) -> tuple[list[float], list[float]]:
        margin, loss = attack._margin_and_loss_of_changed(x, y, torch.tensor(changed),
                                                          held_margin, held_loss)
        return margin.tolist(), loss.tolist()

    assert run([False] * 4) == ([7.0] * 4, [8.0] * 4) and not seen
    assert run([False, False, False, True]) == ([7.0, 7.0, 7.0, 30.0], [8.0, 8.0, 8.0, -3.0])
    assert seen.pop().tolist() == [3.0, 0.0]  # point 3 and its partner, point 0
    assert run([True, False, True, False]) == ([0.0, 7.0, 20.0, 7.0], [-0.0, 8.0, -2.0, 8.0])
    assert seen.pop().tolist() == [0.0, 2.0]
    assert held_margin.tolist() == [7.0] * 4 and held_loss.tolist() == [8.0] * 4


def _steps(x: torch.Tensor) -> torch.Tensor:
    """Logits in whole numbers (ties and margins of exactly 0 are common), batch-independent."""
    return torch.floor(4 * x.flatten(1)[:, :3])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_square_matches_the_library_on_tied_logits(seed: int) -> None:
    """The loop stops only once every point is fooled (a margin of exactly 0 counts): the same
    images as pyautoattack's SquareAttack, bit for bit, on a model whose margins are often exactly
    0, run until at most one point stands."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(6, 1, 4, 4, generator=g) * 0.4 + 0.3
    y = _steps(x).argmax(1)

    def run(cls: type) -> torch.Tensor:
        return cls(_steps, norm="Linf", n_queries=300, eps=0.3, p_init=0.8, seed=seed,
                   device=torch.device("cpu")).perturb(x, y)

    library, ours = run(SquareAttack), run(FastSquareAttack)
    assert torch.equal(library, ours)
    logits, rows = _steps(library), torch.arange(len(y))
    margin = logits[rows, y] - logits.scatter(1, y[:, None], -math.inf).amax(1)
    assert int((margin <= 0).sum()) >= len(y) - 1  # past the point where one is left
    assert bool((margin == 0).any())  # some fell on a tie


def test_square_matches_the_library_on_images_wider_than_high() -> None:
    """The window's side is capped by the shorter side of the image, as in the library."""
    x = torch.rand(5, 1, 2, 6, generator=torch.Generator().manual_seed(3))
    y = _logits()(x).argmax(1)
    library, ours = (cls(_logits(), norm="Linf", n_queries=100, eps=0.1, p_init=0.8, seed=3,
                         resc_schedule=False,
                         device=torch.device("cpu")).perturb(x, y)
                     for cls in (SquareAttack, FastSquareAttack))
    assert torch.equal(library, ours)
    assert 0 < int((_logits()(library).argmax(1) != y).sum()) < len(y)  # a real contest


# --- api_checks ----------------------------------------------------------------------------------

def test_threads_given_as_a_numpy_integer_are_an_int() -> None:
    """"an int ... as `--threads` takes it": a numpy integer becomes the int it holds."""
    assert type(api_checks.checked_threads(np.int64(2))) is int


def test_bytes_are_no_path() -> None:
    """as_path: "anything else ... refused in one line" (bytes too: Path() would raise a
    TypeError)."""
    with pytest.raises(ValueError, match=r"^split= takes a path \(a str or Path\), not bytes"):
        api_checks.as_path(b"s.npz", "split", "a split")


def test_a_file_of_no_kind_passes_as_a_checkpoint_and_an_npz_of_other_arrays_not_as_a_split(
        tmp_path: Path) -> None:
    """input_file: a file that torch cannot load is wscat.checkpoint's to describe; an intact
    .npz holding none of a split's arrays is named for what it is."""
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01 not a checkpoint")
    assert api_checks.input_file(junk, "checkpoint") == junk
    np.savez(tmp_path / "other.npz", weights=np.arange(3))
    with pytest.raises(ValueError, match=r"not a split; pass split= "):
        api_checks.input_file(tmp_path / "other.npz", "split")


def test_uint8_images_pass_as_they_are() -> None:
    """images_for: uint8 (0..255) is taken as such; only float images must lie in [0, 1]."""
    model = nn.Sequential(nn.Conv2d(1, 2, 3))
    images = torch.full((1, 1, 4, 4), 200, dtype=torch.uint8)
    assert api_checks.images_for(model, images) is images


def test_a_checkpoint_of_another_model_spec_is_refused() -> None:
    """check_run_of: "its model another than theirs" (wscat.checkpoint.check_model)."""
    params = tiny_params(1)
    meta = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 1,
            "model_spec": {"architecture": "cnn", "width": params["models"]["cnn"]["width"] + 1}}
    with pytest.raises(CheckpointError, match="holds model 'cnn'"):
        api_checks.check_run_of(Path("best.pt"), meta, params)


def test_a_paper_size_model_may_train_on_a_cpu_asked_for_by_name(tmp_path: Path) -> None:
    """docs/api.md: a paper-size model (WRN-28-10, 36.5M parameters) trains on a CPU only with
    device="cpu": named, it is not refused."""
    api_checks.check_training(tiny_params(1), "standard", dataset="digits", model="wrn-28-10",
                              seed=1, out_dir=tmp_path / "runs", device=torch.device("cpu"),
                              device_named=True)


# --- api -----------------------------------------------------------------------------------------

Calls = list[tuple[tuple[Any, ...], dict[str, Any]]]


def _record(monkeypatch: pytest.MonkeyPatch, owner: Any, result: Any = None,
            name: str = "run") -> Calls:
    """Stand in for `owner.name`: record its arguments and return `result`."""
    calls: Calls = []
    monkeypatch.setattr(owner, name, lambda *a, **k: calls.append((a, k)) or result)
    return calls


def test_a_missing_params_file_names_the_repository_s_params_and_the_dict() -> None:
    """load_params: "params file not found: ABSOLUTE PATH; give the path of a wscat params.yaml,
    e.g. api.load_params('REPO/params.yaml'), or pass params= a dict with its sections"."""
    with pytest.raises(ConfigError) as error:
        api.load_params("no/such/params.yaml")
    repo_params = str(ROOT / "params.yaml")
    assert str(error.value) == (
        f"params file not found: {Path('no/such/params.yaml').resolve()}; give the path of a "
        f"wscat params.yaml, e.g. api.load_params({repo_params!r}), or pass params= a dict "
        "with its sections")


def test_the_signature_defaults() -> None:
    """The embedded default (digits) and the params.yaml of the folder you run in; load_model and
    load_exported put the model on the CPU unless told (predict runs on the model's device)."""
    assert inspect.signature(api.load_dataset).parameters["name"].default == "digits"
    for call in (api.load_dataset, api.build_model, api.test_set, api.train_method,
                 api.evaluate_checkpoint):
        assert inspect.signature(call).parameters["params"].default == "params.yaml", call
    assert inspect.signature(api.load_model).parameters["device"].default == "cpu"
    assert inspect.signature(api.load_exported).parameters["device"].default == "cpu"


def test_predict_of_no_images_is_an_empty_tensor_of_classes() -> None:
    """Predicted classes are argmax indices (int64), for none as for many."""
    model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,),
                        width=4).eval()
    got = api.predict(model, torch.empty(0, 1, 8, 8))
    assert got.dtype == torch.long and got.shape == (0,)


def test_build_model_takes_the_dataset_s_channels_classes_and_normalisation() -> None:
    """digits: 1 x 8 x 8 grayscale images of 10 classes; the model normalises by the dataset's
    own per-channel mean and std (wscat.data's source), inside."""
    source = load_dataset("digits")
    model = api.build_model("cnn", dataset="digits", params=tiny_params(1)).eval()
    assert model(torch.rand(2, 1, 8, 8))[1].shape == (2, 10)
    assert model.normalize.mean.flatten().tolist() == pytest.approx(list(source.mean))
    assert model.normalize.std.flatten().tolist() == pytest.approx(list(source.std))


def test_train_method_keeps_a_split_that_is_there_and_labels_with_the_model_it_trains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"The split is out_dir/split-seed<seed>.npz (made if missing)": one already there is used,
    not made again; the labeler labels with the model of the call (its run is that model's)."""
    splits = _record(monkeypatch, split_step)
    labels = _record(monkeypatch, pseudo)
    runs = _record(monkeypatch, train, {"best_epoch": 1, "best_score": 0.0})
    out = tmp_path / "runs"
    out.mkdir()
    (out / "split-seed1.npz").write_bytes(b"made earlier")
    api.train_method("wscat", out_dir=out, model="cnn-wide", params=tiny_params(1), device="cpu")
    assert not splits
    assert labels[0][1]["model"] == "cnn-wide" and labels[0][1]["split_path"] == (
        out / "split-seed1.npz")
    assert [k["model"] for _, k in runs] == ["cnn-wide", "cnn-wide"]


def test_a_labeler_finished_with_these_params_is_kept_not_trained_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A second train_method of a method on pseudo-labels (resuming it, or its variant) keeps
    the labeler's run that finished in out_dir/<labeler>/ with these params, as Snakemake keeps
    an up-to-date job; one of other params, or one left unfinished (resume/), is trained (a
    folder of another run is refused before, by check_training)."""
    from wscat.checkpoint import save_checkpoint
    from wscat.workflow import training_fingerprint

    params = tiny_params(1)
    _record(monkeypatch, split_step)
    labels = _record(monkeypatch, pseudo)
    out = tmp_path / "runs"
    best = out / "mt" / "best.pt"

    def finished(at: Path = best, **changed: Any) -> None:
        meta = {"dataset": "digits", "model": "cnn", "method": "mt", "seed": 1,
                "training_fingerprint": training_fingerprint(params, "digits", "cnn", "mt"),
                **changed}
        at.parent.mkdir(parents=True, exist_ok=True)
        save_checkpoint(at, {"ema": {}, "meta": meta})

    def trained() -> list[str]:
        runs = _record(monkeypatch, train, {"best_epoch": 1, "best_score": 0.0})
        api.train_method("wscat", out_dir=out, params=params, device="cpu")
        return [k["method"] for _, k in runs]

    finished()
    assert trained() == ["wscat"]
    assert labels[-1][1]["checkpoint"] == best
    assert f"{out / 'mt'}: mt seed 1 finished with these params: kept" in capsys.readouterr().err
    finished(training_fingerprint="0" * 16)  # other params: trained again
    assert trained() == ["mt", "wscat"]
    finished()
    finished(out / "mt" / "resume" / "last.pt")  # a retraining cut short: it resumes
    assert trained() == ["mt", "wscat"]


def test_dmat_without_generated_images_trains_no_labeler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DMAT's generated_labeler labels its generated images; without any (generated: null, the
    params' default), nothing is labelled and only DMAT trains."""
    params = tiny_params(1)
    assert params["methods"]["dmat"]["generated"] is None
    _record(monkeypatch, split_step)
    runs = _record(monkeypatch, train, {"best_epoch": 1, "best_score": 0.0})
    api.train_method("dmat", out_dir=tmp_path / "runs", params=params, device="cpu")
    assert [(k["method"], k["labeler_checkpoint"]) for _, k in runs] == [("dmat", None)]


@pytest.fixture
def checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A best.pt whose loading gives seed 4's metadata (its checks stood in for), and recorders
    of the split step and the evaluation."""
    meta = {"dataset": "digits", "model": "cnn", "method": "standard", "seed": 4}
    monkeypatch.setattr(inference, "load_model", lambda path, device: (None, dict(meta)))
    monkeypatch.setattr(api, "check_run_of", lambda *args: None)
    path = tmp_path / "run" / "best.pt"
    path.parent.mkdir()
    path.write_bytes(b"")
    return {"path": path, "split": _record(monkeypatch, split_step),
            "evaluate": _record(monkeypatch, evaluate,
                                {"accuracy": {"Natural": 1.0}, "manifest": {}})}


def _core(path: Path, part: str = "core") -> Path:
    path.write_text(json.dumps({"accuracy": {"Natural": 1.0}, "manifest": {}, "part": part}))
    return path


def test_the_extras_read_metrics_json_and_write_metrics_extra_json_beside_the_checkpoint(
        checkpoint: dict[str, Any]) -> None:
    folder = checkpoint["path"].parent
    _core(folder / "metrics.json")
    result = api.evaluate_checkpoint(checkpoint["path"], params=tiny_params(1), part="extra",
                                     device="cpu")
    got = checkpoint["evaluate"][0][1]
    assert (got["part"], got["core_path"], got["out"]) == (
        "extra", folder / "metrics.json", folder / "metrics-extra.json")
    assert result.path == folder / "metrics-extra.json"


def test_the_extras_never_write_over_their_core_file(checkpoint: dict[str, Any]) -> None:
    """A core= file that records part extra passes the output's kind check; as out= too it is
    still the input core=, refused before anything runs."""
    core = _core(checkpoint["path"].parent / "mine.json", part="extra")
    with pytest.raises(ValueError, match="is the input core="):
        api.evaluate_checkpoint(checkpoint["path"], params=tiny_params(1), part="extra",
                                core=core, out=core, device="cpu")
    assert not checkpoint["split"] and not checkpoint["evaluate"]


def test_an_out_that_cannot_be_written_is_refused_before_the_split(
        checkpoint: dict[str, Any]) -> None:
    """docs/api.md "Errors": outputs are checked writable before any attack starts."""
    blocker = checkpoint["path"].parent / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="is a file, not a folder"):
        api.evaluate_checkpoint(checkpoint["path"], params=tiny_params(1),
                                out=blocker / "m.json", device="cpu")
    assert not checkpoint["split"] and not checkpoint["evaluate"]


def test_predict_runs_on_the_model_s_device_unless_one_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """predict: "on the model's device unless `device` is given" (no device: None reaches
    wscat.inference.predict, which keeps the model where it is)."""
    model = build_model("cnn", in_channels=1, num_classes=10, mean=(0.3,), std=(0.38,),
                        width=4).eval()
    calls = _record(monkeypatch, inference, torch.zeros(2, dtype=torch.long), name="predict")
    api.predict(model, torch.rand(2, 1, 8, 8))
    api.predict(model, torch.rand(2, 1, 8, 8), device="cpu")
    assert [args[2] for args, _ in calls] == [None, torch.device("cpu")]


def test_evaluate_checkpoint_hands_the_device_it_picked_to_the_evaluation(
        checkpoint: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """`device`: "auto" unless given; the evaluation runs on the one picked from it."""
    monkeypatch.setattr(api, "pick_device", lambda device, **_: ("picked", device))
    api.evaluate_checkpoint(checkpoint["path"], params=tiny_params(1))
    assert checkpoint["evaluate"][0][1]["device"] == ("picked", "auto")
