# wscat: Weakly Supervised Contrastive Adversarial Training (Zhang et al., CVPR 2025), reproduced.
#
#   snakemake --cores 2 --resources gpu=1 -- results/tables/digits.tex
#   snakemake --report results/report.html -- results/tables/digits.tex   # browse the results
#   snakemake --sdm conda --cores 2 -- results/tables/digits.tex  # each rule in workflow/envs/wscat.yaml
#
# Every knob is in params.yaml (validated once against workflow/schemas/params.schema.yaml by
# wscat.workflow when the workflow loads); every path is a pattern of wscat/paths.py; building
# the DAG imports no torch. Every rule calls one `wscat` subcommand,
# runs in the conda environment workflow/envs/wscat.yaml when asked to (--sdm conda), and marks
# the results a reader browses with report(..., caption="../report/<rule>.rst").
# The `--` ends --resources, which takes any number of values.

from snakemake.utils import min_version

from wscat.config import stop_on_bad_yaml

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
    all,
    split,
    table,
    paper_table,
    paper_compare,
    paper_index,
    curves,


rule all:
    """Every experiment's table."""
    input:
        get_all_targets(),
