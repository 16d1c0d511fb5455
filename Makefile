# The two commands of the README: `make run` (the default job, offline) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
ARGS ?=

.PHONY: run test test-quick setup setup-dev setup-local setup-system bench clean

run: setup-local        ## run the default job on the embedded model (offline, no key)
	$(PY) run.py +experiment=quickstart $(ARGS)

test: setup-dev setup-local setup-system  ## run the test suite (set-up included: packages, services, images)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(ARGS)

test-quick:             ## the quick tier: lint-imports, then every test but the end-to-end ones (tests/e2e/)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -m "not e2e" -q $(ARGS)

setup:
	scripts/setup.sh core

setup-dev:
	scripts/setup.sh dev

setup-local:
	scripts/setup.sh local

setup-system:           ## what the tests need from the machine: bubblewrap, Chromium, Docker, Podman + test images
	scripts/setup_system.sh

bench: setup-dev        ## throughput benchmark (prints ratios against the ideal)
	$(PY) -m bench.throughput $(ARGS)

clean:
	rm -rf outputs multirun .pytest_cache
