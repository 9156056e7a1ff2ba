"""Maintenance: optimize (compaction + one publish) and cleanup (versions, orphans, forks)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import lance
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import OptionError, RecoveryPendingError
from omnigraph_spark.store import commits, maintenance, sidecar, tables
from omnigraph_spark.store.layout import RootPaths

from .helpers import people, rows_of, write_rows

P = "node:Person"


def _many_loads(g, n=6, branch="main", prefix="p"):
    for i in range(n):
        write_rows(g, P, people(f"{prefix}{i}", age=i), branch=branch)


def _frags(g, key=P, branch="main"):
    return len(g.open_table(key, g.snapshot(branch)).get_fragments())


def _listing(root):
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            st = os.stat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


# --- optimize --------------------------------------------------------------------------------

def test_optimize_compacts_publishes_and_commits(test_graph):
    g = test_graph
    _many_loads(g, 6)
    before_rows = rows_of(g, P)
    before = g.snapshot()
    assert _frags(g) == 6
    schema_md = lance.dataset(RootPaths(g.root).manifest).schema.field("object_id").metadata
    rep = g.optimize()
    t = rep.table(P)
    assert (t.fragments_before, t.fragments_after, t.rows) == (6, 1, 6)
    assert t.version_after > t.version_before == before.tables[P].version
    snap = g.snapshot()
    assert rep.manifest_version > before.version
    assert snap.tables[P].version == t.version_after
    # compacting __manifest afterwards adds graph versions with no commit row (as the engine)
    assert snap.version >= rep.manifest_version
    assert g.snapshot(version=rep.manifest_version).tables[P].version == t.version_after
    assert rows_of(g, P) == before_rows
    assert _frags(g) == 1
    # the old graph version still reads the same rows (time travel to the pre-optimize version)
    assert rows_of(g, P, g.snapshot(version=before.version)) == before_rows
    # one commit row for the optimize publish, with the optimize actor
    c = g.log()[-1]
    assert (c.manifest_version, c.actor_id) == (rep.manifest_version, maintenance.OPTIMIZE_ACTOR)
    assert c.graph_commit_id == rep.graph_commit_id
    assert g.pending_sidecars() == []
    # untouched tables are reported with a reason
    assert rep.table("node:Company").skipped == maintenance.SKIP_FEW_FRAGMENTS
    # internal datasets compacted; the manifest PK metadata is untouched
    internal = {i.dataset: i for i in rep.internal}
    assert internal["__manifest"].fragments_after < internal["__manifest"].fragments_before
    assert internal["_graph_commits.lance"].fragments_after == 1
    assert not rep.errors
    assert lance.dataset(RootPaths(g.root).manifest).schema.field("object_id").metadata == schema_md
    # the graph keeps taking writes and a second optimize has nothing to do
    write_rows(g, P, people("after"))
    assert "after" in [r["id"] for r in rows_of(g, P)]
    rep2 = g.optimize(min_fragments=3)  # 2 small fragments now: below the threshold
    assert rep2.compacted == [] and rep2.table(P).skipped == maintenance.SKIP_FEW_FRAGMENTS
    assert rep2.operation_id is None and rep2.graph_commit_id is None  # no work: no sidecar, no commit


def test_optimize_refuses_with_pending_sidecar(test_graph):
    g = test_graph
    _many_loads(g, 2)
    t = g.snapshot().tables[P]
    sc = sidecar.Sidecar.new("main", None, "Load", [sidecar.SidecarPin(P, t.base_path, t.version, t.version + 1)])
    sidecar.write(g.storage, g.root, sc)
    with pytest.raises(RecoveryPendingError, match="requires a clean recovery state") as e:
        g.optimize()
    assert e.value.code == "RECOVERY_PENDING"
    assert _frags(g) == 2


def test_optimize_dry_run_and_options(test_graph):
    g = test_graph
    _many_loads(g, 3)
    before = _listing(g.root)
    rep = g.optimize(dry_run=True)
    assert rep.dry_run and rep.table(P).skipped is None and rep.table(P).small_fragments == 3
    assert _listing(g.root) == before
    rep = g.optimize(tables=[P], min_fragments=4)
    assert rep.table(P).skipped == maintenance.SKIP_FEW_FRAGMENTS
    assert rep.table("node:Company").skipped == maintenance.SKIP_NOT_SELECTED
    with pytest.raises(OptionError):
        g.optimize(tables=["node:Nope"])


def test_optimize_branch_owned_and_inherited(test_graph):
    g = test_graph
    _many_loads(g, 3)
    write_rows(g, "node:Company", [{"id": "c1", "name": "c1"}])
    write_rows(g, "node:Company", [{"id": "c2", "name": "c2"}])
    g.create_branch("feature")
    _many_loads(g, 3, branch="feature", prefix="f")
    main_before = g.snapshot()
    rows_f = rows_of(g, P, g.snapshot("feature"))
    rep = g.optimize("feature")
    assert rep.table(P).lineage == "feature" and rep.table(P).compacted
    assert rep.table(P).fragments_after == 1
    assert rep.table("node:Company").skipped == maintenance.SKIP_INHERITED
    assert rows_of(g, P, g.snapshot("feature")) == rows_f
    assert g.snapshot().version == main_before.version  # main untouched (its __manifest lineage too)
    assert g.log("feature")[-1].actor_id == maintenance.OPTIMIZE_ACTOR


_CRASH = textwrap.dedent("""
    import sys
    from omnigraph_spark import Graph
    Graph.open(sys.argv[1]).optimize()
    print("COMPLETED")
""")


def test_crash_between_compaction_and_publish_rolls_forward(test_graph):
    g = test_graph
    _many_loads(g, 5)
    rows = rows_of(g, P)
    pin = g.snapshot().tables[P].version
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT="after_optimize_compact")
    p = subprocess.run([sys.executable, "-c", _CRASH, g.root], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 137, p.stderr[-2000:]
    assert "COMPLETED" not in p.stdout
    g = Graph.open(g.root)
    assert len(g.pending_sidecars()) == 1
    t = g.snapshot().tables[P]
    assert t.version == pin  # compacted at Lance HEAD but not published
    assert tables.head_version(t.base_path, None) > pin
    out = g.recover()
    assert [o.action for o in out] == ["RolledForward"]
    assert g.pending_sidecars() == []
    assert g.snapshot().tables[P].version > pin
    assert _frags(g) == 1
    assert rows_of(g, P) == rows
    assert commits.list_recovery_audits(g.root)[-1]["sidecar_writer_kind"] == "Optimize"
    write_rows(g, P, people("next"))  # no drift left behind
    assert len(rows_of(g, P)) == len(rows) + 1
