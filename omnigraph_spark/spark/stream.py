"""Structured Streaming into a graph: ONE graph commit per micro-batch, exactly once.

Two ways in:

* ``df.writeStream.format("omnigraph")`` for one node or edge type:
  :class:`OmnigraphStreamWriter` (returned by ``OmnigraphDataSource.streamWriter``). It takes
  the batch writer's options (``type``, ``branch``, ``writeMode`` append/merge, ``actor``,
  file sizes, ``storage.*``) and delegates each micro-batch to :class:`.writer.OmnigraphWriter`:
  executors stage exactly as a batch write does; ``commit(messages, batchId)`` on the driver
  makes one ``commit_load``.
* ``foreachBatch(GraphBatchWriter(...))`` (or :func:`stream_graph`) for several types: each
  micro-batch is split into node and edge DataFrames and written by ``write_graph`` as one
  graph commit.

Exactly once: every commit carries the idempotency token (app id, version) =
(``spark-stream:<query id>``, batch id). The query id is Spark's ``StreamingQuery.id``, kept in
the checkpoint, so it survives restarts from the same checkpoint (and a new checkpoint is a
new stream). Under the commit lease ``commit_load`` finds the token's record and proves it
landed from the Lance transaction of every table version the load produced (invariant I12);
the record keeps the highest version applied per app id, so a batch id at or below it is a
no-op (invariant I19). A micro-batch Spark replays because its commit landed but the
checkpoint's commit log did not is therefore committed at most once.

How the query id reaches the writer: Spark sets it as the ``sql.streaming.queryId`` local
property of every task of a micro-batch (and of the foreachBatch thread). Staging tasks put it
in their commit messages; the Python process that runs ``commit`` has no SparkContext, so it
reads it from there. Spark builds a new stream writer for every micro-batch (and another for
its commit), so each batch is planned on the branch's current snapshot.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import OptionError
from ..graph import Graph
from ..store.layout import MAIN
from ..store.writes import LoadResult, TxnToken, already_applied
from .error_tags import tag_error
from .graph_io import write_graph
from .options import WRITE_MODES
from .writer import OmnigraphWriter, StagedMessage, spark_to_arrow_schema

log = logging.getLogger(__name__)


try:  # the Arrow stream writer is pyspark 4.1+; 4.0 hands the writer Rows
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - pyspark 4.0
    DataSourceStreamArrowWriter = None  # type: ignore[assignment, misc]

#: whether ``OmnigraphStreamWriter`` receives Arrow batches (pyspark 4.1+) or Rows (4.0)
ARROW_STREAM_WRITER = DataSourceStreamArrowWriter is not None
#: the local property Spark sets on every task (and the foreachBatch thread) of a streaming query
QUERY_ID_PROPERTY = "sql.streaming.queryId"
#: the local property with the micro-batch id
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: the txn app id of a streaming query is this prefix + the query id
APP_ID_PREFIX = "spark-stream:"
#: options Spark itself adds to a stream sink's option map (not ours to parse)
SPARK_STREAM_OPTIONS = frozenset({"checkpointlocation"})
#: the write modes a stream accepts: every batch mode but overwrite (each micro-batch would
#: replace the table; Spark's "complete" output mode is refused for the same reason)
STREAM_WRITE_MODES = tuple(m for m in WRITE_MODES if m != "overwrite")
ROW_BATCH_SIZE = 10_000


def stream_app_id(query_id: str) -> str:
    """The txn app id of the streaming query ``query_id``."""
    return APP_ID_PREFIX + query_id


def _sink_options(options: Mapping[str, str], overwrite: bool) -> dict[str, str]:
    """The batch writer's options from a stream sink's option map: Spark's own keys dropped,
    the txn token refused (a stream's token is its query id and batch id), overwrite refused."""
    if overwrite:
        raise OptionError(
            "a stream cannot overwrite a type: Spark's 'complete' output mode is not supported; "
            "use outputMode('append')",
            option="outputMode",
        )
    out: dict[str, str] = {}
    for k, v in dict(options).items():
        low = str(k).lower()
        if low in SPARK_STREAM_OPTIONS:
            continue
        if low in ("txnappid", "txnversion"):
            raise OptionError(
                f"option '{k}' is not accepted by a stream: its idempotency token is the streaming "
                "query id and the micro-batch id (docs/streaming.md)",
                option=k,
            )
        if low == "writemode" and str(v).strip().lower() not in STREAM_WRITE_MODES:
            raise OptionError(
                f"a stream's writeMode must be one of {', '.join(STREAM_WRITE_MODES)}, got {v!r}",
                option="writeMode",
                value=v,
            )
        out[k] = v
    return out


@dataclass
class StreamMessage(WriterCommitMessage):
    """One staging task's message: the batch writer's, plus the query and batch ids the task
    ran under (local properties Spark sets on the tasks of a micro-batch)."""

    inner: WriterCommitMessage | None
    query_id: str | None
    batch_id: int | None


def _local_ids() -> tuple[str | None, int | None]:
    """(query id, batch id) of the running task; (None, None) outside a streaming task."""
    ctx = TaskContext.get()
    if ctx is None:
        return None, None
    q = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    b = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    return q or None, int(b) if b not in (None, "") else None


def rows_to_batches(
    rows: Iterable[Any], schema: pa.Schema | None, size: int = ROW_BATCH_SIZE
) -> Iterator[pa.RecordBatch]:
    """Spark Rows (the Row stream writer of pyspark 4.0) as Arrow batches of ``size`` rows."""
    buf: list[dict] = []
    for r in rows:
        buf.append(r.asDict(recursive=True))
        if len(buf) >= size:
            yield pa.RecordBatch.from_pylist(buf, schema=schema)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=schema)


