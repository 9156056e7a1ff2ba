"""write_graph and load_jsonl: several types (or JSONL files) as ONE graph commit."""

from __future__ import annotations

import os

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import DanglingEdgeError, InvalidRecordError, TypeMismatchError
from omnigraph_spark.spark.graph_io import load_jsonl, write_graph

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]

PEOPLE = [
    {"id": "Alice", "age": 30, "name": "Alice"},
    {"id": "Bob", "age": 25, "name": "Bob"},
    {"id": "Charlie", "age": 35, "name": "Charlie"},
    {"id": "Diana", "age": 28, "name": "Diana"},
]
COMPANIES = [{"id": "Acme", "name": "Acme"}, {"id": "Globex", "name": "Globex"}]
KNOWS = [("Alice", "Bob", None), ("Alice", "Charlie", None), ("Bob", "Diana", None)]
WORKS = [("Alice", "Acme"), ("Bob", "Globex")]


def rows(g, key, branch="main", cols=None):
    t = g.read_table(key, g.snapshot(branch))
    out = t.to_pylist()
    if cols:
        out = [{c: r[c] for c in cols} for r in out]
    return sorted(out, key=lambda r: tuple(str(v) for v in r.values()))


def staged_files(uri: str) -> int:
    return sum(
        len([f for f in fs if f.endswith(".lance")])
        for top in ("nodes", "edges")
        for d, _, fs in os.walk(os.path.join(uri, top))
        if d.endswith("/data")
    )


def assert_test_fixture(g, branch="main"):
    assert rows(g, "node:Person", branch) == sorted(PEOPLE, key=lambda r: tuple(str(v) for v in r.values()))
    assert rows(g, "node:Company", branch) == COMPANIES
    assert rows(g, "edge:Knows", branch, ["src", "dst", "since"]) == [
        {"src": s, "dst": d, "since": x} for s, d, x in KNOWS
    ]
    assert rows(g, "edge:WorksAt", branch, ["src", "dst"]) == [{"src": s, "dst": d} for s, d in WORKS]


def test_load_jsonl_test_fixture_one_commit(spark, test_graph, fixtures_dir):
    uri = test_graph.root
    before = len(Graph.open(uri).log())
    res = load_jsonl(spark, uri, str(fixtures_dir / "test.jsonl"), actor="loader")
    g = Graph.open(uri)
    assert_test_fixture(g)
    log = g.log()
    assert len(log) == before + 1
    assert log[-1].graph_commit_id == res.graph_commit_id and log[-1].actor_id == "loader"
    assert log[-1].parent_commit_id == log[-2].graph_commit_id
    snap = g.snapshot()
    assert {k: t.version for k, t in snap.tables.items()} == {  # data at 2, the engine's indexes at 3 (I23)
        "node:Person": 3,
        "node:Company": 3,
        "edge:Knows": 3,
        "edge:WorksAt": 3,
    }
    assert not os.path.exists(os.path.join(uri, "_spark", "staging")) or not any(
        fs for _, _, fs in os.walk(os.path.join(uri, "_spark", "staging"))
    )


def test_write_graph_test_fixture_one_commit_and_branch(spark, test_graph):
    uri = test_graph.root
    frames = {
        "Person": spark.createDataFrame([(p["name"], p["age"]) for p in PEOPLE], "name string, age int"),
        "Company": spark.createDataFrame([(c["name"],) for c in COMPANIES], "name string"),
        "knows": spark.createDataFrame(KNOWS, "`from` string, `to` string, since date"),
        "WorksAt": spark.createDataFrame(WORKS, "src string, dst string"),
    }
    res = write_graph(uri, frames, actor="etl")
    g = Graph.open(uri)
    assert_test_fixture(g)
    assert len(g.log()) == 2 and g.log()[-1].graph_commit_id == res.graph_commit_id
    # a branch: merge one person (whole-row replace), main untouched
    g.create_branch("feature")
    res2 = write_graph(
        uri, {"Person": spark.createDataFrame([("Bob", 26)], "name string, age int")}, mode="merge", branch="feature"
    )
    g = Graph.open(uri)
    assert {r["name"]: r["age"] for r in rows(g, "node:Person", "feature")}["Bob"] == 26
    assert {r["name"]: r["age"] for r in rows(g, "node:Person")}["Bob"] == 25
    assert g.snapshot("feature").tables["node:Person"].branch == "feature"
    assert g.log("feature")[-1].graph_commit_id == res2.graph_commit_id


