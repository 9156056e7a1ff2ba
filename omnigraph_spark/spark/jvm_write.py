"""The JVM write path: a load planned and committed in Python, staged by ``jvm-shim``.

Why: a Python writer receives every row through a Python worker; that hop alone costs about
what Spark's whole Parquet write costs (docs/benchmarks.md), so no Python-side work can bring a
write to Parquet's speed. ``jvm-shim``'s ``io.omnigraph.spark.LanceFragmentSink`` stages the
rows as uncommitted Lance fragments in the executor JVM instead.

Only the staging moves. The driver keeps everything that knows the graph format: it resolves
the type, checks the input columns (the same planning checks as the Python path, so the same
errors), and projects the DataFrame into the table's exact column order and Spark types with
*widening* casts only (int -> bigint, float -> double, ...), which can never lose a value. The
rules a value can still break are applied per row in the JVM (non-null, enum membership) with
the Python path's messages; null ids get ULIDs there. After the job the driver reads the
fragments the sink hands over and validates and commits them exactly as a Python-staged load
(``commit_load``: one graph commit, load-wide checks, sidecar-guarded publish).

When the JVM path stages a DataFrame (``engine="auto"``): the shim is loaded and every column
is covered by the above (a local root or an object store alike: the storage options travel in
the sink's ``storageSecrets`` option, see :func:`stage_jvm`): targets
String, enum, Bool, I32, I64, F32, F64, Date and lists of them fed by a Spark type that widens
to them; DateTime fed by a timestamp or a date (converted in the JVM, a sub-millisecond part
refused); U32/U64/DateTime/Vector columns the DataFrame does not give (nulls); no @range or
@check on the type; a keyed node must not also give an ``id`` column (that equality check stays
in Python). Everything else (given U32/U64/Vector/Blob columns, decimals, strings parsed as
dates, range and pattern rules) goes through the Python path, logged;
``engine="jvm"`` raises :class:`~omnigraph_spark.errors.JvmWriteUnavailableError` instead.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.types as pt
from lance.fragment import FragmentMetadata
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from ..errors import StorageError
from ..graph import Snapshot
from ..ingest.fingerprints import fingerprint_column
from ..schema.catalog import TypeDef
from ..store import side_files
from ..store.fs import RootStorage
from ..store.layout import RootPaths, is_local
from ..store.writes import EndsProof, FreshIdsProof, IdSource, StagedTable, WriteTarget
from .bad_rows import Refusal, raise_refused
from .jvm_read import ShimSession
from .validate import id_source

log = logging.getLogger(__name__)

SINK_CLASS = "io.omnigraph.spark.LanceFragmentSink"
#: rows per Arrow batch handed from the Spark task thread to the Lance writer thread
JVM_BATCH_ROWS = 65_536
#: the most ids an executor's index can hold (jvm-shim ``NodeIdIndex``: at most 2^29 slots, at
#: least two per id). The executor decides below that: an index costs 32-64 bytes of heap per id
#: plus the bytes of ids longer than 15, and it refuses one above a quarter of its heap, reporting
#: "not checked"; the driver then checks as it always did (as Spark jobs above
#: ``distributedCheckRows`` when a SparkSession runs the load, else in its memory)
MAX_INDEXED_IDS = 1 << 28
#: an edge task that counted at least this many sources hands its bucket counts over (jvm-shim
#: ``EndpointCheck.sketch``: 2^18 counts in 512 KB, no more bytes than its edges staged), so that
#: the driver bounds each source's edges over the whole load by their bucket-wise sum
#: (``store.writes.proven_src_bound``); a smaller task hands over its bound alone
SKETCH_MIN_EDGES = 1 << 18
#: an executor keeps a node-id index it built of at least this many ids as a file under the
#: graph's ``_omnigraph_spark/id_indexes`` (local roots), for the next load checking against the
#: same rows to read instead of building (jvm-shim ``IdIndexFile``; docs/scale.md)
KEEP_INDEX_MIN_IDS = 1_000_000

#: stored Arrow type -> (Spark type it is written as, Spark input types that widen to it exactly)
_WIDENS: dict[pa.DataType, tuple[DataType, tuple[type, ...]]] = {
    pa.string(): (StringType(), (StringType,)),
    pa.bool_(): (BooleanType(), (BooleanType,)),
    pa.int32(): (IntegerType(), (ByteType, ShortType, IntegerType)),
    pa.int64(): (LongType(), (ByteType, ShortType, IntegerType, LongType)),
    pa.float32(): (FloatType(), (ByteType, ShortType, FloatType)),
    pa.float64(): (DoubleType(), (ByteType, ShortType, IntegerType, FloatType, DoubleType)),
    pa.date32(): (DateType(), (DateType,)),
}


@dataclass(frozen=True)
class JvmStagePlan:
    """How one DataFrame is staged by the sink: the projection and the per-row rules.

    ``columns`` are the projected ones, in table order: ``(target, input column or None, Spark
    type, how)`` with ``how`` "as_is" (the input column has the target's type already), "cast"
    (a widening cast; no input column: typed nulls of a non-nullable column, which the row
    rules then refuse), "micros_ts" / "micros_date" (a DateTime target: the input timestamp or
    date as microseconds since the epoch; the sink converts to milliseconds and refuses a
    sub-millisecond part). ``kinds`` tells the sink which table columns are not plain:
    "micros", "null" (a nullable column the DataFrame does not give, and an ``id`` column the
    sink mints in full) or "copy:<column>" (a keyed node's ``id`` when its String key is given
    as a string: the key's values). A "null" or "copy:" column is not in Spark's rows at all;
    the sink writes it."""

    columns: tuple[tuple[str, str | None, DataType, str], ...]
    rules: tuple[dict[str, Any], ...]  # in the order the Python converter applies them
    mint_column: str | None  # "id" when null ids get ULIDs
    kinds: tuple[tuple[str, str], ...] = ()
    #: the tasks fingerprint this column for the driver's uniqueness proof (see
    #: :func:`provable_unique_column`); None: the driver checks uniqueness itself
    unique_column: str | None = None


def _spark_type(t: pa.DataType) -> DataType | None:
    if pt.is_list(t):
        inner = _spark_type(t.value_type)
        return None if inner is None else ArrayType(inner, True)
    hit = _WIDENS.get(t)
    return hit[0] if hit else None


def _widens(src: DataType, target: pa.DataType) -> bool:
    """Whether every value of Spark type ``src`` casts to ``target`` exactly (no value check needed)."""
    if isinstance(src, NullType):
        return True
    if pt.is_list(target):
        return isinstance(src, ArrayType) and _widens(src.elementType, target.value_type)
    hit = _WIDENS.get(target)
    return hit is not None and isinstance(src, hit[1])


def _how(src: DataType | None, target: DataType) -> str:
    """ "as_is" when the input column already has the target's Spark type (no projection), else "cast"."""
    return "as_is" if src is not None and src == target else "cast"


def setup_blocker(spark: SparkSession, target: WriteTarget, shim: ShimSession | None = None) -> str | None:
    """Why no table of this load can be staged in the JVM (None: the JVM path is available).
    ``shim``: the caller's :class:`~.jvm_read.ShimSession` (the probe asked once per load)."""
    return (shim or ShimSession(spark)).blocker()


def plan_stage(
    typedef: TypeDef, target: WriteTarget, input_schema: StructType
) -> tuple[JvmStagePlan | None, list[str]]:
    """The sink's plan for a DataFrame of ``input_schema``, or (None, the reasons it cannot).

    Call after :func:`~omnigraph_spark.spark.writer.precheck_columns`: unknown, missing and
    incompatible columns have raised there already, as on the Python path."""
    given = {f.name: f.dataType for f in input_schema.fields}
    why: list[str] = []
    if typedef.ranges or typedef.checks:
        why.append(f"{typedef.kind} {typedef.name} has @range/@check rules (applied by the Python path)")
    columns: list[tuple[str, str | None, DataType, str]] = []
    kinds: list[tuple[str, str]] = []
    mint: str | None = None
    key = typedef.key_property
    for f in target.schema:
        spark_type = _spark_type(f.type)
        src = given.get(f.name)
        if spark_type is None:
            if pt.is_date64(f.type) and isinstance(src, (TimestampType, DateType, NullType)):
                how = "micros_date" if isinstance(src, DateType) else "micros_ts"
                columns.append((f.name, None if isinstance(src, NullType) else f.name, LongType(), how))
                kinds.append((f.name, "micros"))
            elif (
                src is None
                and f.nullable
                and not (pt.is_large_binary(f.type) or pt.is_binary(f.type) or isinstance(f.type, pa.ExtensionType))
            ):
                kinds.append((f.name, "null"))  # not given: nulls, written by the sink itself
            elif src is None:
                why.append(f"column '{f.name}' is stored as {f.type} (Blob columns stay on the Python path)")
            else:
                why.append(f"column '{f.name}': {src.simpleString()} -> {f.type} needs the Python path's conversion")
            continue
        if f.name == "id":
            if key is not None and not typedef.is_edge:
                if "id" in given:
                    why.append(f"an explicit 'id' beside @key '{key}' is compared to the key by the Python path")
                if _how(given.get(key), spark_type) == "as_is":
                    kinds.append(("id", f"copy:{key}"))  # the sink shares the key column's values
                else:
                    columns.append(("id", key, spark_type, "cast"))
            else:
                if "id" in given and not _widens(given["id"], f.type):
                    why.append(f"column 'id': {given['id'].simpleString()} is not a string")
                if "id" in given and not isinstance(given["id"], NullType):
                    columns.append(("id", "id", spark_type, _how(given["id"], spark_type)))
                else:
                    kinds.append(("id", "null"))  # every id minted by the sink
                mint = "id"
            continue
        if f.name in ("src", "dst") and typedef.is_edge:
            alias = "from" if f.name == "src" else "to"
            name = alias if alias in given else f.name
            columns.append((f.name, name, spark_type, _how(given.get(name), spark_type)))
            continue
        if src is not None and not _widens(src, f.type):
            why.append(f"column '{f.name}': {src.simpleString()} -> {f.type} needs a per-value check (Python path)")
        if src is None or isinstance(src, NullType):
            if f.nullable:
                kinds.append((f.name, "null"))  # not given: nulls, written by the sink itself
                continue
            columns.append((f.name, None, spark_type, "cast"))  # typed nulls: the row rules refuse them
            continue
        columns.append((f.name, f.name, spark_type, _how(src, spark_type)))
    if why:
        return None, why
    rules: list[dict[str, Any]] = []
    for f in target.schema:  # the converter's order: properties in table order, then endpoints
        p = typedef.prop(f.name)
        if p is None:
            continue
        rule: dict[str, Any] = {"column": p.name}
        if not p.type.nullable:
            rule["notNull"] = p.type.describe()
        if p.type.enum_values is not None:
            rule["enum"] = list(p.type.enum_values)
        if len(rule) > 1:
            rules.append(rule)
    if typedef.is_edge:
        rules += [{"column": "src", "notNull": "String"}, {"column": "dst", "notNull": "String"}]
    return JvmStagePlan(
        tuple(columns), tuple(rules), mint, tuple(kinds), unique_column=provable_unique_column(typedef, target)
    ), []


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def projected(df: DataFrame, plan: JvmStagePlan) -> DataFrame:
    """``df`` in the table's exact column order and Spark types (widening casts only).

    One ``selectExpr`` (a single JVM call; building Column objects costs one py4j round trip
    each). A column already of its target type is selected under its own
    name, never aliased: the sink reads columns by position, and a plan of plain column
    references is folded into the scan below it, where an alias or a literal column would make
    Spark copy every row once more before the sink sees it (docs/benchmarks.md)."""
    exprs = []
    selected = set()
    for name, src, spark_type, how in plan.columns:
        sql_type = spark_type.simpleString()
        if how == "as_is" and src not in selected:
            exprs.append(_q(src))  # type: ignore[arg-type]  # an as_is column has a source
            selected.add(src)
            continue
        if src is None:
            e = f"CAST(NULL AS {sql_type})"
        elif how == "micros_date":
            e = f"CAST(unix_date({_q(src)}) AS BIGINT) * 86400000000"  # UTC midnight, exact
        elif how == "micros_ts":
            e = f"unix_micros({_q(src)})"  # a Spark timestamp is an instant: no time zone involved
        else:
            e = f"CAST({_q(src)} AS {sql_type})"
        exprs.append(f"{e} AS {_q(name)}")
    if exprs == [_q(c) for c in df.columns]:
        return df  # already the sink's columns in its order: no plan to analyse
    return df.selectExpr(*exprs)


def stage_jvm(
    df: DataFrame,
    typedef: TypeDef,
    target: WriteTarget,
    plan: JvmStagePlan,
    journal_dir: str,
    ends: tuple[IdSource, IdSource] | None = None,
    fresh: IdSource | None = None,
) -> list[StagedTable]:
    """Driver: run one Spark job that stages ``df`` through the sink; one StagedTable per task.

    Each committed task's files are also noted in ``journal_dir`` (the caller's staging
    journal), so a failed job leaves nothing the caller cannot delete. ``ends`` (edges): the id
    sources of the from and to types; the tasks check every endpoint against them while staging
    and bound the edges per source (see :func:`endpoint_sources`, invariant I15). ``fresh``
    (an append): the committed ids the tasks probe every staged id against (see
    :func:`fresh_source`, invariant I17).

    The sink's driver side hands the tasks' results over in a file of the journal directory
    (under the graph root, which this process reads anyway): on Spark Connect the Spark driver
    runs in the server, which may be another machine than this Python process. Its name does
    not end in ``.json``, so the journal never reads it as an entry; the journal's clean-up
    deletes it with the rest.

    On an object store the graph's storage options go to the executors in the sink's
    ``storageSecrets`` option, never in ``spec``: Spark redacts the value of an option whose key
    matches ``spark.redaction.regex`` (the default matches "secret") in plan strings and the
    event log. The tasks' side files (journal entries, key fingerprints) and the hand-off are
    then single-column Lance files in the journal directory (:mod:`~omnigraph_spark.store.side_files`);
    credentials from the environment (no storage options) are the executors' own."""
    handoff = side_files.location(journal_dir, f"handoff-{uuid.uuid4().hex}", ".staged")
    so = target.storage_options
    spec = sink_spec(typedef, target, plan, journal_dir, handoff, ends, fresh)
    # one option (the sink unpacks it): one py4j call instead of one per option
    w = projected(df, plan).write.format(SINK_CLASS).mode("append").option("spec", json.dumps(spec))
    if so:  # its own option, whose key names a secret: Spark redacts its value in plans and the event log
        w = w.option("storageSecrets", json.dumps(so))
    try:
        w.save()
        tasks = read_handoff(handoff, so)
    finally:
        delete_handoff(handoff, journal_dir, so)
    return staged_from_tasks(typedef, target, plan, tasks, ends, fresh)


def sink_spec(
    typedef: TypeDef,
    target: WriteTarget,
    plan: JvmStagePlan,
    journal_dir: str,
    handoff: str,
    ends: tuple[IdSource, IdSource] | None = None,
    fresh: IdSource | None = None,
) -> dict[str, str]:
    """The sink's ``spec`` option (the JVM unpacks it): everything a task needs, no credentials."""
    spec = {
        "datasetUri": target.stage_uri,
        "tableKey": target.table_key,
        "label": f"{typedef.kind} {typedef.name}",
        "typeName": typedef.name,
        "where": f"{typedef.name} partition",
        "arrowSchema": base64.b64encode(target.schema.serialize().to_pybytes()).decode("ascii"),
        "rules": json.dumps(list(plan.rules)),
        "kinds": json.dumps(dict(plan.kinds)),
        "maxRowsPerFile": str(target.max_rows_per_file),
        "maxBytesPerFile": str(target.max_bytes_per_file or 0),
        "batchRows": str(JVM_BATCH_ROWS),
        "dataStorageVersion": target.data_storage_version,
        "journal": journal_dir,
        "handoff": handoff,
    }
    if plan.mint_column:
        spec["mintColumn"] = plan.mint_column
    if plan.unique_column is not None:
        spec["uniqueColumn"] = plan.unique_column
    keep = kept_indexes(target.root)
    if ends is not None:
        # the journal directory is unique to the load: executors share an index within it only
        spec["endpoints"] = json.dumps(
            {
                "load": journal_dir,
                "src": ends[0].to_json(),
                "dst": ends[1].to_json(),
                "keep": keep,
                "sketchMinEdges": SKETCH_MIN_EDGES,
            }
        )
    if fresh is not None:
        spec["freshIds"] = json.dumps({"load": journal_dir, "ids": fresh.to_json(), "keep": keep})
    return spec  # type: ignore[return-value]  # dataStorageVersion None goes as JSON null


def kept_indexes(root: str) -> dict[str, Any] | None:
    """Where the executors keep the node-id indexes they build, for the next load to read: the
    graph's ``id_indexes`` directory on a local root (a path every executor of a local master
    or of a cluster sharing that file system reaches); None on an object store, where the index
    is built each load."""
    if not is_local(root):
        return None
    return {"dir": RootPaths(root).id_indexes, "minIds": KEEP_INDEX_MIN_IDS}


def read_handoff(handoff: str, storage_options: dict[str, str] | None) -> list[dict[str, Any]]:
    """The tasks' results the sink's driver side handed over (one entry per committed partition)."""
    return json.loads(side_files.read_text(handoff, storage_options))["tasks"]


def delete_handoff(handoff: str, journal_dir: str, storage_options: dict[str, str] | None) -> None:
    try:
        RootStorage(journal_dir, storage_options).delete(handoff)  # False: the job failed before its commit
    except StorageError as e:  # the journal's clean-up deletes it with the rest
        log.warning("cannot delete the hand-off file %s: %s", handoff, e)


def staged_from_tasks(
    typedef: TypeDef,
    target: WriteTarget,
    plan: JvmStagePlan,
    tasks: Sequence[dict[str, Any]],
    ends: tuple[IdSource, IdSource] | None = None,
    fresh: IdSource | None = None,
) -> list[StagedTable]:
    """The staged tables of the sink's tasks, one per task; raises the ONE typed error of the
    tasks that refused their rows (nothing staged then: the caller's journal clean-up deletes
    what the others staged)."""
    # a task whose rows broke a rule staged nothing and handed over the error (bad_rows.py)
    raise_refused(
        [Refusal.from_json(t["error"]) for t in sorted(tasks, key=lambda t: t["partition"]) if t.get("error")]
    )
    out = []
    for t in sorted(tasks, key=lambda t: t["partition"]):
        frags = tuple(FragmentMetadata.from_json(f) for f in t["fragments"])
        minted = plan.mint_column is not None and int(t["given_ids"]) == 0
        proof = None
        if ends is not None and int(t["dangling"]) >= 0:
            sketch = t.get("src_sketch")
            proof = EndsProof(
                ends[0],
                ends[1],
                int(t["dangling"]),
                int(t["src_bound"]),
                src_sketches=(sketch,) if sketch else (),
                unsketched_bound=0 if sketch else None,
            )
        keys = t.get("key_hashes")
        conflicts = int(t.get("fresh_conflicts", -1))
        out.append(
            StagedTable(
                target.table_key,
                target.mode,
                target.stage_uri,
                target.base_version,
                frags,
                int(t["rows"]),
                int(t["bytes"]),
                minted_ids=minted,
                ends=proof,
                key_hashes=(keys,) if keys else None,
                key_column=plan.unique_column if keys else None,
                fresh=FreshIdsProof(fresh, conflicts) if fresh is not None and conflicts >= 0 else None,
            )
        )
    return out


def provable_unique_column(typedef: TypeDef, target: WriteTarget) -> str | None:
    """The column whose uniqueness the staging tasks can prove with fingerprints (the rule the
    Python tasks follow too: :func:`~omnigraph_spark.ingest.fingerprints.fingerprint_column`);
    None: the driver checks exactly."""
    return fingerprint_column(typedef, target.schema)


def fresh_source(typedef: TypeDef, target: WriteTarget, plan: JvmStagePlan, snap: Snapshot) -> IdSource | None:
    """Driver, before staging an append: the committed ids its tasks probe the staged ids
    against (the target table at the snapshot's pin, the exact source the validator's
    :func:`~.validate._fresh_proven` accepts), or None when nothing needs probing (not an append,
    every id minted, an empty table) or the table is too large to index in an executor."""
    if target.mode != "append" or ("id", "null") in plan.kinds:
        return None
    t = snap.table(typedef.table_key)
    if t.row_count == 0 or t.row_count > MAX_INDEXED_IDS:
        return None
    return IdSource((t.base_path, t.lance_branch, t.version))


def endpoint_sources(
    typedef: TypeDef, snap: Snapshot, staged: Sequence[StagedTable], max_ids: int = MAX_INDEXED_IDS
) -> tuple[IdSource, IdSource] | None:
    """Driver, before staging an edge table: the id sources its tasks check endpoints against
    (the validator's own rule, :func:`~.validate.id_source`, on the snapshot the job starts from
    and the node tables staged so far), or None when a node table has more than ``max_ids`` ids
    (default: what a JVM executor's index can hold; a Python task's is
    ``store.endpoint_index.MAX_INDEXED_IDS``): the driver checks them as before."""
    merged = {
        k: StagedTable.merge([s for s in staged if s.table_key == k])  # one StagedTable per task
        for k in {s.table_key for s in staged}
    }
    out = []
    for node_type in (typedef.from_type, typedef.to_type):
        key = f"node:{node_type}"
        source = id_source(snap, merged, key)
        rows = (snap.table(key).row_count if source.table else 0) + (merged[key].rows if key in merged else 0)
        if rows > max_ids:
            log.info(
                "%s: %s has %d ids (> %d): endpoints checked on the driver",
                typedef.table_key,
                key,
                rows,
                max_ids,
            )
            return None
        out.append(source)
    return out[0], out[1]


__all__ = [
    "SINK_CLASS",
    "delete_handoff",
    "read_handoff",
    "sink_spec",
    "staged_from_tasks",
    "endpoint_sources",
    "fresh_source",
    "provable_unique_column",
    "JvmStagePlan",
    "plan_stage",
    "projected",
    "setup_blocker",
    "stage_jvm",
]
