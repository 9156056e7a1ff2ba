"""Reader planning without running Spark jobs: partitions, pinning, pickling, pushdown choice."""

from __future__ import annotations

import pickle

import lance
import pyarrow as pa
import pyspark.sql.datasource as _ds
import pytest

from omnigraph_spark.spark import reader as R
from omnigraph_spark.spark.types import arrow_target_schema
from tests.store.helpers import people, write_rows

EqualTo = getattr(_ds, "EqualTo", None)  # pyspark >= 4.1 only
needs_pushdown_api = pytest.mark.skipif(EqualTo is None, reason="pyspark < 4.1 has no filter pushdown API")


def test_plan_partitions_merges_small_and_splits_large():
    frags = [(0, 3, 3), (1, 3, 3), (2, 0, 5), (3, 10, 12), (4, 1, 1)]
    assert R.plan_partitions(frags, 7) == [((0, 1), None), ((3,), (0, 6)), ((3,), (6, 12)), ((4,), None)]
    assert R.plan_partitions(frags, 100) == [((0, 1, 3, 4), None)]
    assert R.plan_partitions([], 10) == [((), None)]
    assert R.plan_partitions([(0, 0, 4)], 10) == [((), None)]


def test_task_rows_fills_the_cores_but_keeps_tasks_large():
    two_halves = [(0, 500_000, 500_000), (1, 500_000, 500_000)]
    # two cores, two 500k fragments: one task per fragment (not one 1M-row task)
    assert R.plan_partitions(two_halves, 1_000_000, 2) == [((0,), None), ((1,), None)]
    # one compacted 1M-row fragment on 4 cores: four physical ranges
    one = [(0, 1_000_000, 1_000_000)]
    assert [rng for _, rng in R.plan_partitions(one, 1_000_000, 4)] == [
        (0, 250_000),
        (250_000, 500_000),
        (500_000, 750_000),
        (750_000, 1_000_000),
    ]
    # small tables stay one task: no task below MIN_ROWS_PER_PARTITION
    small = [(i, 10_000, 10_000) for i in range(8)]
    assert R.task_rows(small, 1_000_000, 8) == R.MIN_ROWS_PER_PARTITION
    assert R.plan_partitions(small, 1_000_000, 8) == [(tuple(range(6)), None), ((6, 7), None)]
    # a fragment just above the target is not cut into tasks below the floor
    assert R.plan_partitions([(0, 70_000, 70_000), (1, 70_000, 70_000)], 1_000_000, 3) == [((0,), None), ((1,), None)]
    # maxRowsPerPartition still caps a task
    assert R.plan_partitions([(0, 130_000, 130_000)], 100_000, 1) == [((0,), (0, 65_000)), ((0,), (65_000, 130_000))]
    assert R.task_rows(one, 100, 1) == 100
    assert R.task_rows([], 1_000_000, 2) == R.MIN_ROWS_PER_PARTITION


