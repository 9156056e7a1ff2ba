"""I23: a load leaves every index the 0.7 engine expects in place, covering every fragment."""

from __future__ import annotations

import logging
import os

import lance
import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import indexes, writes
from omnigraph_spark.store.indexes import BTREE, INVERTED, VECTOR, IndexSpec

from .helpers import people, rows_of, write_rows

SCHEMA = """
node Doc {
    slug: String @key
    title: String @index
    kind: enum(note, page) @index
    score: I32? @index
    tags: [String]?
    embedding: Vector(4)? @index
}
edge Cites: Doc -> Doc
"""


def described(ds: lance.LanceDataset) -> dict[str, list[set]]:
    """Each index by name: the fragment ids of each of its segments."""
    return {d.name: [set(s.fragment_ids) for s in d.segments] for d in ds.describe_indices()}


def docs(*slugs: str, embedding=None) -> list[dict]:
    return [
        {"id": s, "slug": s, "title": f"notes on {s}", "kind": "note", "score": 1, "tags": None, "embedding": embedding}
        for s in slugs
    ]


def test_expected_indexes_follow_the_engines_rule(tmp_path):  # I23
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    assert indexes.expected_indexes(g.catalog.by_table_key("node:Doc")) == (
        IndexSpec("id", BTREE),
        IndexSpec("slug", INVERTED),  # free text: full-text search
        IndexSpec("embedding", VECTOR),
        IndexSpec("kind", BTREE),  # an enum is filtered by equality
        IndexSpec("score", BTREE),
        IndexSpec("title", INVERTED),
    )
    assert indexes.expected_indexes(g.catalog.by_table_key("edge:Cites")) == (
        IndexSpec("id", BTREE),
        IndexSpec("src", BTREE),
        IndexSpec("dst", BTREE),
    )


def test_a_load_creates_the_indexes_and_the_next_one_adds_a_delta(test_graph):  # I23
    r = write_rows(test_graph, "node:Person", people("alice", "bob"))
    assert r.tables[0].indexes == ("id_idx:create", "name_idx:create")
    ds = test_graph.open_table("node:Person")
    assert described(ds) == {"id_idx": [{0}], "name_idx": [{0}]}
    r = write_rows(test_graph, "node:Person", people("carol"))
    assert r.tables[0].indexes == ("id_idx:extend", "name_idx:extend")
    ds = test_graph.open_table("node:Person")
    assert described(ds) == {"id_idx": [{0}, {1}], "name_idx": [{0}, {1}]}
    # the index answers, and the engine's check (an index on the column, of its type) holds
    assert ds.to_table(full_text_query="carol", columns=["id"])["id"].to_pylist() == ["carol"]
    assert ds.to_table(filter="id = 'bob'", columns=["id"]).num_rows == 1
    assert "ScalarIndexQuery" in ds.scanner(filter="id = 'bob'").explain_plan()
    assert not indexes.plan(ds, indexes.expected_indexes(test_graph.catalog.by_table_key("node:Person")))
    # the index commit is the published version and carries the load's operation id
    tx = ds.read_transaction(test_graph.snapshot().table("node:Person").version)
    assert isinstance(tx.operation, lance.LanceOperation.CreateIndex)
    assert tx.transaction_properties["omnigraph-spark.operation_id"] == r.operation_id


def test_edges_vectors_and_a_column_without_tokens(tmp_path):  # I23
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_rows(g, "node:Doc", docs("a"))  # "a" is a stop word: its INVERTED segment holds no token
    ds = g.open_table("node:Doc")
    assert set(described(ds)) == {"id_idx", "slug_idx", "title_idx", "kind_idx", "score_idx"}  # no vector yet
    write_rows(g, "node:Doc", docs("b", embedding=[0.1, 0.2, 0.3, 0.4]))
    ds = g.open_table("node:Doc")
    assert described(ds)["embedding_idx"] == [{0, 1}]  # created over every fragment once trainable
    assert described(ds)["slug_idx"] == [{0}, {1}]
    hit = ds.to_table(nearest={"column": "embedding", "q": [0.1, 0.2, 0.3, 0.4], "k": 1}, columns=["slug"])
    assert hit["slug"].to_pylist() == ["b"]
    write_rows(g, "edge:Cites", [{"id": "c1", "src": "a", "dst": "b"}])
    assert set(described(g.open_table("edge:Cites"))) == {"id_idx", "src_idx", "dst_idx"}


