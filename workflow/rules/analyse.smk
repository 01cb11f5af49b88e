"""The analysis step: what Fig-similarity and Fig-feature show, computed on their checkpoints
(embeddings, cosine similarities, t-SNE) and written to a file the paper_figure rule reads."""


rule analyse:
    """Embeddings of one dataset of a paper tier: cos(f(x), f(x')) per AE (Fig-similarity) or
    their t-SNE (Fig-feature)."""
    input:
        # the checkpoints and the split the file is computed from
        or_stop(lambda w: paper_files.analysis_inputs(config, w.tier, w.figure, w.dataset)),
    output:
        paths.ANALYSIS,
    log:
        paths.log("analyse", "{tier}/{figure}/{dataset}"),
    wildcard_constraints:
        figure=r"Fig-(similarity|feature)",
    conda:
        "../envs/wscat.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        params_file=PARAMS,
        config=get_analysis_params,
    shell:
        "wscat analyse --params {params.params_file} --tier {wildcards.tier}"
        " --figure {wildcards.figure} --dataset {wildcards.dataset} --out {output}"
        " --threads {threads} > {log} 2>&1"
