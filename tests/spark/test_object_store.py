"""Spark writes and reads of a graph on S3 (moto's server and SeaweedFS, each a process of its own,
every test once per server): ``storage.*`` options reach the driver, the Python workers and the
executor JVMs; both paths, write and read."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from omnigraph_spark import Graph, read_table, write_graph, write_table
from omnigraph_spark.errors import DanglingEdgeError
from omnigraph_spark.ingest.integrity import delete_keys
from omnigraph_spark.spark.validate import make_validator
from omnigraph_spark.store import writes
from tests.object_store import ACCESS_KEY, SECRET_KEY
from tests.spark.test_jvm_read import scans_in_jvm
from tests.store.helpers import write_rows

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:lance is not fork-safe:UserWarning"),
]


def _storage(w, so):
    for k, v in so.items():
        w = w.option(f"storage.{k}", v)
    return w


def test_df_write_and_read_with_storage_options(spark, s3, s3_graph):  # I1
    so = s3.storage_options()
    v0 = s3_graph.snapshot().version
    people = spark.createDataFrame([("alice", 30), ("bob", 41), ("o'hara", 25)], "name string, age int")
    _storage(people.write.format("omnigraph").mode("append").option("type", "Person"), so).save(s3_graph.root)
    knows = spark.createDataFrame([("alice", "bob"), ("bob", "o'hara")], "src string, dst string")
    _storage(knows.write.format("omnigraph").mode("append").option("type", "Knows"), so).save(s3_graph.root)

    g = Graph.open(s3_graph.root, so)
    assert g.snapshot().version == v0 + 2  # one commit per job
    assert g.snapshot().tables["node:Person"].row_count == 3

    reader = _storage(spark.read.format("omnigraph").option("type", "Person"), so).load(s3_graph.root)
    assert sorted((r.id, r.name, r.age) for r in reader.collect()) == [
        ("alice", "alice", 30),
        ("bob", "bob", 41),
        ("o'hara", "o'hara", 25),
    ]  # @key name is the id
    assert [r.id for r in reader.filter('id = "o\'hara"').collect()] == ["o'hara"]  # pushed down, quoted
    edges = _storage(spark.read.format("omnigraph").option("type", "Knows"), so).load(s3_graph.root)
    assert sorted((r.src, r.dst) for r in edges.collect()) == [("alice", "bob"), ("bob", "o'hara")]
    assert len({r.id for r in edges.collect()}) == 2  # minted ids


def _jvm_staged(caplog, key):
    hits = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"staged {key} (")]
    assert hits, f"no staging log line for {key}"
    return hits[-1].split("(")[1].split(")")[0]


def _kept_deletion_kinds(g, key: str) -> set[str]:
    ds = g.open_table(key, g.snapshot())
    return {f.metadata.deletion_file.file_type for f in ds.get_fragments() if f.metadata.deletion_file}


def test_I25_batch_feed_on_s3(spark, s3, s3_graph):
    """readChangeFeed of an s3:// graph, classic: a merge over most of a fragment (its deletion
    file a bitmap), then a delete of a row of that fragment and two of the merge's fragment (its
    first deletion file, an array); each version's rows found from the deletion files on the
    object store."""
    so, g = s3.storage_options(), s3_graph
    write_rows(g, "node:Person", [{"id": f"p{i:04d}", "name": f"p{i:04d}", "age": i} for i in range(6000)])
    merged = [{"id": f"p{i:04d}", "name": f"p{i:04d}", "age": -i} for i in range(0, 6000) if i % 10]
    write_rows(g, "node:Person", merged, mode="merge")
    v_merge = g.snapshot().version
    assert _kept_deletion_kinds(g, "node:Person") == {"bitmap"}
    target = writes.prepare_target(g, "main", "node:Person", "delete")
    keys = delete_keys(g.catalog.by_table_key("node:Person"), pa.table({"name": ["p0000", "p0001", "p5999"]}))
    staged = writes.StagedTable("node:Person", "delete", target.stage_uri, target.base_version, (), 3, 0, deletes=keys)
    writes.commit_load(g, "main", [staged], validate=make_validator(g))
    v_delete = g.snapshot().version
    assert _kept_deletion_kinds(g, "node:Person") == {"bitmap", "array"}

    def feed(v):
        r = spark.read.format("omnigraph").option("type", "Person").option("readChangeFeed", "true")
        r = _storage(r.option("startingVersion", str(v)).option("endingVersion", str(v)), so)
        return sorted((x["id"], x["_change_type"], x["age"]) for x in r.load(g.root).collect())

    want = [(r["id"], "update_preimage", -r["age"]) for r in merged]
    want += [(r["id"], "update_postimage", r["age"]) for r in merged]
    assert feed(v_merge) == sorted(want)
    assert feed(v_delete) == [("p0000", "delete", 0), ("p0001", "delete", -1), ("p5999", "delete", -5999)]


def _staging_left(s3, root):
    bucket, _, prefix = root[len("s3://") :].partition("/")
    return [k for k in s3.keys(bucket, f"{prefix}/_omnigraph_spark/staging/") if not k.endswith("/")]


def test_jvm_paths_write_and_read_on_s3(jvm, s3, s3_graph, caplog):  # I1, I10
    """write_graph/read_table on S3 take the JVM paths: the sink stages with the storage options,
    the endpoint index, the key fingerprints and the fresh-id probe read the store, and the
    journal's side files (Lance files on an object store) are read and deleted by the driver."""
    so = s3.storage_options()
    opts = {f"storage.{k}": v for k, v in so.items()}
    people = jvm.createDataFrame([("a", 1), ("b", 2), ("c", 3)], "name string, age int").repartition(2)
    knows = jvm.createDataFrame([("a", "b"), ("b", "c")], "src string, dst string")
    caplog.set_level(logging.INFO, logger="omnigraph_spark")
    r = write_graph(s3_graph.root, {"Person": people, "Knows": knows}, options=opts, engine="jvm")
    assert [t.table_key for t in r.tables] == ["edge:Knows", "node:Person"]
    assert _jvm_staged(caplog, "node:Person") == "jvm" and _jvm_staged(caplog, "edge:Knows") == "jvm"
    assert "proven distinct by fingerprints" in caplog.text  # the tasks' key fingerprints, read from S3
    assert _staging_left(s3, s3_graph.root) == []
    more = jvm.createDataFrame([("d", 4)], "name string, age int")
    write_table(more, s3_graph.root, "Person", options=opts, engine="jvm")  # an append: the fresh-id probe
    persons = read_table(jvm, s3_graph.root, "Person", storage_options=so, engine="jvm")
    assert scans_in_jvm(persons)
    assert sorted((p.id, p.age) for p in persons.collect()) == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    edges = read_table(jvm, s3_graph.root, "Knows", storage_options=so, engine="jvm")
    assert scans_in_jvm(edges) and sorted((e.src, e.dst) for e in edges.collect()) == [("a", "b"), ("b", "c")]
    g = Graph.open(s3_graph.root, so)
    assert len(g.log()) == 3  # init + two loads
    assert _staging_left(s3, s3_graph.root) == []
    with pytest.raises(DanglingEdgeError):  # the executors' endpoint index of the committed nodes on S3
        write_table(
            jvm.createDataFrame([("a", "zz")], "src string, dst string"),
            s3_graph.root,
            "Knows",
            options=opts,
            engine="jvm",
        )
    assert len(Graph.open(s3_graph.root, so).log()) == 3


