"""Spark crash matrix: real Spark jobs killed at every step of the write protocol.

Each cell starts its own small Spark application (``spark_job.py``) that loads 40 people (and,
multi-type, 20 ``Knows`` edges between them) with ``write_graph`` (one commit of two tables,
committed on the driver) or ``df.write.format("omnigraph")`` (one table; the commit runs in a
Spark Python worker), and a failpoint kills the committing process at one protocol step
(``exit`` = ``os._exit(137)``, ``kill`` = SIGKILL). Then, for every cell:

* readers see all of the job or none of it, before any recovery (I1, I13);
* with ``OMNIGRAPH_BIN`` set to an Omnigraph 0.7.2 binary: the engine, opening a COPY
  read-write (its recovery sweep), shows the same outcome as ours;
* the next write resolves the crashed write itself (I8): it rolls forward what can roll
  forward and, because the sidecar carries our op marker and the writer is dead (it no longer
  holds the lease, I14), rolls back the rest;
* afterwards: all of the job or none (I1), no duplicate ids, manifest row counts equal the rows
  read, no sidecar left (I9), an audit row for each resolved sidecar (I9), Lance HEAD == pin for
  every owned table (I7), the lease of the dead process was broken (I14).

Default run: 19 cells (every step once — append, main, multi-type —, every mode on a branch at
the two decisive steps, single-type at ``after_table_commit#1``, and ``graph_jvm``: the same
multi-type load staged by the JVM write path, killed before the sidecar and after the first
table commit; ``df_jvm``: ``df.write.format("omnigraph")`` on the shim's provider, whose commit
runs in its bridge process, killed after the sidecar and after the table commit);
``OMNIGRAPH_FULL_MATRIX=1`` runs all 360 (api x mode x branch x step x exit/kill).
Deletes (``test_spark_delete_crash_cell``): a node delete cascading to ``edge:Knows``, 4 cells by
default (``write_graph`` at ``after_sidecar``, ``after_table_commit#1``, ``after_all_commits``;
``df.write`` at ``after_table_commit#1``), 10 with the full matrix.
"""

from __future__ import annotations

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import writes

from .helpers import (
    FULL,
    STATS,
    assert_audits_cover,
    assert_heads_match_pins,
    assert_no_duplicates,
    copy_graph,
    engine_visible_ids,
    find_engine,
    ids,
    run_job,
    sidecar_ops,
)

pytestmark = [pytest.mark.slow]

