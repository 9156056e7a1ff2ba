"""Shared fixtures: one local SparkSession per test session, and fresh graph roots.

``make test-slow`` runs on two pytest-xdist workers (``--dist loadgroup``): every test that
uses a shared session-scoped service (the SparkSession, an S3 server) joins that service's group,
so the whole run still starts one SparkSession, on one worker, while tests that start Spark
applications of their own run on the other. The reliability summary adds up the workers'
counters."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from .object_store import SERVERS
from .reliability.stats import STATS

#: session-scoped fixtures whose tests share one worker (the first one a test uses names its group)
SHARED_SERVICES = ("spark", "s3")

#: the engine's own test fixtures (schemas, JSONL, queries), copied into the repository
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "omnigraph-0.7.2"

# Spark's Python workers must import THIS interpreter (and this package).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_configure(config):
    """Every JVM of the run shares class data per class path (tests/jvm_cds.py), set before
    pytest-xdist starts its workers, which inherit it with every process they start."""
    from . import jvm_cds

    home = jvm_cds.install()
    if home:
        os.environ["JAVA_HOME"] = home


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def test_schema_text(fixtures_dir) -> str:
    return (fixtures_dir / "test.pg").read_text()


@pytest.fixture
def graph_uri(tmp_path) -> str:
    return str(tmp_path / "graph")


@pytest.fixture
def test_graph(graph_uri, test_schema_text):
    """A fresh graph initialised with the engine's test schema (Person, Company, Knows, WorksAt)."""
    from omnigraph_spark import Graph

    return Graph.init(graph_uri, test_schema_text)


@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of the test run: local[2], UI off, Python data source
    filter pushdown on (tests that need it off use the `pushdown_off` fixture)."""
    from pyspark.sql import SparkSession

    from omnigraph_spark.spark.jvm_read import shim_spark_conf
    from omnigraph_spark.spark.runtime import set_local_lance_threads

    master = "local[2]"
    set_local_lance_threads(master)  # as the embedded default session does (demo.local_builder)
    s = (
        SparkSession.builder.master(master)
        .appName("omnigraph-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        # C1 only: the session runs many small plans, each different, where C2 does not pay back
        # its compile time (a fifth off test_dist_checks.py's wall time on 2 cores, A/B)
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        # the JVM read path when built (make test builds it; tests of it skip without it)
        .config(map=shim_spark_conf())
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    from omnigraph_spark.spark import register

    register(s)
    yield s
    s.stop()


@pytest.fixture(scope="session", params=SERVERS)
def s3(request):
    """A local S3 endpoint, a server in a process of its own, shared by the test session: every
    object-store test runs once per server (tests/object_store.py): moto always; SeaweedFS when
    its binary is built, else skipped with the reason, or a failure when
    OMNIGRAPH_SPARK_REQUIRE_SEAWEEDFS=1 (CI). Tests are grouped by server, so each starts once."""
    from .object_store import seaweedfs_bin, seaweedfs_missing, serve

    if request.param == "seaweedfs" and seaweedfs_bin() is None:
        if os.environ.get("OMNIGRAPH_SPARK_REQUIRE_SEAWEEDFS") == "1":
            pytest.fail(seaweedfs_missing() + " (OMNIGRAPH_SPARK_REQUIRE_SEAWEEDFS=1)")
        pytest.skip(seaweedfs_missing())
    yield from serve(request.param)


@pytest.fixture
def s3_graph_root(s3):
    """(root URI, storage options) of a fresh bucket: where an object-store graph goes."""
    return f"s3://{s3.new_bucket()}/graph", s3.storage_options()


@pytest.fixture
def s3_graph(s3_graph_root, test_schema_text):
    """A fresh graph on S3 (the engine's test schema), opened with its storage options."""
    from omnigraph_spark import Graph

    root, so = s3_graph_root
    return Graph.init(root, test_schema_text, so)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = item.get_closest_marker("xdist_group")
        if group:  # a module's own group (its module-scoped service) may not take the SparkSession elsewhere
            if "spark" in item.fixturenames and group.args[:1] != ("spark",):
                raise pytest.UsageError(f"{item.nodeid} uses the SparkSession: its xdist_group must be 'spark'")
            continue
        service = next((name for name in SHARED_SERVICES if name in item.fixturenames), None)
        if service:
            item.add_marker(pytest.mark.xdist_group(service))


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the counters to the controller
        workeroutput["reliability_stats"] = dict(STATS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    STATS.update(getattr(node, "workeroutput", {}).get("reliability_stats", {}))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line: cases tried, crashes survived, rows checked, bad inputs (tests/reliability)."""
    if not STATS:
        return
    keys = ("cases_tried", "crashes_survived", "rows_checked", "bad_inputs", "spark_apps", "engine_checks")
    line = ", ".join(f"{k.replace('_', ' ')}: {STATS.get(k, 0)}" for k in keys)
    terminalreporter.write_line(f"reliability summary: {line}")