def test_a_failed_jvm_job_on_s3_leaves_no_staged_object(jvm, s3, s3_graph):  # I10
    """A task fails after others staged: the tasks' data files on S3 (journaled, as the SDK
    cannot delete) are deleted by the driver, and the graph is unchanged."""
    from pyspark.sql import functions as F

    so = s3.storage_options()
    opts = {f"storage.{k}": v for k, v in so.items()}
    bucket, _, prefix = s3_graph.root[len("s3://") :].partition("/")
    table = s3_graph.snapshot().tables["node:Person"].table_path

    def data():
        return [k for k in s3.keys(bucket, f"{prefix}/{table}/data/") if not k.endswith("/")]

    before, v0 = data(), s3_graph.snapshot().version
    boom = F.udf(lambda n: n if n != "p3999" else (_ for _ in ()).throw(RuntimeError("injected")), "string")
    df = (
        jvm.createDataFrame([(f"p{k}", k) for k in range(4000)], "name string, age int")
        .repartition(4)
        .withColumn("name", boom("name"))
    )
    with pytest.raises(Exception, match="injected"):
        write_table(df, s3_graph.root, "Person", options=opts, engine="jvm")
    assert Graph.open(s3_graph.root, so).snapshot().version == v0
    assert data() == before
    assert _staging_left(s3, s3_graph.root) == []


