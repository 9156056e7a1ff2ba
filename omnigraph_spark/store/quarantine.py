"""Quarantine (option ``rejectedRowsPath``): commit the valid rows, keep the others.

Default: a load with one bad row is refused whole (:mod:`omnigraph_spark.spark.bad_rows`). With ``rejectedRowsPath``
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
* inside the commit lease, right before the graph commit, the driver writes
  ``_staging/<load id>/_PENDING.json`` (the used attempts' files, the graph, branch and base
  versions: :meth:`Quarantine.prepare`);
* after the graph commit, the driver deletes the files of attempts it did not use (failed,
  speculative) and moves the directory to ``load=<load id>/`` (one rename on a local file
  system, file by file on an object store), then writes ``load=<load id>/_SUCCESS`` and deletes
  ``_PENDING.json`` last. Read one table's rejected rows with
  ``spark.read.parquet(f"{result.rejected_path}/node_Person")``. A directory without
  ``_SUCCESS`` is incomplete;
* a load that fails (or is skipped as an applied txn) deletes its ``_staging/<load id>/``
  (kept if the graph has a pending recovery sidecar: the load may still roll forward).
  A crash leaves a ``_staging/<load id>/`` or a ``load=`` directory without ``_SUCCESS``, never
  a ``load=<id>/_SUCCESS`` of a load that did not commit; :func:`recover_quarantine` (also run by
  ``cleanup(rejected_rows_path=...)``) publishes those of committed loads and deletes the rest.

The commit's Lance transaction properties of each table record ``omnigraph-spark.rejected_rows``
(that table's count) and every table of the commit ``omnigraph-spark.rejected_rows_at`` (the
``load=`` directory): the proof :func:`recover_quarantine` looks for.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import OmnigraphError, StorageError
from ..schema.catalog import TypeDef
from . import failpoints
from . import lease as _lease
from . import manifest as _manifest
from . import tables as _tables
from .layout import MAIN

log = logging.getLogger(__name__)

TABLE_COLUMN = "_omnigraph_table"
CODE_COLUMN = "_omnigraph_code"
REASON_COLUMN = "_omnigraph_reason"
REJECTED_PROP = "omnigraph-spark.rejected_rows"
REJECTED_AT_PROP = "omnigraph-spark.rejected_rows_at"
PENDING = "_PENDING.json"
SUCCESS = "_SUCCESS"


@dataclass(frozen=True)
class Quarantine:
    """Where one load's rejected rows go. Made on the driver, pickled to executors."""

    path: str  # rejectedRowsPath, without a trailing slash
    load_id: str
    storage: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials: never in reprs

    @classmethod
    def new(cls, path: str, storage_options: Mapping[str, str] | None = None) -> Quarantine:
        return cls(path.rstrip("/"), uuid.uuid4().hex, tuple(sorted((storage_options or {}).items())))

    @property
    def staging_dir(self) -> str:
        return f"{self.path}/_staging/{self.load_id}"

    @property
    def final_dir(self) -> str:
        return f"{self.path}/load={self.load_id}"

    def _fs(self) -> tuple[pafs.FileSystem, str]:
        try:
            fs, base = pafs.FileSystem.from_uri(self.path if "://" in self.path else _absolute(self.path))
        except Exception as e:
            raise StorageError(
                f"rejectedRowsPath '{self.path}' is not a location pyarrow can write: {e}", option="rejectedRowsPath"
            ) from e
        return fs, base.rstrip("/")

    def _local(self, uri_path: str) -> str:
        """A path of ours (``self.path``-based) as the file system's path."""
        fs, base = self._fs()
        return base + uri_path[len(self.path) :]

    # -- executor -----------------------------------------------------------------------------

    def open_sink(self, typedef: TypeDef, name: str) -> RejectSink:
        return RejectSink(self, typedef, name)

    # -- driver -------------------------------------------------------------------------------

    def prepare(self, files: Sequence[str], graph_root: str, branch: str, bases: Mapping[str, int]) -> None:
        """Driver, before the graph commit: record in ``_staging/<load id>/_PENDING.json`` what
        :meth:`publish` keeps and how to tell whether this load committed (its graph, branch and
        the tables' base versions), so a crash between the commit and the end of the publish can
        be finished later (:func:`recover_quarantine`)."""
        fs, _ = self._fs()
        staging = self._local(self.staging_dir)
        fs.create_dir(staging, recursive=True)
        record = {
            "load_id": self.load_id,
            "graph": graph_root,
            "branch": branch,
            "final": self.final_dir,
            "files": [f[len(self.staging_dir) + 1 :] for f in files],
            "tables": dict(bases),
        }
        with fs.open_output_stream(f"{staging}/{PENDING}") as out:
            out.write(json.dumps(record).encode())

    def publish(self, files: Sequence[str] | None = None) -> str:
        """After the graph commit: keep exactly ``files`` (the used attempts'; default: those
        :meth:`prepare` recorded), move them to :attr:`final_dir`, mark it complete. Idempotent:
        it also finishes a publish a crash interrupted. Returns the directory."""
        failpoints.hit("before_quarantine_publish")
        fs, _ = self._fs()
        staging, final = self._local(self.staging_dir), self._local(self.final_dir)
        if files is None:
            rec = self._pending(fs)
            rels = set(rec["files"]) if rec is not None else None
        else:
            rels = {f[len(self.staging_dir) + 1 :] for f in files}
        present = [
            i.path
            for i in fs.get_file_info(pafs.FileSelector(staging, allow_not_found=True, recursive=True))
            if i.type == pafs.FileType.File
        ]
        if rels is not None:
            for p in present:
                if p[len(staging) + 1 :] not in rels and not p.endswith("/" + PENDING):
                    fs.delete_file(p)  # an attempt Spark did not use (failed, speculative)
            if not rels:
                self.discard()
                return self.final_dir
        if present:
            fs.create_dir(self._local(self.path), recursive=True)
            moved = False
            if fs.get_file_info(final).type == pafs.FileType.NotFound:
                try:
                    fs.move(staging, final)  # local: one rename, the directory appears whole
                    moved = True
                except (OSError, NotImplementedError):
                    pass
            if not moved:  # object store, or a move a crash interrupted: file by file
                for i in fs.get_file_info(pafs.FileSelector(staging, allow_not_found=True, recursive=True)):
                    if i.type == pafs.FileType.File:
                        fs.create_dir(final + i.path[len(staging) :].rsplit("/", 1)[0], recursive=True)
                        fs.move(i.path, final + i.path[len(staging) :])
                fs.delete_dir(staging)
        failpoints.hit("after_quarantine_move")
        with fs.open_output_stream(final + "/" + SUCCESS) as out:
            out.write(b"")
        if fs.get_file_info(f"{final}/{PENDING}").type == pafs.FileType.File:
            fs.delete_file(f"{final}/{PENDING}")  # last: until here a recovery can finish the publish
        self._drop_empty_staging_root(fs)
        return self.final_dir

    def _pending(self, fs: pafs.FileSystem) -> dict | None:
        for d in (self.staging_dir, self.final_dir):
            try:
                with fs.open_input_stream(f"{self._local(d)}/{PENDING}") as f:
                    return json.loads(f.read().decode())
            except (FileNotFoundError, OSError):
                continue
        return None

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
    return os.path.abspath(path)