def test_a_fragment_a_little_above_the_target_stays_one_task():
    """Two writer files for two cores read as two tasks, though the first is a few rows above
    half the table (2M rows: 1,048,576 + 951,424); a fragment of one and a half targets or more
    is split, and maxRowsPerPartition still caps every task."""
    full = R.DEFAULT_MAX_ROWS_PER_PARTITION
    two = [(0, full, full), (1, 2_000_000 - full, 2_000_000 - full)]
    assert R.plan_partitions(two, full, 2) == [((0,), None), ((1,), None)]
    uneven = [(0, 1_500_000, 1_500_000), (1, 500_000, 500_000)]
    assert R.plan_partitions(uneven, 2_000_000, 2) == [((0,), (0, 750_000)), ((0,), (750_000, 1_500_000)), ((1,), None)]
    assert [rng for _, rng in R.plan_partitions(two, 600_000, 2)][:2] == [(0, full // 2), (full // 2, full)]


def test_full_size_files_are_read_whole():
    """Reading part of a file costs more than its share (a row-address filter), so files of
    the writer's default size are never cut by the default cap; only too few files for the
    cores are."""
    from omnigraph_spark.spark.options import DEFAULT_MAX_ROWS_PER_FILE

    assert R.DEFAULT_MAX_ROWS_PER_PARTITION == DEFAULT_MAX_ROWS_PER_FILE
    full = DEFAULT_MAX_ROWS_PER_FILE
    four = [(0, full, full), (1, 951_424, 951_424), (2, full, full), (3, 951_424, 951_424)]
    assert R.plan_partitions(four, R.DEFAULT_MAX_ROWS_PER_PARTITION, 2) == [((i,), None) for i in range(4)]
    assert [rng for _, rng in R.plan_partitions([(0, full, full)], R.DEFAULT_MAX_ROWS_PER_PARTITION, 2)] == [
        (0, full // 2),
        (full // 2, full),
    ]


class _Files:
    """A table's fragments as default_max_rows sees them: data file sizes only."""

    def __init__(self, sizes):
        from types import SimpleNamespace as NS

        self.frags = [NS(metadata=NS(files=[NS(file_size_bytes=s)])) for s in sizes]
        self.schema = NS(names=["id", "a", "b", "c"])

    def get_fragments(self):
        return self.frags


def test_the_default_cap_groups_whole_fragments_as_spark_splits_files():
    """Without maxRowsPerPartition a read task groups whole fragments up to Spark's file split
    size, min(128 MB, max(4 MB, bytes / cores)) in the table's rows, never below a writer file's
    rows: ten 1M-row fragments of 30 MB on two cores read as three tasks (Parquet files of that
    size get three), not ten; a table of small files on many cores keeps one file per task."""
    full = R.DEFAULT_MAX_ROWS_PER_PARTITION
    ten = [(i, full, full) for i in range(10)]
    cap = R.default_max_rows(_Files([30 << 20] * 10), ten, 2)
    assert cap == (128 << 20) * 10 * full // (300 << 20)
    assert [ids for ids, _ in R.plan_partitions(ten, cap, 2)] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    assert R.default_max_rows(_Files([30 << 20] * 10), ten, 16) == full  # 19 MB splits: a file each
    assert R.default_max_rows(_Files([30 << 20, None]), ten[:2], 2) == full  # a size unknown
    assert R.default_max_rows(_Files([30 << 20, 0]), ten[:2], 2) == full
    assert R.default_max_rows(_Files([]), [], 2) == full


def test_scans_of_every_column_take_batches_of_about_eight_megabytes():
    """Rows per batch of a scan reading every column: READ_BATCH_BYTES of stored bytes per
    row, within [READ_BATCH_SIZE, MAX_READ_BATCH_ROWS]; the share of the columns read when
    fewer; READ_BATCH_SIZE when a file's size is unknown."""
    full = R.DEFAULT_MAX_ROWS_PER_PARTITION
    narrow = _Files([50 * full])  # 50 bytes a row
    assert R.read_batch_rows(narrow, [(0, full, full)]) == R.MAX_READ_BATCH_ROWS
    wide = _Files([6_000 * full])  # a 1536-dimension vector a row
    assert R.read_batch_rows(wide, [(0, full, full)]) == R.READ_BATCH_SIZE
    mid = _Files([400 * full])
    assert R.read_batch_rows(mid, [(0, full, full)]) == R.READ_BATCH_BYTES // 400
    assert R.read_batch_rows(mid, [(0, full, full)], columns=2) == min(R.MAX_READ_BATCH_ROWS, R.READ_BATCH_BYTES // 200)
    assert R.read_batch_rows(_Files([None]), [(0, full, full)]) == R.READ_BATCH_SIZE
    assert R.read_batch_rows(_Files([]), []) == R.READ_BATCH_SIZE


def test_row_ranges_cover_a_fragment_with_deletions_exactly_once(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(
        pa.table({"id": [f"r{i:02d}" for i in range(50)], "x": list(range(50))}), uri, max_rows_per_file=25
    )
    ds = lance.dataset(uri)
    ds.delete("x % 7 = 0")
    ds = lance.dataset(uri)
    frags = [(f.fragment_id, f.count_rows(), f.metadata.physical_rows) for f in ds.get_fragments()]
    plan = R.ReadPlan(uri, None, ds.version, ("id", "x"))
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    target = arrow_target_schema(
        StructType([StructField("id", StringType(), False), StructField("x", LongType(), True)])
    )
    for max_rows in (1, 4, 10, 30, 100):
        got = []
        for i, (ids, rng) in enumerate(R.plan_partitions(frags, max_rows)):
            for b in R._read_batches(plan, R.OmnigraphPartition(i, ids, rng, "(`x` > 3)"), target):
                assert b.schema == target
                got += b.column("x").to_pylist()
        assert sorted(got) == [x for x in range(50) if x % 7 and x > 3], max_rows


def test_reader_stays_on_its_snapshot_while_a_writer_commits(test_graph):
    write_rows(test_graph, "node:Person", people("a", "b"))
    opts = {"path": test_graph.root, "type": "Person", "maxRowsPerPartition": "1"}
    reader = R.make_reader(opts, R.read_schema(opts))
    write_rows(test_graph, "node:Person", people("c"))  # commits between planning and execution
    write_rows(test_graph, "node:Person", people("a"), mode="merge")
    reader = pickle.loads(pickle.dumps(reader))  # what Spark ships to executors
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]
    rows = [r for p in parts for b in reader.read(p) for r in b.column("id").to_pylist()]
    assert sorted(rows) == ["a", "b"]
    fresh = R.make_reader(opts, R.read_schema(opts))
    assert sorted(r for p in fresh.partitions() for b in fresh.read(p) for r in b.column("id").to_pylist()) == [
        "a",
        "b",
        "c",
    ]


@pytest.mark.spark
@needs_pushdown_api
def test_pushdown_filters_reach_partitions(test_graph, spark):
    write_rows(test_graph, "node:Person", people("O'Brien", "x"))
    opts = {"path": test_graph.root, "type": "Person", "pushdown": "true"}
    reader = R.make_reader(opts, R.read_schema(opts))  # active session, conf on, opted in
    assert isinstance(reader, R.OmnigraphPushdownReader)
    f_ok, f_bad = EqualTo(("name",), "O'Brien"), EqualTo(("name",), 1)
    assert list(reader.pushFilters([f_ok, f_bad])) == [f_bad]
    reader = pickle.loads(pickle.dumps(reader))
    (p,) = reader.partitions()
    assert p.filter == "(`name` = 'O''Brien')"
    assert [r for b in reader.read(p) for r in b.column("id").to_pylist()] == ["O'Brien"]


@pytest.mark.spark
def test_pushdown_needs_support_conf_and_option(spark, test_graph):
    opts = {"path": test_graph.root, "type": "Person"}
    schema = R.read_schema(opts)
    assert R.pushdown_active(True, explicit=True) is R.SUPPORTS_PUSHDOWN
    assert R.pushdown_active(True) is (R.SUPPORTS_PUSHDOWN and R.SCAN_SCOPED_READ_INFO)
    assert R.pushdown_active(False, explicit=True) is False
    assert type(R.make_reader({**opts, "pushdown": "false"}, schema)) is R.OmnigraphReader
    spark.conf.set(R.PUSHDOWN_CONF, "false")
    try:
        assert R.pushdown_active(True, explicit=True) is False
        reader = R.make_reader({**opts, "pushdown": "true"}, schema)
        assert type(reader) is R.OmnigraphReader
        # Spark's own check: a reader that does not define pushFilters is accepted with the conf off
        from pyspark.sql.datasource import DataSourceReader

        if R.SUPPORTS_PUSHDOWN:
            assert getattr(reader.pushFilters, "__func__", None) is DataSourceReader.pushFilters
        else:  # pyspark 4.0: no pushFilters anywhere
            assert not hasattr(reader, "pushFilters")
    finally:
        spark.conf.set(R.PUSHDOWN_CONF, "true")


@pytest.mark.parametrize(
    "opts",
    [
        {"type": "Person"},
        {"path": "G", "type": "Person", "version": "0"},
        {"path": "G", "type": "Person", "bogus": "1"},
        {"path": "G", "type": "Person", "timestampAsOf": "yesterday"},
    ],
)
def test_bad_options_fail_at_planning(opts, test_graph):
    from omnigraph_spark.errors import OptionError

    opts = {k: test_graph.root if v == "G" else v for k, v in opts.items()}
    with pytest.raises(OptionError):
        R.read_schema(opts)


def test_type_conversions_are_exact_and_refuse_blob_extensions():
    from pyspark.sql.types import StructField, StructType, TimestampType

    from omnigraph_spark.errors import CorruptGraphError, UnsupportedValueError
    from omnigraph_spark.schema.catalog import Catalog
    from omnigraph_spark.spark import types as T

    target = T.arrow_target_schema(StructType([StructField("at", TimestampType(), True)]))
    batch = pa.record_batch([pa.array([1704164645678, -1, None], pa.date64())], names=["at"])
    out = T.convert_batch(batch, target)
    assert out.column(0).cast(pa.int64()).to_pylist() == [1704164645678000, -1000, None]
    with pytest.raises(CorruptGraphError):
        T.convert_array(pa.array([2**40], pa.int64()), pa.int32(), "x")
    blob = pa.schema(
        [
            pa.field("id", pa.string(), False),
            pa.field("data", pa.struct([("data", pa.large_binary()), ("uri", pa.string())])),
        ]
    )
    td = Catalog.from_ir(
        {
            "nodes": [
                {
                    "name": "B",
                    "type_id": 1,
                    "properties": [
                        {"name": "data", "prop_id": 1, "prop_type": {"scalar": "Blob", "nullable": True, "list": False}}
                    ],
                }
            ],
            "edges": [],
        }
    ).resolve("B")
    with pytest.raises(UnsupportedValueError):
        T.check_readable(td, blob, ["id", "data"])
    T.check_readable(td, blob, ["id"])  # leaving the blob out with `columns` works
