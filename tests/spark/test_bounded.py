"""Load-wide checks in bounded memory (invariant I24), Spark-free: every scenario runs through
the validator three ways on a fresh graph each: in the driver's memory, probing the committed
tables' ``id`` indexes, and bucket by bucket with buckets of three rows (so every check spans
many buckets); all three must raise the same error, message for message, or commit the same
rows. The index probe itself is checked against Lance's rows: a lagging index, deleted rows."""

from __future__ import annotations

import dataclasses

import lance
import pyarrow as pa
import pytest
from lance.fragment import LanceFragment

from omnigraph_spark import Graph
from omnigraph_spark.errors import OmnigraphError
from omnigraph_spark.ingest import checks
from omnigraph_spark.ingest.integrity import delete_keys
from omnigraph_spark.spark import bounded, validate
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import id_probe, writes
from omnigraph_spark.store.id_probe import CommittedIds

pytestmark = pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")

SCHEMA = """
node Person {
    name: String @key
    email: String? @unique
}
node City {
    name: String @key
}
edge Knows: Person -> Person @card(0..2)
edge Lives: Person -> City @card(2..3)
"""

WAYS = ("memory", "probe", "buckets")


def _way(monkeypatch, way: str, calls: list[str]) -> int:
    """Set the validator up for ``way``; the bounded_rows to pass. ``calls`` gets the name of
    every bounded comparison that runs (buckets read, index probes)."""
    monkeypatch.setattr(validate, "PROBE_RATIO", 0 if way == "probe" else 10**9)
    monkeypatch.setattr(bounded, "BUCKET_ROWS", 3)
    monkeypatch.setattr(bounded, "PROBE_ROWS", 10**9 if way == "probe" else 0)
    # a KEY_CONFLICT names the smallest of the first 3 conflicts found (in the scan's order)
    monkeypatch.setattr(bounded, "KEY_CONFLICT_SAMPLE", 3)
    monkeypatch.setattr(checks, "KEY_CONFLICT_SAMPLE", 3)
    for cls, name in ((bounded.Buckets, "read"), (CommittedIds, "contains")):
        real = getattr(cls, name)

        def spy(self, *a, _real=real, _name=name, **kw):
            calls.append(_name)
            return _real(self, *a, **kw)

        monkeypatch.setattr(cls, name, spy)
    return 1 if way == "buckets" else 0


def stage(graph, key: str, rows: list[dict], mode: str = "append"):
    target = writes.prepare_target(graph, "main", key, mode)
    # several files, so that rows are numbered across files
    batches = [pa.Table.from_pylist(rows[i : i + 4], schema=target.schema) for i in range(0, len(rows), 4)]
    parts = [writes.stage(target, t.to_batches()) for t in batches] or [writes.stage(target, [])]
    return writes.StagedTable.merge(parts)


def load(graph, tables: dict[str, list[dict]], bounded_rows: int = 0, mode: str = "append"):
    staged = [stage(graph, k, rows, mode) for k, rows in tables.items()]
    return writes.commit_load(graph, "main", staged, validate=make_validator(graph, bounded_rows=bounded_rows))


def person(*names: str, email=None) -> list[dict]:
    return [{"id": n, "name": n, "email": email(n) if email else None} for n in names]


def city(*names: str) -> list[dict]:
    return [{"id": n, "name": n} for n in names]


def edges(*pairs) -> list[dict]:
    return [{"id": f"{a}>{b}", "src": a, "dst": b} for a, b in pairs]


BASE = {
    "node:Person": person(*[f"p{i:02d}" for i in range(30)], email=lambda n: f"{n}@x"),
    "node:City": city("oslo", "rome", "lima"),
    "edge:Knows": edges(("p00", "p01"), ("p02", "p03"), ("p04", "p05"), ("p04", "p06")),
    "edge:Lives": edges(("p00", "oslo"), ("p00", "rome")),
}

