"""The Python half of the JVM ``omnigraph`` provider: planning and the commit, once, in Python.

With the shim jar on a JVM's class path, ``format("omnigraph")`` resolves to the shim's provider
(``io.omnigraph.spark.OmnigraphProvider``: Spark matches a JVM short name before a Python data
source's). The provider is a shell. On the driver it starts this module as a process
(``python -m omnigraph_spark.spark.bridge``, with the interpreter Spark's own Python workers use)
and asks it, one JSON object per line on stdin, one answer per line on stdout:

==============  =====================================================================================
request         answer
==============  =====================================================================================
``plan_read``   the JVM scan's options (``LanceSnapshotSource``) and the Spark schema; or
                ``python`` and why, and the provider hands the read to the Python source
``plan_write``  the sink's spec (``LanceFragmentSink``) and the row projection; for
                ``writeMode=delete`` the key columns the tasks collect; or ``python`` and why.
                The process keeps the load (graph, target, journal) for the next request
``commit``      after the Spark job: the fragments the tasks staged (the sink's hand-off file), or
                a delete's keys (``deletes``: each partition's rows), validated and published as
                ONE graph commit, exactly as ``write_table`` does it; with ``row_level`` (a SQL
                UPDATE / MERGE, :mod:`.row_level`) plus the collected deletes, on the scanned version
``abort``       the job failed: every file it staged deleted
(catalog)       the SQL catalog's requests (``OmnigraphCatalog``): answered by :mod:`.catalog`
==============  =====================================================================================

An answer is ``{"ok": {...}}`` or ``{"error": {"code", "class", "message"}}``; the message
starts with ``[CODE]``, so :func:`~.error_tags.unwrap_error` finds the typed error in the JVM
exception that carries it. Nothing here goes through py4j, so Spark Connect takes the same path.

Control flows one way: the JVM asks, this process answers. A commit whose checks exceed option
``distributedCheckRows`` needs Spark work done; it runs in a worker thread while the main loop
answers the pending ``commit`` with ``{"ok": {"run": [{"id", "work"}, ...]}}``: each work a
:class:`~.work.SparkWork` (views read by the Python source, Spark SQL over them). The provider
runs them on the write's session and sends the rows as its next request, ``{"op": "ran",
"results": [{"id", "tables"} or {"id", "error"}]}``; the commit thread resumes, and the
conversation goes on until the ``commit``'s final answer. spec/bridge_protocol.json pins the
messages field by field.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import sys
import threading
import traceback
import uuid
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
from pyspark.sql.types import StructType

from ..errors import JvmReadUnavailableError, JvmWriteUnavailableError, OmnigraphError
from ..graph import Graph
from ..ingest.integrity import delete_columns, delete_keys
from ..store import side_files
from ..store.writes import LoadResult, StagedTable, WriteTarget, prepare_target
from . import catalog as _catalog
from . import row_level as _row_level
from . import types as _types
from .error_tags import tag_error, unwrap_error
from .journal import Journal
from .jvm_read import column_blockers, scan_options
from .options import ReadOptions, WriteOptions
from .reader import resolve_snapshot
from .work import Runner, SparkWork, WorkFailed

log = logging.getLogger(__name__)

#: the names the projection gives Spark's input types (what the JVM reads an input column as)
_INPUT_KINDS = {
    "ByteType": "byte",
    "ShortType": "short",
    "IntegerType": "int",
    "LongType": "long",
    "FloatType": "float",
    "DoubleType": "double",
    "StringType": "string",
    "BooleanType": "bool",
    "DateType": "date",
    "TimestampType": "timestamp",
    "ArrayType": "array",
    "NullType": "null",
}
#: widening casts the JVM makes per value: target Spark type -> the input kinds it accepts
_WIDENING = {
    "IntegerType": ("int", ("byte", "short", "int")),
    "LongType": ("long", ("byte", "short", "int", "long")),
    "FloatType": ("float", ("byte", "short", "float")),
    "DoubleType": ("double", ("byte", "short", "int", "float", "double")),
}


def _python(why: list[str], engine: str, error) -> dict[str, Any]:
    """The answer "the Python source does this", or ``error`` when the caller asked for the JVM."""
    if engine == "jvm":
        raise error("; ".join(why))
    return {"python": "; ".join(why)}


# -- reads -------------------------------------------------------------------------------------


def plan_read(options: Mapping[str, str], parallelism: int) -> dict[str, Any]:
    """The JVM scan of one read of ``format("omnigraph")``: the same snapshot, columns, Spark
    types and tasks as the Python source (:mod:`.reader`), or why the Python source must read it."""
    opts = ReadOptions.from_options(options)
    if opts.engine == "python":
        return {"python": "option engine=python"}
    if opts.feed is not None:  # the change feed and streams are the Python source's (docs/change_feed.md)
        return _python(
            ["the change feed and stream options are read by the Python source"],
            opts.engine,
            lambda m: JvmReadUnavailableError(f"cannot read the change feed through the JVM path: {m}"),
        )
    graph = Graph.open(opts.path, opts.storage_options)
    for path in graph.pending_sidecars():
        log.warning(
            "graph %s has a pending recovery sidecar %s: reading the published snapshot only "
            "(reads never recover; run graph.recover() or `omnigraph-spark recover`)",
            graph.root,
            path,
        )
    typedef = graph.catalog.resolve(opts.type)
    snap = resolve_snapshot(graph, opts)
    schema = _types.spark_schema(typedef, opts.columns)
    ds = graph.open_table(typedef.table_key, snap)
    why = column_blockers(ds.schema, _types.arrow_target_schema(schema))
    if why:
        return _python(
            why,
            opts.engine,
            lambda m: JvmReadUnavailableError(
                f"cannot read '{typedef.name}' through the JVM path: {m}", type=typedef.name
            ),
        )
    scan = scan_options(
        snap,
        typedef,
        schema,
        ds,
        opts.min_partitions or parallelism,
        opts.max_rows_per_partition,
        pushdown=opts.pushdown,
    )
    head = opts.version is None and opts.commit is None and opts.timestamp_as_of is None
    answer = {"jvm": {"options": scan, "schema": schema.json(), "head": head}}
    if opts.storage_options:  # the scan's own option, whose key Spark redacts in plans and the event log
        answer["jvm"]["storageSecrets"] = json.dumps(opts.storage_options)
    return answer


# -- writes ------------------------------------------------------------------------------------


def projection(plan, input_schema) -> tuple[list[dict[str, Any]], list[str]]:
    """How the JVM maps an input row to the sink's row (``plan.columns``, in table order): per
    column, the input ordinal (-1: none) and what the JVM reads it as and turns it into; or the
    reasons it cannot (a cast only Spark's planner makes, e.g. of array elements)."""
    ordinals = {f.name: i for i, f in enumerate(input_schema.fields)}
    out: list[dict[str, Any]] = []
    why: list[str] = []
    for name, src, spark_type, how in plan.columns:
        src_type = input_schema[src].dataType if src is not None else None
        src_kind = _INPUT_KINDS.get(type(src_type).__name__, "other") if src_type is not None else "null"
        if src is None or src_kind == "null":
            out.append({"column": name, "ordinal": -1, "from": "null", "to": "null"})
        elif how in ("micros_date", "micros_ts"):
            out.append({"column": name, "ordinal": ordinals[src], "from": src_kind, "to": how})
        elif how == "as_is":
            out.append({"column": name, "ordinal": ordinals[src], "from": src_kind, "to": "same"})
        else:
            to, accepted = _WIDENING.get(type(spark_type).__name__, (None, ()))
            if src_kind not in accepted:
                why.append(
                    f"column '{name}': {src_type.simpleString()} -> {spark_type.simpleString()} is cast by "  # type: ignore[union-attr]  # src is set on this branch
                    "Spark's planner (the Python source)"
                )
                continue
            out.append({"column": name, "ordinal": ordinals[src], "from": src_kind, "to": to})
    return out, why


#: the input kinds of a delete key the JVM tasks collect (JSON strings and numbers; a date as
#: days since the epoch): the Python source reads the others
_DELETE_KINDS = ("string", "byte", "short", "int", "long", "date")


@dataclass
class _Load:
    """The write ``plan_write`` planned, kept for its ``commit`` or ``abort``."""

    graph: Graph
    opts: WriteOptions
    typedef: Any
    target: WriteTarget
    plan: Any
    journal: Any
    handoff: str | None
    ends: Any
    fresh: Any
    keys: pa.Schema | None = None  # a delete: the Arrow schema of the key columns the tasks collect
    #: a SQL UPDATE / MERGE (:mod:`.row_level`): the commit request's ``row_level`` field
    row_level: Any = None


def _plan_delete(graph: Graph, opts: WriteOptions, typedef, schema, unavailable) -> tuple[dict[str, Any], _Load | None]:
    """``writeMode=delete``: the JVM tasks collect the key columns (the ones the Python source
    reads, :func:`~..ingest.integrity.delete_columns`) and the commit resolves them, with the
    Python source's errors: a missing column at planning, a null key or a key of an unsupported
    type at the commit (:func:`~..ingest.integrity.delete_keys`)."""
    from .writer import spark_to_arrow_schema  # cost: plan_read skips the write path (~0.5 s)

    cols = delete_columns(typedef, schema.fieldNames())
    ordinals = {f.name: i for i, f in enumerate(schema.fields)}
    columns, why = [], []
    for c in cols:
        kind = _INPUT_KINDS.get(type(schema[c].dataType).__name__, "other")
        if kind not in _DELETE_KINDS:
            why.append(f"delete key column '{c}' of {schema[c].dataType.simpleString()} is read by the Python source")
        columns.append({"column": c, "ordinal": ordinals[c], "kind": kind})
    if why:
        return _python(why, opts.engine, unavailable), None
    keys = spark_to_arrow_schema(StructType([schema[c] for c in cols]))
    target = prepare_target(graph, opts.branch, typedef.table_key, "delete")
    log.info("omnigraph delete planned for the JVM tasks: %s on %s, keys %s", typedef.table_key, opts.branch, cols)
    return (
        {"jvm": {"delete": columns, "table": typedef.table_key}},
        _Load(
            graph,
            opts,
            typedef,
            target,
            plan=None,
            journal=Journal.new(graph),
            handoff=None,
            ends=None,
            fresh=None,
            keys=keys,
        ),
    )


def _delete_keys(load: _Load, partitions: list[list[list[Any]]], batch: int = 0) -> pa.Table | None:
    """The keys the tasks collected (per partition, in partition order) as the Python source's
    tasks turn theirs into keys (:func:`~..ingest.integrity.delete_keys`): in batches of
    ``batch`` rows (Spark's ``arrow.maxRecordsPerBatch``; 0: a partition at once), so a null key
    is reported with the same count."""
    parts = []
    for rows in partitions:
        step = batch if batch > 0 else max(1, len(rows))
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            data = pa.table({f.name: pa.array([r[i] for r in chunk], type=f.type) for i, f in enumerate(load.keys)})  # type: ignore[arg-type]  # a delete's load has its key schema
            parts.append(delete_keys(load.typedef, data))
    return pa.concat_tables(parts) if parts else None


def plan_write(options: Mapping[str, str], overwrite: bool, schema_json: str) -> tuple[dict[str, Any], _Load | None]:
    """One ``df.write.format("omnigraph")`` job: the sink's spec and projection, or why the
    Python source must write it. Planning errors (options, unknown type or column, a column
    that cannot hold the input) are the Python source's, word for word."""
    from . import jvm_write as _jvm_write  # cost: plan_read skips the write path (~0.5 s)
    from .writer import precheck_columns, spark_to_arrow_schema  # cost: plan_read skips the write path (~0.5 s)

    opts = WriteOptions.from_options(options, overwrite=overwrite)
    if opts.engine == "python":
        return {"python": "option engine=python"}, None
    graph = Graph.open(opts.path, opts.storage_options)
    typedef = graph.catalog.resolve(opts.type or "")

    def unavailable(m: str) -> JvmWriteUnavailableError:
        return JvmWriteUnavailableError(
            f"cannot stage {typedef.kind} {typedef.name} through the JVM path: {m}", type=typedef.name
        )

    if opts.rejected_rows_path:
        return _python(
            ["rejectedRowsPath is set: bad rows are quarantined by the Python path only"], opts.engine, unavailable
        ), None
    if opts.write_mode == "delete":
        return _plan_delete(graph, opts, typedef, StructType.fromJson(json.loads(schema_json)), unavailable)
    target = prepare_target(
        graph,
        opts.branch,
        typedef.table_key,
        opts.write_mode,
        max_rows_per_file=opts.max_rows_per_file,
        max_bytes_per_file=opts.max_bytes_per_file,
    )
    schema = StructType.fromJson(json.loads(schema_json))
    precheck_columns(typedef, target.schema, spark_to_arrow_schema(schema))
    plan, why = _jvm_write.plan_stage(typedef, target, schema)
    columns: list[dict[str, Any]] = []
    if plan is not None:
        columns, why = projection(plan, schema)
    if why:
        return _python(why, opts.engine, unavailable), None
    snap = graph.snapshot(opts.branch)
    ends = _jvm_write.endpoint_sources(typedef, snap, []) if typedef.is_edge else None
    fresh = _jvm_write.fresh_source(typedef, target, plan, snap)  # type: ignore[arg-type]  # no reasons: plan_stage gave a plan
    journal = Journal.new(graph)
    handoff = side_files.location(journal.directory, f"handoff-{uuid.uuid4().hex}", ".staged")
    spec = _jvm_write.sink_spec(typedef, target, plan, journal.directory, handoff, ends, fresh)  # type: ignore[arg-type]  # no reasons: plan_stage gave a plan
    log.info(
        "omnigraph write planned for the JVM sink: %s on %s (%s), base version %d",
        typedef.table_key,
        opts.branch,
        opts.write_mode,
        target.base_version,
    )
    answer = {"jvm": {"spec": spec, "projection": columns, "table": typedef.table_key}}
    if opts.storage_options:
        answer["jvm"]["storageSecrets"] = json.dumps(opts.storage_options)
    return answer, _Load(graph, opts, typedef, target, plan, journal, handoff, ends, fresh)


def commit(
    load: _Load, runner: Runner | None = None, deletes: list[list[list[Any]]] | None = None, batch: int = 0
) -> LoadResult:
    """After the job: ONE graph commit of what its tasks staged, or of a delete's keys
    (``deletes``: each partition's rows, checked ``batch`` rows at a time); or nothing, and
    every staged file deleted, with the typed error. ``runner``: runs the Spark work of the
    checks above ``distributedCheckRows`` where the write's session is (the JVM provider)."""
    from . import jvm_write as _jvm_write  # cost: plan_read skips the write path (~0.5 s)
    from .graph_io import finish_load  # cost: plan_read skips the write path (~0.5 s)

    def keys() -> list[StagedTable]:
        table = _delete_keys(load, deletes or [], batch)
        t = load.target
        log.info("delete from %s (jvm provider): %d keys", t.table_key, 0 if table is None else table.num_rows)
        return [
            StagedTable(
                t.table_key,
                "delete",
                t.stage_uri,
                t.base_version,
                (),
                0 if table is None else table.num_rows,
                0,
                deletes=table,
            )
        ]

    def run() -> list[StagedTable]:
        so = load.opts.storage_options
        try:
            tasks = _jvm_write.read_handoff(load.handoff, so)  # type: ignore[arg-type]  # a planned JVM write has a handoff
        finally:
            _jvm_write.delete_handoff(load.handoff, load.journal.directory, so)  # type: ignore[arg-type]  # a planned JVM write has a handoff
        got = _jvm_write.staged_from_tasks(load.typedef, load.target, load.plan, tasks, load.ends, load.fresh)
        if not got:  # no partitions: still one (empty) commit, so an overwrite empties the table
            t = load.target
            got = [StagedTable(t.table_key, t.mode, t.stage_uri, t.base_version, (), 0, 0)]
        if load.row_level is not None:  # a SQL UPDATE / MERGE: its checks and its deletes
            got = _row_level.staged(
                load.graph, load.typedef, load.target, got, _row_level.RowLevel.from_json(load.row_level)
            )
        log.info(
            "staged %s (jvm provider): %d rows in %d fragments from %d tasks",
            load.typedef.table_key,
            sum(s.rows for s in got),
            sum(len(s.fragments) for s in got),
            len(got),
        )
        return got

    return finish_load(load.graph, load.opts, load.journal, keys if load.keys is not None else run, runner=runner)


def abort(load: _Load) -> int:
    """The job failed: delete every file its tasks journaled. Returns the files removed."""
    n = load.journal.clean(keep=())
    log.info("omnigraph write of %s aborted: removed %d staged files", load.typedef.table_key, n)
    return n


# -- the process -------------------------------------------------------------------------------


def _error(e: BaseException) -> dict[str, Any]:
    typed = unwrap_error(e) if not isinstance(e, OmnigraphError) else e
    if typed is None:
        log.error("omnigraph bridge: %s", "".join(traceback.format_exception(e)).rstrip())
        return {"error": {"code": None, "class": type(e).__name__, "message": f"{type(e).__name__}: {e}"}}
    tag_error(typed)
    return {"error": {"code": typed.code, "class": type(typed).__name__, "message": str(typed)}}


#: seconds a planner with no load in progress waits for its next request (a read of the head
#: keeps its planner for the first query's scan); then it exits and the JVM starts another
IDLE_SECONDS = 120.0


class Bridge:
    """One provider's conversation: reads requests until stdin closes (the JVM side closes it
    after a read's plan, a write's commit or abort; a dead JVM closes it too), or until
    ``idle_s`` pass with no request while no write is in progress."""

    def __init__(self, inp: IO[str], out: IO[str], idle_s: float | None = None) -> None:
        self.inp = inp
        self.out = out
        self.idle_s = idle_s
        self.load: _Load | None = None
        # the commit thread's wants for the main loop: ("work", SparkWork, Future) or ("done",)
        self._events: queue.Queue = queue.Queue()

    def _idle(self) -> bool:
        """Whether no request came within ``idle_s`` (never while a write is in progress)."""
        if not self.idle_s or self.load is not None:
            return False
        try:
            fd = self.inp.fileno()
        except (AttributeError, OSError, ValueError):
            return False
        return not select.select([fd], [], [], self.idle_s)[0]

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op in _catalog.OPS:  # the SQL catalog's questions (OmnigraphCatalog): spark/catalog.py
            return {"ok": _catalog.answer(request)}
        if op == "plan_read":
            return {"ok": plan_read(request["options"], int(request.get("parallelism") or 1))}
        if op == "plan_write":
            got, self.load = plan_write(request["options"], bool(request.get("overwrite")), request["schema"])
            return {"ok": got}
        if op in ("commit", "abort") and self.load is None:
            raise RuntimeError(f"'{op}' without a planned write")
        if op == "commit":  # the commit owns the load from here: it cleans up after itself if it fails
            load, self.load = self.load, None
            if request.get("row_level") is not None:
                load.row_level = request["row_level"]  # type: ignore[union-attr]  # checked for None above
            result = self._commit(load, request)  # type: ignore[arg-type]  # checked for None above
            return {
                "ok": {
                    "manifest_version": result.manifest_version,
                    "commit": result.graph_commit_id,
                    "skipped": bool(result.skipped),
                }
            }
        if op == "abort":
            removed = abort(self.load)  # type: ignore[arg-type]  # checked for None above
            self.load = None
            return {"ok": {"removed": removed}}
        if op == "ran":
            raise RuntimeError("'ran' with no Spark work asked for")
        raise RuntimeError(f"unknown request {op!r}")

    # -- a commit and the Spark work it asks for ---------------------------------------------

    def run_work(self, work: SparkWork) -> list[pa.Table]:
        """The commit's runner (any thread but the main loop's): ``work`` goes out as part of
        the pending request's answer; returns the tables the JVM ran, or raises its error."""
        done: Future = Future()
        self._events.put(("work", work, done))
        return done.result()

    def _commit(self, load: _Load, request: Mapping[str, Any]) -> LoadResult:
        """:func:`commit` in a worker thread; this thread answers its Spark work with ``run``
        answers and reads the ``ran`` requests, until the commit ends."""
        result: Future = Future()

        def go() -> None:
            try:
                result.set_result(commit(load, self.run_work, request.get("deletes"), int(request.get("batch") or 0)))
            except BaseException as e:  # the commit's error is the request's answer
                result.set_exception(e)
            finally:
                self._events.put(("done",))

        worker = threading.Thread(target=go, name="omnigraph-commit", daemon=True)
        worker.start()
        finished = False
        while not finished:
            pending = [self._events.get()]
            while True:  # every work asked for by now goes out in one answer
                try:
                    pending.append(self._events.get_nowait())
                except queue.Empty:
                    break
            works = [e for e in pending if e[0] == "work"]
            finished = len(works) < len(pending)
            if works:
                self._exchange(works)
        worker.join()
        try:
            return result.result()
        except WorkFailed as e:
            if unwrap_error(e) is not None:  # a typed error the work raised: the answer as it is
                raise
            raise JvmWriteUnavailableError(
                "format('omnigraph') could not run the commit's checks above distributedCheckRows as Spark jobs "
                f"of the write's session ({e}); nothing was committed. Set option distributedCheckRows=0 to "
                "check in the planner's memory, or load with write_table",
                option="distributedCheckRows",
            ) from e

    def _exchange(self, works: list[tuple]) -> None:
        """Answer the pending request with ``works`` and settle each from the ``ran`` reply."""
        by_id = {i: (w, f) for i, (_, w, f) in enumerate(works, 1)}
        log.info("omnigraph bridge: %d pieces of the commit's Spark work handed to the JVM", len(by_id))
        self._send({"ok": {"run": [{"id": i, "work": w.to_json()} for i, (w, _) in by_id.items()]}})
        line = self.inp.readline()
        try:
            reply = json.loads(line) if line.strip() else {}
        except ValueError:
            reply = {}
        if reply.get("op") != "ran":
            why = "the JVM closed the conversation" if not line else f"the JVM answered {line.strip()[:200]!r}"
            for _, f in by_id.values():
                f.set_exception(WorkFailed(f"Spark work of the commit was not run: {why}"))
            return
        got = {int(r["id"]): r for r in reply.get("results", [])}
        for i, (w, f) in by_id.items():
            r = got.get(i)
            try:
                if r is None:
                    raise WorkFailed(f"the JVM ran no work {i}")
                if "error" in r:
                    e = r["error"]
                    raise WorkFailed(f"{e.get('class')}: {e.get('message')}")
                f.set_result(w.tables_from_rows(r["tables"]))
            except Exception as e:  # every work gets an outcome: its thread waits for it
                f.set_exception(e)

    def _send(self, message: Mapping[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def serve(self) -> None:
        while True:
            if self._idle():
                log.info("omnigraph bridge: no request for %.0f s, exiting", self.idle_s)
                break
            line = self.inp.readline()
            if not line:
                break
            if not line.strip():
                continue
            try:
                reply = self.answer(json.loads(line))
            except BaseException as e:  # every failure is an answer: the JVM raises it
                reply = _error(e)
            self._send(reply)
        if self.load is not None:  # the JVM went away mid-load: nothing of it may stay
            abort(self.load)


def main() -> None:
    # the protocol owns stdout: anything else printed (a library's warning) goes to stderr
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.basicConfig(
        level=os.environ.get("OMNIGRAPH_SPARK_BRIDGE_LOG", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    Bridge(sys.stdin, protocol, float(os.environ.get("OMNIGRAPH_SPARK_BRIDGE_IDLE_S", IDLE_SECONDS))).serve()


if __name__ == "__main__":
    main()
