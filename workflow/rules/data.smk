rule split:
    """Class-balanced labelled / unlabelled / validation indices for one seed."""
    output:
        "results/splits/{dataset}/seed{seed}.npz",
    log:
        "results/logs/split/{dataset}/seed{seed}.log",
    params:
        params_file=PARAMS,
        split=get_split_params,
    threads: 1
    shell:
        "wscat split --params {params.params_file} --dataset {wildcards.dataset}"
        " --seed {wildcards.seed} --out {output} > {log} 2>&1"
