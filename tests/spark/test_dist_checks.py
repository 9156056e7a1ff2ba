"""Load-wide checks as Spark jobs (invariant I21): with option distributedCheckRows at 1 every
check of these small loads runs on the executors; each scenario runs once with the checks in the
driver's memory (the option at 0) and once distributed, on a fresh graph each, and both must
raise the same error, message for message, or commit the same rows. On the distributed path the
driver's column readers are made to fail, so a check that gathered rows there would show."""

from __future__ import annotations

import logging

import pytest

from omnigraph_spark import Graph, read_table, write_graph, write_table
from omnigraph_spark.errors import (
    CardinalityViolationError,
    DanglingEdgeError,
    KeyConflictError,
    OmnigraphError,
    UniqueViolationError,
)
from omnigraph_spark.spark import dist_checks, graph_io, validate, writer

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

SCHEMA = """
node Person {
    name: String @key
    email: String? @unique
    nick: String?
    age: I32?
    @unique(nick, age)
}
node City {
    name: String @key
}
edge Knows: Person -> Person @card(0..2) {
    since: I64?
}
edge Likes: Person -> City @card(2..3)
"""

PATHS = {"driver": 0, "distributed": 1}


@pytest.fixture
def no_driver_reads(monkeypatch):
    """Fail any driver-side read of staged or committed columns by the validator."""

    def refuse(*a, **kw):
        raise AssertionError("the driver read rows on the distributed path")

    def arm():
        monkeypatch.setattr(validate, "_read_staged", refuse)
        monkeypatch.setattr(validate, "_read_committed", refuse)

    return arm


@pytest.fixture
def dist_runs(monkeypatch):
    """Every load's DistChecks runner, in order (``.runs``: the keys of the checks it ran)."""
    runs = []
    real_for_load = dist_checks.DistChecks.for_load

    def for_load(*a, **kw):
        d = real_for_load(*a, **kw)
        runs.append(d)
        return d

    monkeypatch.setattr(dist_checks.DistChecks, "for_load", staticmethod(for_load))
    return runs


def people(spark, rows, parts=3):
    return spark.createDataFrame(rows, "name string, email string, nick string, age int").repartition(parts)


def names(spark, ns):
    return people(spark, [(n, None, None, None) for n in ns], parts=2)


def edges(spark, pairs, parts=3, with_id=False):
    if with_id:
        return spark.createDataFrame(pairs, "id string, src string, dst string").repartition(parts)
    return spark.createDataFrame(pairs, "src string, dst string").repartition(parts)


def run(tmp_path, path: str, scenario, no_driver_reads):
    """``scenario(root, opts)`` on a fresh graph: its error (or None) and the graph's rows."""
    g = Graph.init(str(tmp_path / path), SCHEMA)
    opts = {"distributedCheckRows": str(PATHS[path])}
    err = None
    try:
        scenario(g.root, opts, (no_driver_reads if path == "distributed" else lambda: None))
    except OmnigraphError as e:
        err = e
    return err, g


def same_error(tmp_path, spark, scenario, no_driver_reads, cls):
    got = {p: run(tmp_path, p, scenario, no_driver_reads) for p in PATHS}
    (e1, g1), (e2, g2) = got["driver"], got["distributed"]
    assert isinstance(e1, cls), e1
    assert type(e2) is type(e1) and str(e2) == str(e1)
    assert e2.code == e1.code
    for t in ("Person", "Knows", "Likes"):
        assert rows(spark, g1.root, t) == rows(spark, g2.root, t)
    return str(e1)


def rows(spark, root, t):
    cols = ["src", "dst"] if t in ("Knows", "Likes") else ["name", "email", "nick", "age"]
    return sorted((tuple(r) for r in read_table(spark, root, t).select(*cols).collect()), key=repr)


def w(spark, root, frames, opts, mode="append", engine="python"):
    return write_graph(root, frames, mode=mode, engine=engine, options=opts)


def no_task_proof(monkeypatch) -> None:
    """The Python staging tasks of the loads that follow prove no endpoint (I15), so the
    driver's checks run."""
    monkeypatch.setattr(graph_io._jvm_write, "endpoint_sources", lambda *a, **kw: None)


def another_writer_before_the_lease(monkeypatch, write) -> None:
    """``write`` (another writer's commit) runs once, after the load's checks before the commit
    lease and before the lease is taken."""
    real_commit = writer.commit_load
    moved = []

    def commit_load(graph, branch, staged, **kw):
        if not moved:
            moved.append(True)
            write()
        return real_commit(graph, branch, staged, **kw)

    monkeypatch.setattr(writer, "commit_load", commit_load)


def test_unique_violation_same_on_both_paths(spark, tmp_path, no_driver_reads):
    """I21: @unique over one column, across several staged files: the first duplicated value in
    load order, its first two rows and the count of duplicated values."""
    data = [(f"p{i}", f"e{i % 7}" if i % 3 else None, None, None) for i in range(30)]

    def scenario(root, opts, arm):
        arm()
        w(spark, root, {"Person": people(spark, data)}, opts, mode="merge")

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, UniqueViolationError)
    assert "@unique violation on Person.email" in msg


