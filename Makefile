# make venv | demo | table2-digits | ablation-digits | paper-digits | readme | report | test |
# test-fast | clean
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
STAMP := $(VENV)/.installed
export XDG_CACHE_HOME ?= $(CURDIR)/.cache
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# pip on this machine warns about every configured location it ignores; keep real errors.
QUIET_PIP = 2> >(grep -v '^WARNING: Location .* is ignored' >&2)

SNAKEMAKE = $(VENV)/bin/snakemake --cores 2 --

.PHONY: venv demo table2-digits ablation-digits paper-digits readme report test test-fast clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt -r requirements-dev.txt $(QUIET_PIP)
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e . $(QUIET_PIP)
	touch $@

# On a CPU the gpu resource would only serialise the jobs; on a GPU node add --resources gpu=1.
# The demo: Standard, TRADES, MT, RST and WSCAT on digits, 3 seeds, every attack on every test
# image, and the paired comparison against WSCAT (README, "The demo").
demo: venv
	$(SNAKEMAKE) results/tables/digits.tex

# The longer digits targets (docs/digits-tier.md, "Longer targets"): the nine-method Table 2,
# the ablation (Table 5) and every table and figure of the paper on digits (with AA-paper, NRF
# and checks).
table2-digits: venv
	$(SNAKEMAKE) results/tables/digits-table2.tex

ablation-digits: venv
	$(SNAKEMAKE) results/tables/digits-ablation.tex

paper-digits: venv
	$(SNAKEMAKE) results/paper/digits/index.md

# Paste the demo's Markdown twin (results/tables/digits.md) into the README.
readme: demo
	$(VENV)/bin/python workflow/scripts/readme_tables.py README.md results/tables/digits.md

# The README's data-flow picture: the rule graph of every digits table and figure, laid out by
# Graphviz (needs `dot`, e.g. apt-get install graphviz). Rerun after adding or renaming a rule.
.PHONY: rulegraph
rulegraph: venv
	$(VENV)/bin/python workflow/scripts/rulegraph.py docs/rulegraph.svg results/paper/digits/index.md

# Snakemake's HTML report of the demo: tables, per-run metrics and training logs with captions.
report: demo
	$(VENV)/bin/snakemake --report results/report.html -- results/tables/digits.tex

# Two workers (the CI machine's two cores; the pipelines' Snakemake runs leave one idle), each
# taking whole files so that a module's fixture (a tiny pipeline run) is built once.
# pytest's exit status 5, no test collected, fails both targets.
PYTEST = $(VENV)/bin/pytest -q -n 2 --dist loadfile

# Every test (CI runs this).
test: venv
	$(PYTEST) tests

# The inner loop: every test but those marked slow (under 2 minutes).
test-fast: venv
	$(PYTEST) -m "not slow" tests

clean:
	rm -rf results/* .snakemake
	touch results/.gitkeep