APP = str(Path(__file__).with_name("s3_secrets_app.py"))


def _run_app(root, tmp_path, mode, extra_env):
    """Run s3_secrets_app.py in a fresh Spark application, with no AWS_* variable but
    ``extra_env``'s; (its result, its event log's text)."""
    events = tmp_path / f"events-{mode}"
    events.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | extra_env
    p = subprocess.run(
        [sys.executable, APP, root, str(events), mode], env=env, capture_output=True, text=True, timeout=900
    )
    assert p.returncode == 0 and p.stdout.rstrip().endswith("DONE"), p.stdout[-3000:] + p.stderr[-3000:]
    log = "".join(f.read_text(errors="replace") for f in events.rglob("*") if f.is_file())
    assert "omnigraph node:Person" in log  # the event log holds the JVM scan's plan: it was looked at
    python_err = p.stdout.split("PYTHON PATH ERROR:")[1].split("JVM PATH ERROR:")[0]
    assert "[DANGLING_EDGE]" in python_err and "JVM PATH ERROR: [DANGLING_EDGE]" in p.stdout  # both refused
    return p, log


def _objects(s3, root):
    bucket = root[len("s3://") :].partition("/")[0]
    c = s3.client()
    return {k: c.get_object(Bucket=bucket, Key=k)["Body"].read() for k in s3.keys(bucket)}


@pytest.mark.slow
def test_option_credentials_never_appear_in_plans_event_log_logs_errors_or_objects(jvm, s3, s3_graph, tmp_path):
    """Credentials as storage.* options / storage_options, both paths, write and read, two
    refused loads: the secret key is in no plan string (explain), no event log line, no log
    line (this package's and Spark's, at INFO), no error message, and no object of the graph's
    bucket (sidecars, commit rows, journals, side files, data). Spark redacts the options whose
    key names a secret; the event log shows the redaction, which proves it saw the option."""
    p, log = _run_app(
        s3_graph.root, tmp_path, "options", {"OMNIGRAPH_TEST_STORAGE_OPTIONS": json.dumps(s3.storage_options())}
    )
    assert "*********(redacted)" in log
    for where, text in (("stdout: explain, rows, errors", p.stdout), ("stderr: logs", p.stderr), ("event log", log)):
        assert SECRET_KEY not in text, where
    for key, body in _objects(s3, s3_graph.root).items():
        assert SECRET_KEY.encode() not in body, key


@pytest.mark.slow
def test_environment_credentials_take_both_paths_and_never_appear(jvm, s3, s3_graph, tmp_path):
    """No storage options at all: the driver, the Python workers and the executor JVMs find the
    endpoint and credentials in their environment (AWS_*), both paths run (the app exits
    non-zero otherwise), and neither the key id nor the secret shows anywhere."""
    p, log = _run_app(s3_graph.root, tmp_path, "env", s3.env())
    for where, text in (("stdout: explain, rows, errors", p.stdout), ("stderr: logs", p.stderr), ("event log", log)):
        assert SECRET_KEY not in text and ACCESS_KEY not in text, where
    for key, body in _objects(s3, s3_graph.root).items():
        assert SECRET_KEY.encode() not in body, key
