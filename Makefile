# The two README commands: `make demo` (the main job on the embedded default) and `make test`.
# Both create .venv and install the project on first use, so a fresh clone needs nothing else
# (Python 3.10+ and Java 17 for Spark).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: demo test test-slow test-all test-oldest-spark install engine jvm-shim clean

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --config-settings editable_mode=compat -e '.[test]'
	touch $@

install: $(VENV)/.installed

# The JVM read path (jvm-shim/): the Lance Java SDK from Maven Central into jvm-shim/target/lib,
# the shim compiled against the installed pyspark's own Spark jars. Needs javac and mvn.
SHIM := jvm-shim/target/omnigraph-spark-shim.jar
SHIM_SRC := $(wildcard jvm-shim/src/main/java/io/omnigraph/spark/*.java)
$(SHIM): $(VENV)/.installed jvm-shim/pom.xml $(SHIM_SRC)
	rm -rf jvm-shim/target/classes jvm-shim/target/lib
	mvn -q -B -f jvm-shim/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib
	mkdir -p jvm-shim/target/classes
	javac -nowarn --release 17 -d jvm-shim/target/classes \
	  -cp "$$($(PY) -c 'import pyspark,os;print(os.path.join(os.path.dirname(pyspark.__file__),"jars"))')/*:jvm-shim/target/lib/*" $(SHIM_SRC)
	jar cf $@ -C jvm-shim/target/classes .

jvm-shim: $(SHIM)

demo: $(VENV)/.installed $(SHIM)
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m omnigraph_spark.demo

# The test command: every test except the ones marked slow (real Spark applications started as
# subprocesses: examples, the Spark crash matrix, multi-application concurrency, task faults).
test: $(VENV)/.installed $(SHIM)
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# The slow half (CI runs it after `make test`).
test-slow: $(VENV)/.installed $(SHIM)
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -m slow $(PYTEST_ARGS)

test-all: test test-slow

# The oldest supported pyspark (4.0.1) in a second environment: the Spark tests only.
OLD_VENV ?= .venv-spark40
$(OLD_VENV)/.installed: setup.py
	$(PYTHON) -m venv $(OLD_VENV)
	$(OLD_VENV)/bin/python -m pip install -q --upgrade pip
	$(OLD_VENV)/bin/python -m pip install -q --config-settings editable_mode=compat -e '.[test]' 'pyspark==4.0.1'
	touch $@

test-oldest-spark: $(OLD_VENV)/.installed $(SHIM)
	PYSPARK_PYTHON=$(abspath $(OLD_VENV)/bin/python) $(OLD_VENV)/bin/python -m pytest -m "spark and not slow" tests/spark $(PYTEST_ARGS)

engine:
	bash scripts/install-omnigraph.sh

clean:
	rm -rf $(VENV) demo-graph .pytest_cache
