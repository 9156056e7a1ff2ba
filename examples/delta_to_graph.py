"""Delta Lake tables -> an Omnigraph graph: a full sync, an idempotent re-run, then an
incremental sync from Delta's Change Data Feed, deletes included.

    python examples/delta_to_graph.py /tmp/social-graph --delta-dir /tmp/social-delta

The Delta jars are resolved for real by ``configure_spark_with_delta_pip`` (Ivy downloads
``io.delta:delta-spark_<spark>_2.13`` from Maven Central into ~/.ivy2.5.2 on the first run, which
takes a few minutes; later runs use the cache). On Databricks, Delta is built in: drop the
builder and use the notebook's ``spark``.

The pipeline:

1. *Upstream*: four Delta tables (people, companies, employment, contacts) stand in for the
   lakehouse tables a team already has; here they are seeded from the bundled sample, with the
   Change Data Feed enabled on ``people``.
2. *Full sync*: read every Delta table at its current version, map columns to the graph's
   types, and write all four types with ``write_graph(mode="overwrite")`` as ONE graph commit.
   The idempotency token is (``delta_to_graph``, sum of the source versions): re-running the
   same sync commits nothing.
3. *Incremental sync*: MERGE a change into ``people`` upstream and DELETE a person, read just
   the changes of that Delta version range from the Change Data Feed (per person the last
   change wins), and apply them as ONE graph commit: the upserts with ``mode="merge"`` and the
   deletes with ``deletes=`` (a deleted person's edges go in the same commit, so no edge is
   left dangling). The token (``delta_to_graph:people-cdf``, the range's last Delta version)
   makes a re-run of the same range commit nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

import omnigraph_spark
from omnigraph_spark import Graph
from omnigraph_spark.demo import local_delta_spark, sample_path

APP_ID = "delta_to_graph"
GONE = "Ben Kowalski"  # deleted upstream in step 3 (he has six edges: the graph commit removes them too)
SOURCES = ("people", "companies", "employment", "contacts")


def seed_delta(spark: SparkSession, delta_dir: str) -> None:
    """Upstream tables, seeded from the bundled JSONL (records are split by type)."""
    raw = spark.read.json(sample_path("social.jsonl"))
    people = raw.filter(F.col("type") == "Person").select(
        F.col("data.name").alias("full_name"),
        F.col("data.age").cast("int").alias("age"),
        F.to_date("data.born").alias("birth_date"),
        F.col("data.city").alias("city"),
        F.col("data.role").alias("role"),
        F.col("data.skills").alias("skills"),
    )
    companies = raw.filter(F.col("type") == "Company").select(
        F.col("data.name").alias("company"),
        F.col("data.industry").alias("industry"),
        F.to_date("data.founded").alias("founded"),
        F.col("data.employees").cast("int").alias("headcount"),
        F.col("data.revenue_musd").cast("double").alias("revenue_musd"),
    )
    employment = raw.filter(F.col("edge") == "WorksAt").select(
        F.col("from").alias("person"),
        F.col("to").alias("company"),
        F.col("data.title").alias("title"),
        F.to_date("data.start").alias("start_date"),
    )
    contacts = raw.filter(F.col("edge") == "Knows").select(
        F.col("from").alias("person_a"),
        F.col("to").alias("person_b"),
        F.to_date("data.since").alias("since"),
        F.col("data.strength").cast("int").alias("strength"),
    )
    for name, df in zip(SOURCES, (people, companies, employment, contacts)):
        w = df.write.format("delta").mode("overwrite")
        if name == "people":
            w = w.option("delta.enableChangeDataFeed", "true")
        w.save(os.path.join(delta_dir, name))


def delta_version(spark: SparkSession, path: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history(1).select("version").first()["version"]


def person_frame(people: DataFrame) -> DataFrame:
    return people.select(
        F.col("full_name").alias("name"), "age", F.col("birth_date").alias("born"), "city", "role", "skills"
    )


def to_graph_frames(src: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Upstream column names -> the graph schema's (data/social.pg). Edge endpoints are the
    @key values of the endpoint nodes (``from``/``to`` or ``src``/``dst``)."""
    return {
        "Person": person_frame(src["people"]),
        "Company": src["companies"].select(
            F.col("company").alias("name"), "industry", "founded", F.col("headcount").alias("employees"), "revenue_musd"
        ),
        "WorksAt": src["employment"].select(
            F.col("person").alias("src"), F.col("company").alias("dst"), "title", F.col("start_date").alias("start")
        ),
        "Knows": src["contacts"].select(
            F.col("person_a").alias("src"), F.col("person_b").alias("dst"), "since", "strength"
        ),
    }


def full_sync(spark: SparkSession, delta_dir: str, graph_uri: str):
    versions = {n: delta_version(spark, os.path.join(delta_dir, n)) for n in SOURCES}
    src = {
        n: spark.read.format("delta").option("versionAsOf", v).load(os.path.join(delta_dir, n))
        for n, v in versions.items()
    }
    token = sum(versions.values())
    res = omnigraph_spark.write_graph(
        graph_uri,
        to_graph_frames(src),
        mode="overwrite",
        actor=APP_ID,
        options={"txnAppId": APP_ID, "txnVersion": token},
    )
    return res, versions, token


def people_changes(changes: DataFrame) -> tuple[DataFrame, DataFrame]:
    """A Change Data Feed range of ``people`` -> (rows to upsert, names to delete): per person
    the last change of the range wins (an insert or update post-image is upserted, a delete
    deletes; update pre-images are skipped)."""
    last = Window.partitionBy("full_name").orderBy(F.desc("_commit_version"))
    latest = (
        changes.filter(F.col("_change_type") != "update_preimage")
        .withColumn("_n", F.row_number().over(last))
        .filter(F.col("_n") == 1)
    )
    upserts = latest.filter(F.col("_change_type") != "delete").drop(
        "_n", "_change_type", "_commit_version", "_commit_timestamp"
    )
    deletes = latest.filter(F.col("_change_type") == "delete").select(F.col("full_name").alias("name"))
    return upserts, deletes


