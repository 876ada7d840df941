# One-command entry points. `make run` and `make test` set everything up from a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION ?= 1
export PYTHONPATH := $(CURDIR)/layers/shared/python:$(CURDIR)
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: help setup lint typecheck unit test run bench chaos synth deploy destroy send replay invoke locks layer clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: $(VENV)/.installed node_modules/.installed ## Create .venv and node_modules

lint: setup ## ruff
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup ## mypy
	$(BIN)/mypy

unit: setup ## pytest only
	$(BIN)/pytest

test: setup ## lint, types and the whole test suite
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest

clean: ## Remove build output (keeps .venv and node_modules)
	rm -rf build cdk.out .local .pytest_cache .mypy_cache .ruff_cache
