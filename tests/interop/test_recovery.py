"""Recovery both ways.

(a) our sidecar left by a crash after every table commit, before the publish, is rolled
    FORWARD by the engine's read-write open; (b) one left mid-commit (one of two tables
    committed) is rolled BACK; (c) the same two states left the engine's way (a table version
    committed with pylance and the sidecar JSON written by hand exactly as spec §H.1 shows —
    the release CLI has no failpoints) are resolved by our sweep. Every case is resolved on two
    byte copies of the crashed root, one by each implementation, and the results must agree;
    then the other side opens the recovered root and finds nothing left to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store.commits import new_ulid, now_us

from .helpers import (
    copy_graph,
    export_rows,
    manifest_version,
    nonempty,
    our_rows,
    pending_sidecars,
    recovery_audits,
    store_load_jsonl,
)

CRASH_WRITER = Path(__file__).resolve().parents[1] / "store" / "crash_writer.py"
PERSON, KNOWS = "nodes/40d76f1f51639ec0", "edges/602a25a3bd0b455b"


def loaded_graph(fixtures_dir, root: str) -> Graph:
    g = Graph.init(root, (fixtures_dir / "test.pg").read_text())
    store_load_jsonl(g, fixtures_dir / "test.jsonl", actor="base")
    return g


def crash_our_writer(root: str, tables: str, failpoint: str) -> None:
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT=failpoint)
    p = subprocess.run(
        [sys.executable, str(CRASH_WRITER), root, "append", "main", tables],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 137, (p.returncode, p.stdout, p.stderr[-3000:])
    assert len(pending_sidecars(root)) == 1


def twin(root: str, dst: str) -> str:
    """A byte copy of a crashed root whose sidecars name the copy's tables (a sidecar's
    ``table_path`` is a full URI)."""
    copy_graph(root, dst)
    for name in pending_sidecars(dst):
        p = os.path.join(dst, "__recovery", name)
        text = Path(p).read_text()
        Path(p).write_text(text.replace(f'"{root}/', f'"{dst}/'))
    return dst


def state(root: str) -> dict:
    """Everything recovery decides, minus fresh ids and timestamps."""
    g = Graph.open(root)
    snap = g.snapshot()
    audits = [
        {
            "kind": a["recovery_kind"],
            "for_actor": a["recovery_for_actor"],
            "op": a["operation_id"],
            "writer_kind": a["sidecar_writer_kind"],
            "outcomes": sorted(json.loads(a["per_table_outcomes_json"]), key=lambda o: o["table_key"]),
        }
        for a in recovery_audits(root)
    ]
    commits = [(c.manifest_version, c.actor_id) for c in g.log()]
    return {
        "version": snap.version,
        "tables": {k: (t.version, t.row_count) for k, t in snap.tables.items()},
        "rows": our_rows(g, snap),
        "audits": audits,
        "commits": commits,
        "sidecars": pending_sidecars(root),
    }


def engine_recovers(engine, root: str) -> dict:
    engine.snapshot(root)  # any CLI command is a read-write open: the recovery sweep runs
    return state(root)


def ours_recovers(root: str) -> dict:
    Graph.open(root).recover()
    return state(root)


def assert_clean_for_engine(engine, root: str) -> None:
    before = (manifest_version(root), len(recovery_audits(root)))
    engine.snapshot(root)
    assert (manifest_version(root), len(recovery_audits(root))) == before
    assert nonempty(our_rows(Graph.open(root))) == export_rows(engine.export(root))


def assert_clean_for_us(root: str) -> None:
    before = (manifest_version(root), len(recovery_audits(root)))
    assert Graph.open(root).recover() == []
    assert (manifest_version(root), len(recovery_audits(root))) == before


# -- (a) / (b): our crashes, resolved by the engine ----------------------------------------
def test_engine_rolls_our_crash_after_all_commits_forward(engine, fixtures_dir, tmp_path):
    root = str(tmp_path / "g")
    loaded_graph(fixtures_dir, root)
    v_before = manifest_version(root)
    pin = state(root)["tables"]["node:Person"][0]  # the load's data commit, then its index commit
    crash_our_writer(root, "person", "after_all_commits")
    op = pending_sidecars(root)[0][: -len(".json")]
    copy = twin(root, str(tmp_path / "copy"))

    got = engine_recovers(engine, root)
    assert got["sidecars"] == []
    assert got["version"] == v_before + 1
    assert got["tables"]["node:Person"] == (pin + 1, 6)
    assert sorted(r["id"] for r in got["rows"]["node:Person"]) == ["Alice", "Bob", "Charlie", "Diana", "new1", "old"]
    assert got["audits"] == [
        {
            "kind": "RolledForward",
            "for_actor": "crash-test",
            "op": op,
            "writer_kind": "Load",
            "outcomes": [{"table_key": "node:Person", "from_version": pin, "to_version": pin + 1}],
        }
    ]
    assert got["commits"][-1] == (v_before + 1, "omnigraph:recovery")

    assert ours_recovers(copy) == got  # our sweep decides exactly as the engine did
    assert_clean_for_us(root)
    assert_clean_for_engine(engine, copy)


@pytest.mark.parametrize("step", ["after_index_sidecar", "after_index_commit#1"])
def test_engine_rolls_our_crash_in_the_index_phase_forward(engine, fixtures_dir, tmp_path, step):  # I23
    """Once every data commit landed, the sidecar says EnsureIndices (Loose): a crash before or
    after the table's index commit rolls the load forward at whatever HEAD the table reached,
    in the engine as in ours."""
    root = str(tmp_path / "g")
    loaded_graph(fixtures_dir, root)
    v_before = manifest_version(root)
    pin = state(root)["tables"]["node:Person"][0]
    crash_our_writer(root, "person", step)
    op = pending_sidecars(root)[0][: -len(".json")]
    copy = twin(root, str(tmp_path / "copy"))
    head = pin + (2 if step == "after_index_commit#1" else 1)

    got = engine_recovers(engine, root)
    assert got["sidecars"] == []
    assert got["version"] == v_before + 1
    assert got["tables"]["node:Person"] == (head, 6)
    assert got["audits"] == [
        {
            "kind": "RolledForward",
            "for_actor": "crash-test",
            "op": op,
            "writer_kind": "EnsureIndices",
            "outcomes": [{"table_key": "node:Person", "from_version": pin, "to_version": head}],
        }
    ]
    assert ours_recovers(copy) == got
    assert_clean_for_us(root)
    assert_clean_for_engine(engine, copy)


def test_engine_rolls_our_crash_mid_commit_back(engine, fixtures_dir, tmp_path):
    root = str(tmp_path / "g")
    loaded_graph(fixtures_dir, root)
    before = state(root)
    crash_our_writer(root, "person+knows", "after_table_commit#1")  # edge:Knows committed, Person not
    op = pending_sidecars(root)[0][: -len(".json")]
    copy = twin(root, str(tmp_path / "copy"))

    got = engine_recovers(engine, root)
    assert got["sidecars"] == []
    assert got["rows"] == before["rows"]
    pin = before["tables"]["edge:Knows"][0]
    assert got["tables"]["edge:Knows"] == (pin + 2, 3)  # restored: a new version with the old content
    assert got["tables"]["node:Person"] == before["tables"]["node:Person"]
    assert got["audits"] == [
        {
            "kind": "RolledBack",
            "for_actor": "crash-test",
            "op": op,
            "writer_kind": "Load",
            "outcomes": [{"table_key": "edge:Knows", "from_version": pin + 1, "to_version": pin}],
        }
    ]
    assert got["commits"][-1] == (got["version"], "omnigraph:recovery")

    assert ours_recovers(copy) == got
    assert_clean_for_us(root)
    assert_clean_for_engine(engine, copy)


# -- (c): the engine's crashes (made by hand), resolved by us --------------------------------
def engine_style_sidecar(root: str, pins: list, actor: str = "engine-writer") -> str:
    """Exactly the JSON of spec §H.1 (serde pretty form, no trailing newline)."""
    op = new_ulid()
    doc = {
        "schema_version": 2,
        "operation_id": op,
        "started_at": str(now_us()),
        "branch": None,
        "actor_id": actor,
        "writer_kind": "Load",
        "tables": [
            {"table_key": k, "table_path": f"{root}/{path}", "expected_version": v, "post_commit_pin": v + 1}
            for k, path, v in pins
        ],
    }
    os.makedirs(os.path.join(root, "__recovery"), exist_ok=True)
    Path(root, "__recovery", f"{op}.json").write_text(json.dumps(doc, indent=2))
    return op


def commit_person_with_pylance(root: str) -> int:
    ds = lance.dataset(f"{root}/{PERSON}")
    tbl = pa.Table.from_pylist([{"id": "Zoe", "age": 22, "name": "Zoe"}], schema=ds.schema)
    return lance.write_dataset(tbl, f"{root}/{PERSON}", mode="append").version


def test_we_roll_an_engine_style_crash_forward(engine, fixtures_dir, tmp_path):
    root = str(tmp_path / "g")
    loaded_graph(fixtures_dir, root)
    v_before = manifest_version(root)
    pin = state(root)["tables"]["node:Person"][0]
    assert commit_person_with_pylance(root) == pin + 1
    op = engine_style_sidecar(root, [("node:Person", PERSON, pin)])
    copy = twin(root, str(tmp_path / "copy"))

    got = ours_recovers(root)
    assert got["sidecars"] == []
    assert got["version"] == v_before + 1
    assert got["tables"]["node:Person"] == (pin + 1, 5)
    assert got["audits"] == [
        {
            "kind": "RolledForward",
            "for_actor": "engine-writer",
            "op": op,
            "writer_kind": "Load",
            "outcomes": [{"table_key": "node:Person", "from_version": pin, "to_version": pin + 1}],
        }
    ]
    assert got["commits"][-1] == (v_before + 1, "omnigraph:recovery")

    assert engine_recovers(engine, copy) == got  # the engine does the same with its own sidecar
    assert_clean_for_engine(engine, root)
    assert_clean_for_us(copy)


def test_we_roll_an_engine_style_crash_back(engine, fixtures_dir, tmp_path):
    root = str(tmp_path / "g")
    loaded_graph(fixtures_dir, root)
    before = state(root)
    commit_person_with_pylance(root)  # node:Person committed; edge:Knows never was
    pin, kpin = before["tables"]["node:Person"][0], before["tables"]["edge:Knows"][0]
    op = engine_style_sidecar(root, [("edge:Knows", KNOWS, kpin), ("node:Person", PERSON, pin)])
    copy = twin(root, str(tmp_path / "copy"))

    got = ours_recovers(root)
    assert got["sidecars"] == []
    assert got["rows"] == before["rows"]
    assert got["tables"]["node:Person"] == (pin + 2, 4)
    assert got["audits"] == [
        {
            "kind": "RolledBack",
            "for_actor": "engine-writer",
            "op": op,
            "writer_kind": "Load",
            "outcomes": [{"table_key": "node:Person", "from_version": pin + 1, "to_version": pin}],
        }
    ]

    assert engine_recovers(engine, copy) == got
    assert_clean_for_engine(engine, root)
    assert_clean_for_us(copy)
