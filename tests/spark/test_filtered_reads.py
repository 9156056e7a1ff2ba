"""Filtered reads through the Python source: a pushed filter is read late (the filter's columns,
then the others for the matching rows) while it is selective and early once a batch shows it is
not; either way the rows, their order, nulls and types are exactly those of reading every row
and filtering."""

from __future__ import annotations

import datetime as dt

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

from omnigraph_spark import Graph
from omnigraph_spark.spark import reader as R
from omnigraph_spark.spark.reader import OmnigraphPartition
from omnigraph_spark.store import writes
from tests.spark.test_read_filters import has_filter_node
from tests.store.helpers import write_rows

ROWS = 3000


def _table(n: int, offset: int = 0) -> pa.Table:
    """Every column kind a type can have, nulls on a fixed share of rows; ``amount`` = i % 100."""
    idx = list(range(offset, offset + n))
    return pa.table(
        {
            "id": pa.array([f"r{i:06d}" for i in idx]),
            "amount": pa.array([None if i % 11 == 0 else i % 100 for i in idx], pa.int64()),
            "fee": pa.array([None if i % 10 == 0 else i / 7 for i in idx], pa.float64()),
            "memo": pa.array([None if i % 4 == 0 else f"memo {i}" for i in idx]),
            "day": pa.array([None if i % 7 == 0 else dt.date(2024, 1, 1) + dt.timedelta(days=i % 365) for i in idx]),
            "tags": pa.array([None if i % 3 == 0 else ["a", f"t{i % 17}"] for i in idx], pa.list_(pa.string())),
        }
    )


@pytest.fixture
def dataset(tmp_path):
    """Three fragments of ROWS rows each, with deleted rows in the middle one."""
    uri = str(tmp_path / "t.lance")
    ds = lance.write_dataset(_table(3 * ROWS), uri, max_rows_per_file=ROWS)
    ds.delete("id >= 'r004000' AND id < 'r004200'")
    return lance.dataset(uri)


class Recorder:
    """A dataset that records how each scan materialises (late or early)."""

    def __init__(self, ds):
        self.ds, self.scans = ds, []

    def get_fragment(self, fid):
        return self.ds.get_fragment(fid)

    def scanner(self, **kw):
        self.scans.append(kw.get("late_materialization"))
        return self.ds.scanner(**kw)


def _oracle(ds, fids, amount_below: int, rng=None) -> pa.Table:
    """Every row of the fragments, filtered in pyarrow (SQL semantics: a null never passes)."""
    parts = []
    for fid in fids:
        t = ds.scanner(fragments=[ds.get_fragment(fid)], with_row_address=True, scan_in_order=True).to_table()
        if rng is not None:
            off = pc.bit_wise_and(t["_rowaddr"], pa.scalar(0xFFFFFFFF, pa.uint64()))
            t = t.filter(pc.and_(pc.greater_equal(off, rng[0]), pc.less(off, rng[1])))
        parts.append(t.filter(pc.fill_null(pc.less(t["amount"], amount_below), False)).drop_columns(["_rowaddr"]))
    return pa.concat_tables(parts)


def _read(ds, fids, amount_below: int, rng=None) -> pa.Table:
    part = OmnigraphPartition(0, tuple(fids), rng, f"(`amount` < {amount_below})")
    cols = ds.schema.names
    batches = list(R._filtered_batches(ds, part, cols))
    return (
        pa.Table.from_batches([b.select(cols) for b in batches], schema=ds.schema)
        if batches
        else ds.schema.empty_table()
    )


@pytest.mark.parametrize(
    ("below", "modes"),
    [
        (0, [True] * 3),  # nothing matches
        (1, [True] * 3),  # 1 %, in every block: late throughout
        (4, [True, False, False]),  # 3.6 %: above LATE_MAX_SHARE, switched to early
        (30, [True, False, False]),  # 30 %: the first batch switches the partition to early
        (1000, [True, False, False]),  # every non-null row
    ],
)
def test_filtered_batches_equal_filtering_every_row(dataset, monkeypatch, below, modes):
    monkeypatch.setattr(R, "READ_BATCH_SIZE", 64)  # a full batch of evidence within a small fragment
    # early scans in batches of 5,000 rows (read_batch_rows), late ones of 64
    fids = [f.fragment_id for f in dataset.get_fragments()]
    rec = Recorder(dataset)
    part = OmnigraphPartition(0, tuple(fids), None, f"(`amount` < {below})")
    got = pa.Table.from_batches(
        [b.select(dataset.schema.names) for b in R._filtered_batches(rec, part, dataset.schema.names, 5000)],
        schema=dataset.schema,
    )
    want = _oracle(dataset, fids, below)
    assert got.equals(want)  # same rows, same order, same nulls and types
    # the first fragment starts late; after a switch its rest and the later fragments read early
    switched = modes[1] is False
    assert rec.scans == ([True, False, False, False] if switched else modes), rec.scans


def test_a_row_range_partition_reads_only_its_range(dataset, monkeypatch):
    monkeypatch.setattr(R, "READ_BATCH_SIZE", 64)
    fid = dataset.get_fragments()[1].fragment_id  # the one with deletions
    for below in (1, 30, 1000):
        rng = (500, 2500)
        assert _read(dataset, [fid], below, rng).equals(_oracle(dataset, [fid], below, rng)), below


