rule table:
    """One experiment's table: seeds aggregated per method, rendered as LaTeX and CSV."""
    input:
        get_experiment_metrics,
    output:
        tex="results/tables/{experiment}.tex",
        csv=report(
            "results/tables/{experiment}.csv",
            caption="../report/table.rst",
            category="Tables",
            labels={"experiment": "{experiment}"},
        ),
        summary="results/metrics/{experiment}.json",
        md="results/tables/{experiment}.md",
        paired_csv=report(
            "results/tables/{experiment}-paired.csv",
            caption="../report/paired.rst",
            category="Tables",
            labels={"experiment": "{experiment}", "kind": "paired comparison"},
        ),
        paired_tex="results/tables/{experiment}-paired.tex",
    log:
        "results/logs/table/{experiment}.log",
    benchmark:
        "results/benchmarks/table/{experiment}.tsv"
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        experiment=get_table_params,
    shell:
        "wscat table --params {params.params_file} --experiment {wildcards.experiment}"
        " --tex {output.tex} --csv {output.csv} --summary {output.summary} --md {output.md}"
        " --paired-csv {output.paired_csv} --paired-tex {output.paired_tex}"
        " {input} > {log} 2>&1"
