"""The JVM write path (jvm-shim's LanceFragmentSink + write_graph/write_table(engine=...)): the
same rows, ids, errors and graph commits as the Python path, with the staging in the executor
JVM. Invariants: I1 (one commit, all or nothing), I5 (staged in append mode: the table's field
ids), I10 (a failed load leaves no staged file), I11 (bounded staging memory: batches stream).
Skipped only when the shim is not built (`make test` builds it; CI requires it)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from omnigraph_spark import Graph, read_table, write_graph, write_table
from omnigraph_spark.errors import (
    ConstraintViolationError,
    DanglingEdgeError,
    JvmWriteUnavailableError,
    NullViolationError,
    OptionError,
    TypeMismatchError,
    UniqueViolationError,
)
from omnigraph_spark.spark import jvm_write
from omnigraph_spark.store import writes
from tests.spark.test_jvm_read import JVM_TYPES_PG
from tests.spark.test_read import ALL_TYPES_PG

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

#: input types that widen to each stored type (the JVM path's casts), columns out of table order
THING_DDL = (
    "nums array<int>, f64 float, slug string, i64 int, i32 short, day date, tags array<string>, "
    "color string, flag boolean, f32 float"
)


def _things(n, start=0):
    return [
        (
            [i, -i] if i % 4 else None,
            i / 4,
            f"t{i:05d}",
            2**31 - 1 - i,
            (i % 30000) - 15000,
            dt.date(2024, 2, 29) + dt.timedelta(days=i),
            None if i % 5 == 0 else ["a", None, f"x{i}"],
            ("red", "green", None)[i % 3],
            (True, False, None)[i % 3],
            i / 8,
        )
        for i in range(start, start + n)
    ]


def _rels(n, nodes):
    return [(f"t{i % nodes:05d}", f"t{(i * 7 + 1) % nodes:05d}", i * 0.5) for i in range(n)]


def data_files(root):
    return {
        os.path.join(d, f)
        for top in ("nodes", "edges")
        for d, _, fs in os.walk(os.path.join(root, top))
        if d.endswith("/data")
        for f in fs
        if f.endswith(".lance")
    }


def engine_used(caplog, key):
    hits = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"staged {key} (")]
    assert hits, f"no staging log line for {key}"
    return hits[-1].split("(")[1].split(")")[0]


def test_jvm_staging_writes_what_python_staging_writes(jvm, tmp_path, caplog):
    """Every JVM-writable type, widening input types, columns in any order: the rows read back
    equal a Python-staged load of the same DataFrames (I5: committed fragments read correctly)."""
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.graph_io")
    nodes = jvm.createDataFrame(_things(3000), THING_DDL).repartition(3)
    edges = jvm.createDataFrame(_rels(2000, 3000), "`from` string, `to` string, w double").repartition(2)
    out = {}
    for engine in ("jvm", "python"):
        g = Graph.init(str(tmp_path / engine), JVM_TYPES_PG)
        res = write_graph(g.root, {"Thing": nodes, "Rel": edges}, engine=engine)
        assert engine_used(caplog, "node:Thing") == engine and engine_used(caplog, "edge:Rel") == engine
        assert {t.table_key: t.rows_written for t in res.tables} == {"node:Thing": 3000, "edge:Rel": 2000}
        assert len(Graph.open(g.root).log()) == 2  # init + ONE commit (I1)
        out[engine] = g.root
    for t in ("Thing", "Rel"):
        j = read_table(jvm, out["jvm"], t, engine="python")
        p = read_table(jvm, out["python"], t, engine="python")
        if t == "Rel":  # minted ids differ by design; everything else is equal
            j, p = j.drop("id"), p.drop("id")
        assert j.schema == p.schema
        assert_df_equality(j, p, ignore_row_order=True)
    first = read_table(jvm, out["jvm"], "Thing").filter("slug = 't00001'").collect()[0].asDict()
    assert first == {
        "id": "t00001",
        "slug": "t00001",
        "color": "green",
        "flag": False,
        "i32": -14999,
        "i64": 2**31 - 2,
        "f32": 0.125,
        "f64": 0.25,
        "day": dt.date(2024, 3, 1),
        "tags": ["a", None, "x1"],
        "nums": [1, -1],
    }


def _big_things(n):
    """Rows that make the sink's row writer grow every buffer within one batch: long and
    multi-byte strings, long lists, runs of nulls."""
    out = []
    for i in range(n):
        long_text = ("ü✓" * (i % 700)) if i % 97 == 0 else f"t{i:05d}"
        out.append(
            (
                [i] * (i % 300) if i % 11 else None,
                None if i % 13 == 0 else i / 4,
                f"s{i:05d}-{long_text}",
                None if 5000 <= i < 5400 else i * 3,
                i % 30000,
                None if i % 7 == 0 else dt.date(2020, 1, 1),
                None if i % 5 == 0 else [long_text, None, ""] * (i % 40),
                ("red", "green", None)[i % 3],
                None if i % 17 == 0 else i % 2 == 0,
                None if i % 19 == 0 else i / 8,
            )
        )
    return out


def test_the_sinks_row_writer_grows_every_buffer_within_a_batch(jvm, tmp_path):
    """One task of 12,000 rows (more rows than Arrow's initial capacity, strings past the first
    data buffer, lists of up to 299 elements): the JVM-staged rows equal the Python-staged ones
    (RowWriter, docs/benchmarks.md)."""
    rows = jvm.createDataFrame(_big_things(12_000), THING_DDL).coalesce(1)
    roots = {}
    for engine in ("jvm", "python"):
        g = Graph.init(str(tmp_path / engine), JVM_TYPES_PG)
        write_table(rows, g.root, "Thing", engine=engine)
        roots[engine] = g.root
    j = read_table(jvm, roots["jvm"], "Thing", engine="python")
    p = read_table(jvm, roots["python"], "Thing", engine="python")
    assert j.count() == 12_000
    assert_df_equality(j, p, ignore_row_order=True)
    got = read_table(jvm, roots["jvm"], "Thing").filter("slug LIKE 's00194-%'").collect()[0]
    assert got["slug"] == "s00194-" + "ü✓" * 194 and got["tags"] == ["ü✓" * 194, None, ""] * 34
    assert got["nums"] == [194] * 194 and got["i64"] == 582


def test_minted_ids_are_ulids_and_given_ids_are_kept(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    write_graph(g.root, {"Thing": jvm.createDataFrame(_things(10), THING_DDL)}, engine="jvm")
    before_ms = int(time.time() * 1000)
    rels = jvm.createDataFrame(
        [("given-1", "t00000", "t00001", 1.0), (None, "t00001", "t00002", 2.0), (None, "t00002", "t00003", 3.0)] * 100,
        "id string, src string, dst string, w double",
    )
    with pytest.raises(UniqueViolationError):  # given ids are still checked load-wide
        write_table(rels, g.root, "Rel", engine="jvm")
    rels = rels.limit(3)
    write_table(rels.coalesce(1), g.root, "Rel", engine="jvm")
    got = {r["w"]: r["id"] for r in read_table(jvm, g.root, "Rel").collect()}
    assert got[1.0] == "given-1"
    for w in (2.0, 3.0):
        assert ULID.match(got[w]), got[w]
        ms = 0
        for ch in got[w][:10]:
            ms = ms * 32 + CROCKFORD.index(ch)
        assert before_ms - 5_000 <= ms <= int(time.time() * 1000) + 5_000  # the mint time
    assert got[2.0] != got[3.0]
    # a load of only minted ids is flagged as such (no uniqueness pass needed, see test_minted_ids)
    target = writes.prepare_target(Graph.open(g.root), "main", "edge:Rel", "append")
    plan, why = jvm_write.plan_stage(
        Graph.open(g.root).catalog.resolve("Rel"), target, jvm.createDataFrame([], "src string, dst string").schema
    )
    assert not why and plan.mint_column == "id"
    staged = jvm_write.stage_jvm(
        jvm.createDataFrame([("t00000", "t00009")], "src string, dst string"),
        Graph.open(g.root).catalog.resolve("Rel"),
        target,
        plan,
        str(tmp_path / "journal"),
    )
    assert [s.minted_ids for s in staged if s.rows] == [True]
    writes.abort(staged)


def test_minted_ids_count_up_within_a_task(jvm, tmp_path):
    """Minted ids are monotonic ULIDs (jvm-shim Ulids.Mint): within a task and millisecond each
    is the previous + 1, from a random start per task. Over several batches of a task, in both
    the all-minted batch (written in bulk) and a batch mixing given ids, every id is distinct."""
    from ulid import ULID as PyUlid

    from omnigraph_spark.store.tables import open_dataset

    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    write_graph(g.root, {"Thing": jvm.createDataFrame(_things(10), THING_DDL)}, engine="jvm")
    n = 2 * jvm_write.JVM_BATCH_ROWS + 500  # three batches per task
    rels = jvm.range(0, 2 * n, 1, 2).selectExpr(
        "CASE WHEN id = 7 THEN 'given-7' END AS id", "'t00001' AS src", "'t00002' AS dst", "CAST(id AS DOUBLE) AS w"
    )
    write_table(rels, g.root, "Rel", engine="jvm")
    t = Graph.open(g.root).snapshot("main").table("edge:Rel")
    ds = open_dataset(t.base_path, branch=t.lance_branch, version=t.version)
    seen, steps, starts = set(), 0, 0
    for frag in ds.get_fragments():
        ids = [i for i in frag.to_table(columns=["id"]).column("id").to_pylist() if i != "given-7"]
        assert all(ULID.match(i) for i in ids)
        values = [int(PyUlid.from_str(i)) for i in ids]
        for a, b in zip(values, values[1:]):
            if a >> 80 == b >> 80:  # the same millisecond: the next count
                assert b == a + 1, (hex(a), hex(b))
                steps += 1
            else:
                starts += 1
        assert all(v & (1 << 79) == 0 for v in values[:1])  # a task's start has its top bit clear
        seen.update(ids)
    assert len(seen) == 2 * n - 1 and ds.count_rows() == 2 * n
    assert steps >= 2 * n - 10 and starts <= 8  # one start per task and millisecond


def _executed(df):
    """The physical plan above the cached data (the cache's own plan cut off)."""
    return df._jdf.queryExecution().executedPlan().toString().split("InMemoryRelation")[0]


def test_columns_of_the_tables_types_reach_the_sink_without_a_projection(jvm, tmp_path):
    """A DataFrame whose columns already have the table's types (in any order) is handed to the
    sink as its own rows: no Project in the plan, so Spark does not copy every row once more.
    Ids not given are minted by the sink, not projected as a null column. A column that needs a
    widening cast is still projected, and both load the same rows."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    write_graph(g.root, {"Thing": jvm.createDataFrame(_things(10), THING_DDL)}, engine="jvm")
    rel = Graph.open(g.root).catalog.resolve("Rel")
    exact = jvm.createDataFrame(_rels(300, 10), "src string, dst string, w double").select("w", "dst", "src").cache()
    widened = jvm.createDataFrame(_rels(300, 10), "src string, dst string, w float").cache()
    for df, projects in ((exact, False), (widened, True)):
        target = writes.prepare_target(Graph.open(g.root), "main", "edge:Rel", "append")
        plan, why = jvm_write.plan_stage(rel, target, df.schema)
        assert not why and plan.mint_column == "id" and ("id", "null") in plan.kinds
        shown = _executed(jvm_write.projected(df, plan))
        assert ("Project" in shown) == projects, shown
        assert shown.count("InMemoryTableScan") == 1
        write_table(df, g.root, "Rel", engine="jvm")
    in_order = jvm.createDataFrame(_rels(3, 10), "src string, dst string, w double")
    plan, _ = jvm_write.plan_stage(rel, target, in_order.schema)
    assert jvm_write.projected(in_order, plan) is in_order  # nothing to project: not even a Spark plan
    got = read_table(jvm, g.root, "Rel").collect()
    assert len(got) == 600 and all(ULID.match(r["id"]) for r in got) and len({r["id"] for r in got}) == 600
    want = sorted((s, d, w) for s, d, w in _rels(300, 10))
    assert sorted((r["src"], r["dst"], r["w"]) for r in got) == sorted(want + want)


def test_a_keyed_nodes_id_is_its_key_column_without_a_projection(jvm, tmp_path):
    """A keyed node's id is its String key: the sink shares the key column's values for the id
    column ("copy:" kind) instead of Spark projecting the key twice into every row."""
    g = Graph.init(str(tmp_path / "g"), JVM_TYPES_PG)
    thing = Graph.open(g.root).catalog.resolve("Thing")
    exact = (
        jvm.createDataFrame(_things(3 * jvm_write.JVM_BATCH_ROWS // 2), THING_DDL)
        .selectExpr(
            "slug",
            "color",
            "flag",
            "CAST(i32 AS INT) AS i32",
            "CAST(i64 AS BIGINT) AS i64",
            "f32",
            "CAST(f64 AS DOUBLE) AS f64",
            "day",
            "tags",
            "CAST(nums AS ARRAY<BIGINT>) AS nums",
        )
        .cache()
    )
    target = writes.prepare_target(Graph.open(g.root), "main", "node:Thing", "append")
    plan, why = jvm_write.plan_stage(thing, target, exact.schema)
    assert not why and ("id", "copy:slug") in plan.kinds and plan.mint_column is None
    shown = _executed(jvm_write.projected(exact, plan))
    assert "Project" not in shown and shown.count("InMemoryTableScan") == 1, shown
    write_table(exact.coalesce(1), g.root, "Thing", engine="jvm")  # two batches in one task
    got = read_table(jvm, g.root, "Thing").select("id", "slug", "i64").collect()
    assert len(got) == len(_things(3 * jvm_write.JVM_BATCH_ROWS // 2))
    assert all(r["id"] == r["slug"] for r in got)
    assert sorted(r["slug"] for r in got)[:2] == ["t00000", "t00001"]
    # nullable properties the DataFrame does not give are written as nulls by the sink
    partial = exact.select("slug", "i64").where("i64 % 7 = 0")
    plan, _ = jvm_write.plan_stage(thing, target, partial.schema)
    assert {("color", "null"), ("tags", "null"), ("day", "null")} <= set(plan.kinds)
    write_table(partial.withColumn("slug", F.concat(F.lit("p"), "slug")), g.root, "Thing", engine="jvm")
    rows = read_table(jvm, g.root, "Thing").where("slug LIKE 'p%'").collect()
    assert len(rows) == partial.count() and all(r["id"] == r["slug"] for r in rows)
    assert all(r["color"] is None and r["tags"] is None and r["day"] is None and r["nums"] is None for r in rows)


def test_jvm_ulid_text_matches_python_ulid_bit_for_bit(jvm):
    """The sink writes minted ULIDs as bytes straight into the batch (jvm-shim Ulids): the text
    must be python-ulid's for any 128 bits, including all-zero, all-one and every bit alone
    (a lost or misplaced bit shows as a difference)."""
    from ulid import ULID

    ulids = jvm.sparkContext._jvm.io.omnigraph.spark.Ulids
    signed = lambda u: u - (1 << 64) if u >= 1 << 63 else u  # noqa: E731  (Java longs)
    values = [0, (1 << 128) - 1] + [1 << b for b in range(128)]
    values += [int.from_bytes(os.urandom(16), "big") for _ in range(300)]
    for v in values:
        want = str(ULID.from_bytes(v.to_bytes(16, "big")))
        assert ulids.text(signed(v >> 64), signed(v & ((1 << 64) - 1))) == want, hex(v)


def test_minted_ids_count_up_digit_by_digit_as_the_value_does(jvm):
    """The sink's ids count up by adding 1 to the text's last base32 digit and carrying (jvm-shim
    Ulids.Counter): every id must be python-ulid's text of start + i, across carries through one,
    several and all sixteen random digits and into the top bits of the counter."""
    from ulid import ULID

    ulids = jvm.sparkContext._jvm.io.omnigraph.spark.Ulids
    signed = lambda u: u - (1 << 64) if u >= 1 << 63 else u  # noqa: E731  (Java longs)
    ms = 1_700_000_000_000 << 80
    starts = [
        ms,
        ms | (1 << 80) - 40,
        ms | (1 << 64) - 3,
        ms | (1 << 79) - 33,
        ms | 0x7FFF_FFFF_FFFF_FFFF_FFF0,
        ms | 31 << 5 | 29,
        ms | int.from_bytes(os.urandom(10), "big") >> 1,
    ]
    for start in starts:
        got = list(ulids.countUp(signed(start >> 64), signed(start & ((1 << 64) - 1)), 70))
        want = [str(ULID.from_int(start + i)) for i in range(70)]
        assert got == want, hex(start)


BAD_ROWS = [
    # (type, DDL, rows, error, message fragment)
    (
        "Item",
        "name string, qty bigint, kind string",
        [("a", 1, "alpha"), ("b", None, "beta")],
        NullViolationError,
        "node Item column 'qty' row 1: non-nullable property 'qty' (I64) is null (Item partition 0)",
    ),
    (
        "Item",
        "name string, qty bigint, kind string",
        [("a", 1, "alpha"), ("b", 2, "omega")],
        ConstraintViolationError,
        (
            "node Item column 'kind' row 1: invalid enum value 'omega' for Item.kind (expected: alpha, beta) "
            "(Item partition 0)"
        ),
    ),
    (
        "Item",
        "name string, qty bigint, kind string",
        [("a", 1, "alpha"), ("b", 2, "it's")],
        ConstraintViolationError,
        "node Item column 'kind' row 1: invalid enum value \"it's\" for Item.kind",
    ),
    (
        "Link",
        "src string, dst string",
        [("a", "a"), (None, "a")],
        NullViolationError,
        "edge Link column 'src' row 1: non-nullable property 'src' (String) is null (Link partition 0)",
    ),
    # the sink compares enum values as UTF-8 bytes: nulls before the bad value, multi-byte text,
    # a small enum (compared in turn) and a large one (a hash set)
    (
        "Tag",
        "label string, tone string",
        [("x", None), ("y", "soft"), ("z", None), ("w", "lóud")],
        ConstraintViolationError,
        (
            "node Tag column 'tone' row 3: invalid enum value 'lóud' for Tag.tone "
            "(expected: loud, soft) (Tag partition 0)"
        ),
    ),
    (
        "Tag",
        "label string, mood string",
        [("x", None), ("y", "m19"), ("z", "m00"), ("w", None), ("v", "m2")],
        ConstraintViolationError,
        ("node Tag column 'mood' row 4: invalid enum value 'm2' for Tag.mood (expected: m00, m01, m02"),
    ),
    (
        "Tag",
        "label string, mood string",
        [("x", "m07"), ("y", "m1"), ("z", "m00")],
        ConstraintViolationError,
        "node Tag column 'mood' row 1: invalid enum value 'm1' for Tag.mood",
    ),
]
BAD_PG = (
    """
node Item {
    name: String @key
    qty: I64
    kind: enum(alpha, beta)
}
node Tag {
    label: String @key
    tone: enum(soft, loud)?
    mood: enum("""
    + ", ".join(f"m{i:02d}" for i in range(20))
    + """)?
}
edge Link: Item -> Item
"""
)


@pytest.mark.parametrize("case", range(len(BAD_ROWS)))
def test_row_rule_errors_equal_the_python_paths_and_leave_nothing(jvm, tmp_path, case):
    """Bad rows: the same typed error and message as the Python path; the graph is unchanged
    and no staged file survives (I1, I10)."""
    type_name, ddl, rows, err, fragment = BAD_ROWS[case]
    messages = []
    for engine in ("jvm", "python"):
        g = Graph.init(str(tmp_path / engine), BAD_PG)
        write_graph(g.root, {"Item": jvm.createDataFrame([("a", 1, "alpha")], "name string, qty bigint, kind string")})
        v0, files0 = g.snapshot().version, data_files(g.root)
        with pytest.raises(err) as ei:
            write_graph(g.root, {type_name: jvm.createDataFrame(rows, ddl).coalesce(1)}, engine=engine)
        messages.append(str(ei.value))
        assert Graph.open(g.root).snapshot().version == v0
        assert data_files(g.root) == files0
    assert fragment in messages[0]
    assert messages[0] == messages[1]


def test_load_wide_rules_still_apply(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), BAD_PG)
    v0, files0 = g.snapshot().version, data_files(g.root)
    with pytest.raises(DanglingEdgeError):
        write_graph(
            g.root,
            {
                "Item": jvm.createDataFrame([("a", 1, "alpha")], "name string, qty bigint, kind string"),
                "Link": jvm.createDataFrame([("a", "zz")], "`from` string, `to` string"),
            },
            engine="jvm",
        )
    with pytest.raises(UniqueViolationError):
        write_table(
            jvm.createDataFrame([("a", 1, "alpha"), ("a", 2, "beta")], "name string, qty bigint, kind string"),
            g.root,
            "Item",
            engine="jvm",
        )
    assert Graph.open(g.root).snapshot().version == v0 and data_files(g.root) == files0


def test_modes_and_branches(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), BAD_PG)
    items = jvm.createDataFrame([(f"i{k}", k, "alpha") for k in range(50)], "name string, qty bigint, kind string")
    write_table(items, g.root, "Item", engine="jvm")
    g.create_branch("dev")
    upd = jvm.createDataFrame([("i1", 100, "beta"), ("new", 7, "alpha")], "name string, qty bigint, kind string")
    res = write_table(upd, g.root, "Item", mode="merge", branch="dev", engine="jvm")
    assert res.branch == "dev"
    dev = {r["name"]: (r["qty"], r["kind"]) for r in read_table(jvm, g.root, "Item", branch="dev").collect()}
    main = {r["name"]: r["qty"] for r in read_table(jvm, g.root, "Item").collect()}
    assert len(dev) == 51 and dev["i1"] == (100, "beta") and dev["new"] == (7, "alpha")
    assert len(main) == 50 and main["i1"] == 1  # the branch write never touched main
    write_table(
        jvm.createDataFrame([("only", 1, "beta")], "name string, qty bigint, kind string"),
        g.root,
        "Item",
        mode="overwrite",
        branch="dev",
        engine="jvm",
    )
    assert [r["name"] for r in read_table(jvm, g.root, "Item", branch="dev").collect()] == ["only"]
    # an empty DataFrame overwrites to empty (the job ran tasks that staged nothing)
    write_table(
        jvm.createDataFrame([], "name string, qty bigint, kind string").repartition(2),
        g.root,
        "Item",
        mode="overwrite",
        branch="dev",
        engine="jvm",
    )
    assert read_table(jvm, g.root, "Item", branch="dev").count() == 0
    assert read_table(jvm, g.root, "Item").count() == 50


def test_what_the_jvm_path_does_not_stage_falls_back_or_raises(jvm, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.graph_io")
    g = Graph.init(
        str(tmp_path / "g"),
        ALL_TYPES_PG
        + """
node Ranged {
    n: I64
    @range(n, 0..10)
}
""",
    )
    cases = [
        ("Thing", jvm.createDataFrame([("a", 5)], "slug string, u32 int"), "column 'u32': int -> uint32"),
        ("Thing", jvm.createDataFrame([("a",)], "slug string"), "column 'data' is stored as large_binary"),
        ("Thing", jvm.createDataFrame([("a", 5)], "slug string, i32 bigint"), "column 'i32': bigint -> int32"),
        ("Thing", jvm.createDataFrame([("a", "a")], "slug string, id string"), "an explicit 'id' beside @key"),
        ("Ranged", jvm.createDataFrame([(5,)], "n bigint"), "@range/@check"),
    ]
    for type_name, df, why in cases:
        files0 = data_files(g.root)
        with pytest.raises(JvmWriteUnavailableError) as ei:
            write_graph(g.root, {type_name: df}, engine="jvm")
        assert ei.value.code == "JVM_WRITE_UNAVAILABLE" and why in str(ei.value)
        assert data_files(g.root) == files0  # raised at planning: no job ran
        write_graph(g.root, {type_name: df}, mode="overwrite")  # auto: the Python path, logged
        assert engine_used(caplog, f"node:{type_name}") == "python"
        assert any(why in r.getMessage() for r in caplog.records if r.getMessage().startswith("staging node:"))
    assert [r["id"] for r in read_table(jvm, g.root, "Thing", engine="python").collect()] == ["a"]
    assert [r["n"] for r in read_table(jvm, g.root, "Ranged").collect()] == [5]
    with pytest.raises(OptionError):
        write_graph(g.root, {"Ranged": cases[-1][1]}, engine="fast")
    # storage options and object stores take the JVM path too (tests/spark/test_object_store.py)
    target = writes.prepare_target(Graph.open(g.root), "main", "node:Ranged", "append")
    from dataclasses import replace

    assert jvm_write.setup_blocker(jvm, replace(target, storage_options={"k": "v"}, base_uri="s3://b/g/t")) is None
    assert jvm_write.setup_blocker(jvm, target) is None


def test_a_failed_job_leaves_no_staged_file(jvm, tmp_path):
    """I10: a task fails after other tasks staged (and journaled) their files: the load raises,
    the graph is unchanged and every file the job staged is gone."""
    from pyspark.sql import functions as F

    g = Graph.init(str(tmp_path / "g"), BAD_PG)
    v0, files0 = g.snapshot().version, data_files(g.root)
    boom = F.udf(lambda n: n if n != "i3999" else (_ for _ in ()).throw(RuntimeError("injected")), "string")
    items = (
        jvm.createDataFrame([(f"i{k}", k, "alpha") for k in range(4000)], "name string, qty bigint, kind string")
        .repartition(4)
        .withColumn("name", boom("name"))
    )
    with pytest.raises(Exception, match="injected"):
        write_table(items, g.root, "Item", engine="jvm")
    assert Graph.open(g.root).snapshot().version == v0
    assert data_files(g.root) == files0
    assert (
        not os.listdir(os.path.join(g.root, "_omnigraph_spark", "staging"))
        if os.path.isdir(os.path.join(g.root, "_omnigraph_spark", "staging"))
        else True
    )


EVENT_PG = """
node Event {
    name: String @key
    at: DateTime?
    on: DateTime
    big: U64?
    small: U32?
    emb: Vector(3)?
}
"""


def test_datetime_from_timestamps_and_dates_and_absent_unwritable_columns(jvm, tmp_path, caplog):
    """DateTime fed by a Spark timestamp or date (converted to milliseconds in the JVM), and
    U64/U32/Vector columns the DataFrame does not give (nulls): the JVM path stages them, with
    the same rows as the Python path."""
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.graph_io")
    utc = dt.timezone.utc
    rows = [
        (
            f"e{i}",
            dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=utc) + dt.timedelta(minutes=i) if i % 3 else None,
            dt.date(1969, 12, 31) + dt.timedelta(days=i),
        )
        for i in range(500)
    ]
    df = jvm.createDataFrame(rows, "name string, at timestamp, on date").repartition(2)
    roots = {}
    for engine in ("jvm", "python"):
        g = Graph.init(str(tmp_path / engine), EVENT_PG)
        write_table(df, g.root, "Event", engine=engine)
        assert engine_used(caplog, "node:Event") == engine
        roots[engine] = g.root
    j = read_table(jvm, roots["jvm"], "Event", engine="python")
    p = read_table(jvm, roots["python"], "Event", engine="python")
    assert_df_equality(j, p, ignore_row_order=True)
    got = {r["name"]: r for r in j.collect()}
    assert got["e1"]["at"] == dt.datetime(2024, 1, 2, 3, 5, 5, 678000)  # session time zone is UTC
    assert got["e0"]["at"] is None and got["e0"]["on"] == dt.datetime(1969, 12, 31, 0, 0)
    assert got["e1"]["big"] is None and got["e1"]["small"] is None and got["e1"]["emb"] is None


def test_sub_millisecond_timestamps_are_refused(jvm, tmp_path):
    g = Graph.init(str(tmp_path / "g"), EVENT_PG)
    v0, files0 = g.snapshot().version, data_files(g.root)
    utc = dt.timezone.utc
    df = jvm.createDataFrame(
        [
            ("a", dt.datetime(2024, 1, 2, tzinfo=utc), dt.date(2024, 1, 1)),
            ("b", dt.datetime(2024, 1, 2, 0, 0, 0, 1, tzinfo=utc), dt.date(2024, 1, 1)),
        ],
        "name string, at timestamp, on date",
    ).coalesce(1)
    with pytest.raises(TypeMismatchError) as ei:
        write_table(df, g.root, "Event", engine="jvm")
    assert (
        "node Event column 'at' row 1: value '2024-01-02T00:00:00.000001Z' (timestamp[us]) has a "
        "sub-millisecond part; DateTime stores milliseconds (Event partition 0)"
    ) in str(ei.value)
    with pytest.raises(TypeMismatchError, match="sub-millisecond"):  # the Python path refuses it too
        write_table(df, g.root, "Event", engine="python")
    with pytest.raises(NullViolationError, match="column 'on' row 0"):
        write_table(jvm.createDataFrame([("a", None)], "name string, on date"), g.root, "Event", engine="jvm")
    assert Graph.open(g.root).snapshot().version == v0 and data_files(g.root) == files0
