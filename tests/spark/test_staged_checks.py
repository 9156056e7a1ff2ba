"""Load-wide edge checks done by the JVM staging tasks (invariant I15): the tasks probe every
endpoint against the node ids of the snapshot the job started from and bound the edges per
source; the driver skips its own endpoint probe / @card count only when that proof still holds
for the snapshot it commits on. Whatever the tasks find, every error comes from the driver's
exact checks, so messages and the unchanged graph are those of the Python path."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from omnigraph_spark import Graph, read_table, write_graph, write_table
from omnigraph_spark.errors import CardinalityViolationError, DanglingEdgeError, UniqueViolationError
from omnigraph_spark.spark import graph_io, jvm_write, validate, writer

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]

SCHEMA = """
node Person {
    name: String @key
}
node City {
    name: String @key
}
edge Knows: Person -> Person @card(0..3) {
    since: I64?
}
edge LivesIn: Person -> City
"""

#: ids a byte-level hash set must get exactly right: multi-byte UTF-8, quotes, one long id,
#: ids that are prefixes of each other, an id with a NUL
NAMES = ["ann", "bob", "zoë", "o'hara", "名前", "x" * 300, "ab", "abc", "a\x00b", "Ann"]


@pytest.fixture
def calls(monkeypatch):
    """How often the driver ran its exact endpoint, @card and uniqueness checks."""
    seen = {"endpoints": 0, "card": 0}

    def count(name, fn):
        def wrapped(*a, **kw):
            seen[name] += 1
            return fn(*a, **kw)

        return wrapped

    # each exact check on either of its paths: in memory, or bounded (index probes, buckets: I24)
    monkeypatch.setattr(validate, "check_endpoints", count("endpoints", validate.check_endpoints))
    monkeypatch.setattr(validate, "_endpoints_bounded", count("endpoints", validate._endpoints_bounded))
    monkeypatch.setattr(validate, "_check_card", count("card", validate._check_card))
    monkeypatch.setattr(validate, "check_unique", count("unique", validate.check_unique))
    monkeypatch.setattr(validate._bounded, "unique", count("unique", validate._bounded.unique))
    seen["unique"] = 0
    return seen


@pytest.fixture
def jvm_key_hashes(monkeypatch):
    """The fingerprints the JVM tasks of this test's loads write, one array per task file."""
    import numpy as np

    real, parts = jvm_write.stage_jvm, []

    def capture(*a, **kw):
        out = real(*a, **kw)
        parts.extend(np.fromfile(f, dtype="<u8") for s in out for f in s.key_hashes or ())
        return out

    monkeypatch.setattr(jvm_write, "stage_jvm", capture)
    return parts


@pytest.fixture
def dangling(monkeypatch):
    """The rows with an unknown endpoint each JVM edge task of this test's loads counted."""
    staged, counts = jvm_write.stage_jvm, []

    def spy(*a, **kw):
        out = staged(*a, **kw)
        counts.extend(s.ends.dangling for s in out if s.ends is not None)
        return out

    monkeypatch.setattr(graph_io._jvm_write, "stage_jvm", spy)
    return counts


def people(spark, names=NAMES):
    return spark.createDataFrame([(n,) for n in names], "name string")


def knows(spark, pairs, parts=2):
    return spark.createDataFrame(
        [(s, d, i) for i, (s, d) in enumerate(pairs)], "src string, dst string, since long"
    ).repartition(parts)


def ring(names=NAMES):
    return [(a, b) for a, b in zip(names, names[1:] + names[:1])]


def edge_rows(spark, root, type_name="Knows"):
    return sorted((r.src, r.dst) for r in read_table(spark, root, type_name).select("src", "dst").collect())


def test_endpoints_proven_while_staging_skip_the_driver_probe(jvm, tmp_path, calls, caplog):
    """Edges onto committed nodes: the tasks' probe (exact, byte-level, hostile ids) finds every
    endpoint, the driver neither probes nor counts, and the edges land."""
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.validate")
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine="jvm")
    res = write_table(knows(jvm, ring()), g.root, "Knows", engine="jvm")
    assert res.tables[0].rows_written == len(NAMES)
    assert calls == {"endpoints": 0, "card": 0, "unique": 0}
    assert any("edge:Knows endpoints: proven while staging" in r.getMessage() for r in caplog.records)
    assert any("edge:Knows @card: at most" in r.getMessage() for r in caplog.records)
    assert edge_rows(jvm, g.root) == sorted(ring())