def apply_people_changes(graph_uri: str, changes: DataFrame, version: int):
    """ONE graph commit for a Change Data Feed range ending at Delta ``version``: upserts and
    deletes (with their edges) together, idempotent per range end (txnAppId/txnVersion)."""
    upserts, deletes = people_changes(changes)
    res = omnigraph_spark.write_graph(
        graph_uri,
        {"Person": person_frame(upserts)},
        mode="merge",
        actor=APP_ID,
        deletes={"Person": deletes},
        options={"txnAppId": f"{APP_ID}:people-cdf", "txnVersion": version},
    )
    return res, upserts.count(), deletes.count()


def incremental_people(spark: SparkSession, delta_dir: str, graph_uri: str, since_version: int):
    """Apply the people changes of Delta versions ``since_version + 1`` .. now (Change Data Feed)."""
    path = os.path.join(delta_dir, "people")
    version = delta_version(spark, path)
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", since_version + 1)
        .option("endingVersion", version)
        .load(path)
    )
    res, upserted, deleted = apply_people_changes(graph_uri, changes, version)
    return res, upserted, deleted, version


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", help="graph root (recreated)")
    p.add_argument("--delta-dir", required=True, help="directory for the upstream Delta tables (recreated)")
    args = p.parse_args(argv)
    for d in (args.graph, args.delta_dir):
        if os.path.isdir(d):
            shutil.rmtree(d)
    spark = local_delta_spark("omnigraph-spark delta example")
    try:
        print("1. seeding the upstream Delta tables ...")
        seed_delta(spark, args.delta_dir)
        with open(sample_path("social.pg"), encoding="utf-8") as f:
            Graph.init(args.graph, f.read())

        print("2. full sync: Delta -> graph, all four types in ONE commit")
        res, versions, token = full_sync(spark, args.delta_dir, args.graph)
        print(f"   source versions {versions} -> commit {res.graph_commit_id} (graph v{res.manifest_version})")
        for t in res.tables:
            print(f"   {t.table_key:<14} {t.row_count:>5} rows")
        again, _, _ = full_sync(spark, args.delta_dir, args.graph)
        print(f"   re-run with the same source versions: skipped={again.skipped} (txnVersion {token})")
        assert again.skipped, "the idempotency token should make the re-run a no-op"

        from delta.tables import DeltaTable

        print("3. upstream changes: MERGE into people (one move, one new hire), DELETE one person")
        people_path = os.path.join(args.delta_dir, "people")
        before = versions["people"]
        updates = spark.createDataFrame(
            [
                ("Ada Okafor", 49, None, "Berlin", "founder", ["ops"]),
                ("Yara Costa", 33, None, "Lisbon", "designer", ["design", "sql"]),
            ],
            "full_name string, age int, birth_date date, city string, role string, skills array<string>",
        )
        (
            DeltaTable.forPath(spark, people_path)
            .alias("t")
            .merge(updates.alias("u"), "t.full_name = u.full_name")
            .whenMatchedUpdate(set={"city": "u.city"})
            .whenNotMatchedInsertAll()
            .execute()
        )
        DeltaTable.forPath(spark, people_path).delete(F.col("full_name") == GONE)
        res, upserted, deleted, version = incremental_people(spark, args.delta_dir, args.graph, before)
        cut = {t.table_key: t.rows_deleted for t in res.tables if t.rows_deleted}
        print(
            f"   Change Data Feed v{before + 1}..v{version}: {upserted} upserted, {deleted} deleted -> ONE commit "
            f"{res.graph_commit_id} (graph v{res.manifest_version}); rows deleted {cut}"
        )
        again, _, _, _ = incremental_people(spark, args.delta_dir, args.graph, before)
        print(f"   re-run of the same range: skipped={again.skipped}")
        assert again.skipped, "the idempotency token should make the re-run a no-op"

        print("4. check: the graph matches Delta")
        person = spark.read.format("omnigraph").option("type", "Person").load(args.graph)
        delta_people = spark.read.format("delta").load(people_path)
        n_graph, n_delta = person.count(), delta_people.count()
        ada = person.filter(F.col("name") == "Ada Okafor").select("city").first()["city"]
        print(f"   people: graph {n_graph}, delta {n_delta}; Ada Okafor lives in {ada}")
        missing = delta_people.select(F.col("full_name").alias("name")).join(person, "name", "left_anti").count()
        edges = [spark.read.format("omnigraph").option("type", t).load(args.graph) for t in ("Knows", "WorksAt")]
        dangling = sum(
            e.join(person, F.col(c) == person.id, "left_anti").count()
            for e, cols in zip(edges, (("src", "dst"), ("src",)))
            for c in cols
        )
        gone = person.filter(F.col("name") == GONE).count()
        print(f"   {GONE} in the graph: {gone}; edges pointing at a missing person: {dangling}")
        ok = n_graph == n_delta and ada == "Berlin" and missing == 0 and gone == 0 and dangling == 0
        staff = (
            spark.read.format("omnigraph")
            .option("type", "WorksAt")
            .load(args.graph)
            .join(person, F.col("src") == person.id)
            .groupBy("city")
            .count()
            .orderBy(F.desc("count"))
            .first()
        )
        print(f"   city with most employed people: {staff['city']} ({staff['count']})")
        print("delta_to_graph OK" if ok else "delta_to_graph FAILED")
        return 0 if ok else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