@pytest.mark.slow
def test_multi_column_unique_same_on_both_paths(spark, tmp_path, no_driver_reads):
    data = [
        ("a", None, "x", 1),
        ("b", None, "x", 2),
        ("c", None, "y", 1),
        ("d", None, "x", 2),
        ("e", None, None, 2),
        ("f", None, None, 2),
        ("g", None, "y", 1),
    ]

    def scenario(root, opts, arm):
        arm()
        w(spark, root, {"Person": people(spark, data)}, opts)

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, UniqueViolationError)
    assert "Person.(age, nick)" in msg and "2 duplicated value(s)" in msg


@pytest.mark.slow
def test_repeated_key_in_an_append_same_on_both_paths(spark, tmp_path, no_driver_reads):
    def scenario(root, opts, arm):
        arm()
        w(spark, root, {"Person": names(spark, ["a", "b", "c", "b", "a", "d", "a"])}, opts)

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, KeyConflictError)
    assert "given more than once" in msg


def test_committed_key_in_an_append_same_on_both_paths(spark, tmp_path, no_driver_reads):
    def scenario(root, opts, arm):
        w(spark, root, {"Person": names(spark, [f"p{i}" for i in range(20)])}, opts)
        arm()
        w(spark, root, {"Person": names(spark, ["p3", "new", "p17", "p0"])}, opts)

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, KeyConflictError)
    assert "already committed" in msg and "3 id(s)" in msg


def test_dangling_endpoints_same_on_both_paths(spark, tmp_path, no_driver_reads):
    """Edges onto committed and staged nodes, several missing on either end (more than the
    five rows the message names)."""

    def scenario(root, opts, arm):
        w(spark, root, {"Person": names(spark, ["a", "b", "c"])}, opts)
        arm()
        pairs = [
            ("a", "b"),
            ("x1", "a"),
            ("a", "y1"),
            ("d", "a"),
            ("x2", "y2"),
            ("b", "c"),
            ("x3", "d"),
            ("c", "y3"),
            ("x4", "a"),
        ]
        w(spark, root, {"Person": names(spark, ["d"]), "Knows": edges(spark, pairs)}, opts)

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, DanglingEdgeError)
    assert "and" in msg and "dangling src" in msg


@pytest.mark.slow
def test_card_max_over_committed_and_pending_same_on_both_paths(spark, tmp_path, no_driver_reads):
    def scenario(root, opts, arm):
        w(spark, root, {"Person": names(spark, list("abcdef"))}, opts)
        w(spark, root, {"Knows": edges(spark, [("a", "b"), ("b", "c"), ("c", "a"), ("c", "b")])}, opts)
        arm()
        w(spark, root, {"Knows": edges(spark, [("a", "c"), ("a", "d"), ("b", "d"), ("c", "d"), ("e", "a")])}, opts)

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, CardinalityViolationError)
    assert "source 'a' has 3 edges (max 2)" in msg and "source 'c' has 3 edges" in msg


@pytest.mark.slow
def test_card_min_same_on_both_paths(spark, tmp_path, no_driver_reads):
    def scenario(root, opts, arm):
        arm()
        cities = spark.createDataFrame([("x",), ("y",)], "name string")
        w(
            spark,
            root,
            {
                "Person": names(spark, list("abc")),
                "City": cities,
                "Likes": edges(spark, [("a", "x"), ("a", "y"), ("b", "x"), ("c", "y")]),
            },
            opts,
        )

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, CardinalityViolationError)
    assert "source 'b' has 1 edges (min 2)" in msg


@pytest.mark.parametrize(
    "new,ok",
    [
        pytest.param(
            [("e1", "a", "d"), ("e2", "a", "e"), ("e9", "b", "e")], True, marks=pytest.mark.slow, id="replaces"
        ),
        pytest.param([("e1", "a", "d"), ("e8", "a", "e"), ("e9", "b", "e")], False, id="adds"),
    ],
)
def test_card_merge_shadowing_same_on_both_paths(spark, tmp_path, no_driver_reads, new, ok):
    """A merge replaces committed edges with the same id (shadowing): a source at its max stays
    there when the merge replaces its edges, and goes over when it adds one."""

    def scenario(root, opts, arm):
        w(spark, root, {"Person": names(spark, list("abcdef"))}, opts)
        w(spark, root, {"Knows": edges(spark, [("e1", "a", "b"), ("e2", "a", "c")], with_id=True)}, opts)
        arm()
        w(spark, root, {"Knows": edges(spark, new, with_id=True)}, opts, mode="merge")

    if ok:
        got = {p: run(tmp_path, p, scenario, no_driver_reads) for p in PATHS}
        assert got["driver"][0] is None and got["distributed"][0] is None
        assert rows(spark, got["driver"][1].root, "Knows") == rows(spark, got["distributed"][1].root, "Knows")
    else:
        msg = same_error(tmp_path, spark, scenario, no_driver_reads, CardinalityViolationError)
        assert "source 'a' has 3 edges (max 2)" in msg


