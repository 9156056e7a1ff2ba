"""The Spark Connect tests' client (tests/spark/test_connect.py): one scenario against a Spark
Connect server, run in its own Python process (see tests/connect_server.py), printing a JSON
report as its last line. :func:`load_and_read` is also run on the classic test session, so
both paths do exactly the same loads and reads.

Usage: python tests/connect_client.py sc://127.0.0.1:<port> <scenario> '<json params>'
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from typing import Any

#: what each load and read of :func:`load_and_read` logs on the JVM path (graph_io, jvm_read)
JVM_STAGED = "(jvm):"
JVM_READ = "omnigraph JVM read"


class Collect(logging.Handler):
    """The connector's log lines of one scenario (they say which path each load and read took)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _rows(df, drop=()) -> list[list[Any]]:
    cols = [c for c in df.columns if c not in drop]
    out = []
    for r in df.select(*cols).collect():
        out.append([v.isoformat() if isinstance(v, (dt.date, dt.datetime)) else v for v in r])
    return sorted(out, key=lambda row: json.dumps(row, default=str))


def load_and_read(spark, root: str, jsonl: str) -> dict[str, Any]:
    """The same loads and reads on any session: a JSONL load (Python workers), a write_table and
    a multi-type write_graph (the JVM sink when the shim answers), a format("omnigraph") append
    and one refused for a repeated key (checked as Spark jobs: distributedCheckRows=1), then
    read_table, read_graph (the JVM scan) and format("omnigraph") reads, the last two with
    engine=jvm (the shim's provider, or an error). Edge ids are minted ULIDs, so edge rows are
    compared without them."""
    from omnigraph_spark import load_jsonl, read_graph, read_table, register, unwrap_error, write_graph, write_table

    register(spark)
    load_jsonl(spark, root, jsonl)
    people = spark.createDataFrame([("Eve", 41), ("Frank", None)], "name string, age int")
    write_table(people, root, "Person")
    write_graph(
        root,
        {
            "Person": spark.createDataFrame([("Gina", 22)], "name string, age int"),
            "Knows": spark.createDataFrame(
                [("Eve", "Gina", dt.date(2024, 5, 1))], "src string, dst string, since date"
            ),
            "WorksAt": spark.createDataFrame([("Gina", "Acme")], "`from` string, `to` string"),
        },
    )
    # engine=jvm: the shim's provider or an error (the Python source refuses it), no py4j involved
    (
        spark.createDataFrame([("Initech",)], "name string")
        .write.format("omnigraph")
        .option("type", "Company")
        .option("engine", "jvm")
        .mode("append")
        .save(root)
    )
    # a key repeated in one load, above distributedCheckRows=1: the provider's commit checks it
    # as Spark jobs of the write's session (SparkGateway), and refuses the load
    try:
        (
            spark.createDataFrame([("Hooli",), ("Pied Piper",), ("Hooli",)], "name string")
            .write.format("omnigraph")
            .option("type", "Company")
            .option("engine", "jvm")
            .option("distributedCheckRows", "1")
            .mode("append")
            .save(root)
        )
        repeated = None
    except Exception as e:  # the typed error it carries is the result
        err = unwrap_error(e)
        repeated = f"{type(err).__name__}: {err}" if err is not None else f"untyped: {str(e)[:500]}"
    g = read_graph(spark, root)
    return {
        "repeated_key": repeated,
        "read_table": _rows(read_table(spark, root, "Person")),
        "read_graph": {
            name: _rows(df, drop=("id",) if name in g.edges else ()) for name, df in {**g.nodes, **g.edges}.items()
        },
        "format": {
            t: _rows(
                spark.read.format("omnigraph").option("type", t).option("engine", "jvm").load(root),
                drop=("id",) if t in ("Knows", "WorksAt") else (),
            )
            for t in ("Person", "Company", "Knows", "WorksAt")
        },
    }