def test_write_graph_dangling_edge_leaves_graph_unchanged(spark, test_graph):
    uri = test_graph.root
    v0 = test_graph.snapshot().version
    files0 = staged_files(uri)
    frames = {
        "Person": spark.createDataFrame([("Alice", 1)], "name string, age int"),
        "Knows": spark.createDataFrame([("Alice", "Nobody")], "`from` string, `to` string"),
    }
    with pytest.raises(DanglingEdgeError) as ei:
        write_graph(uri, frames)
    assert ei.value.code == "DANGLING_EDGE" and "Nobody" in str(ei.value)
    g = Graph.open(uri)
    assert g.snapshot().version == v0 and g.read_table("node:Person").num_rows == 0
    assert staged_files(uri) == files0
    # a bad value fails in a task: typed error comes back, nothing staged survives
    with pytest.raises(TypeMismatchError):
        write_graph(uri, {"Person": spark.createDataFrame([("Zed", "old")], "name string, age string")})
    assert staged_files(uri) == files0 and Graph.open(uri).snapshot().version == v0


def test_load_jsonl_errors_name_file_and_line(spark, test_graph, tmp_path):
    uri = test_graph.root
    bad = tmp_path / "in" / "bad.jsonl"
    bad.parent.mkdir()
    bad.write_text(
        '{"type": "Person", "data": {"name": "A", "age": 1}}\n\n{"type": "Person", "data": {"name": "B", "age": "x"}}\n'
    )
    with pytest.raises(TypeMismatchError) as ei:
        load_jsonl(spark, uri, str(bad))
    assert "bad.jsonl:3 (record 2)" in str(ei.value)
    bad.write_text('{"type": "Person", "data": {"name": "A"}}\n{"type": \n')
    with pytest.raises(InvalidRecordError) as ei:
        load_jsonl(spark, uri, str(bad))
    assert "bad.jsonl:2 (record 2)" in str(ei.value)
    assert Graph.open(uri).snapshot().version == test_graph.snapshot().version


def _jsonl_rows(path):
    import json

    return [json.loads(line) for line in open(path) if line.strip()]


@pytest.mark.parametrize("name", ["search", "signals"])
def test_load_jsonl_other_fixtures(spark, tmp_path, fixtures_dir, name):
    import datetime as dt

    uri = str(tmp_path / name)
    g = Graph.init(uri, (fixtures_dir / f"{name}.pg").read_text())
    load_jsonl(spark, uri, str(fixtures_dir / f"{name}.jsonl"))
    g = Graph.open(uri)
    assert len(g.log()) == 2
    recs = _jsonl_rows(fixtures_dir / f"{name}.jsonl")
    for td in g.catalog.types():
        expected = [r for r in recs if r.get("type") == td.name or r.get("edge") == td.name]
        got = g.read_table(td.table_key).to_pylist()
        assert len(got) == len(expected), td.table_key
        if td.is_edge:
            assert sorted((r["src"], r["dst"]) for r in got) == sorted((r["from"], r["to"]) for r in expected)
            continue
        by_id = {r["id"]: r for r in got}
        for r in expected:
            row = by_id[r["data"][td.key_property]]
            for k, v in r["data"].items():
                if isinstance(row[k], dt.date):
                    v = dt.date.fromisoformat(v)
                elif isinstance(v, list):
                    v = pytest.approx(v)
                assert row[k] == v, (td.name, k)


def test_load_jsonl_on_branch_forks_only_touched_tables(spark, test_graph, tmp_path):
    uri = test_graph.root
    src = tmp_path / "people.jsonl"
    src.write_text(
        '{"type": "Person", "data": {"name": "Ann", "age": 3}}\n'
        '{\n  "type": "Company",\n  "data": {"name": "Initech"}\n}\n'
    )
    test_graph.create_branch("etl")
    load_jsonl(spark, uri, str(src), branch="etl", mode="overwrite")
    g = Graph.open(uri)
    snap = g.snapshot("etl")
    assert snap.tables["node:Person"].branch == "etl" and snap.tables["edge:Knows"].branch == "main"
    assert [r["id"] for r in g.read_table("node:Company", snap).to_pylist()] == ["Initech"]
    assert g.read_table("node:Person").num_rows == 0  # main untouched
    assert g.log("etl")[-1].manifest_branch == "etl"
