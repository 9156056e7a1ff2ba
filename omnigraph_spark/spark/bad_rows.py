"""Bad rows: a data error found in a staging task is a result, not a task failure.

Why: a row that breaks a catalog rule (type, null, enum, range, pattern, key, endpoint) breaks
it on every attempt. Raised in a task, Spark would log ~140 lines of ``Aborting task`` /
``TaskSetManager`` noise, retry the task ``spark.task.maxFailures`` times (recomputing its
input each time) and hand the caller an untyped ``PythonException``. Instead a task that finds
one stops consuming its input, deletes what it staged, and returns a :class:`Refusal` (the
first error's code and message, the first few offending rows) as its result; the driver aborts
the other tasks' files and raises ONE typed error (:func:`raise_refused`). Anything else (I/O,
a lost executor, a bug) still raises in the task, so Spark retries it.

The same data errors can instead be quarantined (option ``rejectedRowsPath``, see
:mod:`~omnigraph_spark.store.quarantine`): :func:`split_bad_rows` finds every offending row of a batch with the
converter's own checks, so a rejected row's reason is the message the load would have failed
with.

The JVM sink reports its row-rule errors the same way (``FragmentStager`` hands over a task's
``error`` in place of fragments); :meth:`Refusal.from_json` reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import DataError, OmnigraphError
from .error_tags import error_classes

#: offending rows a refused load names (the first few; the first one's message is the error's)
MAX_REPORTED_ROWS = 5


def is_row_data_error(e: BaseException) -> bool:
    """A deterministic data error (retrying the task cannot help): any :class:`DataError`."""
    return isinstance(e, DataError)


def _as_text(value: Any) -> str | None:
    """An offending value as messages show it: a string as Python's repr (once), else str()."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value[:1] in ("'", '"') else repr(value)
    return str(value)


def _untagged(message: str, code: str) -> str:
    prefix = f"[{code}] "
    return message[len(prefix) :] if message.startswith(prefix) else message


@dataclass(frozen=True)
class BadRow:
    """One offending row: where it is and what is wrong (the error's own message)."""

    code: str
    table: str
    column: str | None
    row: int | None
    value: str | None  # the offending value as text (repr for strings), None when not one value
    message: str  # without the [CODE] prefix

    @classmethod
    def of(cls, e: OmnigraphError) -> BadRow:
        ctx = e.context if isinstance(getattr(e, "context", None), dict) else {}
        value, row = ctx.get("value"), ctx.get("row")
        return cls(
            e.code,
            str(ctx.get("table", "")),
            ctx.get("column"),
            row if isinstance(row, int) else None,
            _as_text(value),
            _untagged(str(e.message), e.code),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "table": self.table,
            "column": self.column,
            "row": self.row,
            "value": self.value,
            "message": self.message,
        }


@dataclass(frozen=True)
class Refusal:
    """What a staging task that found a data error returns instead of failing. Picklable and
    small: the first error (code, message without the prefix, context of plain values) and
    the first few offending rows of the task."""

    code: str
    message: str
    rows: tuple[BadRow, ...] = ()
    context: tuple[tuple[str, Any], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, e: OmnigraphError, rows: Sequence[BadRow] = ()) -> Refusal:
        ctx = e.context if isinstance(getattr(e, "context", None), dict) else {}
        plain = tuple(
            (k, v) for k, v in ctx.items() if k != "rows" and isinstance(v, (str, int, float, bool, type(None)))
        )
        return cls(e.code, _untagged(str(e.message), e.code), tuple(rows[:MAX_REPORTED_ROWS]) or (BadRow.of(e),), plain)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Refusal:
        """A refusal the JVM sink handed over: ``{code, message, rows: [{table, column, row, value}]}``."""
        code = str(d["code"])
        rows = tuple(
            BadRow(
                code,
                str(r.get("table", "")),
                r.get("column"),
                r.get("row"),
                r.get("value"),
                _untagged(str(d["message"]), code),
            )
            for r in d.get("rows") or ()
        )
        return cls(code, _untagged(str(d["message"]), code), rows)


