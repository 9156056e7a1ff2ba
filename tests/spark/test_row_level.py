"""The commit of a SQL UPDATE / MERGE without Spark (:mod:`omnigraph_spark.spark.row_level`): the
checks against the scanned snapshot, on both ways the `id` index probe finds committed rows
(its pages, a scan of the column a batch at a time), and the load it hands to the commit. tests/spark/test_sql.py
runs the statements end to end."""

from __future__ import annotations

import pytest

from omnigraph_spark.errors import KeyChangeError, KeyConflictError
from omnigraph_spark.spark import row_level
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import id_probe, writes
from tests.store.helpers import people, rows_of, stage_rows, write_rows


@pytest.fixture(params=["pages", "scan"])
def lookup(request, monkeypatch):
    monkeypatch.setattr(id_probe, "PAGE_READ_COST", 0 if request.param == "pages" else 10**9)
    return request.param


def _pin(graph):
    td = graph.catalog.resolve("Person")
    pin = row_level.pin(graph, td, "main")
    return td, pin


def test_an_update_and_a_delete_are_one_strict_load(test_graph, lookup):
    write_rows(test_graph, "node:Person", people("a", "b", "c", age=1))
    td, pin = _pin(test_graph)
    target = writes.prepare_target(test_graph, "main", "node:Person", "merge")
    got = [stage_rows(test_graph, "node:Person", people("a", age=2) + people("d", age=4), mode="merge")]
    rl = row_level.RowLevel("MERGE", pin["version"], pin["table_version"], ("a",), ("c",))
    load = row_level.staged(test_graph, td, target, got, rl)
    assert all(s.strict_base and s.base_version == pin["table_version"] for s in load)
    assert load[-1].deletes.column("id").to_pylist() == ["c"]
    writes.commit_load(test_graph, "main", load, validate=make_validator(test_graph))
    assert rows_of(test_graph, "node:Person") == people("a", age=2) + people("b", age=1) + people("d", age=4)


def test_an_inserted_id_already_committed_is_a_key_conflict(test_graph, lookup):
    write_rows(test_graph, "node:Person", people("a", "b", age=1))
    td, pin = _pin(test_graph)
    target = writes.prepare_target(test_graph, "main", "node:Person", "merge")
    got = [stage_rows(test_graph, "node:Person", people("a", "b", "z", age=2), mode="merge")]
    rl = row_level.RowLevel("MERGE", pin["version"], pin["table_version"], ("a",), ())
    with pytest.raises(KeyConflictError) as e:  # b is inserted (not an updated id) and committed
        row_level.staged(test_graph, td, target, got, rl)
    assert "'b'" in str(e.value) and "'a'" not in str(e.value)


def test_an_updated_edge_keeps_its_ends_and_a_refused_row_is_key_change(test_graph, lookup):
    write_rows(test_graph, "node:Person", people("a", "b", "c", age=1))
    write_rows(test_graph, "edge:Knows", [{"id": "e1", "src": "a", "dst": "b"}])
    td = test_graph.catalog.resolve("Knows")
    pin = row_level.pin(test_graph, td, "main")
    target = writes.prepare_target(test_graph, "main", "edge:Knows", "merge")
    got = [stage_rows(test_graph, "edge:Knows", [{"id": "e1", "src": "a", "dst": "c"}], mode="merge")]
    rl = row_level.RowLevel("UPDATE", pin["version"], pin["table_version"], ("e1",), ())
    with pytest.raises(KeyChangeError) as e:
        row_level.staged(test_graph, td, target, got, rl)
    assert e.value.code == "KEY_CHANGE" and "'dst'" in str(e.value) and "'b'" in str(e.value)
    same = [stage_rows(test_graph, "edge:Knows", [{"id": "e1", "src": "a", "dst": "b"}], mode="merge")]
    assert row_level.staged(test_graph, td, target, same, rl)
    refused = row_level.RowLevel(
        "UPDATE", pin["version"], pin["table_version"], (), (), {"column": "id", "id": "e1", "value": "e2"}
    )
    with pytest.raises(KeyChangeError) as e:
        row_level.staged(test_graph, td, target, same, refused)
    assert "'id'" in str(e.value) and "'e2'" in str(e.value)
