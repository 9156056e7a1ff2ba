"""One small Spark application per invocation, for the reliability suite (never imported by pytest).

Usage: ``python spark_job.py '<json spec>'``. The spec's ``kind`` picks the job:

* ``load``    — one load: ``api`` "df" (``df.write.format("omnigraph")``, single type) or "graph"
  (``write_graph`` of Person + Knows, one commit); ``mode``, ``branch``, ``prefix``, ``n``.
  A failpoint (``OMNIGRAPH_SPARK_FAILPOINT`` in the environment) may kill it at a protocol step.
* ``task_fault`` — the writer's input raises on attempt 0 of the even partitions (task retries
  must be allowed by ``master``, e.g. ``local[2,3]``).
* ``speculation`` — one deliberately slow partition with ``spark.speculation`` on.
* ``reader``  — read a table repeatedly while others write; report (version, manifest row
  count, rows read, distinct ids) per read.

Protocol: on success the last stdout line is ``RESULT <json>``; a typed failure prints
``ERROR <CODE> <message>`` and exits 3; anything else exits 4. A failpoint kills the process
(or, for ``df.write``, the Python worker that runs the commit).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

SPEC = json.loads(sys.argv[1])
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import warnings  # noqa: E402

warnings.filterwarnings("ignore")


def session(master: str = "local[2]", extra: dict | None = None):
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName(f"omnigraph-reliability-{SPEC['kind']}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "768m")
        # a short-lived JVM: skip the optimising JIT tiers and keep GC simple (startup time)
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("OFF")
    from omnigraph_spark.spark import register

    register(s)
    return s


def people_rows(prefix: str, n: int):
    return [(f"{prefix}{i:03d}", i) for i in range(n)]


def knows_rows(prefix: str, n: int):
    # a chain over the load's own people: edges are valid only together with their nodes
    return [(f"k-{prefix}{i:03d}", f"{prefix}{i:03d}", f"{prefix}{i + 1:03d}") for i in range(max(n - 1, 0))][: n // 2]


def _gated(df, gate: str):
    """Tasks wait until the file ``gate`` exists: the job is planned (its base versions pinned)
    long before it stages and commits, so the test can move the graph in between."""

    def wait(batches):
        deadline = time.monotonic() + 180
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.1)
        yield from batches

    return df.mapInArrow(wait, df.schema)


def job_load(spark):
    mode, branch, prefix, n = SPEC["mode"], SPEC.get("branch", "main"), SPEC["prefix"], SPEC["n"]
    extra = [tuple(r) for r in SPEC.get("extra_people", [])]
    people = spark.createDataFrame(people_rows(prefix, n) + extra, "name string, age int").repartition(2)
    if SPEC.get("gate"):
        people = _gated(people, SPEC["gate"])
    if SPEC["api"] in ("df", "df_jvm"):
        w = (
            people.write.format("omnigraph")
            .option("type", "Person")
            .option("branch", branch)
            .option("writeMode", mode)
            .option("actor", SPEC.get("actor", "reliability"))
        )
        if SPEC["api"] == "df_jvm":  # the shim's provider: staged in the JVM, committed by its bridge process
            w = w.option("engine", "jvm")
        for k, v in SPEC.get("options", {}).items():
            w = w.option(k, v)
        w.mode("append").save(SPEC["root"])
        return {"ids": [r[0] for r in people_rows(prefix, n)] + [r[0] for r in extra]}
    from omnigraph_spark.spark.graph_io import write_graph

    knows = spark.createDataFrame(knows_rows(prefix, n), "id string, `from` string, `to` string").repartition(2)
    res = write_graph(
        SPEC["root"],
        {"Person": people, "Knows": knows},
        mode=mode,
        branch=branch,
        actor=SPEC.get("actor", "reliability"),
        options=SPEC.get("options"),
        engine="jvm" if SPEC["api"] == "graph_jvm" else "python",
    )
    return {
        "ids": [r[0] for r in people_rows(prefix, n)] + [r[0] for r in extra],
        "edges": [r[0] for r in knows_rows(prefix, n)],
        "manifest_version": res.manifest_version,
    }


def _faulty_frame(spark, n: int, parts: int, fail_even: bool, slow_partition: int = -1, slow_s: float = 0.0):
    """Rows ``f000..`` in ``parts`` partitions; the input raises on the first attempt of every even
    partition (``fail_even``) and/or sleeps in ``slow_partition`` on its first attempt."""
    marks = SPEC.get("marks")

    def flaky(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid, attempt = ctx.partitionId(), ctx.attemptNumber()
        if marks:
            os.makedirs(marks, exist_ok=True)
            open(os.path.join(marks, f"p{pid}-a{attempt}"), "w").close()
        for i, b in enumerate(batches):
            if i == 0 and attempt == 0 and pid == slow_partition:
                time.sleep(slow_s)
            yield b
            if fail_even and attempt == 0 and pid % 2 == 0 and i == 2:
                # three small batches went downstream: the writer has staged (some) files
                if pid % 4 == 0:  # the input itself fails
                    raise RuntimeError(f"injected fault in partition {pid} attempt {attempt}")
                # a transient fault of another kind. Not a poison row: a data error is the
                # load's answer, never retried (I20, tests/reliability/test_bad_rows.py)
                raise OSError(f"injected transient I/O fault in partition {pid} attempt {attempt}")

    df = spark.createDataFrame([(f"f{i:03d}", i) for i in range(n)], "name string, age int").repartition(parts)
    # small Arrow batches so a partition yields several batches (the fault hits mid-stream)
    return df.mapInArrow(flaky, df.schema)


def job_task_fault(spark):
    df = _faulty_frame(spark, SPEC["n"], SPEC.get("parts", 4), fail_even=True)
    api = SPEC.get("api", "df")
    if api == "df":
        (
            df.write.format("omnigraph")
            .option("type", "Person")
            .option("maxRowsPerFile", "4")
            .mode("append")
            .save(SPEC["root"])
        )
    else:
        from omnigraph_spark.spark.graph_io import write_graph

        engine = "jvm" if api == "graph_jvm" else "python"
        write_graph(SPEC["root"], {"Person": df}, options={"maxRowsPerFile": "4"}, engine=engine)
    marks = SPEC.get("marks")
    return {
        "ids": [f"f{i:03d}" for i in range(SPEC["n"])],
        "attempts": sorted(os.listdir(marks)) if marks and os.path.isdir(marks) else None,
    }


def job_speculation(spark):
    df = _faulty_frame(
        spark, SPEC["n"], SPEC.get("parts", 4), fail_even=False, slow_partition=1, slow_s=SPEC.get("slow_s", 6.0)
    )
    (
        df.write.format("omnigraph")
        .option("type", "Person")
        .option("maxRowsPerFile", "4")
        .mode("append")
        .save(SPEC["root"])
    )
    marks = SPEC.get("marks")
    return {
        "ids": [f"f{i:03d}" for i in range(SPEC["n"])],
        "attempts": sorted(os.listdir(marks)) if marks and os.path.isdir(marks) else None,
    }


def job_reader(spark):
    """Read one table at pinned snapshots while writers run (I13)."""
    from pyspark.sql import functions as F

    from omnigraph_spark import Graph

    out = []
    deadline = time.monotonic() + SPEC.get("seconds", 20)
    until = SPEC.get("until")  # keep reading until this file exists (the writers are done)

    def more() -> bool:
        if until:
            return not os.path.exists(until) and time.monotonic() < deadline
        return time.monotonic() < deadline

    final = False
    while len(out) < SPEC.get("max_reads", 12):
        if not more():
            if final or not until:
                break
            final = True  # one last read after the writers finished
        g = Graph.open(SPEC["root"])
        snap = g.snapshot(SPEC.get("branch", "main"))
        t = snap.table("node:Person")
        df = (
            spark.read.format("omnigraph")
            .option("type", "Person")
            .option("version", str(snap.version))
            .load(SPEC["root"])
        )
        agg = df.agg(F.count("*").alias("n"), F.countDistinct("id").alias("d")).collect()[0]
        out.append({"version": snap.version, "row_count": t.row_count, "read": agg["n"], "distinct": agg["d"]})
        if SPEC.get("signal") and len(out) == 1:
            open(SPEC["signal"], "w").close()  # the writers may go now: this read came first
        time.sleep(0.2)
    return {"reads": out}


def job_delete(spark):
    """A node delete (``SPEC['names']``) with its cascade to edge:Knows: one commit of two tables."""
    names = spark.createDataFrame([(n,) for n in SPEC["names"]], "name string")
    if SPEC["api"] == "df":
        (
            names.write.format("omnigraph")
            .option("type", "Person")
            .option("writeMode", "delete")
            .option("actor", "crash")
            .mode("append")
            .save(SPEC["root"])
        )
        return {}
    from omnigraph_spark.spark.graph_io import write_graph

    res = write_graph(SPEC["root"], {"Person": names}, mode="delete", actor="crash")
    return {"manifest_version": res.manifest_version}


JOBS = {
    "load": job_load,
    "delete": job_delete,
    "task_fault": job_task_fault,
    "speculation": job_speculation,
    "reader": job_reader,
}


def main() -> int:
    t0 = time.monotonic()
    spark = None
    try:
        conf = dict(SPEC.get("conf") or {})
        if SPEC.get("api") in ("graph_jvm", "df_jvm"):  # the JVM write path: the shim on the class path
            from omnigraph_spark.spark.jvm_read import shim_spark_conf

            conf.update(shim_spark_conf())
        spark = session(SPEC.get("master", "local[2]"), conf)
        print(f"STARTED {time.monotonic() - t0:.1f}s", flush=True)
        result = JOBS[SPEC["kind"]](spark)
        result["seconds"] = round(time.monotonic() - t0, 1)
        print("COMPLETED", flush=True)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    except BaseException as e:  # report the typed error, if any, for the parent test
        from omnigraph_spark.spark import unwrap_error

        typed = unwrap_error(e)
        if typed is not None:
            print(f"ERROR {typed.code} {str(typed)[:2000]}", flush=True)
            return 3
        traceback.print_exc()
        print(f"ERROR UNTYPED {type(e).__name__}: {str(e)[:2000]}", flush=True)
        return 4
    finally:
        if spark is not None:
            try:
                spark.stop()
            except Exception:
                pass


if __name__ == "__main__":
    sys.exit(main())
