# cdynamo: `make demo` and `make test` work on a fresh clone (they create .venv and install
# torch==2.13.0, pytest and the package first). The package is reinstalled when a C source, a
# package Python file or the build files change.

PYTHON ?= python3.11
VENV   := .venv
VPY    := $(VENV)/bin/python
DEPS   := $(VENV)/.cdynamo-deps
STAMP  := $(VENV)/.cdynamo-installed
SOURCES := $(wildcard src/cdynamo/csrc/*.c src/cdynamo/csrc/*.h src/cdynamo/csrc/values/*.c src/cdynamo/*.py) setup.py pyproject.toml

.PHONY: all demo test bench install clean

all: test

$(VPY):
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 exactly: the local CPU wheel (a looser pin would download a CUDA build).
# transformers: Hugging Face models for the demo, the benchmark and the tests (it does not
# require torch, so the pin above stays the only torch).
# setuptools and wheel: the build runs with --no-build-isolation, so they must be in the venv.
$(DEPS): | $(VPY)
	$(VPY) -m pip install torch==2.13.0 numpy pytest "setuptools>=61" wheel transformers==5.23.0
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

clean:
	rm -rf build src/*.egg-info $(STAMP)
