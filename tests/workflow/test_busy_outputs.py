"""A snakemake started while another wscat process writes an output of one of its jobs (`wscat
train` or `evaluate` by hand, the Python API, another snakemake's job) stops before any job, in
one line, exit 2: Snakemake deletes a job's outputs before the job runs and again when it fails,
as the job's `wscat` step, refused the output lock, does. An audit ran a second snakemake on a
run a `wscat train` was training: its curves lost the epochs logged before (fixed apart), and
when that training finished while the refused job was failing, its best.pt, last.pt and
train_log.csv were deleted after it had said "trained" (exit 0)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.tiny import tiny_params
from tests.workflow.test_slurm import BIN, workflow_copy
from wscat.io import output_lock, outputs_being_written

RUN = "results/models/digits/cnn/trades/seed1"
METRICS = "results/metrics/digits/cnn/trades/seed1.json"


def test_an_output_or_its_run_folder_being_written_is_named_with_its_writer(
        tmp_path: Path) -> None:
    run, metrics = tmp_path / RUN, tmp_path / METRICS
    outputs = [str(run / "best.pt"), str(run / "dvclive"), str(metrics)]
    assert outputs_being_written(outputs) == []
    with output_lock(run, "wscat train (by hand)"):  # train locks its --out-dir
        busy = outputs_being_written(outputs)
        assert [path for path, _ in busy] == [str(run)], busy
        assert "wscat train (by hand)" in busy[0][1]
    with output_lock(metrics, "wscat evaluate (by hand)"):  # evaluate its --out
        assert [path for path, _ in outputs_being_written(outputs)] == [str(metrics)]
    assert outputs_being_written(outputs) == []


def test_snakemake_stops_before_any_job_on_a_run_being_trained(tmp_path: Path,
                                                                env: dict[str, str]) -> None:
    workdir = workflow_copy(tmp_path / "work", tiny_params())
    run = workdir / RUN
    (run / "dvclive").mkdir(parents=True)
    logged = run / "dvclive" / "metrics.json"  # the curves the training logged so far
    logged.write_text('{"step": 3}\n')
    with output_lock(run, "wscat train --method trades (by hand)"):
        result = subprocess.run([str(BIN / "snakemake"), "--cores", "1", "--", f"{RUN}/best.pt"],
                                cwd=workdir, env=env, capture_output=True, text=True,
                                timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"wscat: {RUN} is being written by another wscat process (pid "), line
    assert "wscat train --method trades (by hand)" in line and "nothing ran" in line, line
    assert logged.read_text() == '{"step": 3}\n'  # not deleted
    assert not (workdir / "results" / "splits").exists()  # no job ran, not even the split
    assert not (workdir / ".snakemake" / "locks").exists() or not any(
        (workdir / ".snakemake" / "locks").iterdir())  # Snakemake's own lock released
