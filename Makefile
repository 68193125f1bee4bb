# Ravi: every target bootstraps what it needs (uv included) on a machine that has only Python 3.11+.
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
REQUIREMENTS := requirements/dev.txt

.DEFAULT_GOAL := help

help: ## Show this help
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  \033[1m%-10s\033[0m %s\n", $$1, $$2}'

$(UV):
	@$(PYTHON) -m venv $(TOOLS) && $(TOOLS)/bin/pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

$(BIN)/.synced: $(UV) $(REQUIREMENTS) $(wildcard packages/*/pyproject.toml)
	@test -x $(BIN)/python || $(UV) venv --quiet --python $(PYTHON) $(VENV)
	@$(UV) pip sync --quiet --python $(BIN)/python $(REQUIREMENTS)
	@touch $@

setup: $(BIN)/.synced ## Create .venv with the pinned, hash-checked dependencies and every package (editable)

demo: setup ## Replay a bundled agent conversation through Ravi on the in-memory default
	@$(BIN)/ravi demo

test: setup ## Run every test: unit, property-based, conformance, integration (servers started as needed)
	@$(BIN)/pytest $(PYTEST_ARGS)

lint: setup ## ruff, mypy (strict for ravi-kernel) and the import-linter layer contracts
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .
	@$(BIN)/mypy $(wildcard packages/*/src)
	@$(BIN)/lint-imports

format: setup ## Apply ruff's fixes and formatting
	@$(BIN)/ruff check --fix . && $(BIN)/ruff format .

bench: setup ## Print the performance figures (not tests)
	@$(BIN)/python benchmarks/run.py

docs: setup ## Build the documentation site strictly into site/
	@NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

dist: setup ## Build a wheel and an sdist of every distribution into dist/ and check their metadata (twine check)
	@rm -rf dist && $(UV) build --quiet --all-packages --out-dir dist
	@$(BIN)/twine check --strict dist/*

upstream: setup ## Regenerate the frameworks' own tests, ported to Ravi, from their installed versions' sdists
	@$(BIN)/python scripts/upstream/port.py

lock: $(UV) ## Re-resolve dependencies and rewrite requirements/dev.txt (uv.lock stays local)
	@$(UV) lock --quiet
	@$(UV) export --quiet --frozen --all-packages --all-groups --no-emit-project --format requirements-txt -o $(REQUIREMENTS)

clean: ## Remove the virtual environments and caches
	@rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache .hypothesis site dist

.PHONY: help setup demo test lint format bench docs dist upstream lock clean