def _is_empty(messages: Iterable[WriterCommitMessage | None]) -> bool:
    """No task staged a row, refused one or carried a deletion: the micro-batch commits nothing."""
    for m in messages:
        if not isinstance(m, StagedMessage):
            continue
        if getattr(m, "refused", None) is not None:
            return False
        for s in m.staged:
            if s.rows or s.fragments or getattr(s, "deletes", None) is not None:
                return False
    return True


class _StreamWriting:
    """The stream writer of one node or edge type: one graph commit per non-empty micro-batch,
    with the txn token (``spark-stream:<query id>``, batch id). Spark constructs one per
    micro-batch on the driver (pickled to executors) and one more for its commit. Mixed into
    the Arrow and the Row stream writer classes below."""

    arrow_input = True

    def __init__(self, options: Mapping[str, str], schema: StructType | None, overwrite: bool) -> None:
        try:
            sink_options = _sink_options(options, overwrite)
        except OptionError as e:
            tag_error(e)
            raise
        # a micro-batch's edges are few against the node tables: the commit's probes of the
        # committed id index (I24) cost less than an index of every node id in each worker (I15)
        self.batch = OmnigraphWriter(sink_options, schema, False, prove_ends=False)
        self.arrow_schema = None if self.arrow_input else spark_to_arrow_schema(schema)

    @property
    def opts(self):
        return self.batch.opts

    def write(self, iterator: Iterator[Any]) -> StreamMessage:
        """Executor: stage one partition of the micro-batch as the batch writer does."""
        batches = iterator if self.arrow_input else rows_to_batches(iterator, self.arrow_schema)
        query_id, batch_id = _local_ids()
        return StreamMessage(self.batch.write(batches), query_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Driver: one graph commit for the micro-batch (none when it is empty); a replay of a
        landed (query id, batch id) is a no-op decided under the commit lease."""
        inner = [m.inner if isinstance(m, StreamMessage) else m for m in messages]
        if _is_empty(inner):
            self.batch.abort(inner)  # empty staged files, if any
            log.info("stream batch %d of %s: no rows, nothing committed", batchId, self.opts.type)
            return
        query_ids = {m.query_id for m in messages if isinstance(m, StreamMessage) and m.query_id}
        if len(query_ids) != 1:
            self.batch.abort(inner)
            raise tag_error(
                OptionError(
                    f"micro-batch {batchId}: the streaming query id is not visible to the writer tasks (found "
                    f"{sorted(query_ids)}), so the micro-batch cannot be committed exactly once; nothing committed",
                    batch_id=batchId,
                )
            )
        query_id = query_ids.pop()
        other = {m.batch_id for m in messages if isinstance(m, StreamMessage) and m.batch_id is not None}
        if other - {batchId}:
            log.warning("micro-batch %d: tasks reported batch ids %s", batchId, sorted(other))
        committing = copy.copy(self.batch)
        committing.opts = dataclasses.replace(self.opts, txn_app_id=stream_app_id(query_id), txn_version=batchId)
        t0 = time.monotonic()
        committing.commit(inner)
        log.info("stream batch %d of %s: commit step took %.3f s", batchId, self.opts.type, time.monotonic() - t0)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Driver: a failed micro-batch: delete what its tasks staged (Spark retries the batch)."""
        self.batch.abort([m.inner if isinstance(m, StreamMessage) else m for m in messages])
        log.info("stream batch %d of %s aborted", batchId, self.opts.type)


class OmnigraphRowStreamWriter(_StreamWriting, DataSourceStreamWriter):
    """The stream writer for pyspark 4.0: Spark hands it Rows, turned into Arrow batches."""

    arrow_input = False


if DataSourceStreamArrowWriter is not None:

    class OmnigraphArrowStreamWriter(_StreamWriting, DataSourceStreamArrowWriter):
        """The stream writer for pyspark 4.1+: Spark hands it Arrow batches."""

        arrow_input = True

    OmnigraphStreamWriter: type = OmnigraphArrowStreamWriter
else:  # pragma: no cover - pyspark 4.0
    OmnigraphStreamWriter = OmnigraphRowStreamWriter


# -- foreachBatch: several types, one commit per micro-batch --------------------------------

Splitter = Callable[[Any], Mapping[str, Any]]


@dataclass(frozen=True)
class GraphBatchWriter:
    """A ``foreachBatch`` function writing each micro-batch as ONE graph commit, exactly once.

    ``split(batch_df)`` returns ``{type name: DataFrame}`` (node and edge types; the frames are
    usually selections of ``batch_df``); they are written by ``write_graph`` with the txn token
    (``spark-stream:<query id>``, batch id). The micro-batch is cached while it is split. A
    micro-batch with no rows, or whose frames are all empty, commits nothing; a replayed batch
    whose token landed is skipped before staging (and would be a no-op at the commit anyway).

    ``query_id`` is only for sessions where the query id is not visible (Spark Connect): it must
    be the stream's own, one per checkpoint. ``options`` are write_graph's (no txn options)."""

    uri: str
    split: Splitter
    mode: str = "append"
    branch: str = MAIN
    actor: str | None = None
    options: Mapping[str, Any] | None = None
    engine: str = "auto"
    query_id: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in STREAM_WRITE_MODES:
            raise OptionError(
                f"a stream's mode must be one of {', '.join(STREAM_WRITE_MODES)}, got {self.mode!r}",
                option="mode",
                value=self.mode,
            )
        for k in self.options or {}:
            if str(k).lower() in ("txnappid", "txnversion"):
                raise OptionError(
                    f"option '{k}' is not accepted by a stream: its idempotency token is the "
                    "streaming query id and the micro-batch id",
                    option=k,
                )

    def _query_id(self, batch_df) -> str:
        if self.query_id:
            return self.query_id
        try:
            q = batch_df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        except Exception as e:  # Spark Connect: no SparkContext
            log.debug("no SparkContext to read the query id from: %s", e)
            q = None
        if not q:
            raise OptionError(
                "the streaming query id is not visible here (not in a foreachBatch call, or Spark "
                "Connect); pass query_id= (one per checkpoint)",
                option="query_id",
            )
        return q

    def __call__(self, batch_df, batch_id: int) -> LoadResult | None:
        txn = TxnToken(stream_app_id(self._query_id(batch_df)), int(batch_id))
        graph = Graph.open(self.uri, _storage(self.options))
        rec = already_applied(graph, txn)
        if rec is not None:
            log.info(
                "stream batch %d: txn (%s, %d) already applied by operation %s; skipped",
                batch_id,
                txn.app_id,
                txn.version,
                rec.get("operation_id"),
            )
            return None
        batch_df.persist()
        try:
            frames = {name: df for name, df in self.split(batch_df).items() if not df.isEmpty()}
            if not frames:
                log.info("stream batch %d: no rows, nothing committed", batch_id)
                return None
            opts = {**dict(self.options or {}), "txnAppId": txn.app_id, "txnVersion": str(txn.version)}
            result = write_graph(
                self.uri, frames, mode=self.mode, branch=self.branch, actor=self.actor, options=opts, engine=self.engine
            )
        finally:
            batch_df.unpersist()
        log.info(
            "stream batch %d: %s",
            batch_id,
            "already applied"
            if result.skipped
            else f"committed {result.graph_commit_id} (manifest v{result.manifest_version})",
        )
        return result


def _storage(options: Mapping[str, Any] | None) -> dict[str, str] | None:
    out = {
        str(k)[len("storage.") :]: str(v) for k, v in (options or {}).items() if str(k).lower().startswith("storage.")
    }
    return out or None


def stream_graph(
    stream_df,
    uri: str,
    split: Splitter,
    checkpoint_location: str,
    *,
    mode: str = "append",
    branch: str = MAIN,
    actor: str | None = None,
    options: Mapping[str, Any] | None = None,
    engine: str = "auto",
    trigger: Mapping[str, Any] | None = None,
    query_name: str | None = None,
):
    """Start a streaming query writing ``stream_df`` into the graph at ``uri``: each micro-batch
    is split by ``split`` into node and edge DataFrames and committed once (GraphBatchWriter).
    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g. ``{"processingTime": "5 seconds"}``,
    ``{"availableNow": True}``). Returns the StreamingQuery."""
    w = stream_df.writeStream.foreachBatch(GraphBatchWriter(uri, split, mode, branch, actor, options, engine)).option(
        "checkpointLocation", checkpoint_location
    )
    if trigger:
        w = w.trigger(**trigger)
    if query_name:
        w = w.queryName(query_name)
    return w.start()


__all__ = [
    "OmnigraphStreamWriter",
    "GraphBatchWriter",
    "stream_graph",
    "StreamMessage",
    "stream_app_id",
    "rows_to_batches",
    "ARROW_STREAM_WRITER",
    "STREAM_WRITE_MODES",
]