def _drop(path: str, name: str, records: list[dict[str, Any]]) -> None:
    """One input file of a file stream, written whole under a temporary name, then renamed."""
    os.makedirs(path, exist_ok=True)
    tmp = os.path.join(path, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    os.rename(tmp, os.path.join(path, name))


def _split_events(batch_df):
    """stream_and_read's split: one micro-batch of events -> the frames of one graph commit."""
    from pyspark.sql import functions as F

    ev = F.col("event")
    return {
        "Person": batch_df.where(ev == "person").select("name", "age"),
        "Knows": batch_df.where(ev == "knows").select(F.col("from").alias("src"), F.col("to").alias("dst")),
    }


def stream_and_read(spark, root: str, work: str, query_id: str) -> dict[str, Any]:
    """Two streams, each run twice from its checkpoint (trigger availableNow) with a new file in
    between: ``writeStream.format("omnigraph")`` of Company nodes and a ``GraphBatchWriter``
    (foreachBatch) of Person nodes and Knows edges. Every input row must land exactly once."""
    from omnigraph_spark import GraphBatchWriter, read_table

    companies, events = os.path.join(work, "companies"), os.path.join(work, "events")

    def run_companies() -> None:
        q = (
            spark.readStream.schema("name string")
            .json(companies)
            .writeStream.format("omnigraph")
            .option("type", "Company")
            .option("checkpointLocation", os.path.join(work, "chk-companies"))
            .trigger(availableNow=True)
            .start(root)
        )
        q.awaitTermination()

    def run_events() -> None:
        q = (
            spark.readStream.schema("event string, name string, age int, `from` string, `to` string")
            .json(events)
            .writeStream.foreachBatch(GraphBatchWriter(root, _split_events, query_id=query_id))
            .option("checkpointLocation", os.path.join(work, "chk-events"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()

    _drop(companies, "c1.json", [{"name": "Acme"}, {"name": "Globex"}])
    _drop(
        events,
        "e1.json",
        [
            {"event": "person", "name": "Ann", "age": 30},
            {"event": "person", "name": "Bo", "age": 41},
            {"event": "knows", "from": "Ann", "to": "Bo"},
        ],
    )
    run_companies()
    run_events()
    _drop(companies, "c2.json", [{"name": "Initech"}])
    _drop(
        events, "e2.json", [{"event": "person", "name": "Cy", "age": 25}, {"event": "knows", "from": "Cy", "to": "Ann"}]
    )
    run_companies()  # restarted from its checkpoint: only the new file
    run_events()
    return {
        "Company": sorted(r.name for r in read_table(spark, root, "Company").collect()),
        "Person": sorted((r.name, r.age) for r in read_table(spark, root, "Person").collect()),
        "Knows": sorted((r.src, r.dst) for r in read_table(spark, root, "Knows").collect()),
    }


def change_feed(spark, root: str, work: str) -> dict[str, Any]:
    """Person's change feed from version 1: a batch read and an AvailableNow stream (docs/change_feed.md)."""

    def cols(rows):
        return sorted([r["id"], r["_change_type"], r["_commit_version"]] for r in rows)

    r = spark.read.format("omnigraph").option("type", "Person").option("readChangeFeed", "true")
    batch = cols(r.option("startingVersion", "1").load(root).collect())
    s = spark.readStream.format("omnigraph").option("type", "Person").option("readChangeFeed", "true")
    q = (
        s.option("startingVersion", "1")
        .load(root)
        .writeStream.format("parquet")
        .option("path", os.path.join(work, "out"))
        .option("checkpointLocation", os.path.join(work, "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return {"batch": batch, "stream": cols(spark.read.parquet(os.path.join(work, "out")).collect())}


def staging_left(root: str) -> list[str]:
    """Files left in the graph's staging journals (each load removes its own, hand-off included)."""
    d = os.path.join(root, "_omnigraph_spark", "staging")
    return sorted(os.path.join(p, f) for p, _, fs in os.walk(d) for f in fs) if os.path.isdir(d) else []


def main(argv: list[str]) -> int:
    url, scenario, params = argv[1], argv[2], json.loads(argv[3])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    collect = Collect()
    logging.getLogger("omnigraph_spark").addHandler(collect)
    logging.getLogger("omnigraph_spark").setLevel(logging.INFO)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    report: dict[str, Any] = {"session": type(spark).__module__}
    try:
        if scenario == "load_and_read":
            from omnigraph_spark import Graph
            from omnigraph_spark.spark.jvm_read import default_parallelism, shim_blocker

            Graph.init(params["root"], open(params["schema"], encoding="utf-8").read())
            report["shim_blocker"] = shim_blocker(spark)
            report["parallelism"] = default_parallelism(spark)
            report["result"] = load_and_read(spark, params["root"], params["jsonl"])
            report["staging_left"] = staging_left(params["root"])
        elif scenario == "stream_and_read":
            from omnigraph_spark import Graph

            Graph.init(params["root"], open(params["schema"], encoding="utf-8").read())
            report["result"] = stream_and_read(spark, params["root"], params["work"], params["query_id"])
            report["commits"] = [c.actor_id for c in Graph.open(params["root"]).log()]
            report["staging_left"] = staging_left(params["root"])
        elif scenario == "change_feed":
            report["result"] = change_feed(spark, params["root"], params["work"])
        elif scenario == "probe":
            from omnigraph_spark.spark.jvm_read import shim_blocker

            report["shim_blocker"] = shim_blocker(spark)
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    finally:
        spark.stop()
    report["log"] = collect.lines
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
