"""The Spark write path: ``df.write.format("omnigraph")`` -> ONE graph commit per Spark job.

Protocol (built on :mod:`omnigraph_spark.store.writes`):

* driver, planning (``OmnigraphWriter.__init__``): parse options, open the graph, resolve the
  type, ``prepare_target`` (forks the table on a branch), and check the DataFrame's columns
  against the type before any task runs;
* executors (``write``): convert each Arrow batch with :class:`RowConverter` and stream it into
  ``stage`` (uncommitted Lance fragments); the commit message is the :class:`StagedTable`;
* driver (``commit``): merge the messages Spark hands over — only those; files of failed or
  speculative attempts are never referenced — validate load-wide rules against a fresh
  snapshot inside the commit lease, then ``commit_load``;
* driver (``abort``): delete the staged files of the messages Spark hands over.

Errors crossing the JVM lose their Python class; every :class:`OmnigraphError` raised here
therefore carries its code as a message prefix (``[DANGLING_EDGE] ...``) and
:func:`unwrap_error` turns a Spark exception back into the typed error.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import DanglingEdgeError, JvmWriteUnavailableError, OmnigraphError, UniqueViolationError
from ..graph import Graph, Snapshot
from ..ingest import (
    RowConverter,
    check_cardinality,
    check_endpoints,
    check_fresh_ids,
    check_unique,
    raise_key_conflict,
    shadowed_src_counts,
    src_counts,
    unique_groups,
)
from ..ingest import integrity as _integrity
from ..ingest.fingerprints import fingerprint_column, fingerprints
from ..schema.catalog import Catalog, TypeDef
from ..store import quarantine as _quarantine
from ..store import side_files
from ..store import tables as _tables
from ..store.fs import RootStorage
from ..store.layout import RootPaths, is_local, join
from ..store.quarantine import Quarantine, Rejected, RejectSink
from ..store.writes import (
    SRC_BOUND_PROP,
    Checked,
    EndsProof,
    IdSource,
    LoadResult,
    Replaced,
    StagedTable,
    WriteTarget,
    abort,
    commit_load,
    merge_by_key,
    prepare_target,
    proven_src_bound,
    stage,
)
from .bad_rows import BadRow, Refusal, error_classes, first_bad_rows, is_row_data_error, refused_error, split_bad_rows
from .deletions import InMemory
from .deletions import deletions as _deletions
from .dist_checks import DistChecks, committed_pin
from .dist_integrity import Distributed
from .memo import Once
from .options import WriteOptions

log = logging.getLogger(__name__)


# -- errors across the JVM ----------------------------------------------------------------------


def tag_error(e: BaseException) -> BaseException:
    """Prefix an OmnigraphError's message with ``[CODE] `` (idempotent), so the code survives
    Spark's exception wrapping. Runs wherever the error is raised (executor or driver)."""
    if isinstance(e, OmnigraphError):
        prefix = f"[{e.code}] "
        msg = str(e)
        if not msg.startswith(prefix):
            e.args = (prefix + msg,)
            e.message = prefix + e.message if not e.message.startswith(prefix) else e.message
            if hasattr(e, "detail") and isinstance(e.detail, str) and not e.detail.startswith(prefix):
                e.detail = prefix + e.detail  # SchemaError pickles its detail
    return e


_TAGGED = re.compile(r"(?:omnigraph_spark\.errors\.)?(\w+): \[([A-Z0-9_]+)\] ([^\n]*)")


def unwrap_error(exc: BaseException) -> OmnigraphError | None:
    """The typed OmnigraphError a (Spark-wrapped) exception carries, or None.

    Runs on the driver. The original is returned when ``exc`` already is one; otherwise the
    first ``ClassName: [CODE] message`` line of the Python traceback Spark embeds is parsed
    (the class is the one of that code; the message keeps its ``[CODE]`` prefix)."""
    if isinstance(exc, OmnigraphError):
        return exc
    classes = error_classes()
    for m in _TAGGED.finditer(str(exc)):
        cls = classes.get(m.group(2))
        if cls is None:
            continue
        err = cls.__new__(cls)
        message = f"[{m.group(2)}] {m.group(3)}"
        Exception.__init__(err, message)
        err.message = message
        err.context = {}
        return err
    return None


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


