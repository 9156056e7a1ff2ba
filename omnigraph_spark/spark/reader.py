"""The Spark read path: ``spark.read.format("omnigraph").option("type", "Person").load(uri)``.

Where things run (Python DataSource API, Spark 4):

- ``read_schema`` runs in Spark's data-source-creation Python worker on the driver.
- ``make_reader`` / ``OmnigraphReader.__init__``, ``pushFilters`` and ``partitions`` run in
  Spark's planning Python worker on the driver. The reader resolves ONE snapshot there and pins
  every partition to that snapshot's table version, so a writer committing while the query
  runs never changes what it returns (time travel needs pinned versions to stay on disk, which
  Omnigraph guarantees: writers never GC versions the manifest pins, §D.5).
- ``OmnigraphReader.read`` runs on executors, once per partition: it opens the dataset at the
  pinned version and streams converted ``RecordBatch``es (memory bounded by the batch size).

Reads never write: no recovery sweep runs here (a pending sidecar is only logged as a WARNING;
the data read is exactly what the snapshot's manifest publishes).

Filter pushdown: Spark >= 4.1 calls ``pushFilters`` on readers that define it, and refuses to
plan (``DATA_SOURCE_PUSHDOWN_DISABLED``) a reader that defines it while
``spark.sql.python.filterPushdown.enabled`` is false. So there are two reader classes and
``make_reader`` picks the pushdown one only when the running pyspark supports it AND the
conf is on for this query AND the ``pushdown`` option allows it (see ``pushdown_active``).

Spark 4.1.x and 4.2.0 cache the planned read (partitions + read function, i.e. this reader
with its pushed filters) on the provider instance shared by every query of a loaded
DataFrame, and reuse it for a later query of that DataFrame that pushes nothing (no filter,
only non-pushable filters, or the conf turned off). A pushing reader would then silently drop
rows from the later query. Upstream Spark moved the planned read into the scan in the same
change that added ``DataSourceReader.pushLimit``, so on a pyspark without ``pushLimit``
pushdown is used only when the ``pushdown`` option is given explicitly as ``true`` (the user
then promises one filtered query per ``load()``); by default every filter stays with Spark.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructField, StructType

from ..errors import JvmReadUnavailableError, OmnigraphError, OptionError, UnknownColumnError
from ..graph import Graph
from ..schema.catalog import TypeDef
from ..store.tables import open_dataset
from . import filters as _filters
from . import types as _types
from .error_tags import tag_error
from .options import DEFAULT_MAX_ROWS_PER_FILE, ReadOptions

log = logging.getLogger(__name__)

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
#: the least rows a task's default cap allows (:func:`default_max_rows`): the writer's default
#: rows per file, so a full-size file is never cut for the cap. A task that reads part of a file
#: costs more than its share (a row-address filter)
DEFAULT_MAX_ROWS_PER_PARTITION = DEFAULT_MAX_ROWS_PER_FILE
#: below this, a second task costs more (a Python worker round trip) than it saves
MIN_ROWS_PER_PARTITION = 65_536
#: Spark's file sources pack whole files into read tasks of at most this many bytes
#: (``spark.sql.files.maxPartitionBytes``), each split at least this large
#: (``spark.sql.files.openCostInBytes``); without ``maxRowsPerPartition`` a task here groups
#: whole fragments the same way (:func:`default_max_rows`)
MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024
#: rows per batch of a late (filtered) scan: Lance fills each with matching rows, and the first
#: full one is the evidence that decides late or early (:func:`_filtered_batches`)
READ_BATCH_SIZE = 8192
#: a scan that reads every column (no filter, or a filter read early) takes batches of about this
#: many stored bytes, between READ_BATCH_SIZE and MAX_READ_BATCH_ROWS rows: each batch crosses to
#: the JVM as one Arrow message, and fewer, larger ones cost Spark less per row, while wide rows
#: (vectors, long strings) keep a batch's memory near this size times the encoding's ratio
READ_BATCH_BYTES = 8 * 1024 * 1024
MAX_READ_BATCH_ROWS = 65_536
_ROWADDR_FRAGMENT_SHIFT = 32  # Lance row address = fragment_id << 32 | physical offset
_ROWADDR_OFFSET_MASK = (1 << _ROWADDR_FRAGMENT_SHIFT) - 1
#: a filtered scan stays late (the filter's columns first, the others taken for matching rows)
#: while at most this share of the rows it scanned match; above, reading every column and
#: filtering costs less, even counting the late part read before the switch. Where they cross
#: depends on the columns' widths; on the ten columns of ints, strings and lists of
#: benchmarks/python_read_bench.py, between 2 % and 3 % (pylance's own CPU, early scans in
#: batches of :func:`read_batch_rows`)
LATE_MAX_SHARE = 0.025

SUPPORTS_PUSHDOWN = hasattr(DataSourceReader, "pushFilters")
#: pyspark with a scan-scoped planned read (upstream moved it with the pushLimit change)
SCAN_SCOPED_READ_INFO = hasattr(DataSourceReader, "pushLimit")


def _read_options(options: Any):
    """A ``ReadOptions`` from either a ``ReadOptions`` or Spark's raw option map."""
    if isinstance(options, ReadOptions):
        return options
    if isinstance(options, Mapping) or hasattr(options, "items"):
        return ReadOptions.from_options(dict(options.items()))
    raise OptionError(f"expected read options, got {type(options).__name__}", option="options")


