"""The @card bound recorded with each commit (invariant I16): a load's commit stores, in the
edge table's Lance transaction, an upper bound of the edges any one source has in the version it
creates, so that the next append checks @card without reading every committed edge. A version
without a recorded bound (the engine's, a compaction, a restore) is counted as before, and a
bound that cannot prove the max falls back to the exact count, which words every error."""

from __future__ import annotations

from collections import Counter

import lance
import pytest

from omnigraph_spark import Graph, read_table, write_table
from omnigraph_spark.errors import CardinalityViolationError
from omnigraph_spark.spark import validate
from omnigraph_spark.store import tables as _tables
from omnigraph_spark.store.writes import SRC_BOUND_PROP

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

SCHEMA = """
node Person {
    name: String @key
}
edge Knows: Person -> Person @card(0..3)
edge Likes: Person -> Person
"""

NAMES = ["ann", "bob", "cid", "dan", "eve", "fay"]
ENGINES = ["jvm", "python"]


def people(spark):
    return spark.createDataFrame([(n,) for n in NAMES], "name string")


def knows(spark, pairs, parts=1):
    return spark.createDataFrame(list(pairs), "src string, dst string").repartition(parts)


def recorded(root: str, key: str = "edge:Knows"):
    """The bound stored with the table version the graph's head pins (None: none stored)."""
    g = Graph.open(root)
    snap = g.snapshot()
    return _tables.transaction_property(g.open_table(key, snap), snap.table(key).version, SRC_BOUND_PROP)


def most_per_source(spark, root: str) -> int:
    return max(Counter(r.src for r in read_table(spark, root, "Knows").select("src").collect()).values())


@pytest.fixture
def edge_src_reads(monkeypatch):
    """Every read of a committed edge table's ``src`` column by the driver's validation."""
    seen = []
    orig = lance.LanceDataset.to_table

    def to_table(self, *a, **kw):
        cols = kw.get("columns") or (a[0] if a else None)
        if cols and "src" in cols and "/edges/" in self.uri:
            seen.append((self.uri, self.version))
        return orig(self, *a, **kw)

    monkeypatch.setattr(lance.LanceDataset, "to_table", to_table)
    return seen


@pytest.mark.parametrize("engine", ENGINES)
def test_each_load_records_an_upper_bound_of_edges_per_source(jvm, tmp_path, engine):
    """I16: after every append and overwrite the recorded bound is >= the most edges any source
    really has; an edge type without @card records nothing."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine=engine)
    assert recorded(g.root) is None  # nothing loaded yet
    loads = [
        ("append", [("ann", "bob"), ("ann", "cid"), ("bob", "ann")]),
        ("append", [("bob", "cid"), ("cid", "ann")]),
        ("overwrite", [("eve", "fay"), ("eve", "ann")]),
        ("append", [("fay", "ann"), ("eve", "bob")]),
    ]
    for mode, pairs in loads:
        write_table(knows(jvm, pairs, parts=2), g.root, "Knows", mode=mode, engine=engine)
        bound = recorded(g.root)
        assert bound is not None and bound.isdigit(), (mode, bound)
        assert int(bound) >= most_per_source(jvm, g.root), (mode, bound)
    assert int(recorded(g.root)) <= 3  # every load above was proven within the max
    write_table(knows(jvm, [("ann", "bob")]), g.root, "Likes", engine=engine)
    assert recorded(g.root, "edge:Likes") is None


@pytest.mark.parametrize("engine", ENGINES)
def test_an_append_onto_a_recorded_bound_reads_no_committed_edges(jvm, tmp_path, engine, edge_src_reads):
    """I16: with a bound recorded at the pinned version, an append that fits under the max is
    validated from the bound and the load alone: the driver reads no committed src."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine=engine)
    write_table(knows(jvm, [("ann", "bob"), ("bob", "cid")]), g.root, "Knows", engine=engine)
    edge_src_reads.clear()
    write_table(knows(jvm, [("ann", "cid"), ("cid", "dan")]), g.root, "Knows", engine=engine)
    assert edge_src_reads == []
    assert sorted((r.src, r.dst) for r in read_table(jvm, g.root, "Knows").collect()) == [
        ("ann", "bob"),
        ("ann", "cid"),
        ("bob", "cid"),
        ("cid", "dan"),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_version_without_a_recorded_bound_is_counted(jvm, tmp_path, engine, edge_src_reads):
    """I16: a compaction commits a version with no bound; the next append counts the committed
    edges (the only way to know them) and still refuses a source above the max, with the same
    message on both paths."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine=engine)
    write_table(knows(jvm, [("ann", "bob")]), g.root, "Knows", engine=engine)
    write_table(knows(jvm, [("ann", "cid")]), g.root, "Knows", engine=engine)
    assert g.optimize(tables=["edge:Knows"]).compacted == ["edge:Knows"]
    assert recorded(g.root) is None
    edge_src_reads.clear()
    with pytest.raises(
        CardinalityViolationError,
        match=r"^\[CARDINALITY_VIOLATION\] @card violation on edge Knows: source 'ann' has 4 edges \(max 3\)$",
    ):
        write_table(knows(jvm, [("ann", "dan"), ("ann", "eve")]), g.root, "Knows", engine=engine)
    assert edge_src_reads, "the committed edges were not counted"
    assert most_per_source(jvm, g.root) == 2  # nothing of the refused load landed
    write_table(knows(jvm, [("ann", "dan")]), g.root, "Knows", engine=engine)  # 3 = max: lands
    assert int(recorded(g.root)) >= 3


@pytest.mark.parametrize("engine", ENGINES)
def test_a_bound_above_the_max_falls_back_to_the_exact_count(jvm, tmp_path, engine, monkeypatch):
    """I16: bob has 3 edges (the max), so the recorded bound is 3 and any append exceeds it;
    the exact count then lets an append to another source land, records the exact most (3),
    and refuses one more edge for bob."""
    counted = []
    orig = validate._check_card
    monkeypatch.setattr(validate, "_check_card", lambda *a, **kw: counted.append(1) or orig(*a, **kw))
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine=engine)
    write_table(
        knows(jvm, [("bob", "ann"), ("bob", "cid"), ("bob", "dan"), ("ann", "bob")]), g.root, "Knows", engine=engine
    )
    assert int(recorded(g.root)) == 3
    before = len(counted)
    write_table(knows(jvm, [("ann", "cid")]), g.root, "Knows", engine=engine)
    assert len(counted) == before + 1  # 3 + 1 > max: counted exactly, and it fits
    assert recorded(g.root) == "3"  # the exact most (bob's 3), not the loose 4
    with pytest.raises(CardinalityViolationError, match=r"source 'bob' has 4 edges \(max 3\)"):
        write_table(knows(jvm, [("bob", "eve")]), g.root, "Knows", engine=engine)
    assert most_per_source(jvm, g.root) == 3 and recorded(g.root) == "3"
