# The two commands a new user needs: `make run` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The development and CI environment installs exactly what requirements/dev.lock pins (hashes included), with
# uv (pinned here, bootstrapped into .cache/uv by pip). pyproject.toml keeps ranges; `make lock` refreshes the lock.
LOCK       := requirements/dev.lock
UV_VERSION := 0.13.9
UV         := .cache/uv/bin/uv
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lock lint typecheck layers unit wheel-check bench promtool chromium shellcheck containerd cc image conformance clean help

help:
	@echo "make run    - kgpu plan on the built-in default profile (sets up .venv first)"
	@echo "make test   - lint, types, layering and the whole test suite (installs promtool and chromium if missing)"
	@echo "make bench  - seeded benchmarks (not part of make test)"
	@echo "make image  - the container image (Dockerfile) with docker, podman or buildah"
	@echo "make conformance - build the real kube-apiserver, kube-scheduler, etcd, kwok and Karpenter from Go"
	@echo "               modules and compare kgpu with them; run the live commands against a real API server"
	@echo "make lock   - requirements/dev.lock after a pyproject.toml change (UPGRADE=1: newest versions the ranges allow)"
	@echo "make wheel-check - build the wheel, install it alone in a clean venv, run kgpu (part of make test)"

$(UV):
	$(PYTHON) -m venv .cache/uv
	.cache/uv/bin/python -m pip install -q --disable-pip-version-check 'uv==$(UV_VERSION)'

$(STAMP): pyproject.toml $(LOCK) | $(UV)
	$(PYTHON) -m venv $(VENV)
	$(UV) pip sync -q --python $(BIN)/python --require-hashes $(LOCK)
	$(UV) pip install -q --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

# After a change to pyproject.toml's dependencies: the lock follows it and keeps every other pin.
# `make lock UPGRADE=1`, on purpose only: the newest versions the ranges allow, for every Python kgpu supports.
lock: | $(UV)
	$(UV) pip compile -q $(if $(UPGRADE),--upgrade,) --universal --python-version 3.11 --generate-hashes --extra dev \
	  --custom-compile-command "make lock" -o $(LOCK) pyproject.toml

run: $(STAMP)
	$(BIN)/kgpu plan

# Debian packages that carry a service (prometheus, containerd) are not installed: installing them enables and
# starts the service (Prometheus on :9090 on every interface, containerd's socket), and `make test` needs only
# their binaries. Their .deb is downloaded (apt-get download) and unpacked under .cache/deb (dpkg-deb -x), whose
# usr/bin the recipes below put first on PATH; nothing is registered with dpkg or systemd. Binaries already on
# PATH are used as they are.
DEB_ROOT := $(CURDIR)/.cache/deb
export PATH := $(DEB_ROOT)/usr/bin:$(PATH)
define deb_unpack
{ echo "unpacking Debian's $(1) package into .cache/deb (its binaries; no service is installed)"; \
  mkdir -p $(DEB_ROOT)/pkg && ( cd $(DEB_ROOT)/pkg && rm -f $(1)_*.deb && \
  { apt-get download -qq $(1) 2>/dev/null || { $(SUDO) apt-get update -qq && apt-get download -qq $(1) 2>/dev/null; }; } ) && \
  dpkg-deb -x $(DEB_ROOT)/pkg/$(1)_*.deb $(DEB_ROOT) && command -v $(2) >/dev/null; }
endef

# promtool and prometheus come from Debian's `prometheus` package.
promtool:
	@command -v promtool >/dev/null 2>&1 || $(call deb_unpack,prometheus,promtool)

# shellcheck checks the host bootstrap scripts `kgpu render --target onprem` writes (Debian's package).
shellcheck:
	@command -v shellcheck >/dev/null 2>&1 || { \
	  echo "installing Debian's shellcheck package"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; }

# The image the monitoring DaemonSet runs (monitoring.exporterImage). IMAGE_UID=0 builds the root variant
# that can read the kubelet's pod-resources socket (see the Dockerfile), tagged <version>-root.
VERSION   := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' src/kgpu/__init__.py)
IMAGE_UID ?= 65532
IMAGE     ?= ghcr.io/kgpu/kgpu:$(VERSION)$(if $(filter 0,$(IMAGE_UID)),-root,)
ENGINE    ?= $(shell command -v docker || command -v podman || command -v buildah)

BASE_IMAGE := python:$(shell sed -n 's/^ARG PYTHON_VERSION=//p' Dockerfile)-slim

