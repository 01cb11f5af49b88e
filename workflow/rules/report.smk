rule table:
    """One experiment's table: seeds aggregated per method, rendered as LaTeX and CSV."""
    input:
        get_experiment_metrics,
    output:
        tex="results/tables/{experiment}.tex",
        csv="results/tables/{experiment}.csv",
        summary="results/metrics/{experiment}.json",
    log:
        "results/logs/table/{experiment}.log",
    params:
        params_file=PARAMS,
        experiment=get_table_params,
    threads: 1
    shell:
        "wscat table --params {params.params_file} --experiment {wildcards.experiment}"
        " --tex {output.tex} --csv {output.csv} --summary {output.summary}"
        " {input} > {log} 2>&1"
