"""The write protocol without Spark: modes, versions, commit rows, guards (docs/invariants.md)."""

from __future__ import annotations

import dataclasses
import os

import lance
import pyarrow as pa
import pytest

from omnigraph_spark.errors import CommitRebasedError, CorruptGraphError, ExpectedVersionMismatchError, TableDriftError
from omnigraph_spark.store import tables, writes

from .helpers import commit_concurrently, people, rows_of, stage_rows, write_rows


def test_append_publishes_one_version_and_commit_row(test_graph):  # I1, I4
    r = write_rows(test_graph, "node:Person", people("alice", "bob"), actor="etl")
    assert r.manifest_version == 4
    # the data commit at 2, then one commit creating the indexes the engine expects (I23)
    assert [(t.table_key, t.from_version, t.to_version, t.row_count) for t in r.tables] == [("node:Person", 1, 3, 2)]
    assert r.tables[0].indexes == ("id_idx:create", "name_idx:create")
    snap = test_graph.snapshot()
    assert snap.tables["node:Person"].version == 3 and snap.tables["node:Person"].row_count == 2
    assert snap.tables["node:Company"].version == 1
    log = test_graph.log()
    assert [c.manifest_version for c in log] == [3, 4]
    assert log[1].parent_commit_id == log[0].graph_commit_id and log[1].actor_id == "etl"
    assert log[1].graph_commit_id == r.graph_commit_id
    assert rows_of(test_graph, "node:Person") == people("alice", "bob")
    assert test_graph.pending_sidecars() == []


def test_merge_upserts_by_id(test_graph):
    write_rows(test_graph, "node:Person", people("alice", "bob", age=1))
    write_rows(test_graph, "node:Person", people("bob", "carol", age=2), mode="merge")
    assert rows_of(test_graph, "node:Person") == (people("alice", age=1) + people("bob", "carol", age=2))
    assert test_graph.snapshot().tables["node:Person"].row_count == 3


def test_merge_with_quotes_in_ids(test_graph):
    hostile = ["O'Brien", "x' OR '1'='1", "back\\slash"]
    write_rows(test_graph, "node:Person", people(*hostile, age=1))
    write_rows(test_graph, "node:Person", people(*hostile, age=2), mode="merge")
    assert rows_of(test_graph, "node:Person") == people(*sorted(hostile), age=2)


def test_overwrite_replaces_only_that_table(test_graph):
    write_rows(test_graph, "node:Person", people("alice", "bob"))
    write_rows(test_graph, "node:Company", [{"id": "acme", "name": "acme"}])
    write_rows(test_graph, "node:Person", people("zed"), mode="overwrite")
    assert rows_of(test_graph, "node:Person") == people("zed")
    assert rows_of(test_graph, "node:Company") == [{"id": "acme", "name": "acme"}]
    assert test_graph.open_table("node:Person").has_stable_row_ids


def test_multi_table_load_is_one_commit(test_graph):  # I1
    s1 = stage_rows(test_graph, "node:Person", people("a", "b"))
    s2 = stage_rows(test_graph, "edge:Knows", [{"id": "k1", "src": "a", "dst": "b", "since": None}])
    r = writes.commit_load(test_graph, "main", [s1, s2])
    assert len(test_graph.log()) == 2
    assert {t.table_key: t.to_version for t in r.tables} == {"node:Person": 3, "edge:Knows": 3}


def test_staged_parts_of_one_table_merge_into_one_commit(test_graph):
    parts = [stage_rows(test_graph, "node:Person", people(n)) for n in ("a", "b", "c")]
    r = writes.commit_load(test_graph, "main", parts)
    assert r.tables[0].to_version == 3 and r.tables[0].fragments == 3
    assert len(rows_of(test_graph, "node:Person")) == 3


def test_empty_overwrite_empties_table(test_graph):
    write_rows(test_graph, "node:Person", people("a"))
    write_rows(test_graph, "node:Person", [], mode="overwrite")
    assert rows_of(test_graph, "node:Person") == []


def test_overwrite_is_strict_about_pins(test_graph):
    staged = stage_rows(test_graph, "node:Person", people("x"), mode="overwrite")
    write_rows(test_graph, "node:Person", people("a"))
    before = test_graph.snapshot().version
    with pytest.raises(ExpectedVersionMismatchError) as e:
        writes.commit_load(test_graph, "main", [staged])
    assert e.value.code == "EXPECTED_VERSION_MISMATCH"
    assert test_graph.snapshot().version == before
    assert rows_of(test_graph, "node:Person") == people("a")


