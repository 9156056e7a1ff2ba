"""Load-wide checks in bounded memory, for a commit with no SparkSession to spread them.

The Python source's commit runs in a Spark Python worker on the driver with no session
(:mod:`.writer`), so the checks a session would run as Spark jobs (:mod:`.dist_checks`) run
here instead once a check reads ``distributedCheckRows`` rows or more; below that the
in-memory checks of :mod:`.validate` are faster. Two techniques, both exact (invariant I24):

* **Probes** (a check of few staged rows against a large committed table: a stream's
  micro-batch): the staged values are asked of the committed table's BTree index on ``id``
  (:class:`~..store.id_probe.CommittedIds`), which reads the index pages they fall in and
  scans only fragments no index segment answers for; cost follows the staged rows, not the
  table.
* **Buckets** (a large load): each side's rows are written to local scratch files by a hash
  of the compared value (:data:`BUCKET_ROWS` rows per bucket), then compared a bucket at a
  time. Equal values always share a bucket, so each bucket's answer is exact, and the answers
  add up: counts are summed, the first offenders in load order kept across buckets. Memory is
  one bucket plus one read batch, whatever the load's or the table's size.

Every error is worded by the function the in-memory check uses (``dangling_error``,
``raise_key_conflict``, ``unique_violation``, ``card_violation`` of :mod:`..ingest.checks`),
from the same counts and the same first rows, so both raise the same error.
"""

from __future__ import annotations

import heapq
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from lance.file import LanceFileReader

from ..ingest.checks import (
    KEY_CONFLICT_SAMPLE,
    card_violation,
    check_endpoints,
    dangling_error,
    raise_key_conflict,
    unique_violation,
)
from ..ingest.fingerprints import fingerprints
from ..ingest.integrity import as_strings
from ..schema.catalog import TypeDef
from ..store import tables as _tables
from ..store.id_probe import SCAN_BATCH_ROWS, CommittedIds
from ..store.writes import StagedTable

log = logging.getLogger(__name__)

#: rows one bucket holds (about): what a bucketed check keeps in memory at once
BUCKET_ROWS = 1 << 19
#: at most this many buckets (open scratch files) per spilled side: two sides stay well under
#: a default limit of 1,024 open files; past 2^27 rows a side's buckets grow instead
MAX_BUCKETS = 256
#: a check of at most this many staged rows probes the committed table's index instead of
#: bucketing both sides
PROBE_ROWS = 1 << 20
POS = "pos"
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _bucket_of(values: pa.Array, n: int) -> np.ndarray:
    """The bucket (0 <= b < n) of each of ``values`` (no nulls): a mix of the value's 64-bit
    fingerprint, so equal values share a bucket."""
    if n == 1:
        return np.zeros(len(values), np.int64)
    t = values.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)):
        values = pc.cast(values, pa.string())
    h = fingerprints(values) * _MIX
    return ((h >> np.uint64(32)) % np.uint64(n)).astype(np.int64)


