rule pseudo_label:
    """The labeler's predictions on the unlabelled part (and their accuracy, per class)."""
    input:
        split=get_split,
        checkpoint=get_labeler_checkpoint,
    output:
        labels=paths.PSEUDO_LABELS,
        metrics=report(
            paths.PSEUDO_ACCURACY,
            caption="../report/pseudo.rst",
            category="Pseudo-labels",
            subcategory="{dataset} / {model}",
            labels=labels.pseudo,
        ),
    log:
        paths.log("pseudo_label", "{dataset}/{model}/{labeler}/seed{seed}"),
    benchmark:
        paths.benchmark("pseudo_label", "{dataset}/{model}/{labeler}/seed{seed}")
    priority: get_priority("pseudo_label")
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        training=get_training_fingerprint,
    shell:
        "wscat pseudo-label --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --labeler {wildcards.labeler} --seed {wildcards.seed}"
        " --split {input.split} --checkpoint {input.checkpoint}"
        " --out {output.labels} --metrics {output.metrics} --threads {threads} > {log} 2>&1"