# What is missing is said in one line, exit 2: no builder on PATH, or docker/podman without a reachable
# engine (the client alone cannot build); a failed build names the base image it needs.
image:
	@test -n "$(ENGINE)" || { echo "error: make image needs a container builder: docker, podman or buildah (none on PATH)" >&2; exit 2; }
	@case "$(notdir $(ENGINE))" in buildah) ;; *) \
	  out=$$("$(ENGINE)" info 2>&1 >/dev/null) || { \
	    echo "error: make image: $(notdir $(ENGINE)) is installed but cannot reach a container engine ($$(printf '%s' "$$out" | grep -v '^ *$$' | tail -n 1)); start its daemon (or set DOCKER_HOST / CONTAINER_HOST), or use another builder: make image ENGINE=podman" >&2; exit 2; } ;; \
	esac
	@"$(ENGINE)" $(if $(findstring buildah,$(notdir $(ENGINE))),bud,build) --build-arg VERSION=$(VERSION) \
	  --build-arg UID=$(IMAGE_UID) -t $(IMAGE) . || { \
	  echo "error: make image: $(notdir $(ENGINE)) could not build $(IMAGE); it needs the base image $(BASE_IMAGE) (pulled from Docker Hub, or present locally) and PyPI for the exporter's dependencies" >&2; exit 2; }
	@echo "built $(IMAGE)"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks conformance/tests plugins

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# Headless Chromium from Debian's `chromium` package opens `kgpu plan --report`'s page in the tests
# (screenshots land in build/test-artifacts/).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium package (headless browser for the HTML report tests)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# containerd from Debian's package (1.6 on bookworm): the on-prem tests read kgpu's containerd files with
# `containerd config dump`, as the daemon would (no daemon needed).
containerd:
	@command -v containerd >/dev/null 2>&1 || $(call deb_unpack,containerd,containerd)

# A C compiler from Debian's gcc package: mig-parted's module (make conformance) builds only with cgo.
cc:
	@command -v cc >/dev/null 2>&1 || { \
	  echo "installing Debian's gcc package (cgo, for mig-parted's config parser in make conformance)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null; }

unit: $(STAMP) promtool chromium shellcheck containerd
	$(BIN)/pytest

# What a user gets from `pip install kgpu-*.whl`: the wheel built from this tree, installed with only its
# own dependencies (from PyPI) into a fresh venv; the light install plans, and says which extra is missing.
WHEEL_DIR := build/wheel-check
wheel-check: $(STAMP) | $(UV)
	rm -rf $(WHEEL_DIR)
	$(BIN)/python -m pip wheel -q --no-deps -w $(WHEEL_DIR)/dist .
	$(PYTHON) -m venv $(WHEEL_DIR)/venv
	$(UV) pip install -q --python $(WHEEL_DIR)/venv/bin/python -c $(LOCK) $(WHEEL_DIR)/dist/kgpu-*.whl
	cd $(WHEEL_DIR) && venv/bin/kgpu --version
	cd $(WHEEL_DIR) && venv/bin/kgpu plan > plan.txt && tail -n 1 plan.txt
	cd $(WHEEL_DIR) && venv/bin/kubectl-gpu plan --help > help.txt && head -n 1 help.txt | grep '^Usage: kubectl gpu plan'
	cd $(WHEEL_DIR) && venv/bin/kubectl_complete-gpu pl > complete.txt && grep -x 'plan.*' complete.txt
	cd $(WHEEL_DIR) && { venv/bin/kgpu exporter 2>err.txt; test $$? = 2 && grep -q "kgpu\[exporter\]" err.txt; }
	cd $(WHEEL_DIR) && { venv/bin/kgpu render --template onprem --validate >/dev/null 2>err.txt; test $$? = 2 && grep -q "kgpu\[validate\]" err.txt; }
	@echo "wheel-check: ok"

test: lint typecheck layers unit wheel-check

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

# Needs Go (the real components are built from Go modules; see conformance/README.md). Seeded; the case
# count is sized for CI. Binaries are cached under .cache/conformance/ keyed by the pinned versions.
# The whole suite runs at CONFORMANCE_SEED; the in-process differentials (Karpenter's Solve, kube-scheduler's
# filters and scores, DRA's allocator, the volume plugins) run again at each of CONFORMANCE_SEEDS, so that
# they hold on other seeds than the pinned one: a fixed one (314159265) and one derived from the commit, new
# with every commit (`make conformance CONFORMANCE_SEEDS=$$RANDOM` draws another; conformance/README.md
# lists the seeds tried and what they found).
CONFORMANCE_SEED  ?= 20261122
CONFORMANCE_CASES ?= 300
CONFORMANCE_SEEDS ?= 314159265 $(shell printf '%d' 0x$$(git rev-parse --short=7 HEAD 2>/dev/null || echo 1))
CONFORMANCE_SEEDED := conformance/tests/test_karpenter_differential.py conformance/tests/test_karpenter_burst.py conformance/tests/test_scheduler_oracle.py conformance/tests/test_dra_differential.py conformance/tests/test_volume_oracle.py conformance/tests/test_consolidation_differential.py conformance/tests/test_kueue_differential.py conformance/tests/test_kueue_time.py conformance/tests/test_cel_cost_differential.py
conformance: $(STAMP) cc
	@bin=$$(conformance/build.sh) && \
	  KGPU_CONFORMANCE_BIN=$$bin KGPU_CONFORMANCE_SEED=$(CONFORMANCE_SEED) KGPU_CONFORMANCE_CASES=$(CONFORMANCE_CASES) \
	  $(BIN)/pytest -p no:cacheprovider -q -s conformance/tests && \
	  for s in $(CONFORMANCE_SEEDS); do \
	    echo "conformance: the seeded differentials again, seed $$s"; \
	    KGPU_CONFORMANCE_BIN=$$bin KGPU_CONFORMANCE_SEED=$$s KGPU_CONFORMANCE_CASES=$(CONFORMANCE_CASES) \
	      $(BIN)/pytest -p no:cacheprovider -q -s $(CONFORMANCE_SEEDED) || exit 1; \
	  done

clean:
	rm -rf $(VENV) .cache/uv build .mypy_cache .ruff_cache .pytest_cache