def refused_error(refusals: Sequence[Refusal]) -> OmnigraphError:
    """Driver: ONE typed error for the refusals of a load's tasks (in the order given, e.g. by
    partition). Its message is the first task's first error, prefixed ``[CODE]``; the other
    offending rows (the first few) follow on the same line and are in ``context['rows']``."""
    first = refusals[0]
    cls = error_classes().get(first.code, DataError)
    rows = [r for f in refusals for r in f.rows][:MAX_REPORTED_ROWS]
    more = [r for r in rows if r.message != first.message]
    message = first.message
    if more:
        message += "; more bad rows: " + "; ".join(r.message for r in more)
    total = sum(len(f.rows) for f in refusals)
    if total > len(rows) or len(refusals) > 1:
        message += f" ({len(refusals)} task{'s' if len(refusals) > 1 else ''} refused rows)"
    return cls(f"[{first.code}] {message}", **dict(first.context), rows=[r.to_dict() for r in rows])


def raise_refused(refusals: Sequence[Refusal]) -> None:
    """Driver: raise :func:`refused_error` if any task refused its rows."""
    if refusals:
        raise refused_error(refusals)


# -- finding every offending row of a batch ----------------------------------------------------

Convert = Callable[[pa.RecordBatch, int], pa.RecordBatch]


def split_bad_rows(
    convert: Convert,
    batch: pa.RecordBatch,
    *,
    limit: int | None = None,
) -> tuple[list[tuple[int, pa.RecordBatch]], list[tuple[int, OmnigraphError]]]:
    """Split ``batch`` into converted good pieces ``(first row, batch)`` in row order, and the
    offending rows ``(row, error)``.

    ``convert(piece, start)`` converts rows ``start..`` of the batch (it raises the
    converter's data errors, which name the row, and must leave no trace when it raises).
    Bisection: a piece that fails is halved until the failing rows stand alone, so k bad rows
    cost O(k log n) conversions of shrinking pieces, and each bad row's error is exactly the one
    the converter raises for that row alone. ``limit``: stop after that many bad rows (the rest
    of the batch is then not converted). An error that names no row (a whole-column problem) is
    raised as it is."""
    good: list[tuple[int, pa.RecordBatch]] = []
    bad: list[tuple[int, OmnigraphError]] = []

    def scan(lo: int, hi: int) -> None:
        if hi <= lo or (limit is not None and len(bad) >= limit):
            return
        try:
            good.append((lo, convert(batch.slice(lo, hi - lo), lo)))
            return
        except DataError as e:
            if not isinstance(e.context.get("row"), int):
                raise
            if hi - lo == 1:
                bad.append((lo, e))
                return
        mid = (lo + hi) // 2
        scan(lo, mid)
        scan(mid, hi)

    scan(0, batch.num_rows)
    return good, bad


def first_bad_rows(convert: Convert, batch: pa.RecordBatch, error: OmnigraphError) -> list[BadRow]:
    """The first few offending rows of a batch whose conversion raised ``error`` (error path
    only; the batch is bisected once more, at most MAX_REPORTED_ROWS rows deep)."""
    try:
        _, bad = split_bad_rows(convert, batch, limit=MAX_REPORTED_ROWS)
    except OmnigraphError:
        bad = []
    rows = [BadRow.of(e) for _, e in bad]
    first = BadRow.of(error)
    if not rows or rows[0].message != first.message:  # the converter's own first error leads
        rows = [first] + [r for r in rows if r.message != first.message]
    return rows[:MAX_REPORTED_ROWS]


__all__ = [
    "BadRow",
    "Refusal",
    "MAX_REPORTED_ROWS",
    "first_bad_rows",
    "is_row_data_error",
    "raise_refused",
    "refused_error",
    "split_bad_rows",
]
