"""Subprocess body for the credentials tests: one Spark application that writes and reads a
graph on S3 through both paths, with the Spark event log on, and prints what a user sees.

Usage: python s3_secrets_app.py ROOT EVENT_LOG_DIR MODE
  MODE options: credentials as ``storage.*`` options / ``storage_options`` (JSON in
    OMNIGRAPH_TEST_STORAGE_OPTIONS);
  MODE env: no options at all; the credentials and endpoint are in the environment (AWS_*).
Prints plan strings (explain), the rows read, the error messages of two refused loads (one
per path) and "DONE"; logs at INFO (this package and Spark's) to stderr. Exits non-zero if a
path other than the one asked for ran.
"""

import json
import logging
import os
import sys

from pyspark.sql import SparkSession

from omnigraph_spark import read_table, write_graph
from omnigraph_spark.spark import register
from omnigraph_spark.spark.jvm_read import shim_spark_conf

root, event_dir, mode = sys.argv[1:4]
so = json.loads(os.environ["OMNIGRAPH_TEST_STORAGE_OPTIONS"]) if mode == "options" else None
opts = {f"storage.{k}": v for k, v in (so or {}).items()}
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
spark = (
    SparkSession.builder.master("local[2]")
    .appName("omnigraph-s3-secrets")
    .config("spark.ui.enabled", "false")
    .config("spark.default.parallelism", "2")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.eventLog.enabled", "true")
    .config("spark.eventLog.dir", event_dir)
    .config("spark.eventLog.compress", "false")  # plain JSON lines, searchable
    .config(map=shim_spark_conf())
    .getOrCreate()
)
spark.sparkContext.setLogLevel("INFO")
register(spark)
staged = []


class Staged(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("staged "):
            staged.append(msg)


logging.getLogger("omnigraph_spark").addHandler(Staged())


def show(df):
    df.explain(True)  # to stdout: the plan strings a user sees
    print(df._jdf.queryExecution().toString())
    print(sorted(tuple(r) for r in df.collect()))


people = spark.createDataFrame([("a", 1), ("b", 2)], "name string, age int")
knows = spark.createDataFrame([("a", "b")], "src string, dst string")
bad = spark.createDataFrame([("a", "nobody")], "src string, dst string")

# the Python path: format("omnigraph") with storage.* options
w = people.write.format("omnigraph").mode("append").option("type", "Person")
for k, v in opts.items():
    w = w.option(k, v)
w.save(root)
r = spark.read.format("omnigraph").option("type", "Person")
for k, v in opts.items():
    r = r.option(k, v)
show(r.load(root))
w = bad.write.format("omnigraph").mode("append").option("type", "Knows")
for k, v in opts.items():
    w = w.option(k, v)
try:
    w.save(root)
    sys.exit("the dangling edge was not refused (Python path)")
except Exception as e:
    print("PYTHON PATH ERROR:", e)

# the JVM paths
staged.clear()
write_graph(
    root, {"Person": people.selectExpr("concat(name, '2') AS name", "age"), "Knows": knows}, options=opts, engine="jvm"
)
if not any("(jvm" in m for m in staged) or any("(python" in m for m in staged):
    sys.exit(f"not staged in the JVM: {staged}")
df = read_table(spark, root, "Person", storage_options=so, engine="jvm")
if "omnigraph node:" not in df._jdf.queryExecution().executedPlan().toString():
    sys.exit("not scanned in the JVM")
show(df)
try:
    write_graph(root, {"Knows": bad}, options=opts, engine="jvm")
    sys.exit("the dangling edge was not refused (JVM path)")
except Exception as e:
    print("JVM PATH ERROR:", e)
print("STAGED:", staged)
spark.stop()
print("DONE")
