# The first two targets are the README's first two commands; each sets itself up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench proofs clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,dask]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest tests
	$(PY) tests/installed/check.py  # the wheel, installed in a fresh environment, run outside the clone
	$(PY) -m proofs

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]' || echo "optional peers (JAX, PyTorch) not installed; measuring without them"
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .tl_cache
