"""The paper's tables and figures, per tier of params.yaml `paper` (README, "Every table and figure").

results/paper/{tier}/index.md builds them all; each table, companion and figure is a target too.
wscat.report.paper names every input, for these rules and for the `wscat` commands alike.
"""


rule paper_table:
    """One of the paper's tables (Tab-datasets, Tab-RQ1-*, Tab-mode, Tab-ap-*, tab-sup, Tab-ap-time)."""
    input:
        get_paper_table_input,
    output:
        tex="results/paper/{tier}/{label}.tex",
        csv=report(
            "results/paper/{tier}/{label}.csv",
            caption="../report/paper_table.rst",
            category="Paper tables",
            subcategory="{tier}",
            labels={"table": "{label}"},
        ),
    log:
        "results/logs/paper/{tier}/{label}.log",
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        config=get_paper_section,
    shell:
        "wscat paper-table --params {params.params_file} --tier {wildcards.tier}"
        " --label {wildcards.label} --tex {output.tex} --csv {output.csv} > {log} 2>&1"


rule paper_compare:
    """A table beside the paper's numbers (wscat/report/reported.csv): ours, theirs, difference."""
    input:
        "results/paper/{tier}/{label}.csv",
    output:
        tex="results/paper/{tier}/{label}-vs-paper.tex",
        csv=report(
            "results/paper/{tier}/{label}-vs-paper.csv",
            caption="../report/paper_compare.rst",
            category="Paper tables",
            subcategory="{tier}: ours against the paper",
            labels={"table": "{label}"},
        ),
    log:
        "results/logs/paper/{tier}/{label}-vs-paper.log",
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        cells=get_paper_cells_flag,
    shell:
        "wscat paper-compare --label {wildcards.label} --table-csv {input}{params.cells}"
        " --tex {output.tex} --csv {output.csv} > {log} 2>&1"


rule paper_figure:
    """One of the paper's figures (Fig-similarity, Fig-beta, Fig-unlabel, Fig-feature)."""
    input:
        get_paper_figure_input,
    output:
        pdf="results/paper/{tier}/{figure}.pdf",
        png=report(
            "results/paper/{tier}/{figure}.png",
            caption="../report/paper_figure.rst",
            category="Paper figures",
            subcategory="{tier}",
            labels={"figure": "{figure}"},
        ),
    log:
        "results/logs/paper/{tier}/{figure}.log",
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_paper_section,
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    shell:
        "wscat paper-figure --params {params.params_file} --tier {wildcards.tier}"
        " --figure {wildcards.figure} --out {params.prefix} --threads {threads} > {log} 2>&1"


rule paper_index:
    """Every table, companion, figure and training curve of a tier, listed in index.md."""
    input:
        lambda wildcards: paper_files.tier_outputs(config, wildcards.tier),
    output:
        "results/paper/{tier}/index.md",
    log:
        "results/logs/paper/{tier}/index.log",
    conda:
        "../envs/wscat.yaml"
    params:
        params_file=PARAMS,
    shell:
        "wscat paper-index --params {params.params_file} --tier {wildcards.tier} --out {output}"
        " > {log} 2>&1"


rule curves:
    """Training curves of one run: loss terms and validation accuracies per epoch."""
    input:
        "results/models/{dataset}/{model}/{method}/seed{seed}/train_log.csv",
    output:
        pdf="results/curves/{dataset}/{model}/{method}/seed{seed}.pdf",
        png=report(
            "results/curves/{dataset}/{model}/{method}/seed{seed}.png",
            caption="../report/curves.rst",
            category="Training curves",
            subcategory="{dataset} / {model}",
            labels={"method": "{method}", "seed": "{seed}"},
        ),
    log:
        "results/logs/curves/{dataset}/{model}/{method}/seed{seed}.log",
    conda:
        "../envs/wscat.yaml"
    params:
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    shell:
        "wscat curves --train-log {input} --out {params.prefix}"
        " --title '{wildcards.dataset} / {wildcards.model} / {wildcards.method} / seed {wildcards.seed}'"
        " > {log} 2>&1"


rule validate:
    """Natural and PGD accuracy on the validation set: the beta-tuning rule of Fig-beta."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
    output:
        "results/validation/{dataset}/{model}/{method}/seed{seed}.json",
    log:
        "results/logs/validate/{dataset}/{model}/{method}/seed{seed}.log",
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_evaluate_params,
    shell:
        "wscat validate --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"