SCENARIOS = {
    "fresh ids": {"node:Person": person("new1", "p03", "new2", "p07", "p29", email=lambda n: f"{n}@y")},
    "repeated ids": {"node:Person": person("a1", "a2", "a1", "a3", "a2", "a1")},
    "many fresh ids": {"node:Person": person("n1", *[f"p{i:02d}" for i in range(29, 19, -1)], "n2")},
    "many repeated ids": {"node:Person": person(*[f"r{i}" for i in range(9, 0, -1)] * 2)},
    "unique email": {
        "node:Person": person("u1", "u2", "u3", "u4", "u5", "u6", email=lambda n: "same" if n in ("u2", "u5") else n)
        + person("u7", "u8", email=lambda n: "two")
    },
    "dangling, one node type": {
        "edge:Knows": edges(
            ("p10", "p11"),
            ("ghost1", "p12"),
            ("p13", "ghost2"),
            ("g3", "g4"),
            ("p14", "p15"),
            ("g5", "p16"),
            ("p17", "g6"),
        )
        + edges(*[(f"x{i}", "p20") for i in range(6)])
    },
    "dangling, two node types": {
        "edge:Lives": edges(("p10", "oslo"), ("p11", "paris"), ("nobody", "rome"), ("p12", "lima"))
    },
    "card max": {"edge:Knows": edges(("p00", "p07"), ("p04", "p08"), ("p09", "p10"), ("p09", "p11"), ("p09", "p12"))},
    "card min": {"edge:Lives": edges(("p10", "oslo"), ("p11", "rome"), ("p11", "lima"), ("p12", "rome"))},
    "edge ids repeated": {"edge:Knows": [*edges(("p20", "p21")), *edges(("p20", "p21"))]},
    "edge id committed": {"edge:Knows": edges(("p22", "p23"), ("p02", "p03"))},
    "passes": {
        "node:Person": person("ok1", "ok2", email=lambda n: f"{n}@z"),
        "edge:Knows": edges(("ok1", "p00"), ("p25", "ok2")),
        "edge:Lives": edges(("ok1", "oslo"), ("ok1", "lima"), ("ok2", "rome"), ("ok2", "lima")),
    },
}


def _outcome(graph, tables, bounded_rows: int):
    try:
        load(graph, tables, bounded_rows)
    except OmnigraphError as e:
        return type(e).__name__, str(e)
    g = Graph.open(graph.root)
    return "committed", {k: sorted(r["id"] for r in g.read_table(k).to_pylist()) for k in tables}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_I24_bounded_checks_raise_the_in_memory_checks_errors(tmp_path, monkeypatch, scenario):
    got = {}
    for way in WAYS:
        calls: list[str] = []
        graph = Graph.init(str(tmp_path / way), SCHEMA)
        load(graph, BASE)
        bounded_rows = _way(monkeypatch, way, calls)
        got[way] = _outcome(graph, SCENARIOS[scenario], bounded_rows)
        monkeypatch.undo()
        if way == "buckets":
            assert "read" in calls  # compared bucket by bucket
        if way == "probe" and scenario not in (
            "repeated ids",
            "unique email",
            "card max",
            "card min",
            "edge ids repeated",
        ):
            assert "contains" in calls  # the committed index asked
        if way == "memory":
            assert not calls
    assert got["probe"] == got["memory"]
    assert got["buckets"] == got["memory"]
    if scenario == "passes":
        assert got["memory"][0] == "committed"
    else:
        assert got["memory"][0] != "committed"


def test_I24_a_stream_sized_append_probes_the_index_and_reads_no_id_column(tmp_path, monkeypatch):
    """A few staged ids against a larger committed table: the validator asks the index and never
    reads the committed ids (the in-memory reader fails if it is called)."""
    graph = Graph.init(str(tmp_path / "g"), SCHEMA)
    load(graph, {"node:Person": person(*[f"p{i:03d}" for i in range(200)])})

    def refuse(*a, **kw):
        raise AssertionError("the committed ids were read")

    monkeypatch.setattr(validate, "_read_committed", refuse)
    load(graph, {"node:Person": person("q1", "q2"), "edge:Knows": edges(("q1", "p001"), ("p150", "q2"))})
    with pytest.raises(OmnigraphError, match=r"KEY_CONFLICT|1 id\(s\).*'p123'"):
        load(graph, {"node:Person": person("q3", "p123")})


