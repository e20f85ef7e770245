# The two commands a new user needs: `make run` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lint typecheck layers unit bench promtool conformance clean help

help:
	@echo "make run    - kgpu plan on the built-in default profile (sets up .venv first)"
	@echo "make test   - lint, types, layering and the whole test suite (installs promtool if missing)"
	@echo "make bench  - seeded benchmarks (not part of make test)"
	@echo "make conformance - build the real kube-apiserver, kube-scheduler, etcd, kwok and Karpenter from Go"
	@echo "               modules and compare kgpu with them; run the live commands against a real API server"

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
	$(BIN)/ruff check src tests benchmarks conformance/tests

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP) promtool
	$(BIN)/pytest

test: lint typecheck layers unit

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

# Needs Go (the real components are built from Go modules; see conformance/README.md). Seeded; the case
# count is sized for CI. Binaries are cached under .cache/conformance/ keyed by the pinned versions.
CONFORMANCE_SEED  ?= 20261122
CONFORMANCE_CASES ?= 300
conformance: $(STAMP)
	@bin=$$(conformance/build.sh) && \
	  KGPU_CONFORMANCE_BIN=$$bin KGPU_CONFORMANCE_SEED=$(CONFORMANCE_SEED) KGPU_CONFORMANCE_CASES=$(CONFORMANCE_CASES) \
	  $(BIN)/pytest -p no:cacheprovider -q -s conformance/tests

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
