"""Typed errors across the JVM: an error's code travels as a ``[CODE] `` message prefix.

Errors crossing the JVM lose their Python class: Spark wraps what a Python worker raises in its
own exception and keeps only the text. Every :class:`~omnigraph_spark.errors.OmnigraphError`
the Spark layer raises therefore carries its code as a message prefix (``[DANGLING_EDGE] ...``,
:func:`tag_error`), and :func:`unwrap_error` turns a Spark exception back into the typed error.
Used by the write and read paths, the bridge and the public ``omnigraph_spark.unwrap_error``.
"""

from __future__ import annotations

import re

from .. import errors as _errors
from ..errors import OmnigraphError


def error_classes() -> dict[str, type[OmnigraphError]]:
    """Every OmnigraphError class by its ``code`` (a code names one class; the first by name wins)."""
    out: dict[str, type[OmnigraphError]] = {}
    for name in dir(_errors):
        obj = getattr(_errors, name)
        if isinstance(obj, type) and issubclass(obj, OmnigraphError):
            out.setdefault(obj.code, obj)
    return out


def tag_error(e: BaseException) -> BaseException:
    """Prefix an OmnigraphError's message with ``[CODE] `` (idempotent), so the code survives
    Spark's exception wrapping. Runs wherever the error is raised (executor or driver)."""
    if isinstance(e, OmnigraphError):
        prefix = f"[{e.code}] "
        msg = str(e)
        if not msg.startswith(prefix):
            e.args = (prefix + msg,)
            e.message = prefix + e.message if not e.message.startswith(prefix) else e.message
            if hasattr(e, "detail") and isinstance(e.detail, str) and not e.detail.startswith(prefix):
                e.detail = prefix + e.detail  # SchemaError pickles its detail
    return e


_TAGGED = re.compile(r"(?:omnigraph_spark\.errors\.)?(\w+): \[([A-Z0-9_]+)\] ([^\n]*)")
#: the JVM provider's and catalog's form (PythonBridge.OmnigraphException): a line starting ``[CODE] ``
_CODE_FIRST = re.compile(r"^()\[([A-Z0-9_]+)\] ([^\n]*)", re.M)


def unwrap_error(exc: BaseException) -> OmnigraphError | None:
    """The typed OmnigraphError a (Spark-wrapped) exception carries, or None.

    Runs on the driver. The original is returned when ``exc`` already is one; otherwise the
    first ``ClassName: [CODE] message`` line of the Python traceback Spark embeds is parsed,
    else the first line starting ``[CODE] `` with a code of this package (the JVM provider's
    and catalog's errors; Spark's own ``[ERROR_CLASS]`` lines name no such code). The class is
    the one of that code; the message keeps its ``[CODE]`` prefix."""
    if isinstance(exc, OmnigraphError):
        return exc
    classes = error_classes()
    text = str(exc)
    for m in [*_TAGGED.finditer(text), *_CODE_FIRST.finditer(text)]:
        cls = classes.get(m.group(2))
        if cls is None:
            continue
        err = cls.__new__(cls)
        message = f"[{m.group(2)}] {m.group(3)}"
        Exception.__init__(err, message)
        err.message = message
        err.context = {}
        return err
    return None


__all__ = ["error_classes", "tag_error", "unwrap_error"]
