"""Quarantine (option rejectedRowsPath) under the crash matrix (invariant I20).

A load of node:Person + edge:Knows with one rejected row per table is killed (os._exit via a
failpoint) at every step of the commit protocol and of the quarantine's publish. Then the graph
is recovered (``graph.recover()``) and the quarantine settled (``recover_quarantine``, also run
by ``cleanup(rejected_rows_path=...)``), and for every cell:

* the load is visible (all its valid rows) and ``load=<id>/_SUCCESS`` exists with exactly the
  used attempts' rejected rows (good + rejected = input), and nothing of it is left in
  ``_staging``; or
* nothing of the load is visible and neither a ``load=<id>/`` nor a ``_staging/<id>/`` remains.

Before the settling step: a ``load=<id>/`` never has ``_SUCCESS`` for a load that is not visible.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import tables
from omnigraph_spark.store.quarantine import recover_quarantine

from .helpers import people, rows_of, write_rows

WRITER = str(Path(__file__).with_name("quarantine_crash_writer.py"))
# step -> is the load visible after recovery? (two tables: one committed of two rolls back)
STEPS = {
    "before_sidecar": False,
    "after_sidecar": False,
    "after_table_commit#1": False,
    "after_all_commits": True,
    "after_publish": True,
    "after_commit_row": True,
    "before_sidecar_delete": True,
    "before_quarantine_publish": True,
    "after_quarantine_move": True,
    None: True,  # no crash
}
GOOD = {"node:Person": ["new1", "new2"], "edge:Knows": ["k-new"]}
BAD = {"node_Person": ["bad1"], "edge_Knows": ["k-bad"]}


def _ids(g, key):
    return sorted(r["id"] for r in rows_of(g, key, g.snapshot()))


@pytest.mark.slow  # one subprocess per cell, ~8 s each; test_cleanup_settles_quarantine is the default cell
@pytest.mark.parametrize("step", list(STEPS), ids=lambda s: s or "no_crash")
def test_quarantine_crash_matrix(test_graph, tmp_path, step):
    g = test_graph
    write_rows(g, "node:Person", people("old", age=1))
    qpath = str(tmp_path / "rejected")
    env = dict(os.environ)
    env.pop("OMNIGRAPH_SPARK_FAILPOINT", None)
    if step is not None:
        env["OMNIGRAPH_SPARK_FAILPOINT"] = step
    p = subprocess.run([sys.executable, WRITER, g.root, qpath], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == (0 if step is None else 137), p.stderr[-3000:]
    load_id = p.stdout.split()[0]
    final, staging = os.path.join(qpath, f"load={load_id}"), os.path.join(qpath, "_staging", load_id)
    success = os.path.join(final, "_SUCCESS")

    g = Graph.open(g.root)
    if os.path.exists(success):  # complete before any recovery: only for a published load
        assert _ids(g, "node:Person") == ["new1", "new2", "old"]
    g.recover()
    assert g.pending_sidecars() == []
    visible = STEPS[step]
    if os.path.exists(success):
        assert visible
    settled = recover_quarantine(g, qpath, stale_after_s=0.0)
    assert settled["left"] == 0, settled
    if visible:
        assert _ids(g, "node:Person") == ["new1", "new2", "old"]
        assert _ids(g, "edge:Knows") == ["k-new"]
        assert os.path.exists(success) and not os.path.exists(staging)
        assert not os.path.exists(os.path.join(final, "_PENDING.json"))
        got = {t: sorted(r["id"] for r in pq.read_table(os.path.join(final, t)).to_pylist()) for t in BAD}
        assert got == BAD  # exactly the used attempt's rows: good + rejected = input
        for key, good in GOOD.items():  # the commit records where its rejected rows are
            t = g.snapshot().table(key)
            ds = tables.open_dataset(t.base_path)
            assert (
                tables.transaction_property(ds, t.version, "omnigraph-spark.rejected_rows_at")
                == f"{qpath}/load={load_id}"
            )
            assert t.row_count == len(good) + (1 if key == "node:Person" else 0)
    else:
        assert _ids(g, "node:Person") == ["old"]
        assert _ids(g, "edge:Knows") == []
        assert not os.path.exists(final) and not os.path.exists(staging)
    assert recover_quarantine(g, qpath) == {"published": 0, "deleted": 0, "left": 0}  # settled once
    write_rows(g, "node:Person", people("next"))  # the graph takes the next write


def test_cleanup_settles_quarantine(test_graph, tmp_path):
    """``cleanup --rejected-rows-path`` (``cleanup(rejected_rows_path=...)``) finishes the
    quarantine of a load killed between its commit and its publish, and leaves a recent
    ``_staging`` dir of a load still staging."""
    g = test_graph
    qpath = str(tmp_path / "rejected")
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT="before_quarantine_publish")
    p = subprocess.run([sys.executable, WRITER, g.root, qpath], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 137, p.stderr[-3000:]
    load_id = p.stdout.split()[0]
    staging_other = os.path.join(qpath, "_staging", "f" * 32, "node_Person")
    os.makedirs(staging_other)
    Path(staging_other, "part-p0-a0-x.parquet").write_bytes(b"")
    from tests.cli.helpers import cli

    r = cli("cleanup", g.root, "--keep-versions", "1", "--rejected-rows-path", qpath)
    assert r.code == 0, r.err
    assert os.path.exists(os.path.join(qpath, f"load={load_id}", "_SUCCESS"))
    assert os.path.exists(staging_other)  # no _PENDING.json and recent: may still be staging
    assert _ids(Graph.open(g.root), "node:Person") == ["new1", "new2"]


@pytest.mark.parametrize("step", ["after_publish", "after_table_commit#1"])
def test_a_failed_commit_keeps_the_quarantine_while_the_load_may_land(test_graph, tmp_path, step):
    """An error (not a crash) after the sidecar leaves it pending: the quarantine stays in
    ``_staging`` until recovery tells whether the load landed (after the publish: it did, and
    recover_quarantine publishes it; after one table of two: rolled back, deleted)."""
    g = test_graph
    qpath = str(tmp_path / "rejected")
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT=f"{step}:raise")
    p = subprocess.run([sys.executable, WRITER, g.root, qpath], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "FAILPOINT" in p.stderr, p.stderr[-3000:]
    load_id = p.stdout.split()[0]
    staging = os.path.join(qpath, "_staging", load_id)
    assert os.path.exists(os.path.join(staging, "_PENDING.json"))
    g = Graph.open(g.root)
    assert recover_quarantine(g, qpath)["left"] == 1  # a sidecar is pending: undecided
    g.recover()
    landed = step == "after_publish"
    assert recover_quarantine(g, qpath) == {"published": int(landed), "deleted": int(not landed), "left": 0}
    assert os.path.exists(os.path.join(qpath, f"load={load_id}", "_SUCCESS")) == landed
    assert not os.path.exists(staging)
    assert _ids(g, "node:Person") == (["new1", "new2"] if landed else [])
