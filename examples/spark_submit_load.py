"""A batch load job for ``spark-submit``: JSONL files -> an Omnigraph graph, as ONE commit.

Run it with the spark-submit of your Spark installation (here: the one pip installs with pyspark)::

    spark-submit --master local[2] \
        --conf spark.ui.enabled=false \
        --conf spark.pyspark.python=$PWD/.venv/bin/python \
        --conf spark.pyspark.driver.python=$PWD/.venv/bin/python \
        --properties-file conf/spark-defaults.conf \
        examples/spark_submit_load.py /tmp/social-graph [--jsonl 'data/*.jsonl'] [--mode append]

On a cluster, ship the package to the executors too: ``--py-files omnigraph_spark-0.1.0-py3-none-any.whl``
(or a cluster library); see docs/databricks.md. The graph is created from ``--schema`` (default:
the bundled sample schema) when it does not exist yet. ``--txn-version N`` makes the job
idempotent: a re-run with the same (app id, N) commits nothing.

Exit status: 0 on success, 1 with ``error[CODE]: message`` on stderr when the load is refused.
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import sys
import time
import warnings

# pyspark 4.2 warns about pandas 3 on import; the connector stays in Arrow.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)

from pyspark.sql import SparkSession  # noqa: E402

import omnigraph_spark  # noqa: E402
from omnigraph_spark import Graph  # noqa: E402
from omnigraph_spark.demo import sample_path  # noqa: E402
from omnigraph_spark.errors import GraphNotFoundError  # noqa: E402
from omnigraph_spark.spark import unwrap_error  # noqa: E402

log = logging.getLogger("examples.spark_submit_load")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Bulk-load JSONL into an Omnigraph graph (spark-submit job).")
    p.add_argument("graph", help="graph root URI (local path, s3://, gs://, abfss://, ...)")
    p.add_argument("--jsonl", action="append", help="JSONL path or glob; repeatable (default: the bundled sample)")
    p.add_argument("--schema", default=sample_path("social.pg"), help="schema for a new graph")
    p.add_argument("--mode", default="append", choices=("append", "merge", "overwrite"))
    p.add_argument("--branch", default="main")
    p.add_argument("--actor", default="spark-submit-example")
    p.add_argument(
        "--txn-version", type=int, default=None, help="idempotency token version (with app id 'spark_submit_load')"
    )
    return p.parse_args(argv)


def configure_logging() -> None:
    """conf/logging.ini (or $OMNIGRAPH_SPARK_LOG_CONFIG): the connector at INFO, the rest at WARNING."""
    path = os.environ.get("OMNIGRAPH_SPARK_LOG_CONFIG") or os.path.join(
        os.path.dirname(__file__), "..", "conf", "logging.ini"
    )
    if os.path.exists(path):
        logging.config.fileConfig(path, disable_existing_loggers=False)
    else:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("omnigraph_spark").setLevel(logging.INFO)


def main(argv=None) -> int:
    args = parse_args(argv)
    configure_logging()
    spark = SparkSession.builder.appName("omnigraph-spark batch load").getOrCreate()
    omnigraph_spark.register(spark)  # also automatic once the package is installed
    t0 = time.monotonic()
    try:
        try:
            graph = Graph.open(args.graph)
        except GraphNotFoundError:
            with open(args.schema, encoding="utf-8") as f:
                graph = Graph.init(args.graph, f.read())
            log.info("created graph %s from %s", graph.root, args.schema)
        inputs = args.jsonl or [sample_path("social.jsonl")]
        options = {}
        if args.txn_version is not None:
            options = {"txnAppId": "spark_submit_load", "txnVersion": args.txn_version}
        res = omnigraph_spark.load_jsonl(
            spark, args.graph, inputs, mode=args.mode, branch=args.branch, actor=args.actor, options=options
        )
        if res.skipped:
            print(f"already applied (txnVersion {args.txn_version}): nothing committed")
        else:
            print(
                f"committed {res.graph_commit_id} on {res.branch} (graph v{res.manifest_version}) "
                f"in {time.monotonic() - t0:.1f}s"
            )
        for t in res.tables:
            print(
                f"  {t.table_key:<14} +{t.rows_written:<6} rows now {t.row_count:<6} "
                f"v{t.from_version} -> v{t.to_version}"
            )
        # a read back through the data source, as a sanity check of the job's result
        people = spark.read.format("omnigraph").option("type", "Person").option("branch", args.branch).load(args.graph)
        print(f"Person rows on {args.branch}: {people.count()}")
        print(f"spark master: {spark.sparkContext.master}; python workers: {os.environ.get('PYSPARK_PYTHON', '?')}")
        return 0
    except Exception as e:
        typed = unwrap_error(e)  # errors raised on executors come back wrapped (OmnigraphErrors pass through)
        if typed is None:
            raise
        print(f"error[{typed.code}]: {str(typed).removeprefix(f'[{typed.code}] ')}", file=sys.stderr)
        return 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
