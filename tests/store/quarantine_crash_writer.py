"""Subprocess body for the quarantine crash matrix: one load with rejected rows, killed by a failpoint.

Usage: python quarantine_crash_writer.py ROOT QUARANTINE_PATH
Stages node:Person (2 valid rows) and edge:Knows (1 valid row), quarantines one row of each
(as tasks would: RejectSink files under ``_staging/<load id>/``, plus an unused attempt's file),
then commits through ``commit_staged`` (the driver's commit + publish). The failpoint comes from
OMNIGRAPH_SPARK_FAILPOINT; the process dies with os._exit(137). Prints the load id first.
"""

import sys

import pyarrow as pa

from omnigraph_spark import Graph
from omnigraph_spark.errors import ConstraintViolationError
from omnigraph_spark.spark.options import WriteOptions
from omnigraph_spark.spark.writer import commit_staged
from omnigraph_spark.store import writes
from omnigraph_spark.store.quarantine import Quarantine

root, qpath = sys.argv[1:3]
g = Graph.open(root)
q = Quarantine.new(qpath)
print(q.load_id, flush=True)
opts = WriteOptions.from_options({"path": root}, require_type=False)
staged, rejected = [], []
for key, good, bad in (
    (
        "node:Person",
        [{"id": "new1", "age": 1, "name": "new1"}, {"id": "new2", "age": 2, "name": "new2"}],
        {"id": "bad1", "age": -5, "name": "bad1"},
    ),
    (
        "edge:Knows",
        [{"id": "k-new", "src": "new1", "dst": "new2", "since": None}],
        {"id": "k-bad", "src": "new1", "dst": "new2", "since": -1},
    ),
):
    t = writes.prepare_target(g, "main", key, "append")
    staged.append(writes.stage(t, pa.Table.from_pylist(good, schema=t.schema).to_batches()))
    td = g.catalog.resolve(key.split(":", 1)[1])
    batch = pa.RecordBatch.from_pylist([bad], schema=t.schema)
    for attempt in (0, 1):  # attempt 1 is the one Spark used; attempt 0's file must not be published
        sink = q.open_sink(td, f"p0-a{attempt}")
        sink.reject(batch, [0], [ConstraintViolationError(f"{key} row 0: out of range")])
        r = sink.close()
    rejected.append(r)
commit_staged(g, "main", staged, opts, q, rejected)
print("COMPLETED", flush=True)
