"""Write rows through the store's protocol without Spark (tests only)."""

from __future__ import annotations

import threading

import pyarrow as pa

from omnigraph_spark import Graph
from omnigraph_spark.store import writes


def stage_rows(graph, key: str, rows: list[dict], mode: str = "append", branch: str = "main"):
    target = writes.prepare_target(graph, branch, key, mode)
    batch = pa.Table.from_pylist(rows, schema=target.schema).to_batches() if rows else []
    return writes.stage(target, batch)


def write_rows(
    graph, key: str, rows: list[dict], mode: str = "append", branch: str = "main", actor: str | None = None, **kw
):
    return writes.commit_load(graph, branch, [stage_rows(graph, key, rows, mode, branch)], actor=actor, **kw)


def rows_of(graph, key: str, snapshot=None, sort: str = "id") -> list[dict]:
    return sorted(graph.read_table(key, snapshot).to_pylist(), key=lambda r: r[sort])


def people(*names: str, age: int | None = None) -> list[dict]:
    return [{"id": n, "age": age, "name": n} for n in names]


def commit_concurrently(graph, staged) -> list[Exception]:
    """Commit each staged table from its own thread and Graph handle, all at once; the errors."""
    errors: list[Exception] = []

    def run(s):
        try:
            writes.commit_load(Graph.open(graph.root, graph.storage_options), "main", [s])
        except Exception as e:  # reported by the caller's assertion
            errors.append(e)

    threads = [threading.Thread(target=run, args=(s,)) for s in staged]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return errors
