"""The write paths' side files, read by the Python driver: the JVM staging journal's entries,
the staging tasks' key fingerprints (written by JVM tasks, jvm-shim ``SideFiles``, or by Python
tasks, :func:`write_fingerprints`) and the sink's hand-off.

They live in the load's journal directory under the graph root. On a local root they are plain
files (JSON text; little-endian unsigned 64-bit fingerprints). On an object store the executors
can only write through the Lance SDK, so each is a single-column Lance file (one object PUT:
all of it or nothing) named with a ``.lance`` suffix: a ``text`` column of one row, or a
``hash`` column of 64-bit integers, read here with pylance's ``LanceFileReader`` and the
graph's storage options.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import ExitStack

import numpy as np
import pyarrow as pa
from lance.file import LanceFileReader, LanceFileWriter

from .layout import is_local, join

#: the suffix of a side file on an object store (jvm-shim SideFiles.LANCE)
LANCE_SUFFIX = ".lance"


def location(directory: str, base: str, ext: str) -> str:
    """Where a side file named ``base + ext`` goes in ``directory`` (jvm-shim ``SideFiles.name``)."""
    return join(directory, base + ext + ("" if is_local(directory) else LANCE_SUFFIX))


def key_hashes_location(directory: str, table_key: str, partition: int, attempt: int) -> str:
    """Where one task attempt writes its key fingerprints in ``directory``: unique per attempt,
    named as the JVM tasks name theirs."""
    return location(
        directory, f"keys-{table_key.replace(':', '-')}-p{partition}-a{attempt}-{uuid.uuid4().hex[:8]}", ".bin"
    )


def is_entry(name: str) -> bool:
    """Whether a journal directory's file ``name`` is a JVM journal entry on an object store."""
    return name.endswith(".json" + LANCE_SUFFIX)


def _column(uri: str, column: str, storage_options: dict[str, str] | None):
    return LanceFileReader(uri, storage_options=storage_options or None).read_all().to_table().column(column)


def read_text(uri: str, storage_options: dict[str, str] | None = None) -> str:
    """A text side file's content. Raises OSError (local) or the reader's error (object store)."""
    if not uri.endswith(LANCE_SUFFIX):
        with open(uri, encoding="utf-8") as fh:
            return fh.read()
    values = _column(uri, "text", storage_options).to_pylist()
    if len(values) != 1 or values[0] is None:
        raise ValueError(f"side file {uri} holds {len(values)} texts, not one")
    return values[0]


def read_fingerprints(uri: str, storage_options: dict[str, str] | None = None) -> np.ndarray:
    """A task's key fingerprints as unsigned 64-bit integers (ascending)."""
    if not uri.endswith(LANCE_SUFFIX):
        return np.fromfile(uri, dtype="<u8")
    return _column(uri, "hash", storage_options).to_numpy().view("<u8")


def summed_counts_max(uris: Sequence[str], storage_options: dict[str, str] | None = None) -> int | None:
    """The largest of the tasks' bucket counts added bucket by bucket: files of 16-bit counts,
    four to a little-endian 64-bit word (jvm-shim ``EndpointCheck.sketch``), read one at a time.
    None where a count is saturated (65,535: the true count may be more) or the files differ in
    length (not buckets of one hash)."""
    total: np.ndarray | None = None
    for uri in uris:
        counts = read_fingerprints(uri, storage_options).view("<u2")
        if (counts == 0xFFFF).any() or (total is not None and len(counts) != len(total)):
            return None
        total = counts.astype(np.int64) if total is None else total + counts
    return 0 if total is None or len(total) == 0 else int(total.max())


def write_fingerprints(uri: str, values: np.ndarray, storage_options: dict[str, str] | None = None) -> None:
    """Write a task's fingerprints (unsigned 64-bit, ascending) at ``uri`` (from :func:`location`),
    completely or not at all, in the format the JVM tasks write (jvm-shim ``SideFiles.writeLongs``):
    little-endian on a local root (a temporary file renamed into place), one ``hash`` Int64
    column of a Lance file on an object store (one PUT at close)."""
    values = np.ascontiguousarray(values, dtype="<u8")
    if not uri.endswith(LANCE_SUFFIX):
        os.makedirs(os.path.dirname(uri), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(uri), prefix=".tmp-", suffix=".u64")
        try:
            with os.fdopen(fd, "wb") as fh:
                values.tofile(fh)
            os.replace(tmp, uri)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
        return

    table = pa.table({"hash": pa.array(values.view("<i8"), pa.int64())})
    with LanceFileWriter(uri, table.schema, storage_options=storage_options or None) as w:
        w.write_batch(table)


