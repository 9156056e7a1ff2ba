"""Integrity across writes (invariant I18) as Spark jobs: the driver holds the answer, not the rows.

Driver (it launches Spark jobs). :class:`Distributed` answers the questions of
:func:`~.deletions.deletions` over the committed table at the snapshot's pinned version
(:meth:`~.dist_checks.DistChecks.committed`) and the load's staged files
(:meth:`~.dist_checks.DistChecks.staged`), with the same methods and the same answers as
:class:`~.deletions.InMemory`, which reads the columns into the driver's memory. Each method
mirrors a function of :mod:`..ingest.integrity` (named in its docstring).

What reaches the driver is bounded by the delete, not by the tables: the delete's keys (already
there: the commit message carries them), the ids it deletes (returned to the commit as its
deletions), counts, and the first few edges a message names (in table order: the order of the
committed fragments or of the staged files, as the in-memory path sees them). The small sides
(delete keys, deleted ids) go to Spark as local relations, so its planner can broadcast them.

Each part's answer (or error) is memoised under every input it read
(:meth:`~.dist_checks.DistChecks.once`): the committed ``(base path, Lance branch, version)``
of the table it scans, the staged files, and a digest of the ids or keys the driver hands it
(:func:`digest`). The writer asks I18 first on the branch's snapshot before it takes the commit
lease; inside the lease the validator asks again on the fresh snapshot and gets a memoised
answer only where those inputs are the same, else the part runs again there (invariant I21).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from ..ingest.integrity import DESCRIBED_EDGES, EDGE_COLUMNS
from ..schema.catalog import TypeDef
from ..store.writes import StagedTable
from .dist_checks import POS, DistChecks, StagedFiles, committed_pin


@dataclass(frozen=True)
class Edges:
    """Edges a part of I18 found: how many, the first :data:`DESCRIBED_EDGES` in table order
    (``src`` and ``dst`` at least, for :func:`~..ingest.integrity.describe_edges`), and their
    ids when the caller asked for them."""

    count: int
    first: pa.Table
    ids: pa.Array | None = None


def _strings(a) -> pa.Array:
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    return a if a.type == pa.string() else pc.cast(a, pa.string())


def digest(values: None | pa.Array | pa.ChunkedArray | pa.Table) -> str | None:
    """A digest of ``values`` (ids or delete keys the driver holds) for a memo key: equal
    digests mean equal values, type and order (the Arrow IPC stream of their one-chunk form);
    None stays None (an end with nothing deleted)."""
    if values is None:
        return None
    if isinstance(values, pa.Table):
        table = values.combine_chunks()
    else:
        a = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        table = pa.table({"v": a})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return hashlib.blake2b(sink.getvalue(), digest_size=20).hexdigest()


class Distributed:
    """I18's reads as Spark jobs over one snapshot and one load's staged tables (driver)."""

    def __init__(self, dist: DistChecks, snap, staged: Mapping[str, StagedTable], schema_of) -> None:
        self.dist = dist
        self.snap = snap
        self.staged_tables = staged
        self.schema_of = schema_of

    # -- frames -----------------------------------------------------------------------------

    def _committed(self, key: str, cols: Sequence[str]):
        return self.dist.committed(committed_pin(self.snap, key), self.schema_of(key), cols)

    def _staged(self, key: str, cols: Sequence[str]):
        return self.dist.staged(StagedFiles.of(self.staged_tables[key]), self.schema_of(key), cols)

    def _local(self, **columns) -> Any:
        """A small DataFrame of string columns held by the driver (delete keys, deleted ids)."""
        return self.dist.spark.createDataFrame(pa.table({c: _strings(a) for c, a in columns.items()}))

    def _run(self, kind: str, key: str, inputs: tuple, compute):
        """``compute``'s answer, memoised under ``(kind, key) + inputs``: everything it reads."""
        return self.dist.once((kind, key) + inputs, compute)

    def _pin(self, key: str):
        return committed_pin(self.snap, key)

    def _files(self, key: str) -> tuple[str, ...]:
        return StagedFiles.of(self.staged_tables[key]).uris

    @staticmethod
    def _ids(df, col: str = "id") -> pa.Array:
        return _strings(df.select(col).toArrow().column(col))

    @staticmethod
    def _edges(bad, with_ids: bool) -> Edges:
        """Count, the first edges by POS and (``with_ids``) every id of the edges in ``bad``.
        ``bad`` is kept by the executors for these reads, so its scan and join run once."""
        bad = bad.persist()
        try:
            n = bad.count()
            if not n:
                return Edges(
                    0,
                    pa.table({c: pa.array([], pa.string()) for c in ("src", "dst")}),
                    pa.array([], pa.string()) if with_ids else None,
                )
            first = bad.orderBy(POS).limit(DESCRIBED_EDGES).select("src", "dst").toArrow()
            return Edges(n, first, Distributed._ids(bad) if with_ids else None)
        finally:
            bad.unpersist()

    def _pointing_at(self, edges, src_gone: pa.Array | None, dst_gone: pa.Array | None):
        """The rows of ``edges`` whose ``src`` is in ``src_gone`` or ``dst`` in ``dst_gone``; mirrors
        :func:`~..ingest.integrity.pointing_at`."""
        hit = None
        for col, gone in (("src", src_gone), ("dst", dst_gone)):
            if gone is not None and len(gone):
                flag = f"__gone_{col}"
                edges = edges.join(
                    self._local(**{col: gone}).distinct().withColumn(flag, F.lit(True)), on=col, how="left"
                )
                h = F.col(flag).isNotNull()
                hit = h if hit is None else hit | h
        return edges.limit(0) if hit is None else edges.where(hit)

    # -- the parts of I18 -------------------------------------------------------------------

    def resolve(self, td: TypeDef, keys: pa.Table) -> tuple[pa.Array, int]:
        """(the committed ids a delete of ``td`` removes, how many distinct keys matched none);
        mirrors :func:`~..ingest.integrity.resolve_node_delete` and ``resolve_edge_delete``."""
        key = td.table_key

        def run() -> tuple[pa.Array, int]:
            if td.is_edge and "id" not in keys.column_names:  # every edge between the two nodes
                edges = self._committed(key, EDGE_COLUMNS)
                pairs = self._local(src=keys.column("src"), dst=keys.column("dst")).distinct()
                found = edges.join(pairs, on=["src", "dst"], how="left_semi").select("id").distinct()
                missing = pairs.join(edges.select("src", "dst"), on=["src", "dst"], how="left_anti").count()
                return self._ids(found), missing
            wanted = pc.unique(_strings(keys.column("id")))
            found = self._ids(
                self._committed(key, ["id"])
                .join(self._local(id=wanted), on="id", how="left_semi")
                .select("id")
                .distinct()
            )
            return found, len(wanted) - len(found)

        return self._run("delete", key, (self._pin(key), digest(keys)), run)

    def restaged(self, key: str, ids: pa.Array) -> pa.Array:
        """Those of ``ids`` that this load also stages in ``key`` (a node deleted and written
        again by the same load stays); the in-memory form tests membership in the staged ids."""
        if not len(ids):
            return ids
        return self._run(
            "restaged",
            key,
            (self._files(key), digest(ids)),
            lambda: self._ids(self._staged(key, ["id"]).join(self._local(id=ids).distinct(), on="id", how="left_semi")),
        )

    def staged_pointing_at(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> Edges:
        """The load's staged edges of ``ekey`` that point at deleted nodes; mirrors
        :func:`~..ingest.integrity.pointing_at`."""
        return self._run(
            "staged_pointing_at",
            ekey,
            (self._files(ekey), digest(src_gone), digest(dst_gone)),
            lambda: self._edges(
                self._pointing_at(self._staged(ekey, ["src", "dst"]), src_gone, dst_gone), with_ids=False
            ),
        )

    def incident(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> pa.Array:
        """Ids of the committed edges incident to deleted nodes; mirrors
        :func:`~..ingest.integrity.incident_edges`."""
        return self._run(
            "incident",
            ekey,
            (self._pin(ekey), digest(src_gone), digest(dst_gone)),
            lambda: self._ids(self._pointing_at(self._committed(ekey, EDGE_COLUMNS), src_gone, dst_gone)),
        )

    def orphaned(self, ekey: str, src_after: str | None, dst_after: str | None, with_ids: bool) -> Edges:
        """The committed edges of ``ekey`` whose ``src`` is not among the staged ids of node table
        ``src_after`` or ``dst`` not among those of ``dst_after`` (None: that end's node type is not
        overwritten); mirrors :func:`~..ingest.integrity.orphaned_edges` (a null end is orphaned)."""

        def run() -> Edges:
            edges = self._committed(ekey, EDGE_COLUMNS)
            bad = None
            for col, nkey in (("src", src_after), ("dst", dst_after)):
                if nkey is not None:
                    flag = f"__kept_{col}"
                    ids = self._staged(nkey, ["id"]).select(F.col("id").alias(col)).distinct()
                    edges = edges.join(ids.withColumn(flag, F.lit(True)), on=col, how="left")
                    b = F.col(flag).isNull()
                    bad = b if bad is None else bad | b
            return self._edges(edges.limit(0) if bad is None else edges.where(bad), with_ids)

        ends = tuple((nkey, None if nkey is None else self._files(nkey)) for nkey in (src_after, dst_after))
        return self._run("orphaned", ekey, (self._pin(ekey),) + ends + (with_ids,), run)

    def card_after_delete(self, etd: TypeDef, ids: pa.Array) -> None:
        """@card of the committed edges of ``etd`` that stay once ``ids`` are deleted, as the
        in-memory form applies :func:`~..ingest.checks.check_cardinality` to them."""

        def run() -> None:
            kept = self._committed(etd.table_key, ["id", "src"]).join(self._local(id=ids), on="id", how="left_anti")
            self.dist.card_verdict(
                etd, kept.where(F.col("src").isNotNull()).groupBy("src").agg(F.count(F.lit(1)).alias("n"))
            )

        self._run("card_after_delete", etd.table_key, (self._pin(etd.table_key), digest(ids)), run)


__all__ = ["Distributed", "Edges", "digest"]
