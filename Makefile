# Flowport: two commands. `make run` starts the portal on embedded defaults;
# `make test` runs the whole suite. Both set up everything they need first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
BIND ?= 127.0.0.1:8000

.PHONY: run test bench lint check system-deps system-deps-test migrate demo clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.runtime-installed: requirements.txt | $(VENV)/bin/python
	$(PIP) install -q -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PIP) install -q -r requirements-dev.txt
	touch $@ $(VENV)/.runtime-installed

system-deps:
	@scripts/install-system-deps.sh run

system-deps-test:
	@scripts/install-system-deps.sh test

migrate: system-deps $(VENV)/.runtime-installed
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py load_demo

run: demo
	@echo ""
	@echo "  Flowport is starting at http://$(BIND)/  (Ctrl-C stops web, worker and scheduler)"
	@echo ""
	FLOWPORT_BIND=$(BIND) $(VENV)/bin/honcho start -f Procfile

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

check: lint
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

test: system-deps-test $(VENV)/.dev-installed
	$(MAKE) --no-print-directory check
	$(VENV)/bin/pytest $(PYTEST_ARGS)

bench: system-deps-test $(VENV)/.dev-installed
	$(PY) tests/bench/run_all.py

clean:
	rm -rf $(VENV) var test-artifacts
