# Quick start: `make demo` runs the main job, `make test` runs lint plus the test suite.
# Both create .venv and install the package into it when it is missing or stale.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.hcsim-installed

.PHONY: demo test test-slow test-testbed bench lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hcsim sweep --topology atlas800t-a2 --op allreduce -b 8 -e 1G -f 2 --plot out/demo_allreduce_busbw.png

lint: $(STAMP)
	$(BIN)/ruff check hcsim tests benchmarks

test: lint
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

test-testbed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,mpi]'
	$(BIN)/python -m pytest -q -m testbed

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
