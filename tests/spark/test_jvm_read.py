"""The JVM read path (jvm-shim + omnigraph_spark.read_table): the same rows, types and
snapshots as the Python source, with the scan in the executor JVM. Skipped only when the shim
is not built (`make test` builds it)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from omnigraph_spark import Graph, read_graph, read_table
from omnigraph_spark.errors import JvmReadUnavailableError, OptionError, UnknownColumnError
from omnigraph_spark.spark.jvm_read import SHIM_JAR, column_blockers, shim_jars
from omnigraph_spark.store import writes
from tests.spark.test_read import ALL_TYPES_PG, listing
from tests.store.helpers import people, write_rows

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]


def scans_in_jvm(df) -> bool:
    return "omnigraph node:" in _plan(df) or "omnigraph edge:" in _plan(df)


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def both(spark, root, type_name, **kw):
    """The same read through the JVM path and through the Python source."""
    j = read_table(spark, root, type_name, engine="jvm", **kw)
    p = read_table(spark, root, type_name, engine="python", **kw)
    assert scans_in_jvm(j) and not scans_in_jvm(p)
    return j, p


#: the every-type schema of test_read.py without the columns only the Python reader converts
JVM_TYPES_PG = (
    "\n".join(
        line
        for line in ALL_TYPES_PG.splitlines()
        if line.split(":")[0].strip() not in {"u32", "u64", "at", "emb", "data"}
    )
    + """