@pytest.mark.slow
def test_card_overwrite_counts_pending_only_same_on_both_paths(spark, tmp_path, no_driver_reads):
    def scenario(root, opts, arm):
        w(spark, root, {"Person": names(spark, list("abcd"))}, opts)
        w(spark, root, {"Knows": edges(spark, [("a", "b"), ("a", "c")])}, opts)
        arm()
        w(
            spark,
            root,
            {"Knows": edges(spark, [("b", "a"), ("b", "c"), ("b", "d"), ("a", "d")])},
            opts,
            mode="overwrite",
        )

    msg = same_error(tmp_path, spark, scenario, no_driver_reads, CardinalityViolationError)
    assert "source 'b' has 3 edges (max 2)" in msg


def test_passing_load_commits_the_same_rows_and_reads_no_rows_on_the_driver(spark, tmp_path, no_driver_reads):
    """I21: a valid load through every check (unique, fresh, endpoints, @card with a committed
    part) commits the same rows on both paths, with no staged or committed column read on the
    driver on the distributed path."""

    def scenario(root, opts, arm):
        w(
            spark,
            root,
            {
                "Person": people(spark, [("a", "a@x", "n", 1), ("b", None, "n", 2), ("c", None, None, 1)]),
                "City": spark.createDataFrame([("x",), ("y",)], "name string"),
            },
            opts,
        )
        arm()
        w(
            spark,
            root,
            {
                "Person": names(spark, ["d", "e"]),
                "Knows": edges(spark, [("a", "b"), ("b", "d"), ("d", "e"), ("e", "a")]),
                "Likes": edges(spark, [("a", "x"), ("a", "y"), ("d", "x"), ("d", "y")]),
            },
            opts,
        )
        w(spark, root, {"Knows": edges(spark, [("a", "c"), ("c", "d")])}, opts)

    got = {p: run(tmp_path, p, scenario, no_driver_reads) for p in PATHS}
    assert got["driver"][0] is None and got["distributed"][0] is None, got
    for t in ("Person", "City", "Knows", "Likes"):
        cols = ["name"] if t == "City" else None
        a = read_table(spark, got["driver"][1].root, t)
        b = read_table(spark, got["distributed"][1].root, t)
        if cols:
            a, b = a.select(*cols), b.select(*cols)
        elif t != "Person":
            a, b = a.select("src", "dst"), b.select("src", "dst")
        else:
            a, b = a.drop("id"), b.drop("id")
        assert sorted(map(tuple, a.collect()), key=repr) == sorted(map(tuple, b.collect()), key=repr)
    assert len(read_table(spark, got["distributed"][1].root, "Knows").collect()) == 6


def test_a_proof_whose_table_moved_is_not_accepted(spark, tmp_path, monkeypatch, dist_runs):
    """I21: the checks run before the commit lease are pinned to the versions they read. Another
    writer deletes a node between them and the commit: the endpoint check that passed before is
    run again on the fresh snapshot inside the lease and refuses the edge (a stale pass would
    have committed a dangling edge)."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    opts = {"distributedCheckRows": "1"}
    w(spark, g.root, {"Person": names(spark, list("abc"))}, opts)
    no_task_proof(monkeypatch)
    dist_runs.clear()  # the load under test's runner comes first
    another_writer_before_the_lease(
        monkeypatch,
        lambda: write_table(
            spark.createDataFrame([("b",)], "name string"), g.root, "Person", mode="delete", engine="python"
        ),
    )
    with pytest.raises(DanglingEdgeError) as e:
        w(spark, g.root, {"Knows": edges(spark, [("a", "b"), ("c", "a")])}, opts)
    assert "dst 'b' not found in Person" in str(e.value)
    ends = [k for k in dist_runs[0].runs if k[0] == "endpoints"]
    assert len(ends) == 2 and ends[0][3] != ends[1][3]  # pinned to two Person versions: run twice
    assert sorted(r.name for r in read_table(spark, g.root, "Person").collect()) == ["a", "c"]
    assert read_table(spark, g.root, "Knows").count() == 0


def test_an_unmoved_proof_is_reused_inside_the_lease(spark, tmp_path, monkeypatch, dist_runs):
    """I21: nothing moved between the checks and the lease: every check ran once (before it)."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    opts = {"distributedCheckRows": "1"}
    w(spark, g.root, {"Person": names(spark, list("abc"))}, opts)
    no_task_proof(monkeypatch)
    dist_runs.clear()  # the load under test's runner comes first

    w(spark, g.root, {"Knows": edges(spark, [("a", "b"), ("c", "a")])}, opts)
    kinds = sorted(k[0] for k in dist_runs[0].runs)
    assert kinds == ["card", "endpoints"] and len(set(dist_runs[0].runs)) == len(dist_runs[0].runs)
    assert read_table(spark, g.root, "Knows").count() == 2


def test_jvm_staged_repeated_key_same_on_both_paths(jvm, tmp_path, no_driver_reads):
    """I21 on the JVM write path: a repeated key (the tasks' fingerprints find it, then the exact
    pass words it) gets the same error distributed."""

    def keys(root, opts, arm):
        arm()
        w(jvm, root, {"Person": names(jvm, ["a", "b", "a", "c", "b"])}, opts, engine="jvm")

    assert "given more than once" in same_error(tmp_path, jvm, keys, no_driver_reads, KeyConflictError)


