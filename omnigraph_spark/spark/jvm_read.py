"""The JVM read path: a snapshot planned in Python, scanned by ``jvm-shim``.

Why: a Python DataSource read moves every row through a Python worker, which caps a full scan
at about half Spark's Parquet reader's speed however fast the Python side is (docs/benchmarks.md: a
source that only streams the same fragments with pylance is no faster). ``jvm-shim``'s
``io.omnigraph.spark.LanceSnapshotSource`` scans Lance fragments straight into Spark columnar
batches in the executor JVM.

Only the scan moves. The driver still does everything that knows the graph format, here in
Python: open the graph, resolve ONE snapshot (branch, version, commit or timestamp), check the
columns, and plan the tasks (:func:`~omnigraph_spark.spark.reader.plan_partitions`, the same
fragment groups and row ranges as the Python reader). The JVM source receives a dataset path,
a pinned version, the owning Lance branch and the task list, nothing else.

When the JVM path is used (``engine="auto"``): the shim answers its probe (:func:`shim_blocker`,
no py4j: classic sessions and Spark Connect alike) and every
selected column is stored exactly as Spark reads it (String, enum, Bool, I32, I64, F32, F64, Date and
lists of them). U32, U64, DateTime, Vector and Blob columns need the Python reader's exact
conversions (docs/types.md), so such a read falls back to ``format("omnigraph")`` (logged);
``engine="jvm"`` raises :class:`~omnigraph_spark.errors.JvmReadUnavailableError` instead.

Column pruning is pushed, and so are the filters Lance evaluates exactly as Spark (the Python
source's rules, ``jvm-shim`` ``FilterSql``: no floats, lists or DateTime); Lance then reads the
other columns only for the rows that pass, and Spark applies every filter again after the scan.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..errors import JvmReadUnavailableError, OptionError
from ..graph import Graph, Snapshot
from ..schema.catalog import TypeDef
from . import types as _types
from .options import ENGINES
from .reader import column_kinds, default_max_rows, fragment_rows, plan_partitions, range_filter
from .shim_conf import SHIM_DIR_ENV, SHIM_JAR, configure_spark, shim_jars, shim_spark_conf  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

SHIM_CLASS = "io.omnigraph.spark.LanceSnapshotSource"
#: a class of the shim's libraries (the Lance Java SDK): a shim jar alone would fail its first job
LANCE_CLASS = "org.lance.Dataset"
#: rows per Arrow batch of the JVM scan: larger batches amortise per-batch costs (memory is bounded by the batch)
JVM_BATCH_SIZE = 262_144


#: the shim source's probe (LanceSnapshotSource.PROBE_OPTION / PROBE_COLUMN): the relation it
#: resolves to has this one column, which names the protocol of the options this package sends
PROBE_OPTION = "probe"
PROBE_COLUMN = "omnigraph_shim_v1"


def shim_blocker(spark: SparkSession) -> str | None:
    """Why the session's Spark cannot run the JVM paths (None: it can).

    Asks the shim itself: ``spark.read.format(SHIM_CLASS).option("probe", ...)`` resolves to a
    relation of one known column when the class loads. Resolving a plan needs no py4j, so this
    answers through Spark Connect (where the class path is the server's) as on a classic
    session, through the class loader a real read or write uses. Nothing is cached.

    A classic session first asks its JVM whether the shim's class and Lance's load (two py4j
    calls, cheaper than the probe's plan analysis): the probe runs there only to say why not."""
    if not is_connect(spark):
        try:
            utils = spark.sparkContext._jvm.org.apache.spark.util.Utils  # type: ignore[union-attr]  # a classic session has a JVM
            if all(utils.classIsLoadable(c) for c in (SHIM_CLASS, LANCE_CLASS)):
                return None
        except Exception:  # a stopped context: the probe says why
            pass
    try:
        names = spark.read.format(SHIM_CLASS).option(PROBE_OPTION, "true").load().schema.names
    except Exception as e:  # not on the class path, a shim older than the probe, a stopped session
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        log.debug("JVM shim probe failed: %s", first)
        libs = re.search(r"the shim's libraries are not on the class path: [^\n]*?\)", str(e))
        if libs:  # the shim's own answer (LanceSnapshotSource.requireLibraries)
            return (
                f"{libs.group(0)}; omnigraph_spark.configure_spark(builder) adds them (docs/api.md, "
                '"The JVM paths: set-up")'
            )
        if "DATA_SOURCE_NOT_FOUND" in str(e) or "ClassNotFound" in str(e):
            return (
                f"the JVM shim ({SHIM_CLASS}) is not on the class path; build it with `make jvm-shim` and "
                "add it with omnigraph_spark.configure_spark(builder) (docs/api.md)"
            )
        return f"the JVM shim ({SHIM_CLASS}) does not answer this package's probe: {first}"
    if names != [PROBE_COLUMN]:
        return (
            f"the JVM shim on the class path speaks {names}, this package {PROBE_COLUMN}: install the shim "
            "jar of this package's release"
        )
    return None


def shim_loaded(spark: SparkSession) -> bool:
    """Whether the session's Spark can run the JVM paths (see :func:`shim_blocker`)."""
    return shim_blocker(spark) is None


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no py4j, no SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """The number of tasks Spark gives a scan by default, without py4j on Spark Connect.

    ``spark.default.parallelism`` when the session sets it; on a classic session the
    SparkContext's value (its scheduler's cores); on Spark Connect the partitions Spark gives
    ``spark.range`` (the same default, from the server's scheduler): read from its physical
    plan (``Range (..., splits=N)``, one plan analysis), else counted by one tiny job (slower)."""
    conf = spark.conf.get("spark.default.parallelism", None)
    if conf:
        return max(1, int(conf))
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    try:
        plan = spark.range(1)._explain_string(mode="simple")  # type: ignore[operator]  # Connect's DataFrame method, not a column
        m = re.search(r"\bRange \(\d+, \d+, step=\d+, splits=(\d+)\)", plan)
        if m:
            return max(1, int(m.group(1)))
    except Exception as e:  # a client without the plan string: count instead
        log.debug("no Range plan string (%s): counting partitions", e)

    row = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p").alias("n")).first()
    return int(row["n"]) + 1  # type: ignore[index]  # an aggregate without grouping has one row


class ShimSession:
    """What one call learns about a session's JVM path, asked at most once (a multi-table
    read asks the probe and the parallelism once, not per table). Per call; never shared."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._blocker: tuple[str | None] | None = None
        self._parallelism: int | None = None

    def blocker(self) -> str | None:
        if self._blocker is None:
            self._blocker = (shim_blocker(self.spark),)
        return self._blocker[0]

    def parallelism(self) -> int:
        if self._parallelism is None:
            self._parallelism = default_parallelism(self.spark)
        return self._parallelism


def column_blockers(stored: pa.Schema, target: pa.Schema) -> list[str]:
    """Why each target column cannot be scanned as stored (empty = the JVM path can read it).

    Spark's ``ArrowColumnVector`` reads Arrow vectors as they are, so the stored type must be
    exactly the type Spark expects: no widening, no unit change."""
    out = []
    for f in target:
        if f.name not in stored.names:
            out.append(f"column '{f.name}' is not stored at this version (older schema: reads as nulls)")
        elif not stored.field(f.name).type.equals(f.type):
            out.append(f"column '{f.name}' is stored as {stored.field(f.name).type} and reads as {f.type}")
    return out


def load_table(
    spark: SparkSession,
    graph: Graph,
    snap: Snapshot,
    typedef: TypeDef,
    *,
    columns: Sequence[str] | None = None,
    storage_options: dict[str, str] | None = None,
    engine: str = "auto",
    min_partitions: int | None = None,
    max_rows_per_partition: int | None = None,
    shim: ShimSession | None = None,
) -> DataFrame:
    """Driver: one type of an already resolved snapshot as a DataFrame, through the JVM scan
    when ``engine`` allows and the table qualifies, else through ``format("omnigraph")``.
    ``shim``: the caller's :class:`ShimSession` when it reads several tables of one session.

    Raises:
        OptionError: unknown ``engine``.
        JvmReadUnavailableError: ``engine="jvm"`` and the JVM path cannot do this read.
    """
    if engine not in ENGINES:
        raise OptionError(f"engine must be one of {list(ENGINES)}, got {engine!r}", option="engine")
    schema = _types.spark_schema(typedef, columns)
    if engine != "python":
        shim = shim or ShimSession(spark)
        why = shim.blocker()
        if why is None:
            ds = graph.open_table(typedef.table_key, snap)  # opened once: checked, then planned
            why = "; ".join(column_blockers(ds.schema, _types.arrow_target_schema(schema))) or None
            if why is None:
                return _jvm_frame(
                    spark,
                    snap,
                    typedef,
                    schema,
                    ds,
                    min_partitions or shim.parallelism(),
                    max_rows_per_partition,
                    storage_options,
                )
        if engine == "jvm":
            raise JvmReadUnavailableError(
                f"cannot read '{typedef.name}' through the JVM path: {why}", type=typedef.name
            )
        log.info("reading %s through the Python source: %s", typedef.table_key, why)
    r = (
        spark.read.format("omnigraph")
        .option("engine", "python")  # this IS the fallback: no second planning
        .option("type", typedef.name)
        .option("branch", snap.branch)
        .option("version", str(snap.version))
    )
    if columns is not None:
        r = r.option("columns", ",".join(columns))
    if min_partitions is not None:
        r = r.option("minPartitions", str(min_partitions))
    if max_rows_per_partition is not None:
        r = r.option("maxRowsPerPartition", str(max_rows_per_partition))
    for k, v in (storage_options or {}).items():
        r = r.option(f"storage.{k}", v)
    return r.load(graph.root)


def _jvm_frame(
    spark: SparkSession,
    snap: Snapshot,
    typedef: TypeDef,
    schema,
    ds,
    parallelism: int,
    max_rows_per_partition: int | None,
    storage_options: dict[str, str] | None,
) -> DataFrame:
    r = spark.read.format(SHIM_CLASS).schema(schema)
    for k, v in scan_options(snap, typedef, schema, ds, parallelism, max_rows_per_partition).items():
        r = r.option(k, v)
    if storage_options:  # one option whose key names a secret: Spark redacts its value in plans
        r = r.option("storageSecrets", json.dumps(storage_options))
    return r.load()


def scan_options(
    snap: Snapshot,
    typedef: TypeDef,
    schema,
    ds,
    parallelism: int,
    max_rows_per_partition: int | None,
    pushdown: bool = True,
) -> dict[str, str]:
    """The JVM scan's options (``LanceSnapshotSource``) for one table of ``snap``: the pinned
    table version and the tasks (the Python reader's fragment groups and row ranges), no
    credentials. ``pushdown`` False: no column is offered to Lance's filters."""
    table = snap.table(typedef.table_key)
    read_columns = set(schema.fieldNames())
    frags = fragment_rows(ds)
    tasks = []
    for ids, rng in plan_partitions(
        frags, max_rows_per_partition or default_max_rows(ds, frags, parallelism), parallelism
    ):
        if ids:  # an empty table plans one empty task: the JVM source just gets none
            tasks.append({"fragments": list(ids), "filter": range_filter(ids[0], rng) if rng else None})
    log.info(
        "omnigraph JVM read %s on %s: manifest v%d (commit %s), table version %d, %d fragments, %d tasks",
        typedef.table_key,
        snap.branch,
        snap.version,
        snap.commit_id,
        table.version,
        len(frags),
        len(tasks),
    )
    out = {
        "path": table.base_path,
        "version": str(table.version),
        "partitions": json.dumps(tasks),
        "table": typedef.table_key,
        "batchSize": str(JVM_BATCH_SIZE),
        # the columns Lance may filter on (their kinds decide what translates exactly, see FilterSql)
        "pushable": json.dumps(
            {c: k.scalar for c, k in column_kinds(typedef).items() if pushdown and k.pushable and c in read_columns}
        ),
    }
    if table.lance_branch:
        out["branch"] = table.lance_branch
    return out


def read_table(
    spark: SparkSession,
    uri: str,
    type: str,
    *,
    branch: str = "main",
    version: int | None = None,
    commit: str | None = None,
    timestamp=None,
    columns: Sequence[str] | None = None,
    storage_options: dict[str, str] | None = None,
    engine: str = "auto",
    min_partitions: int | None = None,
    max_rows_per_partition: int | None = None,
) -> DataFrame:
    """One node or edge type of one snapshot, through the fastest path that can read it.

    The same rows, columns and Spark types as
    ``spark.read.format("omnigraph").option("type", type)...load(uri)`` with the same snapshot
    options; ``engine`` picks the scan: ``"auto"`` (JVM when possible), ``"jvm"`` (or raise
    JvmReadUnavailableError), ``"python"`` (the Python DataSource).

    Raises:
        GraphNotFoundError, UnknownTypeError, UnknownColumnError, BranchNotFoundError,
        CommitNotFoundError, OptionError, JvmReadUnavailableError.
    """
    graph = Graph.open(uri, storage_options)
    for path in graph.pending_sidecars():
        log.warning("graph %s has a pending recovery sidecar %s: reading the published snapshot only", graph.root, path)
    typedef = graph.catalog.resolve(type)
    snap = graph.snapshot(branch, version, commit=commit, timestamp=timestamp)
    return load_table(
        spark,
        graph,
        snap,
        typedef,
        columns=columns,
        storage_options=storage_options,
        engine=engine,
        min_partitions=min_partitions,
        max_rows_per_partition=max_rows_per_partition,
    )


__all__ = [
    "read_table",
    "load_table",
    "shim_jars",
    "shim_spark_conf",
    "configure_spark",
    "shim_loaded",
    "shim_blocker",
    "ShimSession",
    "default_parallelism",
    "is_connect",
    "scan_options",
    "column_blockers",
    "ENGINES",
    "SHIM_CLASS",
]