edge Rel: Thing -> Thing {
    w: F64?
}
"""
)


def _things(n: int, start: int = 0):
    return [
        {
            "id": f"t{i:05d}",
            "slug": f"t{i:05d}",
            "color": ("red", "green", None)[i % 3],
            "flag": (True, False, None)[i % 3],
            "i32": (-(2**31) if i == 0 else i),
            "i64": 2**63 - 1 - i,
            "f32": i / 4,
            "f64": -i / 3,
            "day": dt.date(2024, 2, 29) + dt.timedelta(days=i),
            "tags": None if i % 5 == 0 else ["a", None, f"x{i}"],
            "nums": [i, -i],
        }
        for i in range(start, start + n)
    ]


def _write(g, key, rows, mode="append", branch="main"):
    target = writes.prepare_target(g, branch, key, mode)
    return writes.commit_load(
        g, branch, [writes.stage(target, pa.Table.from_pylist(rows, schema=target.schema).to_batches())]
    )


def test_every_jvm_type_reads_like_the_python_source(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    _write(g, "node:Thing", _things(300))
    _write(
        g,
        "edge:Rel",
        [{"id": f"e{i}", "src": f"t{i:05d}", "dst": f"t{(i + 1) % 300:05d}", "w": i * 0.5} for i in range(300)],
    )
    for t in ("Thing", "Rel"):
        j, p = both(jvm, g.root, t)
        assert j.schema == p.schema
        assert_df_equality(j, p, ignore_row_order=True)
    j = read_table(jvm, g.root, "Thing", engine="jvm")
    first = j.filter("id = 't00000'").collect()[0].asDict()
    assert first == {
        "id": "t00000",
        "slug": "t00000",
        "color": "red",
        "flag": True,
        "i32": -(2**31),
        "i64": 2**63 - 1,
        "f32": 0.0,
        "f64": -0.0,
        "day": dt.date(2024, 2, 29),
        "tags": None,
        "nums": [0, 0],
    }


def _mixed(i: int):
    """Row ``i``: no nulls at all in rows 0-299 (batches without a validity bitmap), then nulls at
    positions that land on every bit of the bitmap; multi-byte and empty strings; empty lists,
    null lists and null list elements."""
    late = i >= 300
    words = ["", "ß", "✓ok", "𝄞" * (i % 4), f"plain-{i}"]
    return {
        "id": f"m{i:05d}",
        "slug": f"s{i:05d}-{words[i % 5]}",
        "color": ("red", "green", None)[i % 3] if late else ("red", "green")[i % 2],
        "flag": (None if late and i % 7 == 3 else i % 2 == 0),
        "i32": None if late and i % 11 in (0, 5) else i - 1500,
        "i64": None if late and i % 13 == 1 else (-(2**63) if i == 301 else i * 10**12),
        "f32": None if late and i % 9 == 8 else i / 8,
        "f64": None if late and i % 17 == 2 else -i / 7,
        "day": None if late and i % 10 == 9 else dt.date(1969, 12, 31) + dt.timedelta(days=i),
        "tags": (None if late and i % 6 == 0 else [] if i % 4 == 1 else [words[i % 5], None if late else "x", "é"]),
        "nums": None if late and i % 8 == 7 else [i, None if late else -i],
    }


def test_direct_column_reads_match_the_python_source_batch_by_batch(jvm, tmp_path, monkeypatch):
    """The JVM scan hands Spark LanceColumnVector, which reads values and validity bits straight
    from Arrow's buffers (docs/benchmarks.md). Many small batches, with and without
    nulls, must read value for value as the Python source reads them (api.md: read_table gives
    the same rows and types as format("omnigraph"))."""
    from omnigraph_spark.spark import jvm_read

    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    rows = [_mixed(i) for i in range(2000)]
    _write(g, "node:Thing", rows[:1100])
    _write(g, "node:Thing", rows[1100:])
    monkeypatch.setattr(jvm_read, "JVM_BATCH_SIZE", 100)  # 20 batches, partial ones at the fragment ends
    j, p = both(jvm, g.root, "Thing")
    assert_df_equality(j, p, ignore_row_order=True)
    got = {r["id"]: r.asDict() for r in j.collect()}
    assert len(got) == 2000
    for i in (0, 4, 299, 300, 301, 303, 306, 1099, 1100, 1999):
        want = dict(rows[i], f32=None if rows[i]["f32"] is None else pytest.approx(rows[i]["f32"]))
        assert got[f"m{i:05d}"] == want, i


#: (Spark SQL filter, pushed to Lance?) -- the JVM scan's pushdown, checked against Spark alone
JVM_FILTERS = [
    ("slug = 't00007'", True),
    ("slug > 't00290'", True),
    ("slug IN ('t00001', 't00002', 'nope')", True),
    ('slug = "O\'Brien"', True),
    ("contains(slug, '_')", True),
    ("startswith(slug, 'a%')", True),
    ("endswith(slug, '\\\\')", True),
    ("slug LIKE 'a%'", True),
    ("id LIKE '%029%'", True),
    ("slug LIKE '%\\_%'", False),
    ("color = 'red'", True),
    ("color IS NULL", True),
    ("NOT (color = 'green')", True),
    ("flag = true", True),
    ("flag <=> NULL", True),
    ("NOT (i32 <=> 5)", True),
    ("i32 >= 250 OR i64 = 9223372036854775800", True),
    ("i64 < 9223372036854775600", True),
    ("day >= DATE'2024-12-01'", True),
    ("day = DATE'2024-03-01'", True),
    ("f64 >= 0.0", False),
    ("f32 = 0.0", False),
    ("array_contains(tags, 'x7')", False),
]


def test_filters_pushed_into_the_jvm_scan_return_sparks_rows(jvm, tmp_path):
    """Filters Lance evaluates exactly are pushed into the JVM scan (a Lance filter in the plan);
    the rest stay with Spark. Either way every query returns exactly the rows Spark alone
    selects from the same data, hostile strings and -0.0 included."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    rows = _things(300)
    for i, slug in enumerate(["O'Brien", "a_b", "a%b", "axb", "back\\"]):
        rows.append(dict(rows[i], id=f"h{i}", slug=slug))
    _write(g, "node:Thing", rows[:150])
    _write(g, "node:Thing", rows[150:])  # two fragments
    j = read_table(jvm, g.root, "Thing", engine="jvm", min_partitions=3)
    local = jvm.createDataFrame(j.collect(), j.schema)  # Spark alone: no scan to push into
    for cond, pushed in JVM_FILTERS:
        q = j.filter(cond)
        want = sorted(r["id"] for r in local.filter(cond).select("id").collect())
        assert sorted(r["id"] for r in q.select("id").collect()) == want, cond
        assert ("Lance filter:" in _plan(q)) == pushed, (cond, _plan(q))
    assert [r["slug"] for r in j.filter("contains(slug, '_')").collect()] == ["a_b"]
    assert [r["slug"] for r in j.filter("startswith(slug, 'a%')").collect()] == ["a%b"]
    assert [r["slug"] for r in j.filter("endswith(slug, '\\\\')").collect()] == ["back\\"]
    # a double-quoted literal: Spark 4.0 reads 'O''Brien' as two adjacent literals ('OBrien')
    assert [r["slug"] for r in j.filter('slug = "O\'Brien"').collect()] == ["O'Brien"]
    assert j.filter("f64 >= 0.0").count() == 2  # t00000 and its copy h0 hold -0.0: Spark counts it as 0.0


def test_auto_falls_back_for_columns_that_need_a_conversion(jvm, tmp_path, caplog):
    g = Graph.init(str(tmp_path / "types"), ALL_TYPES_PG)
    with caplog.at_level("INFO", logger="omnigraph_spark.spark.jvm_read"):
        auto = read_table(jvm, g.root, "Thing")
    assert not scans_in_jvm(auto)
    assert "'u32' is stored as uint32 and reads as int64" in caplog.text
    with pytest.raises(JvmReadUnavailableError) as e:
        read_table(jvm, g.root, "Thing", engine="jvm")
    for col in ("u32", "u64", "at", "emb"):
        assert f"'{col}'" in str(e.value)
    assert e.value.code == "JVM_READ_UNAVAILABLE"
    # the convertible columns alone go through the JVM
    sel = read_table(jvm, g.root, "Thing", columns=["slug", "i64", "tags"])
    assert scans_in_jvm(sel) and sel.columns == ["slug", "i64", "tags"]
    with pytest.raises(OptionError):
        read_table(jvm, g.root, "Thing", engine="fast")
    with pytest.raises(UnknownColumnError):
        read_table(jvm, g.root, "Thing", columns=["nope"])


