rule evaluate:
    """The attack suite (natural, FGSM, PGD, CW, AutoAttack) on one checkpoint."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
    output:
        report(
            "results/metrics/{dataset}/{model}/{method}/seed{seed}.json",
            caption="../report/evaluate.rst",
            category="Per-run metrics",
            subcategory="{dataset} / {model}",
            labels=get_metrics_labels,
        ),
    log:
        "results/logs/evaluate/{dataset}/{model}/{method}/seed{seed}.log",
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_evaluate_params,
    shell:
        "wscat evaluate --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"
