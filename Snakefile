# wscat: Weakly Supervised Contrastive Adversarial Training (Zhang et al., CVPR 2025), reproduced.
#
#   snakemake                      # the demo's table (results/tables/digits.tex), 2 cores
#   snakemake --list-target-rules  # every other target, by name: table_<experiment>,
#                                  # robustness_<experiment>, paper_<tier>
#   snakemake paper_digits         # or by file: snakemake -- results/paper/digits/index.md
#   snakemake --resources gpu=1 -- results/tables/cifar10.tex   # a GPU node: one GPU job at a time
#   snakemake --report results/report.html -- results/tables/digits.tex   # browse the results
#   snakemake --sdm conda -- results/tables/digits.tex  # each rule in workflow/envs/wscat.yaml
#
# profiles/default (a link to workflow/profiles/local) is loaded without a flag: 2 cores, a
# failed job's log on the terminal.
#
# Every knob is in params.yaml (validated once against workflow/schemas/params.schema.yaml by
# wscat.workflow when the workflow loads); every path is a pattern of wscat/paths.py; building
# the DAG imports no torch (but for your own method's file, checked as it loads). Every rule calls one `wscat` subcommand,
# runs in the conda environment workflow/envs/wscat.yaml when asked to (--sdm conda), and marks
# the results a reader browses with report(..., caption="../report/<name>.rst").
# The `--` ends --resources, which takes any number of values.

from snakemake.utils import min_version

from wscat.config import stop_on_bad_yaml
from wscat.errors import stop_on_unknown_target

min_version("9.0")
stop_on_bad_yaml("params.yaml")  # one line with its line and column


configfile: "params.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/pseudo.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/analyse.smk"


localrules:
    demo,
    split,
    table,
    paper_table,
    paper_compare,
    paper_figure,
    paper_index,
    curves,
    robustness_curves,


rule demo:
    """The demo's table: a bare `snakemake`; the other targets: `snakemake --list-target-rules`."""
    input:
        get_default_targets(),


for target_rule, target_files, target_doc in get_named_targets():
    if target_rule in [existing.name for existing in workflow.rules]:
        stop(
            f"target rule {target_rule} (from params.yaml) clashes with a rule of that name; "
            "rename the experiment or paper tier"
        )

    rule:
        f"""{target_doc}"""
        name:
            target_rule
        input:
            target_files,
        localrule: True


# Last, once every rule exists: a target no rule makes ends the run in one line.
stop_on_unknown_target(workflow)
check_slurm_run()  # the slurm executor: its profile and cluster, before any job
