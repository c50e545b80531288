# fedbound: `make demo`, `make test`, `make bench` each work on a fresh machine in one command.
# They create .venv when it is missing and install into it: torch==2.13.0 first (the CPU build that lies
# on this machine's disk; an unpinned torch would pull a multi-GB CUDA build), then the project with its
# `train` and `dev` extras.  Re-installs only when pyproject.toml changes.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
FEDBOUND := $(VENV)/bin/fedbound
STAMP := $(VENV)/.fedbound-installed
DEMO_OUT ?= out/demo

.PHONY: install test demo bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[train,dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .

demo: $(STAMP)
	@mkdir -p $(DEMO_OUT)
	$(FEDBOUND) --version

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info out
