rule evaluate:
    """The paper's five attacks (Natural, FGSM, PGD-20, CW-20, standard AutoAttack) and their
    Mean on one checkpoint, with per-image correctness for the paired comparison."""
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
    benchmark:
        "results/benchmarks/evaluate/{dataset}/{model}/{method}/seed{seed}.tsv"
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_evaluate_params,
    shell:
        "wscat evaluate --part core --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"


rule evaluate_extra:
    """Beyond the paper's five: its AutoAttack variant (AA-paper), NRF and the gradient-masking
    checks, for the paper tier's tables."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
        core="results/metrics/{dataset}/{model}/{method}/seed{seed}.json",
    output:
        "results/metrics/{dataset}/{model}/{method}/seed{seed}-extra.json",
    log:
        "results/logs/evaluate_extra/{dataset}/{model}/{method}/seed{seed}.log",
    benchmark:
        "results/benchmarks/evaluate_extra/{dataset}/{model}/{method}/seed{seed}.tsv"
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_evaluate_extra_params,
    shell:
        "wscat evaluate --part extra --core {input.core} --params {params.params_file}"
        " --dataset {wildcards.dataset} --model {wildcards.model} --method {wildcards.method}"
        " --seed {wildcards.seed} --split {input.split} --checkpoint {input.checkpoint}"
        " --out {output} --threads {threads} > {log} 2>&1"
