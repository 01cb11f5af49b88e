rule train:
    """One method, one seed: the shared trainer with the method's loss."""
    input:
        unpack(get_pseudo_input),
        split=get_split,
    output:
        best="results/models/{dataset}/{model}/{method}/seed{seed}/best.pt",
        last="results/models/{dataset}/{model}/{method}/seed{seed}/last.pt",
        log=report(
            "results/models/{dataset}/{model}/{method}/seed{seed}/train_log.csv",
            caption="../report/train.rst",
            category="Training",
            subcategory="{dataset} / {model}",
            labels=get_train_labels,
        ),
        curves=directory("results/models/{dataset}/{model}/{method}/seed{seed}/dvclive"),
    log:
        "results/logs/train/{dataset}/{model}/{method}/seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{dataset}/{model}/{method}/seed{seed}.tsv"
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        pseudo=get_pseudo_flag,
        out_dir=get_out_dir,
        config=get_train_params,
    shell:
        "wscat train --params {params.params_file} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --seed {wildcards.seed}"
        " --split {input.split}{params.pseudo} --out-dir {params.out_dir}"
        " --threads {threads} > {log} 2>&1"