#: fingerprints the driver holds at once when it proves keys distinct (bytes; about twice this
#: at the peak: a range's slices and their sort)
FINGERPRINT_WINDOW_BYTES = 16 << 20
#: sampled fingerprints per range when the value space is cut into ranges
_SAMPLES_PER_RANGE = 64


def fingerprints_distinct(
    uris: Sequence[str], storage_options: dict[str, str] | None = None, window_bytes: int | None = None
) -> bool:
    """Whether no fingerprint occurs twice across the staging tasks' files (each sorted ascending).

    The driver's memory stays bounded by ``window_bytes``, not by the load's rows: the value
    space is cut at quantiles of a sample into ranges of about ``window_bytes`` each; a range's
    slice of every file is found by binary search (single values read with ``pread``), read,
    gathered, sorted and scanned for neighbours that are equal. An object-store file is copied to
    a local temporary file first, one at a time. Fingerprints are hashes (strings) or the values
    themselves (integers), so the ranges follow the data's own distribution, not the value space's.
    ``window_bytes``: default :data:`FINGERPRINT_WINDOW_BYTES`."""
    window_bytes = window_bytes or FINGERPRINT_WINDOW_BYTES
    with tempfile.TemporaryDirectory(prefix="omnigraph-fingerprints-") as scratch, ExitStack() as files:
        runs = [files.enter_context(_Run(_local(u, storage_options, scratch, i))) for i, u in enumerate(uris)]
        runs = [r for r in runs if len(r)]
        total = sum(len(r) for r in runs)
        if total < 2:
            return True
        ranges = max(1, -(-8 * total // window_bytes))
        bounds = _quantiles(runs, total, ranges)
        for lo, hi in zip([None, *bounds], [*bounds, None]):
            chunk = np.concatenate([r.read(r.find(lo, 0), r.find(hi, len(r))) for r in runs])
            chunk.sort(kind="stable")  # timsort: merges the files' sorted runs in about linear time
            if len(chunk) > 1 and bool((chunk[1:] == chunk[:-1]).any()):
                return False
        return True


def _local(uri: str, storage_options: dict[str, str] | None, scratch: str, i: int) -> str:
    """A fingerprint file's local path (an object-store file: a copy in ``scratch``)."""
    if uri.endswith(LANCE_SUFFIX):
        local = os.path.join(scratch, f"{i}.u64")
        read_fingerprints(uri, storage_options).tofile(local)
        return local
    return uri


class _Run:
    """One task's fingerprint file (ascending), open for the comparison and read by position with
    ``pread``: never mapped, so only what a range gathers is ever in the driver's memory (a map's
    pages, read-ahead included, would count in its resident memory)."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "rb")
        self.n = os.fstat(self.fh.fileno()).st_size // 8

    def __enter__(self) -> _Run:
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()

    def __len__(self) -> int:
        return self.n

    def at(self, i: int) -> np.uint64:
        return np.frombuffer(os.pread(self.fh.fileno(), 8, 8 * i), dtype="<u8")[0]

    def find(self, value: np.uint64 | None, end: int) -> int:
        """Where the values >= ``value`` start (``end`` for an open end): a binary search."""
        if value is None:
            return end
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) // 2
            if self.at(mid) < value:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def read(self, start: int, stop: int) -> np.ndarray:
        return np.frombuffer(os.pread(self.fh.fileno(), 8 * (stop - start), 8 * start), dtype="<u8")


def _quantiles(runs: Sequence[_Run], total: int, ranges: int) -> list[np.uint64]:
    """``ranges - 1`` ascending cut points holding about equal shares of the values between them."""
    if ranges == 1:
        return []
    want = ranges * _SAMPLES_PER_RANGE
    sample = np.sort(
        np.array(
            [r.at(int(i)) for r in runs for i in np.linspace(0, len(r) - 1, max(1, want * len(r) // total))],
            dtype="<u8",
        )
    )
    cuts = sample[np.linspace(0, len(sample) - 1, ranges + 1).astype(np.int64)[1:-1]]
    return [np.uint64(c) for c in np.unique(cuts)]


__all__ = [
    "FINGERPRINT_WINDOW_BYTES",
    "LANCE_SUFFIX",
    "fingerprints_distinct",
    "is_entry",
    "location",
    "read_fingerprints",
    "read_text",
    "write_fingerprints",
]
