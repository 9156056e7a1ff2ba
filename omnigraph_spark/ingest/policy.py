"""Where the connector deliberately differs from the engine's loader (Omnigraph v0.7.2).

Policy: the engine turns many bad values into null (and only complains if the column is
non-nullable) or rounds them; we never silently drop or coerce data. Every rule below makes a
load fail that the engine would accept (or accept differently), with a typed error naming the
table, column, row and value. A load we accept, the engine would accept with the same rows.

``STRICTER_THAN_ENGINE`` is the list, kept as data so the docs and tests can enumerate it.
``DIFFERS_FROM_ENGINE`` lists the places where we accept something the engine's JSONL loader
cannot express, and why.
"""

from __future__ import annotations

STRICTER_THAN_ENGINE: tuple[str, ...] = (
    (
        "A value of the wrong type is a TypeMismatchError; the engine stores null (nullable "
        "columns) or reports only 'has null or invalid values'."
    ),
    (
        "I32/U32 scalars are range-checked; the engine wraps them with an 'as' cast (it range-checks "
        "list elements only)."
    ),
    (
        "F32 values must be exactly representable; the engine rounds f64 to f32. Exception: Vector "
        "components are rounded to float32 (the declared storage) unless exact_vectors=True; "
        "overflow to infinity is still an error."
    ),
    "Vector components must be numbers and not null; the engine writes 0.0 for a non-number.",
    "Integer input for a float column must be exact (|v| <= 2**53 for F64, 2**24 for F32).",
    ("Float input for an integer column is rejected even when integral (3.0); the engine stores null."),
    (
        "Date literals must be date-only (YYYY-MM-DD, YYYY-M-D, YYYYMMDD); the engine also takes a "
        "datetime string and drops its time part."
    ),
    "Signed/extended-year literals (+10999-01-01) and named time zones are rejected.",
    (
        "DateTime literals with a non-zero sub-millisecond fraction, a leap second (:60) or offset "
        "minutes above 59 are rejected; the engine truncates / accepts them."
    ),
    "Timestamps without a time zone are rejected for DateTime (ambiguous wall-clock time).",
    ("An explicit id that is not a string is a TypeMismatchError; the engine silently generates a ULID instead."),
    ("Edge 'from'/'to' must be strings; a missing or null endpoint is an error in every input form."),
    ("@range and @check are also applied to list elements ([I32], [String]); the engine skips list columns."),
    (
        "@check patterns the connector cannot evaluate with exact Rust regex semantics (Unicode "
        "word boundaries, scripts in \\p{..}, class set operations, verbose mode) are rejected "
        "with CheckPatternError."
    ),
    (
        "@range with an integer bound is compared exactly on integer columns; the engine compares "
        "in f64 (so 2**53+1 may pass a max of 2**53 there)."
    ),
    (
        "Unknown input columns (DataFrame path) are an error; the engine's JSONL loader ignores "
        "unknown keys inside 'data' (our JSONL path does too)."
    ),
    ("Blob values are not supported yet (UnsupportedValueError); a nullable Blob column may be omitted."),
    "Null elements inside a list are kept (the list item field is nullable), never dropped.",
)

DIFFERS_FROM_ENGINE: tuple[str, ...] = (
    (
        "A @key on an integer or Bool property derives the id as the decimal / 'true'/'false' text "
        "(the engine's 'insert' mutation rule). The engine's JSONL loader cannot load such a type "
        "at all (every row fails 'missing @key property'). Keys on F32/F64/Date/DateTime are "
        "rejected (UnsupportedValueError): their id text is not defined by the engine."
    ),
    (
        "Errors report the first offending row by a 0-based load-wide row number (row_offset + "
        "index) and are typed (DataError subclasses), instead of the engine's free-text messages."
    ),
)
