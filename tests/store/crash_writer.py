"""Subprocess body for the store-level crash matrix: one load, killed by a failpoint.

Usage: python crash_writer.py ROOT MODE BRANCH TABLES   (TABLES: "person" or "person+knows", or
"delete-old" with MODE delete: a node delete that cascades to its edges)
The failpoint comes from OMNIGRAPH_SPARK_FAILPOINT; the process dies with os._exit(137).
Storage options of an object-store root come as JSON in OMNIGRAPH_TEST_STORAGE_OPTIONS.
"""

import json
import os
import sys

import pyarrow as pa

from omnigraph_spark import Graph
from omnigraph_spark.store import writes

root, mode, branch, which = sys.argv[1:5]
g = Graph.open(root, json.loads(os.environ.get("OMNIGRAPH_TEST_STORAGE_OPTIONS", "null")))
staged = []
if which == "delete-old":  # mode "delete": node 'old' and, by cascade, its Knows edges (two tables)
    from omnigraph_spark.spark.validate import make_validator

    t = writes.prepare_target(g, branch, "node:Person", "delete")
    keys = pa.table({"id": pa.array(["old", "missing"], pa.string())})
    staged.append(writes.StagedTable("node:Person", "delete", t.stage_uri, t.base_version, (), 2, 0, deletes=keys))
    writes.commit_load(g, branch, staged, actor="crash-test", validate=make_validator(g))
    print("COMPLETED")
    sys.exit(0)
t = writes.prepare_target(g, branch, "node:Person", mode)
staged.append(
    writes.stage(
        t,
        pa.Table.from_pylist(
            [{"id": "new1", "age": 1, "name": "new1"}, {"id": "old", "age": 99, "name": "old"}], schema=t.schema
        ).to_batches(),
    )
)
if which == "person+knows":
    t = writes.prepare_target(g, branch, "edge:Knows", mode)
    staged.append(
        writes.stage(
            t,
            pa.Table.from_pylist(
                [{"id": "k-new", "src": "new1", "dst": "old", "since": None}], schema=t.schema
            ).to_batches(),
        )
    )
writes.commit_load(g, branch, staged, actor="crash-test")
print("COMPLETED")
