# cdynamo: `make demo` and `make test` work on a fresh clone (they create .venv and install
# torch==2.13.0, pytest and the package first). The package is reinstalled when a C source, a
# package Python file or the build files change.

PYTHON ?= python3.11
VENV   := .venv
VPY    := $(VENV)/bin/python
DEPS   := $(VENV)/.cdynamo-deps
STAMP  := $(VENV)/.cdynamo-installed
SOURCES := $(wildcard src/cdynamo/csrc/*.c src/cdynamo/csrc/*.h src/cdynamo/*.py) setup.py pyproject.toml

.PHONY: all demo test bench fuzz install clean

all: test

$(VPY):
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 exactly: the local CPU wheel (a looser pin would download a CUDA build).
# setuptools and wheel: the build runs with --no-build-isolation, so they must be in the venv.
$(DEPS): | $(VPY)
	$(VPY) -m pip install torch==2.13.0 numpy pytest "setuptools>=61" wheel
	touch $@

$(STAMP): $(DEPS) $(SOURCES)
	$(VPY) -m pip install --no-build-isolation --no-deps --force-reinstall .
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VPY) examples/demo.py

test: $(STAMP)
	$(VPY) -m pytest -q tests

bench: $(STAMP)
	$(VPY) bench/bench_compile.py

# Differential fuzzer (tests/fuzz): FUZZ_N random programs from seed FUZZ_SEED, each run in
# eager, under cdynamo and under torch._dynamo; reproducers and a summary go to fuzz-out/.
# Also read by the runner: FUZZ_JOBS (workers), FUZZ_TIMEOUT (CPU seconds per program),
# FUZZ_EXCLUDE (statement kinds not generated, e.g. closure), FUZZ_DYNAMO (always, or
# on-mismatch: torch._dynamo only where cdynamo disagrees with eager), FUZZ_MINIMIZE, FUZZ_OUT.
FUZZ_N ?= 2000
FUZZ_SEED ?= 0
fuzz: $(STAMP)
	$(VPY) tests/fuzz/runner.py -n $(FUZZ_N) --seed $(FUZZ_SEED)

clean:
	rm -rf build src/*.egg-info $(STAMP)
