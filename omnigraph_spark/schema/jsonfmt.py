"""serde_json-compatible JSON text, and Rust float renderings.

Why not ``json.dumps``: the schema hash is a sha256 of serde_json's compact output, so every
byte counts. ``json.dumps`` matches serde for strings, ints, bools and null, but not for
floats (serde_json 1.0.149 formats with zmij: ``0.00001``, ``1e-6``; Python writes ``1e-05``,
``1e-06``) nor for non-finite floats (serde writes ``null``). The constraint sort key also needs Rust's ``{:?}``
rendering of f64, which differs from both.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

_INDENT = "  "


def _shortest_digits(x: float) -> tuple[str, int]:
    """(digits, k) with ``abs(x) == int(digits) * 10**k``, digits minimal and without trailing
    zeros. Python's repr is the shortest round-tripping form, the same digits ryu and Rust's
    float formatting pick."""
    _, digits, exp = Decimal(repr(abs(x))).as_tuple()
    d = "".join(str(i) for i in digits).lstrip("0") or "0"
    k = int(exp)
    # as_tuple digits may carry leading zeros ("0.001" -> (1,), -3) or trailing zeros
    stripped = d.rstrip("0")
    k += len(d) - len(stripped)
    return stripped or "0", k


def _rust_shortest_digits(x: float) -> tuple[str, int]:
    """Like :func:`_shortest_digits`, but breaking an exact tie between two shortest
    candidates upwards, as Rust's ``flt2dec`` does (Python and zmij round half to even)."""
    digits, k = _shortest_digits(x)
    exact = Decimal(abs(x))
    rounded = Context(prec=len(digits), rounding=ROUND_HALF_UP).plus(exact)
    if float(rounded) == abs(x):
        _, dig, exp = rounded.as_tuple()
        d = "".join(str(i) for i in dig)
        stripped = d.rstrip("0") or "0"
        return stripped, int(exp) + len(d) - len(stripped)
    return digits, k


def serde_f64(x: float) -> str:
    """The text serde_json 1.0.149 (the engine's lockfile) writes for an f64. That version
    formats with the ``zmij`` crate, not ryu: shortest digits; plain decimal when the
    scientific exponent e satisfies -5 <= e <= 15 (always with a fraction, ``100.0``,
    ``0.00001``); otherwise ``d.ddde+N`` / ``de-N`` with an explicit sign and no zero padding
    (``1e+20``, ``1.5e-7``). Non-finite values are written as ``null``."""
    if not math.isfinite(x):
        return "null"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    digits, k = _shortest_digits(x)
    n = len(digits)
    e = n + k - 1  # exponent of the first digit
    if -5 <= e <= 15:
        if n - 1 <= e:
            body = digits + "0" * (e - n + 1) + ".0"
        elif e >= 0:
            body = digits[: e + 1] + "." + digits[e + 1 :]
        else:
            body = "0." + "0" * (-e - 1) + digits
    else:
        mant = digits if n == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{mant}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def rust_debug_f64(x: float) -> str:
    """Rust's ``format!("{:?}", x)`` for an f64: shortest digits, exponent form when
    ``|x| < 1e-4`` (x != 0) or ``|x| >= 1e16``, else decimal with at least one fraction digit."""
    if math.isnan(x):
        return "NaN"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if math.isinf(x):
        return sign + "inf"
    if x == 0:
        return sign + "0.0"
    digits, k = _rust_shortest_digits(x)
    n = len(digits)
    ax = abs(x)
    if ax < 1e-4 or ax >= 1e16:
        exp = n + k - 1
        mant = digits if n == 1 else f"{digits[0]}.{digits[1:]}"
        return f"{sign}{mant}e{exp}"
    kk = n + k
    if k >= 0:
        body = digits + "0" * k + ".0"
    elif kk > 0:
        body = digits[:kk] + "." + digits[kk:]
    else:
        body = "0." + "0" * (-kk) + digits
    return sign + body


def _escape(s: str) -> str:
    out: list[str] = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            short = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
            out.append(short if short else f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return serde_f64(v)
    if isinstance(v, str):
        return _escape(v)
    raise TypeError(f"cannot serialise {type(v).__name__} as JSON")


def to_compact(v: Any) -> str:
    """``serde_json::to_string``: no whitespace at all; dict order is kept."""
    parts: list[str] = []
    _compact(v, parts)
    return "".join(parts)


def _compact(v: Any, out: list[str]) -> None:
    if isinstance(v, dict):
        out.append("{")
        for i, (k, item) in enumerate(v.items()):
            if i:
                out.append(",")
            out.append(_escape(k))
            out.append(":")
            _compact(item, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _compact(item, out)
        out.append("]")
    else:
        out.append(_scalar(v))


def to_pretty(v: Any) -> str:
    """``serde_json::to_string_pretty``: 2-space indent, ``": "``, empty containers as
    ``[]``/``{}``, no trailing newline."""
    parts: list[str] = []
    _pretty(v, 0, parts)
    return "".join(parts)


def _pretty(v: Any, level: int, out: list[str]) -> None:
    if isinstance(v, dict):
        if not v:
            out.append("{}")
            return
        out.append("{")
        for i, (k, item) in enumerate(v.items()):
            out.append(",\n" if i else "\n")
            out.append(_INDENT * (level + 1))
            out.append(_escape(k))
            out.append(": ")
            _pretty(item, level + 1, out)
        out.append("\n" + _INDENT * level + "}")
    elif isinstance(v, (list, tuple)):
        if not v:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(v):
            out.append(",\n" if i else "\n")
            out.append(_INDENT * (level + 1))
            _pretty(item, level + 1, out)
        out.append("\n" + _INDENT * level + "]")
    else:
        out.append(_scalar(v))
