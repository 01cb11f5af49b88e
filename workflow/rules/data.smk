for fetch_rule, fetch_dataset, fetch_files in wf.fetch_groups(config):

    rule:
        f"""{wf.fetch_description(config, fetch_dataset, fetch_files)}"""
        name:
            fetch_rule
        output:
            fetch_files,
        log:
            paths.log("fetch", fetch_dataset),
        localrule: True  # downloads need the submitting node's network
        conda:
            "../envs/wscat.yaml"
        threads: 1
        params:
            params_file=PARAMS,
            dataset=fetch_dataset,
        shell:
            "wscat fetch --params {params.params_file} --dataset {params.dataset} > {log} 2>&1"


rule split:
    """Class-balanced labelled / unlabelled / validation indices for one seed, with the
    dataset's test indices."""
    input:
        get_split_input,
    output:
        paths.SPLIT,
    log:
        paths.log("split", "{dataset}/seed{seed}"),
    benchmark:
        paths.benchmark("split", "{dataset}/seed{seed}")
    priority: get_priority("split")
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        split=get_split_params,
    shell:
        "wscat split --params {params.params_file} --dataset {wildcards.dataset}"
        " --seed {wildcards.seed} --out {output} > {log} 2>&1"
