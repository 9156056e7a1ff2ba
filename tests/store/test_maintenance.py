"""Maintenance: optimize (compaction + one publish) and cleanup (versions, orphans, forks)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
import time

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


# --- cleanup ---------------------------------------------------------------------------------


def _versions(g, key=P, lineage=None):
    t = g.snapshot().tables[key]
    return [v["version"] for v in tables.open_dataset(t.base_path, branch=lineage).versions()]


def test_cleanup_requires_a_policy(test_graph):
    with pytest.raises(OptionError):
        test_graph.cleanup()
    with pytest.raises(OptionError):
        test_graph.cleanup(keep_versions=0)


def test_cleanup_keeps_pinned_and_kept_graph_versions(test_graph):
    g = test_graph
    _many_loads(g, 4)
    g.create_branch("feature")
    write_rows(g, P, people("f1"), branch="feature")  # forks Person onto feature at main's pin
    _many_loads(g, 3, prefix="m")
    pre = g.snapshot()  # the last graph version before optimize: pins a pre-compaction version
    g.optimize()
    snaps = {b: g.snapshot(b) for b in ("main", "feature")}
    rows = {b: rows_of(g, P, s) for b, s in snaps.items()}
    keep = snaps["main"].version - pre.version + 1  # keeps exactly the graph versions >= pre
    old_rows = rows_of(g, P, pre)
    before = _versions(g)
    rep = g.cleanup(keep_versions=keep)
    assert not rep.errors
    assert min(rep.kept_graph_versions["main"]) == pre.version
    # feature's kept versions (its fork point) still read Person on main at an older pin
    assert rep.protected[(pre.tables[P].table_path, "main")] <= pre.tables[P].version
    assert rep.versions_removed > 0 and rep.table(P).bytes_removed > 0
    after = _versions(g)
    assert len(after) < len(before)
    # every pin of every branch head and every kept graph version still reads the same rows
    for b, s in snaps.items():
        assert rows_of(g, P, g.snapshot(b)) == rows[b]
        assert rows_of(g, P, s) == rows[b]
    assert rows_of(g, P, g.snapshot(version=pre.version)) == old_rows
    assert pre.tables[P].version in after and before[0] not in after
    for (path, lineage), v in rep.protected.items():
        lb = None if lineage == "main" else lineage
        assert v in [x["version"] for x in tables.open_dataset(f"{g.root}/{path}", branch=lb).versions()]
    # the branch's fork and its data survive; the graph keeps taking writes on both
    assert "feature" in tables.lance_branches(snaps["feature"].tables[P].base_path)
    write_rows(g, P, people("z"), branch="feature")
    write_rows(g, P, people("z"))
    assert len(rows_of(g, P, g.snapshot("feature"))) == len(rows["feature"]) + 1


def test_cleanup_time_policy_keeps_recent(test_graph):
    g = test_graph
    _many_loads(g, 3)
    before = _versions(g)
    rep = g.cleanup(older_than=3600)
    assert rep.versions_removed == 0 and _versions(g) == before
    rep = g.cleanup(older_than=0)  # everything is old enough: only the referenced versions stay
    assert _versions(g)[-1] == before[-1]
    assert rep.versions_removed > 0 and _versions(g)[0] > before[0]
    assert [r["id"] for r in rows_of(g, P)] == ["p0", "p1", "p2"]


def _stage_and_die(g, names, branch="main"):
    """A killed job: fragments staged, never committed."""
    from .helpers import stage_rows

    st = stage_rows(g, P, people(*names), branch=branch)
    return [u for u in tables.data_file_uris(st.stage_uri, st.fragments)]


def test_cleanup_removes_orphans_of_killed_job_keeps_fresh(test_graph):
    g = test_graph
    _many_loads(g, 2)
    dead = _stage_and_die(g, ["x1", "x2"])
    fresh = _stage_and_die(g, ["y1"])
    past = time.time() - 7200
    for u in dead:
        os.utime(u, (past, past))
    rows = rows_of(g, P)
    rep = g.cleanup(keep_versions=100)
    t = rep.table(P)
    assert sorted(t.orphan_files) == sorted("data/" + os.path.basename(u) for u in dead)
    assert t.orphan_bytes > 0
    assert not any(os.path.exists(u) for u in dead)
    assert all(os.path.exists(u) for u in fresh)  # younger than the grace: maybe a running job's
    assert rows_of(g, P) == rows
    # a branch's staged-but-dead files live under tree/<b>/data
    g.create_branch("feature")
    write_rows(g, P, people("f"), branch="feature")
    dead_b = _stage_and_die(g, ["zb"], branch="feature")
    assert "/tree/feature/data/" in dead_b[0]
    os.utime(dead_b[0], (past, past))
    rep = g.cleanup(keep_versions=100, orphan_grace_s=600)
    assert rep.table(P).orphan_files == ["tree/feature/data/" + os.path.basename(dead_b[0])]
    assert not os.path.exists(dead_b[0])
    assert [r["id"] for r in rows_of(g, P, g.snapshot("feature"))] == ["f", "p0", "p1"]


def test_cleanup_reconciles_orphan_forks(test_graph):
    g = test_graph
    _many_loads(g, 1)
    g.create_branch("feature")
    g.create_branch("dead")
    # a job that forked at planning and died (fork exists, manifest never placed the table on it)
    from omnigraph_spark.store import writes

    writes.prepare_target(g, "feature", P, "append")
    writes.prepare_target(g, "dead", P, "append")
    write_rows(g, "node:Company", [{"id": "c", "name": "c"}], branch="dead")
    lance.dataset(g.root + "/__manifest").branches.delete("dead")  # branch gone, commit-graph branch left
    base = g.snapshot().tables[P].base_path
    assert set(tables.lance_branches(base)) == {"feature", "dead"}
    rep = g.cleanup(keep_versions=10)  # within the grace: nothing is touched
    assert set(tables.lance_branches(base)) == {"feature", "dead"}
    assert rep.table(P).forks_removed == []
    dry = g.cleanup(keep_versions=10, orphan_grace_s=0, dry_run=True)
    assert sorted(dry.table(P).forks_removed) == ["dead", "feature"]
    assert set(tables.lance_branches(base)) == {"feature", "dead"}
    rep = g.cleanup(keep_versions=10, orphan_grace_s=0)
    assert sorted(rep.table(P).forks_removed) == ["dead", "feature"]
    assert tables.lance_branches(base) == {}
    assert rep.commit_graph_forks_removed == ["dead"]
    # the feature branch still works: the next write forks again
    write_rows(g, P, people("f"), branch="feature")
    assert "f" in [r["id"] for r in rows_of(g, P, g.snapshot("feature"))]


def test_cleanup_isolates_a_failing_table(test_graph, monkeypatch):
    from omnigraph_spark.store import maintenance_cleanup as mc

    g = test_graph
    _many_loads(g, 3)
    for i in range(3):
        write_rows(g, "node:Company", [{"id": f"c{i}", "name": "c"}])
    bad = g.snapshot().tables["node:Company"].table_path
    real = mc._cleanup_lineage

    def flaky(base, *a, **kw):
        if base.endswith(bad):
            raise OSError("simulated: table directory unreadable")
        return real(base, *a, **kw)

    monkeypatch.setattr(mc, "_cleanup_lineage", flaky)
    before_company = _versions(g, "node:Company")
    rep = g.cleanup(keep_versions=1)
    assert "simulated" in rep.errors["node:Company"] and rep.table("node:Company").error
    assert _versions(g, "node:Company") == before_company
    assert rep.table(P).versions_removed > 0 and rep.table(P).error is None
    assert len(rows_of(g, P)) == 3


def test_cleanup_dry_run_changes_nothing(test_graph):
    g = test_graph
    _many_loads(g, 4)
    g.optimize()
    dead = _stage_and_die(g, ["x"])
    past = time.time() - 7200
    os.utime(dead[0], (past, past))
    before = _listing(g.root)
    rep = g.cleanup(keep_versions=1, older_than=dt.timedelta(0), dry_run=True)
    assert rep.dry_run and rep.versions_removed > 0 and rep.orphan_files == 1
    assert _listing(g.root) == before
    real = g.cleanup(keep_versions=1, older_than=dt.timedelta(0))
    assert real.versions_removed == rep.versions_removed
    assert [t.orphan_files for t in real.tables] == [t.orphan_files for t in rep.tables]
    assert len(rows_of(g, P)) == 4


def _journal(g, load, names, age_s):
    """A Spark load's staging journal as its tasks leave it (JSON entries, key fingerprints)."""
    d = os.path.join(RootPaths(g.root).staging_dir, load)
    os.makedirs(d, exist_ok=True)
    for n in names:
        with open(os.path.join(d, n), "w") as f:
            f.write("[]")
    past = time.time() - age_s
    for n in names:
        os.utime(os.path.join(d, n), (past, past))
    os.utime(d, (past, past))
    return d


