"""Mutation tests for workflow/scripts/dvc_yaml.py (dvc.yaml from the Snakemake DAG) and
wscat/slurm_preflight.py (the SLURM profile's check at load): each test kills hand-made mutants
that went through the tests importing the module, with expectations from the modules'
docstrings, docs/workflow.md ("DVC", "On a SLURM cluster"), wscat.paths' patterns, DVC's and
DVCLive's file formats, `sinfo`'s output format and the executor plugin's resource names, never
from the function under test. Snakemake's DAG is stood in for by hand-written `snakemake
--summary` rows, `sinfo` and the Slurm client by fakes: nothing here runs a subprocess.

What is checked, and from which fact:
- the DAG is read from `snakemake --summary -- TARGETS` (its rows: output_file, date, rule, ...
  after a header), with the archive check skipped (the shape needs no archives); a failed call is
  one line ending with Snakemake's last line;
- one stage per experiment (the demo's by default, --experiments NAME..., --all every one, an
  unknown name refused in one line), in params.yaml's order whatever the order asked for: its
  command (two jobs on a laptop's CPU; a paper dataset: one GPU, the jobs taking turns), its deps
  (Snakefile, workflow, wscat, the archives of the datasets it splits whether on disk or not:
  Snakemake has a fetch rule only while one is missing, wscat.workflow.fetch_groups; the
  generated images its runs train on, wscat.workflow.training_inputs; your own method's files),
  its params (the experiment, dataset, training, model, every method whose section can change the
  table on the experiment's dataset, as the DAG reads it: its labeler, a per_dataset one counted,
  its `base`, DMAT's generated_labeler only with generated images; validation, evaluation; a
  table: false experiment's paper tiers), its outputs (the table's files `cache: false,
  persist: true`, every other output of the DAG but an archive cached and persistent: split,
  pseudo-labels, checkpoints, DVCLive folders, per-run metrics, a table: false stage's paper
  tables; the summary as the metric and nowhere else; a table: false stage has no metric), each
  list sorted (--check compares byte for byte);
- an output belongs to one stage only (DVC refuses a path two stages declare): the runs shared
  with an earlier experiment stay there, and each archive of a paper dataset has one
  fetch-<dataset> stage (cached output, persist: true, params: its datasets section; your own
  npz is a dep only, its stage without the GPU limit: docs/workflow.md, "Your own images"), but every experiment's plots draw all of
  its runs, three per experiment (loss, natural, the robust curve the method selects on: CW for
  cw, PGD for hm, none for natural/last; the dataset's per_dataset override counted), DVCLive's
  files `<run>/dvclive/plots/metrics/<column>.tsv` on the `step` axis;
- --check: exit 0 when the file is what the params give for its own stages, else exit 2, one
  line (missing; lists a path no longer made, with how many more; lacks one now made; differs)
  naming the command that regenerates those same stages and `git add dvc.yaml`; a stage of an
  experiment that params.yaml dropped is stale, not an error; a YAML that is no mapping of
  stages, or a stage that is no mapping, has no stages or outputs; --check writes nothing;
- slurm_preflight: the snakemake command line's `args` are args_to_api's and have an executor;
  a profile's raw value as an int where it is a number; every resource key the docs and the
  plugin name passes, a misspelt one or an unknown rule in set-resources or set-threads is
  refused (the list names no internal `_cores`), a local rule may be named; each missing Slurm
  client command is named; `sinfo -h -o "%P|%G|%c|%m"` is read with a timeout, the default
  partition marked `*`, GPUs in any gres item of any node group, the largest node's CPUs and
  memory (`64+`), odd lines skipped; a job goes to its own partition or the default, is refused
  for GPUs where its partition has none, for more CPUs or MB than the largest node (equal fits;
  unknown sizes refuse nothing), every rule checked; each number's source named; only the
  `slurm` executor is checked, not local or norun rules, and a dry run is told apart.
"""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from workflow.scripts import dvc_yaml
from wscat import slurm_preflight as preflight
from wscat.slurm_preflight import Job, Partition, PreflightError

ROOT = Path(__file__).resolve().parents[2]
COMMAND = ".venv/bin/python workflow/scripts/dvc_yaml.py"
UNCACHED = {"cache": False, "persist": True}
CACHED = {"persist": True}
ARCHIVE = "data/raw/cifar-10-python.tar.gz"  # datasets.cifar10(-proxy): the CIFAR-10 archive


