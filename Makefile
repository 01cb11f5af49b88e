# make venv | demo | report | test | clean
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
STAMP := $(VENV)/.installed
export XDG_CACHE_HOME ?= $(CURDIR)/.cache
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# pip on this machine warns about every configured location it ignores; keep real errors.
QUIET_PIP = 2> >(grep -v '^WARNING: Location .* is ignored' >&2)

.PHONY: venv demo report test clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt -r requirements-dev.txt $(QUIET_PIP)
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e . $(QUIET_PIP)
	touch $@

# On a CPU the gpu resource would only serialise the jobs; on a GPU node add --resources gpu=1.
demo: venv
	$(VENV)/bin/snakemake --cores 2 -- results/tables/digits.tex results/tables/digits-ablation.tex

# Snakemake's HTML report of the demo: tables, per-run metrics and training logs with captions.
report: demo
	$(VENV)/bin/snakemake --report results/report.html -- results/tables/digits.tex results/tables/digits-ablation.tex

test: venv
	$(VENV)/bin/pytest -q tests

clean:
	rm -rf results/* .snakemake
	touch results/.gitkeep
