# Quick start: `make demo` runs the main job, `make test` runs lint plus the test suite.
# Both create .venv and install the package into it when it is missing or stale.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.hcsim-installed

.PHONY: demo test test-slow test-testbed bench bench-jobs lint clean fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,fast,dask,progress]'
	$(BIN)/python -c "from hcsim.engine.fairshare import warm_kernels; warm_kernels()"  # numba's cache, once
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p out
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

bench-jobs: $(STAMP)
	$(BIN)/python benchmarks/bench_jobs.py

# Long fuzz campaign (docs/robustness.md): HCSIM_FUZZ_EXAMPLES per test (default 800, >= 10,000
# cases in all), a random hypothesis seed unless FUZZ_SEED is set; findings to /tmp/fuzz_findings.md.
fuzz: $(STAMP)
	@seed=$${FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; n=$${HCSIM_FUZZ_EXAMPLES:-800}; \
	report=$${HCSIM_FUZZ_REPORT:-/tmp/hcsim-fuzz-report.json}; \
	echo "make fuzz: HCSIM_FUZZ_EXAMPLES=$$n FUZZ_SEED=$$seed"; \
	HCSIM_FUZZ_EXAMPLES=$$n HCSIM_FUZZ_REPORT=$$report nice -n 10 $(BIN)/python -m pytest -q -p no:cacheprovider \
		-m fuzz tests/fuzz --hypothesis-seed=$$seed; status=$$?; \
	$(BIN)/python tests/fuzz/run.py recheck $$report; exit $$status

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .ruff_cache .hypothesis

# hcsim against SimGrid SMPI on the same star platform and max-min model (docs/performance.md);
# prints that it skips when smpirun is not installed. ARGS=--quick for the 512-host case only.
.PHONY: bench-smpi
bench-smpi: $(STAMP)
	$(BIN)/python benchmarks/bench_vs_smpi.py $(ARGS)

# Analytical-mode throughput (docs/performance.md, "Analytical mode"); BENCH_ARGS=--quick for a short run.
.PHONY: bench-analytical
bench-analytical: $(STAMP)
	$(BIN)/python benchmarks/bench_analytical.py $(BENCH_ARGS)

# Re-run every notebook in place and store its outputs (text and images) so they read on GitHub:
# no progress bars, matplotlib's Agg backend, cells run in a scratch directory (what they write
# is thrown away). tests/test_notebooks.py checks that every notebook is stored with outputs.
# NOTEBOOK_FILES=notebooks/whatif.ipynb re-runs one.
NOTEBOOK_FILES ?= notebooks/*.ipynb
.PHONY: notebooks
notebooks: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[notebooks]'
	@scratch=$$(mktemp -d); trap 'rm -rf "$$scratch"' EXIT; for nb in $(NOTEBOOK_FILES); do \
		echo "executing $$nb"; \
		HCSIM_PROGRESS=0 MPLBACKEND=Agg $(BIN)/python -c 'import sys, nbformat; from nbclient import NotebookClient; \
nb = nbformat.read(sys.argv[1], as_version=4); \
NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False, \
resources={"metadata": {"path": sys.argv[2]}}).execute(); \
nbformat.write(nb, sys.argv[1])' "$$nb" "$$scratch" || exit 1; done
