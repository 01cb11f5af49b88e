"""benchmarks/proxy_table.py refuses, in one line and before writing anything, the arguments
that would make a wrong table or write into the runs' own folders (a newcomer's audit found each
of them accepted, exit 0)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import proxy_table  # noqa: E402


@pytest.fixture()
def seeds(tmp_path: Path) -> Path:
    """A seeds folder holding seed1/ (empty: every refusal below comes before it is read)."""
    (tmp_path / "seeds" / "seed1").mkdir(parents=True)
    return tmp_path / "seeds"


@pytest.mark.parametrize("extra, phrase", [
    (["--expect", "1", "1", "--require-all"], "--expect lists seed 1 more than once"),
    (["--expect", "-1"], "argument --expect: -1 is outside 0..4294967295"),
    (["--expect", "x"], "argument --expect: 'x' is not an integer"),
    (["--expect", "2", "3"], "holds seed 1, not among the expected seeds 2, 3"),
    (["--out", "{seeds}/seed2"], "the place of a run's seed folder"),
    (["--out", "{seeds}/seed1/metrics"], "the place of a run's seed folder"),
    (["--out", "{seeds}"], "is the seeds' folder itself"),
    (["--seeds-dir", "{seeds}/seed1/file.txt"], "a file, not a folder"),
])
def test_refused_in_one_line_with_nothing_written(seeds: Path, capsys, extra, phrase) -> None:
    (seeds / "seed1" / "file.txt").write_text("not a folder\n")
    before = sorted(seeds.rglob("*"))
    args = ["--seeds-dir", str(seeds), *(a.format(seeds=seeds) for a in extra)]
    if "--out" not in extra:
        args += ["--out", str(seeds.parent / "table")]
    assert proxy_table.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert phrase in err, err
    assert sorted(seeds.rglob("*")) == before and not (seeds.parent / "table").exists()


def test_seed_folder_names_what_out_would_land_in(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    assert proxy_table.seed_folder(seeds / "table", seeds) is None
    assert proxy_table.seed_folder(tmp_path / "elsewhere", seeds) is None
    assert proxy_table.seed_folder(seeds / "seed3" / "x", seeds) == (seeds / "seed3").resolve()
    assert proxy_table.seed_folder(seeds, seeds) == seeds.resolve()
