"""df.write.format("omnigraph"): one graph commit per Spark job, validated, atomic."""

from __future__ import annotations

import os

import pytest

from omnigraph_spark import Graph

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


def rows(graph_or_uri, key: str, branch: str = "main", sort: str = "id") -> list[dict]:
    g = Graph.open(graph_or_uri) if isinstance(graph_or_uri, str) else graph_or_uri
    return sorted(g.read_table(key, g.snapshot(branch)).to_pylist(), key=lambda r: r[sort])


def data_files(uri: str) -> int:
    """Data files of the node and edge tables (any lineage), committed or staged."""
    n = 0
    for top in ("nodes", "edges"):
        for dirpath, _dirs, files in os.walk(os.path.join(uri, top)):
            if os.path.basename(dirpath) == "data":
                n += sum(1 for f in files if f.endswith(".lance"))
    return n


def save(df, uri: str, type_: str, mode: str = "append", **opts) -> None:
    w = df.write.format("omnigraph").mode(mode).option("type", type_)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(uri)


def expect_code(exc_info, code: str) -> None:
    from omnigraph_spark.spark import unwrap_error

    err = unwrap_error(exc_info.value)
    assert err is not None, f"no omnigraph error in: {str(exc_info.value)[:2000]}"
    assert err.code == code, str(err)


def test_append_on_main(spark, test_graph):
    uri = test_graph.root
    df = spark.createDataFrame([("Alice", 30), ("Bob", None)], "name string, age int").repartition(2)
    save(df, uri, "Person", actor="alice@test")
    g = Graph.open(uri)
    assert rows(g, "node:Person") == [
        {"id": "Alice", "age": 30, "name": "Alice"},
        {"id": "Bob", "age": None, "name": "Bob"},
    ]
    snap = g.snapshot()
    assert snap.tables["node:Person"].version == 3  # data at 2, the engine's indexes at 3 (I23)
    assert snap.tables["node:Company"].version == 1
    log = g.log()
    assert len(log) == 2
    assert log[1].parent_commit_id == log[0].graph_commit_id
    assert log[1].manifest_version == snap.version
    assert log[1].actor_id == "alice@test"


CARD_SCHEMA = """
node Person {
    name: String @key
    email: String? @unique
    age: I32?
}

edge Manages: Person -> Person @card(0..1)
"""


def test_modes_on_main_and_branch(spark, test_graph):
    uri = test_graph.root
    save(spark.createDataFrame([("Alice", 30), ("Bob", 25)], "name string, age int"), uri, "Person")
    # merge replaces whole rows by id and inserts new ones
    save(spark.createDataFrame([("Bob", 26), ("Cara", None)], "name string, age int"), uri, "Person", writeMode="merge")
    assert [(r["id"], r["age"]) for r in rows(uri, "node:Person")] == [("Alice", 30), ("Bob", 26), ("Cara", None)]
    # a branch: append there, main unchanged; the table is forked on first write
    g = Graph.open(uri)
    g.create_branch("dev")
    save(spark.createDataFrame([("Dan", 40)], "name string, age int"), uri, "Person", branch="dev")
    assert [r["id"] for r in rows(uri, "node:Person", "dev")] == ["Alice", "Bob", "Cara", "Dan"]
    assert [r["id"] for r in rows(uri, "node:Person")] == ["Alice", "Bob", "Cara"]
    g = Graph.open(uri)
    assert g.snapshot("dev").tables["node:Person"].branch == "dev"
    # overwrite (Spark's mode) on the branch, then merge on the branch
    save(spark.createDataFrame([("Eve", 1)], "name string, age int"), uri, "Person", mode="overwrite", branch="dev")
    save(
        spark.createDataFrame([("Eve", 2), ("Fay", 3)], "name string, age int"),
        uri,
        "Person",
        writeMode="merge",
        branch="dev",
    )
    assert [(r["id"], r["age"]) for r in rows(uri, "node:Person", "dev")] == [("Eve", 2), ("Fay", 3)]
    # overwrite on main via writeMode; edges then validated against the new node set only
    save(spark.createDataFrame([("Zoe", 9)], "name string, age int"), uri, "Person", writeMode="overwrite")
    assert [r["id"] for r in rows(uri, "node:Person")] == ["Zoe"]
    g = Graph.open(uri)
    log = g.log()
    assert len(log) == 4 and all(b.parent_commit_id == a.graph_commit_id for a, b in zip(log, log[1:]))
    assert g.snapshot().tables["node:Person"].version == 7  # three loads, each data then indexes (I23)
    dev = g.log("dev")
    assert len(dev) == 6  # init + 2 on main + 3 on dev
    # Spark's overwrite contradicts writeMode=append: refused at planning, nothing written
    with pytest.raises(Exception) as ei:
        save(
            spark.createDataFrame([("Q", 1)], "name string, age int"),
            uri,
            "Person",
            mode="overwrite",
            writeMode="append",
        )
    expect_code(ei, "OPTION_INVALID")
    assert Graph.open(uri).snapshot().version == g.snapshot().version