def _task_ids() -> tuple[int, int]:
    """(partition id, attempt number) of the running task; (0, 0) outside Spark (tests)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0
    return ctx.partitionId(), ctx.attemptNumber()


def convert_and_stage(
    target: WriteTarget,
    typedef: TypeDef,
    batches: Iterable[pa.RecordBatch],
    where: str,
    rejects: RejectSink | None = None,
    rejected_ends: Mapping[str, Mapping[str, str]] | None = None,
    key_hashes_to: str | None = None,
) -> StagedTable:
    """Executor: stream user batches through RowConverter into ``stage`` (bounded memory).

    Rows are numbered from 0 within the task; ``where`` names the task (e.g. "partition 3").
    A data error (:class:`~omnigraph_spark.errors.DataError`) stops the input where it is found:
    what was staged so far is deleted and the error is raised with the first few offending
    rows of its batch in ``context['rows']`` (see :mod:`.bad_rows`). With ``rejects`` (option
    rejectedRowsPath) every offending row goes there instead and the others are staged; so do
    edges whose endpoint is in ``rejected_ends`` (``{"src"|"dst": {node id: its reason}}``).

    ``key_hashes_to``: a side file location (``side_files.location``) for the fingerprints of
    the staged values of the type's :func:`~..ingest.fingerprints.fingerprint_column`, the
    driver's uniqueness proof (I15); the result then names it in ``key_hashes`` (none when the
    type has no such column, or the file could not be written: the driver checks exactly)."""
    conv = RowConverter(typedef, target.schema)
    key_column = fingerprint_column(typedef, target.schema) if key_hashes_to else None
    hashes: list[np.ndarray] = []
    state: dict[str, Any] = {"offset": 0, "error": None}  # the rows before this batch; the refusal

    def convert(b: pa.RecordBatch, start: int) -> pa.RecordBatch:
        given = conv.given_ids
        try:
            return conv.convert(b, row_offset=state["offset"] + start, where=where)
        except OmnigraphError:
            conv.given_ids = given  # a refused piece counts no ids
            raise

    def quarantined(b: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        assert rejects is not None
        good, bad = split_bad_rows(convert, b)
        rows, errs = [i for i, _ in bad], [e for _, e in bad]
        for start, out in good:
            keep = _not_pointing_at_rejected(typedef, out, start, state["offset"], where, rejected_ends, rows, errs)
            if keep is not None:
                out = out.filter(keep)
            if out.num_rows:
                yield out
        rejects.reject(b, rows, errs)

    def converted() -> Iterator[pa.RecordBatch]:
        for b in batches:
            if b.num_rows == 0:
                continue
            try:
                if rejects is not None:
                    yield from quarantined(b)
                    state["offset"] += b.num_rows
                    continue
                out = convert(b, 0)
            except OmnigraphError as e:
                if is_row_data_error(e):
                    e.context["rows"] = [r.to_dict() for r in first_bad_rows(convert, b, e)]
                state["error"] = e  # Lance wraps what the reader raises in an OSError: keep the original
                if is_row_data_error(e):
                    return  # stop consuming: the files staged so far are deleted below
                raise
            state["offset"] += b.num_rows
            yield out

    def fingerprinted() -> Iterator[pa.RecordBatch]:
        for out in converted():
            if key_column is not None:
                hashes.append(fingerprints(out.column(key_column)))
            yield out

    try:
        staged = stage(target, fingerprinted())
    except Exception as e:
        original = state["error"]
        if isinstance(original, OmnigraphError) and original is not e:
            raise original from None
        raise
    original = state["error"]
    if isinstance(original, OmnigraphError):
        n = abort([staged], target.storage_options)
        log.info("%s: %s; stopped and removed %d staged files", where, str(original).splitlines()[0][:300], n)
        raise original
    staged = dataclasses.replace(staged, minted_ids=conv.given_ids == 0)
    if key_column is not None and key_hashes_to is not None:
        staged = _with_key_hashes(staged, key_column, hashes, key_hashes_to, target, where)
    return staged


def _with_key_hashes(
    staged: StagedTable, column: str, hashes: list[np.ndarray], uri: str, target: WriteTarget, where: str
) -> StagedTable:
    """``staged`` naming the file of its key fingerprints (sorted, written at ``uri``); a task
    that staged no value names no file. Unwritable: no proof (the driver checks exactly)."""
    values = np.concatenate(hashes) if hashes else np.empty(0, np.uint64)
    if not len(values):
        return dataclasses.replace(staged, key_hashes=(), key_column=column)
    values.sort()
    try:
        side_files.write_fingerprints(uri, values, target.storage_options)
    except Exception as e:  # e.g. an object store refusing the PUT: the proof is an optimisation
        log.warning("%s: cannot write key fingerprints to %s (%s); the driver checks %s exactly", where, uri, e, column)
        return staged
    return dataclasses.replace(staged, key_hashes=(uri,), key_column=column)


def _not_pointing_at_rejected(
    typedef: TypeDef,
    out: pa.RecordBatch,
    start: int,
    offset: int,
    where: str,
    ends: Mapping[str, Mapping[str, str]] | None,
    rows: list[int],
    errs: list[OmnigraphError],
) -> pa.Array | None:
    """Quarantine: the mask of converted edge rows whose endpoints are not nodes this load
    rejected (None: all are fine); the others are added to ``rows``/``errs`` as DANGLING_EDGE."""
    if not typedef.is_edge or not ends or not (ends.get("src") or ends.get("dst")):
        return None
    hit = None
    for col in ("src", "dst"):
        ids = ends.get(col) or {}
        if ids:
            m = pc.fill_null(pc.is_in(out.column(col), pa.array(list(ids), pa.string())), False)
            hit = m if hit is None else pc.or_(hit, m)
    if hit is None or not pc.any(hit).as_py():
        return None
    node = {"src": typedef.from_type, "dst": typedef.to_type}
    for i in pc.indices_nonzero(hit).to_pylist():
        col = "src" if out.column("src")[i].as_py() in (ends.get("src") or {}) else "dst"
        value = out.column(col)[i].as_py()
        row = offset + start + i
        rows.append(start + i)
        errs.append(
            DanglingEdgeError(
                f"edge {typedef.name} column '{col}' row {row}: endpoint {value!r} is a {node[col]} node this load "
                f"rejected ({ends[col][value]}) ({where})",
                table=f"edge {typedef.name}",
                column=col,
                row=row,
                value=value,
            )
        )
    return pc.invert(hit)


def stage_task(
    target: WriteTarget,
    typedef: TypeDef,
    batches: Iterable[pa.RecordBatch],
    where: str,
    rejects: RejectSink | None = None,
    rejected_ends: Mapping[str, Mapping[str, str]] | None = None,
    key_hashes_to: str | None = None,
) -> StagedTable | Refusal:
    """Executor: :func:`convert_and_stage`, with a data error returned as a :class:`Refusal`
    (the task succeeds, so Spark neither logs nor retries it) instead of raised. Any other
    error raises, tagged, so Spark retries the task. A refused or failed task's quarantined
    rows (``rejects``) are deleted."""
    try:
        return convert_and_stage(target, typedef, batches, where, rejects, rejected_ends, key_hashes_to)
    except OmnigraphError as e:
        if rejects is not None:
            rejects.abandon()
        if is_row_data_error(e):
            return Refusal.of(e, [BadRow(**r) for r in e.context.get("rows", ())])
        tag_error(e)
        raise
    except BaseException:
        if rejects is not None:
            rejects.abandon()
        raise


def delete_task(target: WriteTarget, typedef: TypeDef, batches: Iterable[pa.RecordBatch]) -> StagedTable:
    """Executor: a delete's keys of one partition (its key columns as strings), carried to the
    driver in the commit message; nothing is written (spark/deletions.py::deletions resolves them)."""
    try:
        keys = [_integrity.delete_keys(typedef, pa.Table.from_batches([b])) for b in batches if b.num_rows]
    except OmnigraphError as e:
        tag_error(e)
        raise
    table = pa.concat_tables(keys) if keys else None
    return StagedTable(
        target.table_key,
        "delete",
        target.stage_uri,
        target.base_version,
        (),
        0 if table is None else table.num_rows,
        0,
        deletes=table,
    )


def precheck_columns(typedef: TypeDef, table_schema: pa.Schema, arrow_schema: pa.Schema | None) -> None:
    """Driver: run the converter over an empty batch of the input schema, so unknown, missing
    or unconvertible columns fail at planning time instead of in every task."""
    if arrow_schema is None:
        return
    empty = pa.RecordBatch.from_pylist([], schema=arrow_schema)
    RowConverter(typedef, table_schema).convert(empty, where="input schema")


def spark_to_arrow_schema(schema: StructType | None) -> pa.Schema | None:
    """The Arrow schema Spark will send for ``schema`` (None when it cannot be derived)."""
    if schema is None:
        return None
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema)
    except Exception as e:  # exotic types: the executors' converter still checks every batch
        log.debug("cannot derive the Arrow schema of %s: %s", schema, e)
        return None


# -- load-wide validation (driver, inside the commit lease) --------------------------------


def make_validator(graph: Graph, cascade: bool = False, dist: DistChecks | None = None) -> Callable[..., object]:
    """A ``validate(snapshot, staged_by_key)`` callback for ``commit_load``.

    Runs on the driver, under the commit lease, against the fresh snapshot; it reads only the
    columns involved (ids, key/unique columns, src/dst) of the uncommitted fragments:

    * id and every @key / @unique group are unique within the load (merge: a duplicate id is an
      error, never last-wins);
    * edge endpoints exist in the snapshot's node table (committed; not when that node type is
      overwritten by this load) or among the load's staged nodes;
    * @card per source over committed + pending (merge shadows by id, overwrite counts pending).

    The endpoint and @card checks are skipped where the JVM staging tasks proved them for this
    very snapshot (``StagedTable.ends``, invariant I15); errors always come from these checks.
    It returns, per edge table with @card, the bound to record with the commit (I16).

    Integrity across writes: an append is a strict insert (I17: a committed or repeated id is a
    KEY_CONFLICT); no committed edge is left dangling (I18): a delete's rows and every edge
    incident to a deleted node, and with ``cascade`` every edge a node overwrite orphans, are
    returned as deletions for the same commit (a :class:`~..store.writes.Checked`); without
    ``cascade`` an orphaning overwrite is a DANGLING_EDGE naming each edge type and its count.

    With ``dist`` (option distributedCheckRows), a check that reads at least its threshold of
    staged + committed rows runs as Spark jobs instead (:mod:`.dist_checks`, invariant I21):
    the same error, the driver holds only counts and offenders. ``validate(snap, staged,
    distributed_only=True)`` runs only those, before the lease, memoising their outcomes under
    the exact versions and files they read; the validator inside the lease reuses an outcome
    only if its inputs did not move, else the check runs again. The parts of I18
    (:func:`~.deletions.deletions`) run each in memory or as Spark jobs (:mod:`.dist_integrity`)
    by the same rule; when one may run as Spark jobs, I18 runs before the lease too, so that its
    Spark-job parts are memoised alike (under the versions and files they read and the ids they
    were given); inside the lease the in-memory parts run again.
    """
    # the Spark-job checks: used only where spread() (or the caller) found dist set
    jobs = cast(DistChecks, dist)
    catalog: Catalog = graph.catalog
    so = graph.storage_options
    # a load's fingerprint files never change: compared once, for the checks before the lease
    # and inside it alike
    fingerprints = Once()

    def distinct(uris: tuple[str, ...]) -> bool:
        return fingerprints(uris, lambda: side_files.fingerprints_distinct(uris, so))

    # likewise the edge tasks' bucket-count files: added up once
    bucket_bounds = Once()

    def tasks_bound(proof: EndsProof) -> int:
        """The staging tasks' bound on any source's edges in the load (I15)."""
        if not proof.src_sketches:
            return proof.src_bound

        def summed() -> int:
            bound = proven_src_bound(proof, so)
            log.info(
                "the staging tasks' bucket counts bound a source's edges in the load at %d (their bounds summed: %d)",
                bound,
                proof.src_bound,
            )
            return bound

        return bucket_bounds((proof.src_sketches, proof.src_bound, proof.unsketched_bound), summed)

    def validate(
        snap: Snapshot, staged: Mapping[str, StagedTable], distributed_only: bool = False
    ) -> dict[str, dict[str, str]] | Checked:
        # Every read is lazy and shared (Once): the checks below run concurrently and each
        # reads what it needs, so Lance reads overlap other checks' hashing instead of all
        # reads running first. Each column set is still read once.
        once = Once()

        def staged_cols(key: str, cols: Sequence[str]) -> pa.Table:
            def read() -> pa.Table:
                s = staged[key]
                t = _read_staged(s, cols, so) if s.fragments else None
                if t is None:
                    schema = graph.open_table(key, snap).schema
                    t = pa.Table.from_batches([], schema=pa.schema([schema.field(c) for c in cols]))
                return t

            return once(("staged", key, tuple(cols)), read)

        def committed(key: str, cols: Sequence[str]) -> pa.Table:
            return once(("committed", key, tuple(cols)), lambda: _read_committed(graph, snap, key, cols))

        def recorded_bound(key: str) -> int | None:
            t = snap.table(key)
            if t.row_count == 0:  # no committed edge: no source has one
                return 0
            v = _tables.transaction_property(graph.open_table(key, snap), t.version, SRC_BOUND_PROP)
            return int(v) if v is not None and v.isdigit() else None

        facts: dict[str, dict[str, str]] = {}  # each check writes only its own table's entry

        def card_check(td: TypeDef, mode: str, proof: EndsProof | None, key: str, end_cols: list[str]) -> None:
            most = _card_of(
                td,
                mode,
                None if proof is None else tasks_bound(proof),
                staged_cols,
                key,
                end_cols,
                committed,
                lambda: recorded_bound(key),
            )
            if most is not None:
                facts[key] = {SRC_BOUND_PROP: str(most)}

        def node_ids(type_name: str) -> pa.ChunkedArray:
            # the same object for both ends of X -> X edges (check_endpoints hashes it once)
            return once(("ids", type_name), lambda: _node_ids(type_name))

        def _node_ids(type_name: str) -> pa.ChunkedArray:
            key = f"node:{type_name}"
            parts: list[pa.ChunkedArray] = []
            if key in staged:
                parts.append(staged_cols(key, ["id"]).column("id"))
            if not (key in staged and staged[key].mode == "overwrite"):
                parts.append(committed(key, ["id"]).column("id"))
            chunks = [c for p in parts for c in p.chunks]
            return pa.chunked_array(chunks, pa.string())

        def schema_of(key: str) -> pa.Schema:
            return once(("schema", key), lambda: graph.open_table(key, snap).schema)

        def spread(rows: int, *keys_cols: tuple[str, Sequence[str]]) -> bool:
            """This check reads ``rows`` rows: run it as Spark jobs?"""
            return (
                dist is not None
                and dist.wants(rows)
                and all(dist.supports(schema_of(k), cols) for k, cols in keys_cols)
            )

        def ids_rows(type_name: str) -> int:
            nkey = f"node:{type_name}"
            n = staged[nkey].rows if nkey in staged else 0
            return n if nkey in staged and staged[nkey].mode == "overwrite" else n + snap.table(nkey).row_count

        def card_dist(td: TypeDef, mode: str, proof: EndsProof | None, key: str) -> None:
            card = td.cardinality
            if proof is not None and mode != "merge" and card.max is not None and card.min <= 1:
                most = 0 if mode == "overwrite" else recorded_bound(key)  # I15 + I16: no rows read
                bound = None if most is None else tasks_bound(proof) + most
                if bound is not None and bound <= card.max:
                    _card_proven(td, bound)
                    facts[key] = {SRC_BOUND_PROP: str(bound)}
                    return
            most = jobs.card(
                td, mode, staged[key], schema_of(key), None if mode == "overwrite" else committed_pin(snap, key)
            )
            if most is not None and card.max is not None:
                facts[key] = {SRC_BOUND_PROP: str(most)}

        # in the order a sequential run would raise; True: the check runs as Spark jobs
        checks: list[tuple[Callable[[], None], bool]] = []
        for key in sorted(staged):
            s = staged[key]
            td = catalog.by_table_key(key)
            if s.mode == "delete":  # resolved below (deletions, I18)
                continue
            groups = unique_groups(td)
            # append is a strict insert (I17): a repeated id is a KEY_CONFLICT, not a uniqueness slip
            strict = s.mode == "append" and not s.minted_ids
            id_by_key = _id_is_checked_key(td, groups)
            for cols, what in groups:
                conflict = strict and id_by_key and cols == (td.key_property,)
                spread_out = spread(s.rows, (key, cols))
                if spread_out:  # I21
                    exact = functools.partial(jobs.unique, td, s, schema_of(key), cols, what, conflict=conflict)
                else:
                    exact = functools.partial(_unique_of, td, staged_cols, key, cols, what, conflict=conflict)
                if s.key_hashes is not None and cols == (s.key_column,):  # the tasks' fingerprints (I15)
                    checks.append((functools.partial(_unique_fingerprinted, td, s, what, exact, distinct), spread_out))
                else:
                    checks.append((exact, spread_out))
            id_cols = ["id", "src", "dst"] if td.is_edge else ["id"]
            if not id_by_key and not s.minted_ids:
                what = "duplicate id in one load (merge never picks a winner)" if s.mode == "merge" else "id"
                if spread(s.rows, (key, ["id"])):
                    checks.append(
                        (functools.partial(jobs.unique, td, s, schema_of(key), ["id"], what, conflict=strict), True)
                    )
                else:  # edges: read id, src and dst in one pass and check id on that table
                    checks.append(
                        (
                            functools.partial(
                                _unique_of, td, staged_cols, key, ["id"], what, read_cols=id_cols, conflict=strict
                            ),
                            False,
                        )
                    )
            committed_rows = snap.table(key).row_count
            if strict and committed_rows and not _fresh_proven(td, s, snap):
                if spread(s.rows + committed_rows, (key, ["id"])):
                    checks.append(
                        (
                            functools.partial(
                                jobs.fresh, td, s, schema_of(key), committed_pin(snap, key), committed_rows, snap.branch
                            ),
                            True,
                        )
                    )
                else:
                    checks.append(
                        (functools.partial(_fresh_of, td, snap.branch, staged_cols, committed, key, id_cols), False)
                    )
            if not td.is_edge:
                continue
            # minted ids are all new: nothing to shadow, nothing to collapse, so no id column,
            # and a merge of them only inserts: to the counts it is an append
            end_cols = ["src", "dst"] if s.minted_ids else ["id", "src", "dst"]
            fkey, tkey = f"node:{td.from_type}", f"node:{td.to_type}"
            if not _ends_proven(td, s, snap, staged):
                if spread(
                    s.rows + ids_rows(td.from_type or "") + ids_rows(td.to_type or ""),
                    (key, ["src", "dst"]),
                    (fkey, ["id"]),
                    (tkey, ["id"]),
                ):
                    checks.append(
                        (
                            functools.partial(
                                jobs.endpoints,
                                td,
                                s,
                                schema_of(key),
                                id_source(snap, staged, fkey),
                                id_source(snap, staged, tkey),
                                schema_of(fkey),
                                schema_of(tkey),
                            ),
                            True,
                        )
                    )
                else:
                    checks.append((functools.partial(_endpoints_of, td, staged_cols, key, end_cols, node_ids), False))
            card = td.cardinality
            if card.min > 0 or card.max is not None:
                mode = "append" if s.mode == "merge" and s.minted_ids else s.mode
                read = s.rows + (0 if mode == "overwrite" else committed_rows)
                if spread(read, (key, ["id", "src"] if mode == "merge" else ["src"])):
                    checks.append((functools.partial(card_dist, td, mode, s.ends, key), True))
                else:
                    checks.append((functools.partial(card_check, td, mode, s.ends, key, end_cols), False))

        # a merge's commit deletes the committed rows it replaces: above the threshold the
        # executors find them and write the deletion files (on the table's own lineage: a
        # branch's first write forks the table inside the lease, so it is found there)
        merges = [
            key
            for key in sorted(staged)
            if staged[key].mode == "merge"
            and snap.table(key).row_count
            and snap.table(key).branch == snap.branch
            and spread(staged[key].rows + snap.table(key).row_count, (key, ["id"]))
        ]
        replaced: dict[str, Replaced] = {}

        def replace(key: str) -> None:
            replaced[key] = jobs.replaced(key, staged[key], schema_of(key), committed_pin(snap, key))

        def integrity() -> tuple[dict[str, pa.Array], dict[str, int]]:
            """I18, each part in memory or as Spark jobs (I21) by the rows it reads."""
            in_memory = InMemory(committed, staged_cols)
            spark_jobs = Distributed(dist, snap, staged, schema_of) if dist is not None else None
            return _deletions(
                catalog,
                snap,
                staged,
                cascade,
                lambda rows, *keys_cols: spark_jobs if spread(rows, *keys_cols) else in_memory,
            )

        if distributed_only:
            if dist is not None:
                proofs: list[Callable[[], object]] = [c for c, spread_out in checks if spread_out]
                integrity_rows = _integrity_rows(catalog, snap, staged)
                if dist.wants(integrity_rows):
                    # its Spark-job parts memoise their answers; its in-memory parts, each under
                    # the threshold, run again inside the lease
                    proofs.append(integrity)
                passed = dist.prove(proofs)
                if passed and merges and not integrity_rows:
                    # only for a load that passed its checks and deletes nothing: the deletion
                    # files are written now, and a load that fails later leaves them to cleanup
                    dist.prove([functools.partial(replace, k) for k in merges])
            return facts
        run_checks([c for c, _ in checks])
        deletions, missing = integrity()
        for key in merges:
            if key not in deletions:
                replace(key)  # found before the lease unless the table moved since
        if deletions or missing or replaced:
            return Checked(facts, deletions, missing, replaced)
        return facts

    return validate


def _integrity_rows(catalog: Catalog, snap: Snapshot, staged: Mapping[str, StagedTable]) -> int:
    """At least the rows the largest part of I18 (:func:`~.deletions.deletions`) reads: the
    biggest committed table plus every staged row; 0 when the load neither deletes nor
    overwrites a node type (I18 has no part to run)."""
    if not any(
        s.mode == "delete" or s.deletes is not None or (s.mode == "overwrite" and not catalog.by_table_key(k).is_edge)
        for k, s in staged.items()
    ):
        return 0
    return max(snap.table(td.table_key).row_count for td in catalog.types()) + sum(s.rows for s in staged.values())


def _read_staged(s: StagedTable, cols: Sequence[str], storage_options) -> pa.Table:
    """Driver: ``cols`` of every staged row of ``s`` (the in-memory checks' only staged read)."""
    return _tables.read_staged_columns(s.stage_uri, s.fragments, list(cols), storage_options)


def _read_committed(graph: Graph, snap: Snapshot, key: str, cols: Sequence[str]) -> pa.Table:
    """Driver: ``cols`` of every committed row of ``key`` at the snapshot (the in-memory checks'
    only committed read)."""
    return graph.open_table(key, snap).to_table(columns=list(cols))


_INJECTIVE_KEY_TYPES = frozenset({"String", "I32", "I64", "U32", "U64"})


def _id_is_checked_key(td: TypeDef, groups: Sequence[tuple[tuple[str, ...], str]]) -> bool:
    """A keyed node's id is its @key value as text, an injective mapping for String and integer
    keys: the key's uniqueness check already proves the ids distinct (one hash pass, not two)."""
    key = td.key_property
    if td.is_edge or key is None or (key,) not in [cols for cols, _ in groups]:
        return False
    prop = next((p for p in td.properties if p.name == key), None)
    return prop is not None and not prop.type.list and prop.type.scalar in _INJECTIVE_KEY_TYPES


def id_source(snap: Snapshot, staged: Mapping[str, StagedTable], node_key: str) -> IdSource:
    """The ids node type ``node_key`` offers an endpoint check of a load staging ``staged`` on
    ``snap``: the committed table (unless the load overwrites it) plus the load's staged files.
    The same rule ``node_ids`` in :func:`make_validator` reads by."""
    s = staged.get(node_key)
    files = tuple(_tables.data_file_uris(s.stage_uri, s.fragments)) if s is not None else ()
    if s is not None and s.mode == "overwrite":
        return IdSource(None, files)
    t = snap.table(node_key)
    return IdSource((t.base_path, t.lance_branch, t.version), files)


def _ends_proven(td: TypeDef, s: StagedTable, snap: Snapshot, staged: Mapping[str, StagedTable]) -> bool:
    """The staging tasks found no dangling endpoint against exactly the ids this commit would
    check against (I15): the same committed versions, the same staged files."""
    p = s.ends
    ok = (
        p is not None
        and p.dangling == 0
        and p.src_ids == id_source(snap, staged, f"node:{td.from_type}")
        and p.dst_ids == id_source(snap, staged, f"node:{td.to_type}")
    )
    if p is not None:
        log.info(
            "%s endpoints: %s",
            td.table_key,
            "proven while staging"
            if ok
            else f"checked on the driver ({p.dangling} rows unproven or the node tables moved)",
        )
    return ok


def _fresh_proven(td: TypeDef, s: StagedTable, snap: Snapshot) -> bool:
    """The staging tasks found none of the append's ids among the committed ids of exactly
    the version this commit lands on (I17)."""
    p = s.fresh
    if p is None:
        return False
    t = snap.table(td.table_key)
    ok = p.conflicts == 0 and p.committed == IdSource((t.base_path, t.lance_branch, t.version))
    log.info(
        "%s strict append: %s",
        td.table_key,
        "no committed id, proven while staging"
        if ok
        else f"checked on the driver ({p.conflicts} conflicts found while staging or the table moved)",
    )
    return ok


def _fresh_of(td: TypeDef, branch: str, staged_cols, committed, key: str, read_cols: Sequence[str]) -> None:
    """Strict append (I17): no staged id is already committed (the id columns only)."""
    check_fresh_ids(td, staged_cols(key, read_cols).column("id"), committed(key, ["id"]).column("id"), branch=branch)


def _unique_fingerprinted(
    td: TypeDef, s: StagedTable, what: str, exact: Callable[[], None], distinct: Callable[[tuple[str, ...]], bool]
) -> None:
    """A single-column uniqueness rule: if no two of the staging tasks' fingerprints are equal
    (``distinct``: :func:`~..store.side_files.fingerprints_distinct`), no two values are (equal
    values always fingerprint alike); otherwise ``exact()`` decides and words any error (in
    memory or as Spark jobs, I21)."""
    try:
        proven = distinct(tuple(s.key_hashes or ()))
    except (OSError, ValueError) as e:  # e.g. cleanup took the journal of a load idle past its grace: no proof
        log.warning("%s %s: key fingerprints unreadable (%s); checking exactly", td.table_key, what, e)
    else:
        if proven:
            log.info("%s %s: %d values proven distinct by fingerprints", td.table_key, what, s.rows)
            return
    exact()


def _unique_of(
    td: TypeDef,
    staged_cols,
    key: str,
    cols: Sequence[str],
    what: str,
    read_cols: Sequence[str] | None = None,
    conflict: bool = False,
) -> None:
    """One uniqueness rule over the staged rows; ``conflict``: the rule proves an append's ids
    distinct, so a repeat is a KEY_CONFLICT naming every repeated id (I17)."""
    table = staged_cols(key, read_cols or cols)
    try:
        check_unique(td, table, list(cols), what=what)
    except UniqueViolationError:
        if not conflict:
            raise
        ids = pc.cast(table.column(cols[0]), pa.string())
        vc = pc.value_counts(ids.drop_null())
        raise_key_conflict(
            td, pc.filter(vc.field("values"), pc.greater(vc.field("counts"), 1)), "given more than once in this load"
        )


def _endpoints_of(td: TypeDef, staged_cols, key: str, end_cols: Sequence[str], node_ids) -> None:
    ends = staged_cols(key, end_cols)
    check_endpoints(
        td, ends.column("src"), ends.column("dst"), node_ids(td.from_type or ""), node_ids(td.to_type or "")
    )


def _most_per_src(src: pa.ChunkedArray) -> int:
    """The most edges any one source has in ``src`` (0 for none)."""
    counts = src_counts(src)["count"]
    return pc.max(counts).as_py() if len(counts) else 0


def _card_of(
    td: TypeDef,
    mode: str,
    proven: int | None,
    staged_cols,
    key: str,
    end_cols: Sequence[str],
    committed,
    recorded_bound: Callable[[], int | None],
) -> int | None:
    """Apply @card to one staged edge table; return an upper bound of the edges any source has
    in the version the commit creates (None: no @card max, nothing to record). ``proven``: the
    staging tasks' bound on any source's edges in the load (I15; None: none).

    The bound shortcut (a max, min <= 1 since a source with edges always has >= 1, not a
    merge): the load's own most edges per source (the staging tasks' bound, I15, else counted
    from the staged ``src``) plus the most any committed source has (append; overwrite counts
    none) cannot exceed the max, so no source can. The committed part is the bound recorded
    with the pinned version (I16); without one, it is counted only when the tasks' bound makes
    the count worth it. Otherwise every source is counted exactly."""
    card = td.cardinality
    if mode != "merge" and card.max is not None and card.min <= 1:
        most = 0 if mode == "overwrite" else recorded_bound()
        if most is None and proven is not None:
            most = _most_per_src(committed(key, ["src"]).column("src"))
        if most is not None:
            load = proven if proven is not None else _most_per_src(staged_cols(key, end_cols).column("src"))
            if load + most <= card.max:
                _card_proven(td, load + most)
                return load + most
    old_cols = {"append": ["src"], "merge": ["id", "src"]}.get(mode)  # overwrite: None
    most = _check_card(td, mode, staged_cols(key, end_cols), committed(key, old_cols) if old_cols else None)
    return most if card.max is not None else None


def _card_proven(td: TypeDef, bound: int) -> None:
    log.info(
        "%s @card: at most %d edges per source <= max %d, proven without counting",
        td.table_key,
        bound,
        td.cardinality.max,
    )


def _check_card(td: TypeDef, mode: str, ends: pa.Table, old: pa.Table | None) -> int | None:
    if old is not None and mode != "merge":  # append: committed + pending in one counting pass
        return check_cardinality(td, ends.column("src"), committed_src=old.column("src"))
    committed_counts = shadowed = None
    if old is not None:
        committed_counts = src_counts(old.column("src"))
        shadowed = shadowed_src_counts(old.column("id"), old.column("src"), ends.column("id"))
    return check_cardinality(
        td,
        ends.column("src"),
        committed_counts,
        overwrite=mode == "overwrite",
        shadowed_committed=shadowed,
        pending_ids=ends.column("id") if mode == "merge" else None,
    )


def run_checks(checks: Sequence[Callable[[], None]], max_workers: int | None = None) -> None:
    """Run independent load-wide checks concurrently (pyarrow kernels release the GIL) and raise
    the error the FIRST failing check in ``checks`` order raises, exactly as running them one by
    one would: a load with several problems always reports the same one."""
    workers = min(len(checks), max_workers or min(4, os.cpu_count() or 1))
    if workers <= 1:
        for check in checks:
            check()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="omnigraph-validate") as pool:
        futures = [pool.submit(check) for check in checks]
        try:
            for f in futures:
                f.result()
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def commit_staged(
    graph: Graph,
    branch: str,
    staged: Sequence[StagedTable],
    opts: WriteOptions,
    quarantine: Quarantine | None = None,
    rejected: Sequence[Rejected] = (),
    spark: Callable[[], Any] | None = None,
) -> LoadResult:
    """Driver: validate and commit ``staged`` as one graph commit; delete the files on failure.
    ``rejected``: what the tasks quarantined into ``quarantine`` (its counts travel in the
    commit's properties; its files are published after the commit, deleted on failure).

    With an active SparkSession on this process, or ``spark`` (returns one; called only when a
    check runs as Spark jobs: the JVM provider's planner, :mod:`.bridge`), the checks above
    ``distributedCheckRows`` run as Spark jobs first, outside the commit lease, on the branch's
    current snapshot (I21)."""
    dist = DistChecks.for_load(opts.distributed_check_rows, graph.storage_options, spark)
    validate = make_validator(graph, cascade=opts.cascade, dist=dist)
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
    directory once the load is committed or refused (a dead driver's: ``cleanup``)."""

    def __init__(self, options: Mapping[str, str], schema: StructType | None, overwrite: bool) -> None:
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
        pid, attempt = _task_ids()
        if self.target.mode == "delete":
            return StagedMessage((delete_task(self.target, self.typedef, iterator),), pid, attempt)
        sink = self.quarantine.open_sink(self.typedef, f"p{pid}-a{attempt}") if self.quarantine else None
        keys_to = None
        if self.side_dir is not None:
            keys_to = side_files.key_hashes_location(self.side_dir, self.target.table_key, pid, attempt)
        got = stage_task(
            self.target, self.typedef, iterator, f"{self.typedef.name} partition {pid}", sink, key_hashes_to=keys_to
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
    "make_validator",
    "commit_staged",
    "convert_and_stage",
    "stage_task",
    "tag_error",
    "unwrap_error",
    "precheck_columns",
]
