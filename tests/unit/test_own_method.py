"""Your own method (objective FILE.py:Class, wscat.own_method): the example MART against a loop of
its paper's Eq. 8, the checks that stop a bad one before anything runs, and what makes an edit of
its file a change of the method (docs/methods.md, "Your own method")."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.tiny import ROOT, tiny_params, write_params
from wscat.config import ConfigError, load_params, method_for
from wscat.methods import build_method, knobs
from wscat.report.names import is_adversarial
from wscat.workflow import training_fingerprint, training_inputs

MART = "examples/mart.py:Mart"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with the example's file where params.yaml names it."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "mart.py").write_text((ROOT / "examples" / "mart.py").read_text())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def with_mart(**entry: object) -> dict:
    params = tiny_params()
    params["methods"]["mart"] = {"objective": MART, "data": "labelled", "selection": "cw",
                                 "lam": 6.0, **entry}
    params["experiments"]["digits"]["methods"].append("mart")
    return params


def checked(folder: Path, params: dict) -> dict:
    return load_params(write_params(folder / "params.yaml", params))


def test_mart_loss_is_eq_8_of_its_paper() -> None:
    """BCE(p(x'), y) + lam * KL(p(x) || p(x')) * (1 - p_y(x)), each averaged over the samples
    with a label, against a loop over the samples written from the paper's equation."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from mart import mart_loss
    finally:
        sys.path.remove(str(ROOT / "examples"))
    generator = torch.Generator().manual_seed(0)
    natural = torch.randn(6, 4, generator=generator, dtype=torch.float64) * 2
    adversarial = torch.randn(6, 4, generator=generator, dtype=torch.float64) * 2
    labels = torch.tensor([0, 3, -1, 2, 1, -1])
    loss, bce, kl = mart_loss(natural, adversarial, labels, lam=6.0)
    bces, kls = [], []
    for i, y in enumerate(labels.tolist()):
        if y < 0:
            continue
        p = [math.exp(v) for v in natural[i].tolist()]
        q = [math.exp(v) for v in adversarial[i].tolist()]
        p = [v / sum(p) for v in p]
        q = [v / sum(q) for v in q]
        bces.append(-math.log(q[y]) - math.log(1 - max(q[k] for k in range(4) if k != y)))
        kls.append(sum(p[k] * math.log(p[k] / q[k]) for k in range(4)) * (1 - p[y]))
    assert bce.item() == pytest.approx(sum(bces) / 4, rel=1e-9)
    assert kl.item() == pytest.approx(sum(kls) / 4, rel=1e-9)
    assert loss.item() == pytest.approx(sum(bces) / 4 + 6.0 * sum(kls) / 4, rel=1e-9)


def test_an_own_method_builds_with_its_knobs_variants_and_overrides(here: Path) -> None:
    params = with_mart()
    params["methods"]["mart-3"] = {"base": "mart", "lam": 3.0,
                                   "per_dataset": {"digits": {"lam": 2.0}}}
    params = checked(here, params)
    assert knobs(MART) == {"lam": False}
    shapes = {"feature_dim": 16, "num_classes": 10, "image_shape": (1, 8, 8)}
    assert build_method(method_for(params, "mart", "digits"), **shapes).lam == 6.0
    assert build_method(method_for(params, "mart-3"), **shapes).lam == 3.0
    assert build_method(method_for(params, "mart-3", "digits"), **shapes).lam == 2.0
    assert is_adversarial(method_for(params, "mart"))


SIGNATURES = ("import typing\nfrom wscat.methods import Method\n"
              "class Mart(Method):\n"
              "    def __init__(self, {}) -> None:\n"
              "        super().__init__()\n"
              "    def loss(self, model, batch, ctx):\n"
              "        raise NotImplementedError\n")
