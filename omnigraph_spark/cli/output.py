"""Printing results: human text on stdout by default, one JSON document with ``--json``.

Why one place: scripts parse ``--json`` output, so every command emits exactly one JSON value on
stdout (errors go to stderr as ``error[CODE]: message``, and with ``--json`` also as a JSON
object on stdout). Dataclasses, tuples, datetimes and timedeltas are converted here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for dataclasses, mappings, sequences, datetimes and timedeltas."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {
            (k if isinstance(k, str) else "|".join(map(str, k)) if isinstance(k, tuple) else str(k)): to_jsonable(v)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, dt.datetime):
        return obj.isoformat()
    if isinstance(obj, dt.date):
        return obj.isoformat()
    if isinstance(obj, dt.timedelta):
        return obj.total_seconds()
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def us_to_iso(us: int | None) -> str | None:
    """Microseconds since the epoch -> ISO-8601 UTC (second precision)."""
    if us is None:
        return None
    return dt.datetime.fromtimestamp(us / 1_000_000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], align: str = "") -> list[str]:
    """Fixed-width text table. ``align`` has one char per column: 'l' or 'r' (default 'l')."""
    cells = [[("-" if v is None else str(v)) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def fmt(vals: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(vals):
            a = align[i] if i < len(align) else "l"
            out.append(v.rjust(widths[i]) if a == "r" else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return [fmt(list(headers))] + [fmt(r) for r in cells]


class Output:
    """Where a command's result goes. ``emit(data, human)`` prints JSON of ``data`` in JSON mode,
    else the lines ``human(data)`` returns."""

    def __init__(self, json_mode: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None):
        self.json_mode = json_mode
        self._stdout = stdout
        self._stderr = stderr

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    def emit(self, data: Any, human: Callable[[Any], Sequence[str]]) -> None:
        if self.json_mode:
            self.stdout.write(json.dumps(to_jsonable(data), indent=2, sort_keys=False) + "\n")
        else:
            for line in human(data):
                self.stdout.write(line + "\n")
        self.stdout.flush()

    def info(self, message: str) -> None:
        """A human note on stderr (never mixed into --json stdout)."""
        self.stderr.write(message + "\n")
        self.stderr.flush()

    def error(self, code: str, message: str, exit_code: int, **extra: Any) -> None:
        self.stderr.write(f"error[{code}]: {message}\n")
        self.stderr.flush()
        if self.json_mode:
            doc = {"error": {"code": code, "message": message, "exit_code": exit_code, **to_jsonable(extra)}}
            self.stdout.write(json.dumps(doc, indent=2) + "\n")
            self.stdout.flush()
