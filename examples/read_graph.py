"""Graph -> DataFrames: read every node and edge table of ONE snapshot and join across them.

    python examples/read_graph.py /tmp/social-graph [--branch main] [--version N]

If the graph does not exist yet it is created and the bundled sample loaded (so the example
runs on a fresh clone). Shows: ``read_graph`` (all types at one pinned snapshot),
``spark.read.format("omnigraph")`` with a pushed-down filter and a column selection, joins
across node and edge tables (Person -[WorksAt]-> Company, a two-hop Knows pattern), and the
``vertices()`` / ``edges_df()`` views (the shape GraphFrames expects).
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import functions as F

import omnigraph_spark
from omnigraph_spark import Graph
from omnigraph_spark.demo import local_spark, sample_path
from omnigraph_spark.errors import GraphNotFoundError


def ensure_sample_graph(spark, uri: str) -> None:
    try:
        Graph.open(uri)
    except GraphNotFoundError:
        with open(sample_path("social.pg"), encoding="utf-8") as f:
            Graph.init(uri, f.read())
        res = omnigraph_spark.load_jsonl(spark, uri, sample_path("social.jsonl"), actor="read_graph example")
        print(f"(created {uri} with the bundled sample: commit {res.graph_commit_id})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph")
    p.add_argument("--branch", default="main")
    p.add_argument("--version", type=int, default=None, help="graph (manifest) version to read")
    args = p.parse_args(argv)
    spark = local_spark("omnigraph-spark read example")
    try:
        ensure_sample_graph(spark, args.graph)

        # 1. every type at one snapshot: the DataFrames stay consistent with each other
        g = omnigraph_spark.read_graph(spark, args.graph, branch=args.branch, version=args.version)
        print(f"snapshot: branch {g.snapshot.branch}, graph v{g.snapshot.version}")
        for name, df in sorted({**g.nodes, **g.edges}.items()):
            print(f"  {name:<8} {df.count():>5} rows  columns: {', '.join(df.columns)}")

        person, company = g.nodes["Person"], g.nodes["Company"]
        works, knows = g.edges["WorksAt"], g.edges["Knows"]

        # 2. node -> edge -> node join: employees per industry
        per_industry = (
            works.join(person, works.src == person.id)
            .join(company, works.dst == company.id)
            .groupBy(company.industry.alias("industry"))
            .agg(F.count("*").alias("employees"), F.round(F.avg(person.age), 1).alias("avg_age"))
            .orderBy(F.desc("employees"), "industry")
        )
        print("employees per industry (Person -[WorksAt]-> Company):")
        per_industry.show(truncate=False)

        # 3. two hops: who can introduce whom (a -> b -> c, a does not know c yet)
        k1, k2 = knows.alias("k1"), knows.alias("k2")
        intros = (
            k1.join(k2, F.col("k1.dst") == F.col("k2.src"))
            .filter(F.col("k1.src") != F.col("k2.dst"))
            .select(F.col("k1.src").alias("a"), F.col("k1.dst").alias("via"), F.col("k2.dst").alias("c"))
            .join(knows.select(F.col("src").alias("a"), F.col("dst").alias("c")), ["a", "c"], "left_anti")
        )
        print(f"possible introductions (two Knows hops, not yet connected): {intros.count()}")
        top = intros.groupBy("via").count().orderBy(F.desc("count"), "via").limit(3)
        print("best connectors:", ", ".join(f"{r['via']} ({r['count']})" for r in top.collect()))

        # 4. one type through the data source: column selection and a filter pushed to Lance
        seniors = (
            spark.read.format("omnigraph")
            .option("type", "Person")
            .option("branch", args.branch)
            .option("columns", "id,age,city,role")
            .load(args.graph)
            .filter((F.col("age") >= 55) & (F.col("role") == "engineer"))
        )
        print(f"engineers aged 55+: {seniors.count()}")

        # 5. the GraphFrames-shaped views
        v, e = g.vertices(qualify_ids=True), g.edges_df(qualify_ids=True)
        print(f"vertices: {v.count()}  edges: {e.count()}  (ids qualified as Type:id)")
        e.groupBy("type").count().orderBy("type").show()
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
