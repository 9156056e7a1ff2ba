"""Write rows through the store's protocol without Spark (tests only)."""
from __future__ import annotations

from typing import Dict, List, Optional

import pyarrow as pa

from omnigraph_spark.store import writes


def stage_rows(graph, key: str, rows: List[dict], mode: str = "append", branch: str = "main"):
    target = writes.prepare_target(graph, branch, key, mode)
    batch = pa.Table.from_pylist(rows, schema=target.schema).to_batches() if rows else []
    return writes.stage(target, batch)


def write_rows(graph, key: str, rows: List[dict], mode: str = "append", branch: str = "main",
               actor: Optional[str] = None, **kw):
    return writes.commit_load(graph, branch, [stage_rows(graph, key, rows, mode, branch)], actor=actor, **kw)


def rows_of(graph, key: str, snapshot=None, sort: str = "id") -> List[dict]:
    return sorted(graph.read_table(key, snapshot).to_pylist(), key=lambda r: r[sort])


def people(*names: str, age: Optional[int] = None) -> List[dict]:
    return [{"id": n, "age": age, "name": n} for n in names]
