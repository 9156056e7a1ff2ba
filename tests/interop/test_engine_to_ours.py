"""Direction 2, engine -> ours: graphs the engine initialises and loads (append, merge,
overwrite; on main and on a branch) are read by our Graph.open/snapshot/read_table and by
Spark; every row, version, commit and branch must equal the engine's own view."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from omnigraph_spark import Graph

from .helpers import (
    FIXTURE_NAMES,
    engine_commits,
    engine_snapshot_tables,
    export_rows,
    nonempty,
    our_commits,
    our_rows,
    recovery_audits,
    snapshot_tables,
    store_load_jsonl,
)

MERGE = """{"type": "Person", "data": {"name": "Alice", "age": 31}}
{"type": "Person", "data": {"name": "Eve"}}
{"edge": "Knows", "from": "Eve", "to": "Alice", "data": {"since": "2021-06-01"}}
"""
OVERWRITE_COMPANY = """{"type": "Company", "data": {"name": "Initech"}}
{"type": "Company", "data": {"name": "Umbrella"}}
"""
BRANCH_APPEND = """{"type": "Person", "data": {"name": "Frank", "age": 50}}
{"edge": "WorksAt", "from": "Frank", "to": "Globex"}
"""
# after OVERWRITE_COMPANY, Globex is gone: the engine refuses an edge to it (dangling endpoint)
BRANCH_APPEND_AFTER_OVERWRITE = BRANCH_APPEND.replace("Globex", "Initech")
BRANCH_MERGE = """{"type": "Person", "data": {"name": "Bob", "age": 99}}
{"type": "Company", "data": {"name": "Hooli"}}
"""
BRANCH_OVERWRITE = """{"type": "Person", "data": {"name": "Zed", "age": 1}}
{"type": "Person", "data": {"name": "Alice", "age": 2}}
"""


def check_branch(engine, root: str, g: Graph, branch: str) -> dict:
    """Our view of ``branch`` == the engine's: snapshot, every row, commits."""
    payload = engine.snapshot(root, branch)
    snap = g.snapshot(branch)
    assert snap.version == payload["manifest_version"]
    assert snapshot_tables(snap) == engine_snapshot_tables(payload)
    exported = export_rows(engine.export(root, branch))
    assert nonempty(our_rows(g, snap)) == exported
    assert our_commits(g, branch) == engine_commits(engine.commits(root, branch))
    return {"version": snap.version, "rows": exported}


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_engine_loaded_fixture_reads_back(engine, fixtures_dir, tmp_path, fixture):
    root = str(tmp_path / "eng")
    engine.init(root, fixtures_dir / f"{fixture}.pg")
    out = engine.load(root, fixtures_dir / f"{fixture}.jsonl", "append")
    assert out["branch"] == "main"
    g = Graph.open(root)
    seen = check_branch(engine, root, g, "main")
    assert sum(len(v) for v in seen["rows"].values()) == sum(
        1 for line in (fixtures_dir / f"{fixture}.jsonl").read_text().splitlines() if line.strip()
    )
    assert g.branches() == sorted(engine.branches(root)) == ["main"]

    # the engine's export is valid input for our JSONL path: reloading it into a fresh graph of
    # ours reproduces every row, edge ids included (D3: the export's value encoding)
    dump = tmp_path / "export.jsonl"
    dump.write_text(engine.run("export", root).stdout)
    again = Graph.init(str(tmp_path / "again"), (fixtures_dir / f"{fixture}.pg").read_text())
    store_load_jsonl(again, dump)
    assert nonempty(our_rows(again)) == seen["rows"]