def _table(tmp_path, n: int) -> lance.LanceDataset:
    ids = pa.array([f"id-{i:06d}" for i in range(n)])
    ds = lance.write_dataset(
        pa.table({"id": ids}), str(tmp_path / "t.lance"), max_rows_per_file=n // 4, enable_stable_row_ids=True
    )
    ds.create_scalar_index("id", "BTREE")
    return ds


def test_I24_the_index_probe_reads_pages_and_scans_what_no_segment_covers(tmp_path):
    ds = _table(tmp_path, 40_000)
    ds = lance.write_dataset(pa.table({"id": pa.array(["late-1", "late-2"])}), ds.uri, mode="append")  # not indexed
    ids = CommittedIds(ds)
    assert len(ids.segments) == 1 and ids.tail_rows == 2
    probe = pa.array(["id-000007", "id-039999", "late-2", "nope", "id-0000070", None, "id-000007"])
    assert ids.contains(probe).to_pylist() == [True, True, True, False, False, False, True]
    assert ids.last[0] == "pages" and ids.last[1] < 40_000


def test_I24_a_segment_over_deleted_rows_is_not_trusted(tmp_path):
    ds = _table(tmp_path, 40_000)
    ds.delete("id = 'id-000100'")
    ds = lance.dataset(ds.uri)
    ids = CommittedIds(ds)
    assert not ids.segments  # its fragment has a deletion file: scanned
    assert ids.contains(pa.array(["id-000100", "id-000101"])).to_pylist() == [False, True]


def test_I24_many_probes_scan_the_column_instead(tmp_path):
    ds = _table(tmp_path, 40_000)
    ids = CommittedIds(ds)
    probe = pa.array([f"id-{i:06d}" for i in range(0, 40_000, 7)])
    assert ids.contains(probe).true_count == len(probe)
    assert ids.last == ("scan", 40_000)


def test_I24_the_probe_trusts_a_segment_built_on_a_branch(tmp_path):
    """A branch's own segments live in its tree (``tree/<b>/_indices``): the probe finds and
    trusts them beside the ones the branch inherits, so a branch's table is not scanned."""
    from tests.store.helpers import write_rows

    graph = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_rows(graph, "node:Person", person("a", "b"))
    graph.create_branch("dev")
    write_rows(graph, "node:Person", person("c"), branch="dev")
    ids = CommittedIds(graph.open_table("node:Person", graph.snapshot("dev")))
    assert len(ids.segments) == 2 and ids.tail_rows == 0
    assert ids.contains(pa.array(["a", "c", "z"])).to_pylist() == [True, True, False]


# -- merges and deletes (I27) ------------------------------------------------------------------

#: the ways a merge or delete commits: in memory; bounded, the committed indexes' pages read
#: (a page costs nothing, so the pages are always read); bounded, the columns scanned a batch
#: at a time (pages cost more than the table)
COMMIT_WAYS = ("memory", "pages", "scan")


def _commit_way(monkeypatch, way: str) -> int:
    """Set the commit up for ``way``; the bounded_rows to pass."""
    monkeypatch.setattr(bounded, "BUCKET_ROWS", 3)
    monkeypatch.setattr(id_probe, "PAGE_READ_COST", 0 if way == "pages" else 10**9)
    return 0 if way == "memory" else 1


def delete_of(graph, key: str, rows: list[dict]):
    target = writes.prepare_target(graph, "main", key, "delete")
    keys = delete_keys(graph.catalog.by_table_key(key), pa.Table.from_pylist(rows))
    return writes.StagedTable(key, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys)


