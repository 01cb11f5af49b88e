rule evaluate:
    """The paper's five attacks (Natural, FGSM, PGD-20, CW-20, standard AutoAttack) and their
    Mean on one checkpoint, with per-image correctness for the paired comparison."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
    output:
        report(
            paths.METRICS,
            caption="../report/evaluate.rst",
            category="Per-run metrics",
            subcategory="{dataset} / {model}",
            labels=labels.metrics,
        ),
    log:
        paths.log("evaluate", paths.RUN),
    benchmark:
        paths.benchmark("evaluate", paths.RUN)
    priority: get_priority("evaluate")
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_evaluate_params,
        training=get_training_fingerprint,
    shell:
        "wscat evaluate --part core --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"


rule evaluate_extra:
    """Beyond the paper's five: its AutoAttack variant (AA-paper), NRF and the gradient-masking
    checks, for the paper tier's tables and the robustness curves."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
        core=paths.METRICS,
    output:
        paths.EXTRA,
    log:
        paths.log("evaluate_extra", paths.RUN),
    benchmark:
        paths.benchmark("evaluate_extra", paths.RUN)
    priority: get_priority("evaluate_extra")
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_evaluate_extra_params,
        training=get_training_fingerprint,
    shell:
        "wscat evaluate --part extra --core {input.core} --params {params.params_file}"
        " --dataset {wildcards.dataset} --model {wildcards.model} --method {wildcards.method}"
        " --seed {wildcards.seed} --split {input.split} --checkpoint {input.checkpoint}"
        " --out {output} --threads {threads} > {log} 2>&1"


rule validate:
    """Natural and PGD accuracy on the validation set: the beta-tuning rule of Fig-beta."""
    input:
        split=get_split,
        checkpoint=get_checkpoint,
    output:
        paths.VALIDATION,
    log:
        paths.log("validate", paths.RUN),
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_validation_settings,
        training=get_training_fingerprint,
    shell:
        "wscat validate --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint} --out {output}"
        " --threads {threads} > {log} 2>&1"
