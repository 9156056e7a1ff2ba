"""Byte level: our Graph.init and `omnigraph init` produce the same graph root for every
fixture schema — schema files byte for byte, dataset names, __manifest rows and version,
dataset schemas and settings."""

from __future__ import annotations

import json
import os

import lance
import pytest

from omnigraph_spark import Graph

from .helpers import FIXTURE_NAMES, manifest_rows, table_dirs

SCHEMA_FILES = ("_schema.pg", "_schema.ir.json", "__schema_state.json")


def _init_both(engine, fixtures_dir, tmp_path, fixture):
    ours, eng = str(tmp_path / "ours"), str(tmp_path / "eng")
    Graph.init(ours, (fixtures_dir / f"{fixture}.pg").read_text())
    engine.init(eng, fixtures_dir / f"{fixture}.pg")
    return ours, eng


def _manifest_row_view(row: dict, root: str) -> dict:
    """A manifest row without what legitimately differs: the root in ``manifest_path`` and
    the manifest file size."""
    r = dict(row)
    if r["metadata"] is not None:
        md = json.loads(r["metadata"])
        assert list(md) == ["manifest_path", "manifest_size", "e_tag", "naming_scheme"]
        assert isinstance(md["manifest_size"], int) and md["manifest_size"] > 0
        md["manifest_path"] = md["manifest_path"].replace(root.lstrip("/"), "<root>")
        md["manifest_size"] = "<size>"
        # e_tag is the local store's inode-mtime-size of the manifest file: present on both
        # sides (D4), equal in shape, never in value
        assert md["e_tag"] is not None and len(md["e_tag"].split("-")) == 3
        md["e_tag"] = "<etag>"
        r["metadata"] = md
    return r


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_init_is_byte_identical(engine, fixtures_dir, tmp_path, fixture):
    ours, eng = _init_both(engine, fixtures_dir, tmp_path, fixture)
    for name in SCHEMA_FILES:
        with open(os.path.join(ours, name), "rb") as a, open(os.path.join(eng, name), "rb") as b:
            assert a.read() == b.read(), f"{name} differs from the engine's"
    assert table_dirs(ours) == table_dirs(eng)
    top_ours = sorted(e for e in os.listdir(ours))
    assert top_ours == sorted(os.listdir(eng))

    m_ours, m_eng = lance.dataset(f"{ours}/__manifest"), lance.dataset(f"{eng}/__manifest")
    assert m_ours.version == m_eng.version == 3
    assert m_ours.schema == m_eng.schema
    assert m_ours.schema.metadata == m_eng.schema.metadata
    assert [f.metadata for f in m_ours.schema] == [f.metadata for f in m_eng.schema]  # the unenforced PK
    assert m_ours.config() == m_eng.config()
    assert [_manifest_row_view(r, ours) for r in manifest_rows(ours)] == [
        _manifest_row_view(r, eng) for r in manifest_rows(eng)
    ]
    assert m_ours.data_storage_version == m_eng.data_storage_version
    assert m_ours.has_stable_row_ids == m_eng.has_stable_row_ids

    for rel in table_dirs(eng) + ["_graph_commits.lance", "_graph_commit_actors.lance"]:
        a, b = lance.dataset(f"{ours}/{rel}"), lance.dataset(f"{eng}/{rel}")
        assert a.schema == b.schema, rel
        assert a.schema.metadata == b.schema.metadata, rel
        assert [f.metadata for f in a.schema] == [f.metadata for f in b.schema], rel
        assert (a.version, a.count_rows(), a.data_storage_version, a.has_stable_row_ids, a.config()) == (
            b.version,
            b.count_rows(),
            b.data_storage_version,
            b.has_stable_row_ids,
            b.config(),
        ), rel

    genesis_ours = lance.dataset(f"{ours}/_graph_commits.lance").to_table().to_pylist()
    genesis_eng = lance.dataset(f"{eng}/_graph_commits.lance").to_table().to_pylist()

    def strip(rows):
        return [{k: v for k, v in r.items() if k not in ("graph_commit_id", "created_at")} for r in rows]

    assert (
        strip(genesis_ours)
        == strip(genesis_eng)
        == [{"manifest_branch": None, "manifest_version": 3, "parent_commit_id": None, "merged_parent_commit_id": None}]
    )


def test_engine_init_opens_with_our_contract_check(engine, fixtures_dir, tmp_path):
    """Graph.open accepts every engine-initialised root (the IR hash rule agrees)."""
    for fixture in FIXTURE_NAMES:
        root = str(tmp_path / fixture)
        engine.init(root, fixtures_dir / f"{fixture}.pg")
        g = Graph.open(root)
        assert g.snapshot().version == 3
        assert sorted(g.snapshot().tables) == sorted(
            r["table_key"] for r in manifest_rows(root) if r["object_type"] == "table"
        )
