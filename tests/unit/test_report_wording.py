"""What the report's outputs say must agree with what they show: an interval's bound near 0
printed with its sign (so beside its verdict), no spread claimed for one seed, our standard AA
named as such beside the paper's, and a metrics file whose Mean is not its own accuracies'
harmonic mean refused. Every input is written by hand, so nothing trains."""
from __future__ import annotations

import csv
import io
from pathlib import Path


from wscat.report import markdown, paired

NAMES = {"trades": "TRADES", "rst": "RST", "wscat": "WSCAT"}


# --- 1. a bound that rounds to 0.00 shows its sign -------------------------------------------

def _row(method: str, low: float, high: float) -> dict:
    """A paired row (wscat.report.paired.COLUMNS) with the interval [low, high] on three seeds."""
    return {"method": method, "reference": "wscat", "delta_mean": (low + high) / 2,
            "ci_low": low, "ci_high": high, "excludes_zero": bool(low > 0 or high < 0),
            "n_seeds": 3, "n_images": 300, "n_bootstrap": 2000, "sd_seeds": 0.5,
            "se_test_set": 0.1, "df": 2, "apart_seed": None, "note": ""}


def test_a_bound_near_zero_is_printed_with_its_sign_in_every_output() -> None:
    """+0.004 excludes 0 (higher than WSCAT), -0.004 does not (within noise): printed '+0.00' and
    '-0.00' at two decimals, the interval looked like the same one with opposite verdicts."""
    frame = paired._frame([_row("trades", 0.004, 2.4), _row("rst", -0.004, 2.4)],
                          paired.COLUMNS)
    md = markdown.paired_markdown(frame, NAMES)
    assert "| TRADES | +1.20 | [+0.004, +2.40] | higher than WSCAT |" in md
    assert "| RST | +1.20 | [-0.004, +2.40] | within noise |" in md
    tex = markdown.paired_tex(frame, NAMES, label="Tab-paired-x")
    assert r"$[+0.004, +2.40]$ & higher than WSCAT" in tex
    assert r"$[-0.004, +2.40]$ & within noise" in tex
    rows = list(csv.DictReader(io.StringIO(markdown.paired_csv(frame, NAMES))))
    assert [(r["ci_low"], r["ci_high"], r["verdict"]) for r in rows] == [
        ("0.004", "2.40", "higher than WSCAT"), ("-0.004", "2.40", "within noise")]
    by_attack = frame.assign(column="AA")
    assert "**+1.20 [+0.004, +2.40]**" in markdown.paired_attacks_markdown(by_attack, NAMES)
    # Bounds away from 0 print as before; closer ones with the decimals that show their side.
    assert [markdown.bound(v) for v in (1.234, -0.006, 0.0004, -0.00004, 0.0)] == [
        "+1.23", "-0.01", "+0.0004", "-0.00004", "0.00"]
