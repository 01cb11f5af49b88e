#!/usr/bin/env bash
# The pinned packages wscat imports that the lent GPU machine lacks (its image has torch, numpy,
# pandas, matplotlib, jinja2, scikit-learn, PyYAML, tqdm, ...; see the device notes' KINDS.md),
# installed here for its Python 3.12 on x86-64 into .whl/site (.whl/ is in .gitignore). Carry
# .whl and run with PYTHONPATH=$PWD/.whl/site there (DEVELOPERS.md, "The CIFAR-10 proxy on a
# lent GPU"). The list is what `import jsonschema, dvclive, pyautoattack` and a DVCLive logger
# load beyond that image. About 3 MB: pyautoattack's 45 MB of example models are dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
pin() { grep -i "^$1==" requirements.txt | cut -d= -f3; }
PACKAGES=(
  "jsonschema==$(pin jsonschema)" jsonschema-specifications==2025.9.1 referencing==0.37.0
  rpds-py==2026.9.1
  "dvclive==$(pin dvclive)" "dvc==$(pin dvc)" dvc-render==1.0.2 dvc-studio-client==0.23.0
  flatten-dict==0.5.0 funcy==2.1 ruamel.yaml==0.19.1 voluptuous==0.16.0 pydot==4.0.1
  wcwidth==0.9.4
  "pyautoattack==$(pin pyautoattack)"
)
rm -rf .whl/site
${PY:-python3} -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --target .whl/site "${PACKAGES[@]}" \
  2> >(grep -v '^WARNING: Location .* is ignored' >&2)
rm -rf .whl/site/pyautoattack/examples .whl/site/bin
du -sh .whl/site
