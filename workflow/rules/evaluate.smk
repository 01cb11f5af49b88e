rule evaluate:
    """The attack suite (natural, FGSM, PGD, CW, AutoAttack) on one checkpoint."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
    output:
        "results/metrics/{dataset}/{model}/{method}/seed{seed}.json",
    log:
        "results/logs/evaluate/{dataset}/{model}/{method}/seed{seed}.log",
    params:
        params_file=PARAMS,
        config=get_evaluate_params,
    threads: 1
    resources:
        gpu=1,
    shell:
        "wscat evaluate --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"
