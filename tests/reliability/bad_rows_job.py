"""One Spark application loading a bad row three ways, for tests/reliability/test_bad_rows.py
(never imported by pytest). A data error is one typed error, never a retried task.

Usage: ``python bad_rows_job.py '<json spec>'`` with ``root`` (a graph of the sample schema),
``counters`` (a directory) and ``master`` (``local[2,4]``: four attempts per task allowed).
Spark's logging is left at its default (WARN), so the test sees what a user's console shows.

Each load reads a DataFrame whose ``name`` column goes through a Python UDF that appends one
line per row it computes to a file of its own: if a task were retried, its rows would be
computed again. Prints ``RESULT <json>``: per load the exception's class and first line, the
typed error's code and first line, the rows computed, and the graph's version before/after.
"""

from __future__ import annotations

import json
import os
import sys

SPEC = json.loads(sys.argv[1])
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

ROWS = [(f"p{i}", "Paris", "wizard" if i == 5 else "engineer") for i in range(8)]


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from omnigraph_spark import Graph, write_table
    from omnigraph_spark.spark import unwrap_error
    from omnigraph_spark.spark.jvm_read import shim_spark_conf

    b = SparkSession.builder.master(SPEC["master"]).appName("omnigraph-bad-rows").config("spark.ui.enabled", "false")
    for k, v in shim_spark_conf().items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    out = {"max_failures": spark.sparkContext.getConf().get("spark.task.maxFailures", None)}

    def counted(name: str):
        path = os.path.join(SPEC["counters"], name)

        @F.udf("string")
        def touch(v):
            with open(path, "a") as fh:
                fh.write(v + "\n")
            return v

        return touch

    def attempt(name: str, load) -> None:
        df = spark.createDataFrame(ROWS, "name string, city string, role string").repartition(2, "name")
        df = df.withColumn("name", counted(name)("name"))
        before = Graph.open(SPEC["root"]).snapshot().version
        res = {}
        try:
            load(df)
            res["raised"] = None
        except Exception as e:  # the point is what arrives
            typed = unwrap_error(e)
            res.update(
                raised=f"{type(e).__module__}.{type(e).__name__}",
                first_line=str(e).splitlines()[0],
                code=typed.code if typed else None,
                typed_first_line=str(typed).splitlines()[0] if typed else None,
            )
        path = os.path.join(SPEC["counters"], name)
        res["rows_computed"] = len(open(path).read().splitlines()) if os.path.exists(path) else 0
        res["versions"] = [before, Graph.open(SPEC["root"]).snapshot().version]
        out[name] = res

    attempt(
        "df_write", lambda df: df.write.format("omnigraph").option("type", "Person").mode("append").save(SPEC["root"])
    )
    attempt("python", lambda df: write_table(df, SPEC["root"], "Person", engine="python"))
    attempt("jvm", lambda df: write_table(df, SPEC["root"], "Person", engine="jvm"))
    print("RESULT " + json.dumps(out), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