def with_deletes(graph, key: str, rows: list[dict], deleted: list[dict]):
    """``rows`` written by merge with ``deleted`` (keys) deleted beside them (write_graph's deletes=)."""
    s = stage(graph, key, rows, "merge")
    keys = delete_keys(graph.catalog.by_table_key(key), pa.Table.from_pylist(deleted))
    return dataclasses.replace(s, deletes=keys)


#: each: (staged tables of one commit, cascade)
COMMITS = {
    "merge nodes": (
        lambda g: [stage(g, "node:Person", person("p03", "n1", "p29", email=lambda n: f"{n}@m"), "merge")],
        False,
    ),
    "merge edges": (
        lambda g: [
            stage(
                g,
                "edge:Knows",
                [*edges(("p02", "p03"), ("p10", "p11")), {"id": "p04>p05", "src": "p04", "dst": "p09"}],
                "merge",
            )
        ],
        False,
    ),
    "merge over card max": (lambda g: [stage(g, "edge:Knows", edges(("p04", "p07"), ("p00", "p02")), "merge")], False),
    "merge moving an edge within card": (
        lambda g: [
            stage(g, "edge:Knows", [{"id": "p04>p05", "src": "p00", "dst": "p05"}, *edges(("p04", "p09"))], "merge")
        ],
        False,
    ),
    "merge below card min": (
        lambda g: [stage(g, "edge:Lives", [{"id": "p00>rome", "src": "p01", "dst": "rome"}], "merge")],
        False,
    ),
    "delete nodes, cascading": (lambda g: [delete_of(g, "node:Person", person("p04", "p01", "ghost", "p04"))], False),
    "delete nodes, cascade under card min": (lambda g: [delete_of(g, "node:City", city("rome"))], False),
    "delete nodes, cascade emptying a source": (lambda g: [delete_of(g, "node:Person", person("p00"))], False),
    "delete edges by id": (lambda g: [delete_of(g, "edge:Knows", [{"id": "p04>p05"}, {"id": "nope"}])], False),
    "delete edges by ends": (
        lambda g: [delete_of(g, "edge:Knows", [{"src": "p04", "dst": "p06"}, {"src": "p04", "dst": "p99"}])],
        False,
    ),
    "delete edges under card min": (lambda g: [delete_of(g, "edge:Lives", [{"src": "p00", "dst": "oslo"}])], False),
    "deletes beside writes": (
        lambda g: [
            with_deletes(g, "node:Person", person("p05", "n2"), person("p02", "p07")),
            stage(g, "edge:Knows", edges(("n2", "p08")), "merge"),
        ],
        False,
    ),
    "a load's edge onto a node it deletes": (
        lambda g: [delete_of(g, "node:Person", person("p08")), stage(g, "edge:Knows", edges(("p09", "p08")))],
        False,
    ),
    "overwrite orphaning edges": (
        lambda g: [stage(g, "node:Person", person(*[f"p{i:02d}" for i in range(1, 30)]), "overwrite")],
        False,
    ),
    "overwrite with cascade": (
        lambda g: [stage(g, "node:Person", person(*[f"p{i:02d}" for i in range(5, 30)], "p00"), "overwrite")],
        True,
    ),
}

REFUSED = {
    "merge over card max",
    "merge below card min",
    "delete nodes, cascade under card min",
    "delete edges under card min",
    "a load's edge onto a node it deletes",
    "overwrite orphaning edges",
}

MERGE_BASE = {
    **BASE,
    "edge:Lives": edges(
        ("p00", "oslo"), ("p00", "rome"), ("p01", "oslo"), ("p01", "lima"), ("p02", "rome"), ("p02", "lima")
    ),
}


def _commit_outcome(graph, commit, cascade: bool, bounded_rows: int):
    try:
        r = writes.commit_load(
            graph, "main", commit(graph), validate=make_validator(graph, cascade=cascade, bounded_rows=bounded_rows)
        )
    except OmnigraphError as e:
        return type(e).__name__, e.code, str(e)
    g = Graph.open(graph.root)
    done = sorted((t.table_key, t.rows_deleted, t.keys_missing, t.row_count) for t in r.tables)
    return "committed", done, {k: sorted(map(str, g.read_table(k).to_pylist())) for k in MERGE_BASE}