def test_a_large_inverted_build_runs_in_a_child_process(test_graph, monkeypatch, caplog):  # I23
    """Where Lance's CPU pool has one thread, an INVERTED build past the inline bound runs in a
    child process whose pool has a thread more than its part builds: the same segments, the
    same answers."""
    monkeypatch.setenv("LANCE_CPU_THREADS", "1")
    monkeypatch.setattr(indexes, "INLINE_TEXT_BYTES", 0)
    with caplog.at_level(logging.INFO, logger="omnigraph_spark.store.indexes"):
        write_rows(test_graph, "node:Person", people("alice", "bob"))
    threads = indexes.child_pool(os.cpu_count() or 1, 1).lance_threads
    assert threads >= 2 and f"in a child process (Lance CPU pool of {threads} threads)" in caplog.text
    ds = test_graph.open_table("node:Person")
    assert described(ds) == {"id_idx": [{0}], "name_idx": [{0}]}
    assert ds.to_table(full_text_query="bob", columns=["id"])["id"].to_pylist() == ["bob"]

    # the child builds the parts the parent sized: the BTree in parts, the INVERTED index whole
    monkeypatch.setattr(indexes, "PART_ROWS", 1)
    caplog.clear()
    g = Graph.open(test_graph.root)
    target = writes.prepare_target(g, "main", "node:Person", "append", max_rows_per_file=1)
    rows = pa.Table.from_pylist(people("carol", "dave", "erin", "frank"), schema=target.schema)
    rows = rows.to_batches(max_chunksize=1)
    with caplog.at_level(logging.INFO, logger="omnigraph_spark.store.indexes"):
        writes.commit_load(g, "main", [writes.stage(target, rows)])
    assert ": 5 parts," in caplog.text  # four of the id BTree, one of the INVERTED index
    ds = test_graph.open_table("node:Person")
    assert described(ds) == {"id_idx": [{0}, {1, 2, 3, 4}], "name_idx": [{0}, {1, 2, 3, 4}]}
    seg = next(s for d in ds.describe_indices() if d.name == "name_idx" for s in d.segments if 4 in s.fragment_ids)
    assert "part_1_docs.lance" not in os.listdir(f"{ds.uri}/_indices/{seg.uuid}")  # one partition
    for n in ("alice", "carol", "frank"):
        assert ds.to_table(full_text_query=n, columns=["id"])["id"].to_pylist() == [n]


def test_the_child_process_is_needed_only_where_the_pool_has_one_thread(monkeypatch):
    monkeypatch.delenv("LANCE_CPU_THREADS", raising=False)
    monkeypatch.setenv("LANCE_IO_CORE_RESERVATION", "2")
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert indexes.lance_cpu_threads() == 1
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert indexes.lance_cpu_threads() == 6
    monkeypatch.setenv("LANCE_CPU_THREADS", "3")
    assert indexes.lance_cpu_threads() == 3


def test_optimize_makes_each_index_one_segment_then_compacts(test_graph):  # I23
    for n in ("a", "b", "c"):
        write_rows(test_graph, "node:Person", people(n))
    assert len(described(test_graph.open_table("node:Person"))["name_idx"]) == 3
    rep = test_graph.optimize()
    t = rep.table("node:Person")
    assert (t.fragments_before, t.fragments_after) == (3, 1)
    ds = test_graph.open_table("node:Person")
    only = {f.fragment_id for f in ds.get_fragments()}
    assert described(ds) == {"id_idx": [only], "name_idx": [only]}
    assert ds.to_table(full_text_query="b", columns=["id"])["id"].to_pylist() == ["b"]
    assert [r["id"] for r in rows_of(test_graph, "node:Person")] == ["a", "b", "c"]


@pytest.mark.parametrize("mode", ["merge", "overwrite"])
def test_merges_and_overwrites_leave_every_fragment_covered(test_graph, mode):  # I23
    write_rows(test_graph, "node:Person", people("a", "b"))
    write_rows(test_graph, "node:Person", people("b", "c", age=9), mode=mode)
    ds = test_graph.open_table("node:Person")
    frags = {f.fragment_id for f in ds.get_fragments()}
    for segments in described(ds).values():
        assert set().union(*segments) >= frags
    assert not indexes.plan(ds, indexes.expected_indexes(test_graph.catalog.by_table_key("node:Person")))


