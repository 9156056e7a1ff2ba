"""RowConverter: one input RecordBatch -> one batch in exactly a graph table's schema.

Why per batch: a bulk load streams partitions of unbounded size; the converter keeps no state
between calls (its fields are derived from the catalog once), so memory is one batch. All
checks are ``pyarrow.compute`` kernels; Python loops run only to word an error. ULIDs for rows
without an id are minted in bulk with numpy (:func:`fresh_ids`).

Input columns:

* nodes: the type's properties, plus an optional ``id``;
* edges: ``from``/``to`` (or ``src``/``dst``, not both spellings of one end), optional ``id``,
  then properties.

Ids follow the engine (``build_node_batch`` / ``build_edge_batch``): with @key the id is the key
property's value as text (an explicit ``id`` must equal it); without, the given ``id`` or a fresh
ULID. See :mod:`.policy` for where and why we are stricter than the engine.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from ..errors import (
    ConstraintViolationError,
    CorruptGraphError,
    DuplicateColumnError,
    KeyIdMismatchError,
    MissingColumnError,
    NullViolationError,
    UnknownColumnError,
    UnsupportedValueError,
)
from ..schema.catalog import Property, TypeDef
from . import rules
from .casts import Ctx, cast_lossless, first_true
from .pattern import translate

#: input spellings of the edge endpoint columns -> the stored column
EDGE_ENDPOINTS = {"from": "src", "src": "src", "to": "dst", "dst": "dst"}
#: the scalar types a node @key may have (its value, as text, is the node id)
KEY_SCALARS = ("String", "I32", "I64", "U32", "U64", "Bool")


_CROCKFORD = np.frombuffer(b"0123456789ABCDEFGHJKMNPQRSTVWXYZ", np.uint8)


def encode_ulids(raw: np.ndarray) -> pa.Array:
    """ULID text (26 Crockford base32 characters, as python-ulid and the engine print it) of
    ``raw``, an ``(n, 16)`` uint8 array of big-endian 128-bit ULIDs. Vectorised: one numpy pass
    per output character instead of one Python object per row."""
    n = raw.shape[0]
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    hi = raw[:, :8].copy().view(">u8").reshape(n).astype(np.uint64)
    lo = raw[:, 8:].copy().view(">u8").reshape(n).astype(np.uint64)
    return _encode_words(hi, lo)


def _encode_words(hi: np.ndarray, lo: np.ndarray) -> pa.Array:
    """ULID text of the 128-bit values ``hi:lo`` (two uint64 arrays)."""
    n = hi.shape[0]
    out = np.empty((n, 26), np.uint8)
    five = np.uint64(31)
    for i in range(26):  # character i holds bits [5*(25-i), 5*(25-i)+5) counted from the LSB
        shift = 5 * (25 - i)
        if shift >= 64:
            v = hi >> np.uint64(shift - 64)
        elif shift + 5 <= 64:
            v = lo >> np.uint64(shift)
        else:
            v = (lo >> np.uint64(shift)) | (hi << np.uint64(64 - shift))
        out[:, i] = _CROCKFORD[(v & five).astype(np.intp)]
    offsets = np.arange(0, 26 * (n + 1), 26, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out))


def fresh_ids(n: int) -> pa.Array:
    """``n`` new ULID strings (the engine's id for rows without one), monotonic as the ULID spec
    defines it: the current Unix time in milliseconds (48 bits), then 80 bits counting up by one
    per id from a random start (top bit clear, so the count cannot overflow).

    Why not 80 random bits per id (``ulid.ULID()``): ids that share all but their last
    characters are what Lance's FSST encoder compresses fastest and smallest, and one
    ``os.urandom`` call replaces ``10 * n`` bytes of it. Unique all the same: one call's ids are
    distinct, and two calls in the same millisecond collide only if their ranges of ``n`` out of
    2^79 overlap. The JVM path mints the same way (jvm-shim ``Ulids.Mint``)."""
    if n <= 0:
        return pa.array([], pa.string())
    start = int.from_bytes(os.urandom(10), "big") & ((1 << 79) - 1)
    return _count_text(((time.time_ns() // 1_000_000) << 80) | start, n)


def _count_text(first: int, n: int) -> pa.Array:
    """ULID text of the ``n`` consecutive 128-bit values ``first``, ``first + 1``, ..
    (``first + n <= 2**128``), as :func:`_encode_words` gives it, faster: with ``k`` the fewest
    characters that count ``n`` values (``32**k >= n``), every value is ``q * 32**k + low`` with
    ``q`` either ``first``'s high part or one more (a carry), so the high ``26 - k`` characters
    are one of two strings and only the ``k`` low ones are computed per id."""
    k = 1
    while 32**k < n:
        k += 1
    width, span = 26 - k, 32**k
    q, r = divmod(first, span)
    # low < 2 * span: in 32 bits while k <= 6 (n <= 2**30), else in 64 (k <= 12, n <= 2**60)
    dtype = np.uint32 if k <= 6 else np.uint64
    low = dtype(r) + np.arange(n, dtype=dtype)
    carry = low >= dtype(span)
    row = np.empty(26, np.uint8)
    row[:width] = _crockford_digits(q, width)
    out = np.tile(row, n).reshape(n, 26)
    if carry.any():
        low[carry] -= dtype(span)
        out[carry, :width] = _crockford_digits(q + 1, width)
    for i in range(k):
        out[:, width + i] = np.take(_CROCKFORD, (low >> dtype(5 * (k - 1 - i))) & dtype(31))
    offsets = np.arange(0, 26 * (n + 1), 26, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out))


def _crockford_digits(value: int, width: int) -> np.ndarray:
    """The ``width`` low Crockford base32 digits of ``value``, most significant first."""
    return _CROCKFORD[[(value >> (5 * (width - 1 - i))) & 31 for i in range(width)]]


def fill_missing_ids(ids: pa.Array) -> pa.Array:
    """Replace null ids with fresh ULIDs (absent id -> generated, as the engine)."""
    if not ids.null_count:
        return ids
    if ids.null_count == len(ids):  # no id given (an edge load's usual input): all minted
        fresh = fresh_ids(len(ids))
        return fresh if fresh.type == ids.type else fresh.cast(ids.type)
    mask = ids.is_null()
    return pc.replace_with_mask(ids, mask, fresh_ids(ids.null_count))


class RowConverter:
    """Converts input batches for one node or edge type into its table schema.

    ``table_schema`` is the live dataset's schema when known (it decides the exact output
    types); it defaults to the catalog's. ``exact_vectors=True`` refuses to round float64
    vector components to float32."""

    def __init__(self, typedef: TypeDef, table_schema: pa.Schema | None = None, *, exact_vectors: bool = False) -> None:
        self.typedef = typedef
        self.schema = table_schema if table_schema is not None else typedef.arrow_schema()
        self.exact_vectors = exact_vectors
        #: rows converted so far whose id came from the input or a @key (not minted here)
        self.given_ids = 0
        self.label = f"{typedef.kind} {typedef.name}"
        expected = list(typedef.system_columns) + [p.name for p in typedef.properties]
        if self.schema.names != expected:
            raise CorruptGraphError(
                f"{self.label}: table columns {self.schema.names} do not match the catalog's {expected}",
                table=typedef.table_key,
            )
        self.allowed: tuple[str, ...] = (("id", "from", "to", "src", "dst") if typedef.is_edge else ("id",)) + tuple(
            p.name for p in typedef.properties
        )
        self.patterns: dict[str, list[tuple[str, str]]] = {}
        for c in typedef.checks:
            owner = f"{typedef.name}.{c.property}"
            self.patterns.setdefault(c.property, []).append((c.pattern, translate(c.pattern, owner)))
        self.ranges: dict[str, list[tuple[Any, Any]]] = {r.property: [] for r in typedef.ranges}
        for r in typedef.ranges:
            self.ranges[r.property].append((r.min, r.max))
        key = typedef.key_property
        if key is not None:
            kp = typedef.prop(key)
            if kp is None or kp.type.list or kp.type.scalar not in KEY_SCALARS:
                raise UnsupportedValueError(
                    f"{self.label}: @key on '{key}' of type "
                    f"{kp.type.describe() if kp else '?'} is not supported: the engine does not "
                    f"define the id text of such a key",
                    table=typedef.table_key,
                    column=key,
                )

    # -- helpers -------------------------------------------------------------------------

    def _ctx(self, column: str, target: str, row_offset: int, where: str) -> Ctx:
        return Ctx(self.label, column, target, row_offset, where)

    def _columns(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        names = batch.schema.names
        seen: dict[str, pa.Array] = {}
        for name, col in zip(names, batch.columns):
            if name in seen:
                raise DuplicateColumnError(
                    f"{self.label}: input has column '{name}' twice", table=self.typedef.table_key, column=name
                )
            seen[name] = col
        unknown = [n for n in names if n not in self.allowed]
        if unknown:
            raise UnknownColumnError(
                f"{self.label}: unknown column(s) {', '.join(repr(u) for u in unknown)}; "
                f"allowed: {', '.join(self.allowed)}",
                table=self.typedef.table_key,
                column=unknown[0],
                allowed=list(self.allowed),
            )
        if self.typedef.is_edge:
            for a, b in (("from", "src"), ("to", "dst")):
                if a in seen and b in seen:
                    raise DuplicateColumnError(
                        f"{self.label}: both '{a}' and '{b}' given; they name the same endpoint",
                        table=self.typedef.table_key,
                        column=b,
                    )
        return seen

    def _string_column(self, col: pa.Array, name: str, row_offset: int, where: str, nullable: bool) -> pa.Array:
        ctx = self._ctx(name, "String" + ("?" if nullable else ""), row_offset, where)
        out = cast_lossless(col, pa.string(), ctx)
        if not nullable:
            rules.check_not_null(out, ctx)
        return out

    def _vector(self, col: pa.Array, prop: Property, target: pa.DataType, ctx: Ctx) -> pa.Array:
        dim = prop.type.vector_dim or target.list_size
        src = col.type
        if pt.is_dictionary(src):
            col, src = col.dictionary_decode(), col.dictionary_decode().type
        if pt.is_null(src):
            return pa.nulls(len(col), target)
        if not (pt.is_list(src) or pt.is_large_list(src) or pt.is_fixed_size_list(src)) or not (
            pt.is_floating(src.value_type) or pt.is_integer(src.value_type)
        ):
            raise ctx.mismatch(src, target, "a vector needs a list of float or double")
        lengths = pc.list_value_length(col)
        i = first_true(pc.not_equal(lengths, dim))
        if i >= 0:
            row = ctx.row(i)
            got = lengths[i].as_py()
            raise ConstraintViolationError(
                f"{ctx.table} column '{ctx.column}' row {row}: vector property '{ctx.column}' "
                f"expects {dim} dimensions, got {got}{ctx.suffix()}",
                **ctx.context(row=row, expected=dim, got=got),
            )
        flat = pc.list_flatten(col)
        parents = pc.list_parent_indices(col)
        ectx = Ctx(ctx.table, ctx.column, ctx.target, ctx.row_offset, ctx.where, parents)
        if flat.null_count:
            j = first_true(flat.is_null())
            row = ectx.row(j)
            raise NullViolationError(
                f"{ctx.table} column '{ctx.column}' row {row}: vector has a null component{ctx.suffix()}",
                **ctx.context(row=row),
            )
        item = target.value_type
        if pt.is_float64(flat.type) and pt.is_float32(item) and not self.exact_vectors:
            values = pc.cast(flat, item, safe=False)
            j = first_true(pc.and_(pc.is_inf(values), pc.invert(pc.is_inf(flat))))
            if j >= 0:
                raise ectx.bad_value(j, flat[j].as_py(), flat.type, "overflows float32")
        else:
            values = cast_lossless(flat, item, ectx)
        if col.null_count:
            # null rows contribute no values; give each a run of `dim` null placeholders
            placeholder = pa.scalar([None] * dim, pa.list_(item))
            as_list = pa.ListArray.from_arrays(
                pa.concat_arrays(
                    [pa.array([0], pa.int32()), pc.cast(pc.cumulative_sum(pc.fill_null(lengths, 0)), pa.int32())]
                ),
                values,
            )
            filled = pc.if_else(col.is_valid(), as_list, placeholder)
            values = pc.list_flatten(filled)
        return pa.FixedSizeListArray.from_arrays(values, type=target, mask=col.is_null() if col.null_count else None)

    def _property(
        self, col: pa.Array | None, prop: Property, field: pa.Field, n: int, row_offset: int, where: str
    ) -> pa.Array:
        ctx = self._ctx(prop.name, prop.type.describe(), row_offset, where)
        if col is None:
            if not prop.type.nullable:
                raise MissingColumnError(
                    f"{self.label}: missing column '{prop.name}' (non-nullable {prop.type.describe()}){ctx.suffix()}",
                    **ctx.context(),
                )
            return pa.nulls(n, field.type)
        if prop.type.scalar == "Blob":
            raise UnsupportedValueError(
                f"{self.label} column '{prop.name}': Blob values are not supported by the connector yet{ctx.suffix()}",
                **ctx.context(),
            )
        if prop.type.scalar == "Vector":
            out = self._vector(col, prop, field.type, ctx)
        else:
            out = cast_lossless(col, field.type, ctx)
        if not prop.type.nullable:
            rules.check_not_null(out, ctx)
        if prop.type.enum_values is not None:
            rules.check_enum(out, prop.type.enum_values, ctx, self.typedef.name)
        for lo, hi in self.ranges.get(prop.name, ()):
            rules.check_range(out, lo, hi, ctx, self.typedef.name)
        for pattern, translated in self.patterns.get(prop.name, ()):
            rules.check_pattern(out, pattern, translated, ctx, self.typedef.name)
        return out

    def _node_ids(
        self, cols: dict[str, pa.Array], props: dict[str, pa.Array], n: int, row_offset: int, where: str
    ) -> pa.Array:
        explicit = cols.get("id")
        if explicit is not None:
            explicit = self._string_column(explicit, "id", row_offset, where, nullable=True)
        key = self.typedef.key_property
        if key is None:
            if explicit is not None:
                self.given_ids += n - explicit.null_count
            return fill_missing_ids(explicit if explicit is not None else pa.nulls(n, pa.string()))
        self.given_ids += n
        derived = props[key]
        derived = pc.cast(derived, pa.string())  # integers: decimal text; Bool: "true"/"false"
        if derived.null_count:  # only if the catalog marks the key nullable, which it must not
            rules.check_not_null(derived, self._ctx(key, "@key", row_offset, where))
        if explicit is not None:
            differs = pc.and_(explicit.is_valid(), pc.not_equal(explicit, derived))
            i = first_true(differs)
            if i >= 0:
                row = row_offset + i
                raise KeyIdMismatchError(
                    f"{self.label} row {row}: explicit id {explicit[i].as_py()!r} does not match "
                    f"@key property '{key}' value {derived[i].as_py()!r}"
                    f"{f' ({where})' if where else ''}",
                    table=self.typedef.table_key,
                    column="id",
                    row=row,
                    value=explicit[i].as_py(),
                    key_value=derived[i].as_py(),
                )
        return derived

    # -- public ----------------------------------------------------------------------------

    def convert(self, batch: pa.RecordBatch, *, row_offset: int = 0, where: str = "") -> pa.RecordBatch:
        """Convert one batch. ``row_offset`` is added to row numbers in errors (rows are
        0-based across the load); ``where`` is appended to messages (e.g. a file name)."""
        cols = self._columns(batch)
        n = batch.num_rows
        props: dict[str, pa.Array] = {}
        for field in self.schema:
            prop = self.typedef.prop(field.name)
            if prop is None:
                continue
            props[prop.name] = self._property(cols.get(prop.name), prop, field, n, row_offset, where)
        out: dict[str, pa.Array] = {}
        if self.typedef.is_edge:
            for end, stored in (("from", "src"), ("to", "dst")):
                col = cols.get(end, cols.get(stored))
                if col is None:
                    raise MissingColumnError(
                        f"{self.label}: missing endpoint column '{end}' (or '{stored}')"
                        f"{f' ({where})' if where else ''}",
                        table=self.typedef.table_key,
                        column=end,
                    )
                out[stored] = self._string_column(col, stored, row_offset, where, nullable=False)
            given = cols.get("id")
            ids = (
                self._string_column(given, "id", row_offset, where, nullable=True)
                if given is not None
                else pa.nulls(n, pa.string())
            )
            self.given_ids += n - ids.null_count
            out["id"] = fill_missing_ids(ids)
        else:
            out["id"] = self._node_ids(cols, props, n, row_offset, where)
        out.update(props)
        arrays = []
        for field in self.schema:
            arr = out[field.name]
            if arr.type != field.type:
                arr = pc.cast(arr, field.type)  # only string <-> large_string remain here
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


__all__ = ["RowConverter", "EDGE_ENDPOINTS", "fresh_ids", "fill_missing_ids", "encode_ulids"]