@pytest.mark.parametrize("case", sorted(COMMITS))
def test_I27_bounded_merges_and_deletes_commit_what_the_in_memory_path_does(tmp_path, monkeypatch, case):
    """A merge's replaced rows, a delete's keys, its cascade to edges, the load's edges onto
    deleted nodes, an overwrite's orphans, @card after a merge or a delete: bounded (the
    indexes' pages read, or the columns scanned a batch at a time, @card in buckets of three
    rows) they raise the in-memory path's error, message for message, or commit the same rows
    with the same counts."""
    commit, cascade = COMMITS[case]
    got = {}
    for way in COMMIT_WAYS:
        graph = Graph.init(str(tmp_path / way), SCHEMA)
        load(graph, MERGE_BASE)
        bounded_rows = _commit_way(monkeypatch, way)
        located: list[str] = []
        real = CommittedIds.locate

        def spy(self, *a, _real=real, _located=located, **kw):
            out = _real(self, *a, **kw)
            _located.append(self.last[0])
            return out

        monkeypatch.setattr(CommittedIds, "locate", spy)
        got[way] = _commit_outcome(graph, commit, cascade, bounded_rows)
        monkeypatch.undo()
        if way != "memory" and located:
            assert way in located, located  # found through the pages, or by scans
    assert (got["memory"][0] != "committed") == (case in REFUSED), got["memory"]
    assert got["pages"] == got["memory"]
    assert got["scan"] == got["memory"]


def _no_whole_columns(monkeypatch) -> list[str]:
    """Refuse every read of a committed id/src/dst column that is not filtered (the validator's
    in-memory reader, a dataset's or a fragment's scan); the reads allowed are returned."""
    read: list[str] = []

    real_read = validate._read_committed

    def refuse(graph, snap, key, cols):
        if snap.table(key).row_count:  # under any threshold: an empty table is read in memory
            raise AssertionError(f"{key}'s committed {cols} were read whole")
        return real_read(graph, snap, key, cols)

    monkeypatch.setattr(validate, "_read_committed", refuse)
    for cls in (lance.LanceDataset, LanceFragment):
        real = cls.scanner

        def scanner(self, *a, _real=real, **kw):
            ds = self if isinstance(self, lance.LanceDataset) else self._ds
            uri = ds.uri
            if ("/nodes/" in uri or "/edges/" in uri) and ds.count_rows():  # a graph's table, not its manifest
                cols = kw.get("columns") or (a[0] if a else None)
                if kw.get("filter") is None and set(cols or ["id"]) & {"id", "src", "dst"}:
                    raise AssertionError(f"a whole column scan of {uri}: {cols}")
                read.append(str(kw.get("filter")))
            return _real(self, *a, **kw)

        monkeypatch.setattr(cls, "scanner", scanner)
    return read