BAD_FILES = {
    "plain.py": ("class Mart:\n    pass\n", "is not a subclass of wscat.methods.Method"),
    "broken.py": ("x = 1\nclass Mart(:\n", "does not import: SyntaxError"),
    "raises.py": ("raise RuntimeError('no GPU here')\n",
                  "does not import: RuntimeError: no GPU here (raises.py line 1)"),
    "abstract.py": ("from wscat.methods import Method\nclass Mart(Method):\n    pass\n",
                    "does not define loss(model, batch, ctx)"),
    "base.py": ("from wscat.methods import Method as Mart\n", "is wscat's base class"),
    "pipeline.py": (SIGNATURES.format("lam: float = 6.0, selection: str = 'cw'"),
                    "takes 'selection', a key the pipeline reads"),
    "positional.py": (SIGNATURES.format("lam: float = 6.0, /"), "takes 'lam' by position only"),
    "kwargs.py": (SIGNATURES.format("**knobs: float"), "its **kwargs are not passed"),
    "typed.py": (SIGNATURES.format("weight: float = 6.0, mode: typing.Literal['a', 'b'] = 'a'"),
                 None),
}


@pytest.mark.parametrize("change, needle", [
    (lambda e: e.update(lamb=3.0), "examples/mart.py:Mart takes no knob 'lamb'; its constructor "
                                   "takes: lam"),
    (lambda e: e.update(objective="examples/nope.py:Mart"), "examples/nope.py: no such file"),
    (lambda e: e.update(objective="examples/mart.py:Mort"), "defines no class Mort; its methods: "
                                                            "Mart"),
    (lambda e: e.update(objective="examples/mart"),
     "or FILE.py:Class (your own method's file and class: examples/mart.py:Mart)"),
    (lambda e: e.update(lam="six"), "methods.mart.lam: 'six' is not of type 'number'"),
    *[(lambda e, f=f: e.update(objective=f"{f}:Mart"), needle)
      for f, (_, needle) in BAD_FILES.items() if needle],
    (lambda e: e.update(feature_dim=3), "'feature_dim' is set by the model and data"),
    (lambda e: (e.pop("lam"), e.update(objective="typed.py:Mart", weight=True)),
     "weight: True is not a number (its constructor's annotation: float)"),
    (lambda e: (e.pop("lam"), e.update(objective="typed.py:Mart", mode="c")),
     "mode: 'c' is not one of 'a', 'b'"),
    (lambda e: (e.pop("lam"), e.update(objective="typed.py:Mart", mode=["a"])),
     "mode: ['a'] is not one of"),
])
def test_a_bad_own_method_is_one_line_before_anything_runs(here: Path, change, needle) -> None:
    for name, (text, _) in BAD_FILES.items():
        (here / name).write_text(text)
    params = with_mart()
    change(params["methods"]["mart"])
    with pytest.raises(ConfigError) as error:
        checked(here, params)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_a_required_knob_left_out_is_named(here: Path) -> None:
    (here / "needs.py").write_text(
        "from wscat.methods import Method\n"
        "class Needs(Method):\n"
        "    adversarial = False\n"
        "    def __init__(self, weight: float, feature_dim: int) -> None:\n"
        "        super().__init__()\n"
        "    def loss(self, model, batch, ctx):\n"
        "        raise NotImplementedError\n")
    params = with_mart(objective="needs.py:Needs")
    params["methods"]["mart"].pop("lam")
    with pytest.raises(ConfigError, match=r"needs.py:Needs needs 'weight' \(its constructor has "
                                          r"no default for it\)"):
        checked(here, params)
    params["methods"]["mart"]["weight"] = 0.5
    loaded = checked(here, params)
    assert knobs("needs.py:Needs") == {"weight": True}  # feature_dim: the model's, not a knob
    assert not is_adversarial(method_for(loaded, "mart"))  # its class says so


def test_a_built_in_method_still_takes_only_its_own_knobs(here: Path) -> None:
    params = with_mart()
    params["methods"]["trades"]["weight"] = 1.0
    with pytest.raises(ConfigError, match=r"methods\.trades: Additional properties are not "
                                          r"allowed \('weight' was unexpected\)"):
        checked(here, params)