@pytest.mark.slow
def test_jvm_staged_dangling_edges_same_on_both_paths(jvm, tmp_path, no_driver_reads):
    """I21 on the JVM write path: dangling edges (the tasks' probe found them, so no proof) get
    the same error distributed."""

    def ends(root, opts, arm):
        w(jvm, root, {"Person": names(jvm, list("abc"))}, opts, engine="jvm")
        arm()
        w(jvm, root, {"Knows": edges(jvm, [("a", "b"), ("x", "a"), ("b", "y")])}, opts, engine="jvm")

    assert "src 'x' not found" in same_error(tmp_path, jvm, ends, no_driver_reads, DanglingEdgeError)


def test_jvm_staged_distinct_keys_need_no_distributed_unique_job(
    jvm, tmp_path, dist_runs, no_driver_reads, monkeypatch
):
    """I15 before I21: a load above distributedCheckRows whose staging tasks fingerprinted its
    @key (City's only uniqueness rule) proves the key distinct from the fingerprints; no Spark job
    groups the keys, and no staged row is read on the driver. The fingerprints are compared once
    for the checks before the lease and inside it."""
    from omnigraph_spark.store import side_files

    compared = []
    real = side_files.fingerprints_distinct
    monkeypatch.setattr(side_files, "fingerprints_distinct", lambda *a, **kw: compared.append(a) or real(*a, **kw))
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    no_driver_reads()
    cities = jvm.createDataFrame([(f"c{i}",) for i in range(50)], "name string").repartition(3)
    w(jvm, g.root, {"City": cities}, {"distributedCheckRows": "1"}, engine="jvm")
    kinds = [k[0] for d in dist_runs for k in d.runs]
    assert dist_runs and "unique" not in kinds, kinds
    assert len(compared) == 1, compared
    assert read_table(jvm, g.root, "City").count() == 50


@pytest.fixture
def above_every_threshold(monkeypatch):
    """Every in-memory shortcut out of reach, as at a scale no executor or driver could hold:
    no executor indexes node ids (the tasks prove no endpoint and no fresh id) and the driver's
    fingerprint window holds two values (the key proof runs range by range)."""
    from omnigraph_spark.spark import jvm_write
    from omnigraph_spark.store import side_files

    monkeypatch.setattr(jvm_write, "MAX_INDEXED_IDS", 1)
    monkeypatch.setattr(side_files, "FINGERPRINT_WINDOW_BYTES", 16)


@pytest.mark.parametrize("case", ["repeated_key", "committed_key", "dangling"])
def test_jvm_staged_errors_above_every_in_memory_threshold(jvm, tmp_path, no_driver_reads, above_every_threshold, case):
    """I21 at scale: with no executor index and the fingerprint proof cut into ranges, the JVM
    write path's distributed checks raise the errors the in-memory checks raise, message for
    message."""

    def cities(ns):
        return jvm.createDataFrame([(n,) for n in ns], "name string").repartition(3)

    def scenario(root, opts, arm):
        w(
            jvm,
            root,
            {"Person": names(jvm, list("abc")), "City": cities([f"c{i}" for i in range(20)])},
            opts,
            engine="jvm",
        )
        arm()
        if case == "repeated_key":
            w(jvm, root, {"City": cities(["n1", "n2", "n1", "n3", "n2"])}, opts, engine="jvm")
        elif case == "committed_key":
            w(jvm, root, {"City": cities(["c3", "new", "c17"])}, opts, engine="jvm")
        else:
            w(
                jvm,
                root,
                {
                    "Likes": edges(
                        jvm,
                        [("a", "c1"), ("x", "c2"), ("a", "c99"), ("b", "c1"), ("b", "c2"), ("c", "c1"), ("c", "c2")],
                    )
                },
                opts,
                engine="jvm",
            )

    cls = DanglingEdgeError if case == "dangling" else KeyConflictError
    msg = same_error(tmp_path, jvm, scenario, no_driver_reads, cls)
    assert {
        "repeated_key": "given more than once",
        "committed_key": "already committed",
        "dangling": "src 'x' not found",
    }[case] in msg


def test_card_onto_an_empty_edge_table_is_proven_by_the_tasks_bound(jvm, tmp_path, dist_runs, caplog):
    """I16 with I21: an edge table with no committed row has no source with an edge, so the
    staging tasks' bound alone proves @card's max; no Spark job counts the sources, and the log
    says so as the in-memory path's does."""

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    opts = {"distributedCheckRows": "1"}
    with caplog.at_level(logging.INFO, logger="omnigraph_spark.spark.validate"):
        w(
            jvm,
            g.root,
            {
                "Person": names(jvm, list("abcd")),
                "Knows": edges(jvm, [("a", "b"), ("a", "c"), ("b", "c"), ("d", "a")], parts=1),
            },
            opts,
            engine="jvm",
        )
    kinds = [k[0] for d in dist_runs for k in d.runs]
    assert dist_runs and "card" not in kinds, kinds
    assert "edge:Knows @card: at most 2 edges per source <= max 2, proven without counting" in caplog.text
    assert read_table(jvm, g.root, "Knows").count() == 4


# -- integrity across writes (I18), each part in memory or as Spark jobs ------------------------