def test_I27_a_stream_sized_merge_and_delete_read_no_whole_column(tmp_path, monkeypatch):
    """A few rows merged into, and deleted from, larger committed tables (a stream's micro-batch
    on the Python source's commit): the rows replaced, the delete's ids and the edges it cascades
    to are found through the id/src/dst indexes' pages; no committed column is read whole."""
    graph = Graph.init(str(tmp_path / "g"), SCHEMA)
    n = 3000
    load(
        graph,
        {
            "node:Person": person(*[f"p{i:04d}" for i in range(n)]),
            "edge:Knows": edges(*[(f"p{i:04d}", f"p{(i * 7) % n:04d}") for i in range(n)]),
        },
    )
    monkeypatch.setattr(id_probe, "PAGE_READ_COST", 0)  # the test's tables are smaller than a page
    read = _no_whole_columns(monkeypatch)
    validator = make_validator(graph, bounded_rows=1)
    merged = writes.commit_load(
        graph,
        "main",
        [stage(graph, "node:Person", person("p0005", "p2999", "n1", email=lambda x: "m@" + x), "merge")],
        validate=validator,
    )
    assert read  # the candidates were taken with a filter
    deleted = writes.commit_load(
        graph,
        "main",
        [
            delete_of(graph, "node:Person", person("p0010", "p0020", "ghost")),
            delete_of(graph, "edge:Knows", [{"id": "p0100>p0700"}]),
        ],
        validate=validator,
    )
    monkeypatch.undo()
    assert {t.table_key: t.row_count for t in merged.tables} == {"node:Person": n + 1}  # 2 replaced, 1 new
    assert {t.table_key: (t.rows_deleted, t.keys_missing) for t in deleted.tables} == {
        "node:Person": (2, 1),
        "edge:Knows": (5, 0),  # p0010 -> p0070, p0020 -> p0140, p0430 -> p0010, p0860 -> p0020, p0100 -> p0700
    }
    g = Graph.open(graph.root)
    people_left = {r["id"]: r["email"] for r in g.read_table("node:Person").to_pylist()}
    assert len(people_left) == n + 1 - 2 and people_left["p2999"] == "m@p2999" and "p0010" not in people_left
    assert not [r for r in g.read_table("edge:Knows").to_pylist() if {r["src"], r["dst"]} & {"p0010", "p0020"}]


def test_I27_locate_finds_live_rows_through_a_lagging_index_and_deleted_rows(tmp_path):
    """The probe that finds a commit's rows: index pages give candidates, deleted rows are
    dropped, fragments the index does not cover are scanned; the same rows as Lance's filter."""
    ds = lance.write_dataset(
        pa.table({"id": pa.array([f"id-{i:06d}" for i in range(40_000)])}),
        str(tmp_path / "t.lance"),
        max_rows_per_file=10_000,
    )
    ds.create_scalar_index("id", "BTREE")
    ds.delete("id = 'id-000100'")
    ds = lance.write_dataset(pa.table({"id": pa.array(["late-1", "id-000007"])}), ds.uri, mode="append")
    ids = CommittedIds(ds)
    assert len(ids.locators) == 1 and len(ids.locate_tail) == 1 and not ids.segments
    probe = pa.array(["id-000007", "id-000100", "id-039999", "late-1", "nope", None])
    got = ids.locate(probe)
    assert ids.last[0] == "pages"
    want = ds.to_table(
        columns=["id"], with_row_address=True, filter="id IN ('id-000007', 'id-000100', 'id-039999', 'late-1')"
    )
    assert (
        got.column("id").to_pylist()
        == want.column("id").to_pylist()
        == ["id-000007", "id-039999", "late-1", "id-000007"]
    )
    assert got.column("_rowaddr").to_pylist() == want.column("_rowaddr").to_pylist()


def test_I27_a_deletion_that_misses_its_rows_refuses_the_commit(tmp_path, monkeypatch):
    """Each fragment's deletion file must delete exactly the rows found in it: a predicate Lance
    matches in no row (as ``_rowaddr`` in a table with stable row ids) refuses the commit
    instead of committing a merge that duplicates ids."""
    graph = Graph.init(str(tmp_path / "g"), SCHEMA)
    load(graph, {"node:Person": person("a", "b", "c")})
    before = graph.snapshot("main").version
    monkeypatch.setattr(LanceFragment, "delete", lambda self, predicate: self.metadata)  # deletes nothing
    with pytest.raises(OmnigraphError, match="deleting the 1 live rows found deleted 0") as e:
        writes.commit_load(graph, "main", [stage(graph, "node:Person", person("b", "d"), "merge")])
    assert e.value.code == "GRAPH_CORRUPT"  # the index named rows the table does not hold
    monkeypatch.undo()
    g = Graph.open(graph.root)
    assert g.snapshot("main").version == before
    assert sorted(r["id"] for r in g.read_table("node:Person").to_pylist()) == ["a", "b", "c"]
