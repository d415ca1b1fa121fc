# cdynamo: `make demo` and `make test` work on a fresh clone (they create .venv and install
# torch==2.13.0, pytest and the package first). The package is reinstalled when a C source, a
# package Python file or the build files change.
#
# Other Pythons and torch releases: `make test PYTHON=python3.12 TORCH=2.15.0` (any supported
# pair) builds and tests in a venv of its own, .venv-<python>-torch<version>; PYTHON may be a
# name that is not on PATH but installed under pyenv (.ci/find-python finds it). The default
# pair (python3.11, torch 2.13.0: the CPU wheel on this machine's disk) keeps .venv.

PYTHON ?= python3.11
TORCH  ?= 2.13.0
PYBIN   = $(shell .ci/find-python $(PYTHON))
ifeq ($(PYTHON)-$(TORCH),python3.11-2.13.0)
VENV   := .venv
else
VENV   := .venv-$(notdir $(PYTHON))-torch$(TORCH)
endif
VPY    := $(VENV)/bin/python
DEPS   := $(VENV)/.cdynamo-deps
STAMP  := $(VENV)/.cdynamo-installed
SOURCES := $(wildcard src/cdynamo/csrc/*.c src/cdynamo/csrc/*.cpp src/cdynamo/csrc/*.h src/cdynamo/csrc/values/*.c src/cdynamo/*.py src/cdynamo/polyfills/*.py) setup.py pyproject.toml

# `make test-asan`: the C engine built with AddressSanitizer + UndefinedBehaviorSanitizer into
# its own tree (build-asan/lib: the package's Python files and the instrumented _C), used through
# PYTHONPATH by .venv's Python; the normal install in .venv is left untouched, and build-asan is
# rebuilt from scratch whenever a source changes. The ASan runtime is preloaded into Python;
# PYTHONMALLOC=malloc_debug sends every Python object through malloc, so ASan sees use-after-free
# and overflows of objects (pymalloc's arenas would hide them) and CPython's debug hooks check
# the allocator API (GIL held, matching free functions). Leak checking is off: LeakSanitizer
# cannot tell our leaks from CPython's and torch's at exit (its fast unwinder stops in
# libpython, built without frame pointers); our own objects are counted instead
# (cdynamo._C.live_counts(), tests/test_live_counts.py). UBSan checks only the instrumented
# code (cdynamo._C), so it needs no suppressions; tests/sanitizers/asan.supp is for reports of
# CPython or torch (none so far), never ours. pytest runs with --capture=sys: with its default
# (fd) capture, a report written to fd 2 by a process that then aborts would be lost.
# One sanitizer tree per venv (build-asan for the default pair, build-asan-<python>-torch<v> else).
ASAN_BUILD := $(patsubst .venv%,build-asan%,$(VENV))
ASAN_STAMP := $(ASAN_BUILD)/.cdynamo-built
SAN_ENV = LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	PYTHONMALLOC=malloc_debug \
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0:suppressions=$(CURDIR)/tests/sanitizers/asan.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	PYTHONPATH=$(CURDIR)/$(ASAN_BUILD)/lib

.PHONY: all demo test test-asan bench fuzz install clean

all: test

$(VPY):
	@test -n "$(PYBIN)" || { echo "no interpreter for PYTHON=$(PYTHON)" >&2; exit 1; }
	$(PYBIN) -m venv $(VENV)

# torch==$(TORCH) exactly: for 3.11 and 2.13.0 the local CPU wheel (a looser pin would
# download a CUDA build); other pairs come from the package index (a CUDA build that runs on
# CPU). PIP_CONSTRAINT is emptied for this one command: the machine's pip configuration caps
# torch below the newest release.
# transformers: Hugging Face models for the demo, the benchmark and the tests (it does not
# require torch, so the pin above stays the only torch).
# setuptools and wheel: the build runs with --no-build-isolation, so they must be in the venv.
$(DEPS): | $(VPY)
	PIP_CONSTRAINT=/dev/null $(VPY) -m pip install torch==$(TORCH) numpy pytest "setuptools>=61" wheel transformers==5.23.0 accelerate==1.15.0 pytorch-lightning==2.6.6 huggingface_hub==2.4.0 safetensors==0.8.0 pyyaml==6.0.4 pillow==13.0.0
	$(VPY) -m pip install --no-deps timm==1.0.29
	touch $@

$(STAMP): $(DEPS) $(SOURCES)
	$(VPY) -m pip install --no-build-isolation --no-deps --force-reinstall .
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VPY) examples/demo.py

test: $(STAMP)
	$(VPY) -m pytest -q tests

$(ASAN_STAMP): $(DEPS) $(SOURCES)
	rm -rf $(ASAN_BUILD)
	CDYNAMO_ASAN=1 $(VPY) setup.py -q build --build-base $(ASAN_BUILD)/tmp \
		--build-lib $(ASAN_BUILD)/lib
	touch $@

test-asan: $(ASAN_STAMP)
	$(SAN_ENV) $(VPY) -c "import cdynamo._C as m; assert m.__file__.startswith('$(CURDIR)/$(ASAN_BUILD)/'), m.__file__"
	$(SAN_ENV) $(VPY) -m pytest -q -p no:cacheprovider --capture=sys tests

bench: $(STAMP)
	$(VPY) bench/bench_compile.py
	$(VPY) bench/bench_loop_break.py
	$(VPY) bench/bench_cold_start.py
	$(VPY) bench/bench_hf_first_step.py
	$(VPY) bench/bench_micro.py
	$(VPY) bench/bench_ddp.py

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
	rm -rf build $(ASAN_BUILD) src/*.egg-info $(STAMP)

# `make chromium`: Debian's chromium, for tests/test_report.py's headless-browser check of the
# HTML compile report (`python -m cdynamo.report`); nothing when a chromium is already on PATH.
# apt-get runs through sudo only when this is not root.
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update && \
		$$SUDO apt-get install -y --no-install-recommends chromium; }
