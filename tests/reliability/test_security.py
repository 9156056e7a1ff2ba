"""Security: hostile values, names that try to leave the graph root, and credentials.

* Hostile ids (quotes, SQL fragments, LIKE wildcards, backslashes, newlines) written through the
  Spark writer read back exactly with ``.filter(col("id") == value)`` (pushdown on), and a merge
  keyed on them (the commit builds a Lance delete predicate from the ids) touches exactly those
  rows.
* Type and branch names such as ``../x``, ``/etc``, ``a/../../b`` are refused everywhere (write,
  read, branch creation) and nothing is created outside the graph root.
* A credential given as ``storage.aws_secret_access_key`` never appears in logs (Python logging
  at DEBUG, driver and captured process output), error messages, option/target reprs, the
  sidecar, commit rows, ``_omnigraph_spark`` records or any other file of the root, nor in the
  Spark plan string of a read.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import BranchError, OmnigraphError
from omnigraph_spark.spark import unwrap_error

from .helpers import STATS

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

HOSTILE = [
    "O'Brien",
    "x' OR '1'='1",
    "'; DROP TABLE nodes; --",
    "a) OR (1=1",
    "id IN ('Ann')",
    '"double"',
    "back\\slash",
    "50%_off",
    "line\nbreak",
    "tab\there",
    "''",
    "ünï©ødé ✓",
    "Ann' --",
]
SECRET = "SECRET123"
STORAGE = {"storage.aws_secret_access_key": SECRET, "storage.aws_access_key_id": "AKIDLEAK456"}


def _save(df, root, **opts):
    w = df.write.format("omnigraph").option("type", "Person")
    for k, v in opts.items():
        w = w.option(k, v)
    w.mode("append").save(root)


def test_hostile_ids_round_trip_through_writer_and_filters(spark, test_graph):
    """Filter pushdown with quotes and SQL fragments returns exactly the matching row (I13 reads)."""
    from pyspark.sql.functions import col

    root = test_graph.root
    plain = ["Ann", "Bob", "1"]
    _save(spark.createDataFrame([(h, i) for i, h in enumerate(HOSTILE + plain)], "name string, age int"), root)
    df = spark.read.format("omnigraph").option("type", "Person").load(root)
    assert df.count() == len(HOSTILE) + len(plain)
    for i, h in enumerate(HOSTILE + plain):
        got = df.filter(col("id") == h).select("id", "age").collect()
        assert [(r["id"], r["age"]) for r in got] == [(h, i)], h
    for h in HOSTILE[:3]:
        assert df.filter(col("name") != h).count() == len(HOSTILE) + len(plain) - 1, h
    got = sorted(r["id"] for r in df.filter(col("id").isin(HOSTILE[:4])).collect())
    assert got == sorted(HOSTILE[:4])
    assert df.filter(col("id").startswith("50%")).count() == 1
    STATS["rows_checked"] += len(HOSTILE) + len(plain)


def test_hostile_ids_in_merge_touch_only_their_rows(spark, test_graph):
    """The merge commit deletes matched rows with a Lance predicate built from the ids: quoting
    must keep every other row (I1: the load is exactly its rows)."""
    root = test_graph.root
    plain = ["Ann", "Bob", "1"]
    _save(spark.createDataFrame([(h, 1) for h in HOSTILE + plain], "name string, age int"), root)
    _save(spark.createDataFrame([(h, 2) for h in HOSTILE], "name string, age int"), root, writeMode="merge")
    rows = {r["id"]: r["age"] for r in Graph.open(root).read_table("node:Person").to_pylist()}
    assert len(rows) == len(HOSTILE) + len(plain)
    assert {h: rows[h] for h in HOSTILE} == {h: 2 for h in HOSTILE}
    assert {p: rows[p] for p in plain} == {p: 1 for p in plain}


ESCAPES = ["../x", "/etc", "a/../../b", "..", "./x", "x/..", "/", "~root", "a\\..\\b", "nodes/../../x"]


def _outside_listing(root: str):
    parent = Path(root).parent
    return sorted(str(p.relative_to(parent)) for p in parent.rglob("*") if not str(p).startswith(root))


@pytest.mark.parametrize("name", ESCAPES)
def test_names_cannot_escape_the_root(spark, test_graph, name):
    """Type and branch names are never paths: refused for writes, reads and branch creation."""
    root = test_graph.root
    outside = _outside_listing(root)
    df = spark.createDataFrame([("Cy", 1)], "name string, age int")
    for opt in ("type", "branch"):
        with pytest.raises(Exception) as ei:
            w = df.write.format("omnigraph").option("type", "Person")
            w.option(opt, name).mode("append").save(root)
        err = unwrap_error(ei.value)
        assert err is not None and err.code in ("UNKNOWN_TYPE", "OPTION_INVALID", "BRANCH_INVALID"), ei.value
        with pytest.raises(Exception) as ei:
            spark.read.format("omnigraph").option("type", "Person").option(opt, name).load(root).collect()
        err = unwrap_error(ei.value)
        assert err is not None and err.code in ("UNKNOWN_TYPE", "OPTION_INVALID", "BRANCH_INVALID"), ei.value
    with pytest.raises(BranchError):
        Graph.open(root).create_branch(name)
    assert _outside_listing(root) == outside
    assert Graph.open(root).branches() == ["main"]
    assert Graph.open(root).read_table("node:Person").num_rows == 0


def _all_bytes(root: str):
    for dirpath, _d, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                yield p, fh.read()


def test_storage_options_are_redacted_in_reprs(test_graph):
    """Every value object that carries storage options (pickled to executors, easy to log or to
    show in a traceback) keeps them out of its repr."""
    from omnigraph_spark.spark.journal import Journal
    from omnigraph_spark.spark.options import ReadOptions, WriteOptions
    from omnigraph_spark.spark.reader import ReadPlan
    from omnigraph_spark.store import writes

    wo = WriteOptions.from_options({"path": test_graph.root, "type": "Person", **STORAGE})
    ro = ReadOptions.from_options({"path": test_graph.root, "type": "Person", **STORAGE})
    assert wo.storage_options == {"aws_secret_access_key": SECRET, "aws_access_key_id": "AKIDLEAK456"}
    g = Graph.open(test_graph.root, wo.storage_options)
    values = [
        wo,
        ro,
        writes.prepare_target(g, "main", "node:Person", "append"),
        Journal.new(g),
        ReadPlan(g.root + "/nodes/x", None, 1, ("id",), tuple(sorted(wo.storage_options.items()))),
    ]
    for v in values:
        for text in (repr(v), str(v)):
            assert SECRET not in text and "AKIDLEAK456" not in text, text


# py4j logs every command it sends to the JVM at DEBUG — option values included — before our
# code runs; that logger is Spark's, not ours (see docs/guarantees.md, "What is not promised").
THIRD_PARTY_WIRE_LOGGERS = ("py4j",)


def test_credentials_never_leak(spark, test_graph, caplog, capfd, monkeypatch):
    """``storage.*`` secrets stay out of logs, errors, reprs, sidecars, commit rows, our records,
    every file of the root, and the Spark plan string."""
    from omnigraph_spark.spark.options import ReadOptions, WriteOptions
    from omnigraph_spark.store import writes
    from omnigraph_spark.store.failpoints import ENV

    root = test_graph.root
    caplog.set_level(logging.DEBUG)
    leaks = []

    def check(text, where):
        for s in (SECRET, "AKIDLEAK456"):
            if s in text:
                leaks.append(f"{where}: ...{text[max(0, text.index(s) - 200) : text.index(s) + 50]}...")

    # option objects and write targets (pickled to executors, easy to log)
    wo = WriteOptions.from_options({"path": root, "type": "Person", **STORAGE})
    ro = ReadOptions.from_options({"path": root, "type": "Person", **STORAGE})
    check(repr(wo) + str(wo) + repr(ro) + str(ro), "options repr")
    g = Graph.open(root, wo.storage_options)
    target = writes.prepare_target(g, "main", "node:Person", "append")
    check(repr(target), "WriteTarget repr")

    # a Spark write with the secret, an idempotency token (our txn record) and an actor
    df = spark.createDataFrame([("Ann", 1), ("Bob", 2)], "name string, age int").repartition(2)
    _save(df, root, actor="etl", txnAppId="nightly", txnVersion="1", **STORAGE)
    # write_graph with the secret (staging journal, one commit)
    from omnigraph_spark.spark.graph_io import write_graph

    write_graph(root, {"Person": spark.createDataFrame([("Cy", 3)], "name string, age int")}, options=dict(STORAGE))
    # a failed write: its error message
    with pytest.raises(Exception) as ei:
        _save(
            spark.createDataFrame([("Ann", 1)], "name string, age int"),
            root,
            writeMode="merge",
            branch="nope",
            **STORAGE,
        )
    check(str(ei.value), "error message (missing branch)")
    with pytest.raises(Exception) as ei:
        _save(spark.createDataFrame([("Zed", 1)], "name string, shoe string"), root, **STORAGE)
    check(str(ei.value), "error message (unknown column)")
    with pytest.raises(OmnigraphError) as ei2:
        Graph.open(root + "-missing", wo.storage_options)
    check(str(ei2.value) + repr(ei2.value.context), "error message (missing graph)")

    # a sidecar that stays: crash (raise) right after it is written, in this process
    monkeypatch.setenv(ENV, "after_sidecar:raise")
    st = writes.stage(
        target, pa.Table.from_pylist([{"id": "Dee", "age": 4, "name": "Dee"}], schema=target.schema).to_batches()
    )
    with pytest.raises(OmnigraphError) as ei3:
        writes.commit_load(g, "main", [st], actor="crashy", txn=writes.TxnToken("nightly", 2))
    monkeypatch.delenv(ENV)
    check(str(ei3.value), "failpoint error")
    sidecars = [Path(p).read_text() for p in g.pending_sidecars()]
    assert sidecars, "the failpoint should have left a sidecar"
    for text in sidecars:
        check(text, "sidecar")
    # every byte of the graph root: commit rows, actors, manifest, our records, lease, data files
    for p, data in _all_bytes(root):
        check(data.decode("latin-1"), f"file {os.path.relpath(p, root)}")
    g.recover()
    for p, data in _all_bytes(root):
        check(data.decode("latin-1"), f"file {os.path.relpath(p, root)} (after recovery)")

    # the Spark plan string of a read
    rd = spark.read.format("omnigraph").option("type", "Person")
    for k, v in STORAGE.items():
        rd = rd.option(k, v)
    rdf = rd.load(root)
    assert rdf.count() == 3
    check(rdf._jdf.queryExecution().toString(), "queryExecution")
    rdf.explain(True)
    # the JVM read path takes the options as one value under a key Spark redacts
    from omnigraph_spark import read_table
    from omnigraph_spark.spark.jvm_read import shim_loaded

    if shim_loaded(spark):
        jdf = read_table(
            spark, root, "Person", engine="jvm", storage_options={k[len("storage.") :]: v for k, v in STORAGE.items()}
        )
        assert jdf.count() == 3
        check(jdf._jdf.queryExecution().toString(), "queryExecution (JVM read)")
        jdf.explain(True)
    out, err = capfd.readouterr()
    check(out + err, "explain output / process output")
    for rec in caplog.records:
        if rec.name.split(".")[0] in THIRD_PARTY_WIRE_LOGGERS:
            continue
        check(rec.getMessage() + repr(rec.args), f"log record {rec.name}")
    assert not leaks, "\n".join(leaks)