N = 40  # people per job; edges: N // 2
STEPS = [
    "before_sidecar",
    "after_sidecar",
    "after_table_commit#1",
    "after_table_commit#2",
    "after_all_commits",
    "after_publish",
    "after_commit_row",
    "before_sidecar_delete",
]
BASE = [f"old{i}" for i in range(5)]
NEW = [f"new{i:03d}" for i in range(N)]
EDGES = [f"k-new{i:03d}" for i in range(N // 2)]


def visible_after_recovery(step: str, multi: bool) -> bool:
    """I1 + I8: a crash before any table moved rolls back; once every table committed, forward.
    (Multi-type loads commit ``edge:Knows`` first, then ``node:Person``: pins in key order.)"""
    if step in ("before_sidecar", "after_sidecar"):
        return False
    if step == "after_table_commit#1":
        return not multi
    return True


def visible_before_recovery(step: str) -> bool:
    """I1/I13: nothing is visible until the publish, and reads never recover."""
    return step in ("after_publish", "after_commit_row", "before_sidecar_delete")


def needs_rollback(step: str, multi: bool) -> bool:
    """A pending sidecar the write-path heal (roll forward only) cannot resolve."""
    return step == "after_sidecar" or (step == "after_table_commit#1" and multi)


def expected_people(mode: str, visible: bool) -> list:
    if not visible:
        return sorted(BASE)
    if mode == "overwrite":
        return sorted(["old0"] + NEW)
    return sorted(BASE + NEW)


def cells():
    out, n_default = [], 0
    for api in ("graph", "graph_jvm", "df", "df_jvm"):
        for mode in ("append", "merge", "overwrite"):
            for branch in ("main", "feature"):
                for step in STEPS:
                    if api in ("df", "df_jvm") and step == "after_table_commit#2":
                        continue  # one table: there is no second commit
                    default = (
                        (api == "graph" and mode == "append" and branch == "main")
                        or (
                            api == "graph_jvm"
                            and mode == "merge"
                            and branch == "feature"
                            and step in ("before_sidecar", "after_table_commit#1")
                        )
                        or (
                            api == "graph"
                            and branch == "feature"
                            and step in ("after_table_commit#1", "after_all_commits")
                        )
                        or (api == "df" and mode == "append" and branch == "main" and step == "after_table_commit#1")
                        or (
                            api == "df_jvm"
                            and mode == "append"
                            and branch == "main"
                            and step in ("after_sidecar", "after_table_commit#1")
                        )
                    )
                    if default:  # default cells alternate the two deaths
                        n_default += 1
                    for action in ("exit", "kill"):
                        if FULL or (default and action == ("kill" if n_default % 2 == 0 else "exit")):
                            out.append(
                                pytest.param(
                                    api, mode, branch, step, action, id=f"{api}-{mode}-{branch}-{step}-{action}"
                                )
                            )
    return out


def _base_graph(tmp_path, schema_text, branch):
    g = Graph.init(str(tmp_path / "graph"), schema_text)
    t = writes.prepare_target(g, "main", "node:Person", "append")
    import pyarrow as pa

    st = writes.stage(
        t, pa.Table.from_pylist([{"id": i, "age": 1, "name": i} for i in BASE], schema=t.schema).to_batches()
    )
    writes.commit_load(g, "main", [st], actor="setup")
    if branch != "main":
        g.create_branch(branch)
    return g


@pytest.mark.parametrize(
    "api,step",
    [
        pytest.param(api, step, id=f"delete-{api}-{step}")
        for api, step in [("graph", s) for s in STEPS] + [("df", "after_table_commit#1"), ("df", "after_publish")]
        if FULL
        or (api, step)
        in (
            ("graph", "after_sidecar"),
            ("graph", "after_table_commit#1"),
            ("graph", "after_all_commits"),
            ("df", "after_table_commit#1"),
        )
    ],
)
def test_spark_delete_crash_cell(tmp_path, test_schema_text, api, step):
    """I1, I8, I9, I18: a node delete and its cascade (edge:Knows, then node:Person, one sidecar)
    through a real Spark job killed at ``step``: readers see all of it or none before recovery,
    and after the next write heals, both tables show the delete or neither."""
    g = _base_graph(tmp_path, test_schema_text, "main")
    t = writes.prepare_target(g, "main", "edge:Knows", "append")
    import pyarrow as pa

    knows = [
        {"id": f"{s}-{d}", "src": s, "dst": d, "since": None}
        for s, d in (("old0", "old1"), ("old1", "old2"), ("old2", "old3"))
    ]
    writes.commit_load(g, "main", [writes.stage(t, pa.Table.from_pylist(knows, schema=t.schema).to_batches())])
    run = run_job({"kind": "delete", "api": api, "root": g.root, "names": ["old1"]}, failpoint=f"{step}:exit")
    assert not run.completed and run.returncode != 0, run.tail()
    g = Graph.open(g.root)
    before, after = (
        (sorted(BASE), ["old0-old1", "old1-old2", "old2-old3"]),
        (sorted(set(BASE) - {"old1"}), ["old2-old3"]),
    )
    seen = (ids(g, "node:Person"), ids(g, "edge:Knows"))
    assert seen == (after if visible_before_recovery(step) else before)
    people, edges = after if visible_after_recovery(step, True) else before
    engine = find_engine()
    if engine:  # the engine heals a copy to the same side: the delete and its cascade, or neither
        copy = copy_graph(g.root, str(tmp_path / "engine-copy"))
        got = engine_visible_ids(engine, copy, "main", str(tmp_path / "engine-home"))
        assert sorted(got.get("node:Person", [])) == people
        assert got.get("edge:Knows", []) == edges
        STATS["engine_checks"] += 1
    _write_next(g, "main")
    g = Graph.open(g.root)
    assert g.pending_sidecars() == []
    assert (ids(g, "node:Person"), ids(g, "edge:Knows")) == (sorted(people + ["next"]), edges)
    assert_no_duplicates(g, "main")
    assert_heads_match_pins(g, "main")
    STATS["crashes_survived"] += 1


def _write_next(g: Graph, branch: str):
    import pyarrow as pa

    t = writes.prepare_target(g, branch, "node:Person", "append")
    st = writes.stage(t, pa.Table.from_pylist([{"id": "next", "age": 7, "name": "next"}], schema=t.schema).to_batches())
    return writes.commit_load(g, branch, [st], actor="next", lease_timeout_s=30)


@pytest.mark.parametrize("api,mode,branch,step,action", cells())
def test_spark_crash_cell(tmp_path, test_schema_text, api, mode, branch, step, action):
    """I1, I2, I7, I8, I9, I13, I14 under a real Spark job killed at ``step``."""
    multi = api in ("graph", "graph_jvm")
    g = _base_graph(tmp_path, test_schema_text, branch)
    main_version = g.snapshot("main").version
    spec = {
        "kind": "load",
        "api": api,
        "mode": mode,
        "branch": branch,
        "prefix": "new",
        "n": N,
        "root": g.root,
        "extra_people": [["old0", 99]] if mode != "append" else [],
        "actor": "crash",
    }
    STATS["cases_tried"] += 1
    run = run_job(spec, failpoint=f"{step}:{action}")
    assert not run.completed and run.returncode != 0, run.tail()
    if multi:  # the commit runs in the driver: the application itself died
        assert run.returncode in (137, -9), run.tail()
    else:  # the commit runs in a Python worker: it died, the job failed
        assert run.error_code is not None, run.tail()

    # readers, before any recovery: all or nothing (I1), and reads never heal (I13)
    g = Graph.open(g.root)
    pending = sidecar_ops(g)
    assert len(pending) == (0 if step == "before_sidecar" else 1), pending
    assert ids(g, "node:Person", branch) == expected_people(mode, visible_before_recovery(step))
    assert ids(g, "edge:Knows", branch) == (EDGES if multi and visible_before_recovery(step) else [])
    assert sidecar_ops(g) == pending

    final_visible = visible_after_recovery(step, multi)
    engine = find_engine()
    if engine:
        copy = copy_graph(g.root, str(tmp_path / "engine-copy"))
        got = engine_visible_ids(engine, copy, branch, str(tmp_path / "engine-home"))
        assert sorted(got.get("node:Person", [])) == expected_people(mode, final_visible)
        assert len(got.get("edge:Knows", [])) == (len(EDGES) if multi and final_visible else 0)
        STATS["engine_checks"] += 1

    # the next write resolves our own crashed write itself: roll forward, or roll back (the op
    # marker proves the sidecar is ours and, under the lease, that its writer is dead)
    _write_next(g, branch)
    if needs_rollback(step, multi):
        from omnigraph_spark.store import commits

        kinds = {a["operation_id"]: a["recovery_kind"] for a in commits.list_recovery_audits(g.root)}
        assert [kinds.get(op) for op in pending] == ["RolledBack"] * len(pending)

    # after: all or nothing, once, consistent
    g = Graph.open(g.root)
    assert g.pending_sidecars() == []  # I9
    assert_audits_cover(g, pending)  # I9: every resolved sidecar is audited
    assert ids(g, "node:Person", branch) == sorted(expected_people(mode, final_visible) + ["next"])
    assert ids(g, "edge:Knows", branch) == (EDGES if multi and final_visible else [])
    ages = {r["id"]: r["age"] for r in g.read_table("node:Person", g.snapshot(branch)).to_pylist()}
    assert ages["old0"] == (99 if final_visible and mode != "append" else 1)
    assert_no_duplicates(g, branch)
    assert_heads_match_pins(g, branch)  # I7
    if branch != "main":  # the branch's crash never touched main
        assert g.snapshot("main").version == main_version
        assert ids(g, "node:Person", "main") == sorted(BASE)
        assert_no_duplicates(g, "main")
    STATS["crashes_survived"] += 1
