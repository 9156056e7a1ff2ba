"""Manifest publish: the CAS on expected versions and the row-level retry (I3, format.md §E)."""

from __future__ import annotations

import json
import threading

import lance
import pytest

from omnigraph_spark.errors import CorruptGraphError, ExpectedVersionMismatchError
from omnigraph_spark.store import manifest

from .helpers import people, write_rows

META = json.dumps({"manifest_path": "x", "manifest_size": None, "e_tag": None, "naming_scheme": "V2"})


def _upd(key, v, rows=0):
    return manifest.TableUpdate(key, v, None, rows, META)


def test_publish_checks_expected_first(test_graph):  # I3
    before = lance.dataset(test_graph.root + "/__manifest").version
    with pytest.raises(ExpectedVersionMismatchError) as e:
        manifest.publish(test_graph.root, "main", [_upd("node:Person", 2)], {"node:Person": 7})
    assert e.value.code == "EXPECTED_VERSION_MISMATCH" and e.value.retryable
    assert "expected manifest table version 7 but current is 1" in str(e.value)
    assert lance.dataset(test_graph.root + "/__manifest").version == before


def test_publish_absent_key_expects_zero(test_graph):
    with pytest.raises(ExpectedVersionMismatchError):
        manifest.publish(test_graph.root, "main", [], {"node:Nope": 3})
    state = manifest.publish(test_graph.root, "main", [], {"node:Nope": 0})  # a pure fence
    assert "node:Nope" not in state.entries


def test_publish_is_one_manifest_version(test_graph):
    st = manifest.publish(
        test_graph.root,
        "main",
        [_upd("node:Person", 2, 5), _upd("node:Company", 2, 1)],
        {"node:Person": 1, "node:Company": 1},
    )
    assert st.version == 4
    assert (st.entries["node:Person"].version, st.entries["node:Person"].row_count) == (2, 5)
    assert st.entries["node:Company"].version == 2


def test_publish_refuses_existing_version_row(test_graph):
    manifest.publish(test_graph.root, "main", [_upd("node:Person", 2)], {"node:Person": 1})
    with pytest.raises(ExpectedVersionMismatchError):
        manifest.publish(test_graph.root, "main", [_upd("node:Person", 2)], {})


def test_publish_refuses_unregistered_table(test_graph):
    with pytest.raises(CorruptGraphError):
        manifest.publish(test_graph.root, "main", [_upd("node:Ghost", 2)], {})


def test_concurrent_publishers_one_wins(test_graph):  # I3 under contention
    results = []

    def pub(rows):
        try:
            manifest.publish(test_graph.root, "main", [_upd("node:Person", 2, rows)], {"node:Person": 1})
            results.append("ok")
        except ExpectedVersionMismatchError:
            results.append("conflict")

    ts = [threading.Thread(target=pub, args=(i,)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sorted(results) == ["conflict"] * 3 + ["ok"]
    rows = [
        r
        for r in lance.dataset(test_graph.root + "/__manifest").to_table().to_pylist()
        if r["object_id"] == "node:Person$00000000000000000002"
    ]
    assert len(rows) == 1


def test_reduction_hides_tombstoned(test_graph):
    write_rows(test_graph, "node:Person", people("a"))
    ds = lance.dataset(test_graph.root + "/__manifest")
    tomb = manifest.rows_batch(
        [
            {
                "object_id": "node:Person$tombstone$00000000000000000003",
                "object_type": "table_tombstone",
                "table_key": "node:Person",
                "table_version": 3,
            }
        ]
    )
    ds.insert(tomb)
    st = manifest.read_state(lance.dataset(test_graph.root + "/__manifest"), "main")
    assert "node:Person" not in st.entries and st.latest_visible["node:Person"] == 3
