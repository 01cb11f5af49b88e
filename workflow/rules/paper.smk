"""The paper's tables and figures, per tier of params.yaml `paper` (README, "Every table and figure").

results/paper/{tier}/index.md builds them all; each table, companion and figure is a target too.
wscat.report.paper names every input, for these rules and for the `wscat` commands alike.
"""


rule paper_table:
    """One of the paper's tables (Tab-datasets, Tab-RQ1-*, Tab-mode, Tab-ap-*, tab-sup, Tab-ap-time)."""
    input:
        get_paper_table_input,
    output:
        tex=paths.PAPER_TABLE_TEX,
        csv=report(
            paths.PAPER_TABLE_CSV,
            caption="../report/paper_table.rst",
            category="Paper tables",
            subcategory="{tier}",
            labels={"table": "{label}"},
        ),
    log:
        paths.log("paper", "{tier}/{label}"),
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        config=get_paper_section,
        rebuild=get_paper_table_rebuild,
    shell:
        "wscat paper-table --params {params.params_file} --tier {wildcards.tier}"
        " --label {wildcards.label} --tex {output.tex} --csv {output.csv} > {log} 2>&1"


rule paper_compare:
    """A table beside the paper's numbers (wscat/report/reported.csv): ours, theirs, difference."""
    input:
        table=paths.PAPER_TABLE_CSV,
        reported=str(wf.paper.REPORTED),  # a corrected cell of the paper's redoes the companion
    output:
        tex=paths.PAPER_COMPARE_TEX,
        csv=report(
            paths.PAPER_COMPARE_CSV,
            caption="../report/paper_compare.rst",
            category="Paper tables",
            subcategory="{tier}: ours against the paper",
            labels={"table": "{label}"},
        ),
    log:
        paths.log("paper", "{tier}/{label}-vs-paper"),
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        cells=get_paper_cells_flag,
    shell:
        "wscat paper-compare --label {wildcards.label} --table-csv {input.table}{params.cells}"
        " --tex {output.tex} --csv {output.csv} > {log} 2>&1"


rule paper_figure:
    """One of the paper's figures (Fig-similarity, Fig-beta, Fig-unlabel, Fig-feature), or ours:
    robustness-curves (PGD accuracy against eps and steps, from the extra files of every run of
    each dataset's performance table)."""
    input:
        get_paper_figure_input,
    output:
        pdf=paths.PAPER_FIGURE_PDF,
        png=report(
            paths.PAPER_FIGURE_PNG,
            caption="../report/paper_figure.rst",
            category="Paper figures",
            subcategory="{tier}",
            labels={"figure": "{figure}"},
        ),
        csv=report(
            paths.PAPER_FIGURE_CSV,
            caption="../report/figure_numbers.rst",
            category="Paper figures",
            subcategory="{tier}: the numbers plotted",
            labels={"figure": "{figure}"},
        ),
    log:
        paths.log("paper", "{tier}/{figure}"),
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        config=get_paper_section,
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    shell:
        "wscat paper-figure --params {params.params_file} --tier {wildcards.tier}"
        " --figure {wildcards.figure} --out {params.prefix} > {log} 2>&1"


rule paper_index:
    """Every table, companion, figure and training curve of a tier, listed in index.md."""
    input:
        get_paper_outputs,
    output:
        paths.PAPER_INDEX,
    log:
        paths.log("paper", "{tier}/index"),
    conda:
        "../envs/wscat.yaml"
    params:
        params_file=PARAMS,
    shell:
        "wscat paper-index --params {params.params_file} --tier {wildcards.tier} --out {output}"
        " > {log} 2>&1"
