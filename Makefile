# weir: the two commands a newcomer needs are `make run` and `make test`.
# Every target sets up the virtual environment in .venv itself when it is missing
# or when pyproject.toml / requirements.lock changed since it was built.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.weir-installed
UV_VERSION := 0.13.9
PYTEST_FAST := -m "not slow and not bench"

.PHONY: help env test test-all lint format run bench check-python check-java clean

help:
	@echo "make run       run the reference job (sets everything up first)"
	@echo "make test      create .venv if needed and run the test suite"
	@echo "make test-all  the suite including slow tests"
	@echo "make lint      ruff and mypy"
	@echo "make bench     benchmarks (pytest-benchmark)"

check-python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: '$(PYTHON)' not found; weir needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { echo "error: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); weir needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { echo "error: $(PYTHON) lacks the venv/ensurepip modules; install them (Debian: apt-get install python3-venv)" >&2; exit 1; }

check-java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java not found; PySpark needs Java 17 or newer on PATH (Debian: apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	  if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "error: PySpark needs Java >= 17, found '$$(java -version 2>&1 | head -1)'" >&2; exit 1; fi

$(STAMP): pyproject.toml requirements.lock
	@$(MAKE) --no-print-directory check-python
	@test -x $(BIN)/python || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@echo "installing locked dependencies into $(VENV)"
	@$(BIN)/uv pip install --quiet --python $(BIN)/python -r requirements.lock
	@$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	@touch $(STAMP)

env: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_FAST) -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -m "not bench" -q

lint: $(STAMP)
	$(BIN)/ruff check engine harness workloads tests examples
	$(BIN)/ruff format --check engine harness workloads tests examples
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format engine harness workloads tests examples
	$(BIN)/ruff check --fix engine harness workloads tests examples

run: $(STAMP)
	$(BIN)/weir plan examples/my_job.py --level job
	$(BIN)/weir run examples/my_job.py --taskmanagers 2

bench: $(STAMP)
	$(BIN)/python -m pytest tests/bench -m bench -q --benchmark-only

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .benchmarks
