"""@check patterns: the engine's Rust ``regex`` semantics, evaluated with Arrow's RE2 kernel.

The engine tests ``Regex::new(pattern).is_match(value)``: an *unanchored search* with Rust
``regex`` syntax. We evaluate with ``pyarrow.compute.match_substring_regex`` (RE2, also an
unanchored search) because it is vectorised; Python's ``re`` would need a loop per row and
differs from Rust in more places (``$`` before a final newline, lookaround, backreferences,
possessive quantifiers, ``[[:alpha:]]``...). RE2 and Rust ``regex`` share one design; the
remaining differences are translated or rejected here, token by token:

* ``\\d \\D`` are Unicode in Rust, ASCII in RE2 -> ``\\p{Nd}`` / ``\\P{Nd}``;
* ``\\s \\w`` (and negations outside a class) are Unicode in Rust -> explicit Unicode classes
  (White_Space; Alphabetic + M + Nd + Pc + Join_Control);
* ``\\b \\B \\< \\> \\b{...}`` (Unicode word boundaries) cannot be expressed in RE2 -> rejected;
* ``\\u``/``\\U``/``\\x{...}`` escapes -> ``\\x{...}``;
* flags ``x`` (verbose), ``R`` (CRLF), ``u`` (Unicode switch) -> rejected; ``i m s U`` kept;
* class set operations (``&&``, ``--``, ``~~``) and nested classes -> rejected;
* ``\\p{...}`` beyond general categories (scripts, binary properties) -> rejected;
* what Rust itself rejects (lookaround, backreferences, ``\\Z``, unknown escapes, malformed
  ``{``) -> rejected, since the engine would fail the whole load on it.

Greediness never changes ``is_match``, so lazy quantifiers pass through unchanged.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CheckPatternError

_WS = (
    r"\t\n\x{0B}\x{0C}\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}"
    r"\x{202F}\x{205F}\x{3000}"
)
_WORD = (
    r"\p{L}\p{M}\p{Nd}\p{Pc}\p{Nl}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}"
    r"\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}"
)
_GENERAL_CATEGORIES = frozenset(
    "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Co Cs".split()
)
_POSIX = frozenset("alnum alpha ascii blank cntrl digit graph lower print punct space upper word xdigit".split())
_PUNCT = frozenset("!\"#$%&'()*+,-./:;=?@[\\]^_`{|}~")  # escapable as literals in both
_SIMPLE = {"a": r"\x{07}", "f": r"\x{0C}", "t": r"\t", "n": r"\n", "r": r"\r", "v": r"\x{0B}"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\[\]]*")


class _Translator:
    def __init__(self, pattern: str, owner: str) -> None:
        self.p = pattern
        self.i = 0
        self.owner = owner
        self.out: list[str] = []

    def fail(self, why: str) -> CheckPatternError:
        return CheckPatternError(
            f"@check on {self.owner}: pattern {self.p!r} {why} (at offset {self.i}); the "
            f"connector only evaluates patterns whose Rust regex meaning it can reproduce exactly",
            pattern=self.p,
            check=self.owner,
        )

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def run(self) -> str:
        while self.i < len(self.p):
            c = self.p[self.i]
            if c == "\\":
                self.out.append(self.escape(in_class=False))
            elif c == "[":
                self.out.append(self.char_class())
            elif c == "(":
                self.out.append(self.group())
            elif c == "{":
                m = _REPEAT.match(self.p, self.i)
                if not m or (m.group(3) and int(m.group(3)) < int(m.group(1))):
                    raise self.fail("has a malformed counted repetition '{'")
                self.out.append(m.group(0))
                self.i = m.end()
            else:
                self.out.append(c)
                self.i += 1
        return "".join(self.out)

    def hex_escape(self, kind: str) -> str:
        # self.i points just after the escape letter
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            digits = self.p[self.i + 1 : end] if end > 0 else ""
            self.i = end + 1 if end > 0 else len(self.p)
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = self.p[self.i : self.i + width]
            if len(digits) != width:
                raise self.fail(f"has a truncated \\{kind} escape")
            self.i += width
        if not digits or not all(ch in "0123456789abcdefABCDEF" for ch in digits):
            raise self.fail(f"has an invalid \\{kind} escape")
        cp = int(digits, 16)
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            raise self.fail(f"has an escape for a non-scalar code point {cp:#x}")
        return f"\\x{{{cp:X}}}"

    def escape(self, in_class: bool) -> str:
        self.i += 1
        c = self.peek()
        if not c:
            raise self.fail("ends with a lone backslash")
        self.i += 1
        if c == "d":
            return r"\p{Nd}"
        if c == "D":
            return r"\P{Nd}"
        if c in "sw":
            body = _WS if c == "s" else _WORD
            return body if in_class else f"[{body}]"
        if c in "SW":
            if in_class:
                raise self.fail(f"uses \\{c} inside a character class")
            return f"[^{_WS if c == 'S' else _WORD}]"
        if c in "bB<>":
            raise self.fail(f"uses \\{c} (a Unicode word boundary, not expressible in RE2)")
        if c in "Az" and not in_class:
            return "\\" + c
        if c in _SIMPLE:
            return _SIMPLE[c]
        if c in "xuU":
            return self.hex_escape(c)
        if c in "pP":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                name = self.p[self.i + 1 : end] if end > 0 else ""
                self.i = end + 1 if end > 0 else len(self.p)
            else:
                name = self.peek()
                self.i += 1
            if name not in _GENERAL_CATEGORIES:
                raise self.fail(
                    f"uses Unicode class \\{c}{{{name}}}; only general categories (L, Lu, Nd, ...) are supported"
                )
            return f"\\{c}{{{name}}}"
        if c == "_":
            return "_"
        if c in _PUNCT:
            return "\\" + c
        raise self.fail(f"uses the escape \\{c}, which Rust regex rejects or reads differently")

    def char_class(self) -> str:
        start = self.i
        self.i += 1
        parts = ["["]
        if self.peek() == "^":
            parts.append("^")
            self.i += 1
        first = True
        while True:
            c = self.peek()
            if not c:
                self.i = start
                raise self.fail("has an unclosed character class")
            if c == "]" and not first:
                self.i += 1
                parts.append("]")
                return "".join(parts)
            if c == "]":
                parts.append(r"\]")
                self.i += 1
            elif c == "[":
                m = re.compile(r"\[:(\^?)([a-z]+):\]").match(self.p, self.i)
                if not m or m.group(2) not in _POSIX:
                    raise self.fail("nests a character class (Rust set syntax)")
                parts.append(m.group(0))
                self.i = m.end()
            elif c == "\\":
                parts.append(self.escape(in_class=True))
            elif c in "&-~" and self.peek(1) == c:
                raise self.fail(f"uses the class set operator '{c}{c}'")
            else:
                parts.append(c)
                self.i += 1
            first = False

    def group(self) -> str:
        if self.peek(1) != "?":
            self.i += 1
            return "("
        rest = self.p[self.i + 2 :]
        if rest.startswith(":"):
            self.i += 3
            return "(?:"
        for prefix in ("P<", "<"):
            if rest.startswith(prefix) and not rest.startswith(("<=", "<!")):
                m = _NAME.match(rest, len(prefix))
                if not m or rest[m.end() : m.end() + 1] != ">":
                    raise self.fail("has a malformed group name")
                self.i += 2 + m.end() + 1
                return f"(?P<{m.group(0)}>"
        m = re.match(r"([A-Za-z-]*)([:)])", rest)
        if not m or not m.group(1):
            raise self.fail("uses a group construct Rust regex does not support (lookaround, atomic group, comment...)")
        flags = m.group(1)
        for f in flags:
            if f not in "imsU-":
                raise self.fail(f"uses the inline flag '{f}'")
        self.i += 2 + m.end()
        return f"(?{flags}{m.group(2)}"


def translate(pattern: str, owner: str) -> str:
    """The RE2 pattern with the same ``is_match`` as the Rust ``regex`` ``pattern``.

    ``owner`` names the constraint ("Person.email") for messages. Raises
    :class:`CheckPatternError` when no faithful translation exists or RE2 rejects it."""
    out = _Translator(pattern, owner).run()
    try:
        pc.match_substring_regex(pa.array([""], pa.string()), out)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise CheckPatternError(
            f"@check on {owner}: pattern {pattern!r} is invalid: {e}", pattern=pattern, check=owner
        ) from e
    return out


def matches(values: pa.Array, translated: str) -> pa.Array:
    """Unanchored search per value (null stays null)."""
    return pc.match_substring_regex(values, translated)
