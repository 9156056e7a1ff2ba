"""Multi-type loads as ONE graph commit: ``write_graph`` (DataFrames) and ``load_jsonl``.

Why not ``df.write`` per type: each ``save()`` is its own graph commit, so edges could be
committed without their nodes. Here every DataFrame is staged in its own Spark job
(``mapInArrow`` emitting one pickled :class:`StagedTable` per task, collected on the driver),
then a single ``commit_load`` validates all of it together (edges against nodes of the same
load) and publishes it atomically.

Staging journal: a ``mapInArrow`` job that fails hands the driver no results, so the files of
its successful tasks would be orphaned. Each task therefore records what it staged under
``_omnigraph_spark/staging/<job id>/`` before returning; the driver deletes every journaled file that
is not committed (failed jobs, failed or speculative task attempts) and then the journal.
A task that dies *while* writing can still leave an unreferenced (invisible) file behind.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import pickle
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F

from ..errors import DataError, InvalidRecordError, JvmWriteUnavailableError, OmnigraphError, OptionError
from ..graph import Graph
from ..ingest import parse_record, records_to_batch
from ..ingest.integrity import delete_columns, delete_keys
from ..schema.catalog import Catalog, TypeDef
from ..store import endpoint_index as _endpoint_index
from ..store import side_files
from ..store.layout import MAIN
from ..store.quarantine import Quarantine, Rejected, rejected_ends
from ..store.writes import IdSource, LoadResult, StagedTable, WriteTarget, abort, prepare_target, stage
from . import jvm_write as _jvm_write
from .bad_rows import Refusal, is_row_data_error, refused_error
from .error_tags import tag_error, unwrap_error
from .journal import Journal
from .jvm_read import ENGINES, ShimSession
from .options import WriteOptions
from .staging import stage_task, task_ids
from .work import Runner
from .writer import commit_staged, precheck_columns, settle_quarantine, spark_to_arrow_schema

log = logging.getLogger(__name__)

_PAYLOAD_SCHEMA = pa.schema([pa.field("staged", pa.binary(), False)])
DEFAULT_JSONL_CHUNK_ROWS = 50_000


def _collect(df, fn, rejected: list[Rejected] | None = None) -> list[StagedTable]:
    """Driver: run ``fn`` over ``df`` with mapInArrow; each task yields pickled StagedTables,
    or the :class:`~.bad_rows.Refusal` of a task that found bad rows (it staged nothing): then
    ONE typed error is raised for the first few (the caller's journal clean-up deletes what the
    other tasks staged). Quarantined rows' reports (:class:`~omnigraph_spark.store.quarantine.Rejected`) go to
    ``rejected``."""
    out: list[StagedTable] = []
    refusals: list[Refusal] = []
    for row in df.mapInArrow(fn, "staged binary").collect():
        for item in pickle.loads(row["staged"]):
            if isinstance(item, Rejected) and rejected is not None:
                rejected.append(item)
            elif not isinstance(item, Rejected):
                (refusals if isinstance(item, Refusal) else out).append(item)
    if refusals:
        raise refused_error(refusals)
    return out


def _payload(staged: Sequence[object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"staged": pickle.dumps(list(staged))}], schema=_PAYLOAD_SCHEMA)


# -- options -------------------------------------------------------------------------------------


def _write_options(
    uri: str, mode: str, branch: str, actor: str | None, options: Mapping[str, Any] | None
) -> WriteOptions:
    base: dict[str, Any] = {"path": uri, "branch": branch, "writeMode": mode}
    if actor is not None:
        base["actor"] = actor
    reserved = {k.lower() for k in base} | {"type", "path", "branch", "writemode", "actor", "engine"}
    for k, v in (options or {}).items():
        if str(k).lower() in reserved:
            raise OptionError(
                f"option '{k}' is a parameter of this call (or meaningless for a multi-type load); "
                "pass it as an argument instead",
                option=k,
            )
        base[k] = v if isinstance(v, str) else str(v)
    return WriteOptions.from_options(base, require_type=False)


def _targets(graph: Graph, opts: WriteOptions, keys: Sequence[str]) -> dict[str, WriteTarget]:
    return {
        k: prepare_target(
            graph,
            opts.branch,
            k,
            opts.write_mode,
            max_rows_per_file=opts.max_rows_per_file,
            max_bytes_per_file=opts.max_bytes_per_file,
        )
        for k in keys
    }


def finish_load(
    graph: Graph,
    opts: WriteOptions,
    journal: Journal,
    run,
    quarantine: Quarantine | None = None,
    rejected: Sequence[Rejected] = (),
    runner: Runner | None = None,
) -> LoadResult:
    """Driver: run the staging jobs (``run`` returns the staged tables), commit once, and clean
    up the journal; any failure leaves the graph unchanged and removes every staged file (and
    the load's quarantined rows: ``rejected``, filled by ``run``). ``runner``: as
    :func:`~.writer.commit_staged`'s."""
    staged: list[StagedTable] = []
    try:
        staged = run()
        result = commit_staged(graph, opts.branch, staged, opts, quarantine, rejected, runner=runner)
    except BaseException as e:
        if quarantine is not None:
            settle_quarantine(graph, quarantine)
        n = journal.clean(keep=())
        n += abort(staged, graph.storage_options)
        log.info("load failed (%s); removed %d staged files", str(e).splitlines()[0][:300], n)
        typed = unwrap_error(e)
        if typed is not None and typed is not e:
            raise typed from e
        tag_error(e)
        raise
    journal.clean(keep=staged if not result.skipped else ())
    return result


# -- write_graph -------------------------------------------------------------------------------


def _tagged(load):
    """``load`` raises every OmnigraphError with its ``[CODE]`` prefix, those of its driver-side
    planning too, so an error's first line is the same on every write path (I20)."""

    @functools.wraps(load)
    def call(*args, **kwargs):
        try:
            return load(*args, **kwargs)
        except OmnigraphError as e:
            tag_error(e)
            raise

    return call


@_tagged
def write_graph(
    uri: str,
    frames: Mapping[str, Any],
    mode: str = "append",
    branch: str = MAIN,
    actor: str | None = None,
    options: Mapping[str, Any] | None = None,
    engine: str = "auto",
    deletes: Mapping[str, Any] | None = None,
    rejected_rows_path: str | None = None,
) -> LoadResult:
    """Write several DataFrames (``{"Person": df, "Knows": df2}``) as ONE graph commit.

    Driver. Each DataFrame is staged by its own Spark job; edges are validated against the
    committed nodes plus the nodes of this load. ``options`` takes the write options that are
    not parameters here (txnAppId/txnVersion, maxRowsPerFile, maxBytesPerFile,
    commitLeaseTimeout, storage.*). ``engine`` picks how each DataFrame is staged: ``"auto"``
    (the JVM sink when it can, see :mod:`.jvm_write`, else Python workers), ``"jvm"`` (or raise
    JvmWriteUnavailableError before any job runs), ``"python"``. Validation and the commit are
    the same either way. Raises the typed OmnigraphError (unwrapped from Spark).

    ``mode="delete"``: each DataFrame names rows to delete (see docs/options.md, "Deletes and
    cascades"). ``deletes`` (with ``append`` or ``merge``): DataFrames of rows to delete IN THE
    SAME COMMIT as ``frames`` are written, e.g. a change feed's deletes beside its upserts; a
    node deleted here and written by ``frames`` stays (the write wins) and keeps its edges.

    ``rejected_rows_path`` (option rejectedRowsPath): quarantine rows that break a per-row rule
    there and commit the others (:mod:`~omnigraph_spark.store.quarantine`); staged by Python workers."""
    if engine not in ENGINES:
        raise OptionError(f"engine must be one of {list(ENGINES)}, got {engine!r}", option="engine")
    if rejected_rows_path is not None:
        options = {**(options or {}), "rejectedRowsPath": rejected_rows_path}
    opts = _write_options(uri, mode, branch, actor, options)
    graph = Graph.open(opts.path, opts.storage_options)
    resolved: dict[str, tuple[TypeDef, Any]] = {}
    for name, df in frames.items():
        td = graph.catalog.resolve(name)
        if td.table_key in resolved:
            raise OptionError(f"type '{name}' given twice (as {td.table_key})", option="frames", type=name)
        resolved[td.table_key] = (td, df)
    removals: dict[str, tuple[TypeDef, Any]] = {}
    for name, df in (deletes or {}).items():
        td = graph.catalog.resolve(name)
        if opts.write_mode not in ("append", "merge"):
            raise OptionError(
                f"deletes= goes with mode 'append' or 'merge', not {opts.write_mode!r}", option="deletes", type=name
            )
        delete_columns(td, df.columns)
        removals[td.table_key] = (td, df)
    if not resolved and not removals:
        raise OptionError("write_graph needs at least one DataFrame", option="frames")
    order = sorted(resolved, key=lambda k: (not k.startswith("node:"), k))
    targets = _targets(graph, opts, order)
    deleting = opts.write_mode == "delete"
    for key in order:
        td, df = resolved[key]
        if deleting:
            delete_columns(td, df.columns)  # a delete reads only its key columns (ingest/integrity.py)
        else:
            precheck_columns(td, targets[key].schema, spark_to_arrow_schema(df.schema))
    quarantine = Quarantine.new(opts.rejected_rows_path, opts.storage_options) if opts.rejected_rows_path else None
    rejected: list[Rejected] = []
    if quarantine is not None:
        engine = _python_for_quarantine(engine, order)
    plans = {} if deleting else _jvm_plans(resolved, targets, order, engine)
    for key in removals:  # types only deleted from: their own targets (the fork on a branch)
        if key not in targets:
            targets[key] = prepare_target(graph, opts.branch, key, "delete", max_rows_per_file=opts.max_rows_per_file)
    journal = Journal.new(graph)

    def run() -> list[StagedTable]:
        out: list[StagedTable] = []
        # the snapshot the staging tasks prove against (I15, I17): endpoints, fresh ids
        proves = plans or (not deleting and any(k.startswith("edge:") for k in order))
        snap = graph.snapshot(opts.branch) if proves else None
        for key in order:
            td, df = resolved[key]
            target = targets[key]
            plan = plans.get(key)
            if deleting:
                got = [stage_deletes(target, td, df)]
            elif plan is not None:
                ends = _jvm_write.endpoint_sources(td, snap, out) if td.is_edge else None  # type: ignore[arg-type]  # snap is taken when there are plans
                fresh = _jvm_write.fresh_source(td, target, plan, snap)  # type: ignore[arg-type]  # snap is taken when there are plans
                got = _jvm_write.stage_jvm(df, td, target, plan, journal.directory, ends, fresh)
            else:
                ends = (
                    _jvm_write.endpoint_sources(td, snap, out, _endpoint_index.MAX_INDEXED_IDS)  # type: ignore[arg-type]  # snap is taken when there are edges to stage
                    if td.is_edge
                    else None
                )
                got = _collect(
                    df,
                    _python_stager(
                        td, target, journal, quarantine, rejected_ends(td, rejected) if td.is_edge else None, ends
                    ),
                    rejected,
                )
            if not got:  # no partitions: an empty load of this type (overwrite empties the table)
                got = [StagedTable(key, target.mode, target.stage_uri, target.base_version, (), 0, 0)]
            log.info(
                "staged %s (%s): %d rows in %d fragments from %d tasks",
                key,
                "jvm" if plan else "python",
                sum(s.rows for s in got),
                sum(len(s.fragments) for s in got),
                len(got),
            )
            out.extend(got)
        for key in sorted(removals):
            td, df = removals[key]
            removed = stage_deletes(targets[key], td, df)
            out.append(dataclasses.replace(removed, mode=opts.write_mode) if key in resolved else removed)
        return out

    return finish_load(graph, opts, journal, run, quarantine, rejected)


def _python_for_quarantine(engine: str, order: Sequence[str]) -> str:
    """A quarantining load stages in Python workers: the JVM sink refuses bad rows, it does not
    quarantine them (``engine="jvm"`` raises, "auto" says so in the log)."""
    if engine == "jvm":
        raise JvmWriteUnavailableError(
            "rejectedRowsPath is set: bad rows are quarantined by the Python path only; use engine='auto' or 'python'",
            option="rejectedRowsPath",
        )
    if engine == "auto":
        log.info(
            "staging %s through Python workers: rejectedRowsPath is set (the JVM sink does not quarantine)",
            ", ".join(order),
        )
    return "python"


def stage_deletes(target: WriteTarget, td: TypeDef, df: Any) -> StagedTable:
    """Driver: a delete's keys (the key columns only, collected as Arrow) as a StagedTable with
    no files; the commit resolves them against its fresh snapshot (spark/deletions.py::deletions)."""
    keys = delete_keys(td, df.select(*[f"`{c}`" for c in delete_columns(td, df.columns)]).toArrow())
    log.info("delete from %s: %d keys", td.table_key, keys.num_rows)
    return StagedTable(
        target.table_key, "delete", target.stage_uri, target.base_version, (), keys.num_rows, 0, deletes=keys
    )


def _python_stager(
    td: TypeDef,
    target: WriteTarget,
    journal: Journal,
    quarantine: Quarantine | None = None,
    ends: Mapping[str, Mapping[str, str]] | None = None,
    ends_against: tuple[IdSource, IdSource] | None = None,
):
    """The mapInArrow function staging one DataFrame in Python workers (RowConverter); with
    ``quarantine``, bad rows (and edges to ``ends``, nodes rejected so far) are quarantined.
    Each task leaves its key fingerprints in the journal and, for an edge type, proves its
    endpoints against ``ends_against``, as the JVM tasks do (I15)."""

    def stage_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pid, attempt = task_ids()
        sink = quarantine.open_sink(td, f"p{pid}-a{attempt}") if quarantine is not None else None
        keys_to = side_files.key_hashes_location(journal.directory, td.table_key, pid, attempt)
        where = f"{td.name} partition {pid}"
        st = stage_task(target, td, batches, where, sink, ends, key_hashes_to=keys_to, ends_against=ends_against)
        if isinstance(st, StagedTable):  # a Refusal staged nothing: nothing to journal
            journal.record(f"{td.kind}-{td.name}-p{pid}-a{attempt}", [st])
            if sink is not None:
                yield _payload([st, sink.close()])
                return
        yield _payload([st])

    return stage_partition


def _jvm_plans(
    resolved: Mapping[str, tuple[TypeDef, Any]], targets: Mapping[str, WriteTarget], order: Sequence[str], engine: str
) -> dict[str, _jvm_write.JvmStagePlan]:
    """Driver, before any job: which DataFrames the JVM sink stages (``engine`` auto/jvm)."""
    plans: dict[str, _jvm_write.JvmStagePlan] = {}
    if engine == "python":
        return plans
    shims: dict[int, ShimSession] = {}  # per session of the frames: the probe asked once per load
    for key in order:
        td, df = resolved[key]
        session = df.sparkSession
        shim = shims.setdefault(id(session), ShimSession(session))
        why = _jvm_write.setup_blocker(session, targets[key], shim)
        plan, reasons = (None, [why]) if why else _jvm_write.plan_stage(td, targets[key], df.schema)
        if plan is not None:
            plans[key] = plan
            continue
        if engine == "jvm":
            raise JvmWriteUnavailableError(
                f"cannot stage {td.kind} {td.name} through the JVM path: {'; '.join(reasons)}", type=td.name
            )
        log.info("staging %s through Python workers: %s", key, "; ".join(reasons))
    return plans


def write_table(
    df: Any,
    uri: str,
    type: str,
    mode: str = "append",
    branch: str = MAIN,
    actor: str | None = None,
    options: Mapping[str, Any] | None = None,
    engine: str = "auto",
    rejected_rows_path: str | None = None,
) -> LoadResult:
    """Write one DataFrame into one node or edge type as one graph commit: what
    ``df.write.format("omnigraph")`` does, through the JVM sink when it can (``engine``).
    ``rejected_rows_path``: quarantine bad rows there (see :func:`write_graph`)."""
    return write_graph(
        uri,
        {type: df},
        mode=mode,
        branch=branch,
        actor=actor,
        options=options,
        engine=engine,
        rejected_rows_path=rejected_rows_path,
    )


# -- load_jsonl -------------------------------------------------------------------------------


def iter_json_values(text: str) -> Iterator[tuple[int, int, Any]]:
    """(record number from 1, line number from 1, value) for a stream of JSON values separated
    by any whitespace (the engine's reader: pretty-printed JSON works). Invalid JSON raises
    InvalidRecordError naming the record and line."""
    dec = json.JSONDecoder()
    i, n, line, rec = 0, len(text), 1, 0
    ws = " \t\r\n"
    while True:
        j = i
        while j < n and text[j] in ws:
            j += 1
        line += text.count("\n", i, j)
        i = j
        if i >= n:
            return
        rec += 1
        try:
            value, end = dec.raw_decode(text, i)
        except ValueError as e:
            raise InvalidRecordError(f"invalid JSON at record {rec} (line {line}): {e}", record=rec, line=line) from e
        yield rec, line, value
        line += text.count("\n", i, end)
        i = end


@dataclass
class _Buffer:
    records: list[dict]
    where: list[tuple[str, int, int]]  # (file, line, record) per record


def _locate(e: OmnigraphError, buf: _Buffer | None, file: str, line: int, rec: int) -> OmnigraphError:
    """Prefix an error with the file and line of the offending record (executor)."""
    if buf is not None:
        row = e.context.get("row") if isinstance(getattr(e, "context", None), dict) else None
        if isinstance(row, int) and 0 <= row < len(buf.where):
            file, line, rec = buf.where[row]
        elif buf.where:
            file, line, rec = buf.where[0]
    loc = f"{file}:{line} (record {rec}): "
    e.args = (loc + str(e),)
    e.message = loc + e.message
    return e


def _jsonl_task(catalog: Catalog, targets: Mapping[str, WriteTarget], chunk_rows: int, journal: Journal | None):
    """The per-partition function of load_jsonl (runs on executors)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pid, attempt = task_ids()
        buffers: dict[str, _Buffer] = {}
        staged: dict[str, list[StagedTable]] = {}

        def flush(key: str) -> None:
            buf = buffers.pop(key, None)
            if not buf or not buf.records:
                return
            td = catalog.by_table_key(key)
            try:
                batch = records_to_batch(td, buf.records, targets[key].schema, first_record_no=0)
            except OmnigraphError as e:
                tag_error(_locate(e, buf, "", 0, 0))
                raise
            staged.setdefault(key, []).append(stage(targets[key], [batch]))

        try:
            for b in batches:
                for text, file in zip(b.column("value").to_pylist(), b.column("file").to_pylist()):
                    try:
                        for rec, line, value in iter_json_values(text or ""):
                            try:
                                td, record = parse_record(value, catalog, rec)
                            except OmnigraphError as e:
                                tag_error(_locate(e, None, file, line, rec))
                                raise
                            if td.table_key not in targets:
                                raise tag_error(
                                    DataError(
                                        f"{file}:{line} (record {rec}): type {td.table_key} was not found by the "
                                        "planning pass (input changed while loading?)",
                                        table=td.table_key,
                                    )
                                )
                            buf = buffers.setdefault(td.table_key, _Buffer([], []))
                            buf.records.append(record)
                            buf.where.append((file, line, rec))
                            if len(buf.records) >= chunk_rows:
                                flush(td.table_key)
                    except InvalidRecordError as e:
                        if not str(e).startswith("["):
                            tag_error(_locate(e, None, file, e.context.get("line", 0), e.context.get("record", 0)))
                            raise
                        raise
            for key in list(buffers):
                flush(key)
        except BaseException as e:
            abort([s for v in staged.values() for s in v], dict(journal.storage) or None if journal else None)
            if not is_row_data_error(e):
                raise
            # a bad record is the load's answer, not a task failure (see .bad_rows): no retry
            yield _payload([Refusal.of(e)])  # type: ignore[arg-type]
            return
        merged = [StagedTable.merge(v) for v in staged.values()]
        if journal is not None:
            journal.record(f"jsonl-p{pid}-a{attempt}", merged)
        yield _payload(merged)

    return run


def _types_touched(text_df, catalog: Catalog) -> list[str]:
    """Driver: a planning pass listing the table keys the input touches (used on branches, so
    only those tables are forked). It also surfaces malformed records before any staging."""

    def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys = set()
        try:
            for b in batches:
                for text, file in zip(b.column("value").to_pylist(), b.column("file").to_pylist()):
                    for rec, line, value in iter_json_values(text or ""):
                        try:
                            td, _ = parse_record(value, catalog, rec)
                        except OmnigraphError as e:
                            tag_error(_locate(e, None, file, line, rec))
                            raise
                        keys.add(td.table_key)
        except DataError as e:  # a bad record: the answer, not a task failure (see .bad_rows)
            yield _payload([Refusal.of(e)])
            return
        yield _payload(sorted(keys))

    return sorted(set(_collect(text_df, scan)))  # type: ignore[arg-type]  # this scan yields table keys


@_tagged
def load_jsonl(
    spark,
    uri: str,
    path: Any,
    mode: str = "append",
    branch: str = MAIN,
    actor: str | None = None,
    options: Mapping[str, Any] | None = None,
    chunk_rows: int = DEFAULT_JSONL_CHUNK_ROWS,
) -> LoadResult:
    """Load files in the engine's JSONL envelope (a path, glob or list of them) as ONE commit.

    Driver. Files are read with ``spark.read.text(wholetext=True)`` — one file per task, so
    records separated by any whitespace (pretty-printed JSON) work as in the engine and errors
    name ``file:line (record N)``; a single file must fit in a task's memory. Only the types
    present in the input are written (an overwrite replaces just those tables)."""
    opts = _write_options(uri, mode, branch, actor, options)
    if opts.write_mode == "delete":
        raise OptionError(
            "load_jsonl does not delete; use write_graph/write_table with mode='delete'",
            option="writeMode",
            value="delete",
        )
    if opts.rejected_rows_path is not None:
        raise OptionError(
            "option 'rejectedRowsPath' is not supported by load_jsonl (write_table and write_graph "
            "quarantine; a JSONL load refuses a bad record)",
            option="rejectedRowsPath",
        )
    graph = Graph.open(opts.path, opts.storage_options)
    paths = [path] if isinstance(path, str) else list(path)
    text_df = spark.read.text(paths, wholetext=True).select(F.col("value"), F.col("_metadata.file_path").alias("file"))
    if opts.branch == MAIN:
        keys = graph.catalog.table_keys()  # pinning a table on main has no side effect
    else:
        try:
            keys = _types_touched(text_df, graph.catalog)
        except Exception as e:
            typed = unwrap_error(e)
            if typed is not None and typed is not e:
                raise typed from e
            raise
    if not keys:
        raise OptionError(f"no JSONL records found in {paths}", option="path")
    targets = _targets(graph, opts, keys)
    journal = Journal.new(graph)

    def run() -> list[StagedTable]:
        got = _collect(text_df, _jsonl_task(graph.catalog, targets, chunk_rows, journal))
        by_key: dict[str, list[StagedTable]] = {}
        for s in got:
            by_key.setdefault(s.table_key, []).append(s)
        if not by_key:
            raise OptionError(f"no JSONL records found in {paths}", option="path")
        log.info("staged JSONL load: %s", {k: sum(s.rows for s in v) for k, v in by_key.items()})
        return [StagedTable.merge(v) for v in by_key.values()]

    return finish_load(graph, opts, journal, run)


__all__ = ["write_graph", "write_table", "load_jsonl", "iter_json_values", "ENGINES"]
