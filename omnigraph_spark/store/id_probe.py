"""Which of some values are ids of a committed table: exact, in memory bounded by the values.

The load-wide checks ask it of a committed table at its pinned version: is this staged id
already committed (I17), is this edge end a node (endpoint existence)? A question about a few
thousand values must not cost a read of the table's whole ``id`` column, or a stream's commit
grows with the table (invariant I24).

Every table a load commits has a BTree index on ``id`` (I23). A BTree segment is two Lance
files under ``_indices/<uuid>/``: ``page_data.lance`` (every indexed value, sorted, with its
row id, in pages of ``batch_size`` rows) and ``page_lookup.lance`` (each page's min and max).
:class:`CommittedIds` keeps the lookups (one row per page: about 0.03% of the rows), finds the
page a probe value would be in, reads only those pages and compares. Lance's own filter
``id IN (...)`` answers the same question through the same index at about 0.3 ms per value
(measured with Lance 7.0 on this machine), too slow for a micro-batch of thousands of ids;
reading the pages directly costs a page read per page touched.

Exactness. A segment answers for its fragments only when it holds exactly their rows: every
fragment it covers is live, none has a deletion file, and the segment holds as many entries as
those fragments have rows (an index keeps entries of rows deleted before a compaction; then the
counts differ). Every other fragment (one no trusted segment covers: the index lags after a
load whose index build failed, a fragment with deleted rows, a segment in an unknown layout) is
scanned, reading its ``id`` column a batch at a time. When the pages to touch (counted twice: a
page read costs about two rows of a scan per row) plus that tail come to more rows than the
table has, the whole column is scanned instead, a batch at a time.
Either way the answer is Lance's rows, and memory holds the probe values, the lookups and one
page or batch.

Finding rows. A commit that deletes rows (a merge's replaced rows, a delete and its cascade:
invariant I27) needs where they are, not only whether: :meth:`CommittedIds.locate` reads the
same pages for the entries' row ids (stable row ids, or addresses), takes those rows from the
table version, which drops deleted ones, and keeps those whose value matches. There a segment
over fragments with deletion files is still used when it holds one entry per physical row of
them (built before the deletes), since taken rows are checked against the table.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lance.file import LanceFileReader

log = logging.getLogger(__name__)

#: rows per batch of a scan of the ``id`` column
SCAN_BATCH_ROWS = 65_536
#: a row read from a page (one read per run of pages) costs about this many rows of a scan
PAGE_READ_COST = 2
_BTREE_URL = "BTreeIndexDetails"
#: a BTree page's column of row ids (row addresses unless the table has stable row ids)
ROW_IDS = "ids"
#: Lance's row address column: fragment id << 32 | offset in the fragment
ROW_ADDR = "_rowaddr"
#: Lance's row id column: the stable row id, or the address in a table without stable row ids
ROW_ID = "_rowid"
#: candidate addresses taken from the table per read
TAKE_ROWS = 8_192


@dataclass(frozen=True)
class _Segment:
    """One trusted BTree segment: its page bounds (in page order, as numpy strings: code point
    order is UTF-8 byte order, the index's order) and where its pages are."""

    data_uri: str
    page_rows: int
    rows: int
    mins: np.ndarray
    maxs: np.ndarray

    def pages_of(self, values: np.ndarray) -> np.ndarray:
        """The distinct pages ``values`` would be in (values outside every page's range: none)."""
        i = np.searchsorted(self.maxs, values, side="left")
        inside = i < len(self.maxs)
        i, v = i[inside], values[inside]
        return np.unique(i[self.mins[i] <= v])


class CommittedIds:
    """Membership among the live values of ``column`` of one committed table version (a
    ``LanceDataset`` opened at it). Driver only; holds the index lookups, never the column."""

    def __init__(self, ds: lance.LanceDataset, column: str = "id", storage_options: dict[str, str] | None = None):
        self.ds = ds
        self.column = column
        self.storage_options = storage_options
        self.fragments = {f.fragment_id: f for f in ds.get_fragments()}
        self.rows = sum(int(f.metadata.num_rows) for f in self.fragments.values())
        self.segments: list[_Segment] = []
        #: segments that hold an entry for every physical row of their fragments, deleted or
        #: not: they find row addresses (:meth:`locate`), each then checked against the table
        self.locators: list[_Segment] = []
        covered: set[int] = set()
        located: set[int] = set()
        #: what an index entry's row id is, and what names a row to Lance: its stable row id, or
        #: its address (a fragment's ``delete`` matches ``_rowaddr`` in no row of a table with
        #: stable row ids)
        self.row_id = ROW_ID if getattr(ds, "has_stable_row_ids", False) else ROW_ADDR
        for seg, frags in self._btree_segments():
            opened = self._trusted(seg, frags)
            if opened is None:
                continue
            self.locators.append(opened)
            located |= frags
            if not any(self.fragments[f].metadata.deletion_file is not None for f in frags):
                self.segments.append(opened)
                covered |= frags
        #: fragments no trusted segment answers for: scanned on every probe
        self.tail = [f for fid, f in sorted(self.fragments.items()) if fid not in covered]
        self.tail_rows = sum(int(f.metadata.num_rows) for f in self.tail)
        #: fragments no locator covers: scanned by every :meth:`locate`
        self.locate_tail = [f for fid, f in sorted(self.fragments.items()) if fid not in located]
        #: what the last :meth:`contains` or :meth:`locate` did: "none", "pages" or "scan", and
        #: the rows it read
        self.last: tuple[str, int] = ("none", 0)

    def _btree_segments(self) -> Iterator[tuple[object, set[int]]]:
        try:
            described = self.ds.describe_indices()
        except Exception as e:  # no index metadata: every fragment is the tail
            log.info("%s: indexes unreadable (%s): ids are scanned", self.ds.uri, e)
            return
        for d in described:
            if list(d.field_names) == [self.column] and d.type_url.endswith(_BTREE_URL):
                for seg in d.segments:
                    yield seg, set(seg.fragment_ids)

    def _trusted(self, seg, frags: set[int]) -> _Segment | None:
        """The segment, if it holds one entry per physical row of the live fragments it covers
        (rows deleted since it was built included; one built over deleted rows has fewer)."""
        live = [self.fragments.get(f) for f in frags]
        if not frags or any(f is None for f in live):
            return None
        physical = sum(int(f.metadata.physical_rows) for f in live if f is not None)
        for base in self._index_dirs(seg.uuid):
            data, lookup = f"{base}/page_data.lance", f"{base}/page_lookup.lance"
            try:
                reader = LanceFileReader(lookup, storage_options=self.storage_options)
                meta = reader.metadata().schema.metadata or {}
                pages = reader.read_all().to_table()
                n = LanceFileReader(data, storage_options=self.storage_options).num_rows()
            except Exception as e:  # not there (another lineage's directory) or unreadable
                log.debug("index segment %s not readable at %s: %s", seg.uuid, base, e)
                continue
            page_rows = int(meta.get(b"batch_size", b"0") or 0)
            if (
                meta.get(b"range_partitioned", b"false") != b"false"
                or page_rows <= 0
                or pages.column_names[:4] != ["min", "max", "null_count", "page_idx"]
                or pages.column("page_idx").to_pylist() != list(range(pages.num_rows))
                or n != physical
                or -(-n // page_rows) != pages.num_rows
            ):
                log.info(
                    "%s: index segment %s does not hold exactly its fragments' rows: scanned", self.ds.uri, seg.uuid
                )
                return None
            return _Segment(
                data,
                page_rows,
                n,
                np.array(pages.column("min").to_pylist(), dtype=str),
                np.array(pages.column("max").to_pylist(), dtype=str),
            )
        return None

    def _index_dirs(self, uuid: str) -> list[str]:
        """Where segment ``uuid``'s files may live: the table's base (main's segments, and those a
        branch inherits) or a Lance branch's own tree (a segment built on that branch)."""
        uri = self.ds.uri.rstrip("/")  # the base, also for a dataset opened on a branch
        try:
            branches = list(self.ds.branches.list())
        except Exception as e:  # no branch metadata to read: the base only
            log.debug("%s: branches unreadable (%s)", uri, e)
            branches = []
        out = [f"{uri}/_indices/{uuid}"] + [f"{uri}/tree/{b}/_indices/{uuid}" for b in branches]
        return [d for d in out if "://" in d or os.path.isdir(d)]

    def contains(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """For each of ``values`` (strings), whether a live row of the table has it (null: False)."""
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        values = values.cast(self.ds.schema.field(self.column).type)
        probe = pc.unique(values.drop_null())
        if not len(probe) or not self.rows:
            self.last = ("none", 0)
            return pa.array([False] * len(values), pa.bool_())
        found = self._found(probe)
        return pc.fill_null(pc.is_in(values, value_set=found), False)

    def _found(self, probe: pa.Array) -> pa.Array:
        """The values of ``probe`` (distinct) that are live values of the column."""
        wanted = np.array(probe.to_pylist(), dtype=str) if self.segments else np.array([], dtype=str)
        touched = [seg.pages_of(wanted).tolist() for seg in self.segments]
        in_pages = sum(len(t) for t in touched) * max((s.page_rows for s in self.segments), default=0)
        cost = PAGE_READ_COST * in_pages + self.tail_rows
        if cost >= self.rows:
            self.last = ("scan", self.rows)
            return _concat(self._scan(list(self.fragments.values()), probe), probe.type)
        parts: list[pa.Array] = []
        for seg, pages in zip(self.segments, touched):
            parts.extend(self._from_pages(seg, pages, probe))
        parts.extend(self._scan(self.tail, probe))
        self.last = ("pages", in_pages + self.tail_rows)
        return pc.unique(_concat(parts, probe.type))

    def locate(self, values: pa.Array | pa.ChunkedArray, columns: Sequence[str] = ()) -> pa.Table:
        """The live rows whose ``column`` is one of ``values`` (strings; nulls ignored): their
        ``columns`` (``column`` first unless among them), ``_rowid`` and ``_rowaddr`` (fragment
        id << 32 | offset), in table order.

        Index entries give candidate row ids (the pages ``values`` fall in, on every segment
        that holds an entry per physical row of its fragments: stable row ids, or addresses);
        the candidates are then taken from the table, which drops deleted rows, and kept only
        where the value matches.
        Fragments no such segment covers are scanned a batch at a time, and when pages and tail
        come to more rows than the table has, the whole column is. Memory: the values, the
        rows found, the index lookups and one page or batch."""
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        probe = pc.unique(values.drop_null().cast(self.ds.schema.field(self.column).type))
        cols = list(columns) if self.column in columns else [self.column, *columns]
        schema = pa.schema(
            [*(self.ds.schema.field(c) for c in cols), pa.field(ROW_ID, pa.uint64()), pa.field(ROW_ADDR, pa.uint64())]
        )
        if not len(probe) or not self.rows:
            self.last = ("none", 0)
            return schema.empty_table()
        wanted = np.array(probe.to_pylist(), dtype=str) if self.locators else np.array([], dtype=str)
        touched = [seg.pages_of(wanted).tolist() for seg in self.locators]
        in_pages = sum(len(t) for t in touched) * max((s.page_rows for s in self.locators), default=0)
        tail_rows = sum(int(f.metadata.num_rows) for f in self.locate_tail)
        parts: list[pa.Table] = []
        if PAGE_READ_COST * in_pages + tail_rows >= self.rows:
            self.last = ("scan", self.rows)
            parts.extend(self._scan_rows(sorted(self.fragments.values(), key=_fid), probe, cols))
        else:
            candidates = [
                a for seg, pages in zip(self.locators, touched) for a in self._from_pages(seg, pages, probe, ROW_IDS)
            ]
            row_ids = pc.unique(pa.concat_arrays(candidates)) if candidates else pa.array([], pa.uint64())
            for i in range(0, len(row_ids), TAKE_ROWS):
                chunk = row_ids.slice(i, TAKE_ROWS)
                got = self.ds.to_table(
                    columns=cols,
                    with_row_id=True,
                    with_row_address=True,
                    filter=f"{self.row_id} IN ({', '.join(str(a) for a in chunk.to_pylist())})",
                )
                parts.append(got.filter(pc.fill_null(pc.is_in(got.column(self.column), value_set=probe), False)))
            parts.extend(self._scan_rows(self.locate_tail, probe, cols))
            self.last = ("pages", in_pages + tail_rows)
        got = pa.concat_tables([p.select([*cols, ROW_ID, ROW_ADDR]).cast(schema) for p in parts]) if parts else None
        if got is None or not got.num_rows:
            return schema.empty_table()
        return got.take(pc.sort_indices(got.column(ROW_ADDR)))

    def _scan_rows(self, fragments: list, probe: pa.Array, cols: list[str]) -> Iterator[pa.Table]:
        for frag in fragments:
            batches = frag.to_batches(columns=cols, with_row_id=True, with_row_address=True, batch_size=SCAN_BATCH_ROWS)
            for batch in batches:
                hit = pc.fill_null(pc.is_in(batch.column(self.column), value_set=probe), False)
                yield pa.Table.from_batches([batch.filter(hit)])

    def _from_pages(
        self, seg: _Segment, pages: list[int], probe: pa.Array, column: str = "values"
    ) -> Iterator[pa.Array]:
        """``column`` of the entries of ``pages`` whose value is in ``probe``: the values, or
        their row ids (:data:`ROW_IDS`)."""
        if not pages:
            return
        reader = LanceFileReader(seg.data_uri, storage_options=self.storage_options, columns=["values", column])
        i = 0
        while i < len(pages):  # consecutive pages are one read
            j = i
            while j + 1 < len(pages) and pages[j + 1] == pages[j] + 1:
                j += 1
            start = pages[i] * seg.page_rows
            n = min((pages[j] + 1) * seg.page_rows, seg.rows) - start
            for batch in reader.read_range(start, n, batch_size=seg.page_rows).to_batches():
                hit = pc.fill_null(pc.is_in(batch.column("values"), value_set=probe), False)
                yield pc.filter(batch.column(column), hit)
            i = j + 1

    def _scan(self, fragments: list, probe: pa.Array) -> Iterator[pa.Array]:
        for frag in fragments:
            for batch in frag.to_batches(columns=[self.column], batch_size=SCAN_BATCH_ROWS):
                col = batch.column(0)
                yield pc.filter(col, pc.fill_null(pc.is_in(col, value_set=probe), False))


def _fid(frag) -> int:
    return int(frag.fragment_id)


def fragments_of(addrs: pa.Array) -> np.ndarray:
    """The fragment id of each row address."""
    return (np.asarray(addrs.to_numpy(zero_copy_only=False), dtype=np.uint64) >> np.uint64(32)).astype(np.int64)


def _concat(parts: Iterator[pa.Array] | list[pa.Array], type_: pa.DataType) -> pa.Array:
    got = [p.cast(type_) for p in parts if len(p)]
    return pc.unique(pa.concat_arrays(got)) if got else pa.array([], type_)


__all__ = ["CommittedIds", "ROW_ADDR", "ROW_ID", "SCAN_BATCH_ROWS", "fragments_of"]