def _seed_graph(spark, root, opts):
    """Six people, two cities; Knows a->b, b->c, c->a, d->b, e->b, f->e; everyone but f likes
    both cities (Likes is @card(2..3))."""
    w(
        spark,
        root,
        {"Person": names(spark, list("abcdef")), "City": spark.createDataFrame([("x",), ("y",)], "name string")},
        opts,
    )
    w(
        spark,
        root,
        {
            "Knows": edges(
                spark,
                [
                    ("k1", "a", "b"),
                    ("k2", "b", "c"),
                    ("k3", "c", "a"),
                    ("k4", "d", "b"),
                    ("k5", "e", "b"),
                    ("k6", "f", "e"),
                ],
                with_id=True,
            ),
            "Likes": edges(spark, [(p, c) for p in "abcde" for c in "xy"]),
        },
        opts,
    )


def _result(r):
    return None if r is None else sorted((t.table_key, t.rows_deleted, t.keys_missing) for t in r.tables)


def _delete_cases(spark):
    """case -> scenario(root, opts): the load under test, on the seeded graph (returns its LoadResult)."""

    def frame(rows, schema):
        return spark.createDataFrame(rows, schema).repartition(2)

    cascade = {"cascade": "true"}
    return {
        # nodes by @key, one matching nothing: their Knows and Likes edges cascade
        "node_delete": lambda root, opts: write_table(
            names(spark, ["b", "zz", "f"]), root, "Person", mode="delete", engine="python", options=opts
        ),
        "edge_delete_by_ends": lambda root, opts: write_table(
            frame([("a", "b"), ("b", "a"), ("f", "e"), ("a", "b")], "src string, dst string"),
            root,
            "Knows",
            mode="delete",
            engine="python",
            options=opts,
        ),
        "edge_delete_by_id": lambda root, opts: write_graph(
            root, {"Knows": frame([("k2",), ("k9",)], "id string")}, mode="delete", engine="python", options=opts
        ),
        # a leaves one Likes edge: below its @card min
        "card_min": lambda root, opts: write_table(
            frame([("a", "x")], "src string, dst string"), root, "Likes", mode="delete", engine="python", options=opts
        ),
        # the cascade of c's delete leaves no source of Likes below its min (c's own go with it)
        "node_delete_keeps_card": lambda root, opts: write_table(
            names(spark, ["c"]), root, "Person", mode="delete", engine="python", options=opts
        ),
        # a, c, f go: four Knows and four Likes edges orphaned (the message names the first three)
        "overwrite_orphans": lambda root, opts: w(
            spark, root, {"Person": names(spark, list("bde"))}, opts, mode="overwrite"
        ),
        "overwrite_cascade": lambda root, opts: w(
            spark,
            root,
            {"Person": names(spark, list("abdef")), "City": spark.createDataFrame([("x",), ("y",)], "name string")},
            {**opts, **cascade},
            mode="overwrite",
        ),
        # write_graph's deletes=: b deleted and written again stays (with its edges); d goes
        "deletes_beside_writes": lambda root, opts: write_graph(
            root,
            {"Person": names(spark, ["b", "g"]), "Knows": edges(spark, [("g", "a")])},
            mode="merge",
            engine="python",
            deletes={"Person": names(spark, ["b", "d"])},
            options=opts,
        ),
        "load_points_at_deleted": lambda root, opts: write_graph(
            root,
            {"Knows": edges(spark, [("b", "a"), ("e", "d"), ("d", "a"), ("f", "a"), ("c", "f")], parts=1)},
            engine="python",
            deletes={"Person": names(spark, ["d", "f"])},
            options=opts,
        ),
    }


# case -> None (commits) or (the error, a part of its message)
I18_CASES = {
    "node_delete": None,
    "edge_delete_by_ends": None,
    "edge_delete_by_id": None,
    "card_min": (CardinalityViolationError, "source 'a' has 1 edges (min 2)"),
    "node_delete_keeps_card": None,
    "overwrite_orphans": (DanglingEdgeError, "Knows: 4 edge(s), e.g. "),
    "overwrite_cascade": None,
    "deletes_beside_writes": None,
    "load_points_at_deleted": (DanglingEdgeError, "4 edge(s) of this load point at nodes it deletes, e.g. "),
}
SLOW_I18_CASES = {
    "edge_delete_by_id",
    "card_min",
    "node_delete_keeps_card",
    "overwrite_cascade",
    "load_points_at_deleted",
}
# the parts of I18 each case runs as Spark jobs on the distributed path
I18_PARTS = {
    "node_delete": {"delete", "incident", "card_after_delete"},
    "edge_delete_by_ends": {"delete"},
    "edge_delete_by_id": {"delete"},
    "card_min": {"delete", "card_after_delete"},
    "node_delete_keeps_card": {"delete", "incident", "card_after_delete"},
    "overwrite_orphans": {"orphaned"},
    "overwrite_cascade": {"orphaned", "card_after_delete"},
    "deletes_beside_writes": {"delete", "restaged", "staged_pointing_at", "incident"},
    "load_points_at_deleted": {"delete", "staged_pointing_at"},
}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_I18_CASES else c for c in sorted(I18_CASES)]
)
def test_deletes_and_overwrites_same_on_both_paths(spark, tmp_path, no_driver_reads, dist_runs, case):
    """I18 with I21: every part of a delete or node overwrite (resolving the keys, the edges of
    deleted nodes, the load's edges onto them, the edges an overwrite orphans, @card's min after)
    gives the same error, message for message, or deletes the same rows with the same counts,
    in the driver's memory and as Spark jobs. On the distributed path the driver's column readers
    fail, so no part read a committed or staged table there, and the parts ran as Spark jobs."""
    scenario = _delete_cases(spark)[case]
    got = {}
    for path in PATHS:
        g = Graph.init(str(tmp_path / path), SCHEMA)
        opts = {"distributedCheckRows": str(PATHS[path])}
        _seed_graph(spark, g.root, {"distributedCheckRows": "0"})
        dist_runs.clear()
        if path == "distributed":
            no_driver_reads()
        err = result = None
        try:
            result = scenario(g.root, opts)
        except OmnigraphError as e:
            err = e
        parts = {k[0] for d in dist_runs if d is not None for k in d.runs}
        got[path] = (err, _result(result), {t: rows(spark, g.root, t) for t in ("Person", "Knows", "Likes")}, parts)
    (e1, r1, rows1, parts1), (e2, r2, rows2, parts2) = got["driver"], got["distributed"]
    if I18_CASES[case] is None:
        assert e1 is None and e2 is None, (e1, e2)
        assert r1 == r2
    else:
        cls, words = I18_CASES[case]
        assert isinstance(e1, cls) and words in str(e1), e1
        assert type(e2) is type(e1) and str(e2) == str(e1) and e2.code == e1.code
    assert rows1 == rows2
    assert not parts1
    assert I18_PARTS[case] <= parts2, parts2


