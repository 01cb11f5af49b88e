"""The runs the `paper` section of params.yaml generates, beside the entries it spells out.

A tier's sweeps add ordinary entries to the params every tool reads (`expand_paper`, called by
wscat.config when it validates):
- beta: methods `{method}-beta{value}` (the method with beta = value on every dataset; Fig-beta);
- unlabelled: datasets `{dataset}-unlabelled{percent}` (that share of the unlabelled pool;
  Fig-unlabel);
- supervised: datasets `{dataset}-full` (labelled: null, every training label used; tab-sup).
An entry params.yaml names itself is kept as it is. `wscat list-experiments` lists them all.
"""
from __future__ import annotations

import copy
from typing import Any


def beta_method(method: str, beta: float) -> str:
    """The method key of one point of the beta sweep (Fig-beta): e.g. wscat-beta0.2."""
    return f"{method}-beta{beta:g}"


def unlabelled_dataset(dataset: str, fraction: float) -> str:
    """The dataset key of one point of the unlabelled-data sweep (Fig-unlabel): e.g. digits-unlabelled25."""
    return f"{dataset}-unlabelled{round(100 * fraction)}"


def full_dataset(dataset: str) -> str:
    """The dataset key of the fully supervised setting (tab-sup): every training label used."""
    return f"{dataset}-full"


def generated(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every entry the paper section generates, in order: section (methods | datasets), name,
    base, the knobs it changes, and the params.yaml key it comes from."""
    found: list[dict[str, Any]] = []
    for tier_name, tier in (params.get("paper") or {}).items():
        where = f"paper.{tier_name}"
        beta = tier.get("beta")
        for value in (beta or {}).get("values", []):
            found.append({"section": "methods", "name": beta_method(beta["method"], value),
                          "base": beta["method"], "knobs": {"beta": value}, "from": f"{where}.beta"})
        unlabelled = tier.get("unlabelled")
        for entry in tier["datasets"] if unlabelled else []:
            for fraction in unlabelled["fractions"]:
                if fraction < 1:
                    found.append({"section": "datasets",
                                  "name": unlabelled_dataset(entry["dataset"], fraction),
                                  "base": entry["dataset"],
                                  "knobs": {"unlabelled_fraction": fraction},
                                  "from": f"{where}.unlabelled"})
        for run in (tier.get("supervised") or {}).get("runs", []):
            found.append({"section": "datasets", "name": full_dataset(run["dataset"]),
                          "base": run["dataset"], "knobs": {"labelled": None},
                          "from": f"{where}.supervised"})
    return found


def _add_dataset(params: dict[str, Any], name: str, base: str, **overrides: Any) -> None:
    """A dataset variant: the base's entry with `overrides`, its schedule and every per-dataset
    override of the base (methods, evaluation) unless params.yaml names the variant itself."""
    if name in params["datasets"]:
        return
    params["datasets"][name] = {**params["datasets"][base],
                                "source": params["datasets"][base].get("source", base), **overrides}
    params["training"].setdefault(name, copy.deepcopy(params["training"][base]))
    for entry in params["methods"].values():
        per_dataset = entry.get("per_dataset") or {}
        if base in per_dataset:
            per_dataset.setdefault(name, copy.deepcopy(per_dataset[base]))
    per_dataset = params["evaluation"].get("per_dataset") or {}
    if base in per_dataset:
        per_dataset.setdefault(name, copy.deepcopy(per_dataset[base]))


def expand_paper(params: dict[str, Any]) -> dict[str, Any]:
    """A copy of `params` with the runs of `paper.<tier>` spelled out as ordinary entries (see
    the module docstring). Every tool (Snakemake, `wscat`) reads the same expanded params."""
    params = copy.deepcopy(params)
    for entry in generated(params):
        if entry["section"] == "methods":
            params["methods"].setdefault(entry["name"], {"base": entry["base"], **entry["knobs"]})
        else:
            _add_dataset(params, entry["name"], entry["base"], **entry["knobs"])
    return params


def _knobs(knobs: dict[str, Any]) -> str:
    return ", ".join(f"{key}: {'null' if value is None else value}" for key, value in knobs.items())


def describe(raw: dict[str, Any], params: dict[str, Any], source: str = "params.yaml") -> str:
    """`wscat list-experiments`: every experiment, method and dataset the validated `params`
    hold, each with where it comes from (`raw`: the params file as written)."""
    lines = [f"experiments ({source} experiments:)"]
    for name, spec in params["experiments"].items():
        seeds = " ".join(map(str, spec["seeds"]))
        lines.append(f"  {name:<24} {spec['dataset']} / {spec['model']}, seeds {seeds}: "
                     + " ".join(spec["methods"]))
    made: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in generated(params):  # the first tier's entry is kept; every origin is named
        key = (entry["section"], entry["name"])
        made.setdefault(key, {**entry, "from": []})["from"].append(entry["from"])
    for section in ("methods", "datasets"):
        lines += ["", f"{section} ({source} {section}:, or generated by its paper: section, "
                      "wscat/sweeps.py)"]
        for name in params[section]:
            sweep = made.get((section, name))
            if name in raw[section]:
                base = raw[section][name].get("base") if section == "methods" else None
                what = f"variant of {base}" if base else "as written"
                origin = f"{source} {section}.{name}"
            else:
                what = f"{sweep['base']} with {_knobs(sweep['knobs'])}"
                origin = f"generated by {source} {', '.join(sweep['from'])}"
            lines.append(f"  {name:<24} {what:<44} {origin}")
    return "\n".join(lines)
