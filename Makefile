# The two commands a new user needs: `make run` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lint typecheck layers unit bench promtool clean help

help:
	@echo "make run    - kgpu plan on the built-in default profile (sets up .venv first)"
	@echo "make test   - lint, types, layering and the whole test suite (installs promtool if missing)"
	@echo "make bench  - seeded benchmarks (not part of make test)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/kgpu plan

# promtool and prometheus come from Debian's `prometheus` package.
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  echo "installing Debian's prometheus package (promtool, prometheus)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP) promtool
	$(BIN)/pytest

test: lint typecheck layers unit

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
