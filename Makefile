# Kafka Lab — the README's two commands:
#   make lab    set everything up, then open JupyterLab on the lessons
#   make test   set everything up, then run every test (what CI runs)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# make test runs the tiers (unit, integration, notebook, browser: see the README) over JOBS pytest workers;
# most of a lesson's or a grading's time is waiting on a real cluster (a grading: 8 CPU-s in 34 s). Five workers:
# on 2026-11-29, with four the 2 cores were ~80 % busy (1,960 CPU-s sampled in a 20:08 pytest run) and a fifth
# finished in 18:43 (2,082 CPU-s); on 2026-11-27's slower host, with the cores 85 % busy, five took 28:14 against
# four's 28:49 (every test slower, no sooner done). A fifth never cost time; it pays when the host has cores to spare.
# loadgroup: tests sharing a costly fixture (the session cluster, a module's secured cluster, JupyterLab) run in one
# worker, the rest one at a time, longest first (tests/conftest.py). Every test's time and CPU seconds (cpu_s) are
# kept in test-output/junit.xml, to see where the minutes go; the run ends with the slowest and the costliest.
JOBS ?= 5

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup setup-browser lab test test-fast benchmarks soak clean classroom setup-classroom setup-classroom-if-root \
        classroom-environment

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

test: setup setup-browser setup-classroom-if-root
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --durations=30 --junitxml=test-output/junit.xml $(PYTEST_ARGS)

# Debian's Chromium for the real-browser test: Playwright drives it, nothing is downloaded at test time.
setup-browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 || { echo "The browser test needs Chromium: install it with your package manager." >&2; exit 1; }; \
	  echo "Installing Chromium (Debian package) for the browser test..."; \
	  $(SUDO) apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q --no-install-recommends chromium >/dev/null; }; }

# A class on one server (README "Classroom"), as root: JupyterHub gives every learner a JupyterLab of their own.
# CLASSROOM_CONFIG is the class's classroom.toml; CLASSROOM_PYTHON builds the learners' Python environment and must be
# one every user can run (a pyenv under /root is not: /root is private).
CLASSROOM_CONFIG ?= $(CURDIR)/environments/classroom/classroom.toml
CLASSROOM_PYTHON ?= $(firstword $(wildcard /usr/bin/python3) $(PYTHON))
CLASSROOM_DIR     = $(shell $(VENV)/bin/labkit classroom where --config $(CLASSROOM_CONFIG))
CLASSROOM_VENV    = $(CLASSROOM_DIR)/venv

classroom: setup-classroom
	$(CLASSROOM_VENV)/bin/labkit classroom serve --config $(CLASSROOM_CONFIG)

# The learner bundle, its Python environment with JupyterHub (the classroom extra), configurable-http-proxy from npm,
# and `labkit classroom setup` (shared jar cache, lab settings, the learners' group, a check as user nobody).
setup-classroom: setup classroom-environment

# What setup-classroom adds to `make setup` (make test's classroom test needs it, and `make setup` has run by then).
classroom-environment:
	@[ "$$(id -u)" = 0 ] || { echo "make classroom creates a system user per learner: run it as root (sudo make classroom)." >&2; exit 1; }
	@command -v npm >/dev/null 2>&1 || { echo "The classroom's proxy comes from npm: install Node.js 18+ and npm (apt-get install nodejs npm)." >&2; exit 1; }
	@$(VENV)/bin/labkit classroom bundle --config $(CLASSROOM_CONFIG)
	@test -x $(CLASSROOM_VENV)/bin/python || $(CLASSROOM_PYTHON) -m venv $(CLASSROOM_VENV)
	@stamp=$(CLASSROOM_VENV)/.installed-$$(cksum < $(CLASSROOM_DIR)/bundle/pyproject.toml | cut -d' ' -f1); test -e $$stamp || { \
	  $(CLASSROOM_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	  $(CLASSROOM_VENV)/bin/python -m pip install --quiet -e '$(CLASSROOM_DIR)/bundle[classroom]' && \
	  rm -f $(CLASSROOM_VENV)/.installed-* && touch $$stamp; }
	@test -x $(CLASSROOM_DIR)/proxy/node_modules/.bin/configurable-http-proxy || \
	  npm install --silent --no-audit --no-fund --prefix $(CLASSROOM_DIR)/proxy configurable-http-proxy@5.3.0
	@$(CLASSROOM_VENV)/bin/labkit classroom setup --config $(CLASSROOM_CONFIG)

# make test's classroom test (tests/test_classroom_browser.py) creates system users: as root only (elsewhere it skips).
setup-classroom-if-root: setup
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory classroom-environment; fi

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
