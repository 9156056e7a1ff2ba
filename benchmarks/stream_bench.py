"""Streaming throughput and per-micro-batch commit latency (docs/streaming.md).

Two measurements in one local SparkSession (``local[2]``):

* ``sink`` / ``graph``: a file stream of ``--batches`` files of ``--rows`` events each (one file
  per micro-batch, ``availableNow``) through ``writeStream.format("omnigraph")`` (Person nodes)
  and through ``foreachBatch(GraphBatchWriter)`` (Person nodes + as many Knows edges, one
  commit per batch). Per micro-batch: Spark's ``addBatch`` (staging + commit) and
  ``triggerExecution`` (the whole micro-batch); sustained rows/s = rows / sum of
  ``triggerExecution``.
* ``commit``: the driver side of one micro-batch commit alone (``OmnigraphStreamWriter.commit``:
  open the graph, validate under the lease, commit, publish), the rows already staged, as the
  table grows batch by batch.

    .venv/bin/python -m benchmarks.stream_bench --rows 5000 --batches 8
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List

log = logging.getLogger("benchmarks.stream_bench")


def _drop(folder: Path, batches: int, rows: int, edges: bool) -> None:
    folder.mkdir(parents=True)
    t = time.time() - batches - 10
    for b in range(batches):
        recs = [{"kind": "person", "name": f"b{b:03d}-{i:06d}", "age": i % 90} for i in range(rows)]
        if edges:
            recs += [{"kind": "knows", "src": f"b{b:03d}-{i:06d}", "dst": f"b{b:03d}-{(i + 1) % rows:06d}"}
                     for i in range(rows)]
        p = folder / f"e{b:04d}.json"
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        os.utime(p, (t + b, t + b))


def _split(batch_df):
    from pyspark.sql import functions as F

    return {"Person": batch_df.where(F.col("kind") == "person").select("name", "age"),
            "Knows": batch_df.where(F.col("kind") == "knows").select("src", "dst")}


def _pct(xs: List[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run_stream(spark, api: str, work: Path, schema_text: str, batches: int, rows: int) -> Dict[str, object]:
    from pyspark.sql import functions as F

    from omnigraph_spark import Graph
    from omnigraph_spark.spark.stream import GraphBatchWriter

    uri = str(work / f"{api}-graph")
    Graph.init(uri, schema_text)
    src = work / f"{api}-in"
    _drop(src, batches, rows, edges=api == "graph")
    ev = (spark.readStream.schema("kind string, name string, age int, src string, dst string")
          .option("maxFilesPerTrigger", 1).json(str(src)))
    if api == "graph":
        w = ev.writeStream.foreachBatch(GraphBatchWriter(uri, _split, engine="python"))
    else:
        w = (ev.where(F.col("kind") == "person").select("name", "age").writeStream.format("omnigraph")
             .option("type", "Person").option("path", uri))
    t0 = time.monotonic()
    q = w.option("checkpointLocation", str(work / f"{api}-ck")).trigger(availableNow=True).start()
    q.awaitTermination()
    wall = time.monotonic() - t0
    prog = [p for p in q.recentProgress if p["numInputRows"]]
    add = [p["durationMs"].get("addBatch", 0) / 1000 for p in prog]
    trig = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in prog]
    total_rows = sum(p["numInputRows"] for p in prog)
    graph_rows = rows * (2 if api == "graph" else 1) * len(prog)
    steady = trig[1:] or trig  # the first micro-batch pays the cold start
    return {"api": api, "micro_batches": len(prog), "input_rows": total_rows, "graph_rows": graph_rows,
            "wall_s": round(wall, 1),
            "rows_per_s_sustained": round(rows * (2 if api == "graph" else 1) * len(steady) / sum(steady), 0),
            "add_batch_s_p50": round(statistics.median(add), 2), "add_batch_s_max": round(max(add), 2),
            "trigger_s_p50": round(statistics.median(trig), 2), "first_trigger_s": round(trig[0], 2),
            "graph_commits": len(Graph.open(uri).log()) - 1}


def run_commit_latency(spark, work: Path, schema_text: str, batches: int, rows: int) -> Dict[str, object]:
    import pyarrow as pa

    from omnigraph_spark import Graph
    from omnigraph_spark.spark.stream import OmnigraphStreamWriter, StreamMessage

    uri = str(work / "commit-graph")
    Graph.init(uri, schema_text)
    schema = spark.createDataFrame([], "name string, age int").schema
    opts = {"path": uri, "type": "Person"}
    lat: List[float] = []
    for b in range(batches):
        w = OmnigraphStreamWriter(opts, schema, False)  # Spark builds one per micro-batch too
        batch = pa.RecordBatch.from_pylist([{"name": f"c{b:03d}-{i:06d}", "age": i % 90} for i in range(rows)])
        msgs = [StreamMessage(w.write(iter([batch])).inner, "bench-query", b)]
        t0 = time.monotonic()
        OmnigraphStreamWriter(opts, schema, False).commit(msgs, b)  # and another for the commit
        lat.append(time.monotonic() - t0)
    return {"rows_per_batch": rows, "batches": batches, "commit_s": [round(x, 3) for x in lat],
            "commit_s_p50": round(statistics.median(lat), 3),
            "commit_s_p95": round(_pct(lat, 0.95), 3), "commit_s_first": round(lat[0], 3),
            "commit_s_last": round(lat[-1], 3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=5000, help="events (nodes; graph: + as many edges) per micro-batch")
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--sections", default="sink,graph,commit", help="comma-separated: sink, graph, commit")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    from pyspark.sql import SparkSession

    from omnigraph_spark.spark import register

    schema_text = Path(__file__).resolve().parents[1].joinpath("tests", "fixtures", "omnigraph-0.7.2",
                                                               "test.pg").read_text()
    spark = (SparkSession.builder.master("local[2]").appName("omnigraph-stream-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.worker.reuse", "true").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    results = {}
    with tempfile.TemporaryDirectory(prefix="stream-bench-") as d:
        work = Path(d)
        for api in ("sink", "graph"):
            if api in sections:
                results[api] = run_stream(spark, api, work, schema_text, args.batches, args.rows)
                log.info("%s: %s", api, results[api])
        if "commit" in sections:
            results["commit"] = run_commit_latency(spark, work, schema_text, args.batches, args.rows)
            log.info("commit: %s", results["commit"])
    spark.stop()
    text = json.dumps(results, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