@dataclass(frozen=True)
class Rejected:
    """What one task attempt quarantined (its commit-message part): a count, its file, and the
    ids of the nodes it rejected (the load's edges to them are rejected too)."""

    table_key: str
    rows: int
    file: str | None
    node_ids: tuple[tuple[str, str], ...] = ()  # (id, reason) of rejected nodes (nodes only)


class RejectSink:
    """Executor: the rejected rows of one task attempt, streamed into one Parquet file."""

    def __init__(self, quarantine: Quarantine, typedef: TypeDef, name: str) -> None:
        self.q = quarantine
        self.typedef = typedef
        self.file = f"{quarantine.staging_dir}/{table_dir(typedef)}/part-{name}-{uuid.uuid4().hex[:8]}.parquet"
        self.rows = 0
        self.node_ids: list[tuple[str, str]] = []
        self._writer: pq.ParquetWriter | None = None

    def reject(self, batch: pa.RecordBatch, rows: Sequence[int], errors: Sequence[OmnigraphError]) -> None:
        """Quarantine ``rows`` of the input ``batch``, each with its error."""
        if not rows:
            return
        taken = batch.take(pa.array(rows, pa.int64()))
        codes = pa.array([e.code for e in errors], pa.string())
        reasons = pa.array(
            [str(e.message if str(e.message).startswith("[") else f"[{e.code}] {e.message}") for e in errors],
            pa.string(),
        )
        out = pa.RecordBatch.from_arrays(
            list(taken.columns) + [pa.array([self.typedef.table_key] * len(rows), pa.string()), codes, reasons],
            names=list(taken.schema.names) + [TABLE_COLUMN, CODE_COLUMN, REASON_COLUMN],
        )
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
        return Rejected(
            self.typedef.table_key, self.rows, self.file if self._writer is not None else None, tuple(self.node_ids)
        )

    def abandon(self) -> None:
        """The task failed: delete this attempt's file (the driver would not publish it anyway)."""
        if self._writer is not None:
            try:
                self._writer.close()
                fs, _ = self.q._fs()
                fs.delete_file(self.q._local(self.file))
            except OSError:
                pass