def test_object_store_with_storage_options(jvm, s3, s3_graph):
    """S3 (moto's server and SeaweedFS): the executors open the pinned version with the storage options."""
    g, root, so = s3_graph, s3_graph.root, s3.storage_options()
    write_rows(g, "node:Person", people("a", "b", age=7))
    write_rows(g, "node:Person", people("c", age=8))
    df = read_table(jvm, root, "Person", engine="jvm", storage_options=so)
    assert "LanceSnapshotSource" in df._jdf.queryExecution().toString()
    assert sorted((r.id, r.age) for r in df.collect()) == [("a", 7), ("b", 7), ("c", 8)]
    old = read_table(jvm, root, "Person", engine="jvm", storage_options=so, version=g.snapshot().version - 1)
    assert sorted(r.id for r in old.collect()) == ["a", "b"]  # time travel on the object store


def test_snapshots_time_travel_and_branches(jvm, test_graph):
    root = test_graph.root
    r1 = write_rows(test_graph, "node:Person", people("a1", age=1))
    test_graph.create_branch("dev")
    write_rows(test_graph, "node:Person", people("dev1", age=2), branch="dev")
    r3 = write_rows(test_graph, "node:Person", people("a2", age=3))
    cases = [
        ({}, ["a1", "a2"]),
        ({"version": r1.manifest_version}, ["a1"]),
        ({"commit": r3.graph_commit_id}, ["a1", "a2"]),
        ({"branch": "dev"}, ["a1", "dev1"]),
    ]
    for kw, want in cases:
        j, p = both(jvm, root, "Person", **kw)
        assert sorted(r.id for r in j.collect()) == want, kw
        assert_df_equality(j, p, ignore_row_order=True)
    # a read is pinned when planned: a later commit does not change it
    pinned = read_table(jvm, root, "Person", engine="jvm")
    write_rows(test_graph, "node:Person", people("late"))
    assert sorted(r.id for r in pinned.collect()) == ["a1", "a2"]
    assert read_table(jvm, root, "Company", engine="jvm").count() == 0  # never written


def test_merges_deletions_and_split_fragments(jvm, test_graph):
    """Row ranges over fragments with deleted rows read every live row exactly once."""
    n = 70_000
    write_rows(test_graph, "node:Person", people(*[f"p{i:05d}" for i in range(n)], age=1))
    write_rows(test_graph, "node:Person", people(*[f"p{i:05d}" for i in range(0, n, 7)], age=2), mode="merge")
    j = read_table(jvm, test_graph.root, "Person", engine="jvm", min_partitions=2)
    assert j.rdd.getNumPartitions() >= 2
    got = {r["age"]: r["count"] for r in j.groupBy("age").count().collect()}
    assert got == {1: n - len(range(0, n, 7)), 2: len(range(0, n, 7))}
    assert j.select("id").distinct().count() == n == j.count()
    p = read_table(jvm, test_graph.root, "Person", engine="python")
    assert_df_equality(j, p, ignore_row_order=True)
    q = j.filter("age = 2 AND id < 'p00010'")  # pushed, and combined with each task's row range
    assert q.count() == 2 and "Lance filter: (`age` IS NOT NULL) AND (`age` = 2) AND (`id` < 'p00010')" in _plan(q)


def test_read_graph_uses_the_jvm_path_and_never_writes(jvm, test_graph):
    write_rows(test_graph, "node:Person", people("alice", "bob"))
    write_rows(test_graph, "edge:Knows", [{"id": "k1", "src": "alice", "dst": "bob", "since": dt.date(2020, 1, 1)}])
    before = listing(test_graph.root)
    g = read_graph(jvm, test_graph.root)
    assert scans_in_jvm(g.nodes["Person"]) and scans_in_jvm(g.edges["Knows"])
    assert [tuple(x) for x in g.edges_df().collect()] == [("alice", "bob", "k1", "Knows")]
    py = read_graph(jvm, test_graph.root, engine="python")
    for name in ("Person", "Company"):
        assert_df_equality(g.nodes[name], py.nodes[name], ignore_row_order=True)
    assert listing(test_graph.root) == before


def test_column_blockers_are_exact():
    stored = pa.schema([("a", pa.string()), ("b", pa.uint32()), ("c", pa.list_(pa.field("item", pa.int64())))])
    target = pa.schema(
        [("a", pa.string()), ("b", pa.int64()), ("c", pa.list_(pa.field("element", pa.int64()))), ("d", pa.string())]
    )
    assert column_blockers(stored, target) == [
        "column 'b' is stored as uint32 and reads as int64",
        "column 'd' is not stored at this version (older schema: reads as nulls)",
    ]


def test_shim_jars_lists_the_shim_first(tmp_path):
    assert shim_jars(str(tmp_path)) == []
    (tmp_path / "lib").mkdir()
    (tmp_path / SHIM_JAR).write_bytes(b"")
    (tmp_path / "lib" / "b.jar").write_bytes(b"")
    (tmp_path / "lib" / "a.jar").write_bytes(b"")
    assert shim_jars(str(tmp_path)) == [str(tmp_path / n) for n in (SHIM_JAR, "lib/a.jar", "lib/b.jar")]