def test_each_part_of_a_delete_picks_its_path_by_the_rows_it_reads(spark, tmp_path, monkeypatch, dist_runs):
    """I18 with I21, per part: with the threshold at 8 rows, a delete of Person (6 committed rows)
    resolves its keys in memory, the cascade into Knows (6 edges) reads them into the driver,
    and the cascade into Likes (10 edges) and the @card recheck of Likes run as Spark jobs: the
    driver never reads Likes' committed columns."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    _seed_graph(spark, g.root, {"distributedCheckRows": "0"})
    read = []
    real = validate._read_committed
    monkeypatch.setattr(
        validate, "_read_committed", lambda graph, snap, key, cols: read.append(key) or real(graph, snap, key, cols)
    )
    dist_runs.clear()
    r = write_table(
        names(spark, ["b"]), g.root, "Person", mode="delete", engine="python", options={"distributedCheckRows": "8"}
    )
    assert _result(r) == [("edge:Knows", 4, 0), ("edge:Likes", 2, 0), ("node:Person", 1, 0)]
    assert sorted(set(read)) == ["edge:Knows", "node:Person"]
    assert sorted((k[0], k[1]) for d in dist_runs for k in d.runs) == [
        ("card_after_delete", "edge:Likes"),
        ("incident", "edge:Likes"),
    ]
    assert rows(spark, g.root, "Likes") == sorted([(p, c) for p in "acde" for c in "xy"], key=repr)


I18_KINDS = {"delete", "restaged", "staged_pointing_at", "incident", "orphaned", "card_after_delete"}


@pytest.fixture
def lease_taken(monkeypatch, dist_runs):
    """How many checks the load under test's runner (``dist_runs[0]``) had run each time a commit
    took the graph's commit lease."""
    import contextlib

    from omnigraph_spark.store import lease

    real_hold = lease.hold
    taken = []

    @contextlib.contextmanager
    def hold(*a, **kw):
        with real_hold(*a, **kw) as token:
            taken.append(len(dist_runs[0].runs) if dist_runs and dist_runs[0] is not None else None)
            yield token

    monkeypatch.setattr(lease, "hold", hold)
    return taken


@pytest.mark.parametrize("case", ["node_delete", "card_min"])
def test_a_deletes_spark_jobs_run_before_the_commit_lease(spark, tmp_path, dist_runs, lease_taken, case):
    """I18 with I21: the parts of a delete that run as Spark jobs (resolving its keys, the
    cascade into each edge type, @card's min after) run before the commit lease is taken, on the
    branch's snapshot; inside the lease, where nothing moved, the validator reuses each answer
    (or raises the error found before, at its turn) and runs no Spark job."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    _seed_graph(spark, g.root, {"distributedCheckRows": "0"})
    dist_runs.clear()
    lease_taken.clear()
    err = result = None
    try:
        result = _delete_cases(spark)[case](g.root, {"distributedCheckRows": "1"})
    except OmnigraphError as e:
        err = e
    runs = dist_runs[0].runs
    assert len(lease_taken) == 1 and lease_taken[0] is not None, lease_taken
    before, inside = runs[: lease_taken[0]], runs[lease_taken[0] :]
    assert I18_PARTS[case] <= {k[0] for k in before}, before
    assert not inside, inside
    assert len(set(runs)) == len(runs)
    if case == "node_delete":
        assert err is None, err
        assert _result(result) == [("edge:Knows", 5, 0), ("edge:Likes", 2, 0), ("node:Person", 2, 1)]
    else:
        assert isinstance(err, CardinalityViolationError) and "source 'a' has 1 edges (min 2)" in str(err), err
        assert rows(spark, g.root, "Likes") == sorted([(p, c) for p in "abcde" for c in "xy"], key=repr)


def test_a_delete_whose_edge_table_moved_before_the_lease_cascades_on_the_fresh_table(
    spark, tmp_path, monkeypatch, dist_runs
):
    """I18 with I21: another writer adds an edge onto a node between the delete's checks before
    the lease and the commit: the cascade into that edge type, proven on the older version, runs
    again inside the lease on the fresh one and deletes the new edge too (a stale answer would
    leave it dangling); the parts whose tables did not move are reused."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    _seed_graph(spark, g.root, {"distributedCheckRows": "0"})
    dist_runs.clear()  # the load under test's runner comes first
    another_writer_before_the_lease(
        monkeypatch,
        lambda: write_graph(
            g.root,
            {"Knows": edges(spark, [("k7", "a", "b")], parts=1, with_id=True)},
            engine="python",
            options={"distributedCheckRows": "0"},
        ),
    )
    r = write_table(
        names(spark, ["b"]), g.root, "Person", mode="delete", engine="python", options={"distributedCheckRows": "1"}
    )
    assert _result(r) == [("edge:Knows", 5, 0), ("edge:Likes", 2, 0), ("node:Person", 1, 0)]
    assert rows(spark, g.root, "Knows") == sorted([("c", "a"), ("f", "e")], key=repr)
    parts = [k for k in dist_runs[0].runs if k[0] in I18_KINDS]
    knows = [k for k in parts if k[:2] == ("incident", "edge:Knows")]
    assert len(knows) == 2 and knows[0][2] != knows[1][2]  # pinned to two Knows versions: run twice
    others = sorted((k[0], k[1]) for k in parts if k[:2] != ("incident", "edge:Knows"))
    assert others == [("card_after_delete", "edge:Likes"), ("delete", "node:Person"), ("incident", "edge:Likes")]