def buckets_for(rows: int) -> int:
    return int(min(MAX_BUCKETS, max(1, -(-rows // BUCKET_ROWS))))


class Buckets:
    """Rows written to ``n`` scratch files by bucket, then read back one bucket at a time."""

    def __init__(self, n: int, schema: pa.Schema, scratch: str, name: str) -> None:
        self.n, self.schema = n, schema
        self.paths = [os.path.join(scratch, f"{name}-{i}.arrow") for i in range(n)]
        self.writers: list[ipc.RecordBatchFileWriter | None] = [None] * n

    def add(self, batch: pa.RecordBatch, key: str) -> None:
        """Spill ``batch`` (schema :attr:`schema`) by the bucket of its column ``key`` (no nulls)."""
        if not batch.num_rows:
            return
        b = _bucket_of(batch.column(key), self.n)
        if self.n == 1:
            self._write(0, batch)
            return
        order = np.argsort(b, kind="stable")
        sorted_batch = batch.take(pa.array(order))
        bounds = np.searchsorted(b[order], np.arange(self.n + 1))
        for i in range(self.n):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if hi > lo:
                self._write(i, sorted_batch.slice(lo, hi - lo))

    def _write(self, i: int, batch: pa.RecordBatch) -> None:
        w = self.writers[i]
        if w is None:
            w = self.writers[i] = ipc.new_file(self.paths[i], self.schema)
        w.write_batch(batch)

    def close(self) -> None:
        for w in self.writers:
            if w is not None:
                w.close()

    def read(self, i: int) -> pa.Table:
        if self.writers[i] is None:
            return self.schema.empty_table()
        pa.default_memory_pool().release_unused()  # the previous bucket's memory, back to the system
        with pa.OSFile(self.paths[i], "rb") as src:  # read into memory of its own, not mapped
            table = ipc.open_file(src).read_all()
        os.remove(self.paths[i])
        return table


# -- readers: staged files and committed tables, a batch at a time, with positions ----------


def staged_batches(s: StagedTable, columns: Sequence[str], storage_options) -> Iterator[pa.RecordBatch]:
    """The staged rows' ``columns`` plus :data:`POS` (their load-wide row number, in the order
    the in-memory checks concatenate the staged files)."""
    base = 0
    for uri in _tables.data_file_uris(s.stage_uri, s.fragments):
        reader = LanceFileReader(uri, storage_options=storage_options, columns=list(columns))
        for b in reader.read_all(batch_size=SCAN_BATCH_ROWS).to_batches():
            yield _with_pos(b, columns, base)
            base += b.num_rows


def file_batches(uris: Sequence[str], column: str, storage_options) -> Iterator[pa.Array]:
    for uri in uris:
        reader = LanceFileReader(uri, storage_options=storage_options, columns=[column])
        for b in reader.read_all(batch_size=SCAN_BATCH_ROWS).to_batches():
            yield b.column(0)


def committed_batches(ds: lance.LanceDataset, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The live rows' ``columns`` of a committed table version, with :data:`POS` (row number in
    the table's fragment order, as a scan of the version returns them)."""
    base = 0
    for b in ds.to_batches(columns=list(columns), batch_size=SCAN_BATCH_ROWS):
        yield _with_pos(b, columns, base)
        base += b.num_rows


def _with_pos(b: pa.RecordBatch, columns: Sequence[str], base: int) -> pa.RecordBatch:
    arrays = [b.column(c) for c in columns] + [pa.array(np.arange(base, base + b.num_rows, dtype=np.int64))]
    return pa.RecordBatch.from_arrays(arrays, names=[*columns, POS])


# -- endpoint existence -----------------------------------------------------------------------


@dataclass(frozen=True)
class NodeIds:
    """Where a node type's ids are for an endpoint check: the committed table version (None
    when the load overwrites the type) plus the data files the load staged for it."""

    committed: lance.LanceDataset | None
    files: tuple[str, ...] = ()

    def rows(self, storage_options=None) -> int:
        return (0 if self.committed is None else self.committed.count_rows()) + sum(
            LanceFileReader(u, storage_options=storage_options).num_rows() for u in self.files
        )


def endpoints(
    td: TypeDef,
    s: StagedTable,
    from_ids: NodeIds,
    to_ids: NodeIds,
    storage_options,
    limit: int = 5,
    same: bool = False,
    probe: bool | None = None,
) -> None:
    """DANGLING_EDGE for staged edges whose ``src``/``dst`` is not an id of its node type, as
    :func:`~..ingest.checks.check_endpoints` words it. ``same``: both ends have the same node
    type (one set of ids). ``probe``: ask the node tables' indexes (default: for at most
    :data:`PROBE_ROWS` edges), else compare bucket by bucket."""
    if probe if probe is not None else s.rows <= PROBE_ROWS:
        _endpoints_probed(td, s, from_ids, to_ids, storage_options, same)
    else:
        _endpoints_bucketed(td, s, from_ids, to_ids, storage_options, limit, same)


def _present(values: pa.Array, ids: NodeIds, storage_options) -> pa.Array:
    """The distinct ``values`` that are ids of the node type (committed or staged)."""
    probe = pc.unique(as_strings(values).drop_null())
    found: list[pa.Array] = []
    left = probe
    if ids.committed is not None and len(left):
        hit = CommittedIds(ids.committed, storage_options=storage_options).contains(left)
        found.append(pc.filter(left, hit))
        left = pc.filter(left, pc.invert(hit))
    if ids.files and len(left):
        for col in file_batches(ids.files, "id", storage_options):
            col = as_strings(col)
            found.append(pc.filter(col, pc.fill_null(pc.is_in(col, value_set=left), False)))
    return pa.concat_arrays(found) if found else pa.array([], pa.string())


def _endpoints_probed(td, s, from_ids: NodeIds, to_ids: NodeIds, storage_options, same: bool) -> None:
    ends = _tables.read_staged_columns(s.stage_uri, s.fragments, ["src", "dst"], storage_options)
    if ends is None or not ends.num_rows:
        return
    src, dst = as_strings(ends.column("src")), as_strings(ends.column("dst"))
    if same:
        present = _present(pa.concat_arrays([src, dst]), from_ids, storage_options)
        check_endpoints(td, src, dst, present, present)
    else:
        check_endpoints(td, src, dst, _present(src, from_ids, storage_options), _present(dst, to_ids, storage_options))


_ENDS = pa.schema([pa.field("v", pa.string()), pa.field(POS, pa.int64()), pa.field("side", pa.int8())])
_IDS = pa.schema([pa.field("v", pa.string()), pa.field("side", pa.int8())])


def _spill_ids(out: Buckets, ids: NodeIds, side: int, storage_options) -> None:
    cols: list[Iterator[pa.Array]] = []
    if ids.committed is not None:
        cols.append(b.column(0) for b in ids.committed.to_batches(columns=["id"], batch_size=SCAN_BATCH_ROWS))
    if ids.files:
        cols.append(file_batches(ids.files, "id", storage_options))
    for it in cols:
        for col in it:
            col = as_strings(col).drop_null()
            out.add(pa.RecordBatch.from_arrays([col, pa.array(np.full(len(col), side, np.int8))], schema=_IDS), "v")


def _endpoints_bucketed(td, s, from_ids: NodeIds, to_ids: NodeIds, storage_options, limit: int, same: bool) -> None:
    n = buckets_for(2 * s.rows + from_ids.rows(storage_options) + (0 if same else to_ids.rows(storage_options)))
    n_src = n_dst = 0
    first: dict[int, list] = {}  # pos -> [src, dst, bad src, bad dst] of the earliest dangling rows
    with tempfile.TemporaryDirectory(prefix="omnigraph-ends-") as scratch:
        ends, ids = Buckets(n, _ENDS, scratch, "ends"), Buckets(n, _IDS, scratch, "ids")
        try:
            for b in staged_batches(s, ["src", "dst"], storage_options):
                pos = b.column(POS)
                for side, col in ((0, b.column("src")), (1, b.column("dst"))):
                    col = as_strings(col)
                    side_arr = pa.array(np.full(len(col), side, np.int8))
                    part = pa.RecordBatch.from_arrays([col, pos, side_arr], schema=_ENDS)
                    valid = pc.is_valid(col)
                    # a null end is dangling (is_in gives null): kept in bucket 0 under its own value
                    ends.add(part.filter(valid), "v")
                    nulls = part.filter(pc.invert(valid))
                    if nulls.num_rows:
                        ends._write(0, nulls)
            _spill_ids(ids, from_ids, 0 if not same else 2, storage_options)
            if not same:
                _spill_ids(ids, to_ids, 1, storage_options)
        finally:
            ends.close()
            ids.close()
        for i in range(n):
            e, known = ends.read(i), ids.read(i)
            if not e.num_rows:
                continue
            if same:
                bad = pc.invert(pc.fill_null(pc.is_in(e.column("v"), value_set=known.column("v")), False))
            else:
                bad = None
                for side in (0, 1):
                    mine = pc.equal(e.column("side"), side)
                    vals = known.filter(pc.equal(known.column("side"), side)).column("v")
                    missing = pc.and_(mine, pc.invert(pc.fill_null(pc.is_in(e.column("v"), value_set=vals), False)))
                    bad = missing if bad is None else pc.or_(bad, missing)
            dang = e.filter(bad)
            sides = dang.column("side").to_numpy()
            n_src += int((sides == 0).sum())
            n_dst += int((sides == 1).sum())
            for v, p, sd in zip(
                dang.column("v").to_pylist(), dang.column(POS).to_pylist(), dang.column("side").to_pylist()
            ):
                row = first.setdefault(p, [None, None, False, False])
                row[sd] = v
                row[2 + sd] = True
            if len(first) > limit:  # keep only the earliest rows
                for p in sorted(first)[limit:]:
                    del first[p]
    if not n_src and not n_dst:
        return
    offenders = [(p, r[0], r[1], r[2], r[3]) for p, r in sorted(first.items())[:limit]]
    raise dangling_error(td, offenders, n_src, n_dst)


# -- strict append: no staged id is committed (I17) -------------------------------------------


def fresh(
    td: TypeDef,
    s: StagedTable,
    committed: lance.LanceDataset,
    branch: str,
    storage_options,
    probe: bool | None = None,
) -> str:
    """KEY_CONFLICT for an append's ids already committed, as
    :func:`~..ingest.checks.check_fresh_ids` words it (the conflicting ids in the order the
    smaller side's scan finds them); returns how it checked. ``probe``: ask the table's index
    (default: for at most :data:`PROBE_ROWS` staged rows), else compare bucket by bucket."""
    committed_rows = committed.count_rows()
    if not s.rows or not committed_rows:
        return "none"
    why = f"already committed on branch '{branch}'"
    if probe if probe is not None else s.rows <= PROBE_ROWS:
        staged = _tables.read_staged_columns(s.stage_uri, s.fragments, ["id"], storage_options)
        ids = as_strings(staged.column("id"))
        index = CommittedIds(committed, storage_options=storage_options)
        hit = index.contains(ids)
        log.info("%s strict append: %d staged ids probed (%s, %d rows read)", td.table_key, len(ids), *index.last)
        if not hit.true_count:
            return "probe"
        found = pc.unique(pc.filter(ids, hit))
        if len(found) > KEY_CONFLICT_SAMPLE and s.rows <= committed_rows:
            # the in-memory check names the conflicts in the committed table's order
            found = pc.unique(
                pa.concat_arrays(
                    [
                        pc.filter(c, pc.fill_null(pc.is_in(c, value_set=found), False))
                        for c in (as_strings(b.column(0)) for b in committed.to_batches(columns=["id"]))
                    ]
                )
            )
        raise_key_conflict(td, found, why)
    order_by_committed = s.rows <= committed_rows
    conflicts = 0
    heap: list[tuple[int, str]] = []  # the KEY_CONFLICT_SAMPLE earliest conflicts (negated positions)
    n = buckets_for(s.rows + committed_rows)
    schema = pa.schema([pa.field("v", pa.string()), pa.field(POS, pa.int64())])
    with tempfile.TemporaryDirectory(prefix="omnigraph-fresh-") as scratch:
        new, old = Buckets(n, schema, scratch, "new"), Buckets(n, schema, scratch, "old")
        try:
            for b in staged_batches(s, ["id"], storage_options):
                new.add(_vp(b), "v")
            for b in committed_batches(committed, ["id"]):
                old.add(_vp(b), "v")
        finally:
            new.close()
            old.close()
        for i in range(n):
            a, c = new.read(i), old.read(i)
            if not a.num_rows or not c.num_rows:
                continue
            probed, other = (c, a) if order_by_committed else (a, c)
            hits = probed.filter(pc.fill_null(pc.is_in(probed.column("v"), value_set=other.column("v")), False))
            if not hits.num_rows:
                continue
            firsts = hits.group_by("v", use_threads=False).aggregate([(POS, "min")])
            conflicts += firsts.num_rows
            for v, p in zip(firsts.column("v").to_pylist(), firsts.column(f"{POS}_min").to_pylist()):
                if len(heap) < KEY_CONFLICT_SAMPLE:
                    heapq.heappush(heap, (-p, v))
                elif -heap[0][0] > p:
                    heapq.heapreplace(heap, (-p, v))
    if conflicts:
        ordered = [v for _, v in sorted(heap, key=lambda t: -t[0])]
        raise_key_conflict(td, pa.array(ordered, pa.string()), why, total=conflicts)
    return "buckets"


def _vp(b: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([as_strings(b.column(0)), b.column(POS)], names=["v", POS])


# -- uniqueness within the load ---------------------------------------------------------------


def unique(td: TypeDef, s: StagedTable, cols: Sequence[str], what: str, storage_options, conflict: bool) -> None:
    """One uniqueness rule over the staged rows, bucketed by the value tuple: the error of
    :func:`~..ingest.checks.check_unique` (the repeated tuple whose first row comes first in the
    load, its first two rows, how many tuples repeat), or with ``conflict`` the KEY_CONFLICT of
    repeated ids in order of first appearance (I17)."""
    cols = list(cols)
    n = buckets_for(s.rows)
    key = "__omnigraph_bucket_key"
    dups = 0
    best: tuple[int, list, list[int]] | None = None  # (first row, values, first two rows)
    heap: list[tuple[int, object]] = []
    with tempfile.TemporaryDirectory(prefix="omnigraph-unique-") as scratch:
        spilled: Buckets | None = None
        try:
            for b in staged_batches(s, cols, storage_options):
                keep = None
                for c in cols:
                    v = pc.is_valid(b.column(c))
                    keep = v if keep is None else pc.and_(keep, v)
                if keep is not None:
                    b = b.filter(keep)
                if not b.num_rows:
                    continue
                k = _tuple_key(b, cols)
                b = b.append_column(key, k)
                if spilled is None:
                    spilled = Buckets(n, b.schema, scratch, "rows")
                spilled.add(b, key)
        finally:
            if spilled is not None:
                spilled.close()
        if spilled is None:
            return
        for i in range(n):
            t = spilled.read(i)
            if t.num_rows < 2:
                continue
            g = t.group_by(cols, use_threads=False).aggregate([(POS, "count"), (POS, "min")])
            g = g.filter(pc.greater(g.column(f"{POS}_count"), 1))
            if not g.num_rows:
                continue
            dups += g.num_rows
            if conflict:
                for v, p in zip(g.column(cols[0]).to_pylist(), g.column(f"{POS}_min").to_pylist()):
                    if len(heap) < KEY_CONFLICT_SAMPLE:
                        heapq.heappush(heap, (-p, v))
                    elif -heap[0][0] > p:
                        heapq.heapreplace(heap, (-p, v))
                continue
            j = pc.index(g.column(f"{POS}_min"), pc.min(g.column(f"{POS}_min"))).as_py()
            p1 = g.column(f"{POS}_min")[j].as_py()
            if best is None or p1 < best[0]:
                values = [g.column(c)[j].as_py() for c in cols]
                match = None
                for c in cols:
                    eq = pc.equal(t.column(c), g.column(c)[j])
                    match = eq if match is None else pc.and_(match, eq)
                rows = sorted(t.filter(match).column(POS).to_pylist())[:2]
                best = (p1, values, rows)
    if conflict and heap:
        ordered = [str(v) for _, v in sorted(heap, key=lambda t: -t[0])]
        raise_key_conflict(td, pa.array(ordered, pa.string()), "given more than once in this load", total=dups)
    if best is not None:
        raise unique_violation(td, cols, best[1], best[2], dups, what=what)


def _tuple_key(b: pa.RecordBatch, cols: Sequence[str]) -> pa.Array:
    """One value per row that is equal for equal tuples over ``cols`` (the bucket key)."""
    if len(cols) == 1:
        c = b.column(cols[0])
        t = c.type
        return c if pa.types.is_string(t) or pa.types.is_integer(t) else pc.cast(c, pa.string())
    parts = [pc.cast(b.column(c), pa.string()) for c in cols]
    return pc.binary_join_element_wise(*parts, "\x1f")


# -- @card: edges per source ------------------------------------------------------------------


def staged_column(s: StagedTable, column: str, storage_options) -> Callable[[], Iterator[pa.Array]]:
    """The staged rows' ``column``, a batch at a time (a source for :func:`card_counts`)."""
    return lambda: (b.column(0) for b in staged_batches(s, [column], storage_options))


def committed_column(ds: lance.LanceDataset, column: str) -> Callable[[], Iterator[pa.Array]]:
    """A committed table version's ``column``, a batch at a time (a source for :func:`card_counts`)."""
    return lambda: (b.column(0) for b in ds.to_batches(columns=[column], batch_size=SCAN_BATCH_ROWS))


def card_counts(
    td: TypeDef,
    sources: Sequence[Callable[[], Iterator[pa.Array]]],
    rows: int,
    limit: int = 5,
    check: bool = True,
) -> int:
    """Edges per source over ``sources`` (each a function giving a ``src`` column a batch at a
    time: the staged edges, and for an append the committed ones; ``rows`` in all), bucketed by
    source: the most any source has (0 for none). With ``check``, @card's bounds applied as
    :func:`~..ingest.checks.check_cardinality` applies them (sources with no edge skipped,
    the first offenders by source)."""
    card = td.cardinality
    n = buckets_for(rows)
    schema = pa.schema([pa.field("src", pa.string())])
    most = 0
    violations = 0
    first: list[tuple[str, int]] = []
    with tempfile.TemporaryDirectory(prefix="omnigraph-card-") as scratch:
        out = Buckets(n, schema, scratch, "src")
        try:
            for source in sources:
                for col in source():
                    col = as_strings(col).drop_null()
                    out.add(pa.RecordBatch.from_arrays([col], schema=schema), "src")
        finally:
            out.close()
        for i in range(n):
            t = out.read(i)
            if not t.num_rows:
                continue
            vc = pc.value_counts(t.column("src"))
            counts = vc.field("counts")
            most = max(most, pc.max(counts).as_py() or 0)
            if not check:
                continue
            bad = pc.less(counts, card.min)
            if card.max is not None:
                bad = pc.or_(bad, pc.greater(counts, card.max))
            k = pc.sum(pc.cast(bad, pa.int64())).as_py() or 0
            if k:
                violations += k
                srcs, ns = pc.filter(vc.field("values"), bad), pc.filter(counts, bad)
                first = sorted([*first, *zip(srcs.to_pylist(), ns.to_pylist())])[:limit]
    if violations:
        raise card_violation(td, first, violations)
    return most


__all__ = [
    "BUCKET_ROWS",
    "Buckets",
    "NodeIds",
    "PROBE_ROWS",
    "card_counts",
    "committed_column",
    "staged_column",
    "endpoints",
    "fresh",
    "unique",
]
