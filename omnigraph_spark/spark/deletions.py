"""Integrity across writes (invariant I18) on the driver: what a load deletes, and the committed
edges it must not leave dangling. The validator runs it inside the commit lease on the snapshot
the commit lands on; when a part may run as Spark jobs it runs before the lease too, on the
branch's snapshot, so those parts' answers are memoised by the inputs they read
(:mod:`.dist_integrity`) and reused inside the lease where nothing moved.

:func:`deletions` asks its questions part by part (resolve a delete's keys, find the edges of
deleted nodes, find the edges a node overwrite orphans, recheck @card's min) of a reader that
``reader(rows, (table key, columns), ...)`` picks per part from the rows that part reads:
:class:`InMemory` reads the columns into the driver's memory (:mod:`..ingest.integrity`);
:class:`~.dist_integrity.Distributed` runs Spark jobs over the pinned committed tables and the
staged files (above option ``distributedCheckRows``, with a SparkSession); :class:`Bounded`
asks the committed indexes and scans a batch at a time (above it, without a SparkSession, I27). Both give the same
answers, so every error is worded here, once, and is the same on both paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DanglingEdgeError
from ..graph import Snapshot
from ..ingest import check_cardinality
from ..ingest import integrity as _integrity
from ..ingest.integrity import DESCRIBED_EDGES, EDGE_COLUMNS, as_strings
from ..schema.catalog import Catalog, TypeDef
from ..store.id_probe import ROW_ADDR, SCAN_BATCH_ROWS, CommittedIds
from ..store.writes import StagedTable
from . import bounded as _bounded
from .dist_integrity import Edges

log = logging.getLogger(__name__)


class InMemory:
    """I18's reads in the driver's memory: ``committed(key, cols)`` and ``staged_cols(key, cols)``
    return the columns as Arrow tables (the validator's shared, memoised readers). The methods
    are :class:`~.dist_integrity.Distributed`'s."""

    def __init__(
        self, committed: Callable[[str, Sequence[str]], pa.Table], staged_cols: Callable[[str, Sequence[str]], pa.Table]
    ) -> None:
        self.committed = committed
        self.staged_cols = staged_cols

    @staticmethod
    def _edges(t: pa.Table, with_ids: bool) -> Edges:
        return Edges(t.num_rows, t.slice(0, DESCRIBED_EDGES), t.column("id").combine_chunks() if with_ids else None)

    def resolve(self, td: TypeDef, keys: pa.Table) -> tuple[pa.Array, int]:
        if td.is_edge:
            return _integrity.resolve_edge_delete(self.committed(td.table_key, EDGE_COLUMNS), keys)
        return _integrity.resolve_node_delete(self.committed(td.table_key, ["id"]).column("id"), keys.column("id"))

    def restaged(self, key: str, ids: pa.Array) -> pa.Array:
        staged = self.staged_cols(key, ["id"]).column("id")
        return pc.filter(ids, _integrity.member(ids, staged))

    def staged_pointing_at(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> Edges:
        bad = _integrity.pointing_at(self.staged_cols(ekey, ["src", "dst"]), src_gone, dst_gone)
        return Edges(bad.num_rows, bad.slice(0, DESCRIBED_EDGES))

    def incident(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> pa.Array:
        return _integrity.incident_edges(self.committed(ekey, EDGE_COLUMNS), src_gone, dst_gone)

    def orphaned(self, ekey: str, src_after: str | None, dst_after: str | None, with_ids: bool) -> Edges:
        def ids(nkey: str | None) -> pa.ChunkedArray | None:
            return None if nkey is None else self.staged_cols(nkey, ["id"]).column("id")

        return self._edges(
            _integrity.orphaned_edges(self.committed(ekey, EDGE_COLUMNS), ids(src_after), ids(dst_after)), with_ids
        )

    def card_after_delete(self, etd: TypeDef, ids: pa.Array) -> None:
        edges = self.committed(etd.table_key, EDGE_COLUMNS)
        check_cardinality(etd, edges.filter(pc.invert(_integrity.member(edges.column("id"), ids))).column("src"))


class Bounded(InMemory):
    """I18's reads of committed tables in bounded memory (I24, I27), for a commit with no
    SparkSession to run them as Spark jobs: the Python source's commit. ``table_of(key)`` opens
    a committed table at the snapshot's version. A delete's ids, and the edges incident to its
    nodes, are found through the committed tables' BTree indexes on ``id``, ``src`` and ``dst``
    (:meth:`~..store.id_probe.CommittedIds.locate`: memory and reads follow the delete, not the
    table); an overwrite's orphans and ``@card``'s min after a delete read the committed edges a
    batch at a time (memory: a batch, the load's ids and the answer; ``@card`` counts bucket by
    bucket, :func:`~.bounded.card_counts`). The staged reads are :class:`InMemory`'s (the load's
    own rows). Every answer is the in-memory one, in the same table order."""

    def __init__(
        self,
        table_of: Callable[[str], lance.LanceDataset],
        staged_cols: Callable[[str, Sequence[str]], pa.Table],
        storage_options: dict[str, str] | None = None,
    ) -> None:
        super().__init__(self._no_whole_column, staged_cols)
        self.table_of = table_of
        self.storage_options = storage_options

    @staticmethod
    def _no_whole_column(key: str, cols: Sequence[str]) -> pa.Table:
        raise AssertionError(f"the bounded I18 reader never reads {key}'s whole {list(cols)}")

    def _located(self, key: str, column: str, values: pa.Array, cols: Sequence[str] = ()) -> pa.Table:
        return CommittedIds(self.table_of(key), column, self.storage_options).locate(values, cols)

    def resolve(self, td: TypeDef, keys: pa.Table) -> tuple[pa.Array, int]:
        if not td.is_edge or "id" in keys.column_names:
            wanted = pc.unique(as_strings(keys.column("id")))
            found = pc.unique(as_strings(self._located(td.table_key, "id", wanted).column("id")))
            return found, len(wanted) - len(found)
        pairs = keys.select(["src", "dst"]).group_by(["src", "dst"], use_threads=False).aggregate([])
        # every edge of the keys' sources, then those ending at the key's dst
        edges = self._located(td.table_key, "src", pc.unique(pairs.column("src").combine_chunks()), EDGE_COLUMNS)
        return _integrity.resolve_edge_delete(edges, keys)

    def incident(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> pa.Array:
        parts = [
            self._located(ekey, col, gone, EDGE_COLUMNS)
            for col, gone in (("src", src_gone), ("dst", dst_gone))
            if gone is not None and len(gone)
        ]
        if not parts:
            return pa.array([], pa.string())
        hit = pa.concat_tables(parts)
        # in table order, an edge found by both ends once
        _, first = np.unique(hit.column(ROW_ADDR).to_numpy(), return_index=True)
        return as_strings(hit.take(pa.array(first)).column("id"))

    def orphaned(self, ekey: str, src_after: str | None, dst_after: str | None, with_ids: bool) -> Edges:
        ends = {
            col: None if nkey is None else self.staged_cols(nkey, ["id"]).column("id")
            for col, nkey in (("src", src_after), ("dst", dst_after))
        }
        ds = self.table_of(ekey)
        count = 0
        first: list[pa.Table] = []
        ids: list[pa.Array] = []
        for batch in ds.to_batches(columns=list(EDGE_COLUMNS), batch_size=SCAN_BATCH_ROWS):
            bad = _integrity.orphaned_edges(pa.Table.from_batches([batch]), ends["src"], ends["dst"])
            count += bad.num_rows
            if bad.num_rows and sum(t.num_rows for t in first) < DESCRIBED_EDGES:
                first.append(bad.slice(0, DESCRIBED_EDGES))
            if with_ids and bad.num_rows:
                ids.append(as_strings(bad.column("id")))
        schema = pa.schema([ds.schema.field(c) for c in EDGE_COLUMNS])
        head = pa.concat_tables(first).slice(0, DESCRIBED_EDGES) if first else schema.empty_table()
        out = (pa.concat_arrays(ids) if ids else pa.array([], pa.string())) if with_ids else None
        return Edges(count, head, out)

    def card_after_delete(self, etd: TypeDef, ids: pa.Array) -> None:
        ds = self.table_of(etd.table_key)

        def kept() -> Iterator[pa.Array]:
            for batch in ds.to_batches(columns=["id", "src"], batch_size=SCAN_BATCH_ROWS):
                yield pc.filter(batch.column("src"), pc.invert(_integrity.member(batch.column("id"), ids)))

        _bounded.card_counts(etd, [kept], ds.count_rows())


Reader = Callable[..., Any]  # reader(rows, (key, cols), ...) -> InMemory, Bounded or Distributed


def deletions(
    catalog: Catalog, snap: Snapshot, staged: Mapping[str, StagedTable], cascade: bool, reader: Reader
) -> tuple[dict[str, pa.Array], dict[str, int]]:
    """I18: the committed rows a load deletes, per table key, and the delete keys that matched
    nothing. A delete's own rows; every edge (of any edge type, same branch) incident to a
    deleted node; and the edges a node overwrite orphans: deleted with ``cascade``, else a
    DANGLING_EDGE naming each edge type and its count. An edge type overwritten by the same
    load is replaced whole, so nothing of it is orphaned.

    ``reader(rows, (key, cols), ...)``: the reader of a part that reads ``rows`` staged +
    committed rows of those columns (:class:`InMemory` or :class:`~.dist_integrity.Distributed`)."""
    out: dict[str, list[pa.Array]] = {}
    missing: dict[str, int] = {}
    gone: dict[str, pa.Array] = {}  # node type -> ids deleted

    def committed_rows(key: str) -> int:
        return snap.table(key).row_count

    for key in sorted(staged):
        s = staged[key]
        if s.mode != "delete" and s.deletes is None:
            continue
        td = catalog.by_table_key(key)
        keys = s.deletes if s.deletes is not None else pa.table({"id": pa.array([], pa.string())})
        ids, miss = reader(committed_rows(key), (key, EDGE_COLUMNS if td.is_edge else ["id"])).resolve(td, keys)
        if not td.is_edge:
            # a node deleted and written again by the same load (write_graph's deletes=) stays
            if s.fragments:
                again = reader(s.rows, (key, ["id"])).restaged(key, ids)
                gone[td.name] = pc.filter(ids, pc.invert(_integrity.member(ids, again)))
            else:
                gone[td.name] = ids
        out.setdefault(key, []).append(ids)
        missing[key] = miss
        if miss:
            log.info("delete from %s: %d of %d keys matched no row (not an error)", key, miss, keys.num_rows)
    after: dict[str, str] = {}  # node type overwritten -> its table key (its staged ids are the ids after)
    for key in sorted(staged):
        td = catalog.by_table_key(key)
        if not td.is_edge and staged[key].mode == "overwrite":
            after[td.name] = key
    dangling: list[str] = []
    for etd in catalog.types():
        if not etd.is_edge:
            continue
        ekey = etd.table_key
        src_gone, dst_gone = gone.get(etd.from_type or ""), gone.get(etd.to_type or "")
        if ekey in staged and staged[ekey].fragments and (src_gone is not None or dst_gone is not None):
            # edges this load writes must not point at the nodes it deletes
            bad = reader(staged[ekey].rows, (ekey, ["src", "dst"])).staged_pointing_at(ekey, src_gone, dst_gone)
            if bad.count:
                raise DanglingEdgeError(
                    f"edge {etd.name}: {bad.count} edge(s) of this load point at nodes it "
                    "deletes, e.g. " + ", ".join(_integrity.describe_edges(bad.first)),
                    table=ekey,
                    dangling=bad.count,
                )
        if ekey in staged and staged[ekey].mode == "overwrite":
            continue
        if src_gone is not None or dst_gone is not None:
            ids = reader(committed_rows(ekey), (ekey, EDGE_COLUMNS)).incident(ekey, src_gone, dst_gone)
            if len(ids):
                log.info("delete cascades to %d %s edges", len(ids), etd.name)
                out.setdefault(ekey, []).append(ids)
        src_after, dst_after = after.get(etd.from_type or ""), after.get(etd.to_type or "")
        if src_after is None and dst_after is None:
            continue
        rows = committed_rows(ekey) + sum(staged[k].rows for k in {src_after, dst_after} if k is not None)
        ends = [(k, ["id"]) for k in (src_after, dst_after) if k is not None]
        orphans = reader(rows, (ekey, EDGE_COLUMNS), *ends).orphaned(ekey, src_after, dst_after, with_ids=cascade)
        if not orphans.count:
            continue
        if cascade:
            log.info("overwrite with cascade deletes %d orphaned %s edges", orphans.count, etd.name)
            out.setdefault(ekey, []).append(orphans.ids)
        else:
            dangling.append(
                f"{etd.name}: {orphans.count} edge(s), e.g. " + ", ".join(_integrity.describe_edges(orphans.first))
            )
    if dangling:
        types = sorted(after)
        raise DanglingEdgeError(
            f"overwrite of node type(s) {', '.join(types)} would leave committed edges pointing at removed "
            f"nodes on branch '{snap.branch}': "
            + "; ".join(dangling)
            + ". Overwrite those edge types in the same write_graph call, or pass cascade=true to delete them "
            "in the same commit; nothing was committed",
            table=",".join(f"node:{t}" for t in types),
            edge_types=len(dangling),
        )
    result = {k: pa.concat_arrays([a.cast(pa.string()) for a in v]) for k, v in out.items()}
    for ekey, ids in result.items():  # deleting edges must not leave a source below its @card min
        etd = catalog.by_table_key(ekey)
        if etd.is_edge and etd.cardinality.min > 1 and not (ekey in staged and staged[ekey].fragments):
            reader(committed_rows(ekey), (ekey, ["id", "src"])).card_after_delete(etd, ids)
    return result, missing


__all__ = ["Bounded", "InMemory", "deletions"]
