# Neta's two everyday commands: `make run` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000
# The contract suite runs the mysql provider on this server too.
NETA_TEST_MYSQL_URL ?= mysql://root@127.0.0.1:3306/neta
# Three workers on two cores: the suite waits on servers, browsers and child processes as much
# as it computes (with two, the cores were idle a third of the time).
# Each test's xdist group stays on one worker: its module, or the shared deployment it uses
# (tests/support/harness.py, which also hands the groups out longest first).
PYTEST_ARGS ?= -n 3 --dist loadgroup
# The suite starts some hundred Python processes (servers, workers, subagent children, manage.py):
# with PYTHONDONTWRITEBYTECODE set (as some shells and images do) each would compile every module
# it imports again, ~0.2 s of CPU a start. The tests write and reuse the bytecode cache.
PYTEST = env -u PYTHONDONTWRITEBYTECODE NETA_TEST_MYSQL_URL=$(NETA_TEST_MYSQL_URL) $(PY) -m pytest

.PHONY: run test test-quick deps deps-test bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

$(VENV)/.deps: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -q -e .
	touch $@

$(VENV)/.deps-test: pyproject.toml | $(VENV)/bin/python
	bin/setup-system
	$(VENV)/bin/pip install -q -e ".[mysql,test]"
	touch $@ $(VENV)/.deps

deps: $(VENV)/.deps
deps-test: $(VENV)/.deps-test

run: deps
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v 0
	$(PY) manage.py neta_bootstrap
	$(PY) -m neta.serve -b $(HOST) -p $(PORT) neta.asgi:application

test: deps-test
	bin/setup-system --services
	$(VENV)/bin/lint-imports --no-cache
	node --test tests/js/
	$(PYTEST) $(PYTEST_ARGS)

# The edit loop: no slow tests (deployments, browsers, crash scenarios), stop at the first failure.
test-quick: deps-test
	bin/setup-system --services
	$(PYTEST) $(PYTEST_ARGS) -m "not slow" -x

bench: deps-test
	NETA_TEST_MYSQL_URL=$(NETA_TEST_MYSQL_URL) $(PY) -m bench

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