def real_params() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def params_with(experiments: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The repo's params.yaml with these experiments only (no paper tiers, which name others)."""
    params = real_params()
    params.pop("paper")
    params["experiments"] = experiments
    return params


def experiment(dataset: str, model: str, methods: list[str], **more: Any) -> dict[str, Any]:
    return {"dataset": dataset, "model": model, "seeds": [1], "methods": methods, **more}


EXPERIMENTS = {"demo": experiment("digits", "cnn", ["standard", "rst"]),
               "demo-b": experiment("digits", "cnn", ["standard", "trades"]),
               "proxy": experiment("cifar10-proxy", "wrn-16-4", ["standard"]),
               "c10": experiment("cifar10", "wrn-16-4", ["standard"])}

# `snakemake --summary -- TARGET` rows as (output, rule), in no particular order: the runs
# (train: best.pt and the DVCLive folder), their metrics (evaluate), pseudo-labels, the split and
# the table's files (table: .tex/.csv/.md and the summary .json).
DAG = {
    "results/tables/demo.tex": [
        ("results/metrics/digits/cnn/standard/seed1.json", "evaluate"),
        ("results/models/digits/cnn/standard/seed1/best.pt", "train"),
        ("results/models/digits/cnn/standard/seed1/dvclive", "train"),
        ("results/tables/demo.tex", "table"),
        ("results/tables/demo.md", "table"),
        ("results/tables/demo.csv", "table"),
        ("results/metrics/demo.json", "table"),
        ("results/metrics/digits/cnn/rst/seed1.json", "evaluate"),
        ("results/models/digits/cnn/rst/seed1/best.pt", "train"),
        ("results/models/digits/cnn/rst/seed1/dvclive", "train"),
        ("results/pseudo/digits/cnn/standard/seed1.npz", "pseudo_label"),
        ("results/splits/digits/seed1.npz", "split")],
    "results/tables/demo-b.tex": [
        ("results/tables/demo-b.tex", "table"),
        ("results/metrics/demo-b.json", "table"),
        ("results/metrics/digits/cnn/trades/seed1.json", "evaluate"),
        ("results/models/digits/cnn/trades/seed1/dvclive", "train"),
        ("results/metrics/digits/cnn/standard/seed1.json", "evaluate"),
        ("results/models/digits/cnn/standard/seed1/dvclive", "train"),
        ("results/splits/digits/seed1.npz", "split")],
    "results/tables/proxy.tex": [
        (ARCHIVE, "fetch_cifar10"),  # a fetch rule while the archive is missing
        ("results/tables/proxy.tex", "table"),
        ("results/metrics/proxy.json", "table"),
        ("results/metrics/cifar10-proxy/wrn-16-4/standard/seed1.json", "evaluate"),
        ("results/models/cifar10-proxy/wrn-16-4/standard/seed1/dvclive", "train"),
        ("results/splits/cifar10-proxy/seed1.npz", "split")],
    "results/tables/c10.tex": [
        (ARCHIVE, "fetch_cifar10"),
        ("results/tables/c10.tex", "table"),
        ("results/metrics/c10.json", "table"),
        ("results/metrics/cifar10/wrn-16-4/standard/seed1.json", "evaluate"),
        ("results/models/cifar10/wrn-16-4/standard/seed1/dvclive", "train"),
        ("results/splits/cifar10/seed1.npz", "split")],
}


@pytest.fixture
def dag(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, str]]]:
    """Snakemake's DAG stood in for by DAG (a copy the test may edit), one target at a time."""
    rows = copy.deepcopy(DAG)

    def outputs(root: Path, target: list[str]) -> list[tuple[str, str]]:
        return [row for path in target for row in rows[path]]

    monkeypatch.setattr(dvc_yaml, "snakemake_outputs", outputs)
    return rows


