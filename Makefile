# Every target sets up what it needs: a fresh machine runs `make serve` or
# `make test` and nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# Python keeps the bytecode it compiles. A machine that says otherwise (PYTHONDONTWRITEBYTECODE) would
# have every process compile its imports from source again: a second and more for each `cairn serve`
# or example the tests start. `__pycache__` is ignored by git.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup serve check unit docs test fuzz bench synth clean java chromium wrk

# What the linters read, and how many pytest workers share the machine: one more than its cores.
# Measured on 2 cores: with a worker a core they were busy 86 % of the run, since a test waiting on a
# timer, a server or a browser leaves its core idle; with a third, 95 %, and the suite took 480 s and
# 502 s in two runs, against 527 s. More only adds each worker's own DynamoDB Local and start-up.
LINTED := functions infra bench app.py examples tests
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

setup: $(VENV)/.installed node_modules/.installed java

# uv installs what pip would, several times faster. selenium goes in without its requirements: `dev`
# lists those it uses (not its trio: see pyproject.toml).
# Then the bytecode, compiled on every core: without it, the suite's first processes each compiled the
# same modules again (on a fresh clone, a minute of the suite's time). Not all of it, though: the
# packages in NOT_PRECOMPILED are two thirds of the source installed, and the suite imports little of
# them (a fifth of the CDK's modules, and sympy's parts cfn-lint uses, both on the one worker running
# the infra tests) or none (mypy loads its compiled extensions instead). Python compiles what is
# imported, once. Measured on a fresh clone with 2 cores: set-up 41 s instead of 55 s, the suite 586 s
# against 594 s.
NOT_PRECOMPILED := aws_cdk|sympy|mypy|mypyc|pip|setuptools|pkg_resources
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet 'uv>=0.5'
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps 'selenium>=4.20'
	$(BIN)/python -m compileall -q -j 0 -x '/site-packages/($(NOT_PRECOMPILED))/' functions \
		$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
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

# The benchmark drives `cairn serve` with wrk, a load generator in C (bench only).
wrk:
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)

serve: setup
	$(BIN)/cairn serve $(ARGS)

# The fast loop: lint, format, types and a complexity gate (no function above radon's C), no test.
check: $(VENV)/.installed
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy
	$(BIN)/xenon --max-absolute C functions infra bench examples app.py

# Unit tests only: no DynamoDB Local, no server, no browser.
unit: $(VENV)/.installed
	$(BIN)/pytest -q -n $(WORKERS) tests/unit $(ARGS)

# The documentation site (mkdocs.yml), built strictly: a broken link or anchor, or a page left out
# of the navigation, fails it. `.venv/bin/mkdocs serve` previews it while you write.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Everything, in parallel. `check` and the docs run beside the suite, whose servers, browsers and
# timers leave the cores idle at times; their output follows the suite's, and a finding fails the run
# all the same (`make check` alone is the fast loop). Tests are handed out a few at a time to whichever
# worker runs short, in the order `tests/conftest.py` gives: measured, that beat handing out large
# slices of the list, and keeping each module on one worker (which made its module fixtures once, but
# left a core idle while a long module finished). The infra tests are the exception, and the architecture
# map's: each group goes together to one worker, which alone loads the CDK into its node process or
# parses every source file (`pytest_xdist_make_scheduler` there).
test: setup chromium
	@checks=$$(mktemp); $(MAKE) --no-print-directory check docs >$$checks 2>&1 & pid=$$!; \
	$(BIN)/pytest -q -n $(WORKERS) --dist load $(ARGS); suite=$$?; \
	wait $$pid; checked=$$?; cat $$checks; rm -f $$checks; \
	if [ $$checked -ne 0 ]; then echo "make test: check or docs failed" >&2; fi; \
	[ $$suite -eq 0 ] && [ $$checked -eq 0 ]

# The generated hostile input of `make test`, four times deeper and drawn anew each run (`make test`
# replays the same cases, so a run is a regression check; this one looks for new findings).
fuzz: setup
	CAIRN_FUZZ_DEPTH=4 CAIRN_FUZZ_FRESH=1 $(BIN)/pytest -q -n $(WORKERS) tests/e2e/test_hostile_schemathesis.py $(ARGS)

bench: setup wrk
	$(BIN)/python -m bench $(ARGS)

# Cairn's own stack, then the example of a team's app that holds Cairn as a construct.
# Synthesis needs only the Python packages (and Node, for jsii); bundling the
# Lambda dependencies downloads Linux wheels from PyPI, so no Docker either.
synth: $(VENV)/.installed
	$(BIN)/python app.py
	PYTHONPATH=functions:. $(BIN)/python examples/cdk-app/team_app.py

clean:
	rm -rf $(VENV) node_modules cdk.out .cairn site