def test_I26_a_strict_base_merge_refuses_a_moved_pin_and_a_plain_one_retargets(test_graph):
    """``StagedTable.strict_base`` (a SQL UPDATE / MERGE's rows, computed from the table at
    ``base_version``): a moved pin is EXPECTED_VERSION_MISMATCH, as for an overwrite, and the
    other writer's rows stay; the same merge without it lands on top."""
    write_rows(test_graph, "node:Person", people("a", "b", age=1))
    staged = stage_rows(test_graph, "node:Person", people("a", age=2), mode="merge")
    strict = dataclasses.replace(staged, strict_base=True)
    assert writes.StagedTable.merge([staged, strict]).strict_base
    write_rows(test_graph, "node:Person", people("c", age=3))
    before = test_graph.snapshot().version
    with pytest.raises(ExpectedVersionMismatchError) as e:
        writes.commit_load(test_graph, "main", [strict])
    assert "statement of 'node:Person'" in str(e.value)
    assert test_graph.snapshot().version == before
    writes.commit_load(test_graph, "main", [staged])
    assert rows_of(test_graph, "node:Person") == people("a", age=2) + people("b", age=1) + people("c", age=3)


def test_append_retargets_after_concurrent_publish(test_graph):
    """An append staged on v1 commits on top of a load that published meanwhile."""
    staged = stage_rows(test_graph, "node:Person", people("late"))
    write_rows(test_graph, "node:Person", people("early"))
    r = writes.commit_load(test_graph, "main", [staged])
    assert r.tables[0].from_version == 3 and r.tables[0].to_version == 5  # a delta of each index at 5 (I23)
    assert r.tables[0].indexes == ("id_idx:extend", "name_idx:extend")
    assert rows_of(test_graph, "node:Person") == people("early", "late")


def test_guard_rejects_fragments_with_foreign_field_ids(test_graph):  # I5
    ds = test_graph.open_table("node:Person")
    other = pa.schema([pa.field("x", pa.string(), False), pa.field("id", pa.string(), False)])
    tmp = lance.write_dataset(pa.table({"x": ["1"], "id": ["1"]}, schema=other), test_graph.root + "/../scratch")
    frags = lance.fragment.write_fragments(pa.table({"x": ["q"], "id": ["q"]}, schema=other), tmp, mode="append")
    bad = [f for f in frags]
    for f in bad:
        for df in f.files:
            df.fields = [0, 1, 2, 99]
    with pytest.raises(CorruptGraphError):
        tables.check_fragment_fields(ds, bad, "node:Person")


def test_guard_rejects_rebased_commit(test_graph):  # I6
    ds1 = test_graph.open_table("node:Person")
    f1 = tables.stage_fragments(ds1, pa.Table.from_pylist(people("a"), schema=ds1.schema), ds1.schema)
    f2 = tables.stage_fragments(ds1, pa.Table.from_pylist(people("b"), schema=ds1.schema), ds1.schema)
    tables.commit_operation(ds1, lance.LanceOperation.Append(f1), 1, "node:Person")
    stale = lance.dataset(ds1.uri, version=1)
    with pytest.raises(CommitRebasedError) as e:
        tables.commit_operation(stale, lance.LanceOperation.Append(f2), 1, "node:Person")
    assert e.value.context["actual"] == 3


def test_drift_detected_before_commit(test_graph):  # I7
    ds = test_graph.open_table("node:Person")
    lance.write_dataset(pa.Table.from_pylist(people("sneaky"), schema=ds.schema), ds.uri, mode="append")
    with pytest.raises(TableDriftError) as e:
        tables.check_head(lance.dataset(ds.uri), 1, "node:Person")
    assert e.value.retryable


def test_abort_removes_staged_files(test_graph):  # I10
    data_dir = f"{test_graph.root}/nodes/40d76f1f51639ec0/data"
    before = set(os.listdir(data_dir)) if os.path.isdir(data_dir) else set()
    staged = stage_rows(test_graph, "node:Person", people("a", "b"))
    assert set(os.listdir(data_dir)) - before
    assert writes.abort([staged]) == 1
    assert set(os.listdir(data_dir)) == before
    assert test_graph.snapshot().tables["node:Person"].version == 1


def test_txn_token_makes_rerun_a_noop(test_graph):  # I12
    tok = writes.TxnToken("nightly-load", 7)
    r1 = write_rows(test_graph, "node:Person", people("a"), txn=tok)
    r2 = write_rows(test_graph, "node:Person", people("a"), txn=tok)
    assert not r1.skipped and r2.skipped
    assert r2.operation_id == r1.operation_id
    assert rows_of(test_graph, "node:Person") == people("a")
    r3 = write_rows(test_graph, "node:Person", people("b"), txn=writes.TxnToken("nightly-load", 8))
    assert not r3.skipped
    tx = test_graph.open_table("node:Person").read_transaction(r3.tables[0].to_version)
    assert tx.transaction_properties["omnigraph-spark.txn_version"] == "8"


def test_concurrent_appends_both_land(test_graph):  # I14
    staged = [stage_rows(test_graph, "node:Person", people(f"p{i}")) for i in range(4)]
    errors = commit_concurrently(test_graph, staged)
    assert errors == []
    assert [r["id"] for r in rows_of(test_graph, "node:Person")] == ["p0", "p1", "p2", "p3"]
    assert test_graph.snapshot().tables["node:Person"].version == 9  # a data and an index commit each (I23)
    log = test_graph.log()
    assert len(log) == 5
    assert all(log[i].parent_commit_id == log[i - 1].graph_commit_id for i in range(1, 5))


