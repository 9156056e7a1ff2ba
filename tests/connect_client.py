"""The Spark Connect tests' client (tests/spark/test_connect.py): one scenario against a Spark
Connect server, run in its own Python process (see tests/connect_server.py), printing a JSON
report as its last line. :func:`load_and_read` is also run on the classic test session, so
both paths do exactly the same loads and reads.

Usage: python tests/connect_client.py sc://127.0.0.1:<port> <scenario> '<json params>'
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import logging
import os
import sys
from collections.abc import Iterator
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


def _records(df, drop=()) -> list[dict[str, Any]]:
    """The rows of ``df`` as column -> value, without ``drop``, sorted."""
    return [dict(zip([c for c in df.columns if c not in drop], row)) for row in _rows(df, drop)]


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
    # as Spark jobs of the write's session (Spark work the provider runs), and refuses the load
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


@contextlib.contextmanager
def serverless_confs(accepted: list[str], tried: list[str]) -> Iterator[None]:
    """While open, ``spark.conf.set`` of a key not in ``accepted`` raises, as serverless refuses
    it; every key set is appended to ``tried``. This process only."""
    from pyspark.sql.connect.conf import RuntimeConf

    set_conf = RuntimeConf.set

    def serverless_set(self, key: str, value) -> None:
        tried.append(key)
        if key not in accepted:
            raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available.")
        set_conf(self, key, value)

    RuntimeConf.set = serverless_set  # type: ignore[method-assign]  # the stand-in's rule
    try:
        yield
    finally:
        RuntimeConf.set = set_conf  # type: ignore[method-assign]


def notebook(spark, cells: list[str], accepted_confs: list[str], root: str) -> dict[str, Any]:
    """The serverless stand-in's client (tests/spark/test_serverless.py): ``cells``, the notebook
    steps of docs/databricks.md with the test's paths, run in order in one namespace as a
    notebook runs its cells, ``display`` collecting the rows it is shown. Then: where
    ``omnigraph_spark`` comes from in this process and in the server's Python workers, whether
    the session has the JVM paths, how a bad row's ``df.write`` and a load above
    ``distributedCheckRows`` fail, and the graph at ``root`` the cells left. Throughout, a conf
    set on the session (by a cell or by the connector) that is not in ``accepted_confs`` is
    refused (:func:`serverless_confs`); ``conf_sets`` lists every key set."""
    conf_sets: list[str] = []
    with serverless_confs(accepted_confs, conf_sets):
        report = _notebook(spark, cells, root)
    report["conf_sets"] = conf_sets
    return report


def _notebook(spark, cells: list[str], root: str) -> dict[str, Any]:
    from pyspark.sql.functions import udf

    import omnigraph_spark
    from omnigraph_spark import Graph, unwrap_error
    from omnigraph_spark.spark.jvm_read import shim_blocker
    from omnigraph_spark.spark.reader import PUSHDOWN_CONF
    from omnigraph_spark.spark.shim_conf import HIDE_TRACEBACK

    shown: list[list[dict[str, Any]]] = []
    namespace: dict[str, Any] = {
        "__name__": "__notebook__",
        "spark": spark,
        "display": lambda df: shown.append(_records(df)),
    }
    printed: list[list[str]] = []
    for i, cell in enumerate(cells, 1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(cell, f"notebook cell {i}", "exec"), namespace)  # the documented steps themselves
        printed.append(out.getvalue().splitlines())

    @udf("string")
    def package_file(_):
        import omnigraph_spark as task_package  # in the server's Python worker: what it imports

        return task_package.__file__

    def refused(run) -> dict[str, str] | None:
        """How ``run`` failed: its exception's first line, and the typed error it carries."""
        try:
            run()
            return None
        except Exception as e:  # the failure is the result
            err = unwrap_error(e)
            return {
                "first_line": (str(e).splitlines() or [""])[0],
                "typed": f"{type(err).__name__}: {err}" if err is not None else "",
            }

    # the bad row's df.write once more, to see the whole exception the cell caught
    bad_write = refused(
        lambda: namespace["bad"].write.format("omnigraph").option("type", "Person").mode("append").save(root)
    )
    # a key given twice, checked as Spark jobs of this session (distributedCheckRows=1): the
    # load-wide checks of a large load, through Spark Connect, which has no SparkContext
    repeated = spark.createDataFrame(
        [("Cy", 30, "Faro", "analyst"), ("Cy", 31, "Faro", "analyst")], "name string, age int, city string, role string"
    )
    distributed = refused(
        lambda: omnigraph_spark.write_graph(root, {"Person": repeated}, options={"distributedCheckRows": "1"})
    )
    # engine=jvm: only the shim's provider satisfies it; the Python source refuses it, naming why
    jvm_read = refused(
        lambda: spark.read.format("omnigraph").option("type", "Person").option("engine", "jvm").load(root).collect()
    )
    return {
        "printed": printed,
        "shown": shown,
        "client_package": omnigraph_spark.__file__,
        "task_package": spark.range(1).select(package_file("id").alias("f")).first()["f"],
        "shim_blocker": shim_blocker(spark),
        "jvm_read": jvm_read,
        "bad_write": bad_write,
        "distributed": distributed,
        "server_conf": {k: spark.conf.get(k) for k in (PUSHDOWN_CONF, HIDE_TRACEBACK)},
        "graph": {
            t: _records(spark.read.format("omnigraph").option("type", t).load(root), ("id",) if t == "WorksAt" else ())
            for t in ("Person", "Company", "WorksAt")
        },
        "commits": len(Graph.open(root).log()),
    }


