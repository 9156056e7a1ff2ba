"""I23: a load leaves every index the 0.7 engine expects in place, covering every fragment."""

from __future__ import annotations

import logging
import os

import lance
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import indexes
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
