#!/usr/bin/env bash
# Snakemake runs this inside a freshly created wscat.yaml environment, from the directory it was
# started in (the repository root): the rules call `wscat`, so the package goes in too, editable,
# so that the environment runs the checked-out code. Its dependencies are already in wscat.yaml.
set -euo pipefail
pip install --no-deps -e .
