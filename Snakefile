# wscat: Weakly Supervised Contrastive Adversarial Training (Zhang et al., CVPR 2025), reproduced.
#
#   snakemake --cores 2 --resources gpu=1 -- results/tables/digits.tex
#
# Every knob is in params.yaml (validated against workflow/schemas/params.schema.yaml by
# workflow/rules/common.smk when the workflow loads); every rule calls one `wscat` subcommand.
# The `--` ends --resources, which takes any number of values.

from snakemake.utils import min_version

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/pseudo.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/paper.smk"


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
