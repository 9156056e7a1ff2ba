"""Lossless casts from whatever a DataFrame holds to the catalog's Arrow types.

Why our own rules instead of ``pyarrow.compute.cast``: Arrow's safe cast still rounds
(float64 -> float32, int -> float beyond 2**53, decimal -> float) and its errors name neither
the row nor the column. Here every accepted cast is exact, decided with vectorised kernels; only
once a batch is known to be bad do we walk it in Python, to name the first offending row.

Accepted (source -> target):

* the same type; any type -> its target when the source is all-null (``pa.null()``);
* dictionary-encoded input: decoded first, then these rules;
* string / large_string / string_view -> String;
* integer -> integer when every value fits; integer -> float when every value is exact;
* float32 -> float64; float64 -> float32 when every value is exact (NaN and +-inf allowed);
* decimal -> integer when every value is integral and fits; decimal -> float when every value
  converts back to the same decimal;
* date32 -> Date (date32) and DateTime (date64, exact); date64 -> DateTime;
* timestamp with a time zone (any unit) -> DateTime when no value has a sub-millisecond part;
* string -> Date / DateTime for the literals of :mod:`.temporal`;
* list / large_list / fixed_size_list -> list, element by element with the same rules.

Everything else is a :class:`TypeMismatchError` naming column, source type and target type.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from ..errors import TypeMismatchError
from .temporal import parse_date_strings, parse_datetime_strings


@dataclass(frozen=True)
class Ctx:
    """Where a column is, for error messages. ``parents`` maps list elements to their row."""

    table: str  # "node Person" / "edge Knows"
    column: str
    target: str  # the catalog type as written in .pg, e.g. "I32?" or "[Date]"
    row_offset: int = 0
    where: str = ""
    parents: pa.Array | None = None

    def row(self, index: int) -> int:
        if self.parents is not None:
            index = self.parents[index].as_py()
        return self.row_offset + index

    def suffix(self) -> str:
        return f" ({self.where})" if self.where else ""

    def context(self, **extra: Any) -> dict:
        out = {"table": self.table, "column": self.column}
        if self.where:
            out["where"] = self.where
        out.update(extra)
        return out

    def mismatch(self, source: pa.DataType, target: pa.DataType, why: str = "") -> TypeMismatchError:
        detail = f": {why}" if why else ""
        return TypeMismatchError(
            f"{self.table} column '{self.column}': cannot convert {source} to {self.target} "
            f"({target}) without loss{detail}{self.suffix()}",
            **self.context(source_type=str(source), target_type=str(target)),
        )

    def bad_value(self, index: int, value: Any, source: pa.DataType, why: str) -> TypeMismatchError:
        row = self.row(index)
        return TypeMismatchError(
            f"{self.table} column '{self.column}' row {row}: value {value!r} ({source}) {why}{self.suffix()}",
            **self.context(row=row, value=repr(value), source_type=str(source)),
        )


def first_true(mask: pa.Array) -> int:
    """Index of the first true entry of a boolean array (nulls count as false), or -1."""
    return pc.index(pc.fill_null(mask, False), True).as_py()


def _int_bounds(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pt.is_signed_integer(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _int_to_int(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    smin, smax = _int_bounds(arr.type)
    tmin, tmax = _int_bounds(target)
    bad = None
    if tmin > smin:
        bad = pc.less(arr, pa.scalar(tmin, arr.type))
    if tmax < smax:
        over = pc.greater(arr, pa.scalar(tmax, arr.type))
        bad = over if bad is None else pc.or_(bad, over)
    if bad is not None:
        i = first_true(bad)
        if i >= 0:
            raise ctx.bad_value(i, arr[i].as_py(), arr.type, f"does not fit {target} (range {tmin}..{tmax})")
    return pc.cast(arr, target, safe=False)


def _int_to_float(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    out = pc.cast(arr, target, safe=False)
    wide = pc.cast(out, pa.float64())
    smin, smax = _int_bounds(arr.type)
    # a value rounded past the source range cannot cast back meaningfully: flag it directly
    outside = pc.or_(pc.greater_equal(wide, float(smax) + 1.0), pc.less(wide, float(smin)))
    back = pc.cast(pc.if_else(outside, pa.scalar(0.0, target), out), arr.type, safe=False)
    bad = pc.or_(outside, pc.not_equal(back, arr))
    i = first_true(bad)
    if i >= 0:
        raise ctx.bad_value(i, arr[i].as_py(), arr.type, f"is not exactly representable as {target}")
    return out


def _float_to_float(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    if arr.type.bit_width <= target.bit_width:
        return pc.cast(arr, target)
    out = pc.cast(arr, target, safe=False)
    back = pc.cast(out, arr.type)
    bad = pc.and_(pc.not_equal(back, arr), pc.invert(pc.is_nan(arr)))
    i = first_true(bad)
    if i >= 0:
        raise ctx.bad_value(i, arr[i].as_py(), arr.type, f"is not exactly representable as {target}")
    return out


def _first_python(arr: pa.Array, is_bad: Callable[[Any], bool]) -> int:
    """Error path only: the first non-null value the Python predicate rejects."""
    for i, v in enumerate(arr.to_pylist()):
        if v is not None and is_bad(v):
            return i
    return -1


def _decimal_to_int(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        tmin, tmax = _int_bounds(target)
        i = _first_python(arr, lambda v: v != v.to_integral_value() or not tmin <= int(v) <= tmax)
        if i < 0:
            raise ctx.mismatch(arr.type, target) from e
        raise ctx.bad_value(
            i, arr[i].as_py(), arr.type, f"is not an integer within {target} (range {tmin}..{tmax})"
        ) from e


def _decimal_to_float(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    # through the decimal text: Arrow's parser rounds to the nearest float, its decimal -> float
    # cast can miss it by an ulp (0.10 -> 0.099999994 as float32)
    out = pc.cast(pc.cast(arr, pa.string()), target)
    try:
        back = pc.cast(pc.cast(out, pa.float64()), arr.type, safe=True)
        bad = pc.not_equal(back, arr)
        i = first_true(bad)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        quantum = Decimal(1).scaleb(-arr.type.scale)
        narrow = pt.is_float32(target)

        def lossy(v: Decimal) -> bool:
            f = float(v)
            if narrow:
                f = pa.scalar(f, pa.float32()).as_py()
            return not math.isfinite(f) or Decimal(f).quantize(quantum) != v

        i = _first_python(arr, lossy)
        if i < 0:
            raise ctx.mismatch(arr.type, target) from e
    if i >= 0:
        raise ctx.bad_value(i, arr[i].as_py(), arr.type, f"does not convert to {target} and back exactly")
    return out


def _timestamp_to_date64(arr: pa.Array, ctx: Ctx) -> pa.Array:
    if arr.type.tz is None:
        raise ctx.mismatch(
            arr.type,
            pa.date64(),
            "a timestamp without a time zone is ambiguous; convert it to UTC (timestamp with tz) first",
        )
    raw = pc.cast(arr, pa.int64())
    per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[arr.type.unit]
    if per_ms is None:
        ms = pc.multiply_checked(raw, 1000)
    elif per_ms == 1:
        ms = raw
    else:
        ms = pc.divide(raw, per_ms)
        bad = pc.not_equal(pc.multiply(ms, per_ms), raw)
        i = first_true(bad)
        if i >= 0:
            raise ctx.bad_value(i, arr[i].as_py(), arr.type, "has a sub-millisecond part; DateTime stores milliseconds")
    return pc.cast(ms, pa.date64())


def _strings_to_temporal(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    parse = parse_date_strings if pt.is_date32(target) else parse_datetime_strings
    out, bad = parse(arr)
    i = first_true(bad)
    if i >= 0:
        kind = "Date" if pt.is_date32(target) else "DateTime"
        raise ctx.bad_value(i, arr[i].as_py(), arr.type, f"is not a valid {kind} literal")
    return out


def _list_to_list(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    values = pc.list_flatten(arr)
    parents = pc.list_parent_indices(arr)
    if ctx.parents is not None:  # never nested in the catalog, but keep rows right if it is
        parents = pc.take(ctx.parents, parents)
    inner = Ctx(ctx.table, ctx.column, ctx.target, ctx.row_offset, ctx.where, parents)
    converted = cast_lossless(values, target.value_type, inner)
    lengths = pc.fill_null(pc.list_value_length(arr), 0)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cast(pc.cumulative_sum(lengths), pa.int32())])
    mask = arr.is_null() if arr.null_count else None
    return pa.ListArray.from_arrays(offsets, converted, type=target, mask=mask)


def cast_lossless(arr: pa.Array, target: pa.DataType, ctx: Ctx) -> pa.Array:
    """Convert ``arr`` to ``target`` exactly, or raise :class:`TypeMismatchError`."""
    src = arr.type
    if pt.is_dictionary(src):
        return cast_lossless(arr.dictionary_decode(), target, ctx)
    if src == target:
        return arr
    if pt.is_null(src):
        return pa.nulls(len(arr), target)
    if pt.is_string(target) or pt.is_large_string(target):
        if pt.is_string(src) or pt.is_large_string(src) or pt.is_string_view(src):
            return pc.cast(arr, target)
    elif pt.is_boolean(target):
        pass
    elif pt.is_integer(target):
        if pt.is_integer(src):
            return _int_to_int(arr, target, ctx)
        if pt.is_decimal(src):
            return _decimal_to_int(arr, target, ctx)
    elif pt.is_floating(target):
        if pt.is_floating(src) and not pt.is_float16(src):
            return _float_to_float(arr, target, ctx)
        if pt.is_integer(src):
            return _int_to_float(arr, target, ctx)
        if pt.is_decimal(src):
            return _decimal_to_float(arr, target, ctx)
    elif pt.is_date32(target):
        if pt.is_string(src) or pt.is_large_string(src) or pt.is_string_view(src):
            return _strings_to_temporal(arr, target, ctx)
    elif pt.is_date64(target):
        if pt.is_date32(src):
            return pc.cast(arr, target)
        if pt.is_timestamp(src):
            return _timestamp_to_date64(arr, ctx)
        if pt.is_string(src) or pt.is_large_string(src) or pt.is_string_view(src):
            return _strings_to_temporal(arr, target, ctx)
    elif pt.is_list(target):
        if pt.is_list(src) or pt.is_large_list(src) or pt.is_fixed_size_list(src) or pt.is_list_view(src):
            if pt.is_list_view(src):
                arr = pc.cast(arr, pa.list_(src.value_type))
            return _list_to_list(arr, target, ctx)
    raise ctx.mismatch(src, target)
