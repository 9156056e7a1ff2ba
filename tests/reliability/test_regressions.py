"""Fast regressions for bugs the reliability suite found (store level, no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import FailpointError
from omnigraph_spark.store import writes
from omnigraph_spark.store.failpoints import ENV


def _stage(g, branch, ids, mode="append"):
    t = writes.prepare_target(g, branch, "node:Person", mode)
    return writes.stage(
        t, pa.Table.from_pylist([{"id": i, "age": 1, "name": i} for i in ids], schema=t.schema).to_batches()
    )


def _crash_a_branch_load_after_its_commits(g, monkeypatch):
    """main holds "old"; a load of "crashed" on the fresh branch "feature" committed its (newly
    forked) table and died before the publish: its sidecar is pending."""
    writes.commit_load(g, "main", [_stage(g, "main", ["old"])])
    g.create_branch("feature")
    monkeypatch.setenv(ENV, "after_all_commits:raise")
    with pytest.raises(FailpointError):
        writes.commit_load(g, "feature", [_stage(g, "feature", ["crashed"])])
    monkeypatch.delenv(ENV)
    return g


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_planning_on_a_branch_keeps_a_fork_a_pending_sidecar_needs(test_graph, monkeypatch, mode):
    """I8: a branch load that committed its (freshly forked) table and died before the publish
    must roll forward. Planning the next load on that branch used to "reclaim" the fork as an
    orphan (delete + re-fork at the inherited version), destroying the committed version: the
    heal then saw no movement and the finished load was lost (found by the Spark crash matrix,
    cells ``graph-*-feature-after_all_commits``)."""
    g = _crash_a_branch_load_after_its_commits(test_graph, monkeypatch)
    assert len(g.pending_sidecars()) == 1
    nxt = _stage(g, "feature", ["next"], mode)  # planning of the next job, before its commit heals
    writes.commit_load(g, "feature", [nxt])
    g = Graph.open(g.root)
    assert g.pending_sidecars() == []
    got = sorted(r["id"] for r in g.read_table("node:Person", g.snapshot("feature")).to_pylist())
    assert got == ["crashed", "next", "old"]
    assert sorted(r["id"] for r in g.read_table("node:Person").to_pylist()) == ["old"]


def test_planning_an_overwrite_over_a_pending_fork_is_a_clean_conflict(test_graph, monkeypatch):
    """The same, for a strict overwrite planned before the heal: it may not commit on a pin that
    moved (I3) — a typed conflict, and the crashed load is still rolled forward."""
    g = _crash_a_branch_load_after_its_commits(test_graph, monkeypatch)
    nxt = _stage(g, "feature", ["next"], "overwrite")
    with pytest.raises(Exception) as e:
        writes.commit_load(g, "feature", [nxt])
    assert getattr(e.value, "code", None) == "EXPECTED_VERSION_MISMATCH", e.value
    g = Graph.open(g.root)
    assert g.pending_sidecars() == []
    got = sorted(r["id"] for r in g.read_table("node:Person", g.snapshot("feature")).to_pylist())
    assert got == ["crashed", "old"]
