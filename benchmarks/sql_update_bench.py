"""SQL ``UPDATE`` through the catalog against the DataFrame merge it stands for, in one local
SparkSession (``local[2]``, the shim on the class path).

A graph gets ``--rows`` ``Item`` nodes (string @key, I64, F64). Then, ``--repeats`` times,
alternating, the same change of the first ``--rows``/100 keys (``qty + 1``):

* ``sql_update``: ``UPDATE og.bench.Item SET qty = qty + 1 WHERE name < '<key>'``: a row-level
  operation scanning one pinned snapshot, the JVM sink staging the changed rows, ONE commit;
* ``df_merge``: ``spark.read.format("omnigraph")`` of the same rows, ``qty + 1``, written back
  with ``writeMode=merge`` (the DataFrame API's way to do the same update).

Reports medians and the ratio sql_update / df_merge; each run checks that both committed one
graph version and that the rows changed. The machine may be shared: compare the ratio from one
run, never seconds across runs.

    python -m benchmarks.sql_update_bench --rows 200000 --out benchmarks/out/sql-update-200k.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time

from benchmarks.run import make_spark, median

log = logging.getLogger("sql_update_bench")

SCHEMA = """
node Item {
    name: String @key
    qty: I64
    price: F64
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from pyspark.sql import functions as F

    from omnigraph_spark import Graph

    spark = make_spark(None)
    root = tempfile.mkdtemp(prefix="sql-update-bench-")
    spark.conf.set("spark.sql.catalog.og", "io.omnigraph.spark.OmnigraphCatalog")
    spark.conf.set("spark.sql.catalog.og.root", root)
    spark.sql(f"CREATE NAMESPACE og.bench WITH PROPERTIES ('schema' = '{SCHEMA}')")
    uri = os.path.join(root, "bench")
    graph = Graph.open(uri)
    rows = spark.range(0, a.rows, 1, 2).select(
        F.format_string("item-%010d", F.col("id")).alias("name"),
        ((F.col("id") * 7919) % 1000).alias("qty"),
        F.rand(7).alias("price"),
    )
    rows.write.format("omnigraph").option("type", "Item").mode("append").save(uri)
    bound = f"item-{a.rows // 100:010d}"
    changed = a.rows // 100
    times: dict[str, list[float]] = {"sql_update": [], "df_merge": []}

    def qty_sum() -> int:
        return spark.sql(f"SELECT sum(qty) FROM og.bench.Item WHERE name < '{bound}'").first()[0]

    for _ in range(a.repeats):
        for name in ("sql_update", "df_merge"):
            before, total = graph.snapshot().version, qty_sum()
            t0 = time.perf_counter()
            if name == "sql_update":
                spark.sql(f"UPDATE og.bench.Item SET qty = qty + 1 WHERE name < '{bound}'")
            else:
                df = spark.read.format("omnigraph").option("type", "Item").load(uri).where(F.col("name") < bound)
                df = df.select("name", (F.col("qty") + 1).alias("qty"), "price")
                w = df.write.format("omnigraph").option("type", "Item").option("writeMode", "merge")
                w.mode("append").save(uri)
            times[name].append(time.perf_counter() - t0)
            assert graph.snapshot().version == before + 1, name
            assert qty_sum() == total + changed, name
            log.info("%s: %.2f s", name, times[name][-1])
    result = {
        "rows": a.rows,
        "changed": changed,
        "repeats": a.repeats,
        "median_s": {k: median(v) for k, v in times.items()},
        "ratio_sql_update_to_df_merge": median(times["sql_update"]) / median(times["df_merge"]),
    }
    print(json.dumps(result, indent=2))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)
    spark.stop()


if __name__ == "__main__":
    main()
