# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv when it is missing or stale.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.fullbody_ik-stamp

.PHONY: venv demo test bench bench-peers build validate clean

venv: $(STAMP)

# Stale = requirements changed, or the interpreter is not 3.11: then it is rebuilt.
$(STAMP): requirements-dev.txt Makefile
	@if [ -x $(PY) ] && ! $(PY) -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))"; then rm -rf $(VENV); fi
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@# Editable install: the package name `fullbody_ik` maps to this directory (the repo root is the extension).
	$(PY) -c "import os, sysconfig; d = os.path.join(sysconfig.get_paths()['purelib'], 'fullbody_ik'); \
	  os.path.lexists(d) and os.remove(d); os.symlink('$(CURDIR)', d)"
	$(PY) -c "import fullbody_ik, fullbody_ik.solvers"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m fullbody_ik.tools.demo

test: $(STAMP)
	$(PY) -m pytest -q tests

bench: $(STAMP)
	$(PY) -m fullbody_ik.benchmarks.paper002
	$(PY) -m fullbody_ik.benchmarks.paper001
	$(PY) -m fullbody_ik.benchmarks.table1 --prepare-only
	@if [ -x $(PEERS)/bin/python ]; then $(PEERS)/bin/python -m fullbody_ik.benchmarks.peers; \
	  else echo "(no $(PEERS): run make bench-peers to compare with roboticstoolbox and ikpy)"; fi
	$(PY) -m fullbody_ik.benchmarks.table1
	$(PY) -m fullbody_ik.benchmarks.table2
	$(PY) -m fullbody_ik.benchmarks.memetic_study
	$(PY) -m fullbody_ik.benchmarks.drag_step --steps 60 --budget-ms 16
	$(PY) -m fullbody_ik.benchmarks.tracking
	$(PY) -m fullbody_ik.benchmarks.bake
	$(PY) -m fullbody_ik.benchmarks.solve_frames
	$(PY) -m fullbody_ik.benchmarks.iteration_cost
	$(PY) -m fullbody_ik.benchmarks.summary --write-readme

# The peers need numpy 2: their own virtual environment, beside ours.
PEERS := .venv-peers
bench-peers: $(STAMP)
	@[ -x $(PEERS)/bin/python ] || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet roboticstoolbox-python==1.5.0 ikpy==4.2.1 scipy==1.17.1
	$(PEERS)/bin/python -c "import os, sysconfig; d = os.path.join(sysconfig.get_paths()['purelib'], 'fullbody_ik'); \
	  os.path.lexists(d) and os.remove(d); os.symlink('$(CURDIR)', d)"
	$(PY) -m fullbody_ik.benchmarks.table1 --prepare-only
	$(PEERS)/bin/python -m fullbody_ik.benchmarks.peers

build: $(STAMP)
	$(PY) tools/build.py --all-platforms

validate: $(STAMP)
	$(PY) tools/build.py --validate-only

clean:
	rm -rf dist wheels out .pytest_cache