def test_a_large_build_runs_in_a_child_process_whatever_its_kind(test_graph, monkeypatch, caplog):  # I23
    """Index work over CHILD_ROWS rows runs in a child process, so its memory is never the
    driver's; the segments are the same."""
    monkeypatch.setattr(indexes, "CHILD_ROWS", 1)
    write_rows(test_graph, "node:Person", people("alice"))
    with caplog.at_level(logging.INFO, logger="omnigraph_spark.store.indexes"):
        write_rows(test_graph, "edge:Knows", [{"id": "k1", "src": "alice", "dst": "alice", "since": None}])
    assert "['id_idx', 'src_idx', 'dst_idx'] on" in caplog.text and "in a child process" in caplog.text
    assert set(described(test_graph.open_table("edge:Knows"))) == {"id_idx", "src_idx", "dst_idx"}


def test_I23_a_build_in_parts_that_lance_refuses_is_built_whole(test_graph, monkeypatch, caplog):
    """A child build in parts that fails (Lance's external sort can run out of its memory pool
    on a part that a whole build sorts) is built again whole: the load still gets every index."""
    monkeypatch.setattr(indexes, "CHILD_ROWS", 1)
    real = indexes._in_child
    tried = []

    def parts_refused(job, pool):
        tried.append(job.split)
        if job.split:
            raise indexes.StorageError("Not enough memory to continue external sort", path=job.uri)
        return real(job, pool)

    monkeypatch.setattr(indexes, "_in_child", parts_refused)
    write_rows(test_graph, "node:Person", people("alice"))
    with caplog.at_level(logging.WARNING, logger="omnigraph_spark.store.indexes"):
        write_rows(test_graph, "edge:Knows", [{"id": "k1", "src": "alice", "dst": "alice", "since": None}])
    assert tried[-2:] == [True, False]
    assert "in parts failed" in caplog.text
    assert set(described(test_graph.open_table("edge:Knows"))) == {"id_idx", "src_idx", "dst_idx"}


def test_an_index_failure_never_fails_or_repeats_the_load(test_graph, monkeypatch, caplog):  # I23
    """Indexes are derived state: a build that fails, or an index commit Lance refuses, leaves
    the load committed once at its data commit, with a warning; the next load builds them."""
    from omnigraph_spark.errors import TableDriftError
    from omnigraph_spark.store import tables, writes

    def broken(job):
        raise RuntimeError("no space left for the index")

    monkeypatch.setattr(indexes, "segments_for", broken)
    with caplog.at_level(logging.WARNING, logger="omnigraph_spark.store.writes"):
        r = write_rows(test_graph, "node:Person", people("alice"))
    assert "indexes of node:Person not built (no space left for the index)" in caplog.text
    assert (r.tables[0].to_version, r.tables[0].indexes) == (2, ())
    assert test_graph.snapshot().table("node:Person").version == 2
    monkeypatch.undo()

    real = tables.commit_operation

    def refuse_index_commits(ds, op, expected, table, props=None):
        if isinstance(op, lance.LanceOperation.CreateIndex):
            raise TableDriftError(f"commit to table '{table}' conflicted with a concurrent commit", table=table)
        return real(ds, op, expected, table, props)

    monkeypatch.setattr(writes._tables, "commit_operation", refuse_index_commits)
    with caplog.at_level(logging.WARNING, logger="omnigraph_spark.store.writes"):
        r = write_rows(test_graph, "node:Person", people("bob"))
    assert "indexes of node:Person not committed" in caplog.text
    assert r.tables[0].to_version == 3 and r.attempts == 1  # the data once, never retried
    assert [x["id"] for x in rows_of(test_graph, "node:Person")] == ["alice", "bob"]
    assert test_graph.pending_sidecars() == []
    monkeypatch.undo()

    r = write_rows(test_graph, "node:Person", people("carol"))
    assert r.tables[0].indexes == ("id_idx:create", "name_idx:create")  # over every fragment
    assert described(test_graph.open_table("node:Person"))["name_idx"] == [{0, 1, 2}]


