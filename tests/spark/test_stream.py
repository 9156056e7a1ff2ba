"""Structured Streaming into a graph (docs/streaming.md): writeStream.format("omnigraph") and the
foreachBatch GraphBatchWriter, with real file and rate sources: one graph commit per non-empty
micro-batch, exactly once across replays (invariants I12, I19), nothing left by a failed batch."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import OptionError
from omnigraph_spark.spark.stream import GraphBatchWriter, OmnigraphRowStreamWriter, StreamMessage, stream_app_id
from omnigraph_spark.store.writes import TxnToken, already_applied

from .test_write import data_files, expect_code

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

PEOPLE_SCHEMA = "name string, age int"
EVENT_SCHEMA = "kind string, name string, age int, src string, dst string"


def drop(folder: Path, name: str, records: list[dict]) -> None:
    """Write a JSON-lines file atomically (rename), as a producer dropping files would. Files
    dropped in a row get increasing modification times: the file source takes them in that order."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    newest = max((p.stat().st_mtime for p in folder.iterdir() if not p.name.startswith(".")), default=0.0)
    t = max(time.time(), newest + 1.0)
    os.utime(tmp, (t, t))
    os.replace(tmp, folder / name)


def people(prefix: str, n: int, start: int = 0) -> list[dict]:
    return [{"name": f"{prefix}{i:04d}", "age": i % 90} for i in range(start, start + n)]


def run_available(spark, src: Path, uri: str, checkpoint: Path, schema: str = PEOPLE_SCHEMA, **opts):
    """One run of a file stream into Person until the folder is drained (availableNow), one
    file per micro-batch. Returns the finished query."""
    w = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .writeStream.format("omnigraph")
        .option("type", opts.pop("type", "Person"))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    for k, v in opts.items():
        w = w.option(k, v)
    return finish(w.start(uri))


def finish(q, timeout: float = 240):
    """Wait for an availableNow query; a failed one is returned (``q.exception()``), not raised."""
    from pyspark.errors import StreamingQueryException

    try:
        q.awaitTermination(timeout)
    except StreamingQueryException:
        pass
    return q


def names(g: Graph, key: str = "node:Person") -> list[str]:
    return sorted(g.read_table(key, g.snapshot(), columns=["id"]).column("id").to_pylist())


def stream_commits(g: Graph) -> int:
    return len(g.log()) - 1  # the graph's init commit


def test_file_stream_one_commit_per_micro_batch(spark, test_graph, tmp_path):
    """Three files, three micro-batches, three graph commits with the stream's txn token; a
    restart from the checkpoint writes only the file dropped since; nothing is left in the
    staging area."""
    uri, src, ck = test_graph.root, tmp_path / "in", tmp_path / "ck"
    for i in range(3):
        drop(src, f"f{i}.json", people(f"p{i}-", 200))
    q = run_available(spark, src, uri, ck, actor="stream@test")
    assert q.exception() is None
    g = Graph.open(uri)
    assert len(names(g)) == 600 and stream_commits(g) == 3
    assert {c.actor_id for c in g.log()[1:]} == {"stream@test"}
    # the token of the last micro-batch is recorded: (spark-stream:<query id>, 2)
    assert already_applied(g, TxnToken(stream_app_id(str(q.id)), 2)) is not None
    assert already_applied(g, TxnToken(stream_app_id(str(q.id)), 3)) is None

    drop(src, "f3.json", people("p3-", 50))
    q2 = run_available(spark, src, uri, ck, actor="stream@test")
    assert q2.exception() is None and str(q2.id) == str(q.id)  # same checkpoint, same query id
    g = Graph.open(uri)
    assert len(names(g)) == 650 and len(set(names(g))) == 650 and stream_commits(g) == 4
    # each micro-batch removes what its tasks left beside the data (the key fingerprints, I15)
    staging = Path(uri) / "_omnigraph_spark" / "staging"
    assert [p for p in staging.rglob("*") if p.is_file()] == []


