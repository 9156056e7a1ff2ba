"""df.write.format("omnigraph"): one graph commit per Spark job, validated, atomic."""
from __future__ import annotations

import os
from typing import List

import pytest

from omnigraph_spark import Graph

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
              pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]


def rows(graph_or_uri, key: str, branch: str = "main", sort: str = "id") -> List[dict]:
    g = Graph.open(graph_or_uri) if isinstance(graph_or_uri, str) else graph_or_uri
    return sorted(g.read_table(key, g.snapshot(branch)).to_pylist(), key=lambda r: r[sort])


def data_files(uri: str) -> int:
    n = 0
    for _dirpath, _dirs, files in os.walk(uri):
        n += sum(1 for f in files if f.endswith(".lance") and "/data" in _dirpath)
    return n


def save(df, uri: str, type_: str, mode: str = "append", **opts) -> None:
    w = df.write.format("omnigraph").mode(mode).option("type", type_)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(uri)


def expect_code(exc_info, code: str) -> None:
    from omnigraph_spark.spark import unwrap_error

    err = unwrap_error(exc_info.value)
    assert err is not None, f"no omnigraph error in: {str(exc_info.value)[:2000]}"
    assert err.code == code, str(err)


def test_append_on_main(spark, test_graph):
    uri = test_graph.root
    df = spark.createDataFrame([("Alice", 30), ("Bob", None)], "name string, age int").repartition(2)
    save(df, uri, "Person", actor="alice@test")
    g = Graph.open(uri)
    assert rows(g, "node:Person") == [{"id": "Alice", "age": 30, "name": "Alice"},
                                      {"id": "Bob", "age": None, "name": "Bob"}]
    snap = g.snapshot()
    assert snap.tables["node:Person"].version == 2
    assert snap.tables["node:Company"].version == 1
    log = g.log()
    assert len(log) == 2
    assert log[1].parent_commit_id == log[0].graph_commit_id
    assert log[1].manifest_version == snap.version
    assert log[1].actor_id == "alice@test"
