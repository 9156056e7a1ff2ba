"""The Spark read path: format("omnigraph") loads of one type at one pinned snapshot, and
read_graph. Data is written through the store layer (no Spark writer involved)."""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import os
import time

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from omnigraph_spark import Graph
from omnigraph_spark.errors import CommitNotFoundError, OptionError, UnknownColumnError, UnknownTypeError
from omnigraph_spark.spark import unwrap_error
from omnigraph_spark.store import sidecar as _sidecar
from omnigraph_spark.store import writes
from tests.store.helpers import people, write_rows

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]


def load(spark, uri, type_name="Person", **options):
    r = spark.read.format("omnigraph").option("type", type_name)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(uri)


def ids(df):
    return sorted(r["id"] for r in df.select("id").collect())


def code_of(excinfo) -> str:
    err = unwrap_error(excinfo.value)
    assert err is not None, str(excinfo.value)[:2000]
    return err.code


def listing(root):
    """Every file and directory under ``root`` with size and mtime: proves a read wrote nothing."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), root) + "/"] = None
        for n in files:
            st = os.stat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_size, st.st_mtime_ns)
    return out


def test_read_person_rows_and_schema(spark, test_graph):
    write_rows(
        test_graph,
        "node:Person",
        [{"id": "alice", "age": 30, "name": "alice"}, {"id": "bob", "age": None, "name": "bob"}],
    )
    df = load(spark, test_graph.root)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields] == [
        ("id", "string", False),
        ("age", "int", True),
        ("name", "string", False),
    ]
    expected = spark.createDataFrame([("alice", 30, "alice"), ("bob", None, "bob")], df.schema)
    assert_df_equality(df, expected, ignore_row_order=True)


def test_empty_table_reads_zero_rows_with_schema(spark, test_graph):
    df = load(spark, test_graph.root, "Knows")
    assert df.columns == ["id", "src", "dst", "since"]
    assert df.collect() == []
    assert load(spark, test_graph.root, "edge:WorksAt").count() == 0


ALL_TYPES_PG = """
node Thing {
    slug: String @key
    color: enum(red, green)?
    flag: Bool?
    i32: I32?
    i64: I64?
    u32: U32?
    u64: U64?
    f32: F32?
    f64: F64?
    day: Date?
    at: DateTime?
    tags: [String]?
    nums: [I64]?
    emb: Vector(3)?
    data: Blob?
}
"""


def test_every_type_reads_exactly(spark, tmp_path):
    g = Graph.init(str(tmp_path / "types"), ALL_TYPES_PG)
    target = writes.prepare_target(g, "main", "node:Thing", "append")
    at_ms = 1704164645678  # 2024-01-02T03:04:05.678Z, stored as Date64 ms (§G.2)
    cols = {
        "id": ["x", "y"],
        "slug": ["x", "y"],
        "color": ["red", None],
        "flag": [True, None],
        "i32": [-(2**31), None],
        "i64": [2**63 - 1, None],
        "u32": [2**32 - 1, None],
        "u64": [2**64 - 1, None],
        "f32": [1.5, None],
        "f64": [-0.1, None],
        "day": [dt.date(2024, 2, 29), None],
        "at": pa.array([at_ms, None], pa.date64()),
        "tags": [["a", None], None],
        "nums": [[1, 2], None],
        "emb": [[0.5, 1.0, -2.0], None],
        "data": [b"\x00\xff", None],
    }
    table = pa.table(
        {
            f.name: pa.array(cols[f.name], f.type) if not isinstance(cols[f.name], pa.Array) else cols[f.name]
            for f in target.schema
        },
        schema=target.schema,
    )
    writes.commit_load(g, "main", [writes.stage(target, table.to_batches())])

    df = load(spark, g.root, "Thing")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {
        "id": "string",
        "at": "timestamp",
        "color": "string",
        "data": "binary",
        "day": "date",
        "emb": "array<float>",
        "f32": "float",
        "f64": "double",
        "flag": "boolean",
        "i32": "int",
        "i64": "bigint",
        "nums": "array<bigint>",
        "slug": "string",
        "tags": "array<string>",
        "u32": "bigint",
        "u64": "decimal(20,0)",
    }
    x, y = sorted(df.collect(), key=lambda r: r["id"])
    assert x.asDict() == {
        "id": "x",
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000),
        "color": "red",
        "data": bytearray(b"\x00\xff"),
        "day": dt.date(2024, 2, 29),
        "emb": [0.5, 1.0, -2.0],
        "f32": 1.5,
        "f64": -0.1,
        "flag": True,
        "i32": -(2**31),
        "i64": 2**63 - 1,
        "nums": [1, 2],
        "slug": "x",
        "tags": ["a", None],
        "u32": 2**32 - 1,
        "u64": decimal.Decimal(2**64 - 1),
    }
    assert all(v is None for k, v in y.asDict().items() if k not in ("id", "slug"))


def test_columns_option_user_schema_and_errors(spark, test_graph):
    write_rows(test_graph, "node:Person", people("ann", "bo", age=7))
    df = load(spark, test_graph.root, columns="name, id")
    assert df.columns == ["name", "id"]
    assert sorted(map(tuple, df.collect())) == [("ann", "ann"), ("bo", "bo")]
    # a user schema naming a subset of the columns reads just those
    df2 = spark.read.format("omnigraph").schema("age INT, id STRING").option("type", "Person").load(test_graph.root)
    assert sorted(map(tuple, df2.collect())) == [(7, "ann"), (7, "bo")]

    with pytest.raises(Exception) as e:
        load(spark, test_graph.root, columns="id,nope").collect()
    assert code_of(e) == UnknownColumnError.code
    with pytest.raises(Exception) as e:
        load(spark, test_graph.root, "Nobody").collect()
    assert code_of(e) == UnknownTypeError.code
    with pytest.raises(Exception) as e:
        load(spark, test_graph.root, version=3, commit="x").collect()
    assert code_of(e) == OptionError.code


def test_time_travel_by_version_commit_and_timestamp(spark, test_graph):
    r1 = write_rows(test_graph, "node:Person", people("a1"))
    time.sleep(0.01)
    r2 = write_rows(test_graph, "node:Person", people("a2"))
    time.sleep(0.01)
    write_rows(test_graph, "node:Person", people("a3"))
    root = test_graph.root
    assert ids(load(spark, root)) == ["a1", "a2", "a3"]
    assert ids(load(spark, root, version=r1.manifest_version)) == ["a1"]
    assert ids(load(spark, root, commit=r2.graph_commit_id)) == ["a1", "a2"]

    log = {c.graph_commit_id: c for c in test_graph.log()}
    t2, t3 = log[r2.graph_commit_id].created_at_us, max(c.created_at_us for c in log.values())
    mid = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=(t2 + t3) // 2)
    assert ids(load(spark, root, timestampAsOf=mid.isoformat())) == ["a1", "a2"]
    with pytest.raises(Exception) as e:
        load(spark, root, timestampAsOf="2000-01-01T00:00:00Z").collect()
    assert code_of(e) == CommitNotFoundError.code
    # the other tables of an old snapshot read too (inherited pins)
    assert load(spark, root, "Company", version=r1.manifest_version).count() == 0


def test_branch_reads_its_own_pins(spark, test_graph):
    write_rows(test_graph, "node:Person", people("main1"))
    test_graph.create_branch("dev")
    write_rows(test_graph, "node:Person", people("dev1"), branch="dev")
    write_rows(test_graph, "node:Person", people("main2"))
    root = test_graph.root
    assert ids(load(spark, root, branch="dev")) == ["dev1", "main1"]
    assert ids(load(spark, root)) == ["main1", "main2"]
    # a table never written on the branch reads the inherited version
    assert load(spark, root, "Company", branch="dev").count() == 0


def test_partitions_follow_fragments_and_split_large_ones(spark, test_graph):
    for i in range(4):  # 4 appends -> 4 fragments of 3 rows
        write_rows(test_graph, "node:Person", people(*[f"p{i}{j}" for j in range(3)], age=i))
    root = test_graph.root
    everything = [f"p{i}{j}" for i in range(4) for j in range(3)]
    merged = load(spark, root, maxRowsPerPartition=7)  # [3+3], [3+3]
    split = load(spark, root, maxRowsPerPartition=2)  # each fragment -> 2 row ranges
    assert merged.rdd.getNumPartitions() == 2
    assert split.rdd.getNumPartitions() == 8
    for df in (merged, split, load(spark, root)):
        assert ids(df) == everything
    # row ranges and a pushed filter together
    assert ids(split.filter("age = 2")) == ["p20", "p21", "p22"]


def test_min_partitions_spreads_a_large_table_over_tasks(spark, test_graph):
    """minPartitions (default: the driver's cores) splits the read while each task keeps at
    least 65,536 rows; every row comes back exactly once."""
    n = 70_000
    for half in range(2):  # 2 fragments of 70k rows
        write_rows(test_graph, "node:Person", people(*[f"p{half}-{i:05d}" for i in range(n)], age=half))
    root = test_graph.root
    one = load(spark, root, minPartitions=1)
    two = load(spark, root, minPartitions=2)
    three = load(spark, root, minPartitions=3)  # 140k / 3 < 65,536: still two tasks
    assert (one.rdd.getNumPartitions(), two.rdd.getNumPartitions(), three.rdd.getNumPartitions()) == (1, 2, 2)
    for df in (one, two):
        got = df.groupBy("age").count().orderBy("age").collect()
        assert [(r["age"], r["count"]) for r in got] == [(0, n), (1, n)]
        assert df.select("id").distinct().count() == 2 * n


def test_read_graph_views_one_snapshot(spark, test_graph):
    from omnigraph_spark import read_graph

    write_rows(test_graph, "node:Person", people("alice", "bob"))
    write_rows(test_graph, "node:Company", [{"id": "acme", "name": "acme"}])
    r = write_rows(test_graph, "edge:Knows", [{"id": "k1", "src": "alice", "dst": "bob", "since": dt.date(2020, 1, 1)}])
    g = read_graph(spark, test_graph.root)
    write_rows(test_graph, "node:Person", people("carol"))  # after read_graph: not visible
    assert g.snapshot.version == r.manifest_version
    assert sorted(g.nodes) == ["Company", "Person"] and sorted(g.edges) == ["Knows", "WorksAt"]
    assert ids(g.nodes["Person"]) == ["alice", "bob"]
    assert sorted(map(tuple, g.vertices().collect())) == [("acme", "Company"), ("alice", "Person"), ("bob", "Person")]
    assert [tuple(x) for x in g.edges_df().collect()] == [("alice", "bob", "k1", "Knows")]
    assert [tuple(x) for x in g.edges_df(qualify_ids=True).collect()] == [("Person:alice", "Person:bob", "k1", "Knows")]
    assert "Person:alice" in {x.id for x in g.vertices(qualify_ids=True).collect()}
    old = read_graph(spark, test_graph.root, version=r.manifest_version - 1)
    assert old.edges_df().count() == 0 and ids(old.nodes["Person"]) == ["alice", "bob"]


def test_reads_never_write_even_with_a_pending_sidecar(spark, test_graph, caplog):
    from omnigraph_spark import read_graph
    from omnigraph_spark.spark.reader import make_reader, read_schema

    write_rows(test_graph, "node:Person", people("alice"))
    t = test_graph.snapshot().table("node:Person")
    sc = _sidecar.Sidecar.new(
        "main", None, "Load", [_sidecar.SidecarPin("node:Person", t.base_path, t.version, t.version + 1)]
    )
    path = _sidecar.write(test_graph.storage, test_graph.root, sc)
    before = listing(test_graph.root)

    assert ids(load(spark, test_graph.root)) == ["alice"]
    assert ids(load(spark, test_graph.root, "Person", version=test_graph.snapshot().version)) == ["alice"]
    assert read_graph(spark, test_graph.root).vertices().count() == 1
    opts = {"path": test_graph.root, "type": "Person"}
    with caplog.at_level(logging.WARNING, logger="omnigraph_spark.spark.reader"):
        make_reader(opts, read_schema(opts))
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and sc.operation_id in r.getMessage()]
    assert warned, caplog.text
    assert listing(test_graph.root) == before  # no recovery, no lease, no file touched
    assert os.path.exists(path)
