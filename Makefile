# The two commands a new user needs:  `make demo`  (SAM on the embedded defaults)  and  `make test`.
# Both create .venv and install SAM into it first (once; again when pyproject.toml changes).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install demo up test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0    # the CPU build; SAM needs no GPU
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/sam demo

up: install
	$(BIN)/sam up

test: install lint
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sam_server sam_worker wse_sim compiler client

bench: install
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) sam-data .pytest_cache