# -- a merge's commit: the committed rows it replaces, found by the executors --------------------


@pytest.fixture
def no_driver_merge_reads(monkeypatch, no_driver_reads):
    """``no_driver_reads``, and the commit must not read a merge's staged ids on the driver."""
    from omnigraph_spark.store import writes

    def arm():
        no_driver_reads()

        def refuse(*a, **kw):
            raise AssertionError("the driver read a merge's ids")

        monkeypatch.setattr(writes._tables, "read_staged_columns", refuse)

    return arm


MERGES = {
    # b and d replaced, g new: the committed b and d get deletion files
    "some": (list("abcdef"), [("b", "b@new", None, 7), ("d", None, "dd", None), ("g", "g@x", None, 1)]),
    # every committed row replaced: each fragment is emptied and removed
    "all": (list("abc"), [(n, f"{n}@new", None, None) for n in "cab"]),
}


@pytest.mark.parametrize(
    "case,engine,finder",
    [
        ("all", "python", "index"),
        ("some", "python", "index"),
        ("some", "jvm", "index"),
        ("all", "python", "join"),
        ("some", "jvm", "join"),
    ],
)
def test_a_merge_replaces_the_same_rows_on_both_paths_and_the_driver_reads_no_id(
    spark, tmp_path, request, monkeypatch, no_driver_merge_reads, dist_runs, case, engine, finder
):
    """I21 for a merge's commit: above the threshold the executors find the committed rows whose
    ids the merge stages and write their deletion files; the driver reads no id (the commit's
    own reader fails if asked) and the graph holds the same rows as after the in-memory merge,
    an edge merge by id included, from the Python and the JVM staging tasks alike. The rows are
    found by the executors' index of the staged ids (the shim's ``MergeReplace``) or, when that
    fails (here: made to), by a Spark join."""
    if engine == "jvm" or finder == "index":
        request.getfixturevalue("jvm")
    real, used, found = dist_checks.DistChecks._replaced_in_jvm, [], []

    def in_jvm(self, *a):
        used.append(a[-1])
        if finder == "join":
            raise RuntimeError("too many node ids to index in this executor (test)")
        got = real(self, *a)
        found.append(got.rows)
        return got

    monkeypatch.setattr(dist_checks.DistChecks, "_replaced_in_jvm", in_jvm)
    seed, new = MERGES[case]

    def scenario(root, opts, arm):
        w(spark, root, {"Person": names(spark, seed)}, {"distributedCheckRows": "0"})
        w(
            spark,
            root,
            {"Knows": edges(spark, [("k1", "a", "b"), ("k2", "b", "c")], with_id=True)},
            {"distributedCheckRows": "0"},
        )
        dist_runs.clear()
        arm()
        w(
            spark,
            root,
            {"Person": people(spark, new), "Knows": edges(spark, [("k2", "c", "a"), ("k3", "a", "c")], with_id=True)},
            opts,
            mode="merge",
            engine=engine,
        )

    got = {p: run(tmp_path, p, scenario, no_driver_merge_reads) for p in PATHS}
    assert got["driver"][0] is None and got["distributed"][0] is None, got
    for t in ("Person", "Knows"):
        assert rows(spark, got["driver"][1].root, t) == rows(spark, got["distributed"][1].root, t)
    people_after = rows(spark, got["distributed"][1].root, "Person")
    assert len(people_after) == len(set(seed) | {r[0] for r in new})
    assert {r for r in people_after if r[0] in {n[0] for n in new}} == set(new)
    assert rows(spark, got["distributed"][1].root, "Knows") == [("a", "b"), ("a", "c"), ("c", "a")]
    kinds = [k[:2] for k in dist_runs[0].runs if k[0] == "replaced"]
    assert kinds == [("replaced", "edge:Knows"), ("replaced", "node:Person")], dist_runs[0].runs
    assert len(used) == 2, used  # each table's rows were asked of the index first
    if finder == "index":  # and found there: k2 of Knows, and the Person rows the merge names
        assert sorted(found) == sorted([1, len(set(seed) & {r[0] for r in new})]), found