def _open_graph(opts):
    return Graph.open(opts.path, opts.storage_options)


def resolve_snapshot(graph, opts):
    """Driver: the ONE snapshot this read returns (head, version, commit or timestampAsOf)."""
    if opts.commit is not None:
        return graph.snapshot(commit=opts.commit)
    if opts.timestamp_as_of is not None:
        return graph.snapshot(opts.branch, timestamp=opts.timestamp_as_of)
    return graph.snapshot(opts.branch, opts.version)


@contextlib.contextmanager
def _tagged() -> Iterator[None]:
    """Prefix our errors with ``[CODE]`` so ``unwrap_error`` finds the code after Spark wraps
    the Python traceback into a JVM exception."""
    try:
        yield
    except OmnigraphError as e:
        tag_error(e)
        raise


def read_schema(options: Any) -> StructType:
    """Driver (data-source-creation worker): the Spark schema of ``options.type``, or of the
    ``columns`` it selects, from the graph's catalog.

    Raises:
        OptionError, UnknownTypeError, UnknownColumnError, GraphNotFoundError.
    """
    with _tagged():
        opts = _read_options(options)
        if opts.engine == "jvm":  # the JVM provider would have taken it: the shim is not loaded
            raise JvmReadUnavailableError(
                "option engine=jvm: format('omnigraph') resolved to the Python source, so the shim jar is not on "
                "this session's class path (omnigraph_spark.configure_spark, docs/api.md)",
                option="engine",
            )
        graph = _open_graph(opts)
        typedef = graph.catalog.resolve(opts.type)
        return _types.spark_schema(typedef, opts.columns)


@dataclass(frozen=True)
class ReadPlan:
    """What executors need to read one table at one pinned version. Small and picklable."""

    base_uri: str  # root/<table_path>: the dataset's main location
    lance_branch: str | None  # None = main lineage
    version: int
    columns: tuple[str, ...]  # stored columns to scan (those present at the pinned version)
    storage_options: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)  # credentials
    batch_rows: int = READ_BATCH_SIZE  # rows per batch of a scan that reads every column (read_batch_rows)


class OmnigraphPartition(InputPartition):
    """One read task: whole fragments (``fragment_ids``), or one physical row range
    ``row_range`` = [start, end) of a single fragment, plus the pushed filter. Picklable."""

    def __init__(
        self,
        index: int,
        fragment_ids: tuple[int, ...] = (),
        row_range: tuple[int, int] | None = None,
        filter: str | None = None,
    ) -> None:
        super().__init__(index)
        self.index = index
        self.fragment_ids = tuple(fragment_ids)
        self.row_range = row_range
        self.filter = filter


def fragment_rows(ds) -> list[tuple[int, int, int]]:
    """(fragment id, live rows, physical rows) of every fragment of ``ds``: the input of
    :func:`plan_partitions`."""
    return [(f.fragment_id, f.count_rows(), f.metadata.physical_rows) for f in ds.get_fragments()]


