for fetch_rule, fetch_dataset, fetch_files in get_fetch_groups():

    rule:
        """A dataset's archives under data/raw/: downloaded (CIFAR) or placed by hand, md5-checked."""
        name:
            fetch_rule
        output:
            fetch_files,
        log:
            f"results/logs/fetch/{fetch_dataset}.log",
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
    """Class-balanced labelled / unlabelled / validation indices for one seed."""
    input:
        get_split_input,
    output:
        "results/splits/{dataset}/seed{seed}.npz",
    log:
        "results/logs/split/{dataset}/seed{seed}.log",
    benchmark:
        "results/benchmarks/split/{dataset}/seed{seed}.tsv"
    conda:
        "../envs/wscat.yaml"
    threads: 1
    params:
        params_file=PARAMS,
        split=get_split_params,
    shell:
        "wscat split --params {params.params_file} --dataset {wildcards.dataset}"
        " --seed {wildcards.seed} --out {output} > {log} 2>&1"
