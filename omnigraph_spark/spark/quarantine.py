"""Quarantine (option ``rejectedRowsPath``, issue 28): commit the valid rows, keep the others.

Default: a load with one bad row is refused whole (:mod:`.bad_rows`). With ``rejectedRowsPath``
every row that breaks a per-row rule is written instead, as the user gave it plus
``_omnigraph_table``, ``_omnigraph_code`` and ``_omnigraph_reason`` (the message the load
would otherwise have failed with), to Parquet; the valid rows are committed in the same single
graph commit. Edges whose ``src``/``dst`` is a node this load rejected are rejected too
(``DANGLING_EDGE``). Good + rejected = input, always.

Not quarantined (the load is still refused): load-wide rules checked on the driver
(``UNIQUE_VIOLATION``, ``KEY_CONFLICT``, ``DANGLING_EDGE`` against the graph, ``@card``) and
column-level problems found at planning (unknown or missing columns, an unconvertible type).

Layout under ``rejectedRowsPath`` (a path or URI pyarrow can write: local, s3://, gs://...):

* while staging, each task attempt writes
  ``_staging/<load id>/<kind>_<Type>/part-p<partition>-a<attempt>-<uuid>.parquet`` (one directory
  per table: the tables' columns differ; a directory starting with ``_`` is skipped by Spark and
  pyarrow readers);
* after the graph commit, the driver deletes the files of attempts it did not use (failed,
  speculative) and moves the directory to ``load=<load id>/`` (one rename on a local file
  system), then writes ``load=<load id>/_SUCCESS``. Read one table's rejected rows with
  ``spark.read.parquet(f"{result.rejected_path}/node_Person")``. On an object store the files are moved one
  by one: a directory without ``_SUCCESS`` is incomplete;
* a load that fails (or is skipped as an applied txn) deletes its ``_staging/<load id>/``.
  A crash can leave a ``_staging/<load id>/`` behind, never a ``load=`` directory of a load that
  did not commit.

The commit's Lance transaction properties of each table record ``omnigraph-spark.rejected_rows``
(that table's count) and ``omnigraph-spark.rejected_rows_at`` (the ``load=`` directory).
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import OmnigraphError, StorageError
from ..schema.catalog import TypeDef

log = logging.getLogger(__name__)

TABLE_COLUMN = "_omnigraph_table"
CODE_COLUMN = "_omnigraph_code"
REASON_COLUMN = "_omnigraph_reason"
REJECTED_PROP = "omnigraph-spark.rejected_rows"
REJECTED_AT_PROP = "omnigraph-spark.rejected_rows_at"


@dataclass(frozen=True)
class Quarantine:
    """Where one load's rejected rows go. Made on the driver, pickled to executors."""

    path: str  # rejectedRowsPath, without a trailing slash
    load_id: str
    storage: Tuple[Tuple[str, str], ...] = field(default=(), repr=False)  # credentials: never in reprs

    @classmethod
    def new(cls, path: str, storage_options: Optional[Mapping[str, str]] = None) -> "Quarantine":
        return cls(path.rstrip("/"), uuid.uuid4().hex, tuple(sorted((storage_options or {}).items())))

    @property
    def staging_dir(self) -> str:
        return f"{self.path}/_staging/{self.load_id}"

    @property
    def final_dir(self) -> str:
        return f"{self.path}/load={self.load_id}"

    def _fs(self) -> Tuple[pafs.FileSystem, str]:
        try:
            fs, base = pafs.FileSystem.from_uri(self.path if "://" in self.path else _absolute(self.path))
        except Exception as e:
            raise StorageError(f"rejectedRowsPath '{self.path}' is not a location pyarrow can write: {e}",
                               option="rejectedRowsPath") from e
        return fs, base.rstrip("/")

    def _local(self, uri_path: str) -> str:
        """A path of ours (``self.path``-based) as the file system's path."""
        fs, base = self._fs()
        return base + uri_path[len(self.path):]

    # -- executor -----------------------------------------------------------------------------

    def open_sink(self, typedef: TypeDef, name: str) -> "RejectSink":
        return RejectSink(self, typedef, name)

    # -- driver -------------------------------------------------------------------------------

    def publish(self, files: Sequence[str]) -> str:
        """After the graph commit: keep exactly ``files`` (the used attempts'), move them to
        :attr:`final_dir`, mark it complete. Returns the directory."""
        fs, _ = self._fs()
        staging, final = self._local(self.staging_dir), self._local(self.final_dir)
        keep = {self._local(f) for f in files}
        present = [i.path for i in fs.get_file_info(pafs.FileSelector(staging, allow_not_found=True, recursive=True))
                   if i.type == pafs.FileType.File]
        for p in present:
            if p not in keep:
                fs.delete_file(p)  # an attempt Spark did not use (failed, speculative)
        if not keep:
            self.discard()
            return self.final_dir
        try:
            fs.create_dir(self._local(self.path), recursive=True)
            fs.move(staging, final)  # local: one rename, the directory appears whole
        except (OSError, NotImplementedError):
            for p in sorted(keep):
                fs.create_dir(final + p[len(staging):].rsplit("/", 1)[0], recursive=True)
                fs.move(p, final + p[len(staging):])
            fs.delete_dir(staging)
        with fs.open_output_stream(final + "/_SUCCESS") as out:
            out.write(b"")
        self._drop_empty_staging_root(fs)
        return self.final_dir

    def discard(self) -> None:
        """The load failed or committed nothing: delete its staged rejected rows (best effort)."""
        try:
            fs, _ = self._fs()
            staging = self._local(self.staging_dir)
            if fs.get_file_info(staging).type != pafs.FileType.NotFound:
                fs.delete_dir(staging)
            self._drop_empty_staging_root(fs)
        except Exception as e:  # never mask the load's own error
            log.warning("could not delete the rejected rows staged under %s: %s", self.staging_dir, e)

    def _drop_empty_staging_root(self, fs: pafs.FileSystem) -> None:
        root = self._local(f"{self.path}/_staging")
        try:
            if not fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
                fs.delete_dir(root)
        except OSError:
            pass  # another load staging there


