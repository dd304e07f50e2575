# governed-evidence — developer entry points. Everything installs into .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
GE     := $(BIN)/governed-evidence
DEMO_DB := data/evidence.sqlite

.PHONY: install demo test lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@$(BIN)/python scripts/demo.py --db $(DEMO_DB)

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check governed_evidence tests scripts
	$(BIN)/ruff format --check governed_evidence tests scripts

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(DEMO_DB) .pytest_cache .mypy_cache .ruff_cache
