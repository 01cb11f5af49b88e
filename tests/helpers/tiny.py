"""A tiny but complete params set for fast tests (same schema as params.yaml)."""
import copy
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def tiny_params(epochs: int = 2) -> dict:
    """params.yaml with a short schedule, small validation attacks and small AutoAttack and NRF
    subsets."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params = copy.deepcopy(params)
    params["experiments"] = {"digits": {**params["experiments"]["digits"], "seeds": [1],
                                        "model": "cnn"}}
    params.pop("paper")  # its tiers name the other experiments (tests/workflow/test_paper.py adds it back)
    fast_digits(params, epochs)
    params["datasets"]["digits"]["train_steps"] = 3
    params["evaluation"]["n_examples"] = 40
    params["evaluation"]["pgd_steps"] = 5
    params["evaluation"]["cw_steps"] = 5
    params["validation"] = {"pgd_steps": 5, "cw_steps": 5}
    params["evaluation"]["per_dataset"]["digits"]["autoattack"]["n_examples"] = 8
    params["evaluation"]["per_dataset"]["digits"]["nrf"]["n_examples"] = 8
    return params


def fast_digits(params: dict, epochs: int) -> dict:
    """In place: a narrower CNN than the demo's (width 16), and `epochs` for every digits run,
    the labelers' own schedules (training.digits.per_method) too."""
    params["models"]["cnn"] = {"architecture": "cnn", "width": 16}
    params["training"]["digits"]["epochs"] = epochs
    params["training"]["digits"].pop("per_method", None)
    return params


def write_params(path: Path, params: dict) -> Path:
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def digits_split(seed: int = 1, labelled: int = 300):
    """The embedded digits and a split of them for a unit test's training: (source, split)."""
    from wscat.data import load_dataset, make_split

    source = load_dataset("digits")
    split = make_split("digits", source.labels.numpy(), num_classes=10, seed=seed,
                       test_fraction=0.2, labelled=labelled, val_fraction=0.2, val_max=2000)
    return source, split
