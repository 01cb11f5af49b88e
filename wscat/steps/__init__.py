"""The pipeline's steps, one module each, each with a `run(...)`: it reads files, writes its
outputs atomically, and records a manifest. `wscat <step>` (wscat.cli), the Snakemake rules
(through the command line) and the Python API (wscat.api) all call these.

split, pseudo (pseudo-label), train, evaluate, validate, analyse (what Fig-similarity and
Fig-feature show, computed on checkpoints), table, and paper (the paper's tables, figures, index
and training curves)."""
