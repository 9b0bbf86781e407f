# The first two targets are the README's first two commands; each sets itself up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench proofs clean

$(STAMP): pyproject.toml setup.py
	@echo "== setting up $(VENV): a virtual environment with tensorlang installed (editable) and its"
	@echo "   dependencies (NumPy, SciPy, SymPy, islpy, Lark, pytest, Dask, matplotlib ...); a few minutes the first time"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,dask,notebook]'
	touch $(STAMP)
	@echo "== $(VENV) is ready"

demo: $(STAMP)
	@echo "== the demo (examples/demo.py)"
	$(PY) examples/demo.py

# pytest runs the test files in two processes (pytest-xdist; a file's tests stay together in one, in order),
# prints the progress and the 15 slowest tests; TESTS_N=0 runs them all in this process
TESTS_N ?= 2
test: $(STAMP)
	@echo "== 1/3 the unit tests (tests/: $(TESTS_N) processes, the slowest tests at the end)"
	$(PY) -m pytest tests -o addopts="" -n $(TESTS_N) --dist loadfile --durations=15
	@echo "== 2/3 the installed wheel: built, installed in a fresh environment, run outside the clone"
	$(PY) tests/installed/check.py
	@echo "== 3/3 the proof obligations of every rule (python -m proofs)"
	$(PY) -m proofs

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]' || echo "optional peers (JAX, PyTorch) not installed; measuring without them"
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .tl_cache
