# Two commands do all set-up and work on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= auto

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Byte-compiled up front: the child runtime is imported by every process under test, and with
# PYTHONDONTWRITEBYTECODE set, an editable install would recompile it at each start.
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[demo]'
	$(BIN)/python -m compileall -q pytest_startup_guard
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(BIN)/python -m compileall -q pytest_startup_guard
	touch $@ $(VENV)/.installed-demo

# Released huggingface_hub versions whose real writers the tests run against the loopback hub
# (tests/hub_releases.py): the oldest of docs/hub-versions.md, the one of the parallel-download
# incidents (0.10.0), and both sides of the ref_rewrite fix (1.30.0, 1.31.0). Each goes into a
# folder of its own with its dependencies; a process puts it first on PYTHONPATH to run it.
HUB_RELEASES := 0.8.1 0.10.0 1.30.0 1.31.0

$(VENV)/hub-releases/.installed: Makefile | $(VENV)/.installed-test
	for version in $(HUB_RELEASES); do \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
			--no-compile --upgrade --target $(VENV)/hub-releases/$$version \
			huggingface_hub==$$version || exit 1; \
	done
	touch $@

demo: $(VENV)/.installed-demo
	$(BIN)/python examples/run_demo.py

lint: $(VENV)/.installed-test
	$(BIN)/ruff check pytest_startup_guard tests examples benchmarks tools
	$(BIN)/ruff format --check pytest_startup_guard tests examples benchmarks tools

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy --strict pytest_startup_guard tools/hub_versions.py

unit: $(VENV)/.installed-test $(VENV)/hub-releases/.installed
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=15

test: lint typecheck unit

bench: $(VENV)/.installed-test $(VENV)/hub-releases/.installed
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .demo
