"""An Omnigraph graph -> Delta Lake tables through the change feed, exactly once: the reverse of
delta_to_graph.py.

    python examples/graph_to_delta.py /tmp/social-graph --delta-dir /tmp/social-mirror

The Delta jars are resolved by ``configure_spark_with_delta_pip`` as in delta_to_graph.py.

The pipeline:

1. *The graph*: the bundled sample loaded with ``load_jsonl`` (one commit).
2. *Mirror*: one stream per type (``Person``, ``WorksAt``) reads the type's change feed
   (``readChangeFeed``, from graph version 1) with ``Trigger.AvailableNow``, and each
   micro-batch MERGEs into a Delta table keyed on ``id``: per id the last change of the batch
   wins (a ``delete`` deletes, anything else upserts), and a row is written only when its
   ``_commit_version`` is newer than the mirror's ``_graph_version`` for that id. So a
   micro-batch Spark replays after a crash changes nothing, and the checkpoint makes the next run
   start where the last one ended.
3. *Changes in the graph*: a merge (one person moves, one is hired) and a delete of a person,
   whose edges the graph deletes in the same commit; the mirror runs again and applies only
   those changes, WorksAt's cascaded deletes included.
4. *Check*: each Delta table equals the graph's snapshot, and a third run delivers nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from omnigraph_spark import Graph, load_jsonl, write_graph
from omnigraph_spark.demo import local_delta_spark, sample_path

TYPES = ("Person", "WorksAt")
GONE = "Ben Kowalski"  # deleted in step 3, with his edges
META = ("_change_type", "_commit_version", "_commit_timestamp", "_graph_commit_id")
#: the order of change types within one commit when picking an id's last change
RANK = {"update_preimage": 0, "delete": 1, "insert": 2, "update_postimage": 3}


def last_change_per_id(batch: DataFrame) -> DataFrame:
    """Per id, the change of the highest graph version (within it, the postimage or the insert
    over the preimage or the delete)."""
    rank = F.create_map(*[x for k, v in RANK.items() for x in (F.lit(k), F.lit(v))])
    w = Window.partitionBy("id").orderBy(F.col("_commit_version").desc(), rank[F.col("_change_type")].desc())
    return batch.withColumn("_n", F.row_number().over(w)).filter("_n = 1").drop("_n")


def mirror_batch(spark: SparkSession, path: str, columns: list[str]):
    """The foreachBatch function of one type: MERGE the batch's last change per id into ``path``."""

    def apply(batch: DataFrame, batch_id: int) -> None:
        from delta.tables import DeltaTable

        last = last_change_per_id(batch).withColumnRenamed("_commit_version", "_graph_version")
        target = DeltaTable.forPath(spark, path)
        upsert = {c: f"s.{c}" for c in [*columns, "_graph_version"]}
        (
            target.alias("t")
            .merge(last.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s._change_type = 'delete' AND s._graph_version > t._graph_version")
            .whenMatchedUpdate("s._change_type != 'delete' AND s._graph_version > t._graph_version", set=upsert)
            .whenNotMatchedInsert("s._change_type != 'delete'", values=upsert)
            .execute()
        )

    return apply


def create_mirror(spark: SparkSession, graph_uri: str, type_name: str, path: str) -> list[str]:
    """An empty Delta table with the type's columns and ``_graph_version``; its columns."""
    schema = spark.read.format("omnigraph").option("type", type_name).load(graph_uri).schema
    if not os.path.isdir(path):
        empty = spark.createDataFrame([], schema).withColumn("_graph_version", F.lit(0).cast("long"))
        empty.write.format("delta").save(path)
    return list(schema.names)


def run_mirror(spark: SparkSession, graph_uri: str, delta_dir: str) -> dict[str, int]:
    """One AvailableNow run of every type's stream; the rows each delivered."""
    delivered = {}
    for t in TYPES:
        path = os.path.join(delta_dir, t)
        columns = create_mirror(spark, graph_uri, t, path)
        apply = mirror_batch(spark, path, columns)
        seen = []

        def counted(batch: DataFrame, batch_id: int, apply=apply, seen=seen) -> None:
            batch = batch.persist()
            seen.append(batch.count())
            apply(batch, batch_id)
            batch.unpersist()

        q = (
            spark.readStream.format("omnigraph")
            .option("type", t)
            .option("readChangeFeed", "true")
            .option("startingVersion", "1")
            .load(graph_uri)
            .writeStream.foreachBatch(counted)
            .option("checkpointLocation", os.path.join(delta_dir, "_checkpoints", t))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        delivered[t] = sum(seen)
    return delivered


def check(spark: SparkSession, graph_uri: str, delta_dir: str) -> None:
    for t in TYPES:
        graph_rows = spark.read.format("omnigraph").option("type", t).load(graph_uri)
        mirror = spark.read.format("delta").load(os.path.join(delta_dir, t)).drop("_graph_version")
        mirror = mirror.select(*graph_rows.columns)
        diff = graph_rows.exceptAll(mirror).count() + mirror.exceptAll(graph_rows).count()
        print(f"   {t:<8} graph {graph_rows.count():>4} rows, Delta {mirror.count():>4} rows, differing {diff}")
        assert diff == 0, f"the Delta mirror of {t} differs from the graph"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", help="graph root (recreated)")
    p.add_argument("--delta-dir", required=True, help="directory for the Delta mirror (recreated)")
    args = p.parse_args(argv)
    for d in (args.graph, args.delta_dir):
        if os.path.isdir(d):
            shutil.rmtree(d)
    spark = local_delta_spark("omnigraph-spark graph_to_delta example")
    try:
        print("1. the graph: the bundled sample in one commit")
        with open(sample_path("social.pg"), encoding="utf-8") as f:
            Graph.init(args.graph, f.read())
        load_jsonl(spark, args.graph, sample_path("social.jsonl"))

        print("2. mirror every change since graph v1 into Delta (AvailableNow)")
        print(f"   delivered {run_mirror(spark, args.graph, args.delta_dir)}")
        check(spark, args.graph, args.delta_dir)

        print("3. changes in the graph: one move and one hire (merge), one person deleted with his edges")
        person = spark.read.format("omnigraph").option("type", "Person").load(args.graph).drop("id")
        ada = person.filter(F.col("name") == "Ada Okafor").withColumn("city", F.lit("Berlin"))
        hire = ada.withColumn("name", F.lit("Yara Costa")).withColumn("city", F.lit("Lisbon"))
        write_graph(args.graph, {"Person": ada.unionByName(hire).localCheckpoint()}, mode="merge")
        write_graph(args.graph, {"Person": spark.createDataFrame([(GONE,)], "name string")}, mode="delete")
        delivered = run_mirror(spark, args.graph, args.delta_dir)
        print(f"   delivered {delivered}")
        check(spark, args.graph, args.delta_dir)

        again = run_mirror(spark, args.graph, args.delta_dir)
        print(f"4. a third run delivers {again}")
        assert not any(again.values()), "a run with nothing new should deliver nothing"
        print("graph_to_delta OK")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