def test_cleanup_removes_kept_id_indexes_no_load_used_within_the_grace(test_graph):
    """The JVM shim's kept node-id indexes are a cache: cleanup deletes those no load read or
    wrote (their mtime) for ``orphan_grace_s``, lists them in a dry run, and leaves them alone
    without the orphan sweep; the graph's rows never change."""
    from omnigraph_spark.store.layout import RootPaths

    g = test_graph
    write_rows(g, P, people("a"))
    d = RootPaths(g.root).id_indexes
    os.makedirs(d)
    for n, age in (("aa.ids", 7200), ("bb.ids", 10), (".cc.ids.1234.tmp", 7200)):
        with open(os.path.join(d, n), "wb") as f:
            f.write(b"x")
        past = time.time() - age
        os.utime(os.path.join(d, n), (past, past))
    rows = rows_of(g, P)
    assert g.cleanup(keep_versions=100, dry_run=True).id_indexes_removed == [".cc.ids.1234.tmp", "aa.ids"]
    assert g.cleanup(keep_versions=100, include_orphans=False).id_indexes_removed == []
    assert sorted(os.listdir(d)) == [".cc.ids.1234.tmp", "aa.ids", "bb.ids"]
    rep = g.cleanup(keep_versions=100)
    assert rep.id_indexes_removed == [".cc.ids.1234.tmp", "aa.ids"] and not rep.errors
    assert os.listdir(d) == ["bb.ids"]
    assert g.cleanup(keep_versions=100, orphan_grace_s=0).id_indexes_removed == ["bb.ids"]
    assert rows_of(g, P) == rows