def test_an_edit_of_its_code_is_a_change_of_the_method(here: Path) -> None:
    """The SHA-256 of the file and of the modules of yours it imports is in the method's
    training params: an edit of either changes its training fingerprint (so Snakemake retrains
    it, and `wscat table` refuses its older metrics) and no other method's; they are inputs of
    its training job."""
    (here / "examples" / "scale.py").write_text("SCALE = 1.0\n")
    (here / "shared").mkdir()
    (here / "shared" / "__init__.py").write_text("")
    (here / "shared" / "terms.py").write_text("import scale\nWEIGHT = scale.SCALE\n")
    mart = here / "examples" / "mart.py"
    mart.write_text(mart.read_text() + "import numpy\nfrom shared.terms import WEIGHT\n")
    params = checked(here, with_mart())
    assert training_inputs(params, "digits", "cnn", "mart", "1") == {"method_code": [
        "examples/mart.py", "examples/scale.py", "shared/__init__.py", "shared/terms.py"]}
    fingerprints = []
    for edited in (None, "examples/scale.py", "shared/terms.py", "examples/mart.py"):
        if edited is not None:
            with open(here / edited, "a") as handle:
                handle.write("# a comment is an edit too\n")
        fingerprints.append({m: training_fingerprint(params, "digits", "cnn", m)
                             for m in ("mart", "trades")})
    assert len({f["mart"] for f in fingerprints}) == 4  # each edit: another method
    assert len({f["trades"] for f in fingerprints}) == 1


OWN_ERRORS = (
    "import torch\n"
    "from wscat.methods import Method\n"
    "class Raises(Method):\n"
    "    def __init__(self, gamma: float = 1.0) -> None:\n"
    "        super().__init__()\n"
    "        if gamma > 5:\n"
    "            raise ValueError('gamma must be at most 5')\n"
    "    def loss(self, model, batch, ctx):\n"
    "        raise RuntimeError('my own bug')\n"
    "class Returns(Method):\n"
    "    def __init__(self, stats: dict | None = None, grad: bool = True) -> None:\n"
    "        super().__init__()\n"
    "        self.stats, self.grad = stats or {}, grad\n"
    "    def loss(self, model, batch, ctx):\n"
    "        one = torch.ones((), requires_grad=self.grad)\n"
    "        return one * 2, {k: torch.tensor(v) for k, v in self.stats.items()}\n"
    "class NoSuper(Method):\n"
    "    def __init__(self) -> None:\n"
    "        self.lam = 1.0\n"
    "    def loss(self, model, batch, ctx):\n"
    "        raise NotImplementedError\n")


@pytest.mark.parametrize("objective, entry, needle", [
    ("errors.py:Raises", {"gamma": 6.0}, "errors.py:Raises: its constructor raised ValueError: "
                                         "gamma must be at most 5 (errors.py line 7)"),
    ("errors.py:Raises", {}, "errors.py:Raises: its loss raised RuntimeError: my own bug "
                             "(errors.py line 9)"),
    ("errors.py:Returns", {"stats": {"lr": 1.0}}, "statistic names other than the trainer's own "
                                                  "('lr'"),
    ("errors.py:Returns", {"stats": {"val_cw": 1.0}}, "('val_cw'"),
    ("errors.py:Returns", {"stats": {"../x": 1.0}}, "letters, digits and _ ('../x'"),
    ("errors.py:Returns", {"grad": False}, "a loss with a gradient"),
    ("errors.py:NoSuper", {}, "its __init__ does not call super().__init__()"),
])
def test_an_error_of_your_own_code_is_one_line_naming_it(here: Path, objective, entry,
                                                         needle) -> None:
    """What your constructor or loss raises, or a loss's return the trainer cannot log, is one
    line (OwnMethodError: exit 2, its traceback with --debug) naming the file and line."""
    from wscat.own_method import OwnMethodError

    (here / "errors.py").write_text(OWN_ERRORS)
    with pytest.raises(OwnMethodError) as error:
        method = build_method({"objective": objective, **entry}, feature_dim=4, num_classes=3,
                              image_shape=(1, 8, 8))
        method.loss(None, None, None)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_dvc_yaml_lists_the_file_as_a_dependency(here: Path) -> None:
    write_params(here / "params.yaml", with_mart())
    for name in ("Snakefile", "workflow"):
        os.symlink(ROOT / name, here / name)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "XDG_CACHE_HOME": str(here / ".cache")}
    result = subprocess.run([sys.executable, str(ROOT / "workflow/scripts/dvc_yaml.py"),
                             "--root", str(here)], cwd=here, capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    import yaml
    stage = yaml.safe_load((here / "dvc.yaml").read_text())["stages"]["digits"]
    assert "examples/mart.py" in stage["deps"] and "methods.mart" in stage["params"]