@pytest.fixture
def root(tmp_path: Path, dag) -> Path:
    """A workflow root whose params.yaml has EXPERIMENTS."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params_with(EXPERIMENTS),
                                                         sort_keys=False))
    return tmp_path


def rendered(root: Path, names: list[str] | None = None, every: bool = False) -> dict[str, Any]:
    return yaml.safe_load(dvc_yaml.render(root, names, every))


# --- the DAG, from `snakemake --summary` --------------------------------------------------------

SUMMARY = ("output_file\tdate\trule\tlog-file(s)\tinput-file(s)\tshellcmd\tstatus\tplan\n"
           "results/tables/demo.tex\t-\ttable\t\t\t\tmissing\tupdate pending\n"
           "results/metrics/digits/cnn/rst/seed1.json\t-\tevaluate\t\t\t\tmissing\t"
           "update pending\n")


def test_the_dag_is_read_from_snakemake_summary(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    calls = []

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 0, "Building DAG of jobs...\n" + SUMMARY, "")

    monkeypatch.setattr(dvc_yaml.subprocess, "run", run)
    rows = dvc_yaml.snakemake_outputs(tmp_path, ["results/tables/demo.tex"])
    assert rows == [("results/tables/demo.tex", "table"),
                    ("results/metrics/digits/cnn/rst/seed1.json", "evaluate")]
    [(cmd, kwargs)] = calls
    assert cmd[-4:] == ["snakemake", "--summary", "--", "results/tables/demo.tex"]
    assert kwargs["cwd"] == tmp_path and kwargs["env"]["WSCAT_SKIP_ARCHIVE_CHECK"] == "1"


def test_a_failed_summary_is_one_line_with_snakemakes_last(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    said = {"code": 1, "stderr": "Building DAG of jobs...\nWorkflowError: no rule\n"}
    monkeypatch.setattr(dvc_yaml.subprocess, "run", lambda cmd, **kwargs:
                        subprocess.CompletedProcess(cmd, said["code"], "", said["stderr"]))
    with pytest.raises(SystemExit) as stop:
        dvc_yaml.snakemake_outputs(tmp_path, ["a.tex", "b.tex"])
    assert stop.value.code == ("dvc_yaml: snakemake --summary -- a.tex b.tex failed: "
                               "WorkflowError: no rule")
    said.update(code=-9, stderr="")  # killed: no word of its own
    with pytest.raises(SystemExit) as stop:
        dvc_yaml.snakemake_outputs(tmp_path, ["a.tex"])
    assert stop.value.code == "dvc_yaml: snakemake --summary -- a.tex failed: (no output)"


# --- the stages -------------------------------------------------------------------------------

def test_the_demos_stage_whole(root: Path) -> None:
    stages = rendered(root)["stages"]
    assert list(stages) == ["demo"]  # the demo's only, by default
    assert stages["demo"] == {
        "cmd": "snakemake --cores 2 -- results/tables/demo.tex",
        "deps": ["Snakefile", "workflow", "wscat"],
        "params": ["experiments.demo", "datasets.digits", "training.digits", "models.cnn",
                   "methods.rst", "methods.standard", "validation", "evaluation"],
        # git keeps the table's files; DVC's cache every other file of the DAG (`dvc push`)
        "outs": [{"results/tables/demo.csv": UNCACHED}, {"results/tables/demo.md": UNCACHED},
                 {"results/tables/demo.tex": UNCACHED},
                 {"results/metrics/digits/cnn/rst/seed1.json": CACHED},
                 {"results/metrics/digits/cnn/standard/seed1.json": CACHED},
                 {"results/models/digits/cnn/rst/seed1/best.pt": CACHED},
                 {"results/models/digits/cnn/rst/seed1/dvclive": CACHED},
                 {"results/models/digits/cnn/standard/seed1/best.pt": CACHED},
                 {"results/models/digits/cnn/standard/seed1/dvclive": CACHED},
                 {"results/pseudo/digits/cnn/standard/seed1.npz": CACHED},
                 {"results/splits/digits/seed1.npz": CACHED}],
        "metrics": [{"results/metrics/demo.json": UNCACHED}]}


def test_the_demos_curves(root: Path) -> None:
    run = "results/models/digits/cnn/{}/seed1/dvclive/plots/metrics/{}.tsv"
    assert rendered(root)["plots"] == [
        {"demo-loss": {"title": "demo: training loss per epoch", "x": "step", "x_label": "epoch",
                       "y_label": "training loss",
                       "y": {run.format("rst", "loss"): "loss",
                             run.format("standard", "loss"): "loss"}}},
        {"demo-val_natural": {"title": "demo: validation natural accuracy (%) per epoch",
                              "x": "step", "x_label": "epoch",
                              "y_label": "validation natural accuracy (%)",
                              "y": {run.format("rst", "val_natural"): "val_natural",
                                    run.format("standard", "val_natural"): "val_natural"}}},
        # Standard selects on natural accuracy: no robust curve; RST on CW-20
        {"demo-val_robust": {"title": "demo: validation robust accuracy (%) per epoch",
                             "x": "step", "x_label": "epoch",
                             "y_label": "validation robust accuracy (%)",
                             "y": {run.format("rst", "val_cw"): "val_cw"}}}]


def test_shared_runs_stay_with_the_earlier_experiment_but_are_drawn_by_both(root: Path) -> None:
    both = rendered(root, ["demo-b", "demo"])  # the order asked for does not matter
    assert both == rendered(root, ["demo", "demo-b"])
    assert list(both["stages"]) == ["demo", "demo-b"]
    assert both["stages"]["demo-b"]["outs"] == [
        {"results/tables/demo-b.tex": UNCACHED},
        {"results/metrics/digits/cnn/trades/seed1.json": CACHED},
        {"results/models/digits/cnn/trades/seed1/dvclive": CACHED}]  # the split is demo's
    assert both["stages"]["demo-b"]["metrics"] == [{"results/metrics/demo-b.json": UNCACHED}]
    every = [path for stage in both["stages"].values() for key in ("outs", "metrics")
             for entry in stage[key] for path in entry]
    assert len(every) == len(set(every))
    loss = next(plot["demo-b-loss"] for plot in both["plots"] if "demo-b-loss" in plot)
    assert sorted(loss["y"]) == [
        "results/models/digits/cnn/standard/seed1/dvclive/plots/metrics/loss.tsv",
        "results/models/digits/cnn/trades/seed1/dvclive/plots/metrics/loss.tsv"]
    assert [name for plot in both["plots"] for name in plot] == [
        "demo-loss", "demo-val_natural", "demo-val_robust",
        "demo-b-loss", "demo-b-val_natural", "demo-b-val_robust"]


def test_a_paper_dataset_fetches_its_archive_once_and_takes_turns_on_one_gpu(root: Path,
                                                                          dag) -> None:
    stages = rendered(root, every=True)["stages"]
    # Snakemake has a fetch rule only while an archive is missing: the file is the same after
    # `wscat fetch` (the archive stays a dep: a new archive reruns the stage)
    for target in ("results/tables/proxy.tex", "results/tables/c10.tex"):
        dag[target] = [row for row in dag[target] if not row[1].startswith("fetch_")]
    assert rendered(root, every=True)["stages"] == stages
    assert list(stages) == ["fetch-cifar10-proxy", "demo", "demo-b", "proxy", "c10"]
    assert stages["fetch-cifar10-proxy"] == {"cmd": "wscat fetch --dataset cifar10-proxy",
                                             "params": ["datasets.cifar10-proxy"],
                                             "outs": [{ARCHIVE: {"persist": True}}]}
    for name in ("proxy", "c10"):
        assert stages[name]["cmd"] == (f"snakemake --cores 4 --resources gpu=1 -- "
                                       f"results/tables/{name}.tex")
        assert stages[name]["deps"] == ["Snakefile", "workflow", "wscat", ARCHIVE]
    assert stages["c10"]["params"][:4] == ["experiments.c10", "datasets.cifar10",
                                           "training.cifar10", "models.wrn-16-4"]


def test_your_own_npz_is_a_dep_never_a_fetch_stages_output(dag) -> None:
    """docs/workflow.md ("Your own images"): your file is no job's output, so `snakemake -F`
    never deletes it; likewise no DVC stage's (a cached output that `dvc checkout` would put back
    over your file), but a dep (a new file reruns the table), and no GPU limit (the CPU
    default's two jobs at a time), whether or not Snakemake has a fetch rule for it now."""
    params = real_params()
    params["datasets"]["mine"] = {"source": "npz", "path": "path/to/mine.npz", "labelled": 24}
    params["experiments"] = {"mine": experiment("mine", "cnn", ["standard"])}
    tex = "results/tables/mine.tex"
    dag[tex] = [(tex, "table"), ("results/splits/mine/seed1.npz", "split"),
                ("results/metrics/mine/cnn/standard/seed1.json", "evaluate")]
    for fetch_rule in ([], [("path/to/mine.npz", "fetch_mine")]):  # present, then missing
        dag[tex][3:] = fetch_rule
        fetches: dict[str, Any] = {}
        stage = dvc_yaml.stage(params, ROOT, "mine", set(), fetches, [])
        assert fetches == {}
        assert stage["cmd"] == f"snakemake --cores 2 -- {tex}"
        assert stage["deps"] == ["Snakefile", "workflow", "wscat", "path/to/mine.npz"]
        assert [path for out in stage["outs"] for path in out] == [
            tex, "results/metrics/mine/cnn/standard/seed1.json", "results/splits/mine/seed1.npz"]


def test_an_archive_shared_in_part_is_the_output_of_one_fetch_stage(
        root: Path, dag, monkeypatch: pytest.MonkeyPatch) -> None:
    """DVC refuses an output that two stages declare: a dataset whose archives are in part an
    earlier fetch stage's gets a fetch stage of the others only; its table depends on all."""
    extra = "data/raw/extra.bin"
    real = dvc_yaml.wf.archives
    monkeypatch.setattr(dvc_yaml.wf, "archives", lambda params, dataset: (
        [ARCHIVE, extra] if dataset == "cifar10" else real(params, dataset)))
    stages = rendered(root, every=True)["stages"]
    assert stages["fetch-cifar10-proxy"]["outs"] == [{ARCHIVE: {"persist": True}}]
    assert stages["fetch-cifar10"]["outs"] == [{extra: {"persist": True}}]
    assert stages["c10"]["deps"] == ["Snakefile", "workflow", "wscat", ARCHIVE, extra]


def test_a_table_false_experiment_builds_its_paper_tables_without_a_metric(dag) -> None:
    params = real_params()  # digits-table2: table: false, Tab-RQ1-digits of the digits tier
    tex = "results/paper/digits/Tab-RQ1-digits.tex"
    dag[tex] = [(tex, "paper_table"), (tex[:-4] + ".csv", "paper_table"),
                ("results/metrics/digits/cnn/dmat/seed1.json", "evaluate")]
    stage = dvc_yaml.stage(params, ROOT, "digits-table2", set(), {}, [])
    assert stage["cmd"] == f"snakemake --cores 2 -- {tex}"
    assert stage["params"][-3:] == ["validation", "evaluation", "paper.digits"]
    # results/paper/ is git-ignored: its tables are in DVC's cache, as the runs are
    assert stage["outs"] == [{"results/metrics/digits/cnn/dmat/seed1.json": CACHED},
                             {tex[:-4] + ".csv": CACHED}, {tex: CACHED}]
    assert "metrics" not in stage


def test_the_methods_a_table_reads_labelers_bases_and_generated_labelers() -> None:
    params = real_params()
    used = dvc_yaml.used_methods
    assert used(params, experiment("digits", "cnn", ["rst"])) == ["rst", "standard"]
    assert used(params, experiment("digits", "cnn", ["wscat-std"])) == [
        "mt", "standard", "wscat", "wscat-std"]  # its base's labeler and its own
    assert used(params, experiment("digits", "cnn", ["wscat-sup"])) == ["mt", "wscat", "wscat-sup"]
    # DMAT's generated_labeler counts only with generated images (params.yaml: generated: null)
    assert used(params, experiment("digits", "cnn", ["dmat"])) == ["dmat"]
    params["methods"]["dmat"]["generated"] = "data/generated.npz"
    assert used(params, experiment("digits", "cnn", ["dmat", "trades"])) == [
        "dmat", "mt", "trades"]


def test_a_per_dataset_labeler_or_generated_images_count_on_that_dataset() -> None:
    params = real_params()
    used = dvc_yaml.used_methods
    params["methods"]["rst"]["per_dataset"] = {"cifar10": {"labeler": "mt"}}
    assert used(params, experiment("cifar10", "wrn-28-10", ["rst"])) == ["mt", "rst"]
    assert used(params, experiment("digits", "cnn", ["rst"])) == ["rst", "standard"]
    params["methods"]["dmat"]["per_dataset"] = {"cifar10": {"generated": "data/gen.npz"}}
    assert used(params, experiment("cifar10", "wrn-28-10", ["dmat"])) == ["dmat", "mt"]
    assert used(params, experiment("digits", "cnn", ["dmat"])) == ["dmat"]


def test_the_generated_images_a_run_trains_on_are_a_dep(dag) -> None:
    params = real_params()
    params["methods"]["dmat"]["per_dataset"] = {"digits": {"generated": "data/gen.npz"}}
    params["experiments"]["gen"] = experiment("digits", "cnn", ["dmat", "trades"])
    params["experiments"]["gen-c10"] = experiment("cifar10", "cnn", ["dmat"])
    dag["results/tables/gen.tex"] = [
        ("results/tables/gen.tex", "table"),
        ("results/models/digits/cnn/dmat/seed1/dvclive", "train"),
        ("results/models/digits/cnn/trades/seed1/dvclive", "train"),
        ("results/models/digits/cnn/mt/seed1/dvclive", "train"),  # the generated_labeler
        ("results/splits/digits/seed1.npz", "split")]
    dag["results/tables/gen-c10.tex"] = [
        ("results/tables/gen-c10.tex", "table"),
        ("results/models/cifar10/cnn/dmat/seed1/dvclive", "train"),
        ("results/splits/cifar10/seed1.npz", "split")]
    stage = dvc_yaml.stage(params, ROOT, "gen", set(), {}, [])
    assert stage["deps"] == ["Snakefile", "workflow", "wscat", "data/gen.npz"]
    assert stage["params"][4:7] == ["methods.dmat", "methods.mt", "methods.trades"]
    stage = dvc_yaml.stage(params, ROOT, "gen-c10", set(), {}, [])
    assert stage["deps"] == ["Snakefile", "workflow", "wscat", ARCHIVE]  # no images on cifar10


def test_the_robust_curve_follows_the_datasets_selection() -> None:
    params = real_params()
    params["methods"]["trades-hm"] = {"base": "trades",
                                      "per_dataset": {"digits": {"selection": "hm"}}}
    run = "results/models/digits/cnn/trades-hm/seed1/dvclive"
    assert dvc_yaml.curve_files(params, [run], "val_robust") == {
        f"{run}/plots/metrics/val_pgd.tsv": "val_pgd"}
    other = "results/models/cifar10/cnn/trades-hm/seed1/dvclive"
    assert dvc_yaml.curve_files(params, [other], "val_robust") == {
        f"{other}/plots/metrics/val_cw.tsv": "val_cw"}


def test_an_unknown_experiment_is_one_line(root: Path, capsys: pytest.CaptureFixture) -> None:
    """Bad input: exit 2 (sys.exit with the message exited 1, as for a failure)."""
    with pytest.raises(SystemExit) as stop:
        dvc_yaml.render(root, ["demo", "nope"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == ("dvc_yaml: no experiment nope in params.yaml; experiments: "
                                       "demo, demo-b, proxy, c10\n")


def test_a_root_without_params_is_named_with_the_flag_that_moves_it(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The params file's own refusal said "pass --params", a flag dvc_yaml.py does not have."""
    for call in (lambda: dvc_yaml.render(tmp_path, None),
                 lambda: dvc_yaml.check(tmp_path, tmp_path / "dvc.yaml", None, False)):
        with pytest.raises(SystemExit) as stop:
            call()
        assert stop.value.code == 2
        assert capsys.readouterr().err == (f"dvc_yaml: no params.yaml in {tmp_path}; run it from "
                                           "the repository's root folder or pass --root\n")


# --- reading a dvc.yaml, and --check ------------------------------------------------------------

def test_a_dvc_yaml_that_is_no_mapping_of_stages_has_none() -> None:
    for text in ("", "- a\n", "stages: [a, b]\n", "stages: {{\n", "plots: []\n"):
        assert dvc_yaml._stages(text) == {}, text
    assert dvc_yaml.stage_names("stages:\n  fetch-cifar10: {}\n  demo: {}\n") == ["demo"]
    text = ("stages:\n  odd: 3\n  a:\n    outs: [x.txt, {y.txt: {cache: false}}]\n"
            "    metrics: [{m.json: {cache: false}}]\n")
    assert dvc_yaml._outs(text) == {"x.txt", "y.txt", "m.json"}


def test_the_regenerate_command_names_the_same_stages() -> None:
    assert dvc_yaml.regenerate_command([], "demo", False) == COMMAND
    assert dvc_yaml.regenerate_command(["demo"], "demo", False) == COMMAND
    assert dvc_yaml.regenerate_command(["demo-b"], "demo", False) == (
        f"{COMMAND} --experiments demo-b")
    assert dvc_yaml.regenerate_command(["demo", "x"], "demo", True) == f"{COMMAND} --all"


def test_the_stale_line_says_what_differs() -> None:
    out = Path("/work/dvc.yaml")
    tail = f"; regenerate it with `{COMMAND}` (then `git add dvc.yaml`), and run again"

    def made(*paths: str, metric: str = "m.json") -> str:
        return yaml.safe_dump({"stages": {"demo": {"outs": list(paths), "metrics": [metric]}}})

    assert dvc_yaml.stale_line(out, "", made("a"), COMMAND) == f"dvc_yaml: {out} is missing{tail}"
    assert dvc_yaml.stale_line(out, made("a", "b", "c", "d"), made("d"), COMMAND) == (
        f"dvc_yaml: {out} lists a and 2 more, which params.yaml no longer makes (a method or seed "
        f"dropped?){tail}")
    assert dvc_yaml.stale_line(out, made("a", "d"), made("d"), COMMAND) == (
        f"dvc_yaml: {out} lists a, which params.yaml no longer makes (a method or seed "
        f"dropped?){tail}")
    assert dvc_yaml.stale_line(out, made("d", metric="old.json"), made("d"), COMMAND).startswith(
        f"dvc_yaml: {out} lists old.json, which")
    assert dvc_yaml.stale_line(out, made("d"), made("d", "e", "f"), COMMAND) == (
        f"dvc_yaml: {out} lacks e and 1 more, which params.yaml now makes{tail}")
    assert dvc_yaml.stale_line(out, made("d") + "# edited\n", made("d"), COMMAND) == (
        f"dvc_yaml: {out} differs from what the workflow and params.yaml generate{tail}")


def test_check_keeps_the_stages_of_the_file(root: Path, dag,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    output = root / "dvc.yaml"
    assert dvc_yaml.check(root, output, None, False) == 2  # missing, and nothing written
    assert not output.exists()
    assert capsys.readouterr().err == (
        f"dvc_yaml: {output} is missing; regenerate it with `{COMMAND}` (then `git add "
        "dvc.yaml`), and run again\n")
    assert dvc_yaml.main(["--root", str(root), "--experiments", "demo", "demo-b"]) == 0
    assert list(yaml.safe_load(output.read_text())["stages"]) == ["demo", "demo-b"]
    assert dvc_yaml.check(root, output, None, False) == 0
    assert dvc_yaml.main(["--root", str(root), "--check"]) == 0
    assert dvc_yaml.check(root, output, ["demo"], False) == 2  # checked against the demo's alone
    assert f"regenerate it with `{COMMAND}` (" in capsys.readouterr().err
    # demo-b drops TRADES: its two outputs are stale, regenerated with the same two stages
    dag["results/tables/demo-b.tex"] = [row for row in dag["results/tables/demo-b.tex"]
                                        if "/trades/" not in row[0]]
    written = output.read_text()
    assert dvc_yaml.main(["--root", str(root), "--check"]) == 2
    assert capsys.readouterr().err == (
        f"dvc_yaml: {output} lists results/metrics/digits/cnn/trades/seed1.json and 1 more, which "
        "params.yaml no longer makes (a method or seed dropped?); regenerate it with "
        f"`{COMMAND} --experiments demo demo-b` (then `git add dvc.yaml`), and run again\n")
    assert output.read_text() == written


def test_a_stage_of_a_dropped_experiment_is_stale_not_an_error(root: Path,
                                                                capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    output = root / "dvc.yaml"
    assert dvc_yaml.main(["--root", str(root), "--experiments", "demo", "demo-b"]) == 0
    params = params_with({"demo": EXPERIMENTS["demo"]})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert dvc_yaml.check(root, output, None, False) == 2
    assert capsys.readouterr().err.startswith(
        f"dvc_yaml: {output} lists results/metrics/demo-b.json and 3 more, which params.yaml no "
        f"longer makes (a method or seed dropped?); regenerate it with `{COMMAND}` (")


# --- slurm_preflight --------------------------------------------------------------------------

def args_to_api(args: Any) -> Any:
    """Named as snakemake.cli's function whose local `args` are the command line's."""
    return preflight.cli_args()


def not_args_to_api(args: Any) -> Any:
    return preflight.cli_args()


def test_the_command_lines_args_are_args_to_apis_with_an_executor() -> None:
    args = SimpleNamespace(executor="slurm", dryrun=False)
    assert args_to_api(args) is args
    assert not_args_to_api(args) is None
    assert args_to_api(SimpleNamespace(dryrun=True)) is None


def test_a_raw_number_is_an_int() -> None:
    assert preflight.plain(SimpleNamespace(raw="32000")) == 32000
    assert preflight.plain(" 12 ") == 12 and isinstance(preflight.plain("4000"), int)
    assert preflight.plain("16G") == "16G" and preflight.plain(8) == 8


def test_the_keys_the_docs_and_the_plugin_name_pass_a_misspelt_one_does_not() -> None:
    known = {"slurm_partition": "gpu", "slurm_account": "lab", "slurm_extra": "--qos=low",
             "runtime": 60, "mem_mb": 1000, "gpu": 1, "cpus_per_task": 2, "constraint": "a100"}
    preflight.check_keys(known, {"train": known}, {"train": 4}, {"train"})
    with pytest.raises(PreflightError) as error:
        preflight.check_keys({"mem_gb": 4}, {}, {}, {"train"})
    assert "unknown resource 'mem_gb' in the profile's default-resources" in str(error.value)
    assert "_cores" not in str(error.value) and "_nodes" not in str(error.value)
    with pytest.raises(PreflightError) as error:
        preflight.check_keys({}, {"trian": {"mem_mb": 1}}, {}, {"train"})
    assert str(error.value) == ("the profile's set-resources names rule 'trian', which this "
                                "workflow has not (did you mean train?); its rules: train")


def fake_cluster(monkeypatch: pytest.MonkeyPatch, sinfo: str = "cpu*|(null)|8|16000",
                 missing: tuple[str, ...] = ()) -> list[tuple[list[str], dict[str, Any]]]:
    """The Slurm client on PATH but `missing`, and sinfo printing `sinfo`; its calls."""
    calls = []

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 0, sinfo + "\n", "")

    monkeypatch.setattr(preflight.shutil, "which",
                        lambda tool: None if tool in missing else f"/usr/bin/{tool}")
    monkeypatch.setattr(preflight.subprocess, "run", run)
    return calls


def test_each_missing_client_command_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cluster(monkeypatch, missing=("sinfo",))
    with pytest.raises(PreflightError) as error:
        preflight.check_client()
    assert str(error.value).startswith("the Slurm client commands are not on PATH: sinfo not "
                                       "found;")


SINFO = "\n".join([
    "cpu*|(null)|8|16000",            # the default partition, two node groups: the largest
    "cpu*|(null)|4|8000",
    "mix|gpu:a100:4(S:0-1)|32|128000",  # GPUs on one node group only
    "mix|(null)|64+|256000+",
    "shared|shard:2,gpu:a100:1|4|4000",  # GPUs as the second gres item
    "odd|(null)|N/A|N/A",
    "",
    "|||",
    "a line that is no partition"])


def test_sinfo_is_read_node_group_by_node_group(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_cluster(monkeypatch, SINFO)
    assert preflight.partitions() == {
        "cpu": Partition("cpu", default=True, cpus=8, mem_mb=16000),
        "mix": Partition("mix", cpus=64, mem_mb=256000, gpus=True),
        "shared": Partition("shared", cpus=4, mem_mb=4000, gpus=True),
        "odd": Partition("odd")}
    [(cmd, kwargs)] = calls
    assert cmd == ["sinfo", "-h", "-o", "%P|%G|%c|%m"]  # -h: no header line as a partition
    assert kwargs["timeout"] > 0


def test_sinfo_that_fails_or_hangs_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(cmd, 1, "", "slurm_load_partitions: Unable to contact "
                                                       "slurm controller\nmore\n")

    monkeypatch.setattr(preflight.subprocess, "run", failing)
    with pytest.raises(PreflightError) as error:
        preflight.partitions()
    assert str(error.value) == ("sinfo cannot reach the cluster (slurm_load_partitions: Unable to "
                                "contact slurm controller); check `sinfo` by hand (and SLURM_CONF "
                                "where the cluster needs one)")

    def hanging(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(preflight.subprocess, "run", hanging)
    with pytest.raises(PreflightError) as error:
        preflight.partitions()
    assert str(error.value).startswith("sinfo did not answer within 30 s")


CLUSTER = {"gpu": Partition("gpu", cpus=32, mem_mb=128000, gpus=True),  # not the default, first
           "cpu": Partition("cpu", default=True, cpus=8, mem_mb=16000)}


def refused(jobs: dict[str, Job], found: dict[str, Partition] = CLUSTER) -> str:
    with pytest.raises(PreflightError) as error:
        preflight.check_jobs(jobs, found)
    return str(error.value)


def test_a_job_goes_to_its_own_partition_or_the_default() -> None:
    assert "partition cpu has no GPUs; set slurm_partition to one with GPUs (gpu), or use" in \
        refused({"train": Job(None, gpu=1)})
    preflight.check_jobs({"train": Job("gpu", threads=32, mem_mb=128000, gpu=1)}, CLUSTER)
    # a job equal to the largest node fits
    preflight.check_jobs({"train": Job(None, threads=8, mem_mb=16000, gpu=0)}, CLUSTER)
    assert refused({"train": Job(None)}, {"a": Partition("a")}) == (
        "rule train names no slurm_partition and the cluster has no default one; set "
        "slurm_partition in the profile's default-resources to one of: a")


def test_more_cpus_or_memory_than_the_largest_node_is_refused_every_rule_checked() -> None:
    line = refused({"train": Job(None, threads=9, sources={"threads": "the profile's set-threads: "
                                                                      "train"})})
    assert line.startswith("rule train asks for 9 CPUs (the profile's set-threads: train) but the "
                           "largest node of partition cpu has 8")
    assert refused({"train": Job(None, mem_mb=16001)}).startswith("rule train asks for 16001 MB")
    assert refused({"a": Job(None), "b": Job(None, threads=9)}).startswith("rule b asks for 9 CPUs")
    # sizes sinfo did not give as numbers refuse nothing
    preflight.check_jobs({"train": Job(None, threads=64, mem_mb=10 ** 6)},
                         {"odd": Partition("odd", default=True)})


def test_cpus_per_task_and_mem_mb_per_cpu_are_what_sbatch_is_asked() -> None:
    """The pinned plugins (slurm 2.8.0's submit_string, with jobstep 0.6.1's get_cpu_setting)
    send --cpus-per-task from cpus_per_task (at least 1) in place of threads, and --mem-per-cpu
    from mem_mb_per_cpu in place of mem_mb: a node needs mem_mb_per_cpu × those CPUs. Each key
    counts only when truthy there (`if job.resources.get(...)`): 0 is unset."""
    sources = {"cpus_per_task": "the profile's default-resources: cpus_per_task",
               "mem_mb_per_cpu": "rule train's mem_mb_per_cpu"}
    assert refused({"train": Job(None, threads=1, cpus_per_task=9, sources=sources)}).startswith(
        "rule train asks for 9 CPUs (the profile's default-resources: cpus_per_task) but the "
        "largest node of partition cpu has 8")
    # threads beyond the node are not what sbatch is asked when cpus_per_task is set
    preflight.check_jobs({"train": Job(None, threads=64, cpus_per_task=8)}, CLUSTER)
    preflight.check_jobs({"train": Job(None, threads=64, cpus_per_task=-1)}, CLUSTER)  # none: 1
    # cpus_per_task: 0 is unset: sbatch is asked --cpus-per-task=<threads>
    assert refused({"train": Job(None, threads=64, cpus_per_task=0)}).startswith(
        "rule train asks for 64 CPUs")
    assert refused({"train": Job(None, threads=4, mem_mb=10, mem_mb_per_cpu=4001,
                                 sources=sources)}) .startswith(
        "rule train asks for 16004 MB (rule train's mem_mb_per_cpu = 4001 MB per CPU × 4 CPUs) "
        "but the largest node of partition cpu has 16000")
    # 4000 MB × 4 CPUs = 16000 fits; mem_mb beyond the node is not asked when per CPU is set
    preflight.check_jobs({"train": Job(None, threads=4, mem_mb=10 ** 6, mem_mb_per_cpu=4000)},
                         CLUSTER)
    assert "asks for 18000 MB" in refused(
        {"train": Job(None, threads=1, cpus_per_task=3, mem_mb_per_cpu=6000)})
    # mem_mb_per_cpu: 0 is unset: sbatch is asked --mem <mem_mb>
    assert refused({"train": Job(None, threads=1, mem_mb=16001, mem_mb_per_cpu=0)}).startswith(
        "rule train asks for 16001 MB")


def test_cpus_per_gpu_times_the_gpus_is_what_a_gpu_job_asks() -> None:
    """get_cpu_setting (jobstep 0.6.1): a GPU job without cpus_per_task is sent
    --cpus-per-gpu=N (with --gpus G) in place of threads, so a node needs N × G CPUs; N of 0 or
    less sends no CPU option; a job without GPUs ignores cpus_per_gpu."""
    sources = {"cpus_per_gpu": "the profile's set-resources: train: cpus_per_gpu"}
    line = refused({"train": Job("gpu", threads=1, gpu=2, cpus_per_gpu=17, sources=sources)})
    assert line.startswith("rule train asks for 34 CPUs (the profile's set-resources: train: "
                           "cpus_per_gpu = 17 per GPU × 2 GPUs) but the largest node of "
                           "partition gpu has 32"), line
    preflight.check_jobs({"train": Job("gpu", threads=64, gpu=2, cpus_per_gpu=16)}, CLUSTER)
    preflight.check_jobs({"train": Job("gpu", threads=64, gpu=2, cpus_per_gpu=-1)}, CLUSTER)
    assert "asks for 64 CPUs" in refused({"train": Job("gpu", threads=64, gpu=2,
                                                       cpus_per_gpu=0)})
    preflight.check_jobs({"train": Job(None, threads=8, cpus_per_gpu=64)}, CLUSTER)  # no GPU
    # cpus_per_task wins over cpus_per_gpu, and memory per CPU counts the GPUs' CPUs
    preflight.check_jobs({"train": Job("gpu", gpu=2, cpus_per_task=4, cpus_per_gpu=64)}, CLUSTER)
    assert "asks for 160000 MB" in refused({"train": Job("gpu", gpu=2, cpus_per_gpu=10,
                                                         mem_mb_per_cpu=8000)})


@pytest.mark.parametrize("job, key", [
    (Job(None, cpus_per_task="four"), "cpus_per_task"),
    (Job(None, cpus_per_task=2.5), "cpus_per_task"),
    (Job("gpu", gpu=1, cpus_per_gpu="8c"), "cpus_per_gpu")])
def test_cpus_that_are_not_a_whole_number_are_refused_at_load(job: Job, key: str) -> None:
    """get_cpu_setting (jobstep 0.6.1) stops a job whose truthy cpus_per_task, or a GPU job's
    cpus_per_gpu, is not an int ("must be an integer"), only when it submits it: refused before."""
    job.sources = {key: f"the profile's default-resources: {key}"}
    assert refused({"train": job}) == (
        f"rule train's {key} is {getattr(job, key)!r} (the profile's default-resources: {key}), "
        "not a whole number; the SLURM plugin takes only whole numbers of CPUs: give one in the "
        "profile")


def test_cpus_the_plugin_does_not_read_are_not_refused() -> None:
    """Falsy keys are unset there, and cpus_per_gpu counts for GPU jobs only."""
    preflight.check_jobs({"train": Job(None, threads=2, cpus_per_task="")}, CLUSTER)
    preflight.check_jobs({"train": Job(None, threads=2, cpus_per_gpu="8c")}, CLUSTER)
    preflight.check_jobs({"train": Job("gpu", gpu=1, cpus_per_task=4, cpus_per_gpu="8c")},
                         CLUSTER)


def test_each_number_names_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cluster(monkeypatch)
    with pytest.raises(PreflightError) as error:  # the rule's own mem_mb, not default-resources'
        preflight.check({"mem_mb": 1000}, {}, {"evaluate": 2},
                        {"train": {"_cores": 1, "mem_mb": 32000}, "evaluate": {"_cores": 2}})
    assert "32000 MB (rule train's mem_mb)" in str(error.value)
    with pytest.raises(PreflightError) as error:
        preflight.check({}, {}, {"evaluate": 2},
                        {"train": {"_cores": 16}, "evaluate": {"_cores": 2}})
    assert "16 CPUs (rule train's threads)" in str(error.value)
    with pytest.raises(PreflightError) as error:
        preflight.check({"cpus_per_task": 12}, {}, {}, {"train": {"_cores": 1,
                                                                  "cpus_per_task": 12}})
    assert "12 CPUs (the profile's default-resources: cpus_per_task)" in str(error.value)
    # a local rule may be named in set-resources and set-threads
    preflight.check({}, {"table": {"mem_mb": 100}}, {"table": 1}, {"train": {"_cores": 1}},
                    {"table"})


def workflow(rules: list[SimpleNamespace], local: set[str] = frozenset(),
             default: dict | None = None, resources: dict | None = None,
             threads: dict | None = None) -> SimpleNamespace:
    settings = SimpleNamespace(default_resources=default, overwrite_resources=resources,
                               overwrite_threads=threads)
    return SimpleNamespace(resource_settings=settings, _localrules=local, rules=rules)


def rule(name: str, norun: bool = False, **resources: Any) -> SimpleNamespace:
    return SimpleNamespace(name=name, norun=norun, resources=resources)


def test_the_slurm_executor_is_checked_submitted_rules_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cluster(monkeypatch)
    args = SimpleNamespace(executor="slurm", dryrun=False)
    monkeypatch.setattr(preflight, "cli_args", lambda: args)
    big = {"_cores": 64}
    fine = rule("train", _cores=1, mem_mb=SimpleNamespace(raw="1000"))
    ok = workflow([fine, rule("table", **big), rule("demo", norun=True, **big)], local={"table"},
                  resources={"table": {"mem_mb": 10}}, threads={"table": 1})
    assert preflight.problem(ok) == (None, False)
    too_much = workflow([rule("train", _cores=1, mem_mb=SimpleNamespace(raw="32000"))])
    problem, dry = preflight.problem(too_much)
    assert problem.startswith("rule train asks for 32000 MB") and dry is False
    for bad in (workflow([fine], default={"slurm_partiton": "cpu"}),
                workflow([fine], resources={"train": {"runtme": 5}}),
                workflow([fine], threads={"trian": 1})):
        assert preflight.problem(bad)[0] is not None
    args.dryrun = True
    assert preflight.problem(too_much)[1] is True
    args.executor = "slurm-jobstep"  # inside a job: nothing checked
    assert preflight.problem(too_much) == (None, True)