def test_branch_write_forks_lazily_and_records_branch_metadata(test_graph):  # §J.4
    import json as _json

    write_rows(test_graph, "node:Person", people("a"))
    test_graph.create_branch("feature")
    assert test_graph.snapshot("feature").tables["node:Person"].branch == "main"  # inherited
    write_rows(test_graph, "node:Person", people("b"), branch="feature")
    t = test_graph.snapshot("feature").tables["node:Person"]
    assert (t.branch, t.version) == ("feature", 5)  # main's 3, then data and index commits (I23)
    assert t.path.endswith("/nodes/40d76f1f51639ec0/tree/feature")
    assert rows_of(test_graph, "node:Person", test_graph.snapshot("feature")) == people("a", "b")
    assert rows_of(test_graph, "node:Person") == people("a")  # main untouched
    assert test_graph.snapshot("feature").tables["node:Company"].branch == "main"  # untouched: not forked
    mds = lance.dataset(f"{test_graph.root}/__manifest").checkout_version(("feature", None))
    row = [r for r in mds.to_table().to_pylist() if r["object_id"] == "node:Person$00000000000000000005"][0]
    assert row["table_branch"] == "feature"
    meta = _json.loads(row["metadata"])
    assert "/tree/feature/_versions/" in meta["manifest_path"]
    assert os.path.getsize("/" + meta["manifest_path"]) == meta["manifest_size"]
    commit = test_graph.log("feature")[-1]
    assert commit.manifest_branch == "feature" and commit.manifest_version == mds.version


def test_abort_keeps_files_a_pending_sidecar_may_need(test_graph):  # I10 vs I8
    from omnigraph_spark.store import sidecar
    from omnigraph_spark.store.sidecar import Sidecar, SidecarPin

    data_dir = f"{test_graph.root}/nodes/40d76f1f51639ec0/data"
    staged = stage_rows(test_graph, "node:Person", people("a"))
    t = test_graph.snapshot().tables["node:Person"]
    sidecar.write(
        test_graph.storage,
        test_graph.root,
        Sidecar.new("main", None, "Load", [SidecarPin("node:Person", t.base_path, 1, 2)]),
    )
    assert writes.abort([staged]) == 0
    assert len(os.listdir(data_dir)) == 1


def test_abort_keeps_files_of_a_landed_commit(test_graph):
    staged = stage_rows(test_graph, "node:Person", people("a"))
    writes.commit_load(test_graph, "main", [staged])
    assert writes.abort([staged]) == 0
    assert rows_of(test_graph, "node:Person") == people("a")


def _batch(start: int, n: int, width: int = 1) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"x": list(range(start, start + n)), "s": ["v" * width] * n})


def test_coalesce_joins_small_batches_in_order_and_passes_large_ones():
    # Spark's 10,000-row batches reach Lance as fewer, larger ones: same rows, same order
    small = [_batch(i * 3, 3) for i in range(7)]
    out = list(writes.coalesce(iter(small + [_batch(21, 50), _batch(71, 2)]), rows=10, nbytes=1 << 20))
    assert [b.num_rows for b in out] == [12, 9, 50, 2]  # 4 + 3 small ones; the large one as it came
    assert pa.Table.from_batches(out).column("x").to_pylist() == list(range(73))


def test_coalesce_caps_a_batch_by_bytes():
    wide = [_batch(i, 1, width=1000) for i in range(6)]
    out = list(writes.coalesce(iter(wide), rows=1000, nbytes=2500))
    assert [b.num_rows for b in out] == [3, 3] and all(b.nbytes < 5000 for b in out)
    assert list(writes.coalesce(iter([]), rows=10, nbytes=10)) == []


def test_stage_hands_lance_coalesced_batches(test_graph, monkeypatch):  # I11: one batch's worth held
    target = writes.prepare_target(test_graph, "main", "node:Person", "append")
    seen: list[int] = []
    stage_fragments = tables.stage_fragments

    def counting(ds, reader, schema, **kw):
        def batches():
            for b in reader:
                seen.append(b.num_rows)
                yield b

        return stage_fragments(ds, pa.RecordBatchReader.from_batches(schema, batches()), schema, **kw)

    monkeypatch.setattr(writes._tables, "stage_fragments", counting)
    monkeypatch.setattr(writes, "STAGE_BATCH_ROWS", 25)
    rows = people(*[f"p{i:03d}" for i in range(100)])
    batches = pa.Table.from_pylist(rows, schema=target.schema).to_batches(max_chunksize=10)
    staged = writes.stage(target, iter(batches))
    assert staged.rows == 100 and seen == [30, 30, 30, 10]