def _unchanged(uri, version, files):
    g = Graph.open(uri)
    assert g.snapshot().version == version
    assert data_files(uri) == files, "staged files were left behind"
    assert not g.pending_sidecars()


def test_validation_failures_leave_graph_unchanged(spark, tmp_path):
    uri = str(tmp_path / "card")
    Graph.init(uri, CARD_SCHEMA)
    save(
        spark.createDataFrame([("Ann", "a@x", 1), ("Ben", "b@x", 2)], "name string, email string, age int"),
        uri,
        "Person",
    )
    v, files = Graph.open(uri).snapshot().version, data_files(uri)
    cases = [
        # (frame, type, options, code)
        (spark.createDataFrame([("Cy", 1, "x")], "name string, age int, shoe string"), "Person", {}, "UNKNOWN_COLUMN"),
        (
            spark.createDataFrame([(None, 1), ("Dee", 2)], "name string, age int").repartition(2),
            "Person",
            {},
            "NULL_VIOLATION",
        ),
        (
            spark.createDataFrame([("Cy", "c@x"), ("Di", "c@x")], "name string, email string"),
            "Person",
            {},
            "UNIQUE_VIOLATION",
        ),
        (
            spark.createDataFrame([("Cy", 1), ("Cy", 2)], "name string, age int"),
            "Person",
            {"writeMode": "merge"},
            "UNIQUE_VIOLATION",
        ),
        (spark.createDataFrame([("Ann", "Nobody")], "`from` string, `to` string"), "Manages", {}, "DANGLING_EDGE"),
        (
            spark.createDataFrame([("Ann", "Ben"), ("Ann", "Ann")], "`from` string, `to` string"),
            "manages",
            {},
            "CARDINALITY_VIOLATION",
        ),
        (spark.createDataFrame([("Ann", "Ben")], "`from` string, `to` string"), "Nope", {}, "UNKNOWN_TYPE"),
    ]
    for df, type_, opts, code in cases:
        with pytest.raises(Exception) as ei:
            save(df, uri, type_, **opts)
        expect_code(ei, code)
        _unchanged(uri, v, files)
    # @card counts committed edges too
    save(spark.createDataFrame([("Ann", "Ben")], "`from` string, `to` string"), uri, "Manages")
    v, files = Graph.open(uri).snapshot().version, data_files(uri)
    with pytest.raises(Exception) as ei:
        save(spark.createDataFrame([("Ann", "Ann")], "`from` string, `to` string"), uri, "Manages")
    expect_code(ei, "CARDINALITY_VIOLATION")
    _unchanged(uri, v, files)