def test_a_committed_node_index_is_reused_only_while_the_node_rows_stay(jvm, tmp_path, calls):
    """I15 with the executor's index kept across loads (keyed by the node table's data and
    deletion files): edge appends onto the same committed nodes build the index once and stay
    proven; once the node rows change, a new index is built, and an edge to a node that is gone
    is never proven by the old one (the driver's exact check refuses it)."""
    builds = jvm.sparkContext._jvm.io.omnigraph.spark.LanceFragmentSink.nodeIndexBuilds
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm, ["a", "b", "c"]), g.root, "Person", engine="jvm")
    n0 = builds()
    write_table(knows(jvm, [("a", "b")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 + 1
    write_table(knows(jvm, [("b", "c")]), g.root, "Knows", engine="jvm")
    write_table(knows(jvm, [("c", "a")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 + 1 and calls["endpoints"] == 0  # reused, and still proven
    write_table(people(jvm, ["a", "b", "c", "d"]), g.root, "Person", mode="overwrite", engine="jvm")
    write_table(knows(jvm, [("d", "a")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 + 2 and calls["endpoints"] == 0  # new rows, new index: 'd' proven
    write_table(people(jvm, ["a", "b", "c", "d", "e"]), g.root, "Person", mode="overwrite", engine="jvm")
    write_table(knows(jvm, [("a", "c")]), g.root, "Knows", engine="jvm")  # an index holding 'e'
    write_table(people(jvm, ["a", "b", "c", "d"]), g.root, "Person", mode="overwrite", engine="jvm")
    with pytest.raises(DanglingEdgeError, match="'e'"):  # never proven by the index that held 'e'
        write_table(knows(jvm, [("e", "a")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 + 4 and calls["endpoints"] == 1
    assert edge_rows(jvm, g.root) == [("a", "b"), ("a", "c"), ("b", "c"), ("c", "a"), ("d", "a")]


def _kept_files(root, want, timeout=30.0):
    """The kept index files under ``root`` once there are ``want`` of them (an executor writes
    them in a thread of its own, after the job that built them)."""
    import os
    import time

    from omnigraph_spark.store.layout import RootPaths

    d = RootPaths(root).id_indexes
    deadline = time.monotonic() + timeout
    while True:
        names = sorted(n for n in (os.listdir(d) if os.path.isdir(d) else []) if n.endswith(".ids"))
        if len(names) >= want or time.monotonic() > deadline:
            return [os.path.join(d, n) for n in names]
        time.sleep(0.1)


def test_I15_a_kept_index_file_is_read_instead_of_built_only_for_the_same_rows(
    jvm, tmp_path, calls, dangling, monkeypatch
):
    """I15 with the executors' node-id index kept on disk (``_omnigraph_spark/id_indexes``,
    keyed by the rows' data and deletion files): the index a load builds from its staged node
    files is the committed table's once it lands, so the next loads in a fresh JVM (here: the
    in-memory indexes forgotten) read it instead of building, stay exact (a dangling edge and a
    repeated id are still found and named), ignore and replace a damaged file, and build anew
    when the node rows change."""
    monkeypatch.setattr(jvm_write, "KEEP_INDEX_MIN_IDS", 1)
    sink = jvm.sparkContext._jvm.io.omnigraph.spark.LanceFragmentSink
    builds = sink.nodeIndexBuilds
    g = Graph.init(str(tmp_path / "g"), SCHEMA.replace("@card(0..3)", ""))
    write_graph(g.root, {"Person": people(jvm), "Knows": knows(jvm, ring())}, engine="jvm")
    (kept,) = _kept_files(g.root, 1)
    sink.forgetNodeIndexes()
    n0 = builds()
    write_table(knows(jvm, [("ann", "名前")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 and calls["endpoints"] == 0 and dangling[-2:] == [0, 0]  # read, and proven
    sink.forgetNodeIndexes()
    with pytest.raises(DanglingEdgeError, match="'nobody'"):
        write_table(knows(jvm, [("ann", "nobody"), ("bob", "ann")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 and sum(dangling[-2:]) == 1 and calls["endpoints"] == 1
    sink.forgetNodeIndexes()
    with pytest.raises(UniqueViolationError, match="o'hara"):  # the strict append's probe reads it too
        write_table(people(jvm, ["new", "o'hara"]), g.root, "Person", engine="jvm")
    assert builds() == n0
    with open(kept, "r+b") as f:  # one flipped byte in the slots: the checksum refuses the file
        f.seek(os.path.getsize(kept) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    sink.forgetNodeIndexes()
    write_table(knows(jvm, [("bob", "zoë")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 + 1 and calls["endpoints"] == 1  # built again, proven
    assert _kept_files(g.root, 1) == [kept]  # and kept again under the same name
    write_table(people(jvm, ["new"]), g.root, "Person", engine="jvm")  # other node rows, another key
    sink.forgetNodeIndexes()
    write_table(knows(jvm, [("new", "ann")]), g.root, "Knows", engine="jvm")
    assert builds() == n0 + 2 and calls["endpoints"] == 1
    assert len(_kept_files(g.root, 2)) == 2
    assert edge_rows(jvm, g.root) == sorted(ring() + [("ann", "名前"), ("bob", "zoë"), ("new", "ann")])


def test_the_tasks_probe_is_exact_at_every_id_length(jvm, tmp_path, calls, dangling):
    """The index keeps ids of up to 15 bytes inside its slots and longer ones in a byte arena:
    whatever the length, the tasks count exactly the rows whose endpoint is not a node id, near
    misses included (last byte changed, one byte cut, a NUL appended, multi-byte UTF-8)."""
    ids = [f"{n:02d}" + "é" * ((n - 2) // 2) + "x" * ((n - 2) % 2) for n in range(2, 41)]  # n bytes
    assert sorted(len(i.encode()) for i in ids) == list(range(2, 41))
    near = [
        v
        for i in ids
        if len(i.encode()) in (6, 7, 8, 9, 14, 15, 16, 17, 26)
        for v in (i[:-1] + chr(ord(i[-1]) ^ 1), i[:-1], i + "\x00")
    ]
    assert not set(near) & set(ids)
    g = Graph.init(str(tmp_path / "g"), SCHEMA.replace("@card(0..3)", ""))
    write_table(people(jvm, ids), g.root, "Person", engine="jvm")
    write_table(knows(jvm, [(i, j) for i in ids for j in ids[::7]], parts=3), g.root, "Knows", engine="jvm")
    assert dangling == [0, 0, 0] and calls["endpoints"] == 0
    dangling.clear()
    with pytest.raises(DanglingEdgeError, match=rf"\[0 dangling src, {len(near)} dangling dst\]"):
        write_table(
            knows(jvm, [(ids[k % len(ids)], v) for k, v in enumerate(near)] + ring(ids), parts=3),
            g.root,
            "Knows",
            engine="jvm",
        )
    assert sum(dangling) == len(near) and len(dangling) == 3
    assert calls["endpoints"] == 1
    assert len(edge_rows(jvm, g.root)) == len(ids) * len(ids[::7])


def _ulids(n, seed=5):
    """``n`` distinct ULIDs as minted (26 upper-case Crockford digits), seeded."""
    import random

    import ulid

    rnd = random.Random(seed)
    return [str(ulid.ULID.from_int((1_700_000_000_000 + i) << 80 | rnd.getrandbits(80))) for i in range(n)]


def _ulid_near_misses(ids):
    """Values a 128-bit ULID slot must never take for one of ``ids``: other texts of the same
    number (lower case, O for 0, I and L for 1), a first digit past 7, one character cut, added
    or changed, the all-zero ULID, and a ULID that is not among them."""
    a = ids[0]
    assert a[0] == "0" and "1" in a
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    near = [
        a.lower(),
        "O" + a[1:],
        a.replace("1", "I", 1),
        a.replace("1", "L", 1),
        "8" + a[1:],
        a[:-1],
        a + "0",
        a[:-1] + alphabet[(alphabet.index(a[-1]) + 1) % 32],
        "0" * 26,
        _ulids(1, seed=99)[0],
    ]
    assert not set(near) & set(ids) and len(set(near)) == len(near)
    return near


def test_minted_ulid_ids_take_ulid_slots_and_stay_exact(jvm, tmp_path, calls, dangling, monkeypatch):
    """Node ids that are all minted ULIDs are indexed as their 128 bits (no byte arena): the
    endpoints are proven while staging, and every other text of those numbers, or near one,
    is counted dangling in the tasks and named by the driver; the kept index file keeps that
    layout and is read back exact."""
    monkeypatch.setattr(jvm_write, "KEEP_INDEX_MIN_IDS", 1)
    sink = jvm.sparkContext._jvm.io.omnigraph.spark.LanceFragmentSink
    ids = _ulids(40)
    near = _ulid_near_misses(ids)
    g = Graph.init(str(tmp_path / "g"), SCHEMA.replace("@card(0..3)", ""))
    u0, b0 = sink.nodeIndexUlidBuilds(), sink.nodeIndexBuilds()
    write_graph(g.root, {"Person": people(jvm, ids), "Knows": knows(jvm, ring(ids), parts=3)}, engine="jvm")
    assert sink.nodeIndexUlidBuilds() == u0 + 1 and sink.nodeIndexBuilds() == b0 + 1
    assert dangling == [0, 0, 0] and calls["endpoints"] == 0
    _kept_files(g.root, 1)
    for fresh_jvm in (False, True):  # the index in memory, then read from its kept file
        if fresh_jvm:
            sink.forgetNodeIndexes()
        dangling.clear()
        with pytest.raises(DanglingEdgeError, match=rf"\[0 dangling src, {len(near)} dangling dst\]"):
            write_table(
                knows(jvm, [(ids[k], v) for k, v in enumerate(near)] + ring(ids), parts=3),
                g.root,
                "Knows",
                engine="jvm",
            )
        assert sum(dangling) == len(near) and len(dangling) == 3
        assert sink.nodeIndexBuilds() == b0 + 1  # neither load built the index again
    assert calls["endpoints"] == 2
    assert edge_rows(jvm, g.root) == sorted(ring(ids))


def test_an_id_that_is_no_ulid_after_a_batch_of_ulids_indexes_the_ids_again_as_bytes(jvm, tmp_path, calls, dangling):
    """The first batch of ids a build reads (262,144 rows of a part) decides its layout; one
    that is all ULIDs followed by another id starts the build again with bytes, which stays
    exact for both kinds of id."""
    ids = _ulids(262_144) + ["ann"]
    g = Graph.init(str(tmp_path / "g"), SCHEMA.replace("@card(0..3)", ""))
    write_table(people(jvm, ids).coalesce(1), g.root, "Person", engine="jvm")  # one fragment, in this order
    sink = jvm.sparkContext._jvm.io.omnigraph.spark.LanceFragmentSink
    again, ulid_builds = sink.nodeIndexBuildsAgainAsBytes(), sink.nodeIndexUlidBuilds()
    pairs = [("ann", ids[0]), (ids[-2], "ann"), (ids[7], ids[8])]
    write_table(knows(jvm, pairs, parts=1), g.root, "Knows", engine="jvm")
    assert sink.nodeIndexBuildsAgainAsBytes() == again + 1 and sink.nodeIndexUlidBuilds() == ulid_builds
    assert dangling == [0] and calls["endpoints"] == 0
    dangling.clear()
    with pytest.raises(DanglingEdgeError, match=r"\[0 dangling src, 2 dangling dst\]"):
        write_table(
            knows(jvm, [("ann", "Ann"), ("ann", ids[3].lower())] + pairs, parts=1), g.root, "Knows", engine="jvm"
        )
    assert dangling == [2] and calls["endpoints"] == 1
    assert edge_rows(jvm, g.root) == sorted(pairs)


def test_the_index_is_read_in_parts_and_honours_deleted_nodes(jvm, tmp_path, calls, dangling):
    """The tasks' index is read in parts, one per committed fragment and staged node file, by
    whichever threads wait for it: with the node table in three fragments (one with a deleted
    row) and more nodes staged in the same load, every live endpoint is proven in the tasks, and
    an edge to the deleted node is counted dangling there and refused by the driver."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA.replace("@card(0..3)", ""))
    for chunk in (NAMES[:3], NAMES[3:6], NAMES[6:]):
        write_table(people(jvm, chunk), g.root, "Person", engine="jvm")
    write_table(people(jvm, ["bob"]), g.root, "Person", mode="delete")
    live = [n for n in NAMES if n != "bob"] + ["new1", "new2"]
    write_graph(
        g.root, {"Person": people(jvm, ["new1", "new2"]), "Knows": knows(jvm, ring(live), parts=3)}, engine="jvm"
    )
    assert dangling == [0, 0, 0] and calls["endpoints"] == 0
    dangling.clear()
    with pytest.raises(DanglingEdgeError, match=r"dst 'bob' not found in Person"):
        write_table(knows(jvm, [("ann", "bob")] + ring(live), parts=3), g.root, "Knows", engine="jvm")
    assert sum(dangling) == 1 and calls["endpoints"] == 1
    assert edge_rows(jvm, g.root) == sorted(ring(live))


def nodes_staged_in_the_same_load(spark, tmp_path, calls, engine: str) -> None:
    """write_graph of nodes + edges on ``engine``: the edge tasks index the load's own staged
    node files and the committed ones, so the driver skips its check; an overwrite of the node
    type drops the committed ids, and the dangling edge is the driver's exact error."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_graph(g.root, {"Person": people(spark, NAMES[:5]), "Knows": knows(spark, ring(NAMES[:5]))}, engine=engine)
    assert calls["endpoints"] == 0
    write_graph(
        g.root, {"Person": people(spark, NAMES[5:]), "Knows": knows(spark, [(NAMES[5], NAMES[0])])}, engine=engine
    )  # NAMES[0] is committed, NAMES[5] staged: both sources are in the index
    assert calls["endpoints"] == 0
    before = edge_rows(spark, g.root)
    with pytest.raises(DanglingEdgeError, match=r"src 'ann' not found in Person"):
        write_graph(
            g.root,
            {"Person": people(spark, NAMES[1:]), "Knows": knows(spark, [("ann", "bob")])},
            mode="overwrite",
            engine=engine,
        )
    assert calls["endpoints"] == 1  # the tasks found a dangling src: the driver words the error
    assert edge_rows(spark, g.root) == before


def test_nodes_staged_in_the_same_load_are_indexed_from_their_files(jvm, tmp_path, calls):
    """write_graph of nodes + edges: the tasks index the load's own staged node files, so the
    driver skips the probe here too; an overwrite of the node type drops the committed ids."""
    nodes_staged_in_the_same_load(jvm, tmp_path, calls, "jvm")


def test_dangling_edges_get_the_python_paths_error(jvm, tmp_path, calls):
    """A dangling endpoint found by the tasks is reported by the driver's exact check: the same
    message as a Python-staged load, and nothing is written."""
    msgs = {}
    for engine in ("jvm", "python"):
        g = Graph.init(str(tmp_path / engine), SCHEMA)
        write_table(people(jvm), g.root, "Person", engine=engine)
        pairs = ring() + [("ann", "nobody"), ("ghost", "bob")]
        with pytest.raises(DanglingEdgeError) as e:
            write_table(knows(jvm, pairs, parts=1), g.root, "Knows", engine=engine)
        msgs[engine] = str(e.value)
        assert len(Graph.open(g.root).log()) == 2  # init + the nodes only
        assert edge_rows(jvm, g.root) == []
    assert msgs["jvm"] == msgs["python"]
    assert "dst 'nobody' not found in Person" in msgs["jvm"] and "[1 dangling src, 1 dangling dst]" in msgs["jvm"]


def test_node_table_moving_after_staging_is_checked_again(jvm, tmp_path, calls, monkeypatch):
    """The proof holds only for the node versions the tasks indexed: if another writer replaces
    the nodes between staging and commit, the driver checks again and refuses the dangling edges;
    if it only adds nodes, the driver checks again and commits."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine="jvm")
    staged = jvm_write.stage_jvm
    meanwhile = {}

    def stage_then_move(df, td, *a, **kw):
        out = staged(df, td, *a, **kw)
        if td.is_edge:
            meanwhile["do"]()
        return out

    monkeypatch.setattr(graph_io._jvm_write, "stage_jvm", stage_then_move)
    meanwhile["do"] = lambda: write_table(people(jvm, ["someone"]), g.root, "Person", engine="python")
    write_table(knows(jvm, [("ann", "bob")]), g.root, "Knows", engine="jvm")
    assert calls["endpoints"] == 1
    # the overwrite removes bob and, with cascade (I18), the committed edge ann -> bob
    meanwhile["do"] = lambda: write_table(
        people(jvm, ["ann"]), g.root, "Person", mode="overwrite", engine="python", options={"cascade": "true"}
    )
    with pytest.raises(DanglingEdgeError, match="dst 'bob' not found in Person"):
        write_table(knows(jvm, [("ann", "bob")]), g.root, "Knows", engine="jvm")
    assert calls["endpoints"] == 2
    assert edge_rows(jvm, g.root) == []


def test_card_bound_settles_only_what_it_can_prove(jvm, tmp_path, calls):
    """@card(0..3): a bound within the max skips the count; a bound above it (a source with 4
    edges in the load, or 2 committed + 2 new) runs the exact count, which refuses with the
    Python path's message; a load that only looks heavy to the bound still lands."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine="jvm")
    write_table(knows(jvm, [("ann", "bob"), ("ann", "zoë")]), g.root, "Knows", engine="jvm")
    assert calls["card"] == 0
    with pytest.raises(CardinalityViolationError, match=r"source 'ann' has 4 edges \(max 3\)"):
        write_table(knows(jvm, [("ann", "ab"), ("ann", "abc")], parts=1), g.root, "Knows", engine="jvm")
    assert calls["card"] == 1
    with pytest.raises(CardinalityViolationError, match=r"source 'bob' has 4 edges \(max 3\)") as e:
        write_table(knows(jvm, [("bob", n) for n in NAMES[:4]], parts=1), g.root, "Knows", engine="jvm")
    assert calls["card"] == 2
    py = Graph.init(str(tmp_path / "py"), SCHEMA)
    write_table(people(jvm), py.root, "Person", engine="python")
    write_table(knows(jvm, [("ann", "bob"), ("ann", "zoë")]), py.root, "Knows", engine="python")
    with pytest.raises(CardinalityViolationError) as p:
        write_table(knows(jvm, [("bob", n) for n in NAMES[:4]], parts=1), py.root, "Knows", engine="python")
    assert str(e.value) == str(p.value)
    counted = calls["card"]  # the Python-path loads above count exactly
    write_table(knows(jvm, [("ann", "ab")], parts=1), g.root, "Knows", engine="jvm")  # 3 = max: lands
    assert calls["card"] == counted  # 2 committed + a bound of 1 = 3 <= max: proven without counting
    assert len(edge_rows(jvm, g.root)) == 3


def test_I15_tasks_bucket_counts_prove_a_card_bound_their_bounds_summed_cannot(
    jvm, tmp_path, calls, caplog, monkeypatch
):
    """@card(0..3), ten edges from ten sources spread over eight tasks: each task's bound is 1,
    and their sum (5 or more) exceeds the max, so the driver counts. When each task hands its
    bucket counts over (here every task; by default one of 2^18 edges or more), their
    bucket-wise sum bounds every source by 1: proven without counting, and the hand-over files
    are gone with the load."""
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.validate")
    real, proofs = jvm_write.stage_jvm, []

    def spy(*a, **kw):
        out = real(*a, **kw)
        proofs.extend(s.ends for s in out if s.ends is not None)
        return out

    monkeypatch.setattr(jvm_write, "stage_jvm", spy)
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine="jvm")
    write_table(knows(jvm, ring(), parts=8), g.root, "Knows", engine="jvm", mode="overwrite")
    assert calls["card"] == 1 and not any(p.src_sketches for p in proofs)  # the summed bounds: counted
    assert sum(p.src_bound for p in proofs) > 3
    proofs.clear()
    monkeypatch.setattr(jvm_write, "SKETCH_MIN_EDGES", 1)
    caplog.clear()
    write_table(knows(jvm, ring(), parts=8), g.root, "Knows", engine="jvm", mode="overwrite")
    assert calls["card"] == 1  # not counted again
    assert len([p for p in proofs if p.src_sketches]) > 3  # every task with an edge (an empty one has no counts)
    assert all(p.src_sketches or p.src_bound == 0 for p in proofs)
    assert "edge:Knows @card: at most 1 edges per source <= max 3, proven without counting" in caplog.text
    assert "bucket counts bound a source's edges in the load at 1 (their bounds summed: " in caplog.text
    assert edge_rows(jvm, g.root) == sorted(ring())
    left = [f for _, _, fs in os.walk(g.root) for f in fs if f.startswith("sketch-")]
    assert left == []


def test_an_unreadable_id_source_falls_back_to_the_driver(jvm, tmp_path, calls, monkeypatch):
    """Tasks that cannot read the node ids report "not checked": the load still validates (on
    the driver) and commits."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm), g.root, "Person", engine="jvm")
    real = jvm_write.endpoint_sources

    def missing(td, snap, staged):
        src, dst = real(td, snap, staged)
        return type(src)(src.table, ("/nonexistent/ids.lance",)), dst

    monkeypatch.setattr(jvm_write, "endpoint_sources", missing)
    write_table(knows(jvm, ring()), g.root, "Knows", engine="jvm")
    assert calls["endpoints"] == 1  # checked on the driver
    # no task bound either: the driver counts the staged sources, and onto an empty Knows that
    # count alone proves @card's max (I16: the committed part is 0), with no full count
    assert calls["card"] == 0
    assert edge_rows(jvm, g.root) == sorted(ring())


def test_key_uniqueness_proven_by_fingerprints(jvm, tmp_path, calls):
    """A node type's single-column @key: the staging tasks fingerprint every key, the driver
    finds no two equal and skips its uniqueness pass; a key given twice (in different tasks)
    makes two equal fingerprints, and the driver's exact check refuses it with the Python
    path's message. The fingerprint files go with the load (nothing left under the root)."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm).repartition(3), g.root, "Person", engine="jvm")
    assert calls["unique"] == 0
    assert sorted(r.name for r in read_table(jvm, g.root, "Person").collect()) == sorted(NAMES)
    msgs = {}
    for engine in ("jvm", "python"):
        h = Graph.init(str(tmp_path / f"dup-{engine}"), SCHEMA)
        dup = jvm.createDataFrame([(n,) for n in NAMES + ["zoë"]], "name string").repartition(2)
        with pytest.raises(UniqueViolationError) as e:
            write_table(dup, h.root, "Person", engine=engine)
        msgs[engine] = str(e.value)
        assert len(Graph.open(h.root).log()) == 1
    assert msgs["jvm"] == msgs["python"] and "'zoë'" in msgs["jvm"]
    assert calls["unique"] == 2  # the JVM load's fingerprints collided: checked exactly, as Python's
    left = [p for p in (tmp_path).rglob("*.bin")]
    assert left == []


def test_each_task_writes_its_fingerprints_sorted(jvm, tmp_path, jvm_key_hashes):
    """A task writes its key fingerprints ascending as unsigned 64-bit values (jvm-shim
    KeyHashes), so the driver merges the tasks' runs instead of sorting the whole load. String
    keys hash over the whole 64-bit range, so a signed order would show here."""
    import numpy as np

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    names = [f"p{i:05d}" for i in range(30_000)]
    write_table(people(jvm, names).repartition(3), g.root, "Person", engine="jvm")
    assert len(jvm_key_hashes) == 3 and sum(len(p) for p in jvm_key_hashes) == 30_000
    for p in jvm_key_hashes:
        assert bool((p[1:] > p[:-1]).all())
        assert bool((p >= np.uint64(1 << 63)).any()) and bool((p < np.uint64(1 << 63)).any())
    assert read_table(jvm, g.root, "Person").count() == 30_000


def test_missing_fingerprint_files_fall_back_to_the_exact_check(jvm, tmp_path, calls, monkeypatch):
    """The fingerprints are a shortcut, never a dependency: if a load's fingerprint files are
    gone before its commit (``cleanup`` swept the journal of a load idle past its grace), the
    driver checks the key exactly: distinct keys commit, a repeated key gets the usual error."""
    import os

    real = jvm_write.stage_jvm

    def staged_then_swept(*a, **kw):
        out = real(*a, **kw)
        for s in out:
            for f in s.key_hashes or ():
                os.remove(f)
        assert any(s.key_hashes for s in out)  # there were fingerprints to lose
        return out

    monkeypatch.setattr(jvm_write, "stage_jvm", staged_then_swept)
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm).repartition(2), g.root, "Person", engine="jvm")
    assert calls["unique"] == 1
    assert sorted(r.name for r in read_table(jvm, g.root, "Person").collect()) == sorted(NAMES)
    h = Graph.init(str(tmp_path / "dup"), SCHEMA)
    with pytest.raises(UniqueViolationError, match="'ann'"):
        write_table(
            jvm.createDataFrame([(n,) for n in NAMES + ["ann"]], "name string").repartition(2),
            h.root,
            "Person",
            engine="jvm",
        )
    assert len(Graph.open(h.root).log()) == 1


def test_python_tasks_fingerprint_keys_as_the_jvm_tasks_do(jvm, tmp_path, jvm_key_hashes):
    """I15 on both paths: the fingerprints a Python task computes for a key are the ones a JVM
    task writes for it (NodeIdIndex.hash of the UTF-8 bytes), at every length around the 8-byte
    words, so the driver's comparison means the same whichever path staged a table."""
    import numpy as np
    import pyarrow as pa

    from omnigraph_spark.ingest.fingerprints import sorted_fingerprints

    names = NAMES + ["k" * n + str(n) for n in range(1, 41)]
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm, names).repartition(2), g.root, "Person", engine="jvm")
    jvm_side = np.sort(np.concatenate(jvm_key_hashes))
    assert len(jvm_side) == len(names)
    assert jvm_side.tolist() == sorted_fingerprints(pa.array(names)).tolist()


def _python_source_load(root, parts):
    """The Python DataSource writer run in this process: one write() per part (a task each),
    then the driver's commit() over their messages."""
    import pyarrow as pa

    w = writer.OmnigraphWriter({"path": root, "type": "Person", "engine": "python"}, None, False)
    msgs = [w.write(iter([pa.record_batch({"name": pa.array(p, pa.string())})])) for p in parts]
    return w, msgs


def test_python_source_tasks_prove_distinct_keys_by_fingerprints(jvm, tmp_path, calls):
    """I15 on the Python DataSource path (no shim needed): each task writes the sorted
    fingerprints of the keys it staged into the load's directory of the staging area, the
    driver finds no two equal and runs no uniqueness pass; the directory goes with the commit."""
    import numpy as np
    import pyarrow as pa

    from omnigraph_spark.ingest.fingerprints import sorted_fingerprints
    from omnigraph_spark.store.layout import RootPaths

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    halves = [NAMES[:4], NAMES[4:]]
    w, msgs = _python_source_load(g.root, halves)
    for m, part in zip(msgs, halves):
        (s,) = m.staged
        assert s.key_column == "name" and len(s.key_hashes) == 1
        assert s.key_hashes[0].startswith(RootPaths(g.root).staging_dir)
        assert np.fromfile(s.key_hashes[0], dtype="<u8").tolist() == sorted_fingerprints(pa.array(part)).tolist()
    w.commit(msgs)
    assert calls["unique"] == 0
    assert sorted(r.name for r in read_table(jvm, g.root, "Person").collect()) == sorted(NAMES)
    assert list(tmp_path.rglob("*.bin")) == []


def test_python_source_duplicate_key_across_tasks_gets_the_exact_checks_error(jvm, tmp_path, calls):
    """A key staged by two tasks makes two equal fingerprints: the driver's exact check decides,
    with the error it raises without fingerprints; nothing is committed, no file is left."""
    import dataclasses

    msgs_text = {}
    for proof in (True, False):
        h = Graph.init(str(tmp_path / f"dup-{proof}"), SCHEMA)
        w, msgs = _python_source_load(h.root, [NAMES, ["zoë"]])
        assert all(m.staged[0].key_hashes for m in msgs)
        if not proof:
            msgs = [
                dataclasses.replace(
                    m, staged=tuple(dataclasses.replace(s, key_hashes=None, key_column=None) for s in m.staged)
                )
                for m in msgs
            ]
        with pytest.raises(UniqueViolationError) as e:
            w.commit(msgs)
        msgs_text[proof] = str(e.value)
        assert len(Graph.open(h.root).log()) == 1
    assert msgs_text[True] == msgs_text[False] and "'zoë'" in msgs_text[True]
    assert calls["unique"] == 2  # the colliding fingerprints sent the load to the exact check
    assert list(tmp_path.rglob("*.bin")) == []


def test_python_source_key_proof_through_spark(jvm, tmp_path):
    """df.write.format("omnigraph") with engine=python: distinct keys over three tasks commit, a
    key repeated across two tasks is the KEY_CONFLICT naming it (append is a strict insert, I17);
    no fingerprint file stays."""
    from omnigraph_spark.spark import unwrap_error

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    people(jvm).repartition(3).write.format("omnigraph").option("type", "Person").option("engine", "python").mode(
        "append"
    ).save(g.root)
    assert sorted(r.name for r in read_table(jvm, g.root, "Person").collect()) == sorted(NAMES)
    dup = jvm.createDataFrame([(n,) for n in NAMES + ["zoë"]], "name string").repartition(2)
    with pytest.raises(Exception) as e:
        dup.write.format("omnigraph").option("type", "Person").option("engine", "python").mode("append").save(
            str(tmp_path / "g")
        )
    err = unwrap_error(e.value)
    assert err is not None and err.code == "KEY_CONFLICT" and "'zoë'" in str(err)
    assert len(Graph.open(g.root).log()) == 2
    assert list(tmp_path.rglob("*.bin")) == []


def test_write_table_python_tasks_prove_distinct_keys(jvm, tmp_path, calls):
    """I15 on write_table / write_graph with engine=python: the Python tasks leave their key
    fingerprints in the load's journal, the driver runs no uniqueness pass for distinct keys,
    and the journal's clean-up takes the files."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(jvm).repartition(3), g.root, "Person", engine="python")
    assert calls["unique"] == 0
    assert sorted(r.name for r in read_table(jvm, g.root, "Person").collect()) == sorted(NAMES)
    assert list(tmp_path.rglob("*.bin")) == []


# -- the Python tasks' endpoint proof (store/endpoint_index.py) --------------------------------


@pytest.fixture
def no_endpoint_check(monkeypatch):
    """The driver's exact endpoint check, on either of its paths, fails the test if it runs."""

    def fail(*a, **kw):
        raise AssertionError("the driver checked endpoints the staging tasks proved")

    monkeypatch.setattr(validate, "check_endpoints", fail)
    monkeypatch.setattr(validate, "_endpoints_bounded", fail)


def _python_edge_load(root, parts, type_name="Knows"):
    """The Python DataSource writer of an edge type run in this process: one write() per part."""
    import pyarrow as pa

    w = writer.OmnigraphWriter({"path": root, "type": type_name, "engine": "python"}, None, False)
    msgs = [
        w.write(iter([pa.record_batch({"src": pa.array([s for s, _ in p]), "dst": pa.array([d for _, d in p])})]))
        for p in parts
    ]
    return w, msgs


def test_I15_python_tasks_prove_endpoints_and_the_driver_skips_its_check(
    spark, tmp_path, calls, no_endpoint_check, caplog
):
    """write_table with engine=python: the Python tasks probe every endpoint (hostile ids)
    against the committed Person ids and bound the edges per source; the driver checks neither
    endpoints nor @card, and the edges land. The Python DataSource's tasks do the same."""
    caplog.set_level(logging.INFO, logger="omnigraph_spark.spark.validate")
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(spark), g.root, "Person", engine="python")
    write_table(knows(spark, ring(), parts=3), g.root, "Knows", engine="python")
    assert calls["card"] == 0
    w, msgs = _python_edge_load(g.root, [ring()[:4], ring()[4:]])
    proofs = [m.staged[0].ends for m in msgs]
    assert [(p.dangling, p.src_bound) for p in proofs] == [(0, 1), (0, 1)]
    w.commit(msgs)
    assert calls["card"] == 1  # the first load's recorded bound (3) + the tasks' (2) > max: counted
    assert any("edge:Knows endpoints: proven while staging" in r.getMessage() for r in caplog.records)
    assert edge_rows(spark, g.root) == sorted(ring() + ring())


def test_python_tasks_dangling_edge_gets_the_exact_checks_error(spark, tmp_path, calls, monkeypatch):
    """A dangling endpoint found by a Python task: the driver's exact check runs and raises the
    error it raises without the proof; nothing is written."""
    msgs = {}
    for proof in (True, False):
        if not proof:
            monkeypatch.setattr(graph_io._jvm_write, "endpoint_sources", lambda *a, **kw: None)
        g = Graph.init(str(tmp_path / f"p{proof}"), SCHEMA)
        write_table(people(spark), g.root, "Person", engine="python")
        pairs = ring() + [("ann", "nobody"), ("ghost", "bob")]
        with pytest.raises(DanglingEdgeError) as e:
            write_table(knows(spark, pairs, parts=2), g.root, "Knows", engine="python")
        msgs[proof] = str(e.value)
        assert len(Graph.open(g.root).log()) == 2
        assert edge_rows(spark, g.root) == []
    assert msgs[True] == msgs[False]
    assert "dst 'nobody' not found in Person" in msgs[True] and "[1 dangling src, 1 dangling dst]" in msgs[True]
    assert calls["endpoints"] == 2


def test_python_tasks_index_nodes_staged_in_the_same_load(spark, tmp_path, calls):
    """write_graph with engine=python: the edge tasks index the load's own staged node files
    (and the committed ones), so the driver skips its check; an overwrite of the node type drops
    the committed ids, and the dangling edge is the exact check's error."""
    nodes_staged_in_the_same_load(spark, tmp_path, calls, "python")


def test_python_tasks_proof_is_rechecked_when_the_node_table_moves(spark, tmp_path, calls):
    """The proof holds only for the node version the tasks indexed: nodes added between staging
    and commit -> the driver checks and commits; the nodes replaced -> it checks and refuses."""
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(spark), g.root, "Person", engine="python")
    w, msgs = _python_edge_load(g.root, [[("ann", "bob")]])
    assert msgs[0].staged[0].ends.dangling == 0
    write_table(people(spark, ["someone"]), g.root, "Person", engine="python")
    w.commit(msgs)
    assert calls["endpoints"] == 1
    w, msgs = _python_edge_load(g.root, [[("ann", "bob")]])
    write_table(
        people(spark, ["ann"]), g.root, "Person", mode="overwrite", engine="python", options={"cascade": "true"}
    )
    with pytest.raises(DanglingEdgeError, match="dst 'bob' not found in Person"):
        w.commit(msgs)
    assert calls["endpoints"] == 2
    assert edge_rows(spark, g.root) == []


def test_python_tasks_colliding_hashes_are_unproven_not_wrong(spark, tmp_path, calls, monkeypatch):
    """Every id hashing alike (the hash patched to a constant): the tasks count the ends they
    cannot tell apart by bytes as unproven, the driver checks exactly and the edges land; a
    dangling edge among them is still refused."""
    from omnigraph_spark.store import endpoint_index

    monkeypatch.setattr(endpoint_index, "fingerprints", lambda values: np.full(len(values), 7, np.uint64))
    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(spark), g.root, "Person", engine="python")
    w, msgs = _python_edge_load(g.root, [ring()])
    assert msgs[0].staged[0].ends.dangling > 0
    w.commit(msgs)
    assert calls["endpoints"] == 1
    assert edge_rows(spark, g.root) == sorted(ring())
    w, msgs = _python_edge_load(g.root, [[("ann", "nobody")]])
    with pytest.raises(DanglingEdgeError, match="dst 'nobody' not found in Person"):
        w.commit(msgs)
    assert edge_rows(spark, g.root) == sorted(ring())


def test_python_source_endpoint_proof_through_spark(spark, tmp_path):
    """df.write.format("omnigraph") with engine=python: edges over three tasks onto committed
    nodes land, a dangling one is the exact check's DANGLING_EDGE naming it."""
    from omnigraph_spark.spark import unwrap_error

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(spark), g.root, "Person", engine="python")

    def save(df):
        df.write.format("omnigraph").option("type", "Knows").option("engine", "python").mode("append").save(g.root)

    save(knows(spark, ring(), parts=3))
    assert edge_rows(spark, g.root) == sorted(ring())
    with pytest.raises(Exception) as e:
        save(knows(spark, [("ann", "bob"), ("ghost", "bob")], parts=2))
    err = unwrap_error(e.value)
    assert err is not None and err.code == "DANGLING_EDGE" and "src 'ghost' not found in Person" in str(err)
    assert edge_rows(spark, g.root) == sorted(ring())


def test_a_streams_micro_batches_leave_endpoints_to_the_commit(spark, tmp_path):
    """The batch writer of an edge type names the id sources its tasks prove against (I15); a
    stream's micro-batch writer names none (its commit probes the committed id index, I24), and
    neither does a node type's or a delete's."""
    from omnigraph_spark.spark.stream import OmnigraphRowStreamWriter
    from omnigraph_spark.spark.validate import id_source

    g = Graph.init(str(tmp_path / "g"), SCHEMA)
    write_table(people(spark), g.root, "Person", engine="python")
    edge = {"path": g.root, "type": "Knows", "engine": "python"}
    snap = Graph.open(g.root).snapshot()
    person = id_source(snap, {}, "node:Person")
    assert writer.OmnigraphWriter(edge, None, False).ends_against == (person, person)
    assert OmnigraphRowStreamWriter(edge, None, False).batch.ends_against is None
    assert writer.OmnigraphWriter({**edge, "type": "Person"}, None, False).ends_against is None
    assert writer.OmnigraphWriter({**edge, "writeMode": "delete"}, None, False).ends_against is None
