"""benchmarks/suite_processes.py: the processes a test run starts, grouped by command, with
their counts and seconds (its docstring: `wscat <command>`, `snakemake` and its dry runs, `dvc
<command>`, else the script's name; the run's own pytest left out)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import suite_processes  # noqa: E402 - a benchmark script

BIN = "/x/.venv/bin"


def test_each_process_is_grouped_by_its_command() -> None:
    kind = suite_processes.kind
    assert kind(f"{BIN}/wscat train --params p.yaml") == "wscat train"
    assert kind("/x/wscat/__main__.py evaluate --part core") == "wscat evaluate"
    assert kind(f"{BIN}/snakemake --cores 2 -- results/tables/digits.tex") == "snakemake"
    assert kind(f"{BIN}/snakemake -n -- t") == kind("/s/snakemake/__main__.py --dry-run") \
        == "snakemake -n"
    assert kind(f"{BIN}/dvc repro") == "dvc repro"
    assert kind("/r/workflow/scripts/dvc_yaml.py --check") == "dvc_yaml.py"
    assert kind("-c import sys") == "python -c (one-liners)"
    assert kind("xdist-worker") == "pytest's workers (the tests' own work, collection included)"
    assert kind("/v/lib/python3.11/site-packages/pytest/__main__.py -q tests") == "pytest"
    assert kind("") == "python (no argv)"


def test_the_table_puts_the_most_cpu_seconds_first_with_counts_and_means() -> None:
    """Sorted by CPU seconds, not wall: a Snakemake that waits 5 s on its jobs used little."""
    rows = suite_processes.table([(2.0, 1.5, f"{BIN}/wscat train"), (4.0, 2.5, f"{BIN}/wscat train"),
                                  (5.0, 0.5, f"{BIN}/snakemake -n"),
                                  (0.6, 0.6, f"{BIN}/dvc status")])
    assert rows[2:] == ["| wscat train | 2 | 6.0 | 3.00 | 4.0 | 2.00 |",
                        "| dvc status | 1 | 0.6 | 0.60 | 0.6 | 0.60 |",
                        "| snakemake -n | 1 | 5.0 | 5.00 | 0.5 | 0.50 |"]


def test_a_run_records_the_processes_its_tests_start(tmp_path: Path, capsys) -> None:
    """A test that starts three Python processes, two of them exiting through os._exit (as
    `wscat` does): all are counted, the run's own pytest is not, nor a child it forks without
    exec (test_bad_input's `nobody`), which exits at once, and the table is written; the test runs
    in a pytest-xdist worker, counted apart from the one-liners (its `sys.argv` is `-c` too). The
    job that spins ~0.3 s on the CPU shows it in its CPU seconds; the one that sleeps does not."""
    (tmp_path / "test_starts.py").write_text(
        "import os, subprocess, sys\n"
        "def test_starts(tmp_path):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        sys.argv = ['forked-child']\n"
        "        os._exit(7)\n"
        "    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7\n"
        "    script = tmp_path / 'job.py'\n"
        "    script.write_text('import os, time; end = time.process_time() + 0.3\\n'\n"
        "                      'while time.process_time() < end: pass\\nos._exit(0)')\n"
        "    for _ in range(2):\n"
        "        subprocess.run([sys.executable, str(script)], check=True)\n"
        "    subprocess.run([sys.executable, '-c', 'import time; time.sleep(0.5)'], check=True)\n")
    out = tmp_path / "processes.md"
    status = suite_processes.main(["--out", str(out), "-q", "-p", "no:cacheprovider", "-n", "1",
                                   "-p", "no:randomly", str(tmp_path / "test_starts.py")])
    assert status == 0
    text = out.read_text()
    assert "| job.py | 2 |" in text and "| python -c (one-liners) | 1 |" in text
    assert "pytest |" not in text and "forked-child" not in text
    assert "4 processes recorded" in text  # and the one xdist worker, a group of its own:
    assert "| pytest's workers (the tests' own work, collection included) | 1 |" in text
    rows = {row.split(" | ")[0].lstrip("| "): row.strip("| ").split(" | ") for row in text.splitlines()
            if row.startswith("| ") and row[2:5] != "pro"}
    assert float(rows["job.py"][4]) >= 0.6  # two jobs, each spinning 0.3 s
    one_liner = rows["python -c (one-liners)"]
    assert float(one_liner[2]) >= 0.5 > float(one_liner[4])  # slept: wall, not CPU
    whole = re.search(r"(\d+) CPU seconds in all .*their CPU seconds (\d+) of the run's", text)
    assert whole and int(whole[1]) >= int(whole[2]) >= 1  # the run's CPU holds every process's
    assert text in capsys.readouterr().out
