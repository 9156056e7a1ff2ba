"""Idempotency tokens under crashes and replays, without Spark (what a streaming sink relies
on: docs/streaming.md). Invariants I12 (a landed token is a no-op, proven from the Lance
transactions of the versions it produced) and I19 (per app id, every version at or below the
highest applied one is a no-op, decided from one record, never from a window of history)."""

from __future__ import annotations

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import FailpointError
from omnigraph_spark.store import writes

from .helpers import people, rows_of, stage_rows, write_rows

STEPS = (
    "before_sidecar",
    "after_sidecar",
    "after_table_commit#1",
    "after_table_commit#2",
    "after_all_commits",
    "after_index_sidecar",
    "after_index_commit#1",
    "after_index_commit#2",
    "after_publish",
    "after_commit_row",
)


def load(graph, names, txn):
    """Person nodes and a Knows chain among them: one two-table load."""
    knows = [{"id": f"k-{a}", "src": a, "dst": b, "since": None} for a, b in zip(names, names[1:])]
    return writes.commit_load(
        graph,
        "main",
        [stage_rows(graph, "node:Person", people(*names)), stage_rows(graph, "edge:Knows", knows)],
        txn=txn,
    )


@pytest.mark.parametrize("step", STEPS)
def test_replay_after_a_crash_at_any_step_applies_once(test_graph, monkeypatch, step):
    """I12: a load with token (app, 1) dies at ``step``; its replay (same token, freshly staged,
    as Spark replays a micro-batch) leaves the rows exactly once, whether or not the crashed
    run had landed, including a run whose tables all committed before the manifest publish
    (the heal rolls it forward, then the token is found applied)."""
    load(test_graph, ["a0", "a1"], writes.TxnToken("stream", 0))
    monkeypatch.setenv("OMNIGRAPH_SPARK_FAILPOINT", f"{step}:raise")
    with pytest.raises(FailpointError):
        load(test_graph, ["b0", "b1", "b2"], writes.TxnToken("stream", 1))
    monkeypatch.delenv("OMNIGRAPH_SPARK_FAILPOINT")
    g = Graph.open(test_graph.root)
    load(g, ["b0", "b1", "b2"], writes.TxnToken("stream", 1))
    assert [r["id"] for r in rows_of(g, "node:Person")] == ["a0", "a1", "b0", "b1", "b2"]
    assert [r["id"] for r in rows_of(g, "edge:Knows")] == ["k-a0", "k-b0", "k-b1"]
    # the next batch applies (and its heal resolves a sidecar a skipped replay left)
    load(g, ["c0"], writes.TxnToken("stream", 2))
    assert len(rows_of(g, "node:Person")) == 6
    assert g.pending_sidecars() == []


def test_token_high_water_mark_is_one_record_not_a_window(test_graph):
    """I19: per app id, every version at or below the highest applied one is a no-op, however
    many loads (of other app ids, or none) came since: the decision reads one record and the
    Lance transactions of the versions it names, never a window of recent history."""
    write_rows(test_graph, "node:Person", people("s5"), txn=writes.TxnToken("stream-a", 5))
    for i in range(25):  # other writers, with and without tokens
        write_rows(test_graph, "node:Person", people(f"o{i:02d}"), txn=writes.TxnToken("other", i) if i % 2 else None)
    for v in (5, 3, 0):
        assert write_rows(test_graph, "node:Person", people(f"dup{v}"), txn=writes.TxnToken("stream-a", v)).skipped
    r = write_rows(test_graph, "node:Person", people("s6"), txn=writes.TxnToken("stream-a", 6))
    assert not r.skipped
    ids = [x["id"] for x in rows_of(test_graph, "node:Person")]
    assert "s6" in ids and not any(i.startswith("dup") for i in ids) and len(ids) == 27


def test_applied_token_survives_cleanup_of_its_versions(test_graph):
    """I19: once ``cleanup`` has removed the table versions a token's load produced (their
    transactions were the proof), the completed record's graph commit row still proves the
    load landed: a replay stays a no-op. A record whose load never landed proves nothing."""
    write_rows(test_graph, "node:Person", people("s0"), txn=writes.TxnToken("stream", 0))
    for i in range(3):
        write_rows(test_graph, "node:Person", people(f"o{i}"))
    test_graph.cleanup(keep_versions=1, older_than=0)
    g = Graph.open(test_graph.root)
    assert g.open_table("node:Person").versions()[0]["version"] > 2  # the token's version 2 is gone
    assert write_rows(g, "node:Person", people("s0-again"), txn=writes.TxnToken("stream", 0)).skipped
    assert [r["id"] for r in rows_of(g, "node:Person")] == ["o0", "o1", "o2", "s0"]


def test_a_record_of_a_load_that_never_landed_proves_nothing(test_graph, monkeypatch):
    """I12: the record is written before the table commits; a two-table load that dies after
    its first table commit is rolled back by the next heal, leaving a record that names
    versions that never landed and no commit id: the replay commits, once."""
    load(test_graph, ["a0", "a1"], writes.TxnToken("stream", 0))
    monkeypatch.setenv("OMNIGRAPH_SPARK_FAILPOINT", "after_table_commit#1:raise")
    with pytest.raises(FailpointError):
        load(test_graph, ["b0", "b1"], writes.TxnToken("stream", 1))
    monkeypatch.delenv("OMNIGRAPH_SPARK_FAILPOINT")
    g = Graph.open(test_graph.root)
    assert writes.already_applied(g, writes.TxnToken("stream", 1)) is None
    assert not load(g, ["b0", "b1"], writes.TxnToken("stream", 1)).skipped
    assert [r["id"] for r in rows_of(g, "node:Person")] == ["a0", "a1", "b0", "b1"]
