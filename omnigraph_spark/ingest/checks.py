"""Load-wide checks that need more than one batch: uniqueness, edge endpoints, @card.

Driver-side and vectorised (``group_by``/``is_in``/``value_counts``). The caller gathers only
the columns involved (ids, key columns, src) — never whole rows.

Semantics follow the engine (``enforce_unique_constraints_intra_batch``,
``collect_node_ids_with_pending``, ``count_src_per_edge`` + ``enforce_cardinality_bounds``):

* uniqueness is within the load only; rows with a null in the group are exempt; the groups
  are every @unique plus the @key tuple (see :func:`unique_groups`);
* endpoint ids are the endpoint type's pending ids plus (unless that node type is being
  overwritten) its committed ids; building that set is the caller's job;
* @card counts edges per ``src`` as committed + pending. Merge shadows committed rows whose
  id is pending and collapses pending rows sharing an id to the last; overwrite counts pending
  only. Only sources with at least one edge are checked (so ``min`` never fires for a node
  with no edges).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CardinalityViolationError, DanglingEdgeError, KeyConflictError, UniqueViolationError
from ..schema.catalog import TypeDef

ArrayLike: TypeAlias = pa.Array | pa.ChunkedArray
_IDX = "__omnigraph_idx"


def _combine(a: ArrayLike) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _fmt_tuple(items: Sequence[object]) -> str:
    return str(items[0]) if len(items) == 1 else "(" + ", ".join(str(i) for i in items) + ")"


def unique_groups(typedef: TypeDef) -> list[tuple[tuple[str, ...], str]]:
    """``(columns, what)`` for every uniqueness rule of a type: each @unique group, then the
    @key tuple unless an identical @unique exists (as the engine builds them)."""
    groups = [(tuple(u), "@unique") for u in typedef.uniques]
    for k in typedef.keys:
        if tuple(k) not in [g for g, _ in groups]:
            groups.append((tuple(k), "@key"))
    return groups


def _all_distinct(sub: pa.Table, columns: Sequence[str]) -> bool:
    """True if no two rows with no null in ``columns`` share their value tuple.

    One column: the distinct values (``unique``; null counts as one) number the rows. Several:
    the distinct tuples (a keyless group_by) among fully valid rows number those rows. Both are
    one hash pass with no aggregate state (cheaper than the count/min group_by)."""
    if len(columns) == 1:
        col = sub.column(columns[0])
        nulls = col.null_count
        return len(pc.unique(col)) - (1 if nulls else 0) == len(col) - nulls
    keep = None
    for c in columns:
        v = pc.is_valid(sub[c])
        keep = v if keep is None else pc.and_(keep, v)
    full = sub.filter(keep) if keep is not None else sub
    return full.group_by(list(columns), use_threads=False).aggregate([]).num_rows == full.num_rows


def check_unique(
    typedef: TypeDef, table: pa.Table, columns: Sequence[str], *, what: str, positions: ArrayLike | None = None
) -> None:
    """Raise :class:`UniqueViolationError` if two rows of ``table`` share a value tuple over
    ``columns`` (rows with any null there are exempt). ``positions`` (aligned with the table)
    gives the load-wide row numbers to report; otherwise table indices are reported."""
    columns = list(columns)
    sub = table.select(columns)
    n = sub.num_rows
    if n < 2:
        return
    if _all_distinct(sub, columns):
        return  # the common case, decided by one hash pass; the slow path below only words the error
    sub = sub.append_column(_IDX, pa.array(np.arange(n, dtype=np.int64)))
    keep = None
    for c in columns:
        valid = pc.is_valid(sub[c])
        keep = valid if keep is None else pc.and_(keep, valid)
    if keep is not None:
        sub = sub.filter(keep)
    counts = sub.group_by(columns, use_threads=False).aggregate([(_IDX, "count"), (_IDX, "min")])
    dup = counts.filter(pc.greater(counts[f"{_IDX}_count"], 1))
    if dup.num_rows == 0:
        return
    first = pc.index(dup[f"{_IDX}_min"], pc.min(dup[f"{_IDX}_min"])).as_py()
    values = [dup[c][first].as_py() for c in columns]
    match = None
    for c, v in zip(columns, values):
        eq = pc.equal(sub[c], pa.scalar(v, sub.schema.field(c).type))
        match = eq if match is None else pc.and_(match, eq)
    rows = sub.filter(match)[_IDX].to_pylist()[:2]
    if positions is not None:
        pos = _combine(positions)
        rows = [pos[r].as_py() for r in rows]
    raise unique_violation(typedef, columns, values, rows, dup.num_rows, what=what)


def unique_violation(
    typedef: TypeDef,
    columns: Sequence[str],
    values: Sequence[object],
    rows: Sequence[int],
    duplicates: int,
    *,
    what: str,
) -> UniqueViolationError:
    """The error of a uniqueness rule: ``values`` is the duplicated tuple whose first row comes
    first in the load, ``rows`` its first two rows, ``duplicates`` how many tuples repeat. Every
    uniqueness check (in memory or distributed) words its error here."""
    columns, values, rows = list(columns), list(values), list(rows)
    label = f"{typedef.name}.{_fmt_tuple(columns)}"
    return UniqueViolationError(
        f"{what} violation on {label}: value '{_fmt_tuple(values)}' appears in rows "
        f"{rows[0]} and {rows[1]} ({duplicates} duplicated value(s) in total)",
        table=typedef.table_key,
        columns=columns,
        value=values,
        rows=rows,
        duplicates=duplicates,
    )


#: probes longer than this run on two threads, each with its own hash set of the ids (below it,
#: building a second set costs more than the second thread saves)
PARALLEL_PROBE_ROWS = 1 << 20


def _is_in(values: pa.Array, ids: pa.Array) -> pa.Array:
    if len(values) < PARALLEL_PROBE_ROWS:
        return pc.is_in(values, value_set=ids)

    half = len(values) // 2
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="omnigraph-probe") as pool:
        parts = list(pool.map(lambda a: pc.is_in(a, value_set=ids), (values.slice(0, half), values.slice(half))))
    return pa.concat_arrays(parts)


def check_endpoints(
    edge_typedef: TypeDef,
    src: ArrayLike,
    dst: ArrayLike,
    from_ids: ArrayLike,
    to_ids: ArrayLike,
    *,
    positions: ArrayLike | None = None,
    limit: int = 5,
) -> None:
    """Raise :class:`DanglingEdgeError` if an edge's ``src`` is not an id of its from-type or
    its ``dst`` not an id of its to-type. Names the first ``limit`` offenders and the count."""
    src, dst = _combine(src), _combine(dst)
    if from_ids is to_ids and src.type == dst.type:
        # one endpoint type (Person -> Person): build the id hash set once for both ends
        found = pc.fill_null(_is_in(pa.concat_arrays([src, dst]), _combine(from_ids)), False)
        bad_src, bad_dst = pc.invert(found.slice(0, len(src))), pc.invert(found.slice(len(src)))
    else:
        bad_src = pc.invert(pc.fill_null(_is_in(src, _combine(from_ids)), False))
        bad_dst = pc.invert(pc.fill_null(_is_in(dst, _combine(to_ids)), False))
    n_src = pc.sum(pc.cast(bad_src, pa.int64())).as_py() or 0
    n_dst = pc.sum(pc.cast(bad_dst, pa.int64())).as_py() or 0
    if not n_src and not n_dst:
        return
    pos = _combine(positions) if positions is not None else None
    rows = pc.indices_nonzero(pc.or_(bad_src, bad_dst)).to_pylist()[:limit]
    offenders = [
        (
            pos[i].as_py() if pos is not None else i,
            src[i].as_py(),
            dst[i].as_py(),
            bool(bad_src[i].as_py()),
            bool(bad_dst[i].as_py()),
        )
        for i in rows
    ]
    raise dangling_error(edge_typedef, offenders, n_src, n_dst)


def dangling_error(
    edge_typedef: TypeDef, offenders: Sequence[tuple[int, object, object, bool, bool]], n_src: int, n_dst: int
) -> DanglingEdgeError:
    """The error of an endpoint check: ``offenders`` are the first dangling rows in load order,
    each ``(row, src, dst, src missing, dst missing)``; ``n_src``/``n_dst`` count every
    missing end. Every endpoint check (in memory or distributed) words its error here."""
    lines = []
    for r, src, dst, bad_src, bad_dst in offenders:
        if bad_src:
            lines.append(f"edge {edge_typedef.name} row {r}: src '{src}' not found in {edge_typedef.from_type}")
        if bad_dst:
            lines.append(f"edge {edge_typedef.name} row {r}: dst '{dst}' not found in {edge_typedef.to_type}")
    total = n_src + n_dst
    more = f" (and {total - len(lines)} more)" if total > len(lines) else ""
    return DanglingEdgeError(
        "; ".join(lines) + more + f" [{n_src} dangling src, {n_dst} dangling dst]",
        table=edge_typedef.table_key,
        dangling_src=n_src,
        dangling_dst=n_dst,
    )


def check_fresh_ids(
    typedef: TypeDef, staged_ids: ArrayLike, committed_ids: ArrayLike, *, branch: str, limit: int = 5
) -> None:
    """Raise :class:`KeyConflictError` if any of ``staged_ids`` (an append's ids) is already
    among ``committed_ids`` (the target table's, on the load's branch): append is a strict
    insert (docs/invariants.md I17). The hash set is built over the smaller side and the other
    probed; the error names up to ``limit`` ids (sorted) and how many ids conflict."""
    new, old = _combine(staged_ids), _combine(committed_ids)
    if not len(new) or not len(old):
        return
    if len(new) <= len(old):
        hit = pc.fill_null(_is_in(old, new), False)
        found = pc.unique(pc.filter(old, hit))
    else:
        hit = pc.fill_null(_is_in(new, old), False)
        found = pc.unique(pc.filter(new, hit))
    if not len(found):
        return
    raise_key_conflict(typedef, found, f"already committed on branch '{branch}'", limit=limit)


#: a KEY_CONFLICT names the smallest of the first this many conflicting ids (in load order)
KEY_CONFLICT_SAMPLE = 10_000


def raise_key_conflict(typedef: TypeDef, ids: ArrayLike, why: str, *, limit: int = 5, total: int | None = None) -> None:
    """The KEY_CONFLICT error for ``ids`` (distinct values, in the order they were found; at
    least the first :data:`KEY_CONFLICT_SAMPLE` of them): type, the first ``limit`` ids, count
    (``total``, or ``len(ids)``)."""
    shown = sorted(str(v) for v in _combine(ids).to_pylist()[:KEY_CONFLICT_SAMPLE])[:limit]
    n = len(ids) if total is None else total
    more = f" (and {n - len(shown)} more)" if n > len(shown) else ""
    key = "" if typedef.is_edge or typedef.key_property is None else f" (@key {typedef.key_property})"
    raise KeyConflictError(
        f"append to {typedef.kind} {typedef.name}: {n} id(s){key} {why}: "
        + ", ".join(f"'{v}'" for v in shown)
        + more
        + "; append is a strict insert (use writeMode=merge to upsert); nothing was committed",
        table=typedef.table_key,
        keys=shown,
        conflicts=n,
    )


def src_counts(src: ArrayLike) -> pa.Table:
    """Edges per source as a table ``(src: string, count: int64)``."""
    vc = pc.value_counts(src.drop_null())  # the engine skips null src; chunks are counted in place
    return pa.table({"src": vc.field("values"), "count": pc.cast(vc.field("counts"), pa.int64())})


def shadowed_src_counts(committed_ids: ArrayLike, committed_src: ArrayLike, pending_ids: ArrayLike) -> pa.Table:
    """Per source, how many committed edges a merge replaces (committed id also pending)."""
    shadow = pc.is_in(_combine(committed_ids), value_set=_combine(pending_ids))
    return src_counts(pc.filter(_combine(committed_src), pc.fill_null(shadow, False)))


def _last_per_id(pending_src: pa.Array, pending_ids: pa.Array) -> pa.Array:
    """Merge collapses pending rows sharing an id to the last one; null ids all count."""
    t = pa.table({"id": pending_ids, "src": pending_src, _IDX: pa.array(range(len(pending_src)), pa.int64())})
    with_id = t.filter(pc.is_valid(t["id"]))
    last = with_id.group_by("id", use_threads=False).aggregate([(_IDX, "max")])
    keep = pc.is_in(t[_IDX], value_set=last[f"{_IDX}_max"])
    keep = pc.or_(keep, pc.is_null(t["id"]))
    return _combine(t.filter(keep)["src"])


def check_cardinality(
    edge_typedef: TypeDef,
    pending_src: ArrayLike,
    committed_src_counts: pa.Table | None = None,
    *,
    overwrite: bool = False,
    shadowed_committed: pa.Table | None = None,
    pending_ids: ArrayLike | None = None,
    committed_src: ArrayLike | None = None,
    limit: int = 5,
) -> int | None:
    """Apply ``@card(min..max)`` to committed + pending edges per source; return the most edges
    any source has after the load (None: a type with no @card, nothing counted).

    ``committed_src_counts`` and ``shadowed_committed`` are ``(src, count)`` tables (see
    :func:`src_counts`, :func:`shadowed_src_counts`); both are ignored when ``overwrite``.
    Pass ``pending_ids`` in merge mode to collapse pending rows sharing an id.
    ``committed_src`` (append: the committed ``src`` column itself, instead of its counts) is
    counted together with the pending sources in ONE hash pass, with no re-grouping."""
    card = edge_typedef.cardinality
    if card.min == 0 and card.max is None:
        return None
    pending = _combine(pending_src)
    if pending_ids is not None:
        pending = _last_per_id(pending, _combine(pending_ids))
    if committed_src is not None and not overwrite:
        if committed_src_counts is not None or shadowed_committed is not None or pending_ids is not None:
            raise ValueError("committed_src is the append form: no counts, shadows or pending ids with it")
        chunks = [
            c if c.type == pa.string() else c.cast(pa.string())
            for a in (pending, committed_src)
            for c in (a.chunks if isinstance(a, pa.ChunkedArray) else [a])
        ]
        pending = pa.chunked_array(chunks, pa.string())
    parts = [src_counts(pending)]
    if not overwrite:
        if committed_src_counts is not None:
            parts.append(committed_src_counts.select(["src", "count"]).cast(parts[0].schema))
        if shadowed_committed is not None:
            neg = shadowed_committed.select(["src", "count"]).cast(parts[0].schema)
            parts.append(neg.set_column(1, "count", pc.negate(neg["count"])))
    parts = parts[:1] + [p for p in parts[1:] if p.num_rows]  # nothing committed: no re-group
    if len(parts) == 1:  # pending edges only: value_counts already holds one row per source
        totals = parts[0].rename_columns(["src", "count_sum"])
    else:
        totals = pa.concat_tables(parts).group_by("src", use_threads=False).aggregate([("count", "sum")])
    totals = totals.filter(pc.greater_equal(totals["count_sum"], 1))
    over = pc.greater(totals["count_sum"], card.max) if card.max is not None else None
    under = pc.less(totals["count_sum"], card.min)
    bad = pc.or_(over, under) if over is not None else under
    offenders = totals.filter(bad).sort_by("src")
    if offenders.num_rows == 0:
        return pc.max(totals["count_sum"]).as_py() or 0
    first = list(zip(offenders["src"].to_pylist()[:limit], offenders["count_sum"].to_pylist()[:limit]))
    raise card_violation(edge_typedef, first, offenders.num_rows)


def card_violation(
    edge_typedef: TypeDef, offenders: Sequence[tuple[str, int]], violations: int
) -> CardinalityViolationError:
    """The error of an @card check: ``offenders`` are the first offending ``(src, edges)`` by
    ``src``, ``violations`` how many sources break the bounds. Every @card check (in memory or
    distributed) words its error here."""
    card = edge_typedef.cardinality
    lines = []
    for src, n in offenders:
        bound = f"max {card.max}" if card.max is not None and n > card.max else f"min {card.min}"
        lines.append(f"source '{src}' has {n} edges ({bound})")
    more = f" (and {violations - len(lines)} more)" if violations > len(lines) else ""
    return CardinalityViolationError(
        f"@card violation on edge {edge_typedef.name}: " + "; ".join(lines) + more,
        table=edge_typedef.table_key,
        violations=violations,
        first_source=offenders[0][0],
    )
