# One-command entry points. `make run` and `make test` set everything up from a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
EONCE := $(BIN)/eonce
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION ?= 1
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: help setup lint typecheck unit test run up status down bench chaos model synth deploy destroy bootstrap scan send publish replay invoke locks layer dist docs clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# The pinned requirements first, then this project in editable mode (no deps: the pins rule), so
# `import exactly_once` and the `eonce` console script work in the venv without PYTHONPATH.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps --editable .
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

# dist/ is emptied first so the checks (and a publish) see only this build's files; twine checks
# the metadata PyPI renders, check-wheel-contents the wheel's layout ([tool.check-wheel-contents]).
dist: setup ## Build the wheel and sdist into dist/ and check them (twine, check-wheel-contents)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(BIN)/twine check --strict dist/*
	$(BIN)/check-wheel-contents dist/*.whl

docs: setup ## Build the documentation site (MkDocs, Material) from docs/ into build/site
	$(BIN)/mkdocs build --strict

clean: ## Remove build output (keeps .venv and node_modules)
	rm -rf build dist cdk.out .local .pytest_cache .mypy_cache .ruff_cache

# CDK: `make deploy CDK_ARGS="-c stage=prod -c account=<12 digits> -c region=<region>"` (prod
# needs both); see docs/infrastructure.md.
CDK_ARGS ?=

synth: setup ## Synthesize the CDK app into cdk.out (fails on any cdk-nag finding)
	cdk synth --quiet $(CDK_ARGS)

# The environments of the app's stacks: a prod stage's `-c account=... -c region=...`, else
# the account and region of your credentials. Once per account and region.
bootstrap: setup ## cdk bootstrap the account/region of CDK_ARGS (prod) or of your credentials
	cdk bootstrap $(CDK_ARGS)

# checkov in a venv of its own: it pins many packages that would clash with requirements-dev.
SCAN_VENV := .venv-scan
CHECKOV_VERSION := 3.3.30
$(SCAN_VENV)/.checkov-$(CHECKOV_VERSION):
	test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SCAN_VENV)/bin/python -m pip install --quiet checkov==$(CHECKOV_VERSION)
	touch $@

scan: setup $(SCAN_VENV)/.checkov-$(CHECKOV_VERSION) ## checkov on the dev and prod templates; fails on unacknowledged findings
	$(PY) -m infra.checkov_scan --checkov $(SCAN_VENV)/bin/checkov

deploy: setup ## Deploy to the AWS account of your credentials (run `make bootstrap` once first)
	cdk deploy --require-approval broadening $(CDK_ARGS)

destroy: setup ## Delete the stack (prod: termination-protected; keeps tables, queues and DLQs)
	cdk destroy $(CDK_ARGS)

layer: setup ## Build the Lambda layer into build/layer (cached by a hash of its inputs)
	$(EONCE) layer

# --- Run and operate (the CLI reads AWS_ENDPOINT_URL / AWS_PROFILE / AWS_REGION) -------------
CONSUMER ?= orders
TOPIC ?= sales
COUNT ?= 100
DUPLICATES ?= 0.2
EVENT ?= events/orders-single.json
ARGS ?=

run: setup ## Everything on this machine: local AWS, deploy, poll, publish and send a workload, report
	$(EONCE) run $(ARGS)

up: setup ## Start the local stack in the background: deploy, then consume until `make down`
	$(EONCE) up $(ARGS)

status: setup ## Queue depths, pending records and counts of the local (or EONCE_STACK) stack
	$(EONCE) status $(ARGS)

down: setup ## Stop the local stack started by `make up` (and every process it started)
	$(EONCE) down $(ARGS)

send: setup ## Send COUNT generated messages (DUPLICATES share re-sent) to CONSUMER's queue
	$(EONCE) send --consumer $(CONSUMER) --count $(COUNT) --duplicates $(DUPLICATES) $(ARGS)

publish: setup ## Publish COUNT generated messages (DUPLICATES share published again) to TOPIC
	$(EONCE) publish --topic $(TOPIC) --count $(COUNT) --duplicates $(DUPLICATES) $(ARGS)

replay: setup ## Move CONSUMER's dead letters back (copy mode); ARGS e.g. "--dry-run"
	$(EONCE) replay copy --consumer $(CONSUMER) $(ARGS)

invoke: setup ## Run CONSUMER's handler in-process on EVENT (e.g. CONSUMER=salescounter EVENT=events/sns-sale.json)
	$(EONCE) invoke $(CONSUMER) --event $(EVENT) $(ARGS)

locks: setup ## List stuck IN_PROGRESS and FAILED records (ARGS e.g. "--stuck-only")
	$(EONCE) locks list $(ARGS)

bench: setup ## Benchmark against Powertools; writes docs/benchmarks.md + .png, fails on a missed target
	$(PY) -m benchmarks.run --full

MODEL_EXAMPLES ?= 1000
MODEL_STEPS ?= 60
model: setup ## Long random exploration of the store's state machine (MODEL_EXAMPLES, MODEL_STEPS)
	EO_MODEL_EXAMPLES=$(MODEL_EXAMPLES) EO_MODEL_STEPS=$(MODEL_STEPS) EO_MODEL_RANDOM=1 \
		$(BIN)/pytest tests/store/test_model.py -p no:cacheprovider --timeout=0

chaos: setup ## Fault injection on the local stack, layer vs Powertools; SOURCE=kinesis for a stream, WORKLOAD=steps for three steps per key; ARGS e.g. "--messages 2000 --crash 0.02"
	$(EONCE) chaos $(if $(SOURCE),--source $(SOURCE)) $(if $(WORKLOAD),--workload $(WORKLOAD)) $(ARGS)
