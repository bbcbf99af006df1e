# Every target sets up what it needs: a fresh machine runs `make serve` or
# `make test` and nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: setup serve test bench synth clean java chromium

setup: $(VENV)/.installed node_modules/.installed java

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# DynamoDB Local is a Java program; install a JRE when the machine has none.
java:
	@command -v java >/dev/null || (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless)

# The inbox page is tested in a real browser: the system's Chromium and its WebDriver (tests only).
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver)

serve: setup
	$(BIN)/cairn serve $(ARGS)

# Lint and types first: a finding fails the run before the slower suites start.
test: setup chromium
	$(BIN)/ruff check functions infra bench app.py examples tests
	$(BIN)/mypy
	$(BIN)/pytest -q $(ARGS)

bench: setup
	$(BIN)/python -m bench $(ARGS)

# Cairn's own stack, then the example of a team's app that holds Cairn as a construct.
# Synthesis needs only the Python packages (and Node, for jsii); bundling the
# Lambda dependencies downloads Linux wheels from PyPI, so no Docker either.
synth: $(VENV)/.installed
	$(BIN)/python app.py
	PYTHONPATH=functions:. $(BIN)/python examples/cdk-app/agents.py

clean:
	rm -rf $(VENV) node_modules cdk.out .cairn
