"""Spark writes and reads of a graph on S3 (moto's server): ``storage.*`` options reach the
driver and the Python workers, and the JVM paths step aside (local roots only)."""
from __future__ import annotations

import logging

import pytest

from omnigraph_spark import Graph, read_table, write_graph, write_table

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
              pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning")]


def _storage(w, so):
    for k, v in so.items():
        w = w.option(f"storage.{k}", v)
    return w


def test_df_write_and_read_with_storage_options(spark, s3, s3_graph):  # I1
    so = s3.storage_options()
    v0 = s3_graph.snapshot().version
    people = spark.createDataFrame([("alice", 30), ("bob", 41), ("o'hara", 25)], "name string, age int")
    _storage(people.write.format("omnigraph").mode("append").option("type", "Person"), so).save(s3_graph.root)
    knows = spark.createDataFrame([("alice", "bob"), ("bob", "o'hara")], "src string, dst string")
    _storage(knows.write.format("omnigraph").mode("append").option("type", "Knows"), so).save(s3_graph.root)

    g = Graph.open(s3_graph.root, so)
    assert g.snapshot().version == v0 + 2  # one commit per job
    assert g.snapshot().tables["node:Person"].row_count == 3

    reader = _storage(spark.read.format("omnigraph").option("type", "Person"), so).load(s3_graph.root)
    assert sorted((r.id, r.name, r.age) for r in reader.collect()) == [
        ("alice", "alice", 30), ("bob", "bob", 41), ("o'hara", "o'hara", 25)]  # @key name is the id
    assert [r.id for r in reader.filter("id = \"o'hara\"").collect()] == ["o'hara"]  # pushed down, quoted
    edges = _storage(spark.read.format("omnigraph").option("type", "Knows"), so).load(s3_graph.root)
    assert sorted((r.src, r.dst) for r in edges.collect()) == [("alice", "bob"), ("bob", "o'hara")]
    assert len({r.id for r in edges.collect()}) == 2  # minted ids


def test_graph_helpers_fall_back_to_the_python_paths(spark, s3, s3_graph, caplog):
    """engine="auto" on an object store: the Python paths, and a log line saying why."""
    so = s3.storage_options()
    opts = {f"storage.{k}": v for k, v in so.items()}
    people = spark.createDataFrame([("a", 1), ("b", 2)], "name string, age int")
    knows = spark.createDataFrame([("a", "b")], "src string, dst string")
    with caplog.at_level(logging.INFO, logger="omnigraph_spark"):
        r = write_graph(s3_graph.root, {"Person": people, "Knows": knows}, options=opts)
    assert [t.table_key for t in r.tables] == ["edge:Knows", "node:Person"]
    assert "storage options" in caplog.text
    assert sorted(r.id for r in read_table(spark, s3_graph.root, "Person", storage_options=so).collect()) == ["a", "b"]
    with pytest.raises(Exception) as e:
        write_table(people, s3_graph.root, "Person", options=opts, engine="jvm")
    assert "storage options" in str(e.value)
    assert Graph.open(s3_graph.root, so).snapshot().tables["node:Person"].row_count == 2  # nothing added
