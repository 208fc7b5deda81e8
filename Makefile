# labctl: `make demo` runs the embedded lab end to end; `make test` runs the whole test suite.
# Both install what they need first (apt packages, .venv, daemons), idempotently.
VENV   := .venv
PY     := $(VENV)/bin/python
LABCTL := $(VENV)/bin/labctl

.PHONY: setup services labgen demo test test-unit test-integration bench clean

setup:
	@scripts/setup-host.sh

services:
	@scripts/services.sh

# the paced DPDK generator (native/labgen) into build/labgen; setup does this too
labgen:
	@scripts/build-labgen.sh

demo: setup
	@scripts/demo.sh

test: setup
	$(PY) -m pytest -q -ra --durations=25 tests

test-unit: setup
	$(PY) -m pytest -q -ra tests/unit

test-integration: setup
	$(PY) -m pytest -q -ra -m integration tests

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
