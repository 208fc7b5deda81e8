# labctl: `make demo` runs the embedded lab end to end; `make test` runs the whole test suite.
# Both install what they need first (apt packages, .venv, daemons), idempotently.
VENV   := .venv
PY     := $(VENV)/bin/python
LABCTL := $(VENV)/bin/labctl

.PHONY: setup services labgen demo docs test test-unit test-integration bench clean

setup:
	@scripts/setup-host.sh

services:
	@scripts/services.sh

# the paced DPDK generator (native/labgen) into build/labgen; setup does this too
labgen:
	@scripts/build-labgen.sh

demo: setup
	@scripts/demo.sh

# the docs site into build/docs/site (warnings are errors; the reference pages are made from the code by
# docs/hooks/reference.py) and the man page labctl(1) into build/docs/labctl.1
docs: setup
	@test -x $(VENV)/bin/mkdocs || $(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev,docs]'
	$(PY) docs/hooks/reference.py --man build/docs/labctl.1
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	@echo "docs: build/docs/site/index.html, build/docs/labctl.1"

# the unit and TUI tests in parallel on every CPU (pytest-xdist), then, one at a time, every test that
# needs the host to itself (marked serial: everything outside tests/unit and tests/tui, and the few
# there that measure busy spinners or a terminal's timing; tests/conftest.py)
test: setup
	$(PY) -m pytest -q -ra -n auto -m "not serial" tests
	$(PY) -m pytest -q -ra --durations=40 -m serial tests

test-unit: setup
	$(PY) -m pytest -q -ra -n auto -m "not serial" tests/unit tests/tui
	$(PY) -m pytest -q -ra -m "serial and not integration" tests/unit tests/tui

test-integration: setup
	$(PY) -m pytest -q -ra -m integration tests

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