def _node_ids(typedef: TypeDef, rows: pa.RecordBatch, reasons: pa.Array) -> list[tuple[str, str]]:
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


def rejected_ends(typedef: TypeDef, rejected: Iterable[Rejected]) -> dict[str, dict[str, str]]:
    """For edge type ``typedef``: ``{"src": {id: reason}, "dst": {id: reason}}`` of the nodes of
    its endpoint types rejected so far in this load."""
    by_type: dict[str, dict[str, str]] = {}
    for r in rejected:
        if r.node_ids:
            by_type.setdefault(r.table_key, {}).update(dict(r.node_ids))
    return {"src": by_type.get(f"node:{typedef.from_type}", {}), "dst": by_type.get(f"node:{typedef.to_type}", {})}


def facts(rejected: Sequence[Rejected], final_dir: str, keys: Iterable[str] = ()) -> dict[str, dict[str, str]]:
    """The commit properties per table: the rows rejected from it and where they are. Every
    table of ``keys`` (the load's) records where, also one with no rejected rows: any of the
    load's table versions proves the load committed (:func:`recover_quarantine`)."""
    counts: dict[str, int] = {}
    for r in rejected:
        counts[r.table_key] = counts.get(r.table_key, 0) + r.rows
    out = {k: {REJECTED_AT_PROP: final_dir} for k in keys}
    for k, n in counts.items():
        out[k] = {REJECTED_PROP: str(n), REJECTED_AT_PROP: final_dir}
    return out


def _committed(graph, rec: Mapping) -> bool | None:
    """Whether the load of a ``_PENDING.json`` record committed: one of its table versions is
    published on its branch (the manifest's history) and its Lance transaction names this
    quarantine. None when it cannot be told yet (the graph has a pending recovery sidecar)."""
    if graph.pending_sidecars():
        return None
    branch = rec["branch"]
    try:
        state = _manifest.read_state(
            _manifest.open_manifest(graph.root, branch, storage_options=graph.storage_options), branch
        )
    except Exception as e:
        log.warning(
            "quarantine %s: branch %s of %s unreadable (%s); left as it is", rec["final"], branch, graph.root, e
        )
        return None
    for key, base in rec["tables"].items():
        if key not in state.locations:
            continue
        versions = sorted(v for k, v in state.existing_versions if k == key and v > int(base))
        if not versions:
            continue
        ds = _tables.open_dataset(
            f"{graph.root}/{state.locations[key]}",
            branch=None if branch == MAIN else branch,
            storage_options=graph.storage_options,
        )
        if any(_tables.transaction_property(ds, v, REJECTED_AT_PROP) == rec["final"] for v in versions):
            return True
    return False


