"""Graph integrity across writes (I17, I18) against the real engine: graphs after our
deletes (deletion files, cascaded edge deletes under one sidecar) and after a cascading node
overwrite open clean in the engine, export exactly our rows, and answer every fixture query as
a graph the engine loaded with the same rows does; the engine then writes on top of them.
Skipped (like the whole suite) without the Omnigraph 0.7.2 binary."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import KeyConflictError
from omnigraph_spark.ingest.integrity import delete_keys
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import writes

from .helpers import QUERY_PARAMS, export_rows, read_records, recovery_audits, store_load_jsonl, without_edge_ids
from .test_engine_to_ours import check_branch
from .test_ours_to_engine import assert_engine_open_is_clean, assert_export_equals_ours, compare_queries


def _commit(graph: Graph, staged, cascade: bool = False):
    return writes.commit_load(graph, "main", staged, validate=make_validator(graph, cascade=cascade), actor="interop")


def _delete(graph: Graph, key: str, rows):
    target = writes.prepare_target(graph, "main", key, "delete")
    keys = delete_keys(graph.catalog.by_table_key(key), pa.Table.from_pylist(rows))
    return _commit(
        graph,
        [writes.StagedTable(key, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys)],
    )


def _reference(engine, fixtures_dir, tmp_path, keep) -> str:
    """The engine's own graph of the fixture records ``keep`` accepts."""
    ref = str(tmp_path / "ref")
    data = tmp_path / "ref.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in read_records(fixtures_dir / "test.jsonl") if keep(r)))
    engine.init(ref, fixtures_dir / "test.pg")
    engine.load(ref, data, "append")
    return ref


def _without(*names):
    return lambda r: (
        r.get("data", {}).get("name") not in names and r.get("from") not in names and r.get("to") not in names
    )


def test_engine_reads_our_node_delete_and_its_cascade(engine, fixtures_dir, tmp_path):  # I18
    ours = str(tmp_path / "ours")
    g = Graph.init(ours, (fixtures_dir / "test.pg").read_text())
    store_load_jsonl(g, fixtures_dir / "test.jsonl", actor="interop")
    res = _delete(g, "node:Person", [{"name": "Bob"}, {"name": "Nobody"}])
    assert {t.table_key: t.rows_deleted for t in res.tables} == {"edge:Knows": 2, "edge:WorksAt": 1, "node:Person": 1}
    assert_engine_open_is_clean(engine, ours, g)
    assert_export_equals_ours(engine, ours, g)
    ref = _reference(engine, fixtures_dir, tmp_path, _without("Bob"))
    compare_queries(engine, ours, ref, fixtures_dir / "test.gq", QUERY_PARAMS["test"])
    # the engine writes on top of our deletion files, and we read its write
    more = tmp_path / "more.jsonl"
    more.write_text(
        '{"type": "Person", "data": {"name": "Bob", "age": 52}}\n{"edge": "Knows", "from": "Bob", "to": "Alice"}\n'
    )
    engine.load(ours, more, "append")
    assert_export_equals_ours(engine, ours, g)
    assert recovery_audits(ours) == []


def test_engine_reads_our_edge_delete_by_endpoints(engine, fixtures_dir, tmp_path):  # I18
    ours = str(tmp_path / "ours")
    g = Graph.init(ours, (fixtures_dir / "test.pg").read_text())
    store_load_jsonl(g, fixtures_dir / "test.jsonl", actor="interop")
    _delete(g, "edge:Knows", [{"src": "Alice", "dst": "Charlie"}])
    assert_engine_open_is_clean(engine, ours, g)
    assert_export_equals_ours(engine, ours, g)
    ref = _reference(
        engine,
        fixtures_dir,
        tmp_path,
        lambda r: not (r.get("edge") == "Knows" and (r["from"], r["to"]) == ("Alice", "Charlie")),
    )
    compare_queries(engine, ours, ref, fixtures_dir / "test.gq", QUERY_PARAMS["test"])


