"""The demo: the connector's main job, end to end, on the embedded default (local Spark, a graph
in a local directory). ``make demo`` runs it; so does ``python -m omnigraph_spark.demo``.

What it does, in order:

1. starts a local SparkSession (``local[2]``, UI off, Python workers = this interpreter);
2. (re)creates the graph ``./demo-graph`` from the bundled sample schema ``data/social.pg``;
3. loads the bundled JSONL sample (people, companies, Knows and WorksAt edges) through Spark as
   ONE graph commit (``load_jsonl``);
4. appends new people and their jobs from DataFrames: one ``df.write.format("omnigraph")`` per
   type, then a multi-type ``write_graph`` (nodes and edges in one commit; staged in the JVM
   when jvm-shim is built);
5. makes a branch and changes a row there (main is untouched);
6. reads the tables back with ``spark.read.format("omnigraph")``, joins people to their employers
   across the node and edge tables, time-travels to the first load, and reads the snapshot
   again with ``read_graph`` (through the JVM read path when ``jvm-shim`` is built);
7. prints a summary: tables, row counts, table versions, graph versions and commit ids.

Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
import warnings
from importlib import resources

from .spark import register
from .spark.runtime import set_local_lance_threads, warm_imports
from .spark.shim_conf import HIDE_TRACEBACK, configure_spark, shim_spark_conf

log = logging.getLogger("omnigraph_spark.demo")

DEFAULT_GRAPH = "./demo-graph"


def sample_path(name: str) -> str:
    """Filesystem path of a bundled sample file (``social.pg``, ``social.jsonl``)."""
    return str(resources.files("omnigraph_spark") / "data" / name)


def embedded_settings():
    """The embedded default's session settings (:func:`local_builder`; a benchmark's Spark
    Connect server uses them too): UI and console progress off, Python data source filter
    pushdown on, Spark's JVM logging at WARN, a df.write error's first line carrying the
    connector's ``[CODE] message``."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.python.worker.reuse": "true",
        HIDE_TRACEBACK: "true",  # df.write errors: our "[CODE] message" on the first line
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{sample_path('log4j2.properties')}",
    }


def local_builder(app_name: str = "omnigraph-spark-demo", master: str = "local[2]", conf=None):
    """The embedded default as a ``SparkSession.Builder``: local master, UI and console progress
    off, Python workers running this interpreter (so they import this package), Python data
    source filter pushdown on, Spark's JVM logging at WARN (the bundled ``data/log4j2.properties``),
    a df.write error's first line carrying the connector's ``[CODE] message`` (``HIDE_TRACEBACK``),
    Lance's compute pool no smaller than the task slots and lance imported while the JVM starts
    (``spark/runtime.py``), and the JVM shim
    through :func:`~omnigraph_spark.configure_spark` when there is one (a checkout's
    ``make jvm-shim`` build, else the jar a pip-installed wheel carries).
    ``conf`` adds or overrides settings. Use :func:`local_spark` unless you need to add to the
    builder (``configure_spark_with_delta_pip`` does)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    set_local_lance_threads(master)  # Lance's encode pool: at least one thread per task slot
    warm_imports()  # lance's import overlaps the JVM's start
    quiet_warnings()
    from pyspark.sql import SparkSession  # lazy: after quiet_warnings (pyspark warns on import)

    settings = embedded_settings()
    settings.update(conf or {})
    b = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        b = b.config(k, v)
    if shim_spark_conf():  # the JVM paths: a checkout's make jvm-shim build, else the jar this install ships
        b = configure_spark(b)
    return b


def local_spark(app_name: str = "omnigraph-spark-demo", master: str = "local[2]", conf=None, builder=None):
    """Start (or get) the embedded default session (:func:`local_builder`) and register the
    ``omnigraph`` data source on it."""
    spark = (builder or local_builder(app_name, master, conf)).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def local_delta_spark(app_name: str):
    """:func:`local_spark` with Delta Lake's session extension and catalog (the ``delta``
    extra), the shim's libraries kept (``configure_spark_with_delta_pip`` replaces
    ``spark.jars.packages``)."""
    from delta import configure_spark_with_delta_pip  # the 'delta' extra (imported where used)

    builder = local_builder(
        app_name,
        conf={
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        },
    )
    builder = configure_spark_with_delta_pip(builder)
    if shim_spark_conf():  # a pip install's shim libraries come from spark.jars.packages: add them back
        builder = configure_spark(builder)
    return local_spark(builder=builder)


def quiet_warnings() -> None:
    """Silence two known, harmless warnings on the driver: lance's fork-safety note (Spark's
    Python workers are forked from a daemon that never touched lance) and pyspark 4.2's pandas 3
    notice (the connector stays in Arrow)."""
    warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


class Checks:
    """Collects the demo's sanity checks so a broken build fails loudly (exit 1)."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.failed.append(what)
            log.error("check failed: %s", what)


