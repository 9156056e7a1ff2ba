"""The endpoint proof of a Python staging task of an edge table (invariant I15).

A JVM staging task probes every ``src``/``dst`` it stages against an exact index of the node
ids (jvm-shim ``NodeIdIndex``); a Python task does the same here, so the driver skips its own
endpoint check for either path (``spark/validate.py::_ends_proven``). The index of one
:class:`~.writes.IdSource` (the committed node table at its pinned version, plus the node files
the load staged) is the ids' 64-bit fingerprints (:mod:`~omnigraph_spark.ingest.fingerprints`,
the hash both runtimes compute) in ascending order with the ids in the same order. A probe
finds a value's fingerprint in the bucket of its top bits and then compares the bytes of the
id found; a
value whose fingerprint is absent, or whose bytes differ from the id found (a collision), is
counted unproven, never proven, so the driver then checks exactly and words any error.

A Python worker runs many tasks of a load in turn (Spark reuses its Python workers), so the
index is built once per worker and kept by :func:`_index` (``functools.lru_cache``) under a key
that names the rows it holds: the id source, the committed version's fragments (their data
files, UUID-named, and deletion files, never rewritten) and the staged files. A version number
alone never names rows (a re-created Lance branch can repeat one).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lance.file import LanceFileReader

from ..ingest.fingerprints import fingerprints
from ..ingest.integrity import as_strings
from .tables import open_dataset
from .writes import EndsProof, IdSource

log = logging.getLogger(__name__)

#: the most ids a Python task indexes for one end of an edge type. An id costs 8 bytes of
#: fingerprint, 4 of offset, at most 4 of bucket directory and its own bytes (about twice its
#: bytes while the index is sorted): about 0.6 GB for 16M ids of 20 bytes, twice that
#: at most for an edge type between two node types, within the memory a Python worker beside a
#: JVM executor is given. A node type with more ids: the task proves nothing and the driver
#: checks endpoints (``spark/jvm_write.py::endpoint_sources`` decides before staging)
MAX_INDEXED_IDS = 16_000_000
#: the most bytes of ids one index holds (one Arrow string array has 32-bit offsets)
MAX_INDEXED_BYTES = 1 << 30
#: ids read from Lance at a time while building
READ_BATCH_ROWS = 65_536
#: indexes a Python worker keeps: the two ends of one edge type
KEPT_INDEXES = 2


@dataclass(frozen=True, eq=False)
class IdIndex:
    """The ids of one :class:`~.writes.IdSource`: ``hashes`` ascending (uint64), ``ids`` (a
    string array) in the same order, and ``starts``: where the hashes of each value of their
    top ``bits`` bits start (one more entry: the end), so a probe reads a bucket of about one
    hash instead of binary-searching all of them (about 4 bytes per id)."""

    hashes: np.ndarray
    ids: pa.Array
    starts: np.ndarray
    bits: int

    @staticmethod
    def of(hashes: np.ndarray, ids: pa.Array) -> IdIndex:
        """The index of ``hashes`` (ascending) and ``ids`` in their order."""
        bits = max(1, int(np.log2(max(len(hashes), 2))))
        shift = np.uint64(64 - bits)
        starts = np.searchsorted(hashes, np.arange(1 << bits, dtype=np.uint64) << shift)
        return IdIndex(
            hashes, ids, np.append(starts, len(hashes)).astype(np.int64 if len(hashes) >> 31 else np.int32), bits
        )

    def __len__(self) -> int:
        return len(self.hashes)

    def _find(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position of the first entry equal to each of ``h``, whether there is one)."""
        bucket = (h >> np.uint64(64 - self.bits)).astype(np.intp)
        pos = self.starts[bucket].astype(np.int64)
        end = self.starts[bucket + 1]
        found = np.zeros(len(h), dtype=bool)
        active = np.flatnonzero(end > pos)
        while active.size:  # a bucket holds about one hash: a step or two
            eq = self.hashes[pos[active]] == h[active]
            found[active[eq]] = True
            rest = active[~eq]
            pos[rest] += 1
            active = rest[pos[rest] < end[rest]]
        return pos, found

    def absent(self, values: pa.Array, hashes: np.ndarray | None = None) -> np.ndarray:
        """A boolean mask of ``values``: True where the value is not proven an id (not found,
        null, or only a fingerprint collision). ``hashes``: the fingerprints of ``values``'
        non-null values in their order, where the caller has them already."""
        values = as_strings(values)
        out = np.ones(len(values), dtype=bool)
        if not len(values) or not len(self.hashes):
            return out
        where = np.arange(len(values))
        if values.null_count:
            valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
            where = np.flatnonzero(valid)
            values = values.filter(pa.array(valid))
        pos, found = self._find(fingerprints(values) if hashes is None else hashes)
        if found.all():
            same = pc.equal(self.ids.take(pa.array(pos)), values)
            out[where[same.to_numpy(zero_copy_only=False)]] = False
        elif found.any():
            hit = np.flatnonzero(found)
            same = pc.equal(self.ids.take(pa.array(pos[hit])), values.take(pa.array(hit)))
            out[where[hit[same.to_numpy(zero_copy_only=False)]]] = False
        return out


def _id_batches(source: IdSource, storage_options: Mapping[str, str] | None) -> Iterator[pa.Array]:
    """The ids of ``source`` a batch at a time: the committed version's live rows (a scan of
    the pinned version honours its deletion files), then each staged file's."""
    so = dict(storage_options) if storage_options else None
    if source.table is not None:
        path, branch, version = source.table
        ds = open_dataset(path, branch=branch, version=version, storage_options=so)
        for b in ds.to_batches(columns=["id"], batch_size=READ_BATCH_ROWS):
            yield b.column(0)
    for uri in source.files:
        reader = LanceFileReader(uri, storage_options=so, columns=["id"])
        for b in reader.read_all(batch_size=READ_BATCH_ROWS).to_batches():
            yield b.column(0)


