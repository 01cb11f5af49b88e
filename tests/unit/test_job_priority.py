"""The start order Snakemake gives ready jobs (wscat.workflow.job_priority), on the real params:
each seed's split, then the chains through a labeler, robust models' attacks before the others'."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from wscat import workflow as wf

PARAMS = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())


@pytest.mark.parametrize("dataset", ["digits", "cifar10-proxy"])
def test_the_labeler_chain_goes_first(dataset):
    def priority(rule, method):
        return wf.job_priority(PARAMS, rule, dataset, method)

    assert wf.labelers(PARAMS, dataset) >= {"mt", "standard"}
    assert (priority("split", None)
            > priority("train", "mt") == priority("train", "standard")
            > priority("pseudo_label", "mt")
            > priority("train", "wscat") == priority("train", "rst")
            > priority("train", "trades") == priority("train", "wscat-sup")
            > priority("evaluate", "wscat") == priority("evaluate_extra", "trades")
            > priority("evaluate", "mt") == priority("evaluate", "standard") > 0)


def test_a_labeler_is_whatever_the_params_name():
    params = yaml.safe_load(yaml.safe_dump(PARAMS))
    params["methods"]["wscat"]["labeler"] = "trades"
    assert "trades" in wf.labelers(params, "digits")
    assert wf.job_priority(params, "train", "digits", "trades") == wf.PRIORITY["labeler"]


def test_an_unknown_method_goes_last_without_an_error():
    assert wf.job_priority(PARAMS, "train", "digits", "no-such-method") == 0
    assert wf.job_priority(PARAMS, "curves", "digits", "wscat") == 0
