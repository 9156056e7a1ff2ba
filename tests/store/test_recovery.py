"""Recovery: the classification table, and a crash matrix with real process deaths.

Each crash cell kills a writer (os._exit via failpoint) at one protocol step, then opens the
graph, runs the sweep and checks the invariants: all of the job or none (I1), no duplicates,
no sidecar left (I9), an audit row when a sidecar was resolved, and the next write succeeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lance
import pytest

from omnigraph_spark import Graph
from omnigraph_spark.errors import CorruptSidecarError, InvariantViolationError, UnsupportedFormatError
from omnigraph_spark.store import commits, recovery, sidecar, tables
from omnigraph_spark.store.recovery import Decision, TableClass, classify, decide
from omnigraph_spark.store.sidecar import Sidecar, SidecarPin

from .helpers import people, rows_of, write_rows

S, L, C = "strict", "loose", "confirmed"
PIN = lambda exp, post, conf=None: SidecarPin("node:P", "/r/nodes/x", exp, post, conf)  # noqa: E731

# (mode, pin, head, pinned) -> class: the engine's §H.2 table, row by row
CLASSIFICATION = [
    (S, PIN(1, 2), 0, 1, TableClass.INVARIANT_VIOLATION),
    (S, PIN(1, 2), 1, 1, TableClass.NO_MOVEMENT),
    (S, PIN(1, 2), 2, 1, TableClass.ROLLED_PAST_EXPECTED),
    (S, PIN(1, 3), 2, 1, TableClass.UNEXPECTED_AT_P1),
    (S, PIN(0, 2), 2, 1, TableClass.UNEXPECTED_AT_P1),
    (S, PIN(1, 2), 3, 1, TableClass.UNEXPECTED_MULTISTEP),
    (L, PIN(1, 2), 2, 1, TableClass.ROLLED_PAST_EXPECTED),
    (L, PIN(1, 9), 2, 1, TableClass.ROLLED_PAST_EXPECTED),
    (L, PIN(0, 2), 2, 1, TableClass.UNEXPECTED_AT_P1),
    (L, PIN(1, 2), 4, 1, TableClass.ROLLED_PAST_EXPECTED),
    (L, PIN(0, 2), 4, 1, TableClass.UNEXPECTED_MULTISTEP),
    (C, PIN(1, 2, None), 2, 1, TableClass.INCOMPLETE_PHASE_B),
    (C, PIN(1, 2, 2), 2, 1, TableClass.ROLLED_PAST_EXPECTED),
    (C, PIN(1, 2, 3), 2, 1, TableClass.UNEXPECTED_MULTISTEP),
]


@pytest.mark.parametrize("mode,pin,head,pinned,expected", CLASSIFICATION)
def test_classification_table(mode, pin, head, pinned, expected):
    assert classify(pin, head, pinned, mode) == expected


def test_decision_table():
    R, N, V = TableClass.ROLLED_PAST_EXPECTED, TableClass.NO_MOVEMENT, TableClass.INVARIANT_VIOLATION
    assert decide([R, R]) == Decision.ROLL_FORWARD
    assert decide([]) == Decision.ROLL_FORWARD
    assert decide([R, N]) == Decision.ROLL_BACK
    assert decide([R, TableClass.UNEXPECTED_AT_P1]) == Decision.ROLL_BACK
    assert decide([R, N, V]) == Decision.ABORT


def test_modes_by_writer_kind():
    assert recovery.classification_mode("Load", 2) == "strict"
    assert recovery.classification_mode("Optimize", 2) == "loose"
    assert recovery.classification_mode("BranchMerge", 2) == "confirmed"
    assert recovery.classification_mode("BranchMerge", 1) == "loose"


# --- crash matrix ----------------------------------------------------------------------------

WRITER = str(Path(__file__).with_name("crash_writer.py"))
# step -> does the job end up visible after recovery?
STEPS = {
    "before_sidecar": False,
    "after_sidecar": False,
    "after_table_commit#1": None,  # visible iff the load had one table (all committed)
    "after_all_commits": True,
    "after_index_sidecar": True,  # I23: the sidecar is EnsureIndices (Loose) from here on
    "after_index_commit#1": True,
    "after_publish": True,
    "after_commit_row": True,
    "before_sidecar_delete": True,
}


def _recover(root):
    """Open a crashed graph and recover it: (graph, the outcomes, or None when no sidecar was
    pending). Every sidecar is gone afterwards (I9)."""
    g = Graph.open(root)
    had_sidecar = bool(g.pending_sidecars())
    outcomes = g.recover()
    assert g.pending_sidecars() == []  # I9
    return g, (outcomes if had_sidecar else None)


def _assert_audited(g, outcomes, visible: bool, version_before: int, version_now: int) -> None:
    """A recovery left one audit row per outcome, the last saying which way it went; without a
    sidecar the branch did not move."""
    if outcomes is not None:
        audits = commits.list_recovery_audits(g.root)
        assert [a["operation_id"] for a in audits] == [o.operation_id for o in outcomes]
        assert audits[-1]["recovery_kind"] == ("RolledForward" if visible else "RolledBack")
    else:
        assert version_now == version_before


def _assert_heads_at_pins(g, branch: str):
    """Every table the branch owns has its Lance HEAD at its manifest pin (no drift); the snapshot."""
    snap = g.snapshot(branch)
    for key, t in snap.tables.items():
        if t.branch == branch:
            assert tables.head_version(t.base_path, t.lance_branch) == t.version, key
    return snap


def _run_writer(root, mode, branch, which, failpoint):
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT=failpoint)
    p = subprocess.run(
        [sys.executable, WRITER, root, mode, branch, which], env=env, capture_output=True, text=True, timeout=120
    )
    return p


def _matrix():
    """Every cell with OMNIGRAPH_FULL_MATRIX=1 (84); by default the cells that differ (35):
    multi-type loads at every step and mode on main, every step of append on a branch, the
    mode-sensitive steps on a branch, and the single-table partial-commit cells."""
    full = os.environ.get("OMNIGRAPH_FULL_MATRIX") == "1"
    cells = []
    for which in ("person", "person+knows"):
        for branch in ("main", "feature"):
            for mode in ("append", "merge", "overwrite"):
                for step in STEPS:
                    keep = full or (
                        (which == "person+knows" and branch == "main")
                        or (which == "person+knows" and mode == "append")
                        or (which == "person+knows" and step in ("after_table_commit#1", "after_all_commits"))
                        or (which == "person" and branch == "main" and step == "after_table_commit#1")
                    )
                    if keep:
                        cells.append((step, mode, branch, which))
    return cells


@pytest.mark.slow
@pytest.mark.parametrize("step,mode,branch,which", _matrix())
def test_crash_matrix(test_graph, step, mode, branch, which):
    g = test_graph
    write_rows(g, "node:Person", people("old", age=1))
    if branch != "main":
        g.create_branch(branch)
    before = rows_of(g, "node:Person", g.snapshot(branch))
    before_version = g.snapshot(branch).version
    p = _run_writer(g.root, mode, branch, which, step)
    assert p.returncode == 137, p.stderr[-2000:]
    assert "COMPLETED" not in p.stdout

    g, outcomes = _recover(g.root)
    visible = STEPS[step] if STEPS[step] is not None else (which == "person")
    after = rows_of(g, "node:Person", g.snapshot(branch))
    new_rows = {
        "append": [
            {"id": "new1", "age": 1, "name": "new1"},
            {"id": "old", "age": 1, "name": "old"},
            {"id": "old", "age": 99, "name": "old"},
        ],
        "merge": [{"id": "new1", "age": 1, "name": "new1"}, {"id": "old", "age": 99, "name": "old"}],
        "overwrite": [{"id": "new1", "age": 1, "name": "new1"}, {"id": "old", "age": 99, "name": "old"}],
    }
    if visible:
        assert after == new_rows[mode]
        if which == "person+knows":
            assert [r["id"] for r in g.read_table("edge:Knows", g.snapshot(branch)).to_pylist()] == ["k-new"]
    else:
        assert after == before
        assert g.read_table("edge:Knows", g.snapshot(branch)).num_rows == 0
    _assert_audited(g, outcomes, visible, before_version, g.snapshot(branch).version)
    # the graph takes the next write, and every table's HEAD equals its pin again
    write_rows(g, "node:Person", people("next"), branch=branch)
    snap = _assert_heads_at_pins(g, branch)
    assert "next" in [r["id"] for r in rows_of(g, "node:Person", snap)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "step,branch", [(s, b) for s in STEPS if "index" not in s for b in ("main", "feature")]
)  # a delete adds no fragment: no index work (I23)
def test_delete_crash_matrix(test_graph, step, branch):  # I1, I8, I9, I18
    """A node delete and its cascade (edge:Knows, then node:Person, one sidecar) killed at every
    protocol step: after recovery either both tables show the delete or neither does."""
    g = test_graph
    write_rows(g, "node:Person", people("old", "keep", age=1))
    write_rows(
        g,
        "edge:Knows",
        [
            {"id": "k1", "src": "old", "dst": "keep", "since": None},
            {"id": "k2", "src": "keep", "dst": "keep", "since": None},
        ],
    )
    if branch != "main":
        g.create_branch(branch)
    before_version = g.snapshot(branch).version
    p = _run_writer(g.root, "delete", branch, "delete-old", step)
    assert p.returncode == 137, p.stderr[-2000:]
    assert "COMPLETED" not in p.stdout

    g, outcomes = _recover(g.root)
    visible = False if step == "after_table_commit#1" else STEPS[step]  # 1 of 2 tables: rolled back
    snap = g.snapshot(branch)
    person = [r["id"] for r in rows_of(g, "node:Person", snap)]
    knows = [r["id"] for r in rows_of(g, "edge:Knows", snap)]
    assert (person, knows) == ((["keep"], ["k2"]) if visible else (["keep", "old"], ["k1", "k2"]))
    assert snap.tables["node:Person"].row_count == len(person) and snap.tables["edge:Knows"].row_count == len(knows)
    _assert_audited(g, outcomes, visible, before_version, snap.version)
    if branch != "main":  # a crashed branch delete never touches main
        assert [r["id"] for r in rows_of(g, "node:Person")] == ["keep", "old"]
    write_rows(g, "node:Person", people("next"), branch=branch)
    _assert_heads_at_pins(g, branch)


# --- sidecar handling -----------------------------------------------------------------------


def test_sidecar_json_shape(test_graph):
    pin = SidecarPin("node:Person", test_graph.root + "/nodes/40d76f1f51639ec0", 1, 2)
    sc = Sidecar("01JZ3K5V7Q8R9S0T1V2W3X4Y5Z", None, "spark:job-42", "Load", (pin,), "1781234567890123")
    assert sc.to_json() == json.dumps(
        {
            "schema_version": 2,
            "operation_id": "01JZ3K5V7Q8R9S0T1V2W3X4Y5Z",
            "started_at": "1781234567890123",
            "branch": None,
            "actor_id": "spark:job-42",
            "writer_kind": "Load",
            "tables": [
                {"table_key": "node:Person", "table_path": pin.table_path, "expected_version": 1, "post_commit_pin": 2}
            ],
        },
        indent=2,
    )
    b = SidecarPin("node:Person", pin.table_path, 1, 2, None, "feature")
    assert list(json.loads(Sidecar("X", "feature", None, "Load", (b,)).to_json())["tables"][0]) == [
        "table_key",
        "table_path",
        "expected_version",
        "post_commit_pin",
        "table_branch",
    ]
    assert Sidecar.from_json(sc.to_json(), "x") == sc


def test_corrupt_sidecar_refused_and_kept(test_graph):
    path = Path(test_graph.root) / "__recovery" / "01JZ3K5V7Q8R9S0T1V2W3X4Y5Z.json"
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.raises(CorruptSidecarError) as e:
        test_graph.recover()
    assert e.value.code == "SIDECAR_CORRUPT"
    assert path.exists()


def test_newer_sidecar_version_refused(test_graph):
    path = Path(test_graph.root) / "__recovery" / "01JZ3K5V7Q8R9S0T1V2W3X4Y5Z.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"schema_version": 3, "tables": []}))
    with pytest.raises(UnsupportedFormatError):
        test_graph.recover()
    assert path.exists()


def test_non_json_names_ignored(test_graph):
    d = Path(test_graph.root) / "__recovery"
    d.mkdir()
    (d / "notes.txt").write_text("hello")
    assert test_graph.recover() == []


def test_invariant_violation_aborts_and_keeps(test_graph):
    write_rows(test_graph, "node:Person", people("a"))  # manifest pins 3, HEAD 3 (data, then indexes)
    t = test_graph.snapshot().tables["node:Person"]
    # a sidecar whose table HEAD is behind the pin cannot be explained: HEAD 3 < pinned 4
    from omnigraph_spark.store import manifest

    manifest.publish(
        test_graph.root,
        "main",
        [manifest.TableUpdate("node:Person", 4, None, 1, '{"manifest_path":"x"}')],
        {"node:Person": 3},
    )
    sc = Sidecar.new("main", None, "Load", [SidecarPin("node:Person", t.base_path, 3, 4)])
    sidecar.write(test_graph.storage, test_graph.root, sc)
    with pytest.raises(InvariantViolationError) as e:
        test_graph.recover()
    assert e.value.code == "RECOVERY_INVARIANT_VIOLATION"
    assert len(test_graph.pending_sidecars()) == 1
    assert recovery.sweep(test_graph.root, test_graph.storage, mode="roll_forward_only")[0].action == "Deferred"


def test_orphaned_branch_sidecar_discarded_once(test_graph):
    test_graph.create_branch("tmp")
    t = test_graph.snapshot("tmp").tables["node:Person"]
    sc = Sidecar.new("tmp", "me", "Load", [SidecarPin("node:Person", t.base_path, 1, 2, None, "tmp")])
    sidecar.write(test_graph.storage, test_graph.root, sc)
    lance.dataset(test_graph.root + "/__manifest").branches.delete("tmp")
    out = test_graph.recover()
    assert [o.action for o in out] == ["OrphanedBranchDiscarded"]
    audits = commits.list_recovery_audits(test_graph.root)
    assert [(a["recovery_kind"], a["operation_id"], a["recovery_for_actor"]) for a in audits] == [
        ("OrphanedBranchDiscarded", sc.operation_id, "me")
    ]
    assert test_graph.log()[-1].actor_id == commits.RECOVERY_ACTOR
    assert test_graph.pending_sidecars() == []


def test_reads_do_not_recover(test_graph):
    write_rows(test_graph, "node:Person", people("a"))
    t = test_graph.snapshot().tables["node:Person"]
    sc = Sidecar.new("main", None, "Load", [SidecarPin("node:Person", t.base_path, 2, 3)])
    sidecar.write(test_graph.storage, test_graph.root, sc)
    g = Graph.open(test_graph.root)
    g.snapshot()
    g.read_table("node:Person")
    assert len(g.pending_sidecars()) == 1


@pytest.mark.parametrize("step,which", [("after_sidecar", "person"), ("after_table_commit#1", "person+knows")])
def test_next_write_resolves_our_crashed_write(test_graph, step, which):  # I8 at write time, I14
    """A write of ours that died holding the lease is resolved by the next write, no recover()."""
    write_rows(test_graph, "node:Person", people("old", age=1))
    p = _run_writer(test_graph.root, "append", "main", which, step)
    assert p.returncode == 137
    assert len(test_graph.pending_sidecars()) == 1
    write_rows(test_graph, "node:Person", people("next"))
    assert test_graph.pending_sidecars() == []
    assert [r["id"] for r in rows_of(test_graph, "node:Person")] == ["next", "old"]
    assert commits.list_recovery_audits(test_graph.root)[-1]["recovery_kind"] == "RolledBack"
    assert os.listdir(Path(test_graph.root) / "_omnigraph_spark" / "ops") == []


def test_foreign_sidecar_needing_rollback_blocks_writes(test_graph):
    """A sidecar without our op marker may belong to a live engine writer: never rolled back
    implicitly by a write."""
    from omnigraph_spark.errors import RecoveryPendingError

    t = test_graph.snapshot().tables["node:Person"]
    sc = Sidecar.new("main", None, "Load", [SidecarPin("node:Person", t.base_path, 1, 2)])
    sidecar.write(test_graph.storage, test_graph.root, sc)  # NoMovement -> RollBack -> deferred
    with pytest.raises(RecoveryPendingError) as e:
        write_rows(test_graph, "node:Person", people("a"))
    assert e.value.code == "RECOVERY_PENDING"
    assert test_graph.pending_sidecars()
    assert [o.action for o in test_graph.recover()] == ["RolledBack"]
    write_rows(test_graph, "node:Person", people("a"))


def _tree(root):
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = os.path.getsize(p)
    return out


def test_copied_graph_heals_its_own_tables_not_the_original(test_graph, tmp_path):  # I8, I9
    """A sidecar stores full table URIs. Healing a copy (a backup, or the same graph mounted at
    another path) must touch the copy's tables, never the original's."""
    import shutil

    write_rows(test_graph, "node:Person", people("old", age=1))
    p = _run_writer(test_graph.root, "append", "main", "person+knows", "after_table_commit#1")
    assert p.returncode == 137, p.stderr[-2000:]
    before = _tree(test_graph.root)
    copy = str(tmp_path / "copy")
    shutil.copytree(test_graph.root, copy)
    pending = json.loads(Path(Graph.open(copy).pending_sidecars()[0]).read_text())
    assert all(t["table_path"].startswith(test_graph.root + "/") for t in pending["tables"])

    g = Graph.open(copy)
    assert [o.action for o in g.recover()] == ["RolledBack"]
    assert _tree(test_graph.root) == before  # the original is untouched, its sidecar still pending
    assert len(Graph.open(test_graph.root).pending_sidecars()) == 1
    assert [r["id"] for r in rows_of(g, "node:Person")] == ["old"]
    assert g.read_table("edge:Knows").num_rows == 0
    for key, t in g.snapshot().tables.items():  # every pin exists under the copy, HEAD == pin
        assert t.base_path.startswith(copy), key
        assert tables.head_version(t.base_path, t.lance_branch) == t.version, key
