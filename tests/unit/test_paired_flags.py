"""Per-image flags that no `wscat evaluate` writes (wscat.evaluation.encode_flags: a string of 0
and 1 per attack, every attack on the images AutoAttack ran on) are refused in one line, by the
paired comparison and by the bold alike, before any table file is written. Before, a character
other than 1 read as a wrong answer (a '1' turned 'x' lowered an accuracy unsaid, a 'é' made a
999-image string 1,000 bytes long), a list of 0/1 was a traceback, and the bold took any of them
for 'no per-image results'."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wscat.evaluation import ATTACKS, harmonic_mean
from wscat.report import write_table
from wscat.report.cells import bold_leads
from wscat.report.paired import BadFlags, correctness

N = 40


def _run(method: str, seed: int) -> dict:
    rng = np.random.default_rng(10 * seed + len(method))
    flags = {a: "".join("1" if f else "0" for f in rng.random(N) < 0.6) for a in ATTACKS}
    accuracy = {a: round(100.0 * flags[a].count("1") / N, 4) for a in ATTACKS}
    accuracy["Mean"] = round(harmonic_mean([accuracy[a] for a in ATTACKS]), 4)
    return {"dataset": "digits", "model": "cnn", "method": method, "seed": seed,
            "accuracy": accuracy,
            "manifest": {"n_examples": N, "attacks": {"AA": {"n_examples": N}}},
            "per_image": {"order": "stratified, subset_seed 0", "correct": flags}}


def _runs() -> list[dict]:
    return [_run(m, s) for s in (1, 2, 3) for m in ("trades", "wscat")]


def _x(flags: str) -> str:
    i = flags.index("0")
    return flags[:i] + "x" + flags[i + 1:]


def _e(flags: str) -> str:  # 39 characters, 40 bytes in UTF-8
    i = flags.index("0")
    return flags[:i] + "é" + flags[i + 2:]


CASES = {
    "x": (lambda c: {**c, "AA": _x(c["AA"])}, "flags of AA hold 'x', not a string of 0 and 1"),
    "é": (lambda c: {**c, "AA": _e(c["AA"])}, "flags of AA hold 'é'"),
    "T/F": (lambda c: {a: f.replace("1", "T").replace("0", "F") for a, f in c.items()},
            "flags of Natural hold"),
    "list": (lambda c: {a: [int(x) for x in f] for a, f in c.items()},
             "flags of Natural are a JSON list"),
    "one short": (lambda c: {**c, "CW": c["CW"][:-1]}, "cover different numbers of images"),
    "all short": (lambda c: {a: f[:-1] for a, f in c.items()},
                  f"cover {N - 1} images, but its AutoAttack ran on {N}"),
    "empty": (lambda c: {a: "" for a in c}, "are empty"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_flags_no_evaluation_writes_are_refused_in_one_line(case: str) -> None:
    change, says = CASES[case]
    runs = _runs()
    runs[3]["per_image"]["correct"] = change(runs[3]["per_image"]["correct"])
    with pytest.raises(BadFlags, match="re-evaluate it") as refused:
        correctness(runs)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith("wscat seed 2: ")
    with pytest.raises(BadFlags):  # not "no per-image results": no bold, said as if fine
        bold_leads(runs, ["trades", "wscat"], {"trades", "wscat"})


def test_per_image_that_is_not_an_object_is_refused() -> None:
    runs = _runs()
    runs[0]["per_image"]["correct"] = "0101"
    with pytest.raises(BadFlags, match="per_image.correct is a JSON str"):
        correctness(runs)


def test_a_table_of_a_damaged_flag_writes_nothing(tmp_path: Path) -> None:
    runs = _runs()
    runs[5]["per_image"]["correct"]["PGD"] = _x(runs[5]["per_image"]["correct"]["PGD"])
    files = []
    for run in runs:
        files.append(tmp_path / f"{run['method']}-{run['seed']}.json")
        files[-1].write_text(json.dumps(run))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BadFlags, match="wscat seed 3: its per-image flags of PGD hold 'x'"):
        write_table(experiment="digits", dataset="digits", model="cnn", metrics_files=files,
                    methods=["trades", "wscat"], display_names={"trades": "T", "wscat": "W"},
                    adversarial={"trades", "wscat"}, tex_path=out / "t.tex",
                    csv_path=out / "t.csv", summary_path=out / "t.json", md_path=out / "t.md",
                    paired_csv_path=out / "p.csv")
    assert list(out.iterdir()) == []


def test_flags_as_written_still_read() -> None:
    flags = correctness(_runs())
    assert sorted(flags) == ["trades", "wscat"] and flags["wscat"][1].shape == (5, N)
