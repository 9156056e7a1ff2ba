"""The JVM write path's side files, read by the Python driver: the staging journal's entries,
the staging tasks' key fingerprints and the sink's hand-off (jvm-shim ``SideFiles``).

They live in the load's journal directory under the graph root. On a local root they are plain
files (JSON text; little-endian unsigned 64-bit fingerprints). On an object store the executors
can only write through the Lance SDK, so each is a single-column Lance file (one object PUT:
all of it or nothing) named with a ``.lance`` suffix: a ``text`` column of one row, or a
``hash`` column of 64-bit integers, read here with pylance's ``LanceFileReader`` and the
graph's storage options.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from .layout import is_local, join

#: the suffix of a side file on an object store (jvm-shim SideFiles.LANCE)
LANCE_SUFFIX = ".lance"


def location(directory: str, base: str, ext: str) -> str:
    """Where a side file named ``base + ext`` goes in ``directory`` (jvm-shim ``SideFiles.name``)."""
    return join(directory, base + ext + ("" if is_local(directory) else LANCE_SUFFIX))


def is_entry(name: str) -> bool:
    """Whether a journal directory's file ``name`` is a JVM journal entry on an object store."""
    return name.endswith(".json" + LANCE_SUFFIX)


def _column(uri: str, column: str, storage_options: Optional[Dict[str, str]]):
    from lance.file import LanceFileReader

    return LanceFileReader(uri, storage_options=storage_options or None).read_all().to_table().column(column)


def read_text(uri: str, storage_options: Optional[Dict[str, str]] = None) -> str:
    """A text side file's content. Raises OSError (local) or the reader's error (object store)."""
    if not uri.endswith(LANCE_SUFFIX):
        with open(uri, encoding="utf-8") as fh:
            return fh.read()
    values = _column(uri, "text", storage_options).to_pylist()
    if len(values) != 1 or values[0] is None:
        raise ValueError(f"side file {uri} holds {len(values)} texts, not one")
    return values[0]


def read_fingerprints(uri: str, storage_options: Optional[Dict[str, str]] = None) -> np.ndarray:
    """A task's key fingerprints as unsigned 64-bit integers (ascending)."""
    if not uri.endswith(LANCE_SUFFIX):
        return np.fromfile(uri, dtype="<u8")
    return _column(uri, "hash", storage_options).to_numpy().view("<u8")


__all__ = ["LANCE_SUFFIX", "is_entry", "location", "read_fingerprints", "read_text"]
