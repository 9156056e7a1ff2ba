"""Graph integrity across writes (docs/invariants.md I18): what a delete removes, which edges a
node delete cascades to, and which committed edges a node overwrite would orphan.

Driver-side and vectorised, over id/src/dst columns only (never whole rows), like the other
load-wide checks (:mod:`.checks`). The caller reads the columns of the snapshot the commit
lands on and decides what to do with the answers (refuse with DANGLING_EDGE, or delete in the
same commit).

Delete input (:func:`delete_keys`): a node is named by its ``@key`` column (its id is the key's
text, as :class:`~.convert.RowConverter` derives it) or its ``id``; an edge by ``id``, or by
``src`` + ``dst`` (``from`` + ``to``), which names every edge between the two nodes. Other
columns are ignored, so a change feed's full pre-image rows can be passed as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import MissingColumnError, NullViolationError, UnsupportedValueError
from ..schema.catalog import TypeDef
from .convert import KEY_SCALARS

DELETE_KEYS_ID = pa.schema([pa.field("id", pa.string())])
DELETE_KEYS_ENDS = pa.schema([pa.field("src", pa.string()), pa.field("dst", pa.string())])
#: the columns of an edge the checks read
EDGE_COLUMNS = ("id", "src", "dst")
#: how many edges a message names (:func:`describe_edges`)
DESCRIBED_EDGES = 3


def delete_columns(typedef: TypeDef, names: Sequence[str]) -> tuple[str, ...]:
    """The input columns a delete of ``typedef`` reads from a frame with columns ``names``
    (raises MissingColumnError naming what a delete accepts)."""
    given = set(names)
    if typedef.is_edge:
        if "id" in given:
            return ("id",)
        src = "src" if "src" in given else "from" if "from" in given else None
        dst = "dst" if "dst" in given else "to" if "to" in given else None
        if src and dst:
            return (src, dst)
        raise MissingColumnError(
            f"a delete of edge {typedef.name} needs 'id', or 'src' and 'dst' ('from' and 'to'); got {sorted(given)}",
            table=typedef.table_key,
            column="id",
        )
    key = typedef.key_property
    if key is not None and key in given:
        return (key,)
    if "id" in given:
        return ("id",)
    want = f"its @key '{key}' or 'id'" if key else "'id'"
    raise MissingColumnError(
        f"a delete of node {typedef.name} needs {want}; got {sorted(given)}",
        table=typedef.table_key,
        column=key or "id",
    )


def delete_keys(typedef: TypeDef, data: pa.Table) -> pa.Table:
    """The rows a delete names, as ``id`` strings (:data:`DELETE_KEYS_ID`) or edge ``src`` +
    ``dst`` strings (:data:`DELETE_KEYS_ENDS`). A null key is a NULL_VIOLATION."""
    cols = delete_columns(typedef, data.column_names)
    out = []
    for c in cols:
        col = data.column(c)
        if c == typedef.key_property and not typedef.is_edge:
            kp = typedef.prop(c)
            if kp is None or kp.type.list or kp.type.scalar not in KEY_SCALARS:
                raise UnsupportedValueError(
                    f"node {typedef.name}: a delete by @key '{c}' of this type is not supported; give 'id'",
                    table=typedef.table_key,
                    column=c,
                )
        if col.null_count:
            raise NullViolationError(
                f"delete of {typedef.kind} {typedef.name}: column '{c}' has {col.null_count} "
                "null(s); every deleted row must be named",
                table=typedef.table_key,
                column=c,
            )
        out.append(pc.cast(col, pa.string()))
    schema = DELETE_KEYS_ENDS if len(cols) == 2 else DELETE_KEYS_ID
    return pa.Table.from_arrays(out, schema=schema)


def as_strings(a) -> pa.Array:
    """``a`` as one string array (chunks combined, other types cast)."""
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    return a if a.type == pa.string() else pc.cast(a, pa.string())


def member(values, value_set) -> pa.Array:
    """``values`` (as strings) in ``value_set``: a boolean array, null counted as absent."""
    return pc.fill_null(pc.is_in(as_strings(values), value_set=as_strings(value_set)), False)


def resolve_node_delete(committed_ids, keys) -> tuple[pa.Array, int]:
    """(the committed ids a node delete removes, how many distinct keys matched no row)."""
    wanted = pc.unique(as_strings(keys))
    ids = as_strings(committed_ids)
    found = pc.unique(pc.filter(ids, member(ids, wanted)))
    return found, len(wanted) - len(found)


def resolve_edge_delete(committed: pa.Table, keys: pa.Table) -> tuple[pa.Array, int]:
    """(the committed edge ids an edge delete removes, how many distinct keys matched none).
    Keys are ``id`` or ``src`` + ``dst`` (every edge between the two nodes)."""
    if "id" in keys.column_names:
        return resolve_node_delete(committed.column("id"), keys.column("id"))
    pairs = keys.select(["src", "dst"]).group_by(["src", "dst"], use_threads=False).aggregate([])
    edges = pa.table(
        {
            "id": as_strings(committed.column("id")),
            "src": as_strings(committed.column("src")),
            "dst": as_strings(committed.column("dst")),
        }
    )
    hit = edges.join(pairs, keys=["src", "dst"], join_type="inner", use_threads=False)
    missing = pairs.join(
        edges.select(["src", "dst"]), keys=["src", "dst"], join_type="left anti", use_threads=False
    ).num_rows
    return pc.unique(hit.column("id").combine_chunks()) if hit.num_rows else pa.array([], pa.string()), missing


def pointing_at(edges: pa.Table, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> pa.Table:
    """The edges whose ``src`` is in ``src_gone`` or ``dst`` in ``dst_gone`` (None: that end's
    node type lost nothing)."""
    hit = None
    for col, gone in (("src", src_gone), ("dst", dst_gone)):
        if gone is not None and len(gone):
            h = member(edges.column(col), gone)
            hit = h if hit is None else pc.or_(hit, h)
    return edges.slice(0, 0) if hit is None else edges.filter(hit)


def incident_edges(committed: pa.Table, src_gone: pa.Array | None, dst_gone: pa.Array | None) -> pa.Array:
    """Ids of the committed edges whose ``src`` is in ``src_gone`` or ``dst`` in ``dst_gone``
    (the edges a node delete cascades to)."""
    return as_strings(pointing_at(committed, src_gone, dst_gone).column("id"))


def orphaned_edges(committed: pa.Table, src_ids: pa.Array | None, dst_ids: pa.Array | None) -> pa.Table:
    """The committed edges (``id, src, dst``) whose ``src`` is not in ``src_ids`` or ``dst`` not
    in ``dst_ids`` (the node ids after the load; None: that end's node type keeps its ids)."""
    bad = None
    for col, ids in (("src", src_ids), ("dst", dst_ids)):
        if ids is not None:
            b = pc.invert(member(committed.column(col), ids))
            bad = b if bad is None else pc.or_(bad, b)
    if bad is None:
        return committed.slice(0, 0)
    return committed.filter(bad)


def describe_edges(edges: pa.Table, limit: int = DESCRIBED_EDGES) -> list[str]:
    """The first few edges of ``edges`` (in its order) as ``'src' -> 'dst'`` for messages."""
    return [
        f"'{s}' -> '{d}'"
        for s, d in zip(edges.column("src").to_pylist()[:limit], edges.column("dst").to_pylist()[:limit])
    ]