def table_dir(typedef: TypeDef) -> str:
    """The directory of one table's rejected rows in a load's quarantine (``node_Person``)."""
    return f"{typedef.kind}_{typedef.name}"


def _absolute(path: str) -> str:
    import os

    return os.path.abspath(path)


@dataclass(frozen=True)
class Rejected:
    """What one task attempt quarantined (its commit-message part): a count, its file, and the
    ids of the nodes it rejected (the load's edges to them are rejected too)."""

    table_key: str
    rows: int
    file: Optional[str]
    node_ids: Tuple[Tuple[str, str], ...] = ()  # (id, reason) of rejected nodes (nodes only)


class RejectSink:
    """Executor: the rejected rows of one task attempt, streamed into one Parquet file."""

    def __init__(self, quarantine: Quarantine, typedef: TypeDef, name: str) -> None:
        self.q = quarantine
        self.typedef = typedef
        self.file = f"{quarantine.staging_dir}/{table_dir(typedef)}/part-{name}-{uuid.uuid4().hex[:8]}.parquet"
        self.rows = 0
        self.node_ids: List[Tuple[str, str]] = []
        self._writer: Optional[pq.ParquetWriter] = None

    def reject(self, batch: pa.RecordBatch, rows: Sequence[int], errors: Sequence[OmnigraphError]) -> None:
        """Quarantine ``rows`` of the input ``batch``, each with its error."""
        if not rows:
            return
        taken = batch.take(pa.array(rows, pa.int64()))
        codes = pa.array([e.code for e in errors], pa.string())
        reasons = pa.array([str(e.message if str(e.message).startswith("[") else f"[{e.code}] {e.message}")
                            for e in errors], pa.string())
        out = pa.RecordBatch.from_arrays(
            list(taken.columns) + [pa.array([self.typedef.table_key] * len(rows), pa.string()), codes, reasons],
            names=list(taken.schema.names) + [TABLE_COLUMN, CODE_COLUMN, REASON_COLUMN])
        if self._writer is None:
            fs, _ = self.q._fs()
            path = self.q._local(self.file)
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
            self._writer = pq.ParquetWriter(path, out.schema, filesystem=fs)
        self._writer.write_batch(out)
        self.rows += len(rows)
        if not self.typedef.is_edge:
            self.node_ids.extend(_node_ids(self.typedef, taken, reasons))

    def close(self) -> Rejected:
        if self._writer is not None:
            self._writer.close()
        return Rejected(self.typedef.table_key, self.rows, self.file if self._writer is not None else None,
                        tuple(self.node_ids))

    def abandon(self) -> None:
        """The task failed: delete this attempt's file (the driver would not publish it anyway)."""
        if self._writer is not None:
            try:
                self._writer.close()
                fs, _ = self.q._fs()
                fs.delete_file(self.q._local(self.file))
            except OSError:
                pass


def _node_ids(typedef: TypeDef, rows: pa.RecordBatch, reasons: pa.Array) -> List[Tuple[str, str]]:
    """The ids rejected node rows would have had (their @key as text, or their given id);
    rows whose id cannot be told are skipped (no edge can name them either)."""
    names = rows.schema.names
    column = typedef.key_property if typedef.key_property in names else ("id" if "id" in names else None)
    if column is None:
        return []
    try:
        ids = pc.cast(rows.column(names.index(column)), pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return []
    return [(i, r) for i, r in zip(ids.to_pylist(), reasons.to_pylist()) if i is not None]


def rejected_ends(typedef: TypeDef, rejected: Iterable[Rejected]) -> Dict[str, Dict[str, str]]:
    """For edge type ``typedef``: ``{"src": {id: reason}, "dst": {id: reason}}`` of the nodes of
    its endpoint types rejected so far in this load."""
    by_type: Dict[str, Dict[str, str]] = {}
    for r in rejected:
        if r.node_ids:
            by_type.setdefault(r.table_key, {}).update(dict(r.node_ids))
    return {"src": by_type.get(f"node:{typedef.from_type}", {}), "dst": by_type.get(f"node:{typedef.to_type}", {})}


def facts(rejected: Sequence[Rejected], final_dir: str) -> Dict[str, Dict[str, str]]:
    """The commit properties per table: the rows rejected from it and where they are."""
    counts: Dict[str, int] = {}
    for r in rejected:
        counts[r.table_key] = counts.get(r.table_key, 0) + r.rows
    return {k: {REJECTED_PROP: str(n), REJECTED_AT_PROP: final_dir} for k, n in counts.items()}


__all__ = ["table_dir", "Quarantine", "Rejected", "RejectSink", "TABLE_COLUMN", "CODE_COLUMN", "REASON_COLUMN",
           "REJECTED_PROP", "REJECTED_AT_PROP", "facts", "rejected_ends"]
