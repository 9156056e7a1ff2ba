"""Direction 1, ours -> engine: graphs we initialise and load are opened read-write by the
real engine (its recovery sweep finds nothing to do), queried, exported, and their commits and
branches listed; everything must equal what we wrote and what the engine computes on a graph it
loaded itself from the same fixture."""
from __future__ import annotations

import re

import pytest

from omnigraph_spark import Graph

from .helpers import (FIXTURE_NAMES, QUERY_PARAMS, canon, engine_commits, engine_snapshot_tables,
                      export_rows, manifest_version, nonempty, our_commits, our_rows, pending_sidecars,
                      query_file, recovery_audits, snapshot_tables, store_load_jsonl, without_edge_ids)


def query_names(path) -> list:
    return re.findall(r"^\s*query\s+([a-z_][A-Za-z0-9_]*)\s*\(", path.read_text(), re.M)


def assert_engine_open_is_clean(engine, root: str, graph: Graph, branch: str = "main") -> dict:
    """A read-write open by the engine (``snapshot``) must find nothing to recover: same manifest
    version before and after, no audit row, no sidecar; its snapshot equals ours."""
    before = manifest_version(root)
    snap = graph.snapshot(branch)
    payload = engine.snapshot(root, branch)
    assert manifest_version(root) == before, "the engine's open moved __manifest"
    assert recovery_audits(root) == []
    assert pending_sidecars(root) == []
    assert payload["manifest_version"] == snap.version
    assert engine_snapshot_tables(payload) == snapshot_tables(snap)
    return payload


def assert_export_equals_ours(engine, root: str, graph: Graph, branch: str = "main"):
    exported = export_rows(engine.export(root, branch))
    ours = our_rows(graph, graph.snapshot(branch))
    assert exported == nonempty(ours)  # every row, ids included
    return exported


def compare_queries(engine, ours_root: str, ref_root: str, qfile, params: dict, branch=None):
    """Each query on our graph gives what it gives on the engine-loaded reference graph."""
    names = query_names(qfile)
    assert set(names) == set(params), f"params missing for {set(names) ^ set(params)}"
    failures = {}
    for name in names:
        ref = engine.query(ref_root, qfile, name, params[name], branch=branch)
        got = engine.query(ours_root, qfile, name, params[name], branch=branch, check=False)
        if not isinstance(got, dict):
            failures[name] = got.stderr.strip()[-500:]
            continue
        assert got["columns"] == ref["columns"], name
        assert got["row_count"] == ref["row_count"], name
        assert sorted(map(canon, got["rows"])) == sorted(map(canon, ref["rows"])), name
        if "order" in qfile.read_text().split(f"query {name}(")[1].split("\nquery ")[0]:
            assert got["rows"] == ref["rows"], f"{name}: same rows, different order"
    assert not failures, f"queries failed on our graph but not on the engine's: {failures}"
    return names


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_store_writer_graph_is_read_by_engine(engine, fixtures_dir, tmp_path, fixture):
    ours, ref = str(tmp_path / "ours"), str(tmp_path / "ref")
    g = Graph.init(ours, (fixtures_dir / f"{fixture}.pg").read_text())
    res = store_load_jsonl(g, fixtures_dir / f"{fixture}.jsonl", actor="interop")
    assert res.manifest_version == 4

    assert_engine_open_is_clean(engine, ours, g)
    exported = assert_export_equals_ours(engine, ours, g)

    engine.init(ref, fixtures_dir / f"{fixture}.pg")
    engine.load(ref, fixtures_dir / f"{fixture}.jsonl", "append")
    assert without_edge_ids(exported) == without_edge_ids(export_rows(engine.export(ref)))

    compare_queries(engine, ours, ref, query_file(fixtures_dir, fixture, tmp_path), QUERY_PARAMS[fixture])

    # commits: our genesis + load, with parents, versions, actors and timestamps
    assert engine_commits(engine.commits(ours)) == our_commits(g)
    assert engine_commits(engine.commits(ours, "main")) == our_commits(g)
    assert sorted(engine.branches(ours)) == sorted(g.branches())
    # still nothing recovered after all those read-write opens
    assert recovery_audits(ours) == [] and manifest_version(ours) == res.manifest_version


def test_store_writer_branch_is_read_by_engine(engine, fixtures_dir, tmp_path):
    """A branch we create and write on (lazy forks, tree/<branch> data) is the engine's branch."""
    ours = str(tmp_path / "ours")
    g = Graph.init(ours, (fixtures_dir / "test.pg").read_text())
    store_load_jsonl(g, fixtures_dir / "test.jsonl", actor="interop")
    g.create_branch("feature")
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"type": "Person", "data": {"name": "Eve", "age": 41}}\n'
                     '{"edge": "Knows", "from": "Eve", "to": "Alice", "data": {"since": "2020-02-03"}}\n')
    store_load_jsonl(g, extra, branch="feature", actor="brancher")
    merge = tmp_path / "merge.jsonl"
    merge.write_text('{"type": "Person", "data": {"name": "Bob", "age": 26}}\n')
    store_load_jsonl(g, merge, mode="merge", branch="feature")

    assert sorted(engine.branches(ours)) == sorted(g.branches()) == ["feature", "main"]
    for branch in ("main", "feature"):
        assert_engine_open_is_clean(engine, ours, g, branch)
        assert_export_equals_ours(engine, ours, g, branch)
        assert engine_commits(engine.commits(ours, branch)) == our_commits(g, branch)
    feature = export_rows(engine.export(ours, "feature"))
    assert {"id": "Bob", "age": 26, "name": "Bob"} in feature["node:Person"]
    assert any(r["src"] == "Eve" and r["since"] == 18295 for r in feature["edge:Knows"])
    got = engine.query(ours, fixtures_dir / "test.gq", "friends_of", {"name": "Eve"}, branch="feature")
    assert got["rows"] == [{"f.name": "Alice", "f.age": 30}]
    # the engine can write on top of our branch, and we read its write
    more = tmp_path / "more.jsonl"
    more.write_text('{"type": "Company", "data": {"name": "Initech"}}\n')
    engine.load(ours, more, "append", branch="feature")
    assert_export_equals_ours(engine, ours, g, "feature")
    assert_engine_open_is_clean(engine, ours, g, "feature")


@pytest.mark.spark
def test_spark_load_jsonl_graph_is_read_by_engine(engine, spark, fixtures_dir, tmp_path):
    from omnigraph_spark.spark.graph_io import load_jsonl

    ours, ref = str(tmp_path / "ours"), str(tmp_path / "ref")
    g = Graph.init(ours, (fixtures_dir / "test.pg").read_text())
    res = load_jsonl(spark, ours, str(fixtures_dir / "test.jsonl"), actor="spark-interop")
    assert res.manifest_version == 4
    assert_engine_open_is_clean(engine, ours, g)
    exported = assert_export_equals_ours(engine, ours, g)
    engine.init(ref, fixtures_dir / "test.pg")
    engine.load(ref, fixtures_dir / "test.jsonl", "append")
    assert without_edge_ids(exported) == without_edge_ids(export_rows(engine.export(ref)))
    compare_queries(engine, ours, ref, fixtures_dir / "test.gq", QUERY_PARAMS["test"])
    assert engine_commits(engine.commits(ours)) == our_commits(g)
    assert recovery_audits(ours) == []
