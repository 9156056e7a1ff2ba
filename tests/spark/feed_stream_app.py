"""A change-feed stream run as its own Spark application (the kill-and-restart test, I25):
``python -m tests.spark.feed_stream_app <graph root> <checkpoint> <out dir>`` reads Person's
change feed from version 1, one commit per micro-batch, and writes each micro-batch to
``<out>/batch=<id>/`` with overwrite: an idempotent sink, so a replayed micro-batch replaces its
own output. Runs until killed or until ``<out>/STOP`` exists and the stream is idle."""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession


def main(root: str, checkpoint: str, out: str) -> None:
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    from omnigraph_spark.spark import register

    register(spark)

    def sink(df, batch_id):
        df.write.mode("overwrite").parquet(os.path.join(out, f"batch={batch_id}"))

    q = (
        spark.readStream.format("omnigraph")
        .option("type", "Person")
        .option("readChangeFeed", "true")
        .option("startingVersion", "1")
        .option("maxCommitsPerTrigger", "1")
        .load(root)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    while not os.path.exists(os.path.join(out, "STOP")):
        time.sleep(0.2)
    q.processAllAvailable()
    q.stop()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
