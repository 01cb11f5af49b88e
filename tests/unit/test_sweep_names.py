"""Two sweep points of the paper section that get one name are refused (wscat.config): the
unlabelled shares 0.001 and 0.004 both round to `-unlabelled0`, and the second used to get the
first one's dataset entry (its 0.1% share) in silence, so Fig-unlabel drew one run's accuracy at
both shares. Points named alike with the same knobs (one beta point in two tiers) stay fine,
and so does an entry params.yaml names itself (kept as written, wscat/sweeps.py)."""
from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import yaml

from tests.helpers.tiny import ROOT
from wscat.config import ConfigError, validate_params


@functools.cache
def _raw() -> dict[str, Any]:
    return yaml.load((ROOT / "params.yaml").read_text(),
                     Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def test_two_shares_named_alike_are_refused() -> None:
    params = copy.deepcopy(_raw())
    params["paper"]["digits"]["unlabelled"]["fractions"] = [0.001, 0.004, 1.0]
    with pytest.raises(ConfigError, match=r"paper.digits.unlabelled \(unlabelled_fraction "
                                          r"0.004\) and paper.digits.unlabelled "
                                          r"\(unlabelled_fraction 0.001\) both name datasets "
                                          r"entry 'digits-unlabelled0'"):
        validate_params(params)
    # Named in params.yaml itself: that entry, as written, is what both points use.
    params["datasets"]["digits-unlabelled0"] = {**params["datasets"]["digits"],
                                                "unlabelled_fraction": 0.002}
    assert validate_params(params)["datasets"]["digits-unlabelled0"]["unlabelled_fraction"] == 0.002


def test_the_same_point_in_two_tiers_is_one_entry() -> None:
    """params.yaml's digits and paper tiers both sweep wscat's beta over 0.05 and 0.2."""
    params = validate_params(copy.deepcopy(_raw()))
    assert params["methods"]["wscat-beta0.2"] == {"base": "wscat", "beta": 0.2}
