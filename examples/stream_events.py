"""A streaming job: Kafka-style JSON events -> graph nodes and edges, exactly once.

Each micro-batch of events becomes ONE graph commit (people, companies, who knows whom, who works
where), written by ``omnigraph_spark.GraphBatchWriter`` through ``foreachBatch`` with the
idempotency token (streaming query id, batch id): restarting the job from its checkpoint never
writes a micro-batch twice, and an edge always lands with (or after) its nodes.

The events come as Kafka records would: a ``value`` column holding a JSON document. Here they
are JSON-lines files dropped into a folder (``--generate`` writes some); for Kafka, replace the
source with ``spark.readStream.format("kafka").option(...).load()`` and
``selectExpr("CAST(value AS STRING) AS value")``: the rest is unchanged.

    python examples/stream_events.py /tmp/events-graph --events /tmp/events --checkpoint /tmp/events-ck \
        --generate 5 --available-now

Event types (field ``event``): ``person`` (name, age, city, role), ``company`` (name, industry),
``knows`` (from, to, strength), ``works_at`` (person, company, title). Without
``--available-now`` the job runs until interrupted (Ctrl-C) or for ``--seconds``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings

# pyspark 4.2 warns about pandas 3 on import; the connector stays in Arrow.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import omnigraph_spark  # noqa: E402
from omnigraph_spark import Graph  # noqa: E402
from omnigraph_spark.demo import sample_path  # noqa: E402
from omnigraph_spark.errors import GraphNotFoundError  # noqa: E402

log = logging.getLogger("examples.stream_events")

#: the JSON document in each record's value
EVENT_SCHEMA = (
    "event string, name string, age int, city string, role string, industry string, "
    "`from` string, `to` string, strength int, person string, company string, title string"
)
ROLES = ("engineer", "designer", "manager", "analyst", "founder", "researcher")
INDUSTRIES = ("software", "finance", "health", "retail", "energy", "media")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Stream JSON events into an Omnigraph graph, one commit per micro-batch.")
    p.add_argument("graph", help="graph root URI (created from the sample schema when missing)")
    p.add_argument("--events", required=True, help="folder the event files arrive in")
    p.add_argument("--checkpoint", required=True, help="Spark checkpoint folder (keep it to resume exactly once)")
    p.add_argument("--generate", type=int, default=0, help="first write this many event files (one per batch)")
    p.add_argument("--events-per-file", type=int, default=200)
    p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long (default: run until Ctrl-C)")
    p.add_argument("--actor", default="stream-events-example")
    return p.parse_args(argv)


def generate(folder: str, files: int, per_file: int) -> None:
    """Event files as a producer would write them: new people and companies, then edges that
    may point at entities of the same file or of earlier ones. Each file is renamed into place."""
    os.makedirs(folder, exist_ok=True)
    start = len([f for f in os.listdir(folder) if f.endswith(".json")])
    for k in range(start, start + files):
        rows = []
        people = [f"user-{k:04d}-{i:04d}" for i in range(per_file // 4)]
        company = f"company-{k:04d}"
        rows.append({"event": "company", "name": company, "industry": INDUSTRIES[k % len(INDUSTRIES)]})
        for i, name in enumerate(people):
            rows.append(
                {
                    "event": "person",
                    "name": name,
                    "age": 20 + (i * 7 + k) % 50,
                    "city": f"city-{i % 9}",
                    "role": ROLES[(i + k) % len(ROLES)],
                }
            )
            rows.append({"event": "works_at", "person": name, "company": company, "title": "staff"})
        for i, name in enumerate(people):
            rows.append({"event": "knows", "from": name, "to": people[(i + 1) % len(people)], "strength": i % 5})
            if k:  # a link to someone of an earlier file
                rows.append({"event": "knows", "from": name, "to": f"user-{k - 1:04d}-{i:04d}", "strength": 1})
        # Kafka-style records: the document is the value
        records = [{"key": r.get("name") or r.get("from") or r.get("person"), "value": json.dumps(r)} for r in rows]
        tmp = os.path.join(folder, f".events-{k:05d}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
        os.replace(tmp, os.path.join(folder, f"events-{k:05d}.json"))
        time.sleep(0.01)  # distinct modification times: the file source takes files in this order


def split_events(batch_df):
    """One micro-batch of parsed events -> the frames of one graph commit."""
    ev = F.col("event")
    return {
        "Company": batch_df.where(ev == "company").select("name", "industry"),
        "Person": batch_df.where(ev == "person").select("name", "age", "city", "role"),
        "Knows": batch_df.where(ev == "knows").select("from", "to", "strength"),
        "WorksAt": batch_df.where(ev == "works_at").select(
            F.col("person").alias("from"), F.col("company").alias("to"), "title"
        ),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("omnigraph_spark.spark.stream").setLevel(logging.INFO)
    if args.generate:
        generate(args.events, args.generate, args.events_per_file)
    try:
        Graph.open(args.graph)
    except GraphNotFoundError:
        with open(sample_path("social.pg"), encoding="utf-8") as f:
            Graph.init(args.graph, f.read())
    spark = SparkSession.builder.appName("omnigraph-spark stream events").getOrCreate()
    omnigraph_spark.register(spark)
    try:
        records = spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", 1).json(args.events)
        events = records.select(F.from_json("value", EVENT_SCHEMA).alias("e")).select("e.*")
        trigger = {"availableNow": True} if args.available_now else {"processingTime": "2 seconds"}
        query = omnigraph_spark.stream_graph(
            events,
            args.graph,
            split_events,
            args.checkpoint,
            actor=args.actor,
            trigger=trigger,
            query_name="stream_events",
        )
        print(f"streaming query {query.id} (checkpoint {args.checkpoint})", flush=True)
        query.awaitTermination(args.seconds)
        if query.isActive:
            query.stop()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        g = Graph.open(args.graph)
        counts = {k: t.row_count for k, t in g.snapshot().tables.items()}
        print(f"{len(batches)} micro-batches with rows in this run; graph commits {len(g.log()) - 1}; rows {counts}")
        return 0
    except Exception as e:
        typed = omnigraph_spark.unwrap_error(e)
        if typed is None:
            raise
        print(f"error[{typed.code}]: {str(typed).removeprefix(f'[{typed.code}] ')}", file=sys.stderr)
        return 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