def build(
    source: IdSource,
    storage_options: Mapping[str, str] | None = None,
    max_ids: int = MAX_INDEXED_IDS,
    max_bytes: int = MAX_INDEXED_BYTES,
) -> IdIndex | None:
    """The index of ``source``'s ids, read a batch at a time; None when they pass ``max_ids``
    or ``max_bytes`` (the task then proves nothing)."""
    chunks: list[pa.Array] = []
    hashes: list[np.ndarray] = []
    n = size = 0
    for col in _id_batches(source, storage_options):
        col = as_strings(col)
        if col.null_count:
            col = col.drop_null()
        n += len(col)
        size += col.nbytes
        if n > max_ids or size > max_bytes:
            log.info("endpoint index of %s: more than %d ids or %d bytes, not built", source, max_ids, max_bytes)
            return None
        chunks.append(col)
        hashes.append(fingerprints(col))
    if not chunks:
        return IdIndex.of(np.empty(0, np.uint64), pa.array([], pa.string()))
    h = np.concatenate(hashes)
    del hashes
    order = np.argsort(h, kind="stable")
    ids = pa.chunked_array(chunks, pa.string()).take(pa.array(order))
    del chunks
    return IdIndex.of(h[order], ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids)


def rows_key(source: IdSource, storage_options: Mapping[str, str] | None = None) -> tuple:
    """What names the rows of ``source``: its committed version's fragments (data files and
    deletion file) and its staged files. Reads the version's manifest, no rows."""
    if source.table is None:
        return ((), source.files)
    path, branch, version = source.table
    ds = open_dataset(path, branch=branch, version=version, storage_options=dict(storage_options or {}) or None)
    frags = []
    for f in ds.get_fragments():
        m = f.metadata
        d = m.deletion_file
        frags.append(
            (
                tuple(df.path for df in m.files),
                None if d is None else (d.id, d.read_version, d.num_deleted_rows, str(d.file_type)),
            )
        )
    return (tuple(frags), source.files)


@functools.lru_cache(maxsize=KEPT_INDEXES)
def _index(source: IdSource, rows: tuple, options: tuple[tuple[str, str], ...]) -> IdIndex | None:
    """:func:`build`, kept per Python worker under ``rows`` (:func:`rows_key`): a pure function
    of its key, as the rows it names never change."""
    return build(source, dict(options))


def index(source: IdSource, storage_options: Mapping[str, str] | None = None) -> IdIndex | None:
    """The index of ``source`` this worker keeps for exactly its rows, built if it has none."""
    options = tuple(sorted((storage_options or {}).items()))
    return _index(source, rows_key(source, storage_options), options)


class EndsCheck:
    """One task's endpoint proof of an edge table: every staged ``src``/``dst`` probed against
    the ids of ``sources`` (from, to), and the most edges one source has in the task.

    ``dangling`` counts the rows with an end not proven an id. The bound counts edges per
    fingerprint of ``src``: two sources that share one count together, so it never falls below
    the true most."""

    def __init__(self, sources: tuple[IdSource, IdSource], storage_options: Mapping[str, str] | None = None) -> None:
        self.sources = sources
        self.storage_options = storage_options
        self.dangling = 0
        self.failed = False
        self._indexes: tuple[IdIndex | None, IdIndex | None] | None = None
        self._src_hashes: list[np.ndarray] = []

    def _ends(self) -> tuple[IdIndex | None, IdIndex | None]:
        if self._indexes is None:
            try:
                src = index(self.sources[0], self.storage_options)
                dst = src if self.sources[1] == self.sources[0] else index(self.sources[1], self.storage_options)
            except Exception as e:  # unreadable ids: the proof is an optimisation, the driver checks
                log.warning("cannot index the endpoint node ids (%s); the driver checks endpoints", e)
                src = dst = None
            self._indexes = (src, dst)
            self.failed = src is None or dst is None
        return self._indexes

    def probe(self, batch: pa.RecordBatch) -> None:
        """Probe the ends of one converted batch of staged edges."""
        if self.failed or not batch.num_rows:
            return
        src_ids, dst_ids = self._ends()
        if src_ids is None or dst_ids is None:
            return
        src, dst = as_strings(batch.column("src")), batch.column("dst")
        src_hashes = fingerprints(src)  # the bound counts by them too
        self.dangling += int(np.count_nonzero(src_ids.absent(src, src_hashes) | dst_ids.absent(dst)))
        self._src_hashes.append(src_hashes)

    def src_bound(self) -> int:
        """The most edges with one ``src`` fingerprint in the task (0 for none)."""
        if not self._src_hashes:
            return 0
        h = np.concatenate(self._src_hashes)
        h.sort()
        starts = np.flatnonzero(np.concatenate(([True], h[1:] != h[:-1])))
        return int(np.diff(np.append(starts, len(h))).max())

    def proof(self) -> EndsProof | None:
        """The task's :class:`~.writes.EndsProof`; None when it could not index the ids."""
        if self.failed:
            return None
        return EndsProof(self.sources[0], self.sources[1], self.dangling, self.src_bound())


__all__ = ["MAX_INDEXED_IDS", "MAX_INDEXED_BYTES", "EndsCheck", "IdIndex", "build", "index", "rows_key"]
