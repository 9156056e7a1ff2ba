"""Spark Connect, for real: a local Spark Connect server (tests/connect_server.py) with the JVM
shim on its class path, driven by a client in its own Python process (tests/connect_client.py).

write_table / write_graph stage through the JVM sink and read_table / read_graph scan through
the JVM source with no py4j (the shim's probe, the hand-off file in the load's staging journal,
the parallelism from the server), and give the same rows as the same loads and reads on the
classic session; ``df.write.format("omnigraph")`` and ``spark.read.format("omnigraph")`` take the
JVM paths through the shim's provider (option engine=jvm, which only the provider can satisfy),
and ``load_jsonl`` (Python workers in the server) works through Connect too.
"""

from __future__ import annotations

import logging

import pytest

from ..connect_client import JVM_READ, JVM_STAGED, load_and_read, staging_left
from ..connect_server import run_client, serve
from ..shim import need_shim

#: one worker under pytest-xdist: the server is shared, and a test compares against the one SparkSession
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark")]


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """One Spark Connect server for the test session: local[2] on 127.0.0.1, the shim (when
    built) on its driver class path; stopped at the end of the session."""
    from omnigraph_spark.spark.jvm_read import shim_jars

    yield from serve(tmp_path_factory.mktemp("connect-server"), shim_jars())


def test_connect_takes_the_jvm_paths_and_matches_classic(
    spark, connect_server, tmp_path, fixtures_dir, test_schema_text, caplog
):
    need_shim(spark)
    from omnigraph_spark import Graph

    jsonl = str(fixtures_dir / "test.jsonl")
    remote = run_client(
        connect_server.url,
        "load_and_read",
        tmp_path,
        root=str(tmp_path / "connect-graph"),
        schema=str(fixtures_dir / "test.pg"),
        jsonl=jsonl,
    )
    assert remote["session"].startswith("pyspark.sql.connect")
    assert remote["shim_blocker"] is None
    assert remote["parallelism"] == 2  # local[2] on the server, from its plan of spark.range (no SparkContext)
    staged = [line for line in remote["log"] if JVM_STAGED in line]
    # write_table (Person), then write_graph (Person, Knows, WorksAt): every one in the JVM sink
    assert [line.split(" ")[1] for line in staged] == ["node:Person", "node:Person", "edge:Knows", "edge:WorksAt"]
    assert sum(JVM_READ in line for line in remote["log"]) == 5  # read_table + read_graph's four tables
    assert remote["staging_left"] == []  # hand-off files and journals removed by each load

    root = str(tmp_path / "classic-graph")
    Graph.init(root, test_schema_text)
    with caplog.at_level(logging.INFO, logger="omnigraph_spark"):
        local = load_and_read(spark, root, jsonl)
    assert sum(JVM_STAGED in r.getMessage() for r in caplog.records) == 4
    assert staging_left(root) == []
    assert remote["result"] == local
    people = {r[0]: r for r in local["read_table"]}
    assert set(people) == {"Alice", "Bob", "Charlie", "Diana", "Eve", "Frank", "Gina"}
    assert ["Initech", "Initech"] in local["format"]["Company"]  # (id, name): a keyed node's id is its key
    # the repeated key: refused with the same typed error on both, checked as Spark jobs of the
    # client's session on the server (the planner handed the work back; the provider ran it)
    assert remote["result"]["repeated_key"].startswith("KeyConflictError: [KEY_CONFLICT]")
    assert "'Hooli'" in remote["result"]["repeated_key"]
    server_log = connect_server.log_path.read_text(errors="replace")
    assert "of the commit's Spark work handed to the JVM" in server_log
    assert "distributed unique check of node:Company: failed" in server_log
    assert any({"Eve", "Gina", "2024-05-01"} <= set(map(str, row)) for row in local["format"]["Knows"])


def test_streams_through_connect_commit_every_row_once(connect_server, tmp_path, fixtures_dir):
    """``writeStream.format("omnigraph")`` and a ``GraphBatchWriter`` foreachBatch (with its
    ``query_id``, which a Connect client must give) through Spark Connect: each stream run twice
    from its checkpoint with a new input file in between; every row lands once, edges included,
    one graph commit per non-empty micro-batch."""
    remote = run_client(
        connect_server.url,
        "stream_and_read",
        tmp_path,
        root=str(tmp_path / "graph"),
        schema=str(fixtures_dir / "test.pg"),
        work=str(tmp_path / "work"),
        query_id="connect-events",
    )
    assert remote["session"].startswith("pyspark.sql.connect")
    assert remote["result"] == {
        "Company": ["Acme", "Globex", "Initech"],
        "Person": [["Ann", 30], ["Bo", 41], ["Cy", 25]],
        "Knows": [["Ann", "Bo"], ["Cy", "Ann"]],
    }
    assert len(remote["commits"]) == 1 + 4  # the init, then one commit per non-empty micro-batch
    assert remote["staging_left"] == []


def test_sql_catalog_through_connect(spark, connect_server, tmp_path, fixtures_dir):
    """``spark.sql`` from a Connect client: the catalog set at runtime, CREATE NAMESPACE, INSERT,
    SELECT with pushdown, DELETE cascading to edges, CALL optimize, a bad identifier's and other
    refusals' typed errors with their codes first on the first line, UPDATE, MERGE INTO and a
    refused UPDATE's KEY_CHANGE, and a session catalog table USING omnigraph (docs/sql.md)."""
    need_shim(spark)
    from omnigraph_spark import Graph

    root = tmp_path / "graphs"
    root.mkdir()
    remote = run_client(connect_server.url, "sql", tmp_path, root=str(root), schema=str(fixtures_dir / "test.pg"))
    assert remote["session"].startswith("pyspark.sql.connect")
    got = remote["result"]
    assert got["tables"] == ["Company", "Knows", "Person", "WorksAt"]
    assert got["older"] == [["Bo", 41]]
    assert got["after_delete"] == [["Ann"]]
    assert got["knows_after_delete"] == []  # the delete cascaded to Ann -> Bo
    assert "node:Person" in got["optimize"]
    assert got["bad_identifier"].startswith("[UNKNOWN_TYPE] ") and "'Persn'" in got["bad_identifier"]
    # every refusal's first line starts with the connector's code through Connect too
    assert {c: (line or "").startswith(f"[{c}] ") for c, line in got["first_lines"].items()} == dict.fromkeys(
        ("KEY_CONFLICT", "DANGLING_EDGE", "SQL_UNSUPPORTED", "GRAPH_NOT_FOUND", "OPTION_INVALID", "GRAPH_NOT_EMPTY"),
        True,
    ), got["first_lines"]
    assert got["session_table"] == [["Di", 26]]  # CREATE TABLE ... USING omnigraph, INSERT, SELECT
    assert got["after_merge"] == [["Ann", 50], ["Cy", 25]]  # UPDATE, then MERGE INTO
    assert got["key_change"].startswith("[KEY_CHANGE] ") and "'name'" in got["key_change"]
    # init, two INSERTs, the DELETE, the UPDATE, the MERGE and the session table's INSERT
    # (optimize found one fragment per table: nothing to compact; the refusals committed nothing)
    assert len(Graph.open(str(root / "social")).log()) == 1 + 6
