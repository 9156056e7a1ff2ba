"""The Spark write path: ``df.write.format("omnigraph")`` -> ONE graph commit per Spark job.

Protocol (built on :mod:`omnigraph_spark.store.writes`):

* driver, planning (``OmnigraphWriter.__init__``): parse options, open the graph, resolve the
  type, ``prepare_target`` (forks the table on a branch), and check the DataFrame's columns
  against the type before any task runs;
* executors (``write``): convert each Arrow batch with :class:`RowConverter` and stream it into
  ``stage`` (uncommitted Lance fragments, :mod:`.staging`); the commit message is the
  :class:`StagedTable`;
* driver (``commit``): merge the messages Spark hands over — only those; files of failed or
  speculative attempts are never referenced — validate load-wide rules against a fresh
  snapshot inside the commit lease (:mod:`.validate`), then ``commit_load``;
* driver (``abort``): delete the staged files of the messages Spark hands over.

Every :class:`OmnigraphError` raised here carries its code as a message prefix
(``[DANGLING_EDGE] ...``, :mod:`.error_tags`), so the typed error survives the JVM.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import JvmWriteUnavailableError, OmnigraphError
from ..graph import Graph, Snapshot
from ..ingest import RowConverter
from ..ingest import integrity as _integrity
from ..ingest.fingerprints import fingerprint_column
from ..schema.catalog import TypeDef
from ..store import endpoint_index as _endpoint_index
from ..store import quarantine as _quarantine
from ..store import side_files
from ..store.fs import RootStorage
from ..store.layout import RootPaths, is_local, join
from ..store.quarantine import Quarantine, Rejected
from ..store.writes import (
    Checked,
    LoadResult,
    StagedTable,
    abort,
    commit_load,
    merge_by_key,
    prepare_target,
)
from . import jvm_write as _jvm_write
from .bad_rows import Refusal, refused_error
from .dist_checks import DistChecks
from .error_tags import tag_error
from .options import WriteOptions
from .staging import delete_task, stage_task, task_ids
from .types import arrow_target_schema
from .validate import make_validator
from .work import Runner

log = logging.getLogger(__name__)


# -- commit messages -------------------------------------------------------------------------


@dataclass
class StagedMessage(WriterCommitMessage):
    """What one task attempt staged: one StagedTable per table it wrote (usually one), or,
    when its rows broke a rule of the catalog, why it refused them (nothing staged)."""

    staged: tuple[StagedTable, ...]
    partition_id: int
    attempt: int
    refused: Refusal | None = None
    rejected: Rejected | None = None  # rows this attempt quarantined (option rejectedRowsPath)


def precheck_columns(typedef: TypeDef, table_schema: pa.Schema, arrow_schema: pa.Schema | None) -> None:
    """Driver: run the converter over an empty batch of the input schema, so unknown, missing
    or unconvertible columns fail at planning time instead of in every task."""
    if arrow_schema is None:
        return
    empty = pa.RecordBatch.from_pylist([], schema=arrow_schema)
    RowConverter(typedef, table_schema).convert(empty, where="input schema")


def spark_to_arrow_schema(schema: StructType | None) -> pa.Schema | None:
    """The Arrow schema Spark will send for ``schema`` (None when it cannot be derived;
    timestamps in UTC, which the converter treats as any other zone)."""
    if schema is None:
        return None
    try:
        return arrow_target_schema(schema)
    except Exception as e:  # exotic types: the executors' converter still checks every batch
        log.debug("cannot derive the Arrow schema of %s: %s", schema, e)
        return None


def commit_staged(
    graph: Graph,
    branch: str,
    staged: Sequence[StagedTable],
    opts: WriteOptions,
    quarantine: Quarantine | None = None,
    rejected: Sequence[Rejected] = (),
    runner: Runner | None = None,
) -> LoadResult:
    """Driver: validate and commit ``staged`` as one graph commit; delete the files on failure.
    ``rejected``: what the tasks quarantined into ``quarantine`` (its counts travel in the
    commit's properties; its files are published after the commit, deleted on failure).

    With an active SparkSession on this process, or ``runner`` (runs a
    :class:`~.work.SparkWork` where the session is: the JVM provider, for its planner,
    :mod:`.bridge`), the checks above ``distributedCheckRows`` run as Spark jobs first, outside
    the commit lease, on the branch's current snapshot (I21)."""
    dist = DistChecks.for_load(opts.distributed_check_rows, graph.storage_options, runner)
    validate = make_validator(graph, cascade=opts.cascade, dist=dist, bounded_rows=opts.distributed_check_rows)
    if dist is not None:
        try:
            snap = graph.snapshot(branch)
            by_key = merge_by_key(staged)
            # no check can reach the threshold: nothing to run before the lease
            if dist.wants(
                sum(s.rows for s in by_key.values())
                + sum(snap.table(t.table_key).row_count for t in graph.catalog.types())
            ):
                validate(snap, by_key, distributed_only=True)
        except BaseException as e:
            _failed(graph, staged, quarantine, "checks before the commit", e)
            raise
    files = [r.file for r in rejected if r.file]
    if quarantine is not None and files:
        keys = {s.table_key for s in staged}
        validate = _with_facts(
            validate,
            _quarantine.facts(rejected, quarantine.final_dir, keys),
            lambda: quarantine.prepare(files, graph.root, branch, {s.table_key: s.base_version for s in staged}),
        )
    try:
        result = commit_load(
            graph,
            branch,
            staged,
            actor=opts.actor,
            validate=validate,
            txn=opts.txn,
            lease_timeout_s=opts.commit_lease_timeout,
        )
    except BaseException as e:
        _failed(graph, staged, quarantine, "commit", e)
        raise
    if result.skipped:
        n = abort(staged, graph.storage_options)
        if quarantine is not None:
            quarantine.discard()
        log.info(
            "txn (%s, %s) already applied: nothing committed, %d staged files removed",
            opts.txn_app_id,
            opts.txn_version,
            n,
        )
    else:
        log.info(
            "omnigraph write committed %s on %s: manifest v%d, %d rows, %d bytes, %d fragments",
            result.graph_commit_id,
            result.branch,
            result.manifest_version,
            sum(t.rows_written for t in result.tables),
            sum(t.bytes for t in result.tables),
            sum(t.fragments for t in result.tables),
        )
        if quarantine is not None:
            n_rejected = sum(r.rows for r in rejected)
            where = quarantine.publish(files)
            result = dataclasses.replace(result, rejected_rows=n_rejected, rejected_path=where if n_rejected else None)
            log.info("omnigraph write quarantined %d rejected rows in %s", n_rejected, where)
    return result


def _failed(
    graph: Graph, staged: Sequence[StagedTable], quarantine: Quarantine | None, what: str, e: BaseException
) -> None:
    """A load failed at ``what`` with ``e``: delete its staged files, settle its quarantine, and
    tag ``e`` with its code; the caller re-raises it."""
    n = abort(staged, graph.storage_options)
    if quarantine is not None:
        settle_quarantine(graph, quarantine)
    log.info("%s failed (%s); removed %d staged files", what, e, n)
    tag_error(e)


def settle_quarantine(graph: Graph, quarantine: Quarantine) -> None:
    """A load's commit failed: delete its quarantine unless the graph has a pending recovery
    sidecar (the failure may have come after the publish, or the load may still roll forward:
    ``recover_quarantine`` decides later)."""
    try:
        pending = graph.pending_sidecars()
    except Exception as e:  # unreadable: keep the rows
        log.warning(
            "could not list the recovery sidecars of %s (%s): quarantine %s kept", graph.root, e, quarantine.staging_dir
        )
        return
    if pending:
        log.warning(
            "commit failed with recovery sidecars pending: quarantine %s kept for recover_quarantine",
            quarantine.staging_dir,
        )
        return
    quarantine.discard()


def _with_facts(validate, extra: Mapping[str, Mapping[str, str]], before=None):
    """``validate`` whose verdict also carries ``extra`` commit properties per table; ``before``
    runs after a passing validation, inside the commit lease (the quarantine's record)."""

    def with_facts(snap: Snapshot, staged: Mapping[str, StagedTable]):
        verdict = validate(snap, staged)
        if before is not None:
            before()
        if not isinstance(verdict, Checked):
            verdict = Checked(facts=verdict or {})
        facts = {k: dict(v) for k, v in verdict.facts.items()}
        for key, props in extra.items():
            if key in staged:
                facts.setdefault(key, {}).update(props)
        return dataclasses.replace(verdict, facts=facts)

    return with_facts


# -- the DataSource writer ----------------------------------------------------------------------


class OmnigraphWriter(DataSourceArrowWriter):
    """``DataSourceArrowWriter`` for one node or edge type. Constructed on the driver,
    pickled to executors (it holds only options, the type and the WriteTarget).

    When the type has a :func:`~..ingest.fingerprints.fingerprint_column`, each task writes the
    fingerprints of the values it staged into the load's own directory under the graph root's
    staging area (``side_dir``, the place and format of the JVM tasks' fingerprints), so the
    driver proves the load's keys distinct without reading them (I15); the driver deletes the
    directory once the load is committed or refused (a dead driver's: ``cleanup``). The tasks
    of an edge type probe every ``src``/``dst`` against the node ids ``ends_against`` names and
    hand the driver an endpoint proof (I15, :mod:`~omnigraph_spark.store.endpoint_index`)."""

    def __init__(
        self, options: Mapping[str, str], schema: StructType | None, overwrite: bool, prove_ends: bool = True
    ) -> None:
        """``prove_ends``: whether an edge type's tasks prove endpoints (a stream's micro-batch
        does not: see :class:`~.stream.OmnigraphStreamWriter`)."""
        try:
            self.opts = WriteOptions.from_options(options, overwrite=overwrite)
            if self.opts.engine == "jvm":  # the JVM provider would have taken it: the shim is not loaded
                raise JvmWriteUnavailableError(
                    "option engine=jvm: format('omnigraph') resolved to the Python source, so the shim jar is not "
                    "on this session's class path (omnigraph_spark.configure_spark, docs/api.md)",
                    option="engine",
                )
            graph = Graph.open(self.opts.path, self.opts.storage_options)
            self.typedef = graph.catalog.resolve(self.opts.type or "")
            self.target = prepare_target(
                graph,
                self.opts.branch,
                self.typedef.table_key,
                self.opts.write_mode,
                max_rows_per_file=self.opts.max_rows_per_file,
                max_bytes_per_file=self.opts.max_bytes_per_file,
            )
            if self.opts.write_mode == "delete":
                if schema is not None:
                    _integrity.delete_columns(self.typedef, schema.fieldNames())
            else:
                precheck_columns(self.typedef, self.target.schema, spark_to_arrow_schema(schema))
        except OmnigraphError as e:
            tag_error(e)
            raise
        self.quarantine = (
            Quarantine.new(self.opts.rejected_rows_path, self.opts.storage_options)
            if self.opts.rejected_rows_path
            else None
        )
        fingerprinted = (
            self.opts.write_mode != "delete" and fingerprint_column(self.typedef, self.target.schema) is not None
        )
        self.side_dir = join(RootPaths(graph.root).staging_dir, uuid.uuid4().hex) if fingerprinted else None
        # an edge type's tasks prove its endpoints against the node ids of the snapshot the write
        # starts from (I15); the commit uses the proof only if its own snapshot offers the same ids
        self.ends_against = (
            _jvm_write.endpoint_sources(
                self.typedef, graph.snapshot(self.opts.branch), [], _endpoint_index.MAX_INDEXED_IDS
            )
            if prove_ends and self.typedef.is_edge and self.opts.write_mode != "delete"
            else None
        )
        log.info(
            "omnigraph write planned: %s on %s (%s), base version %d",
            self.typedef.table_key,
            self.opts.branch,
            self.opts.write_mode,
            self.target.base_version,
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedMessage:
        """Executor: convert and stage one partition; the message is the StagedTable, or the
        :class:`Refusal` of a partition with a bad row (returned, not raised: see :mod:`.bad_rows`)."""
        pid, attempt = task_ids()
        if self.target.mode == "delete":
            return StagedMessage((delete_task(self.target, self.typedef, iterator),), pid, attempt)
        sink = self.quarantine.open_sink(self.typedef, f"p{pid}-a{attempt}") if self.quarantine else None
        keys_to = None
        if self.side_dir is not None:
            keys_to = side_files.key_hashes_location(self.side_dir, self.target.table_key, pid, attempt)
        got = stage_task(
            self.target,
            self.typedef,
            iterator,
            f"{self.typedef.name} partition {pid}",
            sink,
            key_hashes_to=keys_to,
            ends_against=self.ends_against,
        )
        if isinstance(got, Refusal):
            log.info("partition %d attempt %d refused its rows: [%s] %s", pid, attempt, got.code, got.message)
            return StagedMessage((), pid, attempt, got)
        log.info(
            "partition %d attempt %d staged %d rows in %d fragments for %s",
            pid,
            attempt,
            got.rows,
            len(got.fragments),
            got.table_key,
        )
        return StagedMessage((got,), pid, attempt, rejected=sink.close() if sink is not None else None)

    @staticmethod
    def _staged(messages: Sequence[WriterCommitMessage | None]) -> list[StagedTable]:
        out: list[StagedTable] = []
        for m in messages:
            if isinstance(m, StagedMessage):
                out.extend(m.staged)
        return out

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Driver: one graph commit from exactly the messages Spark passes (one per partition).
        If a task refused its rows, nothing is committed: the other tasks' files are deleted and
        ONE typed error is raised (the first refusing partition's error, the first few rows)."""
        try:
            self._commit(messages)
        finally:
            self._drop_side_files(messages)

    def _drop_side_files(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Driver: delete the load's side directories (every task attempt's fingerprints; best
        effort): this writer's, and the ones the messages' fingerprint files are in. A stream's
        micro-batch is committed by another instance than the one its tasks ran."""
        dirs = {f.rsplit("/", 1)[0] for s in self._staged(messages) for f in s.key_hashes or ()}
        for d in sorted(dirs | ({self.side_dir} if self.side_dir is not None else set())):
            fs = RootStorage(d, self.opts.storage_options)
            try:
                for name in fs.list_dir(d):
                    fs.delete(join(d, name))
                if is_local(d) and os.path.isdir(d):
                    os.rmdir(d)
            except (OSError, OmnigraphError) as e:  # left to cleanup's sweep of staging directories
                log.warning("could not delete the fingerprints in %s: %s", d, e)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = self._staged(messages)
        refusals = sorted(
            (m for m in messages if isinstance(m, StagedMessage) and m.refused is not None),
            key=lambda m: m.partition_id,
        )
        if refusals:
            n = abort(staged, self.opts.storage_options)
            log.info(
                "omnigraph write of %s refused: %d tasks found bad rows; removed %d staged files",
                self.typedef.table_key,
                len(refusals),
                n,
            )
            if self.quarantine is not None:
                self.quarantine.discard()
            raise tag_error(refused_error([m.refused for m in refusals]))  # type: ignore[misc]  # refusals are the messages with one
        if not staged:  # no partitions at all: still one (empty) commit, so overwrite empties the table
            staged = [
                StagedTable(
                    self.target.table_key, self.target.mode, self.target.stage_uri, self.target.base_version, (), 0, 0
                )
            ]
        try:
            graph = Graph.open(self.opts.path, self.opts.storage_options)
        except OmnigraphError as e:
            abort(staged, self.opts.storage_options)
            if self.quarantine is not None:
                self.quarantine.discard()
            tag_error(e)
            raise
        rejected = [m.rejected for m in messages if isinstance(m, StagedMessage) and m.rejected is not None]
        commit_staged(graph, self.opts.branch, staged, self.opts, self.quarantine, rejected)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Driver: delete the files of the staged messages (failed job; best effort)."""
        n = abort(self._staged(messages), self.opts.storage_options)
        self._drop_side_files(messages)
        if self.quarantine is not None:  # also after a failed commit: keep it if the load may still land
            try:
                settle_quarantine(Graph.open(self.opts.path, self.opts.storage_options), self.quarantine)
            except OmnigraphError as e:
                log.warning(
                    "graph %s unreadable (%s): quarantine %s kept", self.opts.path, e, self.quarantine.staging_dir
                )
        log.info("omnigraph write of %s aborted: removed %d staged files", self.typedef.table_key, n)


__all__ = [
    "OmnigraphWriter",
    "StagedMessage",
    "commit_staged",
    "settle_quarantine",
    "precheck_columns",
    "spark_to_arrow_schema",
]