def test_a_merges_replaced_rows_are_found_again_when_the_table_moved_before_the_lease(
    spark, tmp_path, monkeypatch, dist_runs, lease_taken
):
    """I21 for a merge's commit: the rows it replaces are found before the commit lease, pinned
    to the version read. Another writer appends the id the merge stages in between: inside the
    lease the merge's rows are found again on the fresh version, so that row is replaced too (a
    stale answer would leave the id twice). Unmoved, they are found once, before the lease."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    w(spark, g.root, {"Person": names(spark, list("abc"))}, {"distributedCheckRows": "0"})
    dist_runs.clear()
    lease_taken.clear()
    w(spark, g.root, {"Person": people(spark, [("b", "b@1", None, None)])}, {"distributedCheckRows": "1"}, mode="merge")
    runs = [k for k in dist_runs[0].runs if k[0] == "replaced"]
    assert len(runs) == 1 and len(lease_taken) == 1 and lease_taken[0] >= dist_runs[0].runs.index(runs[0]) + 1

    dist_runs.clear()
    another_writer_before_the_lease(
        monkeypatch,
        lambda: write_table(
            people(spark, [("d", "d@other", None, None)], parts=1),
            g.root,
            "Person",
            mode="append",
            engine="python",
            options={"distributedCheckRows": "0"},
        ),
    )
    w(
        spark,
        g.root,
        {"Person": people(spark, [("d", "d@mine", None, None), ("c", "c@mine", None, None)])},
        {"distributedCheckRows": "1"},
        mode="merge",
    )
    runs = [k for k in dist_runs[0].runs if k[0] == "replaced"]
    assert len(runs) == 2 and runs[0][3] != runs[1][3], runs  # pinned to two Person versions
    assert rows(spark, g.root, "Person") == [
        ("a", None, None, None),
        ("b", "b@1", None, None),
        ("c", "c@mine", None, None),
        ("d", "d@mine", None, None),
    ]


def test_a_merge_that_fails_after_its_rows_were_found_changes_nothing(spark, tmp_path, monkeypatch):
    """I1 with I21: the executors wrote the replaced rows' deletion files before the commit
    lease; the load then fails before its sidecar. No commit references those files: the graph
    reads as before, and the same merge run again lands once (found again on the same version,
    with new files)."""
    from omnigraph_spark.errors import FailpointError
    from omnigraph_spark.store import failpoints

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    w(spark, g.root, {"Person": names(spark, list("abcd"))}, {"distributedCheckRows": "0"})
    before = rows(spark, g.root, "Person")
    merge = people(spark, [("b", "b@1", None, None), ("e", None, None, None)])
    monkeypatch.setenv(failpoints.ENV, "before_sidecar:raise")
    with pytest.raises(Exception) as e:
        w(spark, g.root, {"Person": merge}, {"distributedCheckRows": "1"}, mode="merge")
    assert isinstance(e.value, FailpointError) or "before_sidecar" in str(e.value), e.value
    monkeypatch.delenv(failpoints.ENV)
    assert rows(spark, g.root, "Person") == before and len(Graph.open(g.root).log()) == 2
    w(spark, g.root, {"Person": merge}, {"distributedCheckRows": "1"}, mode="merge")
    assert rows(spark, g.root, "Person") == [
        ("a", None, None, None),
        ("b", "b@1", None, None),
        ("c", None, None, None),
        ("d", None, None, None),
        ("e", None, None, None),
    ]


@pytest.mark.parametrize("finder", ["index", "join"])
def test_a_merge_into_a_fragment_with_deletions_keeps_them(spark, tmp_path, monkeypatch, finder):
    """A fragment that already has a deletion file (an earlier merge replaced a row in it) gets
    a new one holding the earlier deletions and the new ones, by either finder: the row the first
    merge replaced stays replaced."""
    if finder == "join":

        def no_index(self, *a):
            raise RuntimeError("too many node ids to index in this executor (test)")

        monkeypatch.setattr(dist_checks.DistChecks, "_replaced_in_jvm", no_index)
    else:
        from tests.shim import need_shim

        need_shim(spark)
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    opts = {"distributedCheckRows": "1"}
    w(
        spark,
        g.root,
        {"Person": people(spark, [(n, None, None, None) for n in "abcd"], parts=1)},
        {"distributedCheckRows": "0"},
    )
    w(spark, g.root, {"Person": people(spark, [("a", "a@1", None, None)], parts=1)}, opts, mode="merge")
    w(spark, g.root, {"Person": people(spark, [("c", "c@2", None, None)], parts=1)}, opts, mode="merge")
    assert rows(spark, g.root, "Person") == [
        ("a", "a@1", None, None),
        ("b", None, None, None),
        ("c", "c@2", None, None),
        ("d", None, None, None),
    ]
