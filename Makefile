# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv when it is missing or stale.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.fullbody_ik-stamp
SITE    = $(shell $(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

.PHONY: venv demo test bench bench-peers build validate clean

venv: $(STAMP)

# Stale = requirements changed, or the interpreter is not 3.11: then it is rebuilt.
$(STAMP): requirements-dev.txt Makefile
	@if [ -x $(PY) ] && ! $(PY) -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))"; then rm -rf $(VENV); fi
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@# Editable install: the package name `fullbody_ik` maps to this directory (the repo root is the extension).
	ln -sfn "$(CURDIR)" "$(SITE)/fullbody_ik"
	$(PY) -c "import fullbody_ik, fullbody_ik.solvers"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m fullbody_ik.tools.demo

test: $(STAMP)
	$(PY) -m pytest -q tests

bench: $(STAMP)
	$(PY) -m fullbody_ik.benchmarks.run_all

build: $(STAMP)
	$(PY) tools/build.py --all-platforms

validate: $(STAMP)
	$(PY) tools/build.py --validate-only

clean:
	rm -rf dist wheels out .pytest_cache
