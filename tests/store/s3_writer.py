"""Subprocess body for the two-writer tests on an object store: one writer process.

Usage: python s3_writer.py ROOT NAME MODE N
  MODE append: N loads of one Person each ("NAME-0" .. "NAME-<N-1>"), one after the other;
  MODE overwrite: one overwrite of Person with N rows named "NAME-*", staged at the current
    table version, then committed once every writer of the test has staged (a barrier of
    objects under ROOT/_test_barrier/), so the commits race.
Prints one JSON line per load: {"ack": [ids], "version": manifest version} for a load whose
commit returned, {"error": code} for one refused with a typed error.
Storage options come as JSON in OMNIGRAPH_TEST_STORAGE_OPTIONS; OMNIGRAPH_TEST_WRITERS is the
number of writers the barrier waits for.
"""

import json
import os
import sys
import time

import pyarrow as pa

from omnigraph_spark import Graph
from omnigraph_spark.errors import OmnigraphError
from omnigraph_spark.store import writes
from omnigraph_spark.store.fs import RootStorage
from omnigraph_spark.store.layout import join

root, name, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
so = json.loads(os.environ.get("OMNIGRAPH_TEST_STORAGE_OPTIONS", "null"))
g = Graph.open(root, so)


def stage(ids, how):
    t = writes.prepare_target(g, "main", "node:Person", how)
    return writes.stage(
        t, pa.Table.from_pylist([{"id": i, "age": 1, "name": i} for i in ids], schema=t.schema).to_batches()
    )


def commit(staged, ids):
    try:
        r = writes.commit_load(g, "main", [staged], actor=name)
    except OmnigraphError as e:
        print(json.dumps({"error": e.code}), flush=True)
        return
    print(json.dumps({"ack": ids, "version": r.manifest_version}), flush=True)


if mode == "append":
    for i in range(n):
        ids = [f"{name}-{i}"]
        commit(stage(ids, "append"), ids)
else:
    ids = [f"{name}-{i}" for i in range(n)]
    staged = stage(ids, "overwrite")
    fs, barrier = RootStorage(root, so), join(root, "_test_barrier")
    fs.write_text(join(barrier, name), "staged")
    deadline = time.monotonic() + 120
    while len(fs.list_dir(barrier)) < int(os.environ["OMNIGRAPH_TEST_WRITERS"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    commit(staged, ids)