def test_engine_modes_and_branches_read_back(engine, fixtures_dir, tmp_path):
    root = str(tmp_path / "eng")
    engine.init(root, fixtures_dir / "test.pg")
    g = Graph.open(root)
    history = {"main": [check_branch(engine, root, g, "main")]}

    def data(name, text):
        p = tmp_path / f"{name}.jsonl"
        p.write_text(text)
        return p

    engine.load(root, fixtures_dir / "test.jsonl", "append")
    history["main"].append(check_branch(engine, root, g, "main"))
    engine.load(root, data("merge", MERGE), "merge")
    history["main"].append(check_branch(engine, root, g, "main"))
    person = {r["id"]: r for r in history["main"][-1]["rows"]["node:Person"]}
    assert person["Alice"]["age"] == 31 and person["Eve"]["age"] is None
    engine.load(root, data("ow", OVERWRITE_COMPANY), "overwrite")
    history["main"].append(check_branch(engine, root, g, "main"))
    assert sorted(r["id"] for r in history["main"][-1]["rows"]["node:Company"]) == ["Initech", "Umbrella"]

    # a branch forked by the load itself (--from), then merge and overwrite on it
    out = engine.load(root, data("ba", BRANCH_APPEND_AFTER_OVERWRITE), "append", branch="feature", from_branch="main")
    assert out["branch_created"] is True
    history["feature"] = [check_branch(engine, root, g, "feature")]
    engine.load(root, data("bm", BRANCH_MERGE), "merge", branch="feature")
    history["feature"].append(check_branch(engine, root, g, "feature"))
    engine.load(root, data("bo", BRANCH_OVERWRITE), "overwrite", branch="feature")
    history["feature"].append(check_branch(engine, root, g, "feature"))
    assert sorted(r["id"] for r in history["feature"][-1]["rows"]["node:Person"]) == ["Alice", "Zed"]
    # a second branch made by `branch create`, written once
    engine.create_branch(root, "exp/one", from_branch="feature")
    engine.load(root, data("x", '{"type": "Company", "data": {"name": "Exp"}}\n'), "append", branch="exp/one")
    history["exp/one"] = [check_branch(engine, root, g, "exp/one")]

    assert sorted(g.branches()) == sorted(engine.branches(root)) == ["exp/one", "feature", "main"]
    # main is untouched by the branch writes
    assert check_branch(engine, root, g, "main") == history["main"][-1]
    # time travel: every version we saw, by manifest version and by commit id
    for branch, seen in history.items():
        by_version = {c.manifest_version: c for c in g.log(branch)}
        for h in seen:
            if h["version"] not in by_version:
                continue  # a version of the parent branch before the fork
            snap = g.snapshot(branch, version=h["version"])
            assert nonempty(our_rows(g, snap)) == h["rows"], (branch, h["version"])
            snap = g.snapshot(commit=by_version[h["version"]].graph_commit_id)
            assert nonempty(our_rows(g, snap)) == h["rows"]
    assert recovery_audits(root) == []


@pytest.mark.spark
def test_engine_graph_read_through_spark(engine, spark, fixtures_dir, tmp_path):
    root = str(tmp_path / "eng")
    engine.init(root, fixtures_dir / "test.pg")
    engine.load(root, fixtures_dir / "test.jsonl", "append")
    p = tmp_path / "b.jsonl"
    p.write_text(BRANCH_APPEND)
    engine.load(root, p, "append", branch="feature", from_branch="main")
    exported = {b: export_rows(engine.export(root, b)) for b in ("main", "feature")}
    from omnigraph_spark import read_table
    from omnigraph_spark.spark.jvm_read import shim_loaded

    readers = {
        "python source": lambda t, b: spark.read.format("omnigraph").option("type", t).option("branch", b).load(root)
    }
    if shim_loaded(spark):  # the JVM read path (Lance Java SDK) on engine-written tables and branches
        readers["jvm path"] = lambda t, b: read_table(spark, root, t, branch=b, engine="jvm")
    assert "jvm path" in readers or not os.environ.get("OMNIGRAPH_SPARK_REQUIRE_SHIM")
    for how, read in readers.items():
        for branch in ("main", "feature"):
            for type_name, key in (("Person", "node:Person"), ("Knows", "edge:Knows"), ("WorksAt", "edge:WorksAt")):
                rows = [r.asDict() for r in read(type_name, branch).collect()]
                for r in rows:
                    if r.get("since") is not None:
                        r["since"] = (r["since"] - dt.date(1970, 1, 1)).days
                assert sorted(rows, key=lambda r: r["id"]) == sorted(exported[branch][key], key=lambda r: r["id"]), (
                    how,
                    branch,
                    type_name,
                )
