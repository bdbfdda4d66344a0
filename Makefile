# Kafka Lab — the README's two commands:
#   make lab    set everything up, then open JupyterLab on the lessons
#   make test   set everything up, then run every test (what CI runs)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# make test runs the tiers (unit, integration, notebook, browser: see the README) over JOBS pytest workers;
# most of a lesson's time is waiting on a real cluster: with 3 workers the 2 cores were 84 % busy, 4 fill them.
# loadgroup: tests sharing a costly fixture (the session cluster, a module's secured cluster, JupyterLab) run in one
# worker, the rest one at a time, longest first (tests/conftest.py).
JOBS ?= 4

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup setup-browser lab test test-fast benchmarks soak clean

setup: $(STAMP)
	@$(VENV)/bin/labkit setup

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Kafka Lab needs Python 3.10 or newer (found %s). Set PYTHON=python3.x." % sys.version.split()[0])'
	@command -v java >/dev/null 2>&1 || [ -x "$$JAVA_HOME/bin/java" ] || { echo "Kafka Lab needs Java 17+: install a JDK (e.g. apt-get install openjdk-17-jdk-headless) and set JAVA_HOME." >&2; exit 1; }
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

lab: setup
	$(VENV)/bin/labkit lab

test: setup setup-browser
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

# Debian's Chromium for the real-browser test: Playwright drives it, nothing is downloaded at test time.
setup-browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 || { echo "The browser test needs Chromium: install it with your package manager." >&2; exit 1; }; \
	  echo "Installing Chromium (Debian package) for the browser test..."; \
	  $(SUDO) apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q --no-install-recommends chromium >/dev/null; }; }

# Unit tests only: no broker, a few seconds.
test-fast: setup
	$(PY) -m pytest -m "not integration and not notebook and not browser" $(PYTEST_ARGS)

benchmarks: setup
	$(PY) benchmarks/run.py

# The whole curriculum (every lesson, every exercise's reference grading) over and over, several at once, with busy
# CPU hogs beside it: what a loaded machine does to the lab (benchmarks/soak.py; SOAK_ARGS="--passes 1 --only 03_").
SOAK_ARGS ?= --passes 3 --concurrency 3 --stress 2
soak: setup
	$(PY) benchmarks/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) test-output .pytest_cache
