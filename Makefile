# Flowport: two commands. `make run` starts the portal on embedded defaults;
# `make test` runs the whole suite. Both set up everything they need first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# The portal's address: `make run BIND=…`, else FLOWPORT_BIND from .env (which `honcho run` reads)
# or the environment, else loopback:8000.
BIND ?= $(or $(shell sed -n 's/^FLOWPORT_BIND=//p' .env 2>/dev/null | tail -n 1),$(FLOWPORT_BIND),127.0.0.1:8000)
# The suite's integration tests share the test database with real worker
# processes, so tests run on this machine's PostgreSQL and Redis by default.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/flowport
TEST_BROKER_URL ?= redis://127.0.0.1:6379/0
# The second pass runs on what `make run` runs on: SQLite and the serverless broker, files in
# TEST_EMBEDDED_DIR (the test database is test_flowport.sqlite3 there, which the web, worker and
# scheduler processes of the browser tests open too). It covers the portal's pages, API,
# services, browser and attacker stories; the pipeline's own tests never touch the portal's
# database and run once. Stories needing PostgreSQL are marked `postgres` and deselected.
TEST_EMBEDDED_DIR ?= $(CURDIR)/var/test-embedded
EMBEDDED_TESTS ?= tests/unit tests/e2e tests/security --ignore=tests/unit/pipeline
# `make test TEST_PASSES=postgres` (or embedded) runs one pass only.
TEST_PASSES ?= postgres embedded

.PHONY: run test soak bench lint check system-deps system-deps-test migrate demo clean jar lock

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Installs come from the lock files: every package, transitive ones too, at
# one version with its hashes. requirements*.txt hold the top-level pins;
# `make lock` turns them into the lock files.
$(VENV)/.runtime-installed: requirements.lock | $(VENV)/bin/python
	$(PIP) install -q --require-hashes -r requirements.lock
	touch $@

$(VENV)/.dev-installed: requirements-dev.lock | $(VENV)/bin/python
	$(PIP) install -q --require-hashes -r requirements-dev.lock
	touch $@ $(VENV)/.runtime-installed

PIP_TOOLS_VERSION := 7.6.2
PIP_COMPILE := .venv-lock/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links

lock:
	test -x .venv-lock/bin/pip-compile || (python3 -m venv .venv-lock && \
		.venv-lock/bin/pip install -q pip-tools==$(PIP_TOOLS_VERSION))
	$(PIP_COMPILE) $(LOCK_ARGS) --output-file requirements.lock requirements.txt
	$(PIP_COMPILE) $(LOCK_ARGS) --constraint requirements.lock --output-file requirements-dev.lock requirements-dev.txt

system-deps:
	@scripts/install-system-deps.sh run

system-deps-test:
	@scripts/install-system-deps.sh test

# axe-core (npm) for the browser tests' accessibility check (tests/e2e).
E2E_NODE := tests/e2e/node_modules/.package-lock.json
$(E2E_NODE): tests/e2e/package.json tests/e2e/package-lock.json
	npm ci --prefix tests/e2e --no-audit --no-fund --loglevel=error

# The one-pass fork's Spark file format (portal/pipeline/onepass.py), built against the venv's PySpark.
PIPELINE_JAR := portal/pipeline/jvm/flowport-pipeline.jar
$(PIPELINE_JAR): portal/pipeline/jvm/ForkFileFormat.java requirements.txt | system-deps $(VENV)/.runtime-installed
	scripts/build-pipeline-jar.sh $(PY)

jar: $(PIPELINE_JAR)

# honcho reads ./.env (if any) for the set-up steps too, as it does for the processes.
MANAGE := $(VENV)/bin/honcho run $(PY) manage.py

migrate: system-deps $(VENV)/.runtime-installed $(PIPELINE_JAR)
	$(MANAGE) migrate --noinput

demo: migrate
	$(MANAGE) ensure_master_key
	$(MANAGE) load_demo

# scripts/supervise.py gives supervisord the terminal, so Ctrl-C stops it alone and `make run`
# ends with status 0 (not "Error 254"), and runs it as the current user (no "running as root").
run: demo
	@echo ""
	@echo "  Flowport is starting at http://$(BIND)/  (Ctrl-C stops web, worker and scheduler)"
	@echo ""
	@mkdir -p var
	$(VENV)/bin/honcho run env FLOWPORT_BIND=$(BIND) $(PY) scripts/supervise.py $(VENV)/bin/supervisord -c deploy/supervisord.conf

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy reads its settings (and what it checks) from pyproject.toml; its cache in
# .mypy_cache makes a run after a small change take seconds.
check: lint
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/mypy

test: system-deps-test $(VENV)/.dev-installed $(E2E_NODE) $(PIPELINE_JAR)
	$(MAKE) --no-print-directory check
ifneq ($(filter postgres,$(TEST_PASSES)),)
	@echo "== make test, pass 1: the whole suite on PostgreSQL and Redis"
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
		$(VENV)/bin/pytest -m "not soak" $(PYTEST_ARGS)
endif
ifneq ($(filter embedded,$(TEST_PASSES)),)
	@echo "== make test, pass 2: pages, API, services, browser and attacker stories on SQLite and the serverless broker"
	@mkdir -p $(TEST_EMBEDDED_DIR)
	DATABASE_URL=sqlite:///$(TEST_EMBEDDED_DIR)/flowport.sqlite3 \
		CELERY_BROKER_URL=sqla+sqlite:///$(TEST_EMBEDDED_DIR)/celery-broker.sqlite3 \
		$(VENV)/bin/pytest -m "not postgres" $(EMBEDDED_TESTS) $(PYTEST_ARGS)
endif

# The crash matrix's longer rows (tests/integration/test_crash_matrix.py, marked `soak`): real
# workers SIGKILLed at each commit point for the destinations and modes `make test` leaves to it.
soak: system-deps-test $(VENV)/.dev-installed $(PIPELINE_JAR)
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
		$(VENV)/bin/pytest -m soak tests/integration $(PYTEST_ARGS)

# bench_extract.py's contenders (dlt, connectorx) live in a virtualenv of their own, never in
# Flowport's runtime requirements.
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed: tests/bench/requirements-bench.txt
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q -r tests/bench/requirements-bench.txt
	touch $@

bench: system-deps-test $(VENV)/.dev-installed $(PIPELINE_JAR) $(BENCH_VENV)/.installed
	BENCH_VENV=$(BENCH_VENV) $(PY) tests/bench/run_all.py

clean:
	rm -rf $(VENV) .venv-lock $(BENCH_VENV) var test-artifacts $(PIPELINE_JAR)
