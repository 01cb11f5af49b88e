"""The paper's tables and figures, per tier of params.yaml `paper` (README, "Every table and figure").

results/paper/{tier}/index.md builds them all; each table, companion and figure is a target too.
wscat.report.paper names every input, for these rules and for the `wscat` commands alike.
"""
from wscat.report import paper as paper_files


wildcard_constraints:
    tier=r"[a-z][a-z0-9_-]*",
    label=r"(Tab|tab)-[A-Za-z0-9-]+(?<!-vs-paper)",
    figure=r"Fig-[a-z]+",


def get_paper_table_input(wildcards):
    try:
        return paper_files.table_inputs(config, wildcards.tier, wildcards.label)
    except ConfigError as error:
        stop(str(error))


def get_paper_figure_input(wildcards):
    try:
        return paper_files.figure_inputs(config, wildcards.tier, wildcards.figure)
    except ConfigError as error:
        stop(str(error))


def get_paper_section(wildcards):
    """What a tier's outputs read from params.yaml: the tier, and every experiment it names."""
    tier = paper_files.tier_spec(config, wildcards.tier)
    experiments = {e[part]["experiment"] for e in tier["datasets"]
                   for part in ("performance", "ablation")}
    return to_json({"tier": tier,
                    "experiments": {name: config["experiments"][name] for name in sorted(experiments)}})


rule paper_table:
    """One of the paper's tables (Tab-datasets, Tab-RQ1-*, Tab-mode, Tab-ap-*, tab-sup, Tab-ap-time)."""
    input:
        get_paper_table_input,
    output:
        tex="results/paper/{tier}/{label}.tex",
        csv="results/paper/{tier}/{label}.csv",
    log:
        "results/logs/paper/{tier}/{label}.log",
    params:
        params_file=PARAMS,
        config=get_paper_section,
    threads: 1
    shell:
        "wscat paper-table --params {params.params_file} --tier {wildcards.tier}"
        " --label {wildcards.label} --tex {output.tex} --csv {output.csv} > {log} 2>&1"


rule paper_compare:
    """A table beside the paper's numbers (wscat/report/reported.csv): ours, theirs, difference."""
    input:
        "results/paper/{tier}/{label}.csv",
    output:
        tex="results/paper/{tier}/{label}-vs-paper.tex",
        csv="results/paper/{tier}/{label}-vs-paper.csv",
    log:
        "results/logs/paper/{tier}/{label}-vs-paper.log",
    threads: 1
    shell:
        "wscat paper-compare --label {wildcards.label} --table-csv {input}"
        " --tex {output.tex} --csv {output.csv} > {log} 2>&1"


rule paper_figure:
    """One of the paper's figures (Fig-similarity, Fig-beta, Fig-unlabel, Fig-feature)."""
    input:
        get_paper_figure_input,
    output:
        pdf="results/paper/{tier}/{figure}.pdf",
        png="results/paper/{tier}/{figure}.png",
    log:
        "results/logs/paper/{tier}/{figure}.log",
    params:
        params_file=PARAMS,
        config=get_paper_section,
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    threads: 1
    resources:
        gpu=1,
    shell:
        "wscat paper-figure --params {params.params_file} --tier {wildcards.tier}"
        " --figure {wildcards.figure} --out {params.prefix} --threads {threads} > {log} 2>&1"


rule paper_index:
    """Every table, companion, figure and training curve of a tier, listed in index.md."""
    input:
        lambda wildcards: paper_files.tier_outputs(config, wildcards.tier),
    output:
        "results/paper/{tier}/index.md",
    params:
        params_file=PARAMS,
    shell:
        "wscat paper-index --params {params.params_file} --tier {wildcards.tier} --out {output}"


rule curves:
    """Training curves of one run: loss terms and validation accuracies per epoch."""
    input:
        "results/models/{dataset}/{model}/{method}/seed{seed}/train_log.csv",
    output:
        pdf="results/curves/{dataset}/{model}/{method}/seed{seed}.pdf",
        png="results/curves/{dataset}/{model}/{method}/seed{seed}.png",
    params:
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    shell:
        "wscat curves --train-log {input} --out {params.prefix}"
        " --title '{wildcards.dataset} / {wildcards.model} / {wildcards.method} / seed {wildcards.seed}'"


rule validate:
    """Natural and PGD accuracy on the validation set: the beta-tuning rule of Fig-beta."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
    output:
        "results/validation/{dataset}/{model}/{method}/seed{seed}.json",
    log:
        "results/logs/validate/{dataset}/{model}/{method}/seed{seed}.log",
    params:
        params_file=PARAMS,
        config=get_evaluate_params,
    threads: 1
    resources:
        gpu=1,
    shell:
        "wscat validate --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"