def test_the_decision_needs_a_full_batch_of_matches(dataset, monkeypatch):
    """Fewer matches than one batch in a fragment: no evidence, the scan stays late."""
    monkeypatch.setattr(R, "READ_BATCH_SIZE", 100_000)
    fids = [f.fragment_id for f in dataset.get_fragments()]
    rec = Recorder(dataset)
    part = OmnigraphPartition(0, tuple(fids), None, "(`amount` < 1000)")
    assert (
        sum(b.num_rows for b in R._filtered_batches(rec, part, dataset.schema.names))
        == _oracle(dataset, fids, 1000).num_rows
    )
    assert rec.scans == [True, True, True]


PG = """node Acct {
    name: String @key
}

edge Pay: Acct -> Acct {
    amount: I64?
    fee: F64?
    memo: String?
    day: Date?
    channel: enum(app, branch, web)?
    tags: [String]?
}
"""


#: rows per fragment of the Spark test: a 50 % filter yields a full batch of evidence in each
SPARK_ROWS = 30_000


@pytest.mark.spark
def test_pushed_filters_read_exactly_what_spark_filters(spark, tmp_path):
    """End to end through format("omnigraph"), on two fragments with deletion files: each
    pushed filter (0 %, 1 %, 10 % and 50 % of the rows; late throughout or switched to early;
    every row) returns the rows Spark's own filter keeps on an unfiltered read, every column of
    the bench schema with its nulls and types, and with ``columns`` the same rows of fewer
    columns; a filter the source cannot take is applied by Spark."""
    g = Graph.init(str(tmp_path / "g"), PG)
    write_rows(g, "node:Acct", [{"id": f"a{i}", "name": f"a{i}"} for i in range(10)])
    target = writes.prepare_target(g, "main", "edge:Pay", "append")
    staged = []
    for k in range(2):  # two fragments
        t = _table(SPARK_ROWS, k * SPARK_ROWS)
        i = pc.cast(pc.utf8_slice_codeunits(t["id"], 1), pa.int64())
        extra = {
            "src": pc.binary_join_element_wise("a", pc.cast(pc.remainder(i, 10), pa.string()), ""),
            "dst": pc.binary_join_element_wise("a", pc.cast(pc.remainder(pc.multiply(i, 3), 10), pa.string()), ""),
            "channel": pa.array([("app", "web", None)[j % 3] for j in range(k * SPARK_ROWS, (k + 1) * SPARK_ROWS)]),
        }
        cols = {**{n: t[n] for n in t.column_names}, **extra}
        batch = pa.table({f.name: cols[f.name].cast(f.type) for f in target.schema}, schema=target.schema)
        staged.append(writes.stage(target, batch.to_batches()))
    writes.commit_load(g, "main", staged)
    # deletion files in both fragments: every 13th edge, through the Python source's delete
    gone = spark.createDataFrame([(f"r{j:06d}",) for j in range(0, 2 * SPARK_ROWS, 13)], "id string")
    gone.write.format("omnigraph").option("type", "Pay").option("writeMode", "delete").option("engine", "python").mode(
        "append"
    ).save(g.root)
    amount, memo = F.col("amount"), F.col("memo")

    def load(pushdown: str, **opts):
        # the Python source's reader, also where the shim's provider would take the read
        r = spark.read.format("omnigraph").option("type", "Pay").option("pushdown", pushdown).option("engine", "python")
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load(g.root)

    def plan(df) -> str:
        return df._jdf.queryExecution().executedPlan().toString()

    cases = {
        "one_percent": amount < 1,
        "ten_percent": amount < 10,
        "half": amount < 50,  # a full batch of matches in each fragment: read early after it
        "none": amount < 0,
        "every_row": F.col("id") >= "",
        "null_amount": amount.isNull(),
        "string_and_int": memo.startswith("memo 1") & (amount >= 10),
    }
    counts = {}
    for label, cond in cases.items():
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        try:
            want = sorted(load("false").filter(cond).collect())
        finally:
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        pushed = load("true").filter(cond)
        assert not has_filter_node(plan(pushed)), label
        assert sorted(pushed.collect()) == want, label
        narrow = load("true", columns="id,amount,memo,tags").filter(cond)
        assert sorted(narrow.collect()) == sorted((r["id"], r["amount"], r["memo"], r["tags"]) for r in want), label
        counts[label] = len(want)
    live = 2 * SPARK_ROWS - len(range(0, 2 * SPARK_ROWS, 13))
    assert counts["none"] == 0 and counts["every_row"] == live
    assert 0 < counts["one_percent"] < counts["ten_percent"] < counts["half"] < live
    # a float filter stays with Spark (docs/guarantees.md), which applies it to every row read
    fee = load("true").filter(F.col("fee") > 100.0)
    assert has_filter_node(plan(fee))
    assert fee.count() == sum(1 for j in range(2 * SPARK_ROWS) if j % 10 and j % 13 and j / 7 > 100.0)
