"""Vectorised parsing of Date / DateTime text literals, following the engine's grammar.

Why a parser of our own: the engine parses literals with ``arrow-cast`` 58 (``Date32Type::parse``
and ``Date64Type::parse``), whose grammar is not what ``pyarrow``'s ISO-8601 cast accepts, and a
single bad value must be reported by row rather than failing the whole array. Everything here is
a handful of ``pyarrow.compute`` kernels per array; no per-row Python.

Accepted forms (a subset of the engine's; each rejection is listed in ``policy``):

* Date: ``YYYY-MM-DD`` with one- or two-digit month and day, or ``YYYYMMDD``.
* DateTime: any Date form above (midnight UTC), or ``YYYY-MM-DD`` + ``T``/``t``/space +
  ``HH:MM:SS[.fraction]`` or ``HHMMSS``, then nothing (UTC), ``Z``/``z``, or optional spaces and
  a fixed offset ``+HH:MM``, ``+HHMM`` or ``+HH``. Fractions finer than a millisecond must be
  zero, because DateTime is stored in milliseconds and the engine would truncate.

Returned masks mark rows that are non-null but do not parse, so callers can name the row.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_DATE_DASHED = r"^(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})$"
_DATE_COMPACT = r"^(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})$"
_DATETIME = (
    r"^(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})[Tt ]"
    r"(?:(?P<h1>\d{2}):(?P<mi1>\d{2}):(?P<s1>\d{2})(?:\.(?P<f>\d+))?"
    r"|(?P<h2>\d{2})(?P<mi2>\d{2})(?P<s2>\d{2}))"
    r"(?:(?P<z>[Zz])|[ \t]*(?P<sign>[+-])(?P<oh>\d{2})(?::?(?P<om>\d{2}))?)?$"
)

MS_PER_DAY = 86_400_000


def _field(parts: pa.StructArray, name: str) -> pa.Array:
    return pc.struct_field(parts, name)


def _int(text: pa.Array) -> pa.Array:
    """Digits (or "" for an optional group that did not take part) to int64."""
    filled = pc.if_else(pc.equal(text, ""), "0", text)
    return pc.cast(filled, pa.int64())


def _days_from_civil(y: pa.Array, m: pa.Array, d: pa.Array) -> pa.Array:
    """Days since 1970-01-01 for a proleptic Gregorian date (Hinnant's algorithm). Years are
    shifted by 400 so every division below is on non-negative numbers (truncation == floor)."""
    early = pc.cast(pc.less_equal(m, 2), pa.int64())
    yy = pc.subtract(pc.add(y, 400), early)
    era = pc.divide(yy, 400)
    yoe = pc.subtract(yy, pc.multiply(era, 400))
    mp = pc.if_else(pc.greater(m, 2), pc.subtract(m, 3), pc.add(m, 9))
    doy = pc.add(pc.divide(pc.add(pc.multiply(mp, 153), 2), 5), pc.subtract(d, 1))
    doe = pc.add(pc.add(pc.multiply(yoe, 365), pc.divide(yoe, 4)), pc.subtract(doy, pc.divide(yoe, 100)))
    days = pc.add(pc.multiply(era, 146097), pc.subtract(doe, 719468))
    return pc.subtract(days, 146097)  # undo the 400-year shift


def _checked_days(y: pa.Array, m: pa.Array, d: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Days plus a validity mask: the date must round-trip (rejects 2021-02-29, month 13...)."""
    days = _days_from_civil(y, m, d)
    as_date = pc.cast(pc.cast(days, pa.int32()), pa.date32())
    ok = pc.and_(pc.and_(pc.equal(pc.year(as_date), y), pc.equal(pc.month(as_date), m)), pc.equal(pc.day(as_date), d))
    return days, ok


def _parse_date_forms(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(days as int64 or null, parsed-ok mask) for the date-only forms."""
    dashed = pc.extract_regex(text, _DATE_DASHED)
    compact = pc.extract_regex(text, _DATE_COMPACT)
    use_dashed = dashed.is_valid()
    y = pc.if_else(
        use_dashed, _int(pc.fill_null(_field(dashed, "y"), "")), _int(pc.fill_null(_field(compact, "y"), ""))
    )
    m = pc.if_else(
        use_dashed, _int(pc.fill_null(_field(dashed, "m"), "")), _int(pc.fill_null(_field(compact, "m"), ""))
    )
    d = pc.if_else(
        use_dashed, _int(pc.fill_null(_field(dashed, "d"), "")), _int(pc.fill_null(_field(compact, "d"), ""))
    )
    matched = pc.or_(use_dashed, compact.is_valid())
    days, ok = _checked_days(y, m, d)
    ok = pc.and_(matched, ok)
    return pc.if_else(ok, days, pa.scalar(None, pa.int64())), ok


def parse_date_strings(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Parse a string array as Date literals.

    Returns ``(date32 array, bad)`` where ``bad`` is true exactly for non-null inputs that are
    not valid literals (those rows are null in the result)."""
    text = pc.cast(text, pa.string())
    days, ok = _parse_date_forms(text)
    bad = pc.and_(text.is_valid(), pc.invert(pc.fill_null(ok, False)))
    return pc.cast(pc.cast(days, pa.int32()), pa.date32()), bad


def parse_datetime_strings(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Parse a string array as DateTime literals into Date64 (ms since the epoch, UTC).

    Returns ``(date64 array, bad)`` like :func:`parse_date_strings`. A fraction with a non-zero
    digit after the third is bad (it cannot be stored without truncation), as are leap seconds
    (``:60``) and offsets with minutes above 59."""
    text = pc.cast(text, pa.string())
    date_days, date_ok = _parse_date_forms(text)
    date_ok = pc.fill_null(date_ok, False)

    parts = pc.extract_regex(text, _DATETIME)
    matched = parts.is_valid()

    def g(name: str) -> pa.Array:
        return pc.fill_null(_field(parts, name), "")

    y, m, d = _int(g("y")), _int(g("m")), _int(g("d"))
    hms_colon = pc.not_equal(g("h1"), "")
    h = _int(pc.if_else(hms_colon, g("h1"), g("h2")))
    mi = _int(pc.if_else(hms_colon, g("mi1"), g("mi2")))
    s = _int(pc.if_else(hms_colon, g("s1"), g("s2")))
    frac = g("f")
    # milliseconds from the first three fraction digits; anything after must be zeros
    ms_text = pc.utf8_slice_codeunits(pc.binary_join_element_wise(frac, "000", ""), 0, 3)
    ms = _int(ms_text)
    sub_ms = pc.utf8_slice_codeunits(frac, 3, 1 << 30)
    sub_ms_zero = pc.match_substring_regex(sub_ms, r"^0*$")
    oh, om = _int(g("oh")), _int(g("om"))
    sign = pc.if_else(pc.equal(g("sign"), "-"), -1, 1)
    sign = pc.cast(sign, pa.int64())

    days, cal_ok = _checked_days(y, m, d)
    time_ok = pc.and_(pc.and_(pc.less_equal(h, 23), pc.less_equal(mi, 59)), pc.less_equal(s, 59))
    off_ok = pc.and_(pc.less_equal(oh, 23), pc.less_equal(om, 59))
    ok = pc.and_(pc.and_(matched, cal_ok), pc.and_(pc.and_(time_ok, off_ok), sub_ms_zero))
    ok = pc.fill_null(ok, False)

    offset_ms = pc.multiply(sign, pc.add(pc.multiply(oh, 3_600_000), pc.multiply(om, 60_000)))
    wall = pc.add(
        pc.add(pc.multiply(days, MS_PER_DAY), pc.multiply(h, 3_600_000)),
        pc.add(pc.add(pc.multiply(mi, 60_000), pc.multiply(s, 1000)), ms),
    )
    full_ms = pc.subtract(wall, offset_ms)
    date_ms = pc.multiply(date_days, MS_PER_DAY)

    # the engine takes the date-only path for strings of at most 10 bytes
    short = pc.less_equal(pc.binary_length(text), 10)
    result = pc.if_else(short, pc.if_else(date_ok, date_ms, None), pc.if_else(ok, full_ms, None))
    good = pc.if_else(short, date_ok, ok)
    bad = pc.and_(text.is_valid(), pc.invert(pc.fill_null(good, False)))
    return pc.cast(pc.cast(result, pa.int64()), pa.date64()), bad
