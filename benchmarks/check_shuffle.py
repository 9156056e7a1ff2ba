"""Shuffle bytes per row of each load-wide check, written as the Spark join or aggregation it
becomes when it runs on the executors: the constants of docs/scale.md's cost model.

On ``--rows`` synthetic rows read from Parquet files (a quarter ``Item`` nodes, the rest ``Link``
edges, as benchmarks/scale_bench.py generates them), with broadcast joins off (what Spark's
planner does once the node ids pass ``spark.sql.autoBroadcastJoinThreshold``), each check runs
once per id representation (the key string itself, a 32-hex-digit key of a UUID's entropy
derived from it, and a 64-bit ``xxhash64``) and Spark's
status store gives the bytes its shuffle stages wrote:

* ``key_unique``: ``nodes.groupBy(key).count() > 1`` (key uniqueness, the strict-append check
  against committed keys is the same shuffle on committed + new keys);
* ``endpoints``: ``edges.src`` and ``edges.dst`` left-anti joined to the node keys (endpoint
  existence): both ends and the node keys are shuffled;
* ``card``: ``edges.groupBy(src).count()`` checked against the bound (``@card``); map-side partial
  aggregation sends one row per (task, src).

    .venv/bin/python -m benchmarks.check_shuffle --rows 4000000 --out benchmarks/out/check-shuffle.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("benchmarks.check_shuffle")


def _stages(spark) -> dict[tuple, dict[str, int]]:
    """Every stage's shuffle metrics, from Spark's monitoring REST API (the UI's server)."""
    import urllib.request

    sc = spark.sparkContext
    with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages") as r:
        stages = json.load(r)
    return {
        (s["stageId"], s["attemptId"]): {
            "shuffle_write_bytes": s["shuffleWriteBytes"],
            "shuffle_write_records": s["shuffleWriteRecords"],
            "shuffle_read_bytes": s["shuffleReadBytes"],
        }
        for s in stages
        if s["status"] == "COMPLETE"
    }


def measured(spark, run: Callable[[], Any]) -> dict[str, Any]:
    """Run ``run`` (one or more Spark actions) and sum the shuffle metrics of the stages it added."""
    before = set(_stages(spark))
    t0 = time.perf_counter()
    result = run()
    wall = time.perf_counter() - t0
    new = [v for k, v in _stages(spark).items() if k not in before]
    tot = {k: sum(s[k] for s in new) for k in ("shuffle_write_bytes", "shuffle_write_records", "shuffle_read_bytes")}
    return {**tot, "stages": len(new), "wall_s": round(wall, 2), "result": result}


def checks(nodes, edges, id_of: Callable[[Any], Any]) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import functions as F

    keys = nodes.select(id_of(F.col("name")).alias("k"))

    def key_unique():
        return keys.groupBy("k").count().where("count > 1").count()

    def endpoints():
        ends = edges.select(id_of(F.col("src")).alias("k")).unionByName(edges.select(id_of(F.col("dst")).alias("k")))
        return ends.join(keys, "k", "left_anti").count()

    def card():
        return edges.groupBy(id_of(F.col("src")).alias("k")).count().where("count > 1000").count()

    return {"key_unique": key_unique, "endpoints": endpoints, "card": card}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from benchmarks.run import edge_frame, node_frame
    from benchmarks.scale_bench import split_rows

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("check-shuffle")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "0")  # the REST API reads the stages
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    n = split_rows(a.rows)
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "rows": a.rows,
        **{k: n[k] for k in ("nodes", "edges")},
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "spark": spark.version,
        "checks": {},
    }
    with tempfile.TemporaryDirectory(prefix="check-shuffle-") as d:
        node_frame(spark, n["nodes"], a.seed, 4).write.parquet(d + "/nodes")
        edge_frame(spark, n["edges"], n["nodes"], a.seed, 4).write.parquet(d + "/edges")
        nodes, edges = spark.read.parquet(d + "/nodes"), spark.read.parquet(d + "/edges")
        # the synthetic keys are sequential ("item-0000012345") and compress far better in a shuffle
        # than real keys would; a 32-hex-digit key (a UUID's entropy) and a 64-bit hash do not
        reps = {
            "key": lambda c: c,
            "uuid_like_key": lambda c: F.substring(F.sha2(c, 256), 1, 32),
            "xxhash64": lambda c: F.xxhash64(c),
        }
        for rep, id_of in reps.items():
            for name, fn in checks(nodes, edges, id_of).items():
                m = measured(spark, fn)
                # ids each check feeds its shuffle: node keys; both ends of every edge + node keys; sources
                per = {"key_unique": n["nodes"], "endpoints": 2 * n["edges"] + n["nodes"], "card": n["edges"]}[name]
                m["ids_in"] = per
                m["shuffle_write_bytes_per_id"] = round(m["shuffle_write_bytes"] / per, 2)
                res["checks"][f"{name}/{rep}"] = m
                log.info("%s/%s: %s", name, rep, m)
        res["key_bytes_per_node_row_on_disk"] = round(
            sum(f.stat().st_size for f in Path(d, "nodes").glob("*.parquet")) / n["nodes"], 2
        )
    res["load_end"] = [round(x, 2) for x in os.getloadavg()]
    spark.stop()
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return res


if __name__ == "__main__":
    main()
