"""Spark filter pushdown -> Lance SQL filter strings.

Why only some filters: a pushed filter is NOT re-checked by Spark, so a translation must give
exactly Spark's answer for every row (three-valued logic included) or it must not be pushed.
Whatever is not translated is handed back to Spark, which then applies it itself; so pushdown
only ever changes speed, never results.

Pushed, on columns whose type compares identically in Spark and Lance (system columns, String,
enum, Bool, I32, I64, U32, U64, Date; never F32/F64, lists, vectors, Blob or DateTime):
``EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In,
IsNull, IsNotNull, Not, And, Or`` (the last two only if the running pyspark defines them),
``StringStartsWith, StringEndsWith, StringContains``.

Kept for Spark: ``F32``/``F64`` columns (Lance compares floats in IEEE total order, where
-0.0 < 0.0 and a NaN with its sign bit set is the smallest value; Spark has -0.0 = 0.0 and every
NaN the largest: pushed, ``x >= 0.0`` dropped the rows holding -0.0), ``DateTime`` columns
(stored as Date64; Spark's timestamp literals are microsecond and time-zone bearing, and Lance's
coercion of them against Date64 is not a documented exact contract), ``None`` inside ``In``,
values outside the column type's range, nested column paths, and anything unknown.

Injection safety: every value is rendered here from a Python value of a checked type. Strings
are single-quoted with quotes doubled; LIKE patterns escape ``\\``, ``%`` and ``_`` with an
explicit ``ESCAPE '\\'``; dates are typed literals; numbers come from ``int``/``float``
``repr``. Column names are backtick-quoted.

Pure functions, no pyspark import (filters are duck-typed by class name): runs wherever the
reader's ``pushFilters`` runs (Spark's planning worker, on the driver).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..store.writes import quote_sql_string

LIKE_ESCAPE = "\\"

_INT_RANGES = {
    "I32": (-(2**31), 2**31 - 1),
    "I64": (-(2**63), 2**63 - 1),
    "U32": (0, 2**32 - 1),
    "U64": (0, 2**63 - 1),
}  # U64: what Lance SQL parses as a literal
_STRINGS = ("String", "system")
_PUSHABLE = frozenset(("String", "system", "Bool", "I32", "I64", "U32", "U64", "Date"))


@dataclass(frozen=True)
class ColumnKind:
    """What the translator needs to know about a column: its stored scalar kind
    ("system" for id/src/dst, else the catalog scalar) and whether it is a list/vector."""

    scalar: str
    is_list: bool = False

    @property
    def pushable(self) -> bool:
        return not self.is_list and self.scalar in _PUSHABLE


class _Untranslatable(Exception):
    pass


def quote_identifier(name: str) -> str:
    """A Lance SQL column reference. Names come from the catalog (``[a-z_][A-Za-z0-9_]*``);
    anything with a backtick is refused rather than escaped."""
    if "`" in name or not name:
        raise _Untranslatable(name)
    return f"`{name}`"


def escape_like(value: str) -> str:
    """Escape LIKE metacharacters (and the escape character itself) in a literal substring."""
    e = LIKE_ESCAPE
    return value.replace(e, e + e).replace("%", e + "%").replace("_", e + "_")


def render_value(value: Any, kind: ColumnKind) -> str:
    """A SQL literal for ``value`` compared against a column of ``kind``; raises
    ``_Untranslatable`` when the pair cannot be rendered exactly."""
    s = kind.scalar
    if value is None:
        raise _Untranslatable("null literal")
    if s in _STRINGS:
        if not isinstance(value, str):
            raise _Untranslatable(value)
        return quote_sql_string(value)
    if s == "Bool":
        if not isinstance(value, bool):
            raise _Untranslatable(value)
        return "TRUE" if value else "FALSE"
    if s in _INT_RANGES:
        if isinstance(value, bool):
            raise _Untranslatable(value)
        if isinstance(value, decimal.Decimal):
            if not value.is_finite() or value != value.to_integral_value():
                raise _Untranslatable(value)
            value = int(value)
        if not isinstance(value, int):
            raise _Untranslatable(value)
        lo, hi = _INT_RANGES[s]
        if not lo <= value <= hi:
            raise _Untranslatable(value)
        return str(int(value))
    if s == "Date":
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise _Untranslatable(value)
        return f"date '{value.isoformat()}'"
    raise _Untranslatable(value)


_CMP = {"EqualTo": "=", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<", "LessThanOrEqual": "<="}


def _column(f: Any, columns: Mapping[str, ColumnKind]) -> tuple[str, ColumnKind]:
    path = getattr(f, "attribute", None)
    if not isinstance(path, tuple) or len(path) != 1 or not isinstance(path[0], str):
        raise _Untranslatable(path)
    name = path[0]
    kind = columns.get(name)
    if kind is None:  # Spark is case-insensitive by default; catalog names are unique either way
        hits = [c for c in columns if c.lower() == name.lower()]
        if len(hits) != 1:
            raise _Untranslatable(name)
        name, kind = hits[0], columns[hits[0]]
    if not kind.pushable:
        raise _Untranslatable(name)
    return quote_identifier(name), kind


def _translate(f: Any, columns: Mapping[str, ColumnKind]) -> str:
    name = type(f).__name__
    if name in _CMP:
        col, kind = _column(f, columns)
        return f"({col} {_CMP[name]} {render_value(f.value, kind)})"
    if name == "EqualNullSafe":
        col, kind = _column(f, columns)
        if f.value is None:
            return f"({col} IS NULL)"
        # never NULL, so NOT(...) keeps Spark's null-safe meaning
        return f"({col} IS NOT NULL AND {col} = {render_value(f.value, kind)})"
    if name == "In":
        col, kind = _column(f, columns)
        values = tuple(f.value)
        if not values:
            raise _Untranslatable("empty IN")
        return f"({col} IN (" + ", ".join(render_value(v, kind) for v in values) + "))"
    if name == "IsNull":
        col, _ = _column(f, columns)
        return f"({col} IS NULL)"
    if name == "IsNotNull":
        col, _ = _column(f, columns)
        return f"({col} IS NOT NULL)"
    if name == "Not":
        return f"(NOT {_translate(f.child, columns)})"
    if name in ("And", "Or"):
        return f"({_translate(f.left, columns)} {name.upper()} {_translate(f.right, columns)})"
    if name in ("StringStartsWith", "StringEndsWith", "StringContains"):
        col, kind = _column(f, columns)
        if kind.scalar not in _STRINGS or not isinstance(f.value, str):
            raise _Untranslatable(f.value)
        body = escape_like(f.value)
        pattern = {"StringStartsWith": body + "%", "StringEndsWith": "%" + body, "StringContains": "%" + body + "%"}[
            name
        ]
        return f"({col} LIKE {quote_sql_string(pattern)} ESCAPE {quote_sql_string(LIKE_ESCAPE)})"
    raise _Untranslatable(name)


def translate(f: Any, columns: Mapping[str, ColumnKind]) -> str | None:
    """The Lance SQL for one Spark filter, or None if it must stay with Spark."""
    try:
        return _translate(f, columns)
    except _Untranslatable:
        return None


def split_filters(filters: Iterable[Any], columns: Mapping[str, ColumnKind]) -> tuple[list[str], list[Any]]:
    """Translate what can be translated. Returns (pushed SQL conjuncts, filters left for Spark);
    the left-over filters are the input objects themselves, as Spark requires."""
    pushed: list[str] = []
    kept: list[Any] = []
    for f in filters:
        sql = translate(f, columns)
        if sql is None:
            kept.append(f)
        else:
            pushed.append(sql)
    return pushed, kept


def combine(conjuncts: Sequence[str]) -> str | None:
    """AND the conjuncts into one Lance filter string (None when there are none)."""
    return " AND ".join(conjuncts) if conjuncts else None