def sql_statements(spark, root: str, schema: str) -> dict[str, Any]:
    """The SQL catalog (docs/sql.md) through ``spark.sql``: a catalog set at runtime, a graph
    created, written, read, deleted from and optimized by statements, and a bad identifier's error."""
    spark.conf.set("spark.sql.catalog.ogc", "io.omnigraph.spark.OmnigraphCatalog")
    spark.conf.set("spark.sql.catalog.ogc.root", root)
    spark.sql(f"CREATE NAMESPACE ogc.social WITH PROPERTIES ('schemaPath' = '{schema}')")
    spark.sql("INSERT INTO ogc.social.Person (name, age) VALUES ('Ann', 30), ('Bo', 41)")
    spark.sql("INSERT INTO ogc.social.Knows (src, dst) VALUES ('Ann', 'Bo')")
    out: dict[str, Any] = {
        "tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN ogc.social").collect()),
        "older": _rows(spark.sql("SELECT name, age FROM ogc.social.Person WHERE age > 35")),
    }
    spark.sql("DELETE FROM ogc.social.Person WHERE name = 'Bo'")
    out["after_delete"] = _rows(spark.sql("SELECT name FROM ogc.social.Person"))
    out["knows_after_delete"] = _rows(spark.sql("SELECT src, dst FROM ogc.social.Knows"))
    out["optimize"] = sorted(r.item for r in spark.sql("CALL ogc.system.optimize(graph => 'social')").collect())
    try:
        spark.sql("SELECT * FROM ogc.social.Persn").collect()
        out["bad_identifier"] = None
    except Exception as e:  # the typed error's first line, as the client sees it
        out["bad_identifier"] = str(e).splitlines()[0]
    spark.sql("UPDATE ogc.social.Person SET age = age + 1 WHERE name = 'Ann'")
    spark.sql(
        "MERGE INTO ogc.social.Person t USING (SELECT 'Ann' AS name, 50 AS age UNION ALL SELECT 'Cy', 25) s "
        "ON t.name = s.name WHEN MATCHED THEN UPDATE SET age = s.age "
        "WHEN NOT MATCHED THEN INSERT (name, age) VALUES (s.name, s.age)"
    )
    out["after_merge"] = _rows(spark.sql("SELECT name, age FROM ogc.social.Person"))
    try:
        spark.sql("UPDATE ogc.social.Person SET name = 'Zed' WHERE name = 'Cy'")
        out["key_change"] = None
    except Exception as e:  # the typed error's first line, as the client sees it
        out["key_change"] = str(e).splitlines()[0]
    refusals = {  # docs/sql.md, "Errors": each one's first line as the client sees it
        "KEY_CONFLICT": lambda: spark.sql("INSERT INTO ogc.social.Person (name) VALUES ('Ann')"),
        "DANGLING_EDGE": lambda: spark.sql("INSERT INTO ogc.social.Knows (src, dst) VALUES ('Ann', 'Zed')"),
        "SQL_UNSUPPORTED": lambda: spark.sql("CREATE TABLE ogc.social.T (x int)"),
        "GRAPH_NOT_FOUND": lambda: spark.sql("CALL ogc.system.optimize(graph => 'nograph')").collect(),
        "OPTION_INVALID": lambda: spark.read.option("bogus", "x").table("ogc.social.Person").collect(),
        "GRAPH_NOT_EMPTY": lambda: spark.sql("DROP NAMESPACE ogc.social"),
    }
    out["first_lines"] = {}
    for code, run in refusals.items():
        try:
            run()
            out["first_lines"][code] = None
        except Exception as e:  # the refusal is the result
            out["first_lines"][code] = str(e).splitlines()[0]
    # a table of the session catalog USING omnigraph (the JVM provider): an INSERT, a SELECT
    spark.sql(f"CREATE TABLE people_c USING omnigraph OPTIONS (path '{root}/social', type 'Person')")
    try:
        spark.sql("INSERT INTO people_c (name, age) VALUES ('Di', 26)")
        out["session_table"] = _rows(spark.sql("SELECT name, age FROM people_c WHERE name = 'Di'"))
    finally:
        spark.sql("DROP TABLE people_c")  # the catalog entry only
    return out


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
        elif scenario == "notebook":
            report.update(notebook(spark, params["cells"], params["accepted_confs"], params["root"]))
            report["staging_left"] = staging_left(params["root"])

        elif scenario == "sql":
            report["result"] = sql_statements(spark, params["root"], params["schema"])

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
