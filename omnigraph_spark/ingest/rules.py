"""Per-row rules of the catalog, applied to already-converted columns: non-null, enum
membership, @range, @check. Vectorised; Python runs only to word an error.

Why separate from the casts: the same rules apply whatever the input was (DataFrame column,
JSONL values), and the engine applies them after building typed columns, too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from ..errors import ConstraintViolationError, NullViolationError
from .casts import Ctx, first_true
from .pattern import matches

Number = int | float


def _flat(col: pa.Array, ctx: Ctx) -> tuple[pa.Array, Ctx]:
    """Scalars as they are; list columns as their elements with a row map."""
    if pt.is_list(col.type) or pt.is_large_list(col.type):
        parents = pc.list_parent_indices(col)
        return pc.list_flatten(col), Ctx(ctx.table, ctx.column, ctx.target, ctx.row_offset, ctx.where, parents)
    return col, ctx


def check_not_null(col: pa.Array, ctx: Ctx) -> None:
    if col.null_count:
        i = first_true(col.is_null())
        row = ctx.row(i)
        raise NullViolationError(
            f"{ctx.table} column '{ctx.column}' row {row}: non-nullable property "
            f"'{ctx.column}' ({ctx.target}) is null{ctx.suffix()}",
            **ctx.context(row=row),
        )


def check_enum(col: pa.Array, allowed: Sequence[str], ctx: Ctx, type_name: str) -> None:
    values, vctx = _flat(col, ctx)
    ok = pc.is_in(values, value_set=pa.array(list(allowed), pa.string()))
    bad = pc.and_(values.is_valid(), pc.invert(ok))
    i = first_true(bad)
    if i >= 0:
        row, value = vctx.row(i), values[i].as_py()
        raise ConstraintViolationError(
            f"{ctx.table} column '{ctx.column}' row {row}: invalid enum value {value!r} for "
            f"{type_name}.{ctx.column} (expected: {', '.join(allowed)}){ctx.suffix()}",
            **ctx.context(row=row, value=value, allowed=list(allowed)),
        )


@dataclass(frozen=True)
class _Side:
    op: str  # "<" (below min) or ">" (above max)
    bound: Number


def _violates(values: pa.Array, side: _Side) -> pa.Array | None:
    """Mask of values beyond ``side``, or None when no value of this type can be."""
    t = values.type
    bound = side.bound
    if pt.is_integer(t) and isinstance(bound, int):
        bits = t.bit_width
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if pt.is_signed_integer(t) else (0, (1 << bits) - 1)
        if side.op == "<":
            if bound <= lo:
                return None
            if bound > hi:
                return values.is_valid()
            return pc.less(values, pa.scalar(bound, t))
        if bound >= hi:
            return None
        if bound < lo:
            return values.is_valid()
        return pc.greater(values, pa.scalar(bound, t))
    wide = pc.cast(values, pa.float64(), safe=False)  # the engine's comparison domain
    b = pa.scalar(float(bound), pa.float64())
    return pc.less(wide, b) if side.op == "<" else pc.greater(wide, b)


def check_range(col: pa.Array, lo: Number | None, hi: Number | None, ctx: Ctx, type_name: str) -> None:
    """Inclusive bounds, as the engine (``value < min`` / ``value > max`` fail); NaN fails."""
    values, vctx = _flat(col, ctx)
    if not (pt.is_integer(values.type) or pt.is_floating(values.type)):
        return
    owner = f"{type_name}.{ctx.column}"
    if pt.is_floating(values.type):
        i = first_true(pc.is_nan(values))
        if i >= 0:
            row = vctx.row(i)
            raise ConstraintViolationError(
                f"{ctx.table} column '{ctx.column}' row {row}: @range violation on {owner}: value is NaN{ctx.suffix()}",
                **ctx.context(row=row, value="NaN"),
            )
    for side in ([_Side("<", lo)] if lo is not None else []) + ([_Side(">", hi)] if hi is not None else []):
        mask = _violates(values, side)
        if mask is None:
            continue
        i = first_true(mask)
        if i >= 0:
            row, value = vctx.row(i), values[i].as_py()
            word = "min" if side.op == "<" else "max"
            raise ConstraintViolationError(
                f"{ctx.table} column '{ctx.column}' row {row}: @range violation on {owner}: "
                f"value {value} {side.op} {word} {side.bound}{ctx.suffix()}",
                **ctx.context(row=row, value=value, bound=side.bound),
            )


def check_pattern(col: pa.Array, pattern: str, translated: str, ctx: Ctx, type_name: str) -> None:
    values, vctx = _flat(col, ctx)
    if not (pt.is_string(values.type) or pt.is_large_string(values.type)):
        return
    bad = pc.and_(values.is_valid(), pc.invert(pc.fill_null(matches(values, translated), True)))
    i = first_true(bad)
    if i >= 0:
        row, value = vctx.row(i), values[i].as_py()
        raise ConstraintViolationError(
            f"{ctx.table} column '{ctx.column}' row {row}: @check violation on "
            f"{type_name}.{ctx.column}: value {value!r} does not match pattern {pattern!r}"
            f"{ctx.suffix()}",
            **ctx.context(row=row, value=value, pattern=pattern),
        )
