rule table:
    """One experiment's table: seeds aggregated per method, as LaTeX, long CSV and Markdown, the
    per-method summary JSON and the paired comparison against the reference (-paired.csv/.tex,
    and as a picture, -paired.pdf/.png: in Mean and on each attack)."""
    input:
        get_experiment_metrics,
    output:
        tex=paths.TABLE_TEX,
        csv=report(
            paths.TABLE_CSV,
            caption="../report/table.rst",
            category="Tables",
            labels={"experiment": "{experiment}"},
        ),
        summary=paths.SUMMARY,
        md=paths.TABLE_MD,
        paired_csv=report(
            paths.PAIRED_CSV,
            caption="../report/paired.rst",
            category="Tables",
            labels={"experiment": "{experiment}", "kind": "paired comparison"},
        ),
        paired_tex=paths.PAIRED_TEX,
        paired_pdf=paths.PAIRED_PDF,
        paired_png=report(
            paths.PAIRED_PNG,
            caption="../report/paired_figure.rst",
            category="Tables",
            labels={"experiment": "{experiment}", "kind": "paired comparison, as a picture"},
        ),
    log:
        paths.log("table", "{experiment}"),
    benchmark:
        paths.benchmark("table", "{experiment}")
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        experiment=get_table_params,
        rebuild=get_table_rebuild,
        paired_figure=lambda wildcards, output: output.paired_pdf[: -len(".pdf")],
    shell:
        "wscat table --params {params.params_file} --experiment {wildcards.experiment}"
        " --tex {output.tex} --csv {output.csv} --summary {output.summary} --md {output.md}"
        " --paired-csv {output.paired_csv} --paired-tex {output.paired_tex}"
        " --paired-figure {params.paired_figure} {input} > {log} 2>&1"


rule curves:
    """Training curves of one run: loss terms and validation accuracies per epoch."""
    input:
        paths.TRAIN_LOG,
    output:
        pdf=paths.CURVES_PDF,
        png=report(
            paths.CURVES_PNG,
            caption="../report/curves.rst",
            category="Training curves",
            subcategory="{dataset} / {model}",
            labels={"method": "{method}", "seed": "{seed}"},
        ),
    log:
        paths.log("curves", paths.RUN),
    conda:
        "../envs/wscat.yaml"
    params:
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    shell:
        "wscat curves --train-log {input} --out {params.prefix}"
        " --title '{wildcards.dataset} / {wildcards.model} / {wildcards.method} / seed {wildcards.seed}'"
        " > {log} 2>&1"


rule robustness_curves:
    """An experiment's robustness curves: PGD accuracy against eps and steps, every run (the
    numbers of the gradient-masking checks in its extra metrics file), beside its table."""
    input:
        get_robustness_inputs,
    output:
        pdf=paths.ROBUSTNESS_PDF,
        png=report(
            paths.ROBUSTNESS_PNG,
            caption="../report/robustness_curves.rst",
            category="Robustness curves",
            subcategory="the curves",
            labels={"experiment": "{experiment}"},
        ),
        csv=report(
            paths.ROBUSTNESS_CSV,
            caption="../report/figure_numbers.rst",
            category="Robustness curves",
            subcategory="the numbers plotted",
            labels={"experiment": "{experiment}"},
        ),
    log:
        paths.log("robustness_curves", "{experiment}"),
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        experiment=get_robustness_params,
        prefix=lambda wildcards, output: output.pdf[: -len(".pdf")],
    shell:
        "wscat robustness-curves --params {params.params_file} --experiment {wildcards.experiment}"
        " --out {params.prefix} > {log} 2>&1"