def test_a_load_on_a_branch_puts_its_segments_in_the_branchs_tree(test_graph):  # I23
    """A segment built on a Lance branch lands under that branch's own ``tree/<b>/_indices``,
    its full-text metadata included, so the branch's index answers (and main's is untouched)."""
    write_rows(test_graph, "node:Person", people("alice", "bob"))
    test_graph.create_branch("dev")
    r = write_rows(test_graph, "node:Person", people("carol"), branch="dev")
    assert r.tables[0].indexes == ("id_idx:extend", "name_idx:extend")
    ds = test_graph.open_table("node:Person", test_graph.snapshot("dev"))
    assert described(ds) == {"id_idx": [{0}, {1}], "name_idx": [{0}, {1}]}
    assert ds.to_table(full_text_query="carol", columns=["id"])["id"].to_pylist() == ["carol"]
    assert ds.to_table(full_text_query="alice", columns=["id"])["id"].to_pylist() == ["alice"]
    base = test_graph.open_table("node:Person").uri.rstrip("/")
    own = {str(s.uuid) for d in ds.describe_indices() for s in d.segments if set(s.fragment_ids) == {1}}
    assert len(own) == 2
    for uid in own:
        assert not os.path.exists(f"{base}/_indices/{uid}"), "a branch's segment wrote into main's tree"
        assert os.listdir(f"{base}/tree/dev/_indices/{uid}")
    main = test_graph.open_table("node:Person")
    assert main.to_table(full_text_query="carol", columns=["id"]).num_rows == 0


def test_split_fragments_makes_runs_of_whole_fragments_within_the_part_rows():
    frags = [(i, 100) for i in range(10)]
    assert indexes.split_fragments(frags, 1000, 1) == [tuple(range(10))]  # fits: one part
    assert indexes.split_fragments(frags, 1000, 2) == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9)]
    assert indexes.split_fragments(frags, 300, 1) == [(0, 1), (2, 3, 4), (5, 6), (7, 8, 9)]  # 4 parts, balanced
    assert indexes.split_fragments(frags, 1000, 50) == [(i,) for i in range(10)]  # one per fragment at most
    # a fragment over part_rows is a part of its own; no part is empty, every fragment in one part
    mixed = [(3, 50), (4, 900), (7, 50), (8, 50), (9, 2000), (11, 10)]
    parts = indexes.split_fragments(mixed, 200, 1)
    assert [f for p in parts for f in p] == [3, 4, 7, 8, 9, 11] and all(parts)
    rows = dict(mixed)
    assert all(sum(rows[f] for f in p) <= 200 or len(p) == 1 for p in parts)
    assert indexes.split_fragments([], 10, 2) == []


def test_the_pools_never_run_as_many_inverted_builds_as_lance_threads():
    """Lance 7.0 deadlocks when concurrent INVERTED builds hold every thread of its CPU pool
    (store/indexes.py::BuildPool): the child's pool always has a thread more than its builds,
    and a build in the calling process runs fewer INVERTED parts than its pool's threads."""
    assert indexes.child_pool(2, 1) == indexes.BuildPool(workers=2, inverted=2, lance_threads=3, text_workers=2)
    assert indexes.child_pool(1, 1) == indexes.BuildPool(workers=1, inverted=1, lance_threads=2, text_workers=2)
    assert indexes.child_pool(64, 62) == indexes.BuildPool(workers=4, inverted=4, lance_threads=62, text_workers=62)
    assert indexes.inline_pool(2, 1) == indexes.BuildPool(workers=2, inverted=1, lance_threads=1, text_workers=1)
    assert indexes.inline_pool(8, 3) == indexes.BuildPool(workers=4, inverted=2, lance_threads=3, text_workers=3)
    for cpus in range(1, 65):
        for threads in range(1, 17):
            child = indexes.child_pool(cpus, threads)
            assert child.inverted == child.workers and child.inverted < child.lance_threads
            assert 1 <= child.workers <= indexes.MAX_PART_BUILDS
            inline = indexes.inline_pool(cpus, threads)
            assert 1 <= inline.inverted <= inline.workers
            assert inline.inverted < threads or inline.inverted == threads == 1


PARTS_SCHEMA = """
node Item {
    sku: String @key
    price: I64?
}
"""


def items(lo: int, hi: int) -> list[dict]:
    return [{"id": f"item-{i:06d}", "sku": f"sku {i % 97} item-{i:06d}", "price": i} for i in range(lo, hi)]


def load_in_fragments(g, rows: list[dict], per_fragment: int):
    from omnigraph_spark.store import writes

    target = writes.prepare_target(g, "main", "node:Item", "append", max_rows_per_file=per_fragment)
    staged = writes.stage(target, pa.Table.from_pylist(rows, schema=target.schema).to_batches(max_chunksize=257))
    return writes.commit_load(g, "main", [staged])


