# The two README commands: `make demo` (the main job on the embedded default) and `make test`.
# Both create .venv and install the project on first use, so a fresh clone needs nothing else
# but the prerequisites `make prereqs` checks (README.md: Python 3.10+, a JDK 17, Maven 3, and
# PyPI and Maven Central reachable on first use).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# test-slow's two pytest workers: the tests sharing the SparkSession (or an S3 server) run on one
# of them (tests/conftest.py), the Spark applications of their own spread over both, which keeps
# both cores busy. make test stays in one process: its time is the SparkSession's tests, one worker's
# anyway. XDIST= runs test-slow in one process.
XDIST ?= -n 2 --dist loadgroup

# The repository's own modules, byte-compiled before a run as a pip install of the wheel compiles
# them: every Spark application and Python worker a run starts imports them, and where
# PYTHONDONTWRITEBYTECODE is set none of them writes a cache, so each would compile them again.
BYTECODE = $(1) -m compileall -q omnigraph_spark pyspark_omnigraph.py tests examples benchmarks

.PHONY: demo lint test test-slow test-all test-oldest-spark install engine jvm-shim wheel prereqs clean

prereqs:
	@command -v $(PYTHON) >/dev/null || { echo "missing: $(PYTHON) (Python 3.10+)"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "$(PYTHON) is older than 3.10"; exit 1; }
	@command -v java >/dev/null && command -v javac >/dev/null || { echo "missing: a JDK 17 with java and javac (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@command -v $(MVN) >/dev/null || { echo "missing: Maven 3, which builds jvm-shim (Debian/Ubuntu: apt-get install maven; macOS: brew install maven)"; exit 1; }

$(VENV)/.installed: setup.py | prereqs
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --config-settings editable_mode=compat -e '.[test]'
	touch $@

install: $(VENV)/.installed

# The JVM paths (jvm-shim/, a Maven module): `mvn verify` compiles the shim against Spark (a
# `provided` dependency), runs its JUnit tests (with spec/'s golden files, which pytest checks
# against the Python side too), builds jvm-shim/target/omnigraph-spark-shim-<version>.jar and
# copies its runtime libraries (the Lance Java SDK) into jvm-shim/target/lib. One version for
# the wheel and the jar: omnigraph_spark/VERSION, passed to Maven as -Drevision.
VERSION := $(shell cat omnigraph_spark/VERSION)
MVN ?= mvn
MAVEN = $(MVN) -q -B -f jvm-shim/pom.xml -Drevision=$(VERSION)
SHIM := jvm-shim/target/omnigraph-spark-shim-$(VERSION).jar
SHIM_INPUTS := jvm-shim/pom.xml omnigraph_spark/VERSION $(shell find jvm-shim/src spec -type f 2>/dev/null)
$(SHIM): $(SHIM_INPUTS) | prereqs
	rm -rf jvm-shim/target/lib jvm-shim/target/omnigraph-spark-shim-*.jar
	$(MAVEN) verify
	touch $@

jvm-shim: $(SHIM)

# The wheel a user pip-installs: the package with the shim jar inside (omnigraph_spark/jars/);
# its Lance libraries resolve from Maven through omnigraph_spark.configure_spark(builder).
PACKAGED_SHIM := omnigraph_spark/jars/omnigraph-spark-shim-$(VERSION).jar
$(PACKAGED_SHIM): $(SHIM)
	rm -f omnigraph_spark/jars/omnigraph-spark-shim*.jar
	cp $(SHIM) $@

wheel: $(PACKAGED_SHIM)
	rm -rf build
	$(PY) -m pip wheel -q --no-deps -w dist .

demo: $(VENV)/.installed $(SHIM)
	$(call BYTECODE,$(PY))
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m omnigraph_spark.demo

# Lint, format and type check (ruff.toml, mypy.ini): seconds, so CI runs it first.
lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# The test command: the shim's JUnit tests (its build, when jvm-shim/ or spec/ changed), then
# every pytest test except the ones marked slow (real Spark applications started as
# subprocesses: examples, the Spark crash matrix, multi-application concurrency, task faults, a
# Spark standalone master with two workers on this machine).
test: $(VENV)/.installed $(SHIM)
	$(call BYTECODE,$(PY))
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# The slow half (CI runs it after `make test`); the cluster tests' wheel routes ship the packaged jar.
test-slow: $(VENV)/.installed $(SHIM) $(PACKAGED_SHIM)
	$(call BYTECODE,$(PY))
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -m slow $(XDIST) $(PYTEST_ARGS)

test-all: test test-slow

# The oldest supported pyspark (4.0.1) in a second environment, with the Delta release of that
# Spark line (the `delta` extra): the fast Spark tests of what differs between Spark lines (the
# Python DataSource API and its filter pushdown, streaming, the JVM provider, sink and reader
# compiled against the newest line, planning, options, object-store settings) and the Delta
# example. The load-wide checks (Spark joins and aggregations of the DataFrame API) and the slow
# Spark applications run once, on the newest pyspark, in test and test-slow. `.venv` has the
# newest pyspark the core allows, where the Delta example skips (Delta's own range stops below it).
OLDEST_SPARK_TESTS := $(addprefix tests/spark/,test_read.py test_read_filters.py test_read_planning.py \
  test_write.py test_stream.py test_graph_io.py test_options.py test_jvm_read.py test_jvm_write.py \
  test_provider.py test_runtime.py test_object_store.py test_sql.py)
OLD_VENV ?= .venv-spark40
$(OLD_VENV)/.installed: setup.py | prereqs
	$(PYTHON) -m venv $(OLD_VENV)
	$(OLD_VENV)/bin/python -m pip install -q --upgrade pip
	$(OLD_VENV)/bin/python -m pip install -q --config-settings editable_mode=compat -e '.[test,delta]' 'pyspark==4.0.1' 'delta-spark==4.0.1'
	touch $@

test-oldest-spark: $(OLD_VENV)/.installed $(SHIM)
	$(call BYTECODE,$(OLD_VENV)/bin/python)
	PYSPARK_PYTHON=$(abspath $(OLD_VENV)/bin/python) $(OLD_VENV)/bin/python -m pytest \
	  -m "spark and not slow" $(OLDEST_SPARK_TESTS) $(PYTEST_ARGS)
	PYSPARK_PYTHON=$(abspath $(OLD_VENV)/bin/python) OMNIGRAPH_SPARK_REQUIRE_DELTA=1 $(OLD_VENV)/bin/python -m pytest \
	  tests/examples/test_examples.py::test_delta_to_graph tests/examples/test_examples.py::test_graph_to_delta $(PYTEST_ARGS)

engine:
	bash scripts/install-omnigraph.sh

clean:
	rm -rf $(VENV) demo-graph .pytest_cache
