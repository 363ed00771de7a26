# Two commands on a fresh machine: `make demo` and `make test`. Both create their environments when missing or
# stale: .venv (Python 3.11, bpy 5.0.1, numpy 1.26: Blender 5.0) and, for the tests, .venv-5.2 (Python 3.13,
# bpy 5.2.3, numpy 2: Blender 5.1 and newer).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# Python 3.13: on PATH, or under pyenv (installed there on our machines, not on PATH).
PYTHON313 ?= $(shell for p in "$$(command -v python3.13)" $$(ls -d $$(pyenv root 2>/dev/null || echo $${PYENV_ROOT:-$$HOME/.pyenv})/versions/3.13*/bin/python3.13 2>/dev/null | sort -rV); do \
  [ -n "$$p" ] && "$$p" -c "import sys; assert sys.version_info[:2] == (3, 13)" 2>/dev/null && echo "$$p" && break; done)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.fullbody_ik-stamp
VENV52 := .venv-5.2
PY52   := $(VENV52)/bin/python
STAMP52 := $(VENV52)/.fullbody_ik-stamp

.PHONY: venv venv-5.2 demo test test-5.0 test-5.2 bench bench-peers build validate clean

venv: $(STAMP)
venv-5.2: $(STAMP52)

# Editable install: the package name `fullbody_ik` maps to this directory (the repo root is the extension).
define link_package
	$(1) -c "import os, sysconfig; d = os.path.join(sysconfig.get_paths()['purelib'], 'fullbody_ik'); \
	  os.path.lexists(d) and os.remove(d); os.symlink('$(CURDIR)', d)"
	$(1) -c "import fullbody_ik, fullbody_ik.solvers"
endef

# Stale = requirements changed, or the interpreter is not 3.11: then it is rebuilt.
$(STAMP): requirements-dev.txt Makefile
	@if [ -x $(PY) ] && ! $(PY) -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))"; then rm -rf $(VENV); fi
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(call link_package,$(PY))
	touch $(STAMP)

$(STAMP52): requirements-5.2.txt Makefile
	@if [ -z "$(PYTHON313)" ]; then echo "make: Blender 5.1/5.2 run Python 3.13, and no python3.13 was found (not on PATH," \
	  "none under pyenv): install it (pyenv install 3.13) or give its path: make test PYTHON313=/path/to/python3.13"; exit 1; fi
	@if [ -x $(PY52) ] && ! $(PY52) -c "import sys; sys.exit(sys.version_info[:2] != (3, 13))"; then rm -rf $(VENV52); fi
	@[ -x $(PY52) ] || $(PYTHON313) -m venv $(VENV52)
	$(PY52) -m pip install --quiet --upgrade pip
	$(PY52) -m pip install --quiet -r requirements-5.2.txt
	$(call link_package,$(PY52))
	touch $(STAMP52)

demo: $(STAMP)
	$(PY) -m fullbody_ik.tools.demo

# The whole suite under Blender 5.0 (Python 3.11, numpy 1.26), then under the newest 5.x (Python 3.13, numpy 2).
test: test-5.0 test-5.2

test-5.0: $(STAMP)
	@echo "== tests: bpy 5.0.1, Python 3.11, numpy 1.26 (Blender 5.0)"
	$(PY) -m pytest -q tests

test-5.2: $(STAMP52)
	@echo "== tests: bpy 5.2.3, Python 3.13, numpy 2 (Blender 5.1 and newer)"
	$(PY52) -m pytest -q tests

bench: $(STAMP)
	$(PY) -m fullbody_ik.benchmarks.paper002
	$(PY) -m fullbody_ik.benchmarks.paper001
	@[ -x $(PEERS)/bin/python ] || echo "(no $(PEERS): run make bench-peers to compare with roboticstoolbox and ikpy)"
	$(PY) -m fullbody_ik.benchmarks.table1  # (with $(PEERS), the peers take turns with ours in its Python)
	$(PY) -m fullbody_ik.benchmarks.table2
	$(PY) -m fullbody_ik.benchmarks.memetic_study
	$(PY) -m fullbody_ik.benchmarks.drag_step --steps 60 --budget-ms 16
	$(PY) -m fullbody_ik.benchmarks.tracking
	$(PY) -m fullbody_ik.benchmarks.bake
	$(PY) -m fullbody_ik.benchmarks.evaluation
	$(PY) -m fullbody_ik.benchmarks.solve_frames
	$(PY) -m fullbody_ik.benchmarks.footplant --frames 240
	$(PY) -m fullbody_ik.benchmarks.retarget --frames 240
	$(PY) -m fullbody_ik.benchmarks.iteration_cost
	$(PY) -m fullbody_ik.benchmarks.first_compile $(if $(wildcard $(PY52)),--python $(PY) --python $(PY52))
	$(PY) -m fullbody_ik.benchmarks.summary --write-docs

# The peers need numpy 2: their own virtual environment, beside ours.
PEERS := .venv-peers
bench-peers: $(STAMP)
	@[ -x $(PEERS)/bin/python ] || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet roboticstoolbox-python==1.5.0 ikpy==4.2.1 scipy==1.17.1
	$(PEERS)/bin/python -c "import os, sysconfig; d = os.path.join(sysconfig.get_paths()['purelib'], 'fullbody_ik'); \
	  os.path.lexists(d) and os.remove(d); os.symlink('$(CURDIR)', d)"
	$(PY) -m fullbody_ik.benchmarks.table1

build: $(STAMP)
	$(PY) tools/build.py --all-platforms --cache-python $(PY) $(if $(wildcard .venv-5.2/bin/python),--cache-python .venv-5.2/bin/python)

validate: $(STAMP)
	$(PY) tools/build.py --validate-only

clean:
	rm -rf dist wheels out .pytest_cache