def _stored_bytes(ds, fragments: Sequence[tuple[int, int, int]]) -> tuple[int, int] | None:
    """(data files' bytes, physical rows) of ``ds``, or None when a size is unknown or it is empty."""
    sizes = [d.file_size_bytes for f in ds.get_fragments() for d in f.metadata.files]
    physical = sum(p for _, _, p in fragments)
    if not physical or not sizes or not all(sizes):
        return None
    return sum(sizes), physical


def read_batch_rows(ds, fragments: Sequence[tuple[int, int, int]], columns: int | None = None) -> int:
    """Rows per batch of a scan that reads every column: :data:`READ_BATCH_BYTES` of the table's
    stored bytes per physical row (the share of ``columns`` of its stored columns, when given),
    within [:data:`READ_BATCH_SIZE`, :data:`MAX_READ_BATCH_ROWS`]. A table whose manifest lacks a
    data file's size: :data:`READ_BATCH_SIZE`."""
    stored = _stored_bytes(ds, fragments)
    if stored is None:
        return READ_BATCH_SIZE
    total, physical = stored
    if columns is not None:
        total = total * columns // max(1, len(ds.schema.names))
    per_row = max(1, -(-total // physical))
    return max(READ_BATCH_SIZE, min(MAX_READ_BATCH_ROWS, READ_BATCH_BYTES // per_row))


def default_max_rows(ds, fragments: Sequence[tuple[int, int, int]], parallelism: int) -> int:
    """A read task's row cap when ``maxRowsPerPartition`` is not given: Spark's split size for
    file sources, ``min(128 MB, max(4 MB, data bytes / parallelism))``, in rows of this table
    (its data files' bytes per physical row), and never below one writer file's rows (a task
    that reads part of a file costs more than its share). So a scan has about as many tasks as
    Spark gives Parquet files of the same size: 10M narrow rows on two cores read as three
    tasks, not ten (many small tasks cost a full scan more than they spread). A table whose
    manifest lacks a data file's size: one writer file's rows."""
    stored = _stored_bytes(ds, fragments)
    if stored is None:
        return DEFAULT_MAX_ROWS_PER_PARTITION
    total, physical = stored
    split = min(MAX_PARTITION_BYTES, max(OPEN_COST_BYTES, -(-total // max(1, parallelism))))
    return max(DEFAULT_MAX_ROWS_PER_PARTITION, split * physical // total)


def task_rows(
    fragments: Sequence[tuple[int, int, int]], max_rows: int, parallelism: int, min_rows: int = MIN_ROWS_PER_PARTITION
) -> int:
    """Target rows per read task: enough tasks to keep ``parallelism`` cores busy, but none
    smaller than ``min_rows`` (nor larger than ``max_rows``). Spark's file sources size splits
    the same way from ``defaultParallelism``."""
    total = sum(live for _, live, _ in fragments if live > 0)
    return max(1, min(max_rows, max(min_rows, -(-total // max(1, parallelism)))))


def plan_partitions(
    fragments: Sequence[tuple[int, int, int]],
    max_rows: int,
    parallelism: int = 1,
    min_rows: int = MIN_ROWS_PER_PARTITION,
) -> list[tuple[tuple[int, ...], tuple[int, int] | None]]:
    """Group fragments into read tasks. Pure (tested without Spark).

    Args:
        fragments: (fragment id, live rows, physical rows) in dataset order.
        max_rows: hard cap on the rows of one task (``maxRowsPerPartition``).
        parallelism: cores to keep busy (``minPartitions``); see :func:`task_rows`.
        min_rows: no task is split below this many rows unless ``max_rows`` demands it.

    Returns:
        A list of (fragment ids, row range or None). Consecutive fragments are merged while
        their live rows fit in the target; a fragment of at least one and a half targets is
        split into equal physical row ranges (the target rounded, so a fragment a few rows
        above it stays one task: a second task costs a Python worker round trip and a
        row-address filter), as is one above ``max_rows``. Fragments with no live rows are
        skipped. No fragments -> one empty task (so an empty table reads as 0 rows).
    """
    target = task_rows(fragments, max_rows, parallelism, min_rows)
    out: list[tuple[tuple[int, ...], tuple[int, int] | None]] = []
    group: list[int] = []
    group_rows = 0
    for fid, live, physical in fragments:
        if live <= 0:
            continue
        n = max(-(-live // max_rows), min(max(1, (2 * live + target) // (2 * target)), max(1, live // min_rows)))
        if n > 1:
            if group:
                out.append((tuple(group), None))
                group, group_rows = [], 0
            step = -(-physical // n)
            for start in range(0, physical, step):
                out.append(((fid,), (start, min(start + step, physical))))
            continue
        if group and group_rows + live > target:
            out.append((tuple(group), None))
            group, group_rows = [], 0
        group.append(fid)
        group_rows += live
    if group:
        out.append((tuple(group), None))
    return out or [((), None)]


def range_filter(fid: int, rng: tuple[int, int]) -> str:
    """The Lance filter of the rows ``[rng[0], rng[1])`` of fragment ``fid`` (by row address)."""
    base = fid << _ROWADDR_FRAGMENT_SHIFT
    return f"(_rowaddr >= {base + rng[0]} AND _rowaddr < {base + rng[1]})"


def column_kinds(typedef: TypeDef) -> dict[str, _filters.ColumnKind]:
    """Column name -> what filter translation needs to know about it."""
    kinds = {c: _filters.ColumnKind("system") for c in typedef.system_columns}
    for p in typedef.properties:
        kinds[p.name] = _filters.ColumnKind(p.type.scalar, p.type.list or p.type.scalar == "Vector")
    return kinds


class OmnigraphReader(DataSourceReader):
    """Reads one node or edge table of one pinned snapshot.

    ``__init__`` and ``partitions`` run on the driver (planning worker); ``read`` on executors.
    The instance is pickled to executors with the read function: it holds only plain values.
    """

    def __init__(self, options: Any, schema: StructType) -> None:
        opts = _read_options(options)
        graph = _open_graph(opts)
        for path in graph.pending_sidecars():
            log.warning(
                "graph %s has a pending recovery sidecar %s: reading the published snapshot only "
                "(reads never recover; run graph.recover() or `omnigraph-spark recover`)",
                graph.root,
                path,
            )
        typedef = graph.catalog.resolve(opts.type)
        snap = resolve_snapshot(graph, opts)
        table = snap.table(typedef.table_key)
        self.graph_root = graph.root
        self.type_name = typedef.name
        self.table_key = typedef.table_key
        self.snapshot_branch = snap.branch
        self.snapshot_version = snap.version
        self.commit_id = snap.commit_id
        # the planning worker has no SparkSession to ask for defaultParallelism: the option, else
        # the driver's cores (= local[*]; on a cluster, set minPartitions to the executor cores)
        self.parallelism = opts.min_partitions or os.cpu_count() or 1
        self.schema = self._check_schema(typedef, schema)
        self.target = _types.arrow_target_schema(self.schema)
        self.kinds = column_kinds(typedef)
        self.pushed: list[str] = []
        ds = graph.open_table(typedef.table_key, snap)
        stored = ds.schema
        wanted = list(self.schema.names)
        _types.check_readable(typedef, stored, wanted)
        absent = [c for c in wanted if c not in stored.names]
        if absent:
            log.info(
                "columns %s are not stored in %s v%d (older schema): they read as nulls",
                absent,
                typedef.table_key,
                table.version,
            )
        self._fragments = fragment_rows(ds)
        scanned = tuple(c for c in wanted if c in stored.names)
        self.plan = ReadPlan(
            table.base_path,
            table.lance_branch,
            table.version,
            scanned,
            tuple(sorted((opts.storage_options or {}).items())) or None,
            read_batch_rows(ds, self._fragments, len(scanned)),
        )
        self.max_rows = opts.max_rows_per_partition or default_max_rows(ds, self._fragments, self.parallelism)
        log.info(
            "omnigraph read %s on %s: manifest v%d (commit %s), table version %d, %d fragments",
            typedef.table_key,
            snap.branch,
            snap.version,
            snap.commit_id,
            table.version,
            len(self._fragments),
        )

    @staticmethod
    def _check_schema(typedef: TypeDef, schema: StructType | None) -> StructType:
        """Accept the schema Spark hands us (ours, or a user-given one naming a subset of the
        type's columns, in any order); the types must be ours."""
        if schema is None:
            return _types.spark_schema(typedef)
        ours = _types.spark_schema(typedef, list(schema.names))
        for mine, theirs in zip(ours.fields, schema.fields):
            if mine.dataType != theirs.dataType:
                raise UnknownColumnError(
                    f"column '{theirs.name}' of '{typedef.name}' reads as {mine.dataType.simpleString()}, not "
                    f"{theirs.dataType.simpleString()}; drop the user schema or cast after loading",
                    type=typedef.name,
                    column=theirs.name,
                )
        return StructType([StructField(t.name, m.dataType, t.nullable) for m, t in zip(ours.fields, schema.fields)])

    @property
    def filter_sql(self) -> str | None:
        return _filters.combine(self.pushed)

    def partitions(self) -> list[InputPartition]:
        """Driver: one task per group of small fragments or per row range of a large one."""
        groups = plan_partitions(self._fragments, self.max_rows, self.parallelism)
        parts: list[InputPartition] = [
            OmnigraphPartition(i, ids, rng, self.filter_sql) for i, (ids, rng) in enumerate(groups)
        ]
        log.debug("omnigraph read %s: %d partitions, filter %r", self.table_key, len(parts), self.filter_sql)
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: stream the partition's rows at the pinned version, converted to Spark's
        Arrow schema."""
        assert isinstance(partition, OmnigraphPartition), type(partition)
        if not partition.fragment_ids:
            return iter(())
        return _read_batches(self.plan, partition, self.target)


def _read_batches(plan: ReadPlan, partition: OmnigraphPartition, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Executor: open the dataset at the pinned version and stream converted batches."""
    ds = open_dataset(
        plan.base_uri,
        branch=plan.lance_branch,
        version=plan.version,
        storage_options=dict(plan.storage_options) if plan.storage_options else None,
    )
    columns = list(plan.columns)
    if partition.filter:
        batches = _filtered_batches(ds, partition, columns, plan.batch_rows)
    else:
        frags = [ds.get_fragment(i) for i in partition.fragment_ids]
        scanner = ds.scanner(
            columns=columns,
            filter=range_filter(partition.fragment_ids[0], partition.row_range) if partition.row_range else None,
            fragments=frags,  # type: ignore[arg-type]  # the planned ids exist at the pinned version
            batch_size=plan.batch_rows,
            scan_in_order=True,
        )
        batches = scanner.to_batches()
    with _tagged():
        for batch in batches:
            if batch.num_rows:
                yield _types.convert_batch(batch, target)


def _filtered_batches(
    ds, partition: OmnigraphPartition, columns: list[str], early_batch_rows: int = READ_BATCH_SIZE
) -> Iterator[pa.RecordBatch]:
    """Executor: the rows of the partition's fragments that pass its pushed filter, in row
    address order, materialised by what the filter's measured selectivity makes cheaper.

    Spark's Python DataSource API prunes no columns, so every column of the type is read. The
    scan starts late: Lance reads the filter's columns, then takes the other columns for the
    matching rows only. The first full batch of matches decides for the partition: if it came
    from rows of which more than :data:`LATE_MAX_SHARE` match, the rest of its fragment (after
    the last row returned) and the partition's later fragments are scanned early, every column
    read and the filter applied to it, which then costs less than taking most rows block by
    block. The evidence is the row address of that batch's last match, so no extra pass
    measures anything. Rows, order and values are the same either way; only the cost differs.
    Early scans take batches of ``early_batch_rows`` (:func:`read_batch_rows`)."""
    late, decided = True, False
    for fid in partition.fragment_ids:
        frag = ds.get_fragment(fid)
        start = partition.row_range[0] if partition.row_range else 0
        conds = [range_filter(fid, partition.row_range)] if partition.row_range else []
        conds.append(f"({partition.filter})")
        if late:
            after = None
            matched = 0
            with ds.scanner(
                columns=columns,
                filter=" AND ".join(conds),
                fragments=[frag],
                batch_size=READ_BATCH_SIZE,
                scan_in_order=True,
                late_materialization=True,
                with_row_address=True,
            ).to_reader() as reader:
                for batch in reader:
                    if not batch.num_rows:
                        continue
                    yield batch
                    matched += batch.num_rows
                    if decided or matched < READ_BATCH_SIZE:
                        continue
                    decided = True
                    last = batch.column("_rowaddr")[-1].as_py() & _ROWADDR_OFFSET_MASK
                    if matched > LATE_MAX_SHARE * (last + 1 - start):
                        late, after = False, last
                        break
            if after is None:
                continue
            log.debug("fragment %d: %d of the first %d rows match; reading early", fid, matched, after + 1 - start)
            conds.append(f"(_rowaddr > {(fid << _ROWADDR_FRAGMENT_SHIFT) + after})")
        yield from ds.scanner(
            columns=columns,
            filter=" AND ".join(conds),
            fragments=[frag],
            batch_size=early_batch_rows,
            scan_in_order=True,
            late_materialization=False,
        ).to_batches()


class OmnigraphPushdownReader(OmnigraphReader):
    """An :class:`OmnigraphReader` that also takes filters (Spark >= 4.1 with
    ``spark.sql.python.filterPushdown.enabled``). ``pushFilters`` runs on the driver."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # Spark's name
        pushed, kept = _filters.split_filters(filters, {c: self.kinds[c] for c in self.kinds})
        self.pushed.extend(pushed)
        if pushed:
            log.info("omnigraph read %s: pushed filter %s", self.table_key, _filters.combine(pushed))
        return iter(kept)


def _conf_from_planning_worker() -> bool | None:
    """Whether Spark enabled filter pushdown for the query being planned, read from the
    planning worker that is calling us, or None if we are not under one.

    Why the call stack: ``DataSource.reader`` runs in a Python worker with no SparkSession;
    ``pyspark.sql.worker.data_source_pushdown_filters`` is only used when the conf is on, and
    ``plan_data_source_read`` receives the conf as its local ``enable_pushdown``.
    """
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        fname = f.f_code.co_filename.replace("\\", "/")
        if fname.endswith("pyspark/sql/worker/data_source_pushdown_filters.py"):
            return True
        if fname.endswith("pyspark/sql/worker/plan_data_source_read.py") and "enable_pushdown" in f.f_locals:
            return bool(f.f_locals["enable_pushdown"])
        f = f.f_back
    return None


def _conf_from_session() -> bool | None:
    try:
        s = SparkSession.getActiveSession()
        if s is None:
            return None
        return str(s.conf.get(PUSHDOWN_CONF, "false")).strip().lower() == "true"
    except Exception:  # no JVM here (executor-like process): unknown
        return None


def pushdown_active(option: bool = True, explicit: bool = False) -> bool:
    """Driver: whether the reader may define ``pushFilters`` for this query.

    Needs: a pyspark with ``pushFilters``; the ``pushdown`` option on (``explicit``: the user
    gave it, required on pyspark without a scan-scoped planned read, see the module doc); and
    Spark's conf on (the calling planning worker says, else the active session; unknown means
    off, which is always safe: Spark then applies every filter itself)."""
    if not (SUPPORTS_PUSHDOWN and option):
        return False
    if not SCAN_SCOPED_READ_INFO and not explicit:
        return False
    on = _conf_from_planning_worker()
    if on is None:
        on = _conf_from_session()
    return bool(on)


def _gave_option(options: Any, name: str) -> bool:
    keys = options.keys() if hasattr(options, "keys") else ()
    return any(str(k).lower() == name.lower() for k in keys)


def make_reader(options: Any, schema: StructType) -> DataSourceReader:
    """Driver (planning worker): the reader for one query, pinned to one snapshot."""
    with _tagged():
        opts = _read_options(options)
        push = pushdown_active(opts.pushdown, explicit=_gave_option(options, "pushdown"))
        cls = OmnigraphPushdownReader if push else OmnigraphReader
        return cls(opts, schema)
