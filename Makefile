# make help | venv | lock | demo | robustness-demo | table2-digits | ablation-digits | paper-digits |
# fresh-seeds-digits | readme | rulegraph | report | pull | test | test-fast | test-slurm | clean
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# A bare `make` lists the targets: it starts nothing that takes minutes.
.DEFAULT_GOAL := help

VENV := .venv
STAMP := $(VENV)/.installed
export XDG_CACHE_HOME ?= $(CURDIR)/.cache
export DVC_NO_ANALYTICS := 1
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# pip on this machine warns about every configured location it ignores; keep real errors.
QUIET_PIP = 2> >(grep -v '^WARNING: Location .* is ignored' >&2)

# Jobs side by side. Each job computes on one thread, so any number gives the same results bit for
# bit (so do the slurm-cpu profile's jobs: one thread each); more threads per job (--set-threads)
# change CPU results in the last bits. On a bigger machine `make demo CORES=8` (a job holds up to
# ~0.8 GB of memory).
CORES ?= 2
# Snakemake's lock on the checkout (.snakemake/locks), left by a Snakemake stopped without its
# cleanup (killed, or its terminal closed), stops the target before Snakemake with the command
# that removes it (Snakemake's own LockException names none a make user can type); the lock is
# kept: another Snakemake may run here, or on another machine sharing the folder.
LOCK_HELD = Snakemake's lock is on this checkout (.snakemake/locks): another snakemake runs here, \
	or one was stopped without its cleanup (killed, or its terminal closed); when none runs, \
	`$(VENV)/bin/snakemake --unlock`, then make $@ again continues where it stopped (finished \
	jobs kept, trainings resumed from their last epoch)
