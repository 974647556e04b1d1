# weir: the two commands a newcomer needs are `make run` and `make test`.
# Every target sets up the virtual environment in .venv itself when it is missing
# or when pyproject.toml / requirements.lock changed since it was built.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.weir-installed
UV_VERSION := 0.13.9
PYTEST_FAST := -m "not slow and not bench and not flink"
# make test spreads the tests over every core (pytest-xdist; worksteal evens out the long
# ones); no benchmark runs there, so pytest-benchmark stays out of it
PYTEST_PARALLEL := -n auto --dist worksteal -p no:benchmark
# PyFlink lives in its own environment: apache-flink pins pyarrow, numpy and py4j below weir's
# ranges (docs/decisions.md, "PyFlink in its own environment")
FLINK_VENV := .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.weir-installed

.PHONY: help env flink-env test test-flink test-all browser lint format run bench bench-micro check-python check-java clean

help:
	@echo "make run       run the reference job (sets everything up first)"
	@echo "make test      create .venv if needed and run the test suite"
	@echo "make test-all  the suite including slow and browser tests (installs chromium)"
	@echo "make test-flink  PyFlink in .venv-flink; Flink's examples on weir, weir's on Flink (needs Java 17)"
	@echo "make lint      ruff and mypy"
	@echo "make bench     benchmarks (pytest-benchmark)"
	@echo "make bench-micro  micro-benchmarks, JSON saved under results/micro/"

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
	@# numba's on-disk caches name the module they were compiled in; a package rename leaves them stale
	@find engine harness workloads \( -name '*.nbi' -o -name '*.nbc' \) -delete
	@touch $(STAMP)

env: $(STAMP)

$(FLINK_STAMP): requirements-flink.lock $(STAMP)
	@test -x $(FLINK_VENV)/bin/python || { echo "creating $(FLINK_VENV)"; $(PYTHON) -m venv $(FLINK_VENV); }
	@echo "installing apache-flink (requirements-flink.lock, ~400 MB) into $(FLINK_VENV)"
	@$(BIN)/uv pip install --quiet --python $(FLINK_VENV)/bin/python -r requirements-flink.lock
	@touch $(FLINK_STAMP)

flink-env: $(FLINK_STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_FAST) $(PYTEST_PARALLEL) -q

test-all: $(STAMP) browser
	$(BIN)/python -m pytest -m "not bench and not flink" -q

# one job file, two engines: runs PyFlink jobs one at a time (each starts a JVM)
test-flink: $(STAMP) $(FLINK_STAMP) check-java
	WEIR_FLINK_PYTHON=$(CURDIR)/$(FLINK_VENV)/bin/python $(BIN)/python -m pytest -m flink -q tests/flink

# the dashboard's browser test drives Debian's chromium through selenium (installed from the lock)
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium and chromium-driver for the browser test"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }

# mypy checks the package under its import name `weir`: a tree of links in .lint/ maps it
# onto the folders as pyproject's package-dir does.
lint: $(STAMP)
	$(BIN)/ruff check engine harness workloads tests examples
	$(BIN)/ruff format --check engine harness workloads tests examples
	@rm -rf .lint && mkdir -p .lint/weir && for f in engine/*; do ln -s ../../$$f .lint/weir/; done \
	  && ln -s ../../harness .lint/weir/harness && ln -s ../../workloads .lint/weir/workloads
	MYPYPATH=.lint $(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format engine harness workloads tests examples
	$(BIN)/ruff check --fix engine harness workloads tests examples

# make run: generate a small keyed workload with PySpark, run the reference windowed job
# (seed 000's MyJob shape) with checkpoints on LMDB and check it against Spark's answer,
# sweep 3 buffer timeouts, and print where the report is (results/<date>-run-<sha>/).
run: $(STAMP) check-java
	$(BIN)/weir bench suite run

bench: $(STAMP)
	$(BIN)/python -m pytest tests/bench -m bench -q --benchmark-only

# Micro-benchmarks (key groups, serializers, state backends, network path, buffer pools,
# latency recording); JSON per revision in results/micro/ for `pytest-benchmark compare`.
MICRO_BENCH := tests/bench/test_bench_keys.py tests/bench/test_bench_codec.py tests/bench/test_bench_state.py \
	tests/bench/test_bench_network.py tests/harness/test_harness_bench.py
bench-micro: $(STAMP)
	@mkdir -p results/micro
	$(BIN)/python -m pytest $(MICRO_BENCH) -m bench -q --benchmark-only -p no:cacheprovider \
	  --benchmark-json=results/micro/$$(date -u +%Y%m%dT%H%M%S)-$$(git rev-parse --short HEAD 2>/dev/null || echo unknown).json

clean:
	rm -rf $(VENV) $(FLINK_VENV) .pytest_cache .mypy_cache .ruff_cache .benchmarks .lint