def test_only_committed_attempt_is_visible(test_graph):
    """Task retries / speculation: Spark passes commit() one message per partition; files of
    the other attempt are never referenced, and abort() removes them."""
    import pyarrow as pa

    from omnigraph_spark.spark.writer import OmnigraphWriter

    uri = test_graph.root
    files0 = data_files(uri)
    w = OmnigraphWriter({"path": uri, "type": "Person"}, None, False)
    batch = pa.record_batch({"name": ["Alice", "Bob"], "age": pa.array([1, 2], pa.int32())})
    first = w.write(iter([batch]))  # attempt 0 (say it lost its executor after writing)
    second = w.write(iter([batch]))  # attempt 1 (the one the driver received)
    assert data_files(uri) == files0 + 2
    w.commit([second])
    assert [r["id"] for r in rows(uri, "node:Person")] == ["Alice", "Bob"]
    w.abort([first])
    assert data_files(uri) == files0 + 1
    assert Graph.open(uri).read_table("node:Person").num_rows == 2


def test_txn_token_writes_once(spark, test_graph):
    uri = test_graph.root
    df = spark.createDataFrame([("Alice", 30)], "name string, age int")
    for _ in range(2):
        save(df, uri, "Person", txnAppId="nightly", txnVersion="7")
    g = Graph.open(uri)
    assert g.read_table("node:Person").num_rows == 1 and len(g.log()) == 2
    save(df.selectExpr("'Bob' as name", "age"), uri, "Person", txnAppId="nightly", txnVersion="8")
    assert Graph.open(uri).read_table("node:Person").num_rows == 2


def test_concurrent_writers_both_commit(spark, test_graph):
    import threading

    from omnigraph_spark.spark.graph_io import write_graph

    uri = test_graph.root
    errors = []

    def run(prefix):
        try:
            df = spark.createDataFrame([(f"{prefix}{i}", i) for i in range(5)], "name string, age int")
            write_graph(uri, {"Person": df}, actor=prefix)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    g = Graph.open(uri)
    ids = [r["id"] for r in rows(g, "node:Person")]
    assert ids == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
    assert len(g.log()) == 3 and {c.actor_id for c in g.log()[1:]} == {"a", "b"}


def test_load_wide_checks_run_concurrently_but_report_in_order():
    """Validation runs its independent checks on a thread pool; the error raised is always the
    one a sequential run raises first (I4: a bad load is refused, with a stable message)."""
    import threading
    import time

    from omnigraph_spark.errors import DanglingEdgeError, UniqueViolationError
    from omnigraph_spark.spark.parallel import run_checks

    ran: list[str] = []
    lock = threading.Lock()

    def ok(name, delay=0.0):
        def f():
            time.sleep(delay)
            with lock:
                ran.append(name)

        return f

    def fail(exc, delay=0.0):
        def f():
            time.sleep(delay)
            raise exc

        return f

    # the later check fails first in wall time; the earlier one's error is the one reported
    with pytest.raises(UniqueViolationError):
        run_checks(
            [ok("a"), fail(UniqueViolationError("dup"), 0.2), fail(DanglingEdgeError("dangling"))], max_workers=3
        )
    run_checks([ok("x", 0.05), ok("y"), ok("z")], max_workers=3)
    assert sorted(ran) == ["a", "x", "y", "z"]
    run_checks([], max_workers=3)


def test_a_frame_with_a_timestamp_column_is_checked_at_planning(tmp_path):
    """The planner derives the Arrow schema Spark will send, timestamps included (in UTC), so an
    unknown column beside a timestamp is refused when the writer is made, before any task."""
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    from omnigraph_spark.errors import UnknownColumnError
    from omnigraph_spark.spark.writer import OmnigraphWriter, spark_to_arrow_schema

    uri = str(tmp_path / "ts")
    Graph.init(uri, CARD_SCHEMA)
    schema = StructType(
        [StructField("name", StringType()), StructField("seen", TimestampType()), StructField("shoe", StringType())]
    )
    assert spark_to_arrow_schema(schema) is not None
    with pytest.raises(UnknownColumnError, match="seen"):
        OmnigraphWriter({"path": uri, "type": "Person"}, schema, overwrite=False)
