"""A streaming Spark application for the stream kill-and-restart tests (never imported by pytest).

Usage: ``python stream_app.py '<json spec>'``. Reads JSON event files from ``src`` (one file per
micro-batch) and writes them into the graph at ``uri`` from the checkpoint ``ck``:

* ``api`` "graph": ``foreachBatch(GraphBatchWriter)``, Person nodes and Knows edges in one
  commit per micro-batch;
* ``api`` "sink": ``writeStream.format("omnigraph")``, the Person events only.

``trigger`` "processing" runs until the process is killed; "available" drains the folder and
exits 0 after printing ``DONE``. ``STARTED`` is printed once the query runs. A failpoint
(``OMNIGRAPH_SPARK_FAILPOINT``) may kill the committing process at a protocol step.
"""

from __future__ import annotations

import json
import os
import sys
import time

SPEC = json.loads(sys.argv[1])
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

EVENT_SCHEMA = "kind string, name string, age int, src string, dst string"


def split_events(batch_df):
    """Events -> Person nodes and Knows edges."""
    from pyspark.sql import functions as F

    return {
        "Person": batch_df.where(F.col("kind") == "person").select("name", "age"),
        "Knows": batch_df.where(F.col("kind") == "knows").select("src", "dst"),
    }


def main() -> int:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from omnigraph_spark.spark import register
    from omnigraph_spark.spark.stream import GraphBatchWriter

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("omnigraph-stream-kill")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    register(spark)
    events = spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", 1).json(SPEC["src"])
    if SPEC["api"] == "graph":
        w = events.writeStream.foreachBatch(GraphBatchWriter(SPEC["uri"], split_events, engine="python"))
    else:
        w = (
            events.where(F.col("kind") == "person")
            .select("name", "age")
            .writeStream.format("omnigraph")
            .option("type", "Person")
            .option("path", SPEC["uri"])
        )
    w = w.option("checkpointLocation", SPEC["ck"])
    w = w.trigger(availableNow=True) if SPEC["trigger"] == "available" else w.trigger(processingTime="200 milliseconds")
    q = w.start()
    print(f"STARTED {q.id}", flush=True)
    try:
        q.awaitTermination()
    except Exception as e:
        from omnigraph_spark.spark import unwrap_error

        typed = unwrap_error(e)
        print(f"ERROR {typed.code if typed else 'UNTYPED'} {str(typed or e)[:1500]}", flush=True)
        return 3
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    print(f"EXIT {rc} after {time.monotonic() - t0:.1f}s", flush=True)
    sys.exit(rc)