def test_engine_reads_our_cascading_overwrite_and_strict_append(engine, fixtures_dir, tmp_path):  # I17, I18
    ours = str(tmp_path / "ours")
    g = Graph.init(ours, (fixtures_dir / "test.pg").read_text())
    store_load_jsonl(g, fixtures_dir / "test.jsonl", actor="interop")
    target = writes.prepare_target(g, "main", "node:Person", "overwrite")
    people = [{"id": n, "age": a, "name": n} for n, a in (("Alice", 30), ("Charlie", 35), ("Diana", 28))]
    _commit(g, [writes.stage(target, pa.Table.from_pylist(people, schema=target.schema).to_batches())], cascade=True)
    assert_engine_open_is_clean(engine, ours, g)
    assert_export_equals_ours(engine, ours, g)
    ref = _reference(engine, fixtures_dir, tmp_path, _without("Bob"))
    compare_queries(engine, ours, ref, fixtures_dir / "test.gq", QUERY_PARAMS["test"])
    # stricter than the engine: our append of a committed key is refused, the engine's is not
    target = writes.prepare_target(g, "main", "node:Person", "append")
    with pytest.raises(KeyConflictError):
        _commit(g, [writes.stage(target, pa.Table.from_pylist(people[:1], schema=target.schema).to_batches())])
    assert_engine_open_is_clean(engine, ours, g)


ENGINE_DELETES = """
query remove_person($name: String) {
    delete Person where name = $name
}

query remove_friendships($from: String) {
    delete Knows where from = $from
}
"""


def test_we_read_a_graph_the_engine_deleted_from(engine, fixtures_dir, tmp_path):  # I18
    """The engine's own deletes (its node delete cascades to every incident edge; an edge
    delete by endpoint) read back in ours row for row, with its versions and commits; our
    reads, our strict append and our own delete then work on top of its deletion files."""
    root = str(tmp_path / "eng")
    engine.init(root, fixtures_dir / "test.pg")
    engine.load(root, fixtures_dir / "test.jsonl", "append")
    mutations = tmp_path / "deletes.gq"
    mutations.write_text(ENGINE_DELETES)
    engine.run(
        "mutate", "--store", root, "--query", mutations, "remove_person", "--params", json.dumps({"name": "Bob"})
    )
    engine.run(
        "mutate", "--store", root, "--query", mutations, "remove_friendships", "--params", json.dumps({"from": "Alice"})
    )

    g = Graph.open(root)
    seen = check_branch(engine, root, g, "main")
    people = {r["name"] for r in seen["rows"]["node:Person"]}
    assert "Bob" not in people and "Alice" in people
    edges = [r for t in ("edge:Knows", "edge:WorksAt") for r in seen["rows"].get(t, [])]
    assert edges and all("Bob" not in (r["src"], r["dst"]) for r in edges)
    assert all(r["src"] != "Alice" for r in seen["rows"].get("edge:Knows", []))
    ref = _reference(
        engine,
        fixtures_dir,
        tmp_path,
        lambda r: _without("Bob")(r) and not (r.get("edge") == "Knows" and r["from"] == "Alice"),
    )
    assert without_edge_ids(export_rows(engine.export(root))) == without_edge_ids(export_rows(engine.export(ref)))

    # strict append on top of the engine's deletes: the deleted key is free, a live one is not
    target = writes.prepare_target(g, "main", "node:Person", "append")
    bob = [{"id": "Bob", "name": "Bob", "age": 41}]
    _commit(g, [writes.stage(target, pa.Table.from_pylist(bob, schema=target.schema).to_batches())])
    target = writes.prepare_target(g, "main", "node:Person", "append")
    with pytest.raises(KeyConflictError):
        _commit(g, [writes.stage(target, pa.Table.from_pylist(bob, schema=target.schema).to_batches())])
    _delete(g, "node:Person", [{"name": "Charlie"}])
    assert_engine_open_is_clean(engine, root, g)
    assert_export_equals_ours(engine, root, g)
    assert recovery_audits(root) == []
