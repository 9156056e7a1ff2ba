"""serde_json-compatible JSON text, and Rust float renderings.

Why not ``json.dumps``: the schema hash is a sha256 of serde_json's compact output, so every
byte counts. ``json.dumps`` matches serde for strings, ints, bools and null, but not for
floats (serde uses ryu: ``1e20``, ``0.00001``; Python writes ``1e+20``, ``1e-05``) nor for
non-finite floats (serde writes ``null``). The constraint sort key also needs Rust's ``{:?}``
rendering of f64, which differs from both.
"""
from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, List, Tuple

_INDENT = "  "


def _shortest_digits(x: float) -> Tuple[str, int]:
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


def ryu_f64(x: float) -> str:
    """The text serde_json writes for an f64 (ryu's ``format64``); non-finite -> ``null``."""
    if not math.isfinite(x):
        return "null"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    digits, k = _shortest_digits(x)
    n = len(digits)
    kk = n + k
    if 0 <= k and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * (-kk) + digits
    elif n == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
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
    digits, k = _shortest_digits(x)
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
    out: List[str] = ['"']
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
        return ryu_f64(v)
    if isinstance(v, str):
        return _escape(v)
    raise TypeError(f"cannot serialise {type(v).__name__} as JSON")


def to_compact(v: Any) -> str:
    """``serde_json::to_string``: no whitespace at all; dict order is kept."""
    parts: List[str] = []
    _compact(v, parts)
    return "".join(parts)


def _compact(v: Any, out: List[str]) -> None:
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
    parts: List[str] = []
    _pretty(v, 0, parts)
    return "".join(parts)


def _pretty(v: Any, level: int, out: List[str]) -> None:
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
