# The two README commands: `make demo` (the main job on the embedded default) and `make test`.
# Both create .venv and install the project on first use, so a fresh clone needs nothing else
# (Python 3.10+ and Java 17 for Spark).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: demo test test-fast install engine clean

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m omnigraph_spark.demo

test: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest $(PYTEST_ARGS)

engine:
	bash scripts/install-omnigraph.sh

clean:
	rm -rf $(VENV) demo-graph .pytest_cache
