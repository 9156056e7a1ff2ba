"""Graph integrity across writes, Spark-free: the store protocol with the driver's
load-wide validator. Strict append (I17), no dangling edge after an overwrite or a delete (I18),
deletes (deletion files, cascades)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from omnigraph_spark.errors import DanglingEdgeError, KeyConflictError
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import writes

from .helpers import people, rows_of, stage_rows


def load(graph, tables: dict[str, list[dict]], mode: str = "append", branch: str = "main", **kw):
    """One graph commit of ``tables`` (table key -> rows) through the validator."""
    staged = [stage_rows(graph, k, rows, mode, branch) for k, rows in tables.items()]
    return writes.commit_load(graph, branch, staged, validate=make_validator(graph), **kw)


def knows(*pairs):
    return [{"id": f"{a}-{b}", "src": a, "dst": b, "since": None} for a, b in pairs]


def test_append_of_a_committed_key_is_a_key_conflict_and_changes_nothing(test_graph):  # I17
    load(test_graph, {"node:Person": people("ann", "ben")})
    before = test_graph.snapshot().version
    with pytest.raises(KeyConflictError) as e:
        load(test_graph, {"node:Person": people("cy", "ben", "ann")})
    assert e.value.code == "KEY_CONFLICT"
    assert "Person" in str(e.value) and "'ann'" in str(e.value) and "'ben'" in str(e.value)
    assert e.value.context["conflicts"] == 2
    assert test_graph.snapshot().version == before
    assert [r["id"] for r in rows_of(test_graph, "node:Person")] == ["ann", "ben"]


def test_append_repeating_an_id_within_the_load_is_a_key_conflict(test_graph):  # I17
    with pytest.raises(KeyConflictError, match="more than once.*'cy'"):
        load(test_graph, {"node:Person": people("cy", "cy", "dee")})
    assert rows_of(test_graph, "node:Person") == []


def test_append_of_a_committed_edge_id_is_a_key_conflict_merge_upserts(test_graph):  # I17
    load(test_graph, {"node:Person": people("ann", "ben"), "edge:Knows": knows(("ann", "ben"))})
    with pytest.raises(KeyConflictError, match="edge Knows.*'ann-ben'"):
        load(test_graph, {"edge:Knows": knows(("ann", "ben"))})
    load(test_graph, {"edge:Knows": knows(("ann", "ben"))}, mode="merge")
    load(test_graph, {"node:Person": people("ann", age=3)}, mode="merge")
    assert len(rows_of(test_graph, "edge:Knows")) == 1
    assert rows_of(test_graph, "node:Person")[0]["age"] == 3


def test_strict_append_is_per_branch(test_graph):  # I17
    load(test_graph, {"node:Person": people("ann")})
    test_graph.create_branch("feature")
    load(test_graph, {"node:Person": people("ben")}, branch="feature")
    load(test_graph, {"node:Person": people("ben")})  # only on the branch: main may append it
    with pytest.raises(KeyConflictError, match="branch 'feature'"):
        load(test_graph, {"node:Person": people("ben")}, branch="feature")


def stage_delete(graph, key: str, rows: list[dict], branch: str = "main"):
    """A delete's StagedTable: the keys of ``rows`` (as a frame's columns would give them)."""
    from omnigraph_spark.ingest.integrity import delete_keys

    target = writes.prepare_target(graph, branch, key, "delete")
    td = graph.catalog.by_table_key(key)
    keys = delete_keys(td, pa.Table.from_pylist(rows))
    return writes.StagedTable(key, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys)


def delete(graph, tables: dict[str, list[dict]], branch: str = "main", **kw):
    staged = [stage_delete(graph, k, rows, branch) for k, rows in tables.items()]
    return writes.commit_load(graph, branch, staged, validate=make_validator(graph), **kw)


def works(*pairs):
    return [{"id": f"{a}@{b}", "src": a, "dst": b} for a, b in pairs]


def companies(*names):
    return [{"id": n, "name": n} for n in names]


def seeded(graph, branch="main"):
    load(
        graph,
        {
            "node:Person": people("ann", "ben", "cy"),
            "node:Company": companies("acme"),
            "edge:Knows": knows(("ann", "ben"), ("ben", "cy"), ("cy", "ann"), ("ann", "cy")),
            "edge:WorksAt": works(("ann", "acme"), ("ben", "acme")),
        },
        branch=branch,
    )


def ids(graph, key, branch="main"):
    return sorted(r["id"] for r in graph.read_table(key, graph.snapshot(branch)).to_pylist())


def test_node_overwrite_orphaning_edges_is_refused_naming_each_edge_type(test_graph):  # I18
    seeded(test_graph)
    before = test_graph.snapshot().version
    with pytest.raises(DanglingEdgeError) as e:
        load(test_graph, {"node:Person": people("ann", "cy")}, mode="overwrite")
    msg = str(e.value)
    assert "Knows: 2 edge(s)" in msg and "WorksAt: 1 edge(s)" in msg and "cascade" in msg
    assert test_graph.snapshot().version == before and ids(test_graph, "node:Person") == ["ann", "ben", "cy"]
    load(test_graph, {"node:Person": people("ann", "ben", "cy", "dee")}, mode="overwrite")  # orphans nothing


def test_overwriting_the_edge_types_in_the_same_commit_is_allowed(test_graph):  # I18
    seeded(test_graph)
    r = load(
        test_graph,
        {
            "node:Person": people("ann", "cy"),
            "edge:Knows": knows(("ann", "cy")),
            "edge:WorksAt": works(("ann", "acme")),
        },
        mode="overwrite",
    )
    assert len(r.tables) == 3 and ids(test_graph, "edge:Knows") == ["ann-cy"]


def test_cascade_deletes_orphaned_edges_in_the_same_commit(test_graph):  # I18
    seeded(test_graph)
    v = test_graph.snapshot().version
    staged = [stage_rows(test_graph, "node:Person", people("ann", "cy"), "overwrite")]
    r = writes.commit_load(test_graph, "main", staged, validate=make_validator(test_graph, cascade=True))
    assert test_graph.snapshot().version == v + 1  # ONE graph commit (I1)
    assert {t.table_key: t.rows_deleted for t in r.tables} == {"edge:Knows": 2, "edge:WorksAt": 1, "node:Person": 0}
    assert ids(test_graph, "edge:Knows") == ["ann-cy", "cy-ann"]
    assert ids(test_graph, "edge:WorksAt") == ["ann@acme"]
    assert test_graph.pending_sidecars() == []


def test_node_delete_cascades_to_every_incident_edge_and_counts_missing_keys(test_graph):  # I18
    seeded(test_graph)
    v = test_graph.snapshot().version
    r = delete(test_graph, {"node:Person": [{"name": "ben"}, {"name": "zed"}]})
    assert test_graph.snapshot().version == v + 1
    by = {t.table_key: t for t in r.tables}
    assert by["node:Person"].rows_deleted == 1 and by["node:Person"].keys_missing == 1
    assert by["edge:Knows"].rows_deleted == 2 and by["edge:WorksAt"].rows_deleted == 1
    assert ids(test_graph, "node:Person") == ["ann", "cy"]
    assert ids(test_graph, "edge:Knows") == ["ann-cy", "cy-ann"] and ids(test_graph, "edge:WorksAt") == ["ann@acme"]
    assert test_graph.snapshot().tables["edge:Knows"].row_count == 2


def test_edge_delete_by_id_or_by_endpoints(test_graph):  # I18
    seeded(test_graph)
    r = delete(test_graph, {"edge:Knows": [{"src": "ann", "dst": "ben"}, {"src": "ben", "dst": "ann"}]})
    assert r.tables[0].rows_deleted == 1 and r.tables[0].keys_missing == 1
    delete(test_graph, {"edge:Knows": [{"id": "cy-ann"}]})
    assert ids(test_graph, "edge:Knows") == ["ann-cy", "ben-cy"] and len(ids(test_graph, "node:Person")) == 3


def test_a_delete_matching_nothing_commits_nothing(test_graph):
    seeded(test_graph)
    v = test_graph.snapshot().version
    r = delete(test_graph, {"node:Person": [{"id": "nobody"}]})
    assert r.graph_commit_id is None and r.tables[0].keys_missing == 1
    assert test_graph.snapshot().version == v


def test_delete_uses_deletion_files_and_rewrites_no_row(test_graph):  # I18
    seeded(test_graph)
    before = {
        f.fragment_id: [d.path for d in f.metadata.files] for f in test_graph.open_table("node:Person").get_fragments()
    }
    delete(test_graph, {"node:Person": [{"name": "ben"}]})
    frags = test_graph.open_table("node:Person").get_fragments()
    assert {f.fragment_id: [d.path for d in f.metadata.files] for f in frags} == before
    assert any(f.metadata.deletion_file is not None for f in frags)


def test_deletes_on_a_branch_leave_main_alone(test_graph):  # I18
    seeded(test_graph)
    test_graph.create_branch("feature")
    delete(test_graph, {"node:Person": [{"name": "ann"}]}, branch="feature")
    assert ids(test_graph, "node:Person", "feature") == ["ben", "cy"]
    assert ids(test_graph, "edge:Knows", "feature") == ["ben-cy"]
    assert ids(test_graph, "node:Person") == ["ann", "ben", "cy"] and len(ids(test_graph, "edge:Knows")) == 4


def test_deletes_keep_card_min(tmp_path):  # I18
    from omnigraph_spark import Graph
    from omnigraph_spark.errors import CardinalityViolationError

    g = Graph.init(
        str(tmp_path / "g"),
        """
node Person {
    name: String @key
}
edge Knows: Person -> Person @card(2..3)
""",
    )
    load(
        g,
        {
            "node:Person": [{"id": n, "name": n} for n in ("a", "b", "c")],
            "edge:Knows": [
                {"id": f"{s}{d}", "src": s, "dst": d} for s, d in (("a", "b"), ("a", "c"), ("b", "a"), ("b", "c"))
            ],
        },
    )
    with pytest.raises(CardinalityViolationError, match="source 'a' has 1 edges"):
        delete(g, {"edge:Knows": [{"id": "ab"}]})
    with pytest.raises(CardinalityViolationError, match="source 'b' has 1 edges"):  # the cascade of c's delete
        delete(g, {"node:Person": [{"name": "c"}]})
    delete(g, {"edge:Knows": [{"id": "ab"}, {"id": "ac"}]})  # a keeps no edge at all: nothing to hold
    assert ids(g, "edge:Knows") == ["ba", "bc"]