def recover_quarantine(
    graph,
    path: str,
    storage_options: Mapping[str, str] | None = None,
    *,
    stale_after_s: float = 86400.0,
    lease_timeout_s: float = 300.0,
) -> dict[str, int]:
    """Finish or delete what crashed loads of ``graph`` left under ``rejectedRowsPath`` ``path``:
    a ``load=<id>/`` without ``_SUCCESS`` (a publish cut short: its load committed) is finished;
    a ``_staging/<id>/`` is published if its load committed, deleted if it provably did not (or
    never reached its commit: no ``_PENDING.json``, and nothing in it newer than
    ``stale_after_s``: a load still staging has none), and left while the graph has a pending
    recovery sidecar. Loads of other graphs are left alone. Runs under the graph's commit lease
    (a load writes ``_PENDING.json`` inside it, in its validation step, so no load is between
    that and its commit meanwhile). Returns ``{"published": n, "deleted": n, "left": n}``. Run by
    ``cleanup(..., rejected_rows_path=...)``; call it after ``graph.recover()`` to settle at once."""
    with _lease.hold(graph.storage, graph.root, timeout_s=lease_timeout_s, owner="recover_quarantine"):
        return _recover_quarantine(graph, path, storage_options, stale_after_s)


def _recover_quarantine(graph, path: str, storage_options, stale_after_s: float) -> dict[str, int]:
    fs, base = Quarantine(path.rstrip("/"), "x", tuple(sorted((storage_options or {}).items())))._fs()
    out = {"published": 0, "deleted": 0, "left": 0}
    candidates = [
        ("final", i.base_name[5:])
        for i in fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        if i.type == pafs.FileType.Directory
        and i.base_name.startswith("load=")
        and fs.get_file_info(f"{i.path}/{SUCCESS}").type == pafs.FileType.NotFound
    ]
    candidates += [
        ("staging", i.base_name)
        for i in fs.get_file_info(pafs.FileSelector(f"{base}/_staging", allow_not_found=True))
        if i.type == pafs.FileType.Directory
    ]
    for where, load_id in candidates:
        q = Quarantine(path.rstrip("/"), load_id, tuple(sorted((storage_options or {}).items())))
        rec = q._pending(fs)
        if rec is not None and rec.get("graph") != graph.root:
            continue
        if where == "final":  # the move starts only after the commit
            q.publish()
            out["published"] += 1
            continue
        if rec is None:
            if fs.get_file_info(f"{q._local(q.final_dir)}").type != pafs.FileType.NotFound:
                continue  # a publish in flight or cut short: its load= side is handled above
            files = fs.get_file_info(pafs.FileSelector(q._local(q.staging_dir), allow_not_found=True, recursive=True))
            newest = max((i.mtime.timestamp() for i in files if i.mtime is not None), default=0.0)
            if newest > time.time() - stale_after_s:
                out["left"] += 1  # may be a load still staging
                continue
            q.discard()  # never reached its commit
            out["deleted"] += 1
            continue
        done = _committed(graph, rec)
        if done is None:
            out["left"] += 1
        elif done:
            q.publish()
            out["published"] += 1
        else:
            q.discard()
            out["deleted"] += 1
    if any(out.values()):
        log.info("quarantine under %s for graph %s: %s", path, graph.root, out)
    return out


__all__ = [
    "table_dir",
    "Quarantine",
    "Rejected",
    "RejectSink",
    "TABLE_COLUMN",
    "CODE_COLUMN",
    "REASON_COLUMN",
    "REJECTED_PROP",
    "REJECTED_AT_PROP",
    "facts",
    "recover_quarantine",
    "rejected_ends",
]
