# The two commands a new user needs:  `make demo`  (SAM on the embedded defaults)  and  `make test`.
# Both create .venv and install SAM into it first (once; again when pyproject.toml changes).

PYTHON ?= python3
# pip's "a new release of pip is available" notice is not what a newcomer came to read.
export PIP_DISABLE_PIP_VERSION_CHECK := 1
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install zoo demo up test lint bench clean

# torch==2.13.0 is the light CPU build; skipped once the zoo's pair is in (a downgrade breaks it).
# The editable install is one plain .pth line (pyproject's package-dir says why).
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	[ -f $(BIN)/.zoo ] || $(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The model zoo (torchvision, timm, transformers) with the torch that matches its torchvision:
# `make test` and CI need it; `make demo` keeps the light CPU torch unless the zoo is in.
$(BIN)/.zoo: $(BIN)/.installed
	$(BIN)/pip install -q -e '.[dev,zoo]'
	touch $@

zoo: $(BIN)/.zoo

demo: install
	scripts/system-deps
	$(BIN)/sam demo

up: install
	scripts/system-deps
	$(BIN)/sam up

# The suite runs on three worker processes (pytest-xdist): much of its time is spent waiting on
# live servers, clusters and sandboxes, so three workers beat the two cores' worth. Tests that
# share a module-scoped fixture (a live cluster) stay together on one worker: tests/conftest.py
# groups them for --dist loadgroup. TEST_WORKERS=0 runs the suite in one process (to debug a
# test that misbehaves only beside others). The 20 slowest tests are listed at the end.
TEST_WORKERS ?= 3

test: zoo lint
	scripts/system-deps --test
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sam_server sam_worker sam_domain wse_sim compiler client
	$(BIN)/lint-imports

bench: zoo
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) sam-data .pytest_cache
