rule train:
    """One method, one seed: the shared trainer with the method's loss; best.pt (the EMA at the
    selected epoch), last.pt, train_log.csv and dvclive/."""
    input:
        unpack(get_training_inputs),
        split=get_split,
    output:
        best=paths.BEST,
        last=paths.LAST,
        log=report(
            paths.TRAIN_LOG,
            caption="../report/train.rst",
            category="Training",
            subcategory="{dataset} / {model}",
            labels=labels.train,
        ),
        curves=directory(paths.DVCLIVE),
    log:
        paths.log("train", paths.RUN),
    benchmark:
        paths.benchmark("train", paths.RUN)
    priority: get_priority("train")
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        pseudo=get_training_flags,
        out_dir=lambda wildcards, output: os.path.dirname(output.best),  # not recorded: no re-runs
        config=get_train_params,
    shell:
        "wscat train --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split}{params.pseudo} --out-dir {params.out_dir}"
        " --threads {threads} > {log} 2>&1"
