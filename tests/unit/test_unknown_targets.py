"""A Snakemake target no rule makes is one line that says what to type instead
(wscat.errors.unknown_target_line), whatever its form: the targets are those Snakemake's own
parser read (not only the words after `--` or of the table_/robustness_/paper_ form), a path is
normalised as Snakemake normalises it, a Makefile target's name (`paper-digits`, `report`) is
pointed to `make`, and a near miss of a rule's name gets that name."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from wscat import errors
from wscat.errors import make_targets, stop_on_unknown_target, unknown_target_line

ROOT = Path(__file__).resolve().parents[2]


class Rule:
    def __init__(self, name: str, makes: str = "", wildcards: bool = False) -> None:
        self.name, self.makes, self.wildcards = name, makes, wildcards

    def is_producer(self, target: str) -> bool:
        return bool(self.makes) and target.startswith(self.makes)

    def has_wildcards(self) -> bool:
        return self.wildcards


class Workflow:
    rules = [Rule("demo"), Rule("table", "results/tables/", wildcards=True), Rule("table_digits"),
             Rule("table_digits_ablation"), Rule("paper_digits")]


MAKEFILE = ("demo: venv\n\t$(SNAKEMAKE) results/tables/digits.tex\n\t$(DVC_RECORD) digits\n\n"
            "paper-digits: venv\n\t$(SNAKEMAKE) results/paper/digits/index.md\n\n"
            "table2-digits: venv\n\t$(SNAKEMAKE) results/tables/digits-table2.tex\n\n"
            "REPORT := results/report.html\n"
            "report: demo\n\t$(VENV)/bin/snakemake --report $(REPORT) -- results/tables/digits.tex\n")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Makefile").write_text(MAKEFILE)
    return tmp_path


@pytest.mark.parametrize("target, suggestion", [
    ("tabel_digits", "table_digits"), ("digits-ablation", "table_digits_ablation"),
    ("table_digitz", "table_digits")])
def test_a_near_miss_of_a_rule_name_is_one_line_with_the_name(workdir: Path, target: str,
                                                              suggestion: str) -> None:
    line = unknown_target_line(Workflow(), targets=[target])
    assert line is not None and "\n" not in line and f"did you mean {suggestion}?" in line, line
    assert target in line and "--list-target-rules" in line


@pytest.mark.parametrize("target, suggestion", [("table2", "`make table2-digits`"),
                                                ("tabel", None), ("table_", "table_digits")])
def test_a_near_miss_is_never_pointed_to_a_rule_that_cannot_be_a_target(
        workdir: Path, target: str, suggestion: str | None) -> None:
    """`table` has wildcards (Snakemake refuses it as a target: "Target rules may not contain
    wildcards"), so it is suggested for nothing; the Makefile's `table2-digits` is, as `make`."""
    line = unknown_target_line(Workflow(), targets=[target])
    assert line is not None and "did you mean table?" not in line, line
    if suggestion is None:
        assert "did you mean" not in line, line
    else:
        assert f"did you mean {suggestion}?" in line, line


def test_a_makefile_target_is_pointed_to_make(workdir: Path) -> None:
    line = unknown_target_line(Workflow(), targets=["paper-digits"])
    assert line == ("wscat: paper-digits is a target of the Makefile, not a Snakemake rule: run "
                    "`make paper-digits`, or `snakemake -- results/paper/digits/index.md`")


def test_a_makefile_target_that_runs_no_snakemake_is_pointed_to_make(workdir: Path) -> None:
    """`snakemake report` (for `snakemake --report` or `make report`): the Makefile's target, not
    "no rule makes report"; a variable (`REPORT :=`) is no target."""
    line = unknown_target_line(Workflow(), targets=["report"])
    assert line == ("wscat: report is a target of the Makefile, not a Snakemake rule: run `make "
                    "report` (`make` lists the targets)")
    assert errors.make_names() == {"demo", "paper-digits", "report", "table2-digits"}
    assert "Makefile" not in unknown_target_line(Workflow(), targets=["REPORT"])


def test_a_robustness_typo_before_the_dashes_is_read_as_a_target(workdir: Path) -> None:
    """Without Snakemake's parsed targets, argv's words of the named targets' form count."""
    line = unknown_target_line(Workflow(), argv=["snakemake", "-n", "robustness_digitz"])
    assert line is not None and "no target rule robustness_digitz" in line, line
    assert "robustness_EXPERIMENT" in line


@pytest.mark.parametrize("target", ["./results/tables/digits.tex", "results//tables/x.tex",
                                    "demo", "table_digits"])
def test_what_snakemake_accepts_passes(workdir: Path, target: str) -> None:
    assert unknown_target_line(Workflow(), targets=[target]) is None


def test_the_run_reads_the_targets_snakemake_parsed(workdir: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`snakemake -n paper-digits`: no `--`, not of the table_/paper_ form, yet one line."""
    monkeypatch.setattr("sys.argv", ["snakemake", "-n", "paper-digits"])
    monkeypatch.setattr("wscat.slurm_preflight.cli_args",
                        lambda: SimpleNamespace(targets=["paper-digits"]))
    with pytest.raises(SystemExit) as stop:
        stop_on_unknown_target(Workflow())
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "`make paper-digits`" in err


def test_the_makefile_targets_are_read_from_the_makefile() -> None:
    targets = make_targets(str(ROOT / "Makefile"))
    assert targets["paper-digits"] == ["results/paper/digits/index.md"]
    assert targets["demo"] == ["results/tables/digits.tex"]
    assert "venv" not in targets and "test" not in targets
    assert errors.make_targets(str(ROOT / "no-such-Makefile")) == {}


def test_a_makefile_variable_in_a_target_is_expanded() -> None:
    """`robustness-demo` asks for `$(ROBUSTNESS_DEMO).png` and `.csv`: the line names the files,
    not the variable (`snakemake -- $(ROBUSTNESS_DEMO).png` is no path: the shell runs a command)."""
    targets = make_targets(str(ROOT / "Makefile"))
    assert targets["robustness-demo"] == ["results/robustness-curves/digits.png",
                                          "results/robustness-curves/digits.csv"], targets
    assert not any("$" in file for files in targets.values() for file in files), targets


def test_the_makefile_variables_of_a_target_are_read_from_its_makefile(tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text("OUT := results/x\nDIR = results\n"
                        "x:\n\t$(SNAKEMAKE) $(OUT).png $(DIR)/y.tex\n")
    assert make_targets(str(makefile)) == {"x": ["results/x.png", "results/y.tex"]}
