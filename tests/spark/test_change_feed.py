"""The change feed through Spark (docs/change_feed.md, I25): batch reads with every kind of
commit, the options' errors, retention, streams with and without readChangeFeed, bounded
micro-batches, Trigger.AvailableNow, and a stream killed at random moments and restarted from
its checkpoint delivering every change exactly once to an idempotent sink."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.ingest.integrity import delete_keys
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import changes, writes
from tests.store.helpers import people, write_rows

from ..connect_server import run_client
from .test_connect import connect_server  # noqa: F401  # the session's Spark Connect server (a fixture)
from .test_read import code_of
from .test_stream import finish

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

META = ["_change_type", "_commit_version"]
REPO = Path(__file__).resolve().parents[2]


def feed(spark, uri, type_name="Person", **options):
    r = spark.read.format("omnigraph").option("type", type_name).option("readChangeFeed", "true")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(uri)


def rows(df, *cols) -> list[tuple]:
    cols = cols or ("id", "_change_type", "_commit_version")
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


def knows(*pairs):
    return [{"id": f"{s}-{d}", "src": s, "dst": d, "since": None} for s, d in pairs]


def test_I25_batch_feed_reports_each_kind_of_commit_once(spark, test_graph):
    """Append: inserts; merge: update images for existing ids, inserts for new; a node delete:
    deletes, and its cascaded edges as deletes of the edge type in the same version; overwrite:
    deletes of the old rows and inserts of the new; optimize: nothing."""
    g = test_graph
    write_rows(g, "node:Person", people("a", "b", age=1))
    v_append = g.snapshot().version
    write_rows(g, "edge:Knows", [{"id": "a-b", "src": "a", "dst": "b"}])
    write_rows(g, "node:Person", people("a", "c", age=2), mode="merge")
    v_merge = g.snapshot().version
    target = writes.prepare_target(g, "main", "node:Person", "delete")
    keys = delete_keys(g.catalog.by_table_key("node:Person"), pa.Table.from_pylist([{"name": "b"}]))
    staged = writes.StagedTable("node:Person", "delete", target.stage_uri, target.base_version, (), 1, 0, deletes=keys)
    writes.commit_load(g, "main", [staged], validate=make_validator(g))
    v_delete = g.snapshot().version
    write_rows(g, "node:Person", people("c", "x", age=3), mode="overwrite")
    v_over = g.snapshot().version
    g.optimize(min_fragments=1)
    assert g.snapshot().version > v_over

    got = rows(feed(spark, g.root, startingVersion=v_append))
    assert got == sorted(
        [
            ("a", "insert", v_append),
            ("b", "insert", v_append),
            ("a", "update_preimage", v_merge),
            ("a", "update_postimage", v_merge),
            ("c", "insert", v_merge),
            ("b", "delete", v_delete),
            ("a", "delete", v_over),
            ("c", "delete", v_over),
            ("c", "insert", v_over),
            ("x", "insert", v_over),
        ]
    )
    merge = feed(spark, g.root, startingVersion=v_merge, endingVersion=v_merge).collect()
    pre_post = {r["_change_type"]: r["age"] for r in merge if r["id"] == "a"}
    assert pre_post == {"update_preimage": 1, "update_postimage": 2}
    edges = rows(feed(spark, g.root, "Knows", startingVersion=1))
    assert edges == [("a-b", "delete", v_delete), ("a-b", "insert", v_append + 1)]
    # the meta columns name the commit
    commit = {c.manifest_version: c.graph_commit_id for c in g.log()}
    for r in feed(spark, g.root, startingVersion=v_append).collect():
        assert r["_graph_commit_id"] == commit[r["_commit_version"]]
    # timestamps select the same versions
    ts = changes.version_timestamps(g.root, "main")
    iso = dt.datetime.fromtimestamp(ts[v_merge] / 1e6, dt.timezone.utc).isoformat()
    assert rows(feed(spark, g.root, startingTimestamp=iso, endingTimestamp=iso)) == [
        ("a", "update_postimage", v_merge),
        ("a", "update_preimage", v_merge),
        ("c", "insert", v_merge),
    ]


def test_I25_feed_of_a_branch_and_columns(spark, test_graph):
    g = test_graph
    write_rows(g, "node:Person", people("a", age=1))
    g.create_branch("dev")
    write_rows(g, "node:Person", people("a", age=5), mode="merge", branch="dev")
    head = g.snapshot("dev").version
    df = feed(spark, g.root, branch="dev", startingVersion=head, columns="age")
    assert df.columns == ["age", "_change_type", "_commit_version", "_commit_timestamp", "_graph_commit_id"]
    assert rows(df, "age", "_change_type") == [(1, "update_preimage"), (5, "update_postimage")]
    assert rows(feed(spark, g.root, startingVersion=1), "id", "_change_type") == [("a", "insert")]  # main: untouched


def test_feed_option_errors(spark, test_graph):
    g = test_graph
    write_rows(g, "node:Person", people("a", age=1))
    head = g.snapshot().version
    cases = [
        ({}, "OPTION_INVALID"),  # a batch feed needs a start
        ({"startingVersion": head + 1}, "CHANGE_FEED_RANGE"),
        ({"startingVersion": head, "endingVersion": head - 1}, "CHANGE_FEED_RANGE"),
        ({"startingVersion": 1, "version": 2}, "OPTION_INVALID"),
        ({"startingVersion": 1, "startingTimestamp": "2020-01-01T00:00:00Z"}, "OPTION_INVALID"),
        ({"startingTimestamp": "yesterday"}, "OPTION_INVALID"),
        ({"startingVersion": 1, "skipChangeCommits": "true"}, "OPTION_INVALID"),
    ]
    for opts, code in cases:
        with pytest.raises(Exception) as e:
            feed(spark, g.root, **opts).collect()
        assert code_of(e) == code, opts


def test_I25_a_version_removed_by_cleanup_names_the_oldest_readable(spark, test_graph):
    """cleanup(keep_versions=N) keeps the changes of the last N - 1 graph versions (each needs
    its predecessor); an older start is CHANGE_FEED_VERSION_UNAVAILABLE naming the oldest."""
    g = test_graph
    for i in range(4):
        write_rows(g, "node:Person", people(f"p{i}", age=i))
    head = g.snapshot().version
    g.cleanup(keep_versions=3, include_orphans=False)
    with pytest.raises(Exception) as e:
        feed(spark, g.root, startingVersion=2).collect()
    assert code_of(e) == "CHANGE_FEED_VERSION_UNAVAILABLE"
    oldest = changes.oldest_readable(g.root, "main", "node:Person")
    assert f"is {oldest}" in str(e.value)
    assert oldest == head - 1
    assert rows(feed(spark, g.root, startingVersion=oldest)) == [("p2", "insert", head - 1), ("p3", "insert", head)]


def _stream(spark, uri, out: Path, checkpoint: Path, cdf=True, **options):
    r = spark.readStream.format("omnigraph").option("type", "Person")
    if cdf:
        r = r.option("readChangeFeed", "true")
    for k, v in options.items():
        r = r.option(k, str(v))
    sizes: list[int] = []

    def sink(df, batch_id):
        sizes.append(df.count())
        df.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

    q = r.load(uri).writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return finish(q.trigger(availableNow=True).start()), sizes


def _collected(out: Path, cols=("id", "_change_type", "_commit_version")) -> list[tuple]:
    got = []
    for d in sorted(out.glob("batch=*")):
        t = pq.read_table(d)
        got += [tuple(r[c] for c in cols) for r in t.to_pylist()]
    return sorted(got)


def test_I25_stream_delivers_whole_commits_bounded_per_trigger(spark, test_graph, tmp_path):
    g = test_graph
    for i in range(3):
        write_rows(g, "node:Person", people(f"p{i}", f"q{i}", age=i))
    write_rows(g, "node:Person", people("p0", age=9), mode="merge")
    q, sizes = _stream(spark, g.root, tmp_path / "out", tmp_path / "ck", startingVersion=1, maxCommitsPerTrigger=1)
    assert q.exception() is None, q.exception()
    expected = rows(feed(spark, g.root, startingVersion=1))
    assert _collected(tmp_path / "out") == expected
    assert sizes == [2, 2, 2, 2]  # one commit per micro-batch (the merge: two images)
    # more commits, the same checkpoint: only the new ones
    write_rows(g, "node:Person", people("z", age=1))
    q, sizes = _stream(spark, g.root, tmp_path / "out", tmp_path / "ck", startingVersion=1, maxRowsPerTrigger=1)
    assert q.exception() is None
    assert sizes == [1]
    assert _collected(tmp_path / "out") == rows(feed(spark, g.root, startingVersion=1))


def test_stream_without_a_start_begins_with_the_snapshot(spark, test_graph, tmp_path):
    g = test_graph
    write_rows(g, "node:Person", people("a", "b", age=1))
    v0 = g.snapshot().version
    q, _ = _stream(spark, g.root, tmp_path / "out", tmp_path / "ck")
    assert q.exception() is None
    assert _collected(tmp_path / "out") == [("a", "insert", v0), ("b", "insert", v0)]


def test_stream_without_read_change_feed_fails_or_skips_at_a_change_commit(spark, test_graph, tmp_path):
    g = test_graph
    write_rows(g, "node:Person", people("a", age=1))
    write_rows(g, "node:Person", people("a", "b", age=2), mode="merge")
    write_rows(g, "node:Person", people("c", age=3))
    q, _ = _stream(spark, g.root, tmp_path / "o1", tmp_path / "c1", cdf=False, startingVersion=1)
    assert q.exception() is not None
    assert "STREAM_CHANGE_COMMIT" in str(q.exception())
    q, _ = _stream(
        spark, g.root, tmp_path / "o2", tmp_path / "c2", cdf=False, startingVersion=1, skipChangeCommits="true"
    )
    assert q.exception() is None
    got = sorted(r["id"] for d in (tmp_path / "o2").glob("batch=*") for r in pq.read_table(d).to_pylist())
    assert got == ["a", "c"]
    cols = pq.read_table(next((tmp_path / "o2").glob("batch=*"))).column_names
    assert cols == ["id", "age", "name"]


@pytest.mark.slow
def test_I25_stream_killed_at_random_moments_delivers_every_change_once(spark, test_graph, tmp_path):
    """A stream application killed (SIGKILL) at random moments while loads land, restarted
    from its checkpoint each time: the idempotent sink ends with every change of the feed
    exactly once."""
    g = test_graph
    rnd = random.Random(51)
    out, ck = tmp_path / "out", tmp_path / "ck"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    app = [sys.executable, "-m", "tests.spark.feed_stream_app", g.root, str(ck), str(out)]

    def start():
        return subprocess.Popen(app, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    names = [f"n{i}" for i in range(12)]
    p = start()
    try:
        for round_ in range(4):
            for _ in range(3):
                who = rnd.sample(names, 3)
                write_rows(g, "node:Person", people(*who, age=round_), mode="merge")
            time.sleep(rnd.uniform(2.0, 12.0))
            p.kill()
            p.wait()
            p = start()
        out.mkdir(exist_ok=True)
        (out / "STOP").write_text("")
        assert p.wait(timeout=300) == 0
    finally:
        if p.poll() is None:
            p.kill()
    expected = rows(feed(spark, g.root, startingVersion=1))
    got = _collected(out)
    assert got == expected
    assert len(set(got)) == len(got)


def test_g_open_does_not_need_spark(test_graph):
    """The store half of the feed runs without Spark (layering)."""
    g = Graph.open(test_graph.root)
    assert changes.resolve_range(g.root, "main", start=1).start == 1


def test_I22_the_provider_hands_the_feed_and_streams_to_the_python_source(jvm, tmp_path):
    """With the shim, format("omnigraph") hands change-feed reads and streams to the Python
    source (the same rows); engine=jvm refuses them, naming why."""
    g = Graph.init(str(tmp_path / "g"), (REPO / "tests/fixtures/omnigraph-0.7.2/test.pg").read_text())
    write_rows(g, "node:Person", people("a", "b", age=1))
    write_rows(g, "node:Person", people("a", age=2), mode="merge")
    expected = [("a", "insert", 4), ("a", "update_postimage", 5), ("a", "update_preimage", 5), ("b", "insert", 4)]
    assert rows(feed(jvm, g.root, startingVersion=1)) == expected
    with pytest.raises(Exception) as e:
        feed(jvm, g.root, startingVersion=1, engine="jvm").collect()
    assert code_of(e) == "JVM_READ_UNAVAILABLE"
    q, _ = _stream(jvm, g.root, tmp_path / "out", tmp_path / "ck", startingVersion=1)
    assert q.exception() is None, q.exception()
    assert _collected(tmp_path / "out") == expected
    # a stream given no feed option is planned as the JVM scan; its micro-batches come from the
    # Python source's stream reader (the snapshot's rows, as inserts)
    q, _ = _stream(jvm, g.root, tmp_path / "plain", tmp_path / "ck2", cdf=False)
    assert q.exception() is None, q.exception()
    batches = (tmp_path / "plain").glob("batch=*")
    got = sorted((r["id"], r["age"]) for d in batches for r in pq.read_table(d).to_pylist())
    assert got == [("a", 2), ("b", 1)]


@pytest.mark.slow
@pytest.mark.xdist_group("spark")
def test_I25_the_feed_through_spark_connect_is_the_classic_feed(spark, connect_server, tmp_path):  # noqa: F811
    """A batch feed and an AvailableNow stream of it from a Spark Connect client: the rows the
    classic session reads."""
    g = Graph.init(str(tmp_path / "g"), (REPO / "tests/fixtures/omnigraph-0.7.2/test.pg").read_text())
    write_rows(g, "node:Person", people("a", "b", age=1))
    write_rows(g, "node:Person", people("a", age=2), mode="merge")
    remote = run_client(connect_server.url, "change_feed", tmp_path, root=g.root, work=str(tmp_path / "work"))
    assert remote["session"].startswith("pyspark.sql.connect")
    expected = [list(r) for r in rows(feed(spark, g.root, startingVersion=1))]
    assert remote["result"] == {"batch": expected, "stream": expected}
