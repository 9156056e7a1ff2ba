"""One Spark application against a standalone cluster, for tests/spark/test_standalone_cluster.py
(never imported by pytest): what a ``spark-submit`` of a user's Python job does, started as
``python cluster_app.py '<json spec>'`` with the session built the way docs/api.md says, one
``omnigraph_spark.configure_spark(builder)`` line on a ``spark://`` master, or (``configure``
false) run by ``spark-submit`` with the shim's settings on its command line.

The spec's ``kind`` picks the job:

* ``roundtrip`` — ``write_table`` and ``read_table`` with ``engine="jvm"`` (they raise unless the
  JVM paths run), then ``df.write.format("omnigraph")`` and ``spark.read.format("omnigraph")``
  on the same graph, also with ``engine=jvm`` (the shim's provider); reports what each read returned.
* ``load`` — one load of ``n`` rows in ``parts`` partitions (``spark.range``: no shuffle), each
  task's input slowed by ``sleep_s`` per Arrow batch and marked in ``marks``
  (``p<partition>-a<attempt>``, holding the executor's work directory) when it starts and
  renamed ``.done`` when its input is consumed, through ``write_table`` (``api`` "jvm",
  ``engine="jvm"``) or ``df.write.format("omnigraph")`` with option ``engine=jvm`` (``api``
  "df"). The test kills a worker while it runs.

Protocol: the last stdout line is ``RESULT <json>`` (with the ``omnigraph_spark`` log lines the
job produced); a failure prints a traceback and exits 4.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
import warnings

SPEC = json.loads(sys.argv[1])
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
warnings.filterwarnings("ignore")


class Collect(logging.Handler):
    """The package's log lines: which path staged and scanned each table."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def session(master: str, conf: dict):
    from pyspark.sql import SparkSession

    import omnigraph_spark

    b = (
        SparkSession.builder.master(master)
        .appName(f"omnigraph-cluster-{SPEC['kind']}")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "768m")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.executor.extraJavaOptions", "-XX:+UseSerialGC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for k, v in conf.items():
        b = b.config(k, v)
    if SPEC.get("configure", True):  # else spark-submit was given the shim's settings
        b = omnigraph_spark.configure_spark(b)  # the one line docs/api.md gives
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def people(spark, prefix: str, start: int, n: int, parts: int):
    return spark.range(start, start + n, 1, parts).selectExpr(
        f"format_string('{prefix}%06d', id) AS name", "CAST(id AS INT) AS age"
    )


def job_roundtrip(spark) -> dict:
    from pyspark.sql import functions as F

    from omnigraph_spark import read_table, write_table

    root, n = SPEC["root"], SPEC["n"]
    steps, t = {}, time.monotonic()

    def step(name: str) -> None:
        nonlocal t
        steps[name] = round(time.monotonic() - t, 1)
        t = time.monotonic()

    write_table(people(spark, "j", 0, n, 4), root, "Person", engine="jvm")
    step("write_table")
    jvm = read_table(spark, root, "Person", engine="jvm")
    jvm_rows = sorted(tuple(r) for r in jvm.select("name", "age").collect())
    step("read_table")
    (
        people(spark, "d", 0, n, 4)
        .write.format("omnigraph")
        .option("type", "Person")
        .option("engine", "jvm")
        .mode("append")
        .save(root)
    )
    step("format_write")
    fmt = spark.read.format("omnigraph").option("type", "Person").option("engine", "jvm").load(root)
    fmt_rows = sorted(tuple(r) for r in fmt.select("name", "age").collect())
    step("format_read")
    filtered = (
        spark.read.format("omnigraph")
        .option("type", "Person")
        .load(root)
        .where(F.col("name") >= "j")
        .agg(F.count("*"))
        .first()[0]
    )
    step("format_read_filtered")
    return {"jvm_rows": jvm_rows, "format_rows": fmt_rows, "format_filtered": filtered, "steps": steps}


def job_load(spark) -> dict:
    from pyspark import TaskContext

    from omnigraph_spark import write_table

    root, n, parts, marks, sleep_s = SPEC["root"], SPEC["n"], SPEC["parts"], SPEC["marks"], SPEC["sleep_s"]
    os.makedirs(marks, exist_ok=True)

    def slow(batches):
        ctx = TaskContext.get()
        mark = os.path.join(marks, f"p{ctx.partitionId()}-a{ctx.attemptNumber()}")
        with open(mark, "w") as fh:  # the executor's work directory: which worker runs the task
            fh.write(os.getcwd())
        for b in batches:
            time.sleep(sleep_s)
            yield b
        os.rename(mark, mark + ".done")  # the input is consumed (the task may still be staging)

    df = people(spark, "k", 0, n, parts)
    df = df.mapInArrow(slow, df.schema)
    if SPEC["api"] == "jvm":
        write_table(df, root, "Person", engine="jvm")
    else:
        df.write.format("omnigraph").option("type", "Person").option("engine", "jvm").mode("append").save(root)
    return {"ids": [f"k{i:06d}" for i in range(n)], "attempts": sorted(os.listdir(marks))}


JOBS = {"roundtrip": job_roundtrip, "load": job_load}


def main() -> int:
    t0 = time.monotonic()
    collect = Collect()
    pkg = logging.getLogger("omnigraph_spark")
    pkg.addHandler(collect)
    pkg.setLevel(logging.INFO)
    spark = None
    try:
        spark = session(SPEC["master"], SPEC.get("conf") or {})
        print(f"STARTED {time.monotonic() - t0:.1f}s", flush=True)
        result = JOBS[SPEC["kind"]](spark)
        # how the shim reached the executors: shipped (spark.jars) or found at the same path
        result["conf"] = {
            k: spark.conf.get(k, None) for k in ("spark.jars", "spark.jars.packages", "spark.executor.extraClassPath")
        }
        result["log"] = collect.lines
        result["app_id"] = spark.sparkContext.applicationId
        result["seconds"] = round(time.monotonic() - t0, 1)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    except BaseException:
        traceback.print_exc()
        print("LOG " + json.dumps(collect.lines), flush=True)
        return 4
    finally:
        if spark is not None:
            try:
                spark.stop()
            except Exception:
                pass


if __name__ == "__main__":
    sys.exit(main())
