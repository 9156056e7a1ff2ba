"""Integrity across writes (invariant I18) as Spark jobs: the driver holds the answer, not the rows.

Driver. :class:`Distributed` answers the questions of :func:`~.deletions.deletions` with Spark
SQL over views of the committed table at the snapshot's pinned version
(:meth:`~.dist_checks.DistChecks.committed`) and the load's staged files
(:meth:`~.dist_checks.DistChecks.staged`), run by the side holding the session
(:class:`~.work.SparkWork`), with the same methods and the same answers as
:class:`~.deletions.InMemory`, which reads the columns into the driver's memory. Each method
mirrors a function of :mod:`..ingest.integrity` (named in its docstring).

What reaches the driver is bounded by the delete, not by the tables: the delete's keys (already
there: the commit message carries them), the ids it deletes (returned to the commit as its
deletions), counts, and the first few edges a message names (in table order: the order of the
committed fragments or of the staged files, as the in-memory path sees them). The small sides
(delete keys, deleted ids) go to Spark as inline views (one task), so its planner can broadcast
them.

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

import pyarrow as pa
import pyarrow.compute as pc

from ..ingest.integrity import DESCRIBED_EDGES, EDGE_COLUMNS, as_strings
from ..schema.catalog import TypeDef
from ..store.writes import StagedTable
from .dist_checks import POS, DistChecks, StagedFiles, committed_pin
from .work import Builder


@dataclass(frozen=True)
class Edges:
    """Edges a part of I18 found: how many, the first :data:`DESCRIBED_EDGES` in table order
    (``src`` and ``dst`` at least, for :func:`~..ingest.integrity.describe_edges`), and their
    ids when the caller asked for them."""

    count: int
    first: pa.Table
    ids: pa.Array | None = None


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
    """I18's reads as Spark SQL over one snapshot and one load's staged tables (driver)."""

    def __init__(self, dist: DistChecks, snap, staged: Mapping[str, StagedTable], schema_of) -> None:
        self.dist = dist
        self.snap = snap
        self.staged_tables = staged
        self.schema_of = schema_of

    # -- views ------------------------------------------------------------------------------

    def _committed(self, w: Builder, key: str, cols: Sequence[str]) -> str:
        return self.dist.committed(w, committed_pin(self.snap, key), self.schema_of(key), cols)

    def _staged(self, w: Builder, key: str, cols: Sequence[str]) -> str:
        return self.dist.staged(w, StagedFiles.of(self.staged_tables[key]), self.schema_of(key), cols)

    def _local(self, w: Builder, **columns) -> str:
        """A small view of string columns held by the driver (delete keys, deleted ids)."""
        return self.dist.local(w, pa.table({c: as_strings(a) for c, a in columns.items()}))

    def _run(self, kind: str, key: str, inputs: tuple, compute):
        """``compute``'s answer, memoised under ``(kind, key) + inputs``: everything it reads."""
        return self.dist.once((kind, key) + inputs, compute)

    def _pin(self, key: str):
        return committed_pin(self.snap, key)

    def _files(self, key: str) -> tuple[str, ...]:
        return StagedFiles.of(self.staged_tables[key]).uris

    def _ids(self, w: Builder, sql: str) -> pa.Array:
        """The ``id`` column of ``sql`` as strings."""
        w.query(f"SELECT CAST(id AS STRING) AS id FROM ({sql})", ("id", "string"))
        return self.dist.run(w)[0].column("id").combine_chunks()

    def _edges(self, w: Builder, bad: str, with_ids: bool) -> Edges:
        """Count, the first edges by POS and (``with_ids``) every id of the edges ``bad`` (SQL)
        selects. ``bad`` is cached by the executors for these reads, so its scan and join run once."""
        cached = w.cached("bad", bad)
        w.query(f"SELECT count(1) AS n FROM {cached}", ("n", "long"))
        w.query(
            f"SELECT CAST(src AS STRING) AS src, CAST(dst AS STRING) AS dst FROM {cached} "
            f"ORDER BY {POS} LIMIT {DESCRIBED_EDGES}",
            ("src", "string"),
            ("dst", "string"),
        )
        if with_ids:
            w.query(f"SELECT CAST(id AS STRING) AS id FROM {cached}", ("id", "string"))
        got = self.dist.run(w)
        n = got[0]["n"][0].as_py()
        if not n:
            return Edges(
                0,
                pa.table({c: pa.array([], pa.string()) for c in ("src", "dst")}),
                pa.array([], pa.string()) if with_ids else None,
            )
        return Edges(n, got[1], got[2].column("id").combine_chunks() if with_ids else None)

    def _pointing_at(self, w: Builder, edges: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> str:
        """SQL of the rows of the view ``edges`` whose ``src`` is in ``src_gone`` or ``dst`` in
        ``dst_gone``; mirrors :func:`~..ingest.integrity.pointing_at`."""
        joins, hits = [], []
        for col, gone in (("src", src_gone), ("dst", dst_gone)):
            if gone is not None and len(gone):
                flag = f"__gone_{col}"
                local = self._local(w, **{col: gone})
                joins.append(
                    f"LEFT JOIN (SELECT DISTINCT {col} AS g_{col}, true AS {flag} FROM {local}) g_{col} "
                    f"ON e.{col} = g_{col}.g_{col}"
                )
                hits.append(f"{flag} IS NOT NULL")
        if not hits:
            return f"SELECT e.* FROM {edges} e WHERE false"
        return f"SELECT e.* FROM {edges} e {' '.join(joins)} WHERE {' OR '.join(hits)}"

    # -- the parts of I18 -------------------------------------------------------------------

    def resolve(self, td: TypeDef, keys: pa.Table) -> tuple[pa.Array, int]:
        """(the committed ids a delete of ``td`` removes, how many distinct keys matched none);
        mirrors :func:`~..ingest.integrity.resolve_node_delete` and ``resolve_edge_delete``."""
        key = td.table_key

        def run() -> tuple[pa.Array, int]:
            w = Builder()
            if td.is_edge and "id" not in keys.column_names:  # every edge between the two nodes
                edges = self._committed(w, key, EDGE_COLUMNS)
                pairs = (
                    f"SELECT DISTINCT src, dst FROM {self._local(w, src=keys.column('src'), dst=keys.column('dst'))}"
                )
                w.query(
                    f"SELECT DISTINCT CAST(e.id AS STRING) AS id FROM {edges} e LEFT SEMI JOIN ({pairs}) p "
                    "ON e.src = p.src AND e.dst = p.dst",
                    ("id", "string"),
                )
                w.query(
                    f"SELECT count(1) AS n FROM ({pairs}) p LEFT ANTI JOIN {edges} e "
                    "ON p.src = e.src AND p.dst = e.dst",
                    ("n", "long"),
                )
                found, missing = self.dist.run(w)
                return found.column("id").combine_chunks(), missing["n"][0].as_py()
            wanted = pc.unique(as_strings(keys.column("id")))
            committed = self._committed(w, key, ["id"])
            found = self._ids(
                w,
                f"SELECT DISTINCT c.id FROM {committed} c LEFT SEMI JOIN {self._local(w, id=wanted)} l ON c.id = l.id",
            )
            return found, len(wanted) - len(found)

        return self._run("delete", key, (self._pin(key), digest(keys)), run)

    def restaged(self, key: str, ids: pa.Array) -> pa.Array:
        """Those of ``ids`` that this load also stages in ``key`` (a node deleted and written
        again by the same load stays); the in-memory form tests membership in the staged ids."""
        if not len(ids):
            return ids

        def run() -> pa.Array:
            w = Builder()
            staged = self._staged(w, key, ["id"])
            local = self._local(w, id=ids)
            return self._ids(
                w, f"SELECT s.id FROM {staged} s LEFT SEMI JOIN (SELECT DISTINCT id FROM {local}) l ON s.id = l.id"
            )

        return self._run("restaged", key, (self._files(key), digest(ids)), run)

    def staged_pointing_at(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> Edges:
        """The load's staged edges of ``ekey`` that point at deleted nodes; mirrors
        :func:`~..ingest.integrity.pointing_at`."""

        def run() -> Edges:
            w = Builder()
            return self._edges(
                w, self._pointing_at(w, self._staged(w, ekey, ["src", "dst"]), src_gone, dst_gone), False
            )

        return self._run("staged_pointing_at", ekey, (self._files(ekey), digest(src_gone), digest(dst_gone)), run)

    def incident(self, ekey: str, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> pa.Array:
        """Ids of the committed edges incident to deleted nodes; mirrors
        :func:`~..ingest.integrity.incident_edges`."""

        def run() -> pa.Array:
            w = Builder()
            return self._ids(w, self._pointing_at(w, self._committed(w, ekey, EDGE_COLUMNS), src_gone, dst_gone))

        return self._run("incident", ekey, (self._pin(ekey), digest(src_gone), digest(dst_gone)), run)

    def orphaned(self, ekey: str, src_after: str | None, dst_after: str | None, with_ids: bool) -> Edges:
        """The committed edges of ``ekey`` whose ``src`` is not among the staged ids of node table
        ``src_after`` or ``dst`` not among those of ``dst_after`` (None: that end's node type is not
        overwritten); mirrors :func:`~..ingest.integrity.orphaned_edges` (a null end is orphaned)."""

        def run() -> Edges:
            w = Builder()
            edges = self._committed(w, ekey, EDGE_COLUMNS)
            joins, bad = [], []
            for col, nkey in (("src", src_after), ("dst", dst_after)):
                if nkey is not None:
                    flag = f"__kept_{col}"
                    ids = self._staged(w, nkey, ["id"])
                    joins.append(
                        f"LEFT JOIN (SELECT DISTINCT id AS k_{col}, true AS {flag} FROM {ids}) k_{col} "
                        f"ON e.{col} = k_{col}.k_{col}"
                    )
                    bad.append(f"{flag} IS NULL")
            where = " OR ".join(bad) if bad else "false"
            return self._edges(w, f"SELECT e.* FROM {edges} e {' '.join(joins)} WHERE {where}", with_ids)

        ends = tuple((nkey, None if nkey is None else self._files(nkey)) for nkey in (src_after, dst_after))
        return self._run("orphaned", ekey, (self._pin(ekey),) + ends + (with_ids,), run)

    def card_after_delete(self, etd: TypeDef, ids: pa.Array) -> None:
        """@card of the committed edges of ``etd`` that stay once ``ids`` are deleted, as the
        in-memory form applies :func:`~..ingest.checks.check_cardinality` to them."""

        def totals(w: Builder) -> str:
            committed = self._committed(w, etd.table_key, ["id", "src"])
            local = self._local(w, id=ids)
            return (
                f"SELECT c.src, count(1) AS n FROM {committed} c LEFT ANTI JOIN {local} l ON c.id = l.id "
                "WHERE c.src IS NOT NULL GROUP BY c.src"
            )

        self._run(
            "card_after_delete",
            etd.table_key,
            (self._pin(etd.table_key), digest(ids)),
            lambda: self.dist.card_verdict(etd, totals),
        )


__all__ = ["Distributed", "Edges", "digest"]
