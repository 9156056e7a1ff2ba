"""The executor side of a Python write: convert a partition's rows and stage them.

Each task of ``df.write.format("omnigraph")``, ``write_table`` and ``write_graph`` on the Python
paths streams its Arrow batches through :class:`~omnigraph_spark.ingest.RowConverter` into
``stage`` (uncommitted Lance fragments, :mod:`omnigraph_spark.store.writes`) and hands the
:class:`~omnigraph_spark.store.writes.StagedTable` to the driver. A row that breaks a rule of
the catalog is an answer, not a task failure (:mod:`.bad_rows`, I20), or, with
``rejectedRowsPath``, a quarantined row (:mod:`omnigraph_spark.store.quarantine`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext

from ..errors import DanglingEdgeError, OmnigraphError
from ..ingest import RowConverter
from ..ingest import integrity as _integrity
from ..ingest.fingerprints import fingerprint_column, fingerprints
from ..schema.catalog import TypeDef
from ..store import side_files
from ..store.endpoint_index import EndsCheck
from ..store.quarantine import RejectSink
from ..store.writes import (
    IdSource,
    StagedTable,
    WriteTarget,
    abort,
    stage,
)
from .bad_rows import BadRow, Refusal, first_bad_rows, is_row_data_error, split_bad_rows
from .error_tags import tag_error

log = logging.getLogger(__name__)


def task_ids() -> tuple[int, int]:
    """(partition id, attempt number) of the running task; (0, 0) outside Spark (tests)."""
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
    ends_against: tuple[IdSource, IdSource] | None = None,
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
    type has no such column, or the file could not be written: the driver checks exactly).

    ``ends_against``: for an edge type, the id sources (from, to) of its endpoint proof (I15,
    :class:`~omnigraph_spark.store.endpoint_index.EndsCheck`): every staged ``src``/``dst`` is
    probed against them and the result names the dangling count and the most edges per source
    in ``ends`` (none when the ids could not be indexed: the driver checks exactly)."""
    conv = RowConverter(typedef, target.schema)
    key_column = fingerprint_column(typedef, target.schema) if key_hashes_to else None
    ends = EndsCheck(ends_against, target.storage_options) if typedef.is_edge and ends_against else None
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
            if ends is not None:
                ends.probe(out)
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
    if ends is not None:
        staged = dataclasses.replace(staged, ends=ends.proof())
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
    ends_against: tuple[IdSource, IdSource] | None = None,
) -> StagedTable | Refusal:
    """Executor: :func:`convert_and_stage`, with a data error returned as a :class:`Refusal`
    (the task succeeds, so Spark neither logs nor retries it) instead of raised. Any other
    error raises, tagged, so Spark retries the task. A refused or failed task's quarantined
    rows (``rejects``) are deleted."""
    try:
        return convert_and_stage(target, typedef, batches, where, rejects, rejected_ends, key_hashes_to, ends_against)
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


__all__ = ["task_ids", "convert_and_stage", "stage_task", "delete_task"]
