"""Init and open: the graph root exactly as `omnigraph init` lays it out (format.md §C.5)."""

from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import (
    AlreadyInitializedError,
    GraphNotFoundError,
    SchemaContractError,
    UnsupportedFormatError,
)

EXPECTED_DIRS = {
    "node:Person": "nodes/40d76f1f51639ec0",
    "node:Company": "nodes/7cb4e55c59663b1c",
    "edge:Knows": "edges/602a25a3bd0b455b",
    "edge:WorksAt": "edges/844eefbe5068b644",
}


def test_init_lays_out_root(test_graph, graph_uri, test_schema_text):
    root = test_graph.root
    assert open(f"{root}/_schema.pg").read() == test_schema_text
    state = json.loads(open(f"{root}/__schema_state.json").read())
    assert state == {
        "format_version": 1,
        "schema_ir_hash": "sha256:e37013207fea258e1168975dae0d8a540c99e9f0aaa47da43171bed900a51a95",
        "schema_identity_version": 1,
    }
    for rel in EXPECTED_DIRS.values():
        ds = lance.dataset(f"{root}/{rel}")
        assert ds.version == 1 and ds.count_rows() == 0
        assert ds.has_stable_row_ids
        assert ds.data_storage_version == "2.2"
        assert not [k for k in ds.config() if k.startswith("lance.auto_cleanup")]
    assert lance.dataset(f"{root}/nodes/40d76f1f51639ec0").schema == pa.schema(
        [pa.field("id", pa.string(), False), pa.field("age", pa.int32()), pa.field("name", pa.string(), False)]
    )
    assert lance.dataset(f"{root}/edges/602a25a3bd0b455b").schema.names == ["id", "src", "dst", "since"]
    assert not os.path.exists(f"{root}/__recovery")


def test_manifest_after_init(test_graph):
    ds = lance.dataset(f"{test_graph.root}/__manifest")
    assert ds.version == 3  # write, update_config, stamp
    assert ds.schema.metadata[b"omnigraph:internal_schema_version"] == b"3"
    assert ds.config().get("table_version_management") == "true"
    assert ds.schema.field("object_id").metadata == {b"lance-schema:unenforced-primary-key": b"true"}
    assert ds.schema.field("table_version").type == pa.uint64()
    rows = {r["object_id"]: r for r in ds.to_table().to_pylist()}
    for key, rel in EXPECTED_DIRS.items():
        assert rows[key]["object_type"] == "table" and rows[key]["location"] == rel
        v = rows[f"{key}$00000000000000000001"]
        assert v["object_type"] == "table_version" and v["table_version"] == 1 and v["row_count"] == 0
        assert v["table_branch"] is None
        meta = json.loads(v["metadata"])
        assert list(meta) == ["manifest_path", "manifest_size", "e_tag", "naming_scheme"]
        assert meta["manifest_path"] == f"{test_graph.root.lstrip('/')}/{rel}/_versions/18446744073709551614.manifest"
        assert meta["manifest_size"] == os.path.getsize("/" + meta["manifest_path"])
        assert meta["naming_scheme"] == "V2"
        st = os.stat("/" + meta["manifest_path"])  # interop D4: the engine records the local e_tag
        assert meta["e_tag"] == f"{st.st_ino:x}-{st.st_mtime_ns // 1000:x}-{st.st_size:x}"


def test_genesis_commit(test_graph):
    log = test_graph.log()
    assert len(log) == 1
    g = log[0]
    assert g.manifest_version == 3 and g.parent_commit_id is None and g.manifest_branch is None
    assert len(g.graph_commit_id) == 26
    assert lance.dataset(f"{test_graph.root}/_graph_commit_actors.lance").count_rows() == 0


def test_refuses_init_over_existing(test_graph, test_schema_text):
    with pytest.raises(AlreadyInitializedError) as e:
        Graph.init(test_graph.root, test_schema_text)
    assert e.value.code == "GRAPH_EXISTS"


def test_open_paths(test_graph):
    for uri in (test_graph.root, "file://" + test_graph.root, test_graph.root + "/"):
        g = Graph.open(uri)
        assert g.root == test_graph.root
        assert sorted(g.snapshot().tables) == sorted(EXPECTED_DIRS)


def test_open_missing_graph(tmp_path):
    """The error says what is wrong in the user's terms: no dependency's source paths."""
    with pytest.raises(GraphNotFoundError) as e:
        Graph.open(str(tmp_path / "nope"))
    assert e.value.code == "GRAPH_NOT_FOUND"
    assert "no __manifest dataset there" in str(e.value)
    assert ".rs:" not in str(e.value) and "/home/runner" not in str(e.value)


def test_error_messages_drop_dependency_source_locations():
    from omnigraph_spark.errors import StorageError, user_text

    lance_text = (
        "Not found: g/_versions, /home/runner/work/lance/lance/rust/lance-table/src/io/commit.rs:646:26, "
        "/home/runner/work/lance/lance/rust/lance/src/dataset/builder.rs:787:29"
    )
    assert user_text(lance_text) == "Not found: g/_versions"
    err = StorageError(f"cannot open dataset 'g': {lance_text}")
    assert str(err) == err.message == "cannot open dataset 'g': Not found: g/_versions"
    assert user_text("column 'a.rs' is fine") == "column 'a.rs' is fine"


@pytest.mark.parametrize("stamp", ["2", "4"])
def test_open_refuses_other_stamps(test_graph, stamp):
    ds = lance.dataset(f"{test_graph.root}/__manifest")
    ds.update_schema_metadata({"omnigraph:internal_schema_version": stamp})
    with pytest.raises(UnsupportedFormatError) as e:
        Graph.open(test_graph.root)
    assert e.value.code == "UNSUPPORTED_FORMAT"
    assert f"v{stamp}" in str(e.value)


def test_open_refuses_broken_schema_contract(test_graph):
    p = f"{test_graph.root}/_schema.ir.json"
    ir = json.loads(open(p).read())
    ir["nodes"][0]["name"] = "Corp"
    open(p, "w").write(json.dumps(ir, indent=2))
    with pytest.raises(SchemaContractError) as e:
        Graph.open(test_graph.root)
    assert e.value.code == "SCHEMA_CONTRACT"


def test_snapshot_entry_fields(test_graph):
    t = test_graph.snapshot().tables["node:Person"]
    assert (t.version, t.branch, t.row_count) == (1, "main", 0)
    assert t.path == f"{test_graph.root}/nodes/40d76f1f51639ec0"