def test_cleanup_removes_staging_journals_of_killed_loads(test_graph):
    """A driver killed mid-load leaves its staging journal (entries and *.bin fingerprints);
    cleanup removes journals untouched for the grace, keeps a live load's (younger), and a dry
    run only lists them."""
    g = test_graph
    write_rows(g, P, people("a"))
    dead = _journal(g, "dead0", ["jvm-node-Person-p0-t1-ab12cd34.json", "keys-node-Person-p0-t1-ee.bin"], 7200)
    empty = _journal(g, "empty1", [], 7200)
    live = _journal(g, "live2", ["jvm-node-Person-p0-t3-0a0b0c0d.json"], 10)
    rows = rows_of(g, P)
    dry = g.cleanup(keep_versions=100, dry_run=True)
    assert dry.staging_journals_removed == ["dead0", "empty1"]
    assert os.path.isdir(dead) and os.path.isdir(empty)
    rep = g.cleanup(keep_versions=100)
    assert rep.staging_journals_removed == ["dead0", "empty1"] and not rep.errors
    assert not os.path.exists(dead) and not os.path.exists(empty)
    assert os.listdir(live) == ["jvm-node-Person-p0-t3-0a0b0c0d.json"]
    assert g.cleanup(keep_versions=100, orphan_grace_s=0).staging_journals_removed == ["live2"]
    assert not os.path.exists(live)
    assert rows_of(g, P) == rows
    kept = _journal(g, "dead3", ["jvm-node-Person-p1-t4-01020304.json"], 7200)
    assert g.cleanup(keep_versions=100, include_orphans=False).staging_journals_removed == []
    assert os.path.isdir(kept)  # no orphan sweep asked for: journals are left too