def _rule(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def run(graph_uri: str = DEFAULT_GRAPH, spark=None, quiet: bool = False) -> int:
    """Run the demo against ``graph_uri`` (deleted and recreated). Returns the exit status."""
    from pyspark.sql import functions as F  # lazy: after quiet_warnings (pyspark warns on import)

    from omnigraph_spark import (  # lazy: lance loads in a thread while the JVM starts (warm_imports)
        Graph,
        load_jsonl,
        write_graph,
    )

    t0 = time.monotonic()
    checks = Checks()
    own_spark = spark is None
    if own_spark:
        print("starting local Spark (local[2]) ...", flush=True)
        spark = local_spark()
    try:
        # -- 1. a fresh graph from the bundled schema --------------------------------------------
        if os.path.isdir(graph_uri):
            shutil.rmtree(graph_uri)
        schema_text = open(sample_path("social.pg"), encoding="utf-8").read()
        g = Graph.init(graph_uri, schema_text)
        _rule(f"graph {g.root}")
        print(f"initialised from data/social.pg: {', '.join(sorted(g.catalog.table_keys()))}")

        # -- 2. JSONL through Spark: one commit for all four types -----------------------------
        res = load_jsonl(spark, graph_uri, sample_path("social.jsonl"), actor="demo")
        first_load = res
        print(
            f"load_jsonl social.jsonl -> commit {res.graph_commit_id} (graph v{res.manifest_version}): "
            + ", ".join(f"{t.table_key}+{t.rows_written}" for t in res.tables)
        )

        # -- 3. DataFrame writes ------------------------------------------------------------------
        newcomers = spark.createDataFrame(
            [
                ("Uma Petrov", 31, "Berlin", "engineer", ["python", "spark"]),
                ("Victor Ade", 45, "Lisbon", "manager", ["ops"]),
                ("Wen Zhou", 27, "Osaka", "researcher", ["graphs", "ml"]),
            ],
            "name string, age int, city string, role string, skills array<string>",
        )
        (
            newcomers.write.format("omnigraph")
            .option("type", "Person")
            .option("actor", "demo")
            .mode("append")
            .save(graph_uri)
        )
        print("df.write.format('omnigraph') Person: +3 people (append)")
        jobs = spark.createDataFrame(
            [
                ("Uma Petrov", "Acme Analytics", "Data Engineer"),
                ("Victor Ade", "Acme Analytics", "VP Engineering"),
                ("Wen Zhou", "Granite Labs", "Research Scientist"),
            ],
            "`from` string, `to` string, title string",
        )
        intro = spark.createDataFrame([("Uma Petrov", "Wen Zhou", 3)], "src string, dst string, strength int")
        res = write_graph(graph_uri, {"WorksAt": jobs, "Knows": intro}, actor="demo")
        print(f"write_graph WorksAt+Knows -> commit {res.graph_commit_id} (graph v{res.manifest_version})")

        # -- 4. a branch: change a row there, main keeps its value ------------------------------
        g.create_branch("what-if")
        moved = spark.createDataFrame(
            [("Uma Petrov", 31, "Toronto", "manager", ["python", "spark"])],
            "name string, age int, city string, role string, skills array<string>",
        )
        write_graph(graph_uri, {"Person": moved}, mode="merge", branch="what-if", actor="demo")
        print("branch what-if: Uma Petrov moved to Toronto (merge on branch what-if)")

        # -- 5. read back through the data source -------------------------------------------------
        def table(type_name: str, **opts):
            r = spark.read.format("omnigraph").option("type", type_name)
            for k, v in opts.items():
                r = r.option(k, str(v))
            return r.load(graph_uri)

        people, companies, works, knows = table("Person"), table("Company"), table("WorksAt"), table("Knows")
        counts = {
            "Person": people.count(),
            "Company": companies.count(),
            "WorksAt": works.count(),
            "Knows": knows.count(),
        }
        checks.expect(
            counts == {"Person": 83, "Company": 12, "WorksAt": 75, "Knows": 241},
            f"row counts after the loads: {counts}",
        )

        # a join across node and edge tables: people -> WorksAt -> companies
        staff = (
            works.alias("w")
            .join(people.alias("p"), F.col("w.src") == F.col("p.id"))
            .join(companies.alias("c"), F.col("w.dst") == F.col("c.id"))
            .groupBy(F.col("c.name").alias("company"), F.col("c.industry").alias("industry"))
            .agg(F.count("*").alias("people"), F.round(F.avg("p.age"), 1).alias("avg_age"))
            .orderBy(F.desc("people"), "company")
        )
        _rule("people per company (Person -[WorksAt]-> Company)")
        rows = staff.collect()
        if not quiet:
            staff.show(5, truncate=False)
        checks.expect(sum(r["people"] for r in rows) == counts["WorksAt"], "every WorksAt edge joins both ends")

        # a filter pushed down to Lance, and a two-hop pattern
        berliners = people.filter(F.col("city") == "Berlin").select("name", "role", "skills").orderBy("name")
        print(f"people in Berlin: {berliners.count()} (filter pushed down to Lance)")
        colleagues = (
            knows.alias("k")
            .join(works.alias("a"), F.col("k.src") == F.col("a.src"))
            .join(works.alias("b"), F.col("k.dst") == F.col("b.src"))
            .filter(F.col("a.dst") == F.col("b.dst"))
            .count()
        )
        print(f"Knows edges between colleagues (same employer): {colleagues}")

        # the branch and time travel
        uma_main = people.filter(F.col("name") == "Uma Petrov").select("city").first()["city"]
        uma_branch = (
            table("Person", branch="what-if").filter(F.col("name") == "Uma Petrov").select("city").first()["city"]
        )
        print(f"Uma Petrov's city: main={uma_main}, what-if={uma_branch}")
        checks.expect((uma_main, uma_branch) == ("Berlin", "Toronto"), "branch isolation")
        then = table("Person", commit=first_load.graph_commit_id).count()
        print(f"time travel to commit {first_load.graph_commit_id}: {then} people (now {counts['Person']})")
        checks.expect(then == 80, "time travel to the first load")

        # the same snapshot through read_graph: scanned in the JVM when jvm-shim is built
        from omnigraph_spark import read_graph  # lazy: lance loads in a thread while the JVM starts (warm_imports)
        from omnigraph_spark.spark.jvm_read import (
            shim_loaded,  # lazy: lance loads in a thread while the JVM starts (warm_imports)
        )

        frames = read_graph(spark, graph_uri)
        again = {n: df.count() for n, df in {**frames.nodes, **frames.edges}.items()}
        via = "the JVM (jvm-shim)" if shim_loaded(spark) else "Python workers (jvm-shim not built)"
        print(f"read_graph through {via}: {again}")
        checks.expect(again == counts, "read_graph reads the same rows")

        # -- 6. summary ---------------------------------------------------------------------------
        g = Graph.open(graph_uri)
        for branch in g.branches():
            snap = g.snapshot(branch)
            _rule(f"branch {branch}: graph v{snap.version}")
            print(f"{'table':<16} {'rows':>6} {'version':>8}  lineage")
            for key in sorted(snap.tables, key=lambda k: (not k.startswith("node:"), k)):
                t = snap.tables[key]
                print(f"{key:<16} {t.row_count:>6} {t.version:>8}  {t.branch}")
        _rule("commits on main (oldest first)")
        for c in g.log("main"):
            print(f"{c.graph_commit_id}  graph v{c.manifest_version:<3} actor={c.actor_id or '-'}")
        checks.expect(not g.pending_sidecars(), "no pending recovery sidecars")
    finally:
        if own_spark:
            spark.stop()
    took = time.monotonic() - t0
    _rule("result")
    if checks.failed:
        print(f"demo FAILED {len(checks.failed)} check(s): {checks.failed}")
        return 1
    print(f"demo OK in {took:.1f}s: graph at {os.path.abspath(graph_uri)}")
    cli = cli_command()
    print(f"next: {cli} status {graph_uri}   |   {cli} log {graph_uri}")
    return 0


def cli_command() -> str:
    """How to call the ``omnigraph-spark`` script installed beside this interpreter, pasted in the
    current directory: its bare name when that is what PATH finds (an activated virtualenv),
    else its path relative to here (``.venv/bin/omnigraph-spark`` from the clone root)."""
    script = os.path.join(os.path.dirname(sys.executable), "omnigraph-spark")
    if not os.path.isfile(script) or shutil.which("omnigraph-spark") == script:
        return "omnigraph-spark"
    rel = os.path.relpath(script)
    return rel if os.sep in rel else os.path.join(".", rel)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m omnigraph_spark.demo", description=__doc__.splitlines()[0])
    p.add_argument(
        "--graph", default=DEFAULT_GRAPH, help="graph directory, deleted and recreated (default: %(default)s)"
    )
    p.add_argument("--quiet", action="store_true", help="skip the table printouts")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return run(args.graph, quiet=args.quiet)


if __name__ == "__main__":
    sys.exit(main())