def _drop_last_commit_log(ck: Path) -> int:
    """Make the checkpoint forget that its last micro-batch committed (as if the driver died
    between the graph commit and Spark's commit log): Spark replays that batch on restart."""
    commits = sorted((p for p in (ck / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last = commits[-1]
    last.unlink()
    crc = ck / "commits" / f".{last.name}.crc"
    if crc.exists():
        crc.unlink()
    return int(last.name)


def test_replayed_micro_batch_is_a_noop(spark, test_graph, tmp_path):
    """I12, I19: Spark replays a micro-batch whose graph commit landed but whose checkpoint
    commit did not; the replay carries the same (query id, batch id) and commits nothing, and
    its staged files are removed."""
    uri, src, ck = test_graph.root, tmp_path / "in", tmp_path / "ck"
    drop(src, "f0.json", people("a", 300))
    drop(src, "f1.json", people("b", 300))
    run_available(spark, src, uri, ck)
    g = Graph.open(uri)
    before = (len(g.log()), g.snapshot().version, data_files(uri))
    assert len(names(g)) == 600
    replayed = _drop_last_commit_log(ck)
    assert replayed == 1
    q = run_available(spark, src, uri, ck)
    assert q.exception() is None
    g = Graph.open(uri)
    assert len(names(g)) == 600 and len(set(names(g))) == 600
    assert (len(g.log()), g.snapshot().version, data_files(uri)) == before
    assert (ck / "commits" / "1").exists()  # Spark recorded the replayed batch as done


def test_rate_source_merge_stream(spark, test_graph, tmp_path):
    """Spark's rate source, processing-time trigger, writeMode=merge: every generated value is
    in the graph once; one commit per non-empty micro-batch."""
    from pyspark.sql import functions as F

    uri = test_graph.root
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 200)
        .option("numPartitions", 2)
        .load()
        .select(F.format_string("r%06d", F.col("value")).alias("name"), (F.col("value") % 100).cast("int").alias("age"))
    )
    q = (
        df.writeStream.format("omnigraph")
        .option("type", "Person")
        .option("writeMode", "merge")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="1 second")
        .start(uri)
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum(p["numInputRows"] for p in q.recentProgress) < 600:
            time.sleep(0.5)
    finally:
        q.stop()
    progress = q.recentProgress
    batches = [p for p in progress if p["numInputRows"] > 0]
    total = sum(p["numInputRows"] for p in batches)
    assert total >= 600
    g = Graph.open(uri)
    got = names(g)
    # q.stop() can land after a micro-batch committed but before Spark recorded its progress
    # event: the graph may hold more batches than recentProgress lists, never fewer, and every
    # generated value exactly once with none skipped
    assert len(got) >= total
    assert got == [f"r{i:06d}" for i in range(len(got))]
    assert stream_commits(g) >= len(batches)


def test_failed_micro_batch_leaves_nothing(spark, test_graph, tmp_path):
    """A micro-batch refused at the commit (an edge to a missing node) and one whose tasks fail
    (a value that does not convert) stop the query with the typed error; the graph is unchanged
    and no staged file is left."""
    uri = test_graph.root
    drop(tmp_path / "ok", "f0.json", people("p", 10))
    run_available(spark, tmp_path / "ok", uri, tmp_path / "ck0")
    g = Graph.open(uri)
    before = (len(g.log()), g.snapshot().version, data_files(uri))

    drop(tmp_path / "edges", "e0.json", [{"src": "p0000", "dst": "nobody"}])
    q = run_available(spark, tmp_path / "edges", uri, tmp_path / "ck1", schema="src string, dst string", type="Knows")
    assert q.exception() is not None
    expect_code(_Raised(q.exception()), "DANGLING_EDGE")

    drop(tmp_path / "bad", "b0.json", [{"name": "x", "age": "not a number"}])
    q = run_available(spark, tmp_path / "bad", uri, tmp_path / "ck2", schema="name string, age string")
    assert q.exception() is not None
    g = Graph.open(uri)
    assert (len(g.log()), g.snapshot().version, data_files(uri)) == before
    assert not g.pending_sidecars()


class _Raised:
    """Adapts a StreamingQueryException to expect_code's pytest.raises shape."""

    def __init__(self, exc):
        self.value = exc


def test_stream_options_refused(spark, test_graph, tmp_path):
    """Overwrite (Spark's complete mode or writeMode=overwrite) and txn options are refused
    before any micro-batch runs."""
    from omnigraph_spark.spark.stream import _sink_options

    for opts, overwrite in (
        ({"writeMode": "overwrite"}, False),
        ({}, True),
        ({"txnAppId": "a"}, False),
        ({"txnVersion": "1"}, False),
    ):
        with pytest.raises(OptionError):
            _sink_options({"path": test_graph.root, "type": "Person", **opts}, overwrite)
    assert _sink_options({"path": "p", "type": "Person", "checkpointLocation": "c"}, False) == {
        "path": "p",
        "type": "Person",
    }
    with pytest.raises(OptionError):
        GraphBatchWriter(test_graph.root, lambda df: {}, options={"txnVersion": 3})


def test_row_stream_writer_commits_once(spark, test_graph):
    """The pyspark 4.0 writer (Rows in): the same staging, one commit, a replay a no-op, an empty
    micro-batch nothing. Driven directly (pyspark 4.3 hands Arrow to the registered writer)."""
    from pyspark.sql import Row

    uri = test_graph.root
    opts = {"path": uri, "type": "Person", "checkpointLocation": "/nowhere"}
    w = OmnigraphRowStreamWriter(opts, spark.createDataFrame([], PEOPLE_SCHEMA).schema, False)

    def batch(rows):
        m = w.write(iter([Row(name=n, age=a) for n, a in rows]))
        return [StreamMessage(m.inner, "q-rows", None)]

    w.commit(batch([]), 0)  # empty: nothing
    assert stream_commits(Graph.open(uri)) == 0
    msgs = batch([("a", 1), ("b", None)])
    w.commit(msgs, 1)
    w.commit(batch([("a", 1), ("b", None)]), 1)  # the replay of batch 1: a no-op
    w.commit(batch([("c", 3)]), 0)  # below the high-water mark (I19): a no-op too
    g = Graph.open(uri)
    assert names(g) == ["a", "b"] and stream_commits(g) == 1
    assert sorted(r["age"] is None for r in g.read_table("node:Person").to_pylist()) == [False, True]


# -- foreachBatch: nodes and edges, one commit per micro-batch ----------------------------------


def split_events(batch_df) -> dict[str, object]:
    """Events -> Person nodes and Knows edges (one kind column selects the rows)."""
    from pyspark.sql import functions as F

    return {
        "Person": batch_df.where(F.col("kind") == "person").select("name", "age"),
        "Knows": batch_df.where(F.col("kind") == "knows").select("src", "dst"),
    }


def events(batch: int, n: int) -> list[dict]:
    """n new people and a chain of n-1 edges among them, plus one edge to the previous batch."""
    out = [{"kind": "person", "name": f"b{batch}-{i:03d}", "age": i} for i in range(n)]
    out += [{"kind": "knows", "src": f"b{batch}-{i:03d}", "dst": f"b{batch}-{i + 1:03d}"} for i in range(n - 1)]
    if batch:
        out.append({"kind": "knows", "src": f"b{batch}-000", "dst": f"b{batch - 1}-000"})
    return out


def run_graph_stream(spark, src: Path, uri: str, ck: Path):
    q = (
        spark.readStream.schema(EVENT_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .writeStream.foreachBatch(GraphBatchWriter(uri, split_events, engine="python"))
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    return finish(q)


def test_graph_batch_writer_exactly_once(spark, test_graph, tmp_path):
    """foreachBatch(GraphBatchWriter): each micro-batch's nodes and edges are ONE graph commit
    (an edge may point at a node of the same batch); a replay of a committed batch id commits
    nothing (I12, I19); no edge dangles."""
    uri, src, ck = test_graph.root, tmp_path / "in", tmp_path / "ck"
    for b in range(3):
        drop(src, f"e{b}.json", events(b, 20))
    q = run_graph_stream(spark, src, uri, ck)
    assert q.exception() is None
    g = Graph.open(uri)
    assert stream_commits(g) == 3
    assert len(names(g)) == 60 and len(names(g, "edge:Knows")) == 3 * 19 + 2
    before = (len(g.log()), g.snapshot().version, data_files(uri))
    assert _drop_last_commit_log(ck) == 2
    q = run_graph_stream(spark, src, uri, ck)
    assert q.exception() is None
    g = Graph.open(uri)
    assert (len(g.log()), g.snapshot().version, data_files(uri)) == before
    assert_no_dangling(g)


def assert_no_dangling(g: Graph, version=None) -> None:
    snap = g.snapshot(version=version) if version else g.snapshot()
    ids = set(g.read_table("node:Person", snap, columns=["id"]).column("id").to_pylist())
    e = g.read_table("edge:Knows", snap, columns=["src", "dst"])
    assert set(e.column("src").to_pylist()) <= ids and set(e.column("dst").to_pylist()) <= ids


def test_pinned_reader_sees_one_version_while_streaming(spark, test_graph, tmp_path):
    """A reader pinned to a graph version during a stream reads that version's rows every time,
    nodes and edges of the same commits (no dangling edge), while later micro-batches land."""
    uri, src, ck = test_graph.root, tmp_path / "in", tmp_path / "ck"
    drop(src, "e0.json", events(0, 20))
    q = (
        spark.readStream.schema(EVENT_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .writeStream.foreachBatch(GraphBatchWriter(uri, split_events, engine="python"))
        .option("checkpointLocation", str(ck))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while stream_commits(Graph.open(uri)) < 1 and time.monotonic() < deadline:
            time.sleep(0.3)
        pinned = Graph.open(uri).snapshot().version
        counts = set()
        for b in range(1, 4):
            drop(src, f"e{b}.json", events(b, 20))
            p = spark.read.format("omnigraph").option("type", "Person").option("version", pinned).load(uri).count()
            k = spark.read.format("omnigraph").option("type", "Knows").option("version", pinned).load(uri).count()
            counts.add((p, k))
            time.sleep(0.7)
        while stream_commits(Graph.open(uri)) < 4 and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        q.stop()
    g = Graph.open(uri)
    t = g.snapshot(version=pinned).tables
    assert counts == {(t["node:Person"].row_count, t["edge:Knows"].row_count)}
    assert stream_commits(g) == 4 and len(names(g)) == 80
    for v in range(pinned, g.snapshot().version + 1):
        assert_no_dangling(g, v)


def test_abort_deletes_what_the_micro_batch_staged(spark, test_graph):
    """Spark's abort of a micro-batch (a task failed) deletes the files the other tasks staged:
    nothing visible changes and no file is left."""
    import pyarrow as pa
    from pyspark.sql import Row

    from omnigraph_spark.spark.stream import OmnigraphStreamWriter

    uri = test_graph.root
    before = (len(Graph.open(uri).log()), data_files(uri))
    w = OmnigraphStreamWriter({"path": uri, "type": "Person"}, spark.createDataFrame([], PEOPLE_SCHEMA).schema, False)

    def partition(t: int):  # what Spark hands this pyspark's writer: Arrow batches (4.1+) or Rows (4.0)
        rows = people(f"t{t}-", 50)
        return iter([pa.RecordBatch.from_pylist(rows)]) if w.arrow_input else iter([Row(**r) for r in rows])

    msgs = [w.write(partition(t)) for t in range(2)]
    assert data_files(uri) == before[1] + 2
    w.abort(msgs + [None], 7)  # a failed task's message is None
    assert (len(Graph.open(uri).log()), data_files(uri)) == before


def test_delete_stream_removes_nodes_and_their_edges(spark, test_graph, tmp_path):
    """writeMode=delete in a stream: each micro-batch of keys is one commit removing those
    nodes and every incident edge (I18); a replay of it commits nothing."""
    uri = test_graph.root
    drop(tmp_path / "ev", "e0.json", events(0, 10))
    run_graph_stream(spark, tmp_path / "ev", uri, tmp_path / "ck0")
    assert len(names(Graph.open(uri), "edge:Knows")) == 9
    drop(tmp_path / "del", "d0.json", [{"name": "b0-000"}, {"name": "b0-005"}])
    q = run_available(spark, tmp_path / "del", uri, tmp_path / "ck1", schema="name string", writeMode="delete")
    assert q.exception() is None
    g = Graph.open(uri)
    assert "b0-000" not in names(g) and "b0-005" not in names(g) and len(names(g)) == 8
    assert len(names(g, "edge:Knows")) == 9 - 3  # b0-000->001, b0-004->005, b0-005->006
    assert_no_dangling(g)
    commits = stream_commits(g)
    _drop_last_commit_log(tmp_path / "ck1")
    run_available(spark, tmp_path / "del", uri, tmp_path / "ck1", schema="name string", writeMode="delete")
    assert stream_commits(Graph.open(uri)) == commits


def _row_path_source():
    """The omnigraph data source with the pyspark 4.0 stream writer (Rows in), registered under
    another name, so Spark 4.3 drives the Row path end to end."""
    from omnigraph_spark.spark.source import OmnigraphDataSource

    class OmnigraphRowsDataSource(OmnigraphDataSource):
        @classmethod
        def name(cls) -> str:
            return "omnigraph_rows"

        def streamWriter(self, schema, overwrite):
            return OmnigraphRowStreamWriter(self.options, schema, overwrite)

    return OmnigraphRowsDataSource


def test_row_stream_writer_through_spark(spark, test_graph, tmp_path):
    """The pyspark 4.0 writer class driven by a real stream (Spark hands it Rows): the same
    rows, one commit per micro-batch."""
    spark.dataSource.register(_row_path_source())
    src = tmp_path / "in"
    drop(src, "f0.json", people("r", 120))
    drop(src, "f1.json", people("s", 80))
    q = (
        spark.readStream.schema(PEOPLE_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .writeStream.format("omnigraph_rows")
        .option("type", "Person")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(test_graph.root)
    )
    assert finish(q).exception() is None
    g = Graph.open(test_graph.root)
    assert len(names(g)) == 200 and stream_commits(g) == 2
    ages = {r["id"]: r["age"] for r in g.read_table("node:Person").to_pylist()}
    assert ages["r0007"] == 7 and ages["s0079"] == 79
