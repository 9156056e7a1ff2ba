"""The write protocol on an object store (S3, each test once on moto's server and once on
SeaweedFS: tests/object_store.py): the same invariants as on a local root, where files are
objects, rename does not exist and create-if-absent is not atomic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnigraph_spark import Graph
from omnigraph_spark.store import commits, maintenance, writes

from .helpers import commit_concurrently, people, rows_of, stage_rows, write_rows

P, K = "node:Person", "edge:Knows"


def _bucket_and_prefix(root: str):
    bucket, _, prefix = root[len("s3://") :].partition("/")
    return bucket, prefix


def test_init_write_reopen_read(s3, s3_graph):  # I1, I4
    g = s3_graph
    r = write_rows(g, P, people("alice", "bob", age=3))
    assert r.manifest_version == g.snapshot().version and r.tables[0].to_version == 3  # data at 2, indexes at 3 (I23)
    knows = [{"id": "k1", "src": "alice", "dst": "bob", "since": None}]
    write_rows(g, K, knows)

    again = Graph.open(g.root, s3.storage_options())  # a new process would see the same
    assert rows_of(again, P) == people("alice", "bob", age=3)
    assert rows_of(again, K) == knows
    assert [c.graph_commit_id for c in again.log()] == [c.graph_commit_id for c in g.log()]
    assert len(again.log()) == 3  # init + two loads
    bucket, prefix = _bucket_and_prefix(g.root)
    keys = s3.keys(bucket, prefix + "/")
    table = again.snapshot().tables[P].table_path
    assert any(k.startswith(f"{prefix}/{table}/data/") and k.endswith(".lance") for k in keys)
    assert any(k.startswith(f"{prefix}/__manifest/_versions/") for k in keys)
    assert not [k for k in keys if "/_omnigraph_spark/sidecars/" in k]  # I9: no sidecar left


def test_racing_inits_leave_one_whole_graph(s3, s3_graph_root, test_schema_text):  # I14
    """Four inits of one S3 root with four different schemas, at once: one creates the graph,
    the other three get AlreadyInitializedError, and the graph is wholly the winner's (schema
    file, schema contract, tables, one commit). Without the lease each init saw no
    ``_schema.pg`` and went on writing its own."""
    import threading

    from omnigraph_spark.errors import AlreadyInitializedError

    root, so = s3_graph_root
    schemas = {i: test_schema_text + f"\nnode Extra{i} {{\n    name: String @key\n}}\n" for i in range(4)}
    won, refused, other = [], [], []
    start = threading.Barrier(len(schemas))

    def init(i):
        start.wait()
        try:
            Graph.init(root, schemas[i], so)
            won.append(i)
        except AlreadyInitializedError:
            refused.append(i)
        except Exception as e:  # reported by the assertion below
            other.append(e)

    threads = [threading.Thread(target=init, args=(i,)) for i in schemas]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert other == [] and len(won) == 1 and sorted(won + refused) == list(schemas)
    g = Graph.open(root, so)
    winner = won[0]
    assert g.storage.read_text(f"{root}/_schema.pg") == schemas[winner]
    assert sorted(t for t in g.catalog.table_keys() if t.startswith("node:Extra")) == [f"node:Extra{winner}"]
    assert sorted(g.snapshot().tables) == sorted(g.catalog.table_keys())
    assert len(g.log()) == 1
    write_rows(g, P, people("alice"))  # and it takes writes
    assert rows_of(Graph.open(root, so), P) == people("alice")


def test_merge_and_overwrite(s3_graph):
    g = s3_graph
    write_rows(g, P, people("a", "b", age=1))
    write_rows(g, P, [{"id": "b", "age": 2, "name": "b"}, {"id": "c", "age": 2, "name": "c"}], mode="merge")
    assert rows_of(g, P) == [
        {"id": "a", "age": 1, "name": "a"},
        {"id": "b", "age": 2, "name": "b"},
        {"id": "c", "age": 2, "name": "c"},
    ]
    write_rows(g, P, people("z"), mode="overwrite")
    assert rows_of(g, P) == people("z")


def test_abort_removes_staged_objects(s3, s3_graph):  # I10
    bucket, prefix = _bucket_and_prefix(s3_graph.root)
    table = s3_graph.snapshot().tables[P].table_path
    before = s3.keys(bucket, f"{prefix}/{table}/data/")
    staged = stage_rows(s3_graph, P, people("a", "b"))
    assert set(s3.keys(bucket, f"{prefix}/{table}/data/")) - set(before)
    assert writes.abort([staged], s3_graph.storage_options) == 1
    # pyarrow's S3 filesystem leaves an empty "directory marker" (a key ending in '/') when it
    # deletes the last object under a prefix; it holds no data, and Lance lists past it
    left = s3.keys(bucket, f"{prefix}/{table}/data/")
    assert [k for k in left if not k.endswith("/")] == before
    assert s3_graph.snapshot().tables[P].version == 1
    write_rows(s3_graph, P, people("c"))  # the table takes the next write, reads and cleans up
    assert rows_of(s3_graph, P) == people("c")
    report = maintenance.cleanup(s3_graph, keep_versions=1, orphan_grace_s=0)
    assert report.errors == {} and rows_of(s3_graph, P) == people("c")


@pytest.mark.slow
def test_concurrent_appends_all_land_once(s3, s3_graph):  # I6, I14
    """Four writers commit at once. S3 has no atomic file create: the lease's compare-and-swap
    on a Lance version must still let one writer at a time into the commit window."""
    g = s3_graph
    staged = [stage_rows(g, P, people(f"p{i}")) for i in range(4)]
    errors = commit_concurrently(g, staged)
    assert errors == []
    assert [r["id"] for r in rows_of(g, P)] == ["p0", "p1", "p2", "p3"]
    snap = g.snapshot()
    assert snap.tables[P].version == 9 and snap.tables[P].row_count == 4  # a data and an index commit each (I23)
    log = g.log()
    assert len(log) == 5, [(c.manifest_version, c.actor_id, c.parent_commit_id) for c in log]
    assert all(log[i].parent_commit_id == log[i - 1].graph_commit_id for i in range(1, 5))


WRITER = str(Path(__file__).with_name("crash_writer.py"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "step,visible",
    [
        ("after_sidecar", False),
        ("after_table_commit#1", False),
        ("after_publish", True),
        ("before_sidecar_delete", True),
    ],
)
def test_crash_then_open_repairs(s3, s3_graph, step, visible):  # I8, I9
    """A load of Person + Knows killed at a step of the protocol: the next open repairs it to
    all of the load or none of it, on the object store as on a local root."""
    g = s3_graph
    so = s3.storage_options()
    write_rows(g, P, people("old", age=1))
    env = dict(os.environ, OMNIGRAPH_SPARK_FAILPOINT=step, OMNIGRAPH_TEST_STORAGE_OPTIONS=json.dumps(so))
    p = subprocess.run(
        [sys.executable, WRITER, g.root, "append", "main", "person+knows"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 137, p.stderr[-2000:]

    g = Graph.open(g.root, so)
    assert len(g.pending_sidecars()) == 1
    outcomes = g.recover()
    assert g.pending_sidecars() == []
    ids = [r["id"] for r in rows_of(g, P)]
    knows = [r["id"] for r in rows_of(g, K)]
    if visible:
        assert ids == ["new1", "old", "old"] and knows == ["k-new"]
    else:
        assert ids == ["old"] and knows == []
    audits = commits.list_recovery_audits(g.root, so)
    assert [a["operation_id"] for a in audits] == [o.operation_id for o in outcomes]
    assert audits[-1]["recovery_kind"] == ("RolledForward" if visible else "RolledBack")
    write_rows(g, P, people("next"))  # the graph takes the next write
    assert "next" in [r["id"] for r in rows_of(g, P)]


def test_cleanup_removes_old_versions_and_orphans(s3, s3_graph):
    g = s3_graph
    for i in range(3):
        write_rows(g, P, people(f"p{i}", age=i))
    staged = stage_rows(g, P, people("orphan"))  # a killed task's files: never committed
    bucket, prefix = _bucket_and_prefix(g.root)
    table = g.snapshot().tables[P].table_path
    orphan = {f"{prefix}/{table}/data/{f.path}" for frag in staged.fragments for f in frag.files}
    assert orphan <= set(s3.keys(bucket, f"{prefix}/{table}/data/"))
    report = maintenance.cleanup(g, keep_versions=1, orphan_grace_s=0)
    assert report.orphan_files >= len(orphan)
    assert not orphan & set(s3.keys(bucket, f"{prefix}/{table}/data/"))
    assert rows_of(g, P) == [people(f"p{i}", age=i)[0] for i in range(3)]


def test_optimize_compacts_on_s3_and_cleanup_then_frees_the_old_objects(s3, s3_graph):
    """optimize on S3: one graph commit, the same rows in one fragment; the pre-optimize
    version still reads; cleanup then deletes the compacted-away data objects."""
    g = s3_graph
    for i in range(3):
        write_rows(g, P, people(f"p{i}", age=i))
    before, rows = g.snapshot(), rows_of(g, P)
    bucket, prefix = _bucket_and_prefix(g.root)
    table = before.tables[P].table_path
    old = [k for k in s3.keys(bucket, f"{prefix}/{table}/data/") if not k.endswith("/")]
    rep = g.optimize()
    t = rep.table(P)
    assert (t.fragments_before, t.fragments_after, t.rows) == (3, 1, 3)
    assert rows_of(g, P) == rows and rows_of(g, P, g.snapshot(version=before.version)) == rows
    assert (g.log()[-1].graph_commit_id, g.log()[-1].actor_id) == (rep.graph_commit_id, maintenance.OPTIMIZE_ACTOR)
    assert g.pending_sidecars() == []
    report = maintenance.cleanup(g, keep_versions=1, orphan_grace_s=0)
    assert report.errors == {}
    assert not set(old) & set(s3.keys(bucket, f"{prefix}/{table}/data/"))  # the three small files are gone
    assert rows_of(Graph.open(g.root, s3.storage_options()), P) == rows


def test_the_test_server_refuses_a_second_conditional_put(s3):
    """The commit protocol's one store primitive (docs/object_storage.md): a PUT with
    If-None-Match: * of a key that exists is refused (412). Lance's table, manifest and lease
    commits use it; a server that ignored it would let the concurrency tests pass vacuously."""
    from botocore.exceptions import ClientError

    c, bucket = s3.client(), s3.new_bucket()
    c.put_object(Bucket=bucket, Key="v1.manifest", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket=bucket, Key="v1.manifest", Body=b"second", IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert c.get_object(Bucket=bucket, Key="v1.manifest")["Body"].read() == b"first"


def test_the_test_server_lets_one_of_racing_conditional_puts_win(s3):
    """The same primitive under a race, as commits meet it: eight PUTs with If-None-Match: * of
    one key at once, five rounds; each round exactly one is accepted and holds the key, the other
    seven get 412. A server that checked existence and then wrote would let several win."""
    import threading

    from botocore.exceptions import ClientError

    bucket, n = s3.new_bucket(), 8
    clients = [s3.client() for _ in range(n)]
    for rnd in range(5):
        key, outcomes, start = f"race-{rnd}.manifest", {}, threading.Barrier(n)

        def put(i, start=start, key=key, outcomes=outcomes):
            start.wait()
            try:
                clients[i].put_object(Bucket=bucket, Key=key, Body=f"writer {i}".encode(), IfNoneMatch="*")
                outcomes[i] = 200
            except ClientError as e:
                outcomes[i] = e.response["ResponseMetadata"]["HTTPStatusCode"]

        threads = [threading.Thread(target=put, args=(i,)) for i in range(n)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        won = [i for i, code in outcomes.items() if code == 200]
        assert len(won) == 1 and sorted(outcomes.values()) == [200] + [412] * (n - 1), outcomes
        assert clients[0].get_object(Bucket=bucket, Key=key)["Body"].read() == f"writer {won[0]}".encode()


TWO_WRITERS = str(Path(__file__).with_name("s3_writer.py"))


def _writers(g, so, mode, n, names=("w1", "w2")):
    """Run one writer process per name at once; each one's printed outcomes, in order."""
    env = dict(os.environ, OMNIGRAPH_TEST_STORAGE_OPTIONS=json.dumps(so), OMNIGRAPH_TEST_WRITERS=str(len(names)))
    procs = {
        w: subprocess.Popen(
            [sys.executable, TWO_WRITERS, g.root, w, mode, str(n)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in names
    }
    out = {}
    for w, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-2000:]
        out[w] = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return out


@pytest.mark.slow
def test_two_writer_processes_lose_no_acknowledged_row(s3, s3_graph):  # I1, I6, I14
    """Two processes append to one S3 graph at once, five loads each. Every load whose commit
    returned is in the graph exactly once, each as one commit of a linear log: the lease (a
    Lance compare-and-swap, a conditional PUT on S3) let one writer at a time into the commit
    window, and no write overwrote another's manifest or table version."""
    so = s3.storage_options()
    v0 = s3_graph.snapshot().version
    out = _writers(s3_graph, so, "append", 5)
    acked = sorted(i for o in out.values() for r in o if "ack" in r for i in r["ack"])
    assert acked == sorted(f"{w}-{i}" for w in out for i in range(5)), out  # nobody was refused
    g = Graph.open(s3_graph.root, so)
    assert [r["id"] for r in rows_of(g, P)] == acked  # each once
    log = g.log()
    assert len(log) == 1 + len(acked)
    assert all(log[i].parent_commit_id == log[i - 1].graph_commit_id for i in range(1, len(log)))
    versions = sorted(r["version"] for o in out.values() for r in o)
    assert versions == list(range(v0 + 1, v0 + 1 + len(acked)))  # every acknowledged load has its own manifest version
    assert g.pending_sidecars() == []


@pytest.mark.slow
def test_two_writer_processes_never_both_win_a_conflicting_overwrite(s3, s3_graph):  # I3, I14
    """Two processes stage an overwrite of Person at the same table version, then commit at
    once. Exactly one wins; the other is refused with a typed conflict and changes nothing: the
    table holds exactly the winner's rows."""
    so = s3.storage_options()
    write_rows(s3_graph, P, people("base"))
    out = _writers(s3_graph, so, "overwrite", 3)
    won = [w for w, o in out.items() if "ack" in o[0]]
    lost = [o[0]["error"] for o in out.values() if "error" in o[0]]
    assert len(won) == 1 and lost == ["EXPECTED_VERSION_MISMATCH"], out
    g = Graph.open(s3_graph.root, so)
    assert [r["id"] for r in rows_of(g, P)] == [f"{won[0]}-{i}" for i in range(3)]
    assert len(g.log()) == 3  # init, base, the winner
    assert g.pending_sidecars() == []
