"""The reads behind the load-wide checks' views: the Python source's reader for a reserved option.

A :class:`~.work.SparkWork` names its views as reads with the option :data:`SCAN_OPTION` (a
JSON scan) and an explicit schema, read by :class:`ScanReader` on either side: the JVM provider
reads them as ``format("omnigraph")``, which it hands to the Python source under that name (a
read with a given schema goes there; :meth:`~.source.OmnigraphDataSource.reader` hands the
reserved option here); the Python runner (:class:`~.work.SessionRunner`) reads them through
:class:`ScanSource` (``format("omnigraph_scan")``), which it registers on its session, so the
checks' layer never imports the user-facing source above it. Scans:

``staged``
    ``files``: ``[uri, base]`` of staged Lance data files in the driver's concatenation order;
    each row gets its load-wide position :data:`POS` (``base`` plus its offset in the file).
``committed``
    ``table``: ``[base path, Lance branch, version]``; ``fragments``: ``[fragment id, base]``;
    the live rows of those fragments at the pinned version, with :data:`POS`.
``ids_by_fragment``
    ``table`` and ``fragments`` (ids): the ``id`` of every live row, with its fragment's id
    (column :data:`FRAG`).
``inline``
    ``arrow``: a small table the driver holds, as a base64 Arrow IPC stream (one task).

``columns`` (staged, committed) are the table's columns to read; the schema's other column is
:data:`POS`. A task takes at most :data:`FILES_PER_TASK` files or fragments; ``tasks`` (set by
the side that runs the work) caps the number of tasks. Storage options come in
:data:`SECRETS_OPTION`, whose key Spark redacts. Partitions are planned on the driver; ``read``
runs on the executors.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

#: the reserved read option naming a scan for the checks (JSON); never a user option
SCAN_OPTION = "__omnigraph_scan"
#: the reserved read option carrying a scan's Lance storage options (JSON); its key names a
#: secret, so Spark redacts its value in plans and the event log
SECRETS_OPTION = "__omnigraph_scan_secrets"
#: the load-wide row position a staged or committed scan adds
POS = "__omnigraph_pos"
#: the fragment id an ``ids_by_fragment`` scan adds
FRAG = "__omnigraph_fragment"
#: files (or committed fragments) one read task takes at most
FILES_PER_TASK = 8
KINDS = ("staged", "committed", "ids_by_fragment", "inline")
#: the short name of :class:`ScanSource`
SCAN_SOURCE = "omnigraph_scan"


def _groups(items: Sequence[Any], tasks: int | None) -> list[list[Any]]:
    """``items`` cut into contiguous groups of at most :data:`FILES_PER_TASK`, or into
    ``tasks`` groups when that is fewer."""
    if not items:
        return [[]]
    n = -(-len(items) // FILES_PER_TASK)
    if tasks:
        n = max(1, min(n, tasks))
    size = -(-len(items) // n)
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class ScanReader(DataSourceReader):
    """A check's view (:mod:`module docs <.scans>`). Built on the driver; :meth:`read` runs on
    the executors on the pickled reader."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.scan = json.loads(options[SCAN_OPTION])
        secrets = options.get(SECRETS_OPTION)
        self.storage = json.loads(secrets) if secrets else None
        if self.scan.get("kind") not in KINDS:
            raise ValueError(f"option {SCAN_OPTION}: kind {self.scan.get('kind')!r} is not one of {KINDS}")
        self.target = to_arrow_schema(schema)

    def partitions(self) -> Sequence[InputPartition]:
        """Driver: groups of files or fragments, one per task."""
        kind = self.scan["kind"]
        if kind == "inline":
            return [InputPartition([])]
        items = self.scan["files"] if kind == "staged" else self.scan["fragments"]
        return [InputPartition(g) for g in _groups(items, self.scan.get("tasks"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: the partition's rows as Arrow batches of the view's schema."""
        kind = self.scan["kind"]
        items = partition.value
        if kind == "inline":
            return self._inline()
        if kind == "staged":
            return self._staged(items)
        if kind == "committed":
            return self._committed(items)
        return self._ids_by_fragment(items)

    def _columns(self) -> list[str]:
        return [c for c in self.target.names if c != POS]

    def _with_pos(self, part: pa.RecordBatch, offset: int) -> pa.RecordBatch:
        arrays = [part.column(c).cast(self.target.field(c).type) for c in self._columns()]
        arrays.append(pa.array(np.arange(offset, offset + part.num_rows, dtype=np.int64)))
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)

    def _staged(self, items) -> Iterator[pa.RecordBatch]:
        from lance.file import LanceFileReader  # cost: the driver's planning of a view skips lance (2-4 s)

        columns = self._columns()
        for uri, base in items:
            reader = LanceFileReader(uri, storage_options=self.storage, columns=columns)
            offset = int(base)
            for part in reader.read_all(batch_size=65536).to_batches():
                yield self._with_pos(part, offset)
                offset += part.num_rows

    def _dataset(self):
        from ..store import tables as _tables  # cost: the driver's planning of a view skips lance (2-4 s)

        path, branch, version = self.scan["table"]
        return _tables.open_dataset(path, branch=branch, version=int(version), storage_options=self.storage)

    def _committed(self, items) -> Iterator[pa.RecordBatch]:
        if not items:
            return
        ds = self._dataset()
        columns = self._columns()
        for fid, base in items:
            offset = int(base)
            for part in ds.get_fragment(int(fid)).to_batches(columns=columns, batch_size=65536):
                yield self._with_pos(part, offset)
                offset += part.num_rows

    def _ids_by_fragment(self, items) -> Iterator[pa.RecordBatch]:
        if not items:
            return
        ds = self._dataset()
        for fid in items:
            for part in ds.get_fragment(int(fid)).to_batches(columns=["id"], batch_size=65536):
                yield pa.RecordBatch.from_arrays(
                    [
                        part.column("id").cast(self.target.field("id").type),
                        pa.array(np.full(part.num_rows, int(fid), np.int64)),
                    ],
                    schema=self.target,
                )

    def _inline(self) -> Iterator[pa.RecordBatch]:
        table = pa.ipc.open_stream(base64.b64decode(self.scan["arrow"])).read_all()
        for part in table.to_batches():
            yield pa.RecordBatch.from_arrays(
                [part.column(f.name).cast(f.type) for f in self.target], schema=self.target
            )


class ScanSource(DataSource):
    """The checks' views as a data source of their own (``format("omnigraph_scan")``): reads
    only, each with its schema given and :data:`SCAN_OPTION` set."""

    @classmethod
    def name(cls) -> str:
        return SCAN_SOURCE

    def schema(self) -> StructType:
        raise ValueError(f"format({SCAN_SOURCE!r}) reads a load check's view: its schema is given with the read")

    def reader(self, schema: StructType) -> DataSourceReader:
        return ScanReader(self.options, schema)


__all__ = ["FILES_PER_TASK", "FRAG", "POS", "SCAN_OPTION", "SCAN_SOURCE", "SECRETS_OPTION", "ScanReader", "ScanSource"]