SNAKEMAKE = $(if $(wildcard .snakemake/locks/*),$(error $(LOCK_HELD)),$(VENV)/bin/snakemake \
	--cores $(CORES) --)
# Before any job: dvc_yaml.py --check. A dvc.yaml that lists other runs than params.yaml makes (a
# method or seed added or dropped) stops the target with the command that regenerates it, before
# Snakemake's jobs rather than after them (dvc commit would fail on it). A copy outside git skips it.
DVC_CHECK = git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0; \
	$(VENV)/bin/python workflow/scripts/dvc_yaml.py --check
# Then record in dvc.lock what Snakemake built for a dvc.yaml stage, so that `dvc status` agrees
# with it and `git add dvc.lock` has a file to add (docs/workflow.md, "DVC").
DVC_RECORD = git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0; \
	$(VENV)/bin/dvc commit --force

.PHONY: help venv demo robustness-demo table2-digits ablation-digits paper-digits \
	fresh-seeds-digits readme report pull test test-fast test-slurm clean

help:
	@echo "make demo                the demo: Standard, TRADES, MT, RST and WSCAT on the embedded digits,"
	@echo "                         3 seeds (8-20 min on 2 cores, venv included; the CPU decides,"
	@echo "                         docs/digits-tier.md): results/tables/digits.md"
	@echo "make robustness-demo     the demo, then its runs' robustness curves (PGD accuracy against"
	@echo "                         eps and steps; after make demo about 3-4 min):"
	@echo "                         results/robustness-curves/digits.png"
	@echo "make test                the test suite (9-30 min on 2 cores, the CPU decides)"
	@echo "make test-fast           the tests not marked slow (3-10 min on 2 cores)"
	@echo "make table2-digits       the paper's Table 2 on digits (nine methods)"
	@echo "make ablation-digits     the paper's Table 5 (the ablation) on digits"
	@echo "make paper-digits        every table and figure of the paper on digits (results/paper/digits/)"
	@echo "make fresh-seeds-digits  the demo on seeds 10-12, which no choice used"
	@echo "make report              Snakemake's HTML report of the demo (results/report.html)"
	@echo "make readme              the demo, then its table pasted into README.md"
	@echo "make pull                runs pushed with dvc push (splits, checkpoints, metrics) back from"
	@echo "                         the DVC remote (none set: this clone's cache), up to date for Snakemake"
	@echo "make venv                only the environment (.venv); every target but help, clean and lock makes it first"
	@echo "make test-slurm          the SLURM profile on a real one-node cluster (root: installs slurm-wlm)"
	@echo "make clean               remove results/ and .snakemake/ (refused while a run writes there)"
	@echo "For developers:"
	@echo "make rulegraph           the README's data-flow picture, docs/rulegraph.svg (needs Graphviz's dot)"
	@echo "make lock                requirements-lock.txt again after a pin changed (then make venv)"
	@echo "More: README.md; Snakemake targets: .venv/bin/snakemake --list-target-rules"

venv: $(STAMP)

# uv installs the same pinned set as pip (requirements-lock.txt) in a fraction of pip's time
# (benchmarks/venv_install.sh); pip does it with `make venv INSTALLER=pip`, or where uv cannot be
# installed or cannot install them (it reads no pip.conf).
INSTALLER ?= uv
UV_VERSION := 0.13.9
REQUIREMENTS := -r requirements.txt -r requirements-dev.txt -c requirements-lock.txt
# The package, editable, as a path entry (setuptools' compat mode): its default import hook
# loses to a folder named wscat in the current directory (a clone's parent), where `from wscat
# import api` then fails with "cannot import name '__version__' from 'wscat' (unknown location)".
EDITABLE := --config-settings editable_mode=compat -e .
INSTALL_UV = $(VENV)/bin/pip install -q uv==$(UV_VERSION) $(QUIET_PIP)

$(STAMP): requirements.txt requirements-dev.txt requirements-lock.txt pyproject.toml
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	if [ "$(INSTALLER)" = uv ] && $(INSTALL_UV) && \
	    $(VENV)/bin/uv pip install -q --compile-bytecode --python $(VENV)/bin/python \
	        $(REQUIREMENTS) && \
	    $(VENV)/bin/uv pip install -q --python $(VENV)/bin/python --no-deps \
	        --no-build-isolation $(EDITABLE); then :; \
	else \
	    [ "$(INSTALLER)" = pip ] || echo "make venv: uv could not install the packages (see" \
	        "above; it reads no pip.conf, so a pip-only mirror is one cause); pip installs the" \
	        "same pins (slower)" >&2; \
	    $(VENV)/bin/pip install -q $(REQUIREMENTS) $(QUIET_PIP) && \
	    $(VENV)/bin/pip install -q --no-deps --no-build-isolation $(EDITABLE) $(QUIET_PIP); \
	fi
	touch $@

# requirements-lock.txt: every package's version, resolved by uv from requirements*.txt for
# Python 3.11; versions already in it are kept wherever the pins allow. After changing a pin:
# `make lock venv`.
.PHONY: lock
lock:
	test -x $(VENV)/bin/uv || { test -x $(VENV)/bin/python || python3 -m venv $(VENV); \
	    $(INSTALL_UV); }
	$(VENV)/bin/uv pip compile -q requirements.txt requirements-dev.txt \
	    -o requirements-lock.txt --python-version 3.11

# On a CPU the gpu resource would only serialise the jobs; on a GPU node add --resources gpu=1.
# The demo: Standard, TRADES, MT, RST and WSCAT on digits, 3 seeds, every attack on every test
# image, and the paired comparison against WSCAT (README, "The demo").
demo: venv
	$(DVC_CHECK)
	$(SNAKEMAKE) results/tables/digits.tex
	$(DVC_RECORD) digits
	@echo; cat results/tables/digits.md; echo
	@echo "make demo: the table is results/tables/digits.md (.tex, .csv beside it), the paired" \
	    "comparison with WSCAT results/tables/digits-paired.csv (as a picture: digits-paired.png);" \
	    "the README's section \"The demo\" says how to read it"

# The robustness curves of the demo's runs (Carlini et al.'s curves beside its table: PGD accuracy
# against eps and against the steps, the numbers of the gradient-masking checks): after `make demo`
# only the extra evaluation of each of its 15 runs (AA-paper, NRF, the checks; the paper targets
# reuse them) and the figure (docs/evaluation.md, "Gradient-masking checks").
ROBUSTNESS_DEMO := results/robustness-curves/digits
robustness-demo: demo
	$(SNAKEMAKE) $(ROBUSTNESS_DEMO).png $(ROBUSTNESS_DEMO).csv
	@echo "make robustness-demo: the curves are $(ROBUSTNESS_DEMO).png (.pdf, .csv beside it);" \
	    "docs/evaluation.md, \"Gradient-masking checks\", says how to read them"

# The longer digits targets (docs/digits-tier.md, "Longer targets"): the nine-method Table 2
# (the digits tier's Tab-RQ1-digits, the one Table 2: with AA-paper and NRF), the ablation
# (Table 5) and every table and figure of the paper on digits (with AA-paper, NRF and checks).
table2-digits: venv
	$(SNAKEMAKE) results/paper/digits/Tab-RQ1-digits.tex

ablation-digits: venv
	$(SNAKEMAKE) results/tables/digits-ablation.tex

paper-digits: venv
	$(SNAKEMAKE) results/paper/digits/index.md

# The demo unchanged on seeds 10-12, which no choice of a setting used: the demo's settings were
# chosen with labels outside the budget (docs/digits-tier.md, "Fresh seeds: the answer").
fresh-seeds-digits: venv
	$(SNAKEMAKE) results/tables/digits-fresh.tex

# Paste the demo's Markdown twin (results/tables/digits.md) into the README.
readme: demo
	$(VENV)/bin/python workflow/scripts/readme_tables.py README.md results/tables/digits.md

# The README's data-flow picture: the rule graph of every digits table and figure, laid out by
# Graphviz (needs `dot`, e.g. apt-get install graphviz). Rerun after adding or renaming a rule.
.PHONY: rulegraph
rulegraph: venv
	$(VENV)/bin/python workflow/scripts/rulegraph.py docs/rulegraph.svg results/paper/digits/index.md

# Snakemake's HTML report of the demo: tables, per-run metrics and training logs with captions.
# The demo's report; after `make robustness-demo` its curves too (a target only where drawn: the
# report is of files that exist).
report: demo
	$(VENV)/bin/snakemake --report results/report.html -- results/tables/digits.tex \
	    $(wildcard $(ROBUSTNESS_DEMO).png)

# Runs that another clone built and shared with `dvc push` (every output of dvc.yaml's stages
# but the tables, which git keeps): `dvc pull`, then each stage that equals dvc.lock is marked up
# to date for Snakemake (docs/workflow.md, "Sharing runs").
pull: venv
	$(VENV)/bin/python workflow/scripts/dvc_pull.py $(if $(REMOTE),--remote $(REMOTE))

# Two workers (the CI machine's two cores; the pipelines' Snakemake runs leave one idle), each
# taking whole files so that a module's fixture (a tiny pipeline run) is built once; in the order
# tests/conftest.py gives (the pipeline files first), not xdist's most-tests-first.
# pytest's exit status 5, no test collected, fails both targets.
PYTEST = $(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# Every test (CI runs this).
test: venv
	$(PYTEST) tests

# The inner loop: every test but those marked slow (3 min 3 s at 76b3902 on the 2-core CI
# machine, 4 min 58 s and 9 min 30 s at bd6aaae on two slower CPUs, against 9-30 minutes for
# `make test`: docs/digits-tier.md).
test-fast: venv
	$(PYTEST) -m "not slow" tests

# The SLURM profile on a real one-node cluster (tests/workflow/test_slurm.py, under 5 minutes):
# installs Debian's slurm-wlm and munge where they are missing (root), starts the cluster of
# tests/helpers/slurm_cluster.sh, runs a tiny target through workflow/profiles/slurm-cpu beside
# a local run, kills a job with scancel. CI runs it beside `make test` (where it is skipped); no
# pytest cache, so the two runs never write the same file.
test-slurm: venv
	bash tests/helpers/slurm_cluster.sh install
	WSCAT_SLURM_CLUSTER=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/workflow/test_slurm.py \
	    -k real_slurm_cluster

# results/ and .snakemake/, unless a training, an evaluation or a Snakemake runs in them now
# (then one line naming it, nothing removed): workflow/scripts/clean.py, on any Python 3.
clean:
	python3 workflow/scripts/clean.py