def answers(ds: lance.LanceDataset) -> dict:
    """What the indexes answer: full-text searches on the key, BTree lookups of ids."""
    out: dict = {}
    for q in ("sku", "5", "96", "000042", "001999", "002100", "absent"):
        t = ds.to_table(full_text_query={"query": q, "columns": ["sku"]}, columns=["id"], limit=None)
        out[f"fts:{q}"] = sorted(t["id"].to_pylist())
    for f in ("id = 'item-000042'", "id = 'item-002100'", "id IN ('item-000001', 'item-001500', 'nope')"):
        assert "ScalarIndexQuery" in ds.scanner(filter=f).explain_plan(), f
        out[f] = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
    out["range"] = ds.count_rows(filter="id >= 'item-000100' AND id < 'item-000300'")
    return out


def segment_shape(ds: lance.LanceDataset, version: int) -> list[tuple]:
    """Name, fields, index_version, index_details and fragments of each segment a version committed."""
    tx = ds.read_transaction(version)
    assert isinstance(tx.operation, lance.LanceOperation.CreateIndex)
    return sorted(
        (s.name, tuple(s.fields), s.index_version, s.index_details, tuple(sorted(s.fragment_ids)))
        for s in tx.operation.new_indices
    )


def test_I23_an_index_built_in_parts_answers_as_one_built_whole(tmp_path, monkeypatch, caplog):
    """A table whose BTree index was built in parts (runs of fragments sharing one segment
    uuid, merged once) answers id lookups, and its INVERTED index (one part: one partition)
    full-text searches, exactly as one whose indexes were built whole, its segments committed
    with the same name, fields, index_version and index_details; a load's delta is one segment
    over its fragments however many parts built it; optimize's consolidation makes one segment
    again."""
    whole, split = Graph.init(str(tmp_path / "whole"), PARTS_SCHEMA), Graph.init(str(tmp_path / "split"), PARTS_SCHEMA)
    rows, more = items(0, 2000), items(2000, 2600)

    def load(g, parts: bool, r: list[dict]):
        monkeypatch.setattr(indexes, "PART_ROWS", 450 if parts else 1 << 40)
        with caplog.at_level(logging.INFO, logger="omnigraph_spark.store.indexes"):
            caplog.clear()
            res = load_in_fragments(g, r, 200)
        return res, caplog.text

    r_whole, log_whole = load(whole, False, rows)
    r_split, log_split = load(split, True, rows)
    assert "2 parts" in log_whole and "2 parts" not in log_split  # two indexes, one part each
    assert "6 parts" in log_split, log_split  # five of the id BTree, one of the INVERTED index
    ws, ss = whole.open_table("node:Item"), split.open_table("node:Item")
    assert len(ss.get_fragments()) == 10
    assert described(ss) == described(ws) == {"id_idx": [set(range(10))], "sku_idx": [set(range(10))]}
    assert segment_shape(ss, ss.version) == segment_shape(ws, ws.version)
    seg = next(s for d in ss.describe_indices() if d.name == "sku_idx" for s in d.segments)
    files = os.listdir(f"{ss.uri}/_indices/{seg.uuid}")
    assert "part_1_docs.lance" not in files, files  # one partition (store/indexes.py says why)
    assert answers(ss) == answers(ws)
    assert answers(ss)["fts:5"] == sorted(r["id"] for r in rows if r["sku"].split()[1] == "5")

    # a delta built in parts is still one segment over the fragments it adds
    load(whole, False, more)
    load(split, True, more)
    ws, ss = whole.open_table("node:Item"), split.open_table("node:Item")
    new = set(range(10, 13))
    assert described(ss) == described(ws) == {"id_idx": [set(range(10)), new], "sku_idx": [set(range(10)), new]}
    assert segment_shape(ss, ss.version) == segment_shape(ws, ws.version)
    assert answers(ss) == answers(ws)
    assert answers(ss)["fts:002100"] == ["item-002100"] and answers(ss)["fts:000042"] == ["item-000042"]

    # optimize consolidates each index into one segment, then compacts
    for g in (whole, split):
        g.optimize()
    ws, ss = whole.open_table("node:Item"), split.open_table("node:Item")
    only = {f.fragment_id for f in ss.get_fragments()}
    assert described(ss) == {"id_idx": [only], "sku_idx": [only]}
    assert answers(ss) == answers(ws)
    assert sorted(r["id"] for r in rows_of(split, "node:Item")) == [r["id"] for r in rows + more]
