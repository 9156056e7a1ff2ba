"""Load-wide checks in bounded memory (invariant I24), Spark-free: every scenario runs through
the validator three ways on a fresh graph each: in the driver's memory, probing the committed
tables' ``id`` indexes, and bucket by bucket with buckets of three rows (so every check spans
many buckets); all three must raise the same error, message for message, or commit the same
rows. The index probe itself is checked against Lance's rows: a lagging index, deleted rows."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import OmnigraphError
from omnigraph_spark.ingest import checks
from omnigraph_spark.spark import bounded, validate
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import writes
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
