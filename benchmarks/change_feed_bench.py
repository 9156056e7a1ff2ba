"""The change feed of a 1% merge: omnigraph's ``readChangeFeed`` against Delta's Change Data Feed
for the same change, side by side, in one local SparkSession (``local[2]``).

Both tables get the same ``--rows`` synthetic ``Item`` rows (:func:`benchmarks.run.node_frame`)
and then the same merge of ``--rows``/100 existing keys with a new ``qty`` (spread over the whole
key range, so it touches every data file of both tables). Then, ``--repeats`` times, alternating:

* ``omnigraph_feed``: ``spark.read.format("omnigraph").option("readChangeFeed", "true")`` of the
  merge's graph version only, into Spark's ``noop`` sink;
* ``delta_feed``: ``spark.read.format("delta").option("readChangeFeed", "true")`` of the
  merge's Delta version only, into ``noop``;
* ``omnigraph_scan`` / ``delta_scan``: a full scan of each table into ``noop``, the cost the
  feed is measured against ("a 1% merge reads about 1% of the table"); ``omnigraph_python_scan``
  the same scan through the Python source (``engine=python``), which the feed's path shares:
  Spark's Python data source workers for the schema, the planning and each task.

Also the driver's planning alone (``omnigraph_plan``: ``store.changes.plan_changes``, in this
process, which reads manifests, fragment metadata, the touched fragments' deletion vectors and
the changed rows' ids). Each feed must hold 2 x rows/100 rows (a pre- and a postimage per key).
Reports medians and ratios (feed / scan per system, omnigraph feed / Delta feed); the machine
may be shared, so compare ratios from one run, never seconds across runs.

Needs delta-spark (the ``delta`` extra; the Makefile's ``.venv-spark40``):

    .venv-spark40/bin/python -m benchmarks.change_feed_bench --rows 12000000 --out benchmarks/out/cdf-12m.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _session():
    from delta import configure_spark_with_delta_pip  # the 'delta' extra (imported where used)

    from omnigraph_spark import configure_spark
    from omnigraph_spark.demo import local_builder, local_spark
    from omnigraph_spark.spark.shim_conf import shim_spark_conf

    builder = local_builder(
        "omnigraph-change-feed-bench",
        "local[2]",
        conf={
            "spark.driver.memory": "6g",
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        },
    )
    builder = configure_spark_with_delta_pip(builder)
    if shim_spark_conf():
        builder = configure_spark(builder)
    spark = local_spark(builder=builder)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def seed(spark, work: Path, rows: int) -> dict[str, Any]:
    """Both tables with the same rows, then the same 1% merge into each; their versions."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from benchmarks.run import SCHEMA, node_frame
    from omnigraph_spark import Graph, write_table

    graph_uri, delta_path = str(work / "graph"), str(work / "delta")
    Graph.init(graph_uri, SCHEMA)
    base = node_frame(spark, rows, seed=7).cache()
    base.count()
    t_graph = _timed(lambda: write_table(base, graph_uri, "Item"))
    t_delta = _timed(lambda: base.write.format("delta").option("delta.enableChangeDataFeed", "true").save(delta_path))
    changed = rows // 100
    step = rows // changed
    merge = node_frame(spark, changed, seed=8, index=F.col("id") * step).withColumn("qty", F.lit(-1).cast("long"))
    merge = merge.cache()
    merge.count()
    t_gmerge = _timed(lambda: write_table(merge, graph_uri, "Item", mode="merge"))
    graph_version = Graph.open(graph_uri).snapshot().version

    def delta_merge():
        (
            DeltaTable.forPath(spark, delta_path)
            .alias("t")
            .merge(merge.alias("s"), "t.name = s.name")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    t_dmerge = _timed(delta_merge)
    delta_version = DeltaTable.forPath(spark, delta_path).history(1).select("version").first()["version"]
    base.unpersist()
    merge.unpersist()
    return {
        "graph_uri": graph_uri,
        "delta_path": delta_path,
        "graph_version": graph_version,
        "delta_version": delta_version,
        "changed_keys": changed,
        "seconds": {"graph_load": t_graph, "delta_load": t_delta, "graph_merge": t_gmerge, "delta_merge": t_dmerge},
    }


def contenders(spark, s: dict[str, Any]) -> dict[str, Any]:
    def omnigraph_feed():
        return (
            spark.read.format("omnigraph")
            .option("type", "Item")
            .option("readChangeFeed", "true")
            .option("startingVersion", s["graph_version"])
            .option("endingVersion", s["graph_version"])
            .load(s["graph_uri"])
        )

    def delta_feed():
        return (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", s["delta_version"])
            .option("endingVersion", s["delta_version"])
            .load(s["delta_path"])
        )

    return {
        "omnigraph_feed": omnigraph_feed,
        "delta_feed": delta_feed,
        "omnigraph_scan": lambda: spark.read.format("omnigraph").option("type", "Item").load(s["graph_uri"]),
        "omnigraph_python_scan": lambda: (
            spark.read.format("omnigraph").option("type", "Item").option("engine", "python").load(s["graph_uri"])
        ),
        "delta_scan": lambda: spark.read.format("delta").load(s["delta_path"]),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--work", default=None, help="scratch directory (default: a temporary one, removed)")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    from omnigraph_spark.store import changes

    work = Path(args.work or tempfile.mkdtemp(prefix="cdf-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    spark = _session()
    try:
        s = seed(spark, work, args.rows)
        runs = contenders(spark, s)
        counts = {}
        for name in ("omnigraph_feed", "delta_feed"):
            df = runs[name]()
            counts[name] = {
                k: v for k, v in ((r["_change_type"], r["count"]) for r in df.groupBy("_change_type").count().collect())
            }
        secs: dict[str, list[float]] = {n: [] for n in [*runs, "omnigraph_plan"]}
        for _ in range(2):  # warm-up: JIT, Python workers, file caches
            for f in runs.values():
                f().write.format("noop").mode("overwrite").save()
        for i in range(args.repeats):
            order = list(runs) if i % 2 == 0 else list(reversed(runs))
            for name in order:
                secs[name].append(_timed(lambda n=name: runs[n]().write.format("noop").mode("overwrite").save()))
            rng = changes.FeedRange("main", s["graph_version"], s["graph_version"])
            secs["omnigraph_plan"].append(_timed(lambda r=rng: changes.plan_changes(s["graph_uri"], "node:Item", r)))
        med = {n: statistics.median(v) for n, v in secs.items()}
        result = {
            "machine": {
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "spark": spark.version,
                "load_avg": os.getloadavg(),
            },
            "rows": args.rows,
            "changed_keys": s["changed_keys"],
            "feed_rows": counts,
            "seed_seconds": s["seconds"],
            "seconds": secs,
            "median_seconds": med,
            "ratios": {
                "omnigraph_feed_over_scan": med["omnigraph_feed"] / med["omnigraph_scan"],
                "delta_feed_over_scan": med["delta_feed"] / med["delta_scan"],
                "omnigraph_feed_over_delta_feed": med["omnigraph_feed"] / med["delta_feed"],
            },
        }
        print(json.dumps(result, indent=2))
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=2))
        expected = {"update_preimage": s["changed_keys"], "update_postimage": s["changed_keys"]}
        for name, c in counts.items():
            assert c == expected, f"{name}: {c}, expected {expected}"
        return 0
    finally:
        spark.stop()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
